//! The sink clusters of this node and their queues: [`ReplService`].
//!
//! A sink is a name, some cluster addresses of its nodes (the rest are
//! discovered), a [`Filter`] and a [`DurableQueue`] under
//! `<data_dir>/repl/<name>/`. The configured sinks (`[repl]`) are the
//! starting point; `basalt admin repl sink add|remove|suspend|resume`
//! changes them at run time, and each change is kept in
//! `<data_dir>/repl/sinks.json` (an overlay by name: a sink spec, or
//! removed), so it survives a restart and a config that still lists a
//! removed sink does not bring it back. A suspended sink keeps queueing
//! (up to its limit) but delivers nothing until resumed.

use super::filter::Filter;
use super::peers::PeerSet;
use super::queue::{DurableQueue, QueueError, QueueLimits};
use crate::config::{ReplConfig, SinkConfig};
use crate::fsutil::atomic_write;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Source-side counters of one sink.
#[derive(Debug, Default)]
pub struct SenderStats {
    /// Entries the sink confirmed.
    pub sent: AtomicU64,
    /// Batches the sink (or the network) failed.
    pub errors: AtomicU64,
    /// References read at delivery.
    pub refs_fetched: AtomicU64,
    /// References whose key was gone at delivery (nothing to send).
    pub refs_missing: AtomicU64,
    /// Reaps sent.
    pub reaps: AtomicU64,
    /// Batches the sink confirmed (`sent / batches` is the mean batch).
    pub batches: AtomicU64,
}

/// One sink cluster; see the module docs.
pub struct Sink {
    /// Its spec (name, peers, filter, suspended).
    pub spec: RwLock<SinkConfig>,
    pub(crate) filter: RwLock<Filter>,
    /// Its queue.
    pub queue: DurableQueue,
    /// Wakes its sender.
    pub(crate) notify: tokio::sync::Notify,
    /// Its nodes and their back-off.
    pub(crate) peers: Mutex<PeerSet>,
    /// Counters.
    pub stats: SenderStats,
    /// Removed: its sender stops.
    pub(crate) removed: AtomicBool,
    /// Why it cannot be used (e.g. it is this cluster), if so.
    pub(crate) refused: Mutex<Option<String>>,
    /// Its sender runs.
    pub(crate) started: AtomicBool,
}

impl Sink {
    /// Its name.
    pub fn name(&self) -> String {
        self.spec.read().name.clone()
    }

    /// Queues these keys (storage bucket, key, ...) as references at
    /// requeue priority; the count accepted.
    pub fn requeue(&self, keys: Vec<crate::aae::KeyEntry>) -> u64 {
        let mut n = 0;
        for (bucket, key, _, _) in keys {
            let e = super::Entry {
                bucket,
                key,
                payload: super::Payload::Ref { clock: Vec::new() },
            };
            if self
                .queue
                .push(super::Priority::Requeue, e)
                .unwrap_or(false)
            {
                n += 1;
            }
        }
        self.notify.notify_one();
        n
    }

    /// Whether delivery is suspended.
    pub fn suspended(&self) -> bool {
        self.spec.read().suspended
    }
}

/// Errors opening or changing the sinks.
#[derive(Debug, thiserror::Error)]
pub enum SinksError {
    /// A queue did not open.
    #[error("replication queue {name}: {source}")]
    Queue {
        /// The sink.
        name: String,
        /// The error.
        #[source]
        source: QueueError,
    },
    /// `sinks.json` unreadable or unwritable.
    #[error("{path}: {error}")]
    State {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: String,
    },
    /// A bad request (unknown sink, bad spec...).
    #[error("{0}")]
    Invalid(String),
}

/// Replication state of a node: its sinks; see the module docs.
pub struct ReplService {
    dir: PathBuf,
    limits: QueueLimits,
    sinks: RwLock<BTreeMap<String, Arc<Sink>>>,
    overlay: Mutex<BTreeMap<String, Option<SinkConfig>>>,
    /// Wakes the supervisor that starts the senders of new sinks.
    pub(crate) added: tokio::sync::Notify,
    /// Some queue was not closed cleanly (the node was killed): entries
    /// that were only in memory are gone, a full-sync repairs them.
    pub unclean: AtomicBool,
    /// Objects up to this size are queued whole (`[repl]
    /// object_limit_bytes`).
    pub(crate) object_limit_bytes: u64,
}

