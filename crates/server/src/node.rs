//! The node: opens the data directory (its name check, cluster state,
//! bucket props and types, the vnodes it owns or holds data for), owns the
//! [`Router`] and the background queue, and closes it all. Requests are in
//! [`crate::kv`], services in [`crate::services`], the APIs in
//! [`crate::api`].

use crate::bucket::props::PropsError;
use crate::bucket::store::PropsStore;
use crate::bucket::types::BucketTypes;
use crate::cluster::Cluster;
use crate::config::{Config, ConfigError};
use crate::handoff::HandoffService;
use crate::kv::Kv;
use crate::ring::Ring;
use crate::router::Router;
use crate::vnode::VnodeError;
use basalt_backend::BackendError;
use parking_lot::RwLockWriteGuard;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Failure to open a node.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A vnode's backend did not open.
    #[error("opening vnode {partition}: {source}")]
    Backend {
        /// The partition.
        partition: u32,
        /// The error.
        #[source]
        source: BackendError,
    },
    /// Creating directories or threads failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The bucket props file is unreadable.
    #[error(transparent)]
    Props(#[from] PropsError),
    /// The security state is unreadable.
    #[error(transparent)]
    Security(#[from] crate::security::LoadError),
    /// The TLS certificate or key is unusable.
    #[error(transparent)]
    Tls(#[from] crate::security::tls::TlsError),
    /// The replication sinks or queues did not open.
    #[error(transparent)]
    Repl(#[from] crate::repl::SinksError),
    /// The data directory's `FORMAT` names a format this build does not
    /// read (a newer Basalt wrote it); nothing was opened or changed.
    #[error("{0}")]
    DataFormat(String),
}

/// A sink peer that is this node's own cluster address is refused at
/// once (other nodes of this cluster are found by the sender's hello).
fn check_sinks_are_elsewhere(config: &Config) -> Result<(), ConfigError> {
    let own = [&config.cluster_listen, &config.advertise_cluster];
    for s in config.repl.all_sinks() {
        if let Some(p) = s.peers.iter().find(|p| own.contains(p)) {
            return Err(ConfigError(format!(
                "repl sink {}: {p} is this node's cluster address; a cluster cannot replicate to itself",
                s.name
            )));
        }
    }
    Ok(())
}

/// A node: the router (ring, cluster view, vnode table), bucket props and
/// types, operation counters and the replication queue. Requests run on it
/// (see [`crate::kv`]); it holds no request logic itself.
pub struct Node {
    /// The KV layer: router, props, types, config, counters. The node
    /// dereferences to it.
    pub(crate) kv: Arc<Kv>,
    /// Replication to other clusters: sinks, queues, full-sync.
    pub(crate) repl: Arc<crate::repl::Repl>,
    /// Membership: gossip, the claimant's changes, cluster views.
    pub(crate) gossip: Arc<crate::gossip::Gossip>,
    /// Handoff, over the router and the bucket props.
    pub(crate) handoff: Arc<HandoffService>,
    /// Anti-entropy: exchanges, tree rebuilds, fold queries.
    pub(crate) aae: Arc<crate::aae::Aae>,
    /// Users, grants and sources (cluster-wide, spread with the gossip).
    pub(crate) security: Arc<crate::security::Security>,
    /// TLS of the PB listener, when configured.
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
    /// Mutual TLS of the cluster port (`cluster_certfile` & co.).
    pub(crate) cluster_tls: Option<crate::security::tls::ClusterTls>,
    /// MapReduce (its JavaScript VM pools shared with the commit hooks).
    pub(crate) mapred: Arc<crate::mapred::MapRed>,
    /// The buckets' commit hooks (registered with the KV layer).
    pub(crate) hooks: Arc<crate::mapred::hooks::CommitHooks>,
}

pub use crate::kv::NodeStats;
pub use crate::limits::BACKGROUND_QUEUE;

impl std::ops::Deref for Node {
    type Target = Kv;
    fn deref(&self) -> &Kv {
        &self.kv
    }
}

impl Node {
    /// Opens the node: checks the data directory's format marker
    /// (`<data_dir>/FORMAT`, refused untouched when newer) and that it
    /// belongs to this node name (`<data_dir>/NODE`), loads the cluster state and opens the vnodes
    /// of the partitions it owns or still holds data for
    /// (`<data_dir>/vnodes/<partition>`).
    pub fn open(config: Config) -> Result<Node, OpenError> {
        config.validate()?;
        crate::fsutil::check_data_format(&config.data_dir).map_err(OpenError::DataFormat)?;
        let ring = Ring::new(config.ring_size)
            .ok_or_else(|| ConfigError(format!("bad ring_size {}", config.ring_size)))?;
        std::fs::create_dir_all(config.data_dir.join("vnodes"))?;
        check_node_name(&config)?;
        let cluster = Cluster::open(
            &config.node_name,
            config.ring_size,
            Some(config.data_dir.clone()),
            config.limits.max_frame_bytes,
        )
        .map_err(|e| ConfigError(e.0))?;
        let types = Arc::new(BucketTypes::open(Some(
            config.data_dir.join("bucket_types.json"),
        ))?);
        let props = PropsStore::open(
            Some(config.data_dir.join("bucket_props.json")),
            types.clone(),
        )?;
        let config = Arc::new(config);
        let props = Arc::new(props);
        let n_val_of: crate::vnode::NValOf = {
            let props = props.clone();
            Arc::new(move |bucket: &[u8]| props.get(bucket).n_val)
        };
        let router = Router::new(config.clone(), ring, cluster, n_val_of);
        let gossip_now = Arc::new(Notify::new());
        let handoff = Arc::new(HandoffService::new(
            router.clone(),
            props.clone(),
            gossip_now.clone(),
        ));
        check_sinks_are_elsewhere(&config)?;
        let repl = Arc::new(crate::repl::ReplService::open(
            &config.data_dir,
            &config.repl,
        )?);
        let security = Arc::new(crate::security::Security::open(Some(
            config.data_dir.join("security.json"),
        ))?);
        let tls = match (config.tls_certfile.as_str(), config.tls_keyfile.as_str()) {
            ("", _) | (_, "") => None,
            (c, k) => Some(crate::security::tls::server_config(
                std::path::Path::new(c),
                std::path::Path::new(k),
                match config.tls_cacertfile.as_str() {
                    "" => None,
                    ca => Some(std::path::Path::new(ca)),
                },
            )?),
        };
        let cluster_tls = match config.cluster_certfile.as_str() {
            "" => None,
            cert => Some(crate::security::tls::ClusterTls::load(
                std::path::Path::new(cert),
                std::path::Path::new(&config.cluster_keyfile),
                std::path::Path::new(&config.cluster_cacertfile),
            )?),
        };
        router
            .cluster
            .peers
            .set_tls(cluster_tls.as_ref().map(|t| t.client.clone()));
        let repl_peers = crate::cluster::transport::Peers::new(config.limits.max_frame_bytes);
        if !config.repl.certfile.is_empty() {
            repl_peers.set_tls(Some(crate::security::tls::client_config(
                Some((
                    std::path::Path::new(&config.repl.certfile),
                    std::path::Path::new(&config.repl.keyfile),
                )),
                std::path::Path::new(&config.repl.cacertfile),
            )?));
        }
        let js = Arc::new(crate::mapred::js::JsPools::new(&config.mapred).map_err(ConfigError)?);
        let hooks = Arc::new(crate::mapred::hooks::CommitHooks::new(
            &config.mapred,
            js.clone(),
        ));
        let kv = Kv::new(config, router, props, types);
        kv.observe(repl.clone());
        kv.observe(hooks.clone());
        kv.set_precommit(hooks.clone());
        kv.set_held_copies(handoff.clone());
        let aae = Arc::new(crate::aae::Aae::new(kv.clone()));
        let mapred = Arc::new(crate::mapred::MapRed::new(kv.clone(), js));
        let gossip = Arc::new(crate::gossip::Gossip::new(
            kv.clone(),
            security.clone(),
            handoff.clone(),
            gossip_now,
        ));
        aae.set_key_queues(repl.clone());
        let repl = Arc::new(crate::repl::Repl::new(
            kv.clone(),
            repl,
            repl_peers,
            aae.clone(),
            gossip.clone(),
        ));
        let node = Node {
            kv,
            repl,
            gossip,
            handoff,
            aae,
            security,
            tls,
            cluster_tls,
            mapred,
            hooks,
        };
        let router = &node.router;
        let mut open: BTreeSet<u32> = router
            .cluster
            .with_state(|s| s.owned_by(&node.config.node_name))
            .into_iter()
            .collect();
        for e in std::fs::read_dir(node.config.data_dir.join("vnodes"))? {
            if let Some(p) = e?.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                if p < router.ring.size() {
                    open.insert(p);
                }
            }
        }
        for p in open {
            let v = router.open_vnode(p).map_err(|e| match e {
                VnodeError::Backend(source) => OpenError::Backend {
                    partition: p,
                    source,
                },
                other => OpenError::Io(std::io::Error::other(other.to_string())),
            });
            match v {
                Ok(v) => {
                    router.vnodes.write().insert(p, Arc::new(v));
                }
                Err(e) => {
                    // The vnodes opened so far shut down cleanly (their
                    // status files and trees as a clean stop leaves them).
                    node.close();
                    return Err(e);
                }
            }
        }
        crate::fsutil::write_data_format(&node.config.data_dir)?;
        tracing::info!(ring_size = router.ring.size(), vnodes = router.vnodes.read().len(), backend = %node.config.backend, data_dir = %node.config.data_dir.display(), "vnodes open");
        Ok(node)
    }

    /// The cluster view.
    pub fn cluster(&self) -> &Cluster {
        &self.router.cluster
    }

    /// Starts the router's replica calls and the KV layer's background
    /// queue (read repair); started once by the server.
    pub fn start_background(self: &Arc<Self>) {
        self.router.spawn_calls();
        self.kv.start_background();
    }

    /// Anti-entropy.
    pub fn aae(&self) -> &Arc<crate::aae::Aae> {
        &self.aae
    }

    /// MapReduce.
    pub fn mapred(&self) -> &Arc<crate::mapred::MapRed> {
        &self.mapred
    }

    /// Replication.
    pub fn repl(&self) -> &Arc<crate::repl::Repl> {
        &self.repl
    }

    /// Gossip and cluster membership changes.
    pub fn gossip(&self) -> &Arc<crate::gossip::Gossip> {
        &self.gossip
    }

    /// The KV layer the request FSMs run on.
    pub fn kv(&self) -> &Arc<Kv> {
        &self.kv
    }

    /// Jobs waiting in each local vnode's queue, by partition.
    pub fn vnode_queue_lengths(&self) -> Vec<usize> {
        self.router
            .vnodes
            .read()
            .values()
            .map(|v| v.queue_len())
            .collect()
    }

    /// Bytes of the objects this node's replica write calls in flight
    /// carry (`limits.replica_writes_in_flight_mb` bounds them).
    pub fn replica_write_bytes_in_flight(&self) -> u64 {
        self.router.write_bytes_in_flight()
    }

    /// The cluster's security state and this node's login back-off.
    pub fn security(&self) -> &crate::security::Security {
        &self.security
    }

    /// Holds every vnode worker before its next job while the guard lives
    /// (for overload tests and maintenance).
    pub fn pause_vnodes(&self) -> RwLockWriteGuard<'_, ()> {
        self.router.gate.write()
    }

    /// Waits, at most `limit`, for the replica calls coordinators left
    /// running at their quorum; the number still running (see
    /// [`crate::limits::SHUTDOWN_DRAIN`]).
    pub async fn drain_calls(&self, limit: Duration) -> usize {
        self.router.drain_calls(limit).await
    }

    /// Stops every vnode (queued jobs finish) and closes the backends.
    pub fn close(&self) {
        self.repl.repl.close();
        self.router.close();
    }

    /// Each local vnode's backend statistics, by partition (a vnode whose
    /// queue is full or that does not answer in time is left out).
    pub async fn backend_stats(&self) -> Vec<(u32, basalt_backend::BackendStats)> {
        let local = self.router.local_vnodes();
        let mut out = Vec::new();
        for (p, v) in local {
            let Ok(pending) = v.submit(|st| Ok(st.backend.stats()?)) else {
                continue;
            };
            if let Ok(s) = pending.wait(self.timeout()).await {
                out.push((p, s));
            }
        }
        out
    }
}

/// Refuses a data directory written by a node of another name: the vnodes'
/// clocks and the cluster state belong to the name in `<data_dir>/NODE`.
fn check_node_name(config: &Config) -> Result<(), OpenError> {
    let path = config.data_dir.join("NODE");
    match std::fs::read_to_string(&path) {
        Ok(name) if name.trim() == config.node_name => Ok(()),
        Ok(name) => Err(OpenError::Config(ConfigError(format!(
            "data directory {} belongs to node {:?}, not {:?}; start it with --node-name {} or use another --data-dir",
            config.data_dir.display(),
            name.trim(),
            config.node_name,
            name.trim()
        )))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            crate::fsutil::atomic_write(&path, format!("{}\n", config.node_name).as_bytes())?;
            Ok(())
        }
        Err(e) => Err(OpenError::Io(e)),
    }
}