impl ReplService {
    /// Opens the sinks of `config` and `<data_dir>/repl/sinks.json`.
    pub fn open(data_dir: &Path, config: &ReplConfig) -> Result<ReplService, SinksError> {
        let dir = data_dir.join("repl");
        std::fs::create_dir_all(&dir).map_err(|e| SinksError::State {
            path: dir.clone(),
            error: e.to_string(),
        })?;
        let overlay = load_overlay(&dir.join("sinks.json"))?;
        let service = ReplService {
            dir,
            limits: QueueLimits {
                memory_entries: config.queue_memory_entries,
                max_entries: config.queue_max_entries,
                write_through: config.queue_write_through,
                ..QueueLimits::default()
            },
            sinks: RwLock::new(BTreeMap::new()),
            overlay: Mutex::new(overlay.clone()),
            unclean: AtomicBool::new(false),
            added: tokio::sync::Notify::new(),
            object_limit_bytes: config.object_limit_bytes,
        };
        let mut specs: BTreeMap<String, SinkConfig> = config
            .all_sinks()
            .into_iter()
            .map(|s| (s.name.clone(), s))
            .collect();
        for (name, o) in overlay {
            match o {
                Some(spec) => specs.insert(name, spec),
                None => specs.remove(&name),
            };
        }
        for spec in specs.into_values() {
            service.open_sink(spec)?;
        }
        Ok(service)
    }

    fn open_sink(&self, spec: SinkConfig) -> Result<Arc<Sink>, SinksError> {
        let filter = Filter::parse(&spec.filter)
            .map_err(|e| SinksError::Invalid(format!("repl sink {}: {e}", spec.name)))?;
        let name = spec.name.clone();
        let qerr = |source| SinksError::Queue {
            name: name.clone(),
            source,
        };
        let (queue, report) =
            DurableQueue::open(&self.dir.join(&name), self.limits).map_err(qerr)?;
        if !report.clean {
            self.unclean.store(true, Ordering::Relaxed);
            tracing::warn!(sink = %name, "replication queue was not closed cleanly; entries only in memory were lost and the next full-sync repairs them");
        }
        if report.corrupt_skipped > 0 {
            tracing::warn!(sink = %name, skipped = report.corrupt_skipped, "corrupt replication queue records skipped");
        }
        let recovered: u64 = report.recovered.iter().sum();
        if recovered > 0 {
            tracing::info!(sink = %name, entries = recovered, "replication queue recovered");
        }
        let sink = Arc::new(Sink {
            peers: Mutex::new(PeerSet::new(&spec.peers)),
            spec: RwLock::new(spec),
            filter: RwLock::new(filter),
            queue,
            notify: tokio::sync::Notify::new(),
            stats: SenderStats::default(),
            removed: AtomicBool::new(false),
            refused: Mutex::new(None),
            started: AtomicBool::new(false),
        });
        self.sinks.write().insert(name, sink.clone());
        Ok(sink)
    }

    /// The sinks, by name.
    pub fn sinks(&self) -> Vec<Arc<Sink>> {
        self.sinks.read().values().cloned().collect()
    }

    /// One sink.
    pub fn sink(&self, name: &str) -> Option<Arc<Sink>> {
        self.sinks.read().get(name).cloned()
    }

    /// Whether any sink exists (the PUT path's fast check).
    pub fn active(&self) -> bool {
        !self.sinks.read().is_empty()
    }

    /// Adds a sink at run time (kept in `sinks.json`).
    pub fn add(&self, spec: SinkConfig) -> Result<Arc<Sink>, SinksError> {
        spec.validate().map_err(SinksError::Invalid)?;
        Filter::parse(&spec.filter)
            .map_err(|e| SinksError::Invalid(format!("repl sink {}: {e}", spec.name)))?;
        if self.sinks.read().contains_key(&spec.name) {
            return Err(SinksError::Invalid(format!(
                "a sink named {} exists already",
                spec.name
            )));
        }
        if self.sinks.read().len() >= crate::limits::REPL_MAX_SINKS {
            return Err(SinksError::Invalid(format!(
                "at most {} sinks",
                crate::limits::REPL_MAX_SINKS
            )));
        }
        self.remember(&spec.name, Some(spec.clone()))?;
        let sink = self.open_sink(spec)?;
        self.added.notify_one();
        Ok(sink)
    }

    /// Removes a sink: its sender stops and its queue is deleted.
    pub fn remove(&self, name: &str) -> Result<u64, SinksError> {
        let sink = self
            .sinks
            .write()
            .remove(name)
            .ok_or_else(|| unknown(name))?;
        self.remember(name, None)?;
        sink.removed.store(true, Ordering::Relaxed);
        sink.notify.notify_one();
        let dropped = sink.queue.clear().unwrap_or(0);
        let _ = sink.queue.close();
        let dir = self.dir.join(name);
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(SinksError::State {
                path: dir,
                error: e.to_string(),
            }),
            _ => Ok(dropped),
        }
    }

    /// Suspends or resumes delivery to a sink (kept in `sinks.json`).
    pub fn set_suspended(&self, name: &str, suspended: bool) -> Result<(), SinksError> {
        let sink = self.sink(name).ok_or_else(|| unknown(name))?;
        let spec = {
            let mut spec = sink.spec.write();
            spec.suspended = suspended;
            spec.clone()
        };
        self.remember(name, Some(spec))?;
        sink.notify.notify_one();
        Ok(())
    }

    fn remember(&self, name: &str, spec: Option<SinkConfig>) -> Result<(), SinksError> {
        let mut overlay = self.overlay.lock();
        overlay.insert(name.to_string(), spec);
        let path = self.dir.join("sinks.json");
        let text = crate::fsutil::encode_state(&*overlay).map_err(|e| SinksError::State {
            path: path.clone(),
            error: e.to_string(),
        })?;
        atomic_write(&path, &text).map_err(|e| SinksError::State {
            path,
            error: e.to_string(),
        })
    }

    /// Persists every queue (clean shutdown).
    pub fn close(&self) {
        for sink in self.sinks() {
            if let Err(e) = sink.queue.close() {
                tracing::error!(sink = %sink.name(), error = %e, "closing a replication queue");
            }
        }
    }
}

fn unknown(name: &str) -> SinksError {
    SinksError::Invalid(format!("no sink named {name}"))
}

fn load_overlay(path: &Path) -> Result<BTreeMap<String, Option<SinkConfig>>, SinksError> {
    match std::fs::read(path) {
        Ok(bytes) => crate::fsutil::decode_state(&bytes).map_err(|e| SinksError::State {
            path: path.to_path_buf(),
            error: format!("unreadable: {e}"),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(SinksError::State {
            path: path.to_path_buf(),
            error: e.to_string(),
        }),
    }
}

/// A sink's queue takes the keys of a `repl_keys` anti-entropy fold.
impl crate::aae::KeyQueue for Sink {
    fn requeue(&self, keys: Vec<crate::aae::KeyEntry>) -> u64 {
        Sink::requeue(self, keys)
    }
}

/// The sinks are the queues `repl_keys` folds name.
impl crate::aae::KeyQueues for ReplService {
    fn key_queue(&self, name: &str) -> Option<Arc<dyn crate::aae::KeyQueue>> {
        self.sink(name).map(|s| s as Arc<dyn crate::aae::KeyQueue>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> SinkConfig {
        SinkConfig {
            name: name.into(),
            peers: vec!["127.0.0.1:1".into()],
            ..SinkConfig::default()
        }
    }

    #[test]
    fn run_time_changes_survive_a_restart_and_override_the_config() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = ReplConfig {
            sink: vec![spec("a"), spec("b")],
            ..ReplConfig::default()
        };
        let names = |s: &ReplService| s.sinks().iter().map(|s| s.name()).collect::<Vec<_>>();
        {
            let s = ReplService::open(dir.path(), &config).expect("open");
            assert_eq!(names(&s), ["a", "b"]);
            s.remove("a").expect("remove");
            s.add(spec("c")).expect("add");
            s.set_suspended("b", true).expect("suspend");
            assert!(s.add(spec("c")).is_err(), "duplicate name");
            assert!(s.remove("zz").is_err());
            assert!(s
                .add(SinkConfig {
                    filter: "all".into(),
                    ..spec("d")
                })
                .is_err());
            s.close();
        }
        let s = ReplService::open(dir.path(), &config).expect("reopen");
        assert_eq!(names(&s), ["b", "c"]);
        assert!(s.sink("b").is_some_and(|b| b.suspended()));
        assert!(!dir.path().join("repl/a").exists(), "removed queue deleted");
    }
}
