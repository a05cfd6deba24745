//! `basalt admin backup DIR` and `basalt admin restore DIR`: a whole
//! cluster to a directory and back, onto this cluster or another one with
//! the same ring size (any node count).
//!
//! **Backup**: the node at `--node` gives the cluster state (ring,
//! members) and the bucket metadata (types, props, security); then each
//! partition's owner streams that vnode's objects from one snapshot of its
//! backend (consistent per vnode; the partitions' snapshots are taken one
//! after another, so the backup is not one cluster-wide instant), paced
//! to `--max-mbps` (default [`DEFAULT_MBPS`] MB/s) by the node. Each
//! partition goes to its own checksummed file; `manifest.json`, with every
//! file's size, crc32c and counts, is written last: a directory without it
//! is not a backup. Formats: [`crate::backup_file`], docs/formats.md.
//!
//! **Restore**: reads and checks the manifest and every file whole (every
//! record's and file's checksum) first, then the target cluster: the same
//! ring size, no pending transfers or staged changes, every member
//! reachable and — unless `--force` — no member holding any object. Only
//! then does it write: the bucket metadata to every member (merged as
//! gossip merges it: newer entries win), then each partition's objects to
//! the partition's owner in the target cluster, which merges them as a
//! handoff batch (siblings, vector clocks, tombstones and 2i terms as they
//! were), paced to `--max-mbps` by this client. Each object was backed up
//! once per replica, so every replica is restored.

use crate::admin_client::AdminNode;
use crate::backup_file::{self as bf, FileEntry, Manifest, PartitionReader, PartitionWriter};
use anyhow::{bail, Context};
use basalt_server::cluster::{decode_body, encode_body, ClusterState, Meta};
use basalt_server::server::backup::{BackupObject, BackupReq, BackupResp};
use basalt_server::vnode::request::WireObject;
use riak_pb::code::basalt::{BACKUP_REQ, BACKUP_RESP};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The default pace of both commands, MB/s (10^6 bytes of keys, metadata
/// and values per second): a node's disk and network keep most of their
/// capacity for clients.
pub(crate) const DEFAULT_MBPS: f64 = 50.0;
/// The largest reply frame accepted while backing up: one fold batch
/// (4 MiB) or one object alone, under the cluster port's 64 MiB frames.
const MAX_FRAME: usize = 65 << 20;
/// Objects per restore request at most (also capped by
/// [`RESTORE_BATCH_BYTES`]; one larger object goes alone).
const RESTORE_BATCH: usize = 256;
/// Bytes per restore request at most, before the object that passes it.
const RESTORE_BATCH_BYTES: usize = 4 << 20;
/// How long one restore request (a batch merged by a vnode) may take.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(120);

/// Arguments of `basalt admin backup`.
#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// The directory to write (created; it must not exist or be empty).
    dir: PathBuf,
    /// Pace in MB/s of keys, metadata and values read (0: unpaced).
    #[arg(long, default_value_t = DEFAULT_MBPS)]
    max_mbps: f64,
}

/// Arguments of `basalt admin restore`.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// A directory `basalt admin backup` wrote.
    dir: PathBuf,
    /// Pace in MB/s of keys, metadata and values sent (0: unpaced).
    #[arg(long, default_value_t = DEFAULT_MBPS)]
    max_mbps: f64,
    /// Restore into a cluster that already holds objects (merged with
    /// them as replicas merge: vector clocks decide, siblings may appear).
    #[arg(long)]
    force: bool,
}

/// What a command did, for its last line or `--json`.
#[derive(serde::Serialize)]
struct Summary {
    dir: String,
    ring_size: u32,
    partitions: usize,
    objects: u64,
    data_bytes: u64,
    elapsed_secs: f64,
    mb_per_sec: f64,
    objects_per_sec: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    security_restored: Option<bool>,
}

impl Summary {
    fn new(
        dir: &Path,
        ring_size: u32,
        partitions: usize,
        objects: u64,
        bytes: u64,
        t: Duration,
    ) -> Self {
        let secs = t.as_secs_f64().max(1e-9);
        Summary {
            dir: dir.display().to_string(),
            ring_size,
            partitions,
            objects,
            data_bytes: bytes,
            elapsed_secs: t.as_secs_f64(),
            mb_per_sec: bytes as f64 / 1e6 / secs,
            objects_per_sec: objects as f64 / secs,
            security_restored: None,
        }
    }

    fn print(&self, verb: &str, json: bool) -> anyhow::Result<()> {
        if json {
            println!("{}", serde_json::to_string(self)?);
        } else {
            println!(
                "{verb} {} objects ({:.1} MB) of {} partitions in {:.1} s ({:.1} MB/s, {:.0} objects/s): {}",
                self.objects,
                self.data_bytes as f64 / 1e6,
                self.partitions,
                self.elapsed_secs,
                self.mb_per_sec,
                self.objects_per_sec,
                self.dir
            );
        }
        Ok(())
    }
}

/// One request and its single reply on a kept connection.
fn call(c: &mut riak_pb::sync::Client, node: &str, req: &BackupReq) -> anyhow::Result<BackupResp> {
    let body = encode_body(req).map_err(anyhow::Error::msg)?;
    c.send(BACKUP_REQ, &body)
        .with_context(|| format!("sending to {node}"))?;
    recv(c, node)
}

/// One reply frame.
fn recv(c: &mut riak_pb::sync::Client, node: &str) -> anyhow::Result<BackupResp> {
    match c.recv() {
        Ok((BACKUP_RESP, body)) => decode_body(&body).map_err(anyhow::Error::msg),
        Ok((code, _)) => bail!("{node} answered code {code}, not a backup reply"),
        Err(riak_pb::Error::Riak { errmsg, .. }) if errmsg.starts_with("Unknown message code") => {
            bail!("{node} does not serve backups (an older node, or not a cluster port)")
        }
        Err(riak_pb::Error::Riak { errmsg, .. }) => bail!("{node}: {errmsg}"),
        Err(e) => Err(e).with_context(|| format!("no valid reply from {node}")),
    }
}

/// The cluster state and metadata, from `node`.
fn info(node: &AdminNode) -> anyhow::Result<(String, ClusterState, Meta)> {
    let mut c = node.connect_with_max(MAX_FRAME)?;
    match call(&mut c, node.addr(), &BackupReq::Info)? {
        BackupResp::Info { node, state, meta } => Ok((node, *state, meta)),
        other => bail!("unexpected reply {other:?}"),
    }
}

/// The cluster address of member `name` (`--node` for the node asked).
fn member_addr(
    state: &ClusterState,
    name: &str,
    asked: &str,
    asked_addr: &str,
) -> anyhow::Result<String> {
    if name == asked {
        return Ok(asked_addr.to_string());
    }
    match state.members.get(name) {
        Some(m) if !m.cluster.is_empty() => Ok(m.cluster.clone()),
        _ => bail!("no cluster address known for member {name}"),
    }
}

fn progress(len: u64, json: bool, what: &str) -> indicatif::ProgressBar {
    let bar = if json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(len)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} partitions, {msg} ({elapsed})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_prefix(what.to_string());
    bar
}

fn bytes_per_sec(mbps: f64) -> anyhow::Result<u64> {
    if !(mbps.is_finite() && mbps >= 0.0) {
        bail!("--max-mbps must be a number ≥ 0 (0: unpaced)");
    }
    Ok((mbps * 1e6) as u64)
}

/// Runs `basalt admin backup DIR`.
pub(crate) fn backup(
    node: &AdminNode,
    args: &BackupArgs,
    json: bool,
) -> anyhow::Result<crate::Outcome> {
    let rate = bytes_per_sec(args.max_mbps)?;
    let dir = &args.dir;
    match std::fs::read_dir(dir) {
        Ok(mut d) => {
            if d.next().is_some() {
                bail!(
                    "{} is not empty: a backup goes into a new or empty directory",
                    dir.display()
                );
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    }
    let started = Instant::now();
    let (asked, state, meta) = info(node)?;
    if !state.next.is_empty() {
        eprintln!(
            "note: {} ownership transfers are pending; each partition is read from its current owner",
            state.next.len()
        );
    }
    let bar = progress(u64::from(state.ring_size), json, "backup");
    let mut conns: std::collections::BTreeMap<String, riak_pb::sync::Client> = Default::default();
    let (mut objects, mut bytes) = (0u64, 0u64);
    let mut files = Vec::new();
    for p in 0..state.ring_size {
        let owner = state.owner(p).to_string();
        let addr = member_addr(&state, &owner, &asked, node.addr())?;
        let c = match conns.entry(owner.clone()) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(
                node.at(&addr)
                    .connect_with_max(MAX_FRAME)
                    .with_context(|| format!("partition {p}'s owner {owner}"))?,
            ),
        };
        let mut w = PartitionWriter::create(dir, state.ring_size, p)?;
        let req = BackupReq::Fold {
            partition: p,
            bytes_per_sec: rate,
        };
        let body = encode_body(&req).map_err(anyhow::Error::msg)?;
        c.send(BACKUP_REQ, &body)
            .with_context(|| format!("asking {owner} for partition {p}"))?;
        loop {
            match recv(c, &addr).with_context(|| format!("partition {p} from {owner}"))? {
                BackupResp::Batch(batch) => {
                    for (b, k, o) in &batch {
                        w.push(b, k, &o.meta, &o.value)?;
                    }
                }
                BackupResp::Done { objects: n, .. } => {
                    let e = w.finish()?;
                    if e.objects != n {
                        bail!(
                            "partition {p}: {owner} sent {} objects, said {n}",
                            e.objects
                        );
                    }
                    objects += e.objects;
                    bytes += e.data_bytes;
                    files.push(e);
                    break;
                }
                other => bail!("partition {p}: unexpected reply {other:?}"),
            }
        }
        bar.inc(1);
        bar.set_message(format!("{objects} objects, {:.1} MB", bytes as f64 / 1e6));
    }
    bar.finish_and_clear();
    let ring = serde_json::to_vec_pretty(&state)?;
    let metadata = vec![
        bf::write_meta_file(dir, "ring.json", &ring)?,
        bf::write_meta_file(dir, "types.json", meta.types.as_bytes())?,
        bf::write_meta_file(dir, "props.json", meta.props.as_bytes())?,
        bf::write_meta_file(dir, "security.json", meta.security.as_bytes())?,
    ];
    let manifest = Manifest {
        format: bf::FORMAT.into(),
        version: bf::VERSION,
        created_unix: basalt_engine::clock::now_secs(),
        created_by: format!("basalt {}", env!("CARGO_PKG_VERSION")),
        cluster_id: state.cluster_id.clone(),
        ring_size: state.ring_size,
        nodes: state.members.keys().cloned().collect(),
        objects,
        data_bytes: bytes,
        partitions: files,
        metadata,
    };
    manifest.write(dir)?;
    sync_dir(dir)?;
    Summary::new(
        dir,
        state.ring_size,
        manifest.partitions.len(),
        objects,
        bytes,
        started.elapsed(),
    )
    .print("backed up", json)?;
    Ok(crate::Outcome::Done)
}

fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))
}

/// Checks the manifest and every file of the backup in `dir` whole.
fn verify(dir: &Path, json: bool) -> anyhow::Result<(Manifest, Meta)> {
    let m = Manifest::read(dir)?;
    let meta_file = |name: &str| -> anyhow::Result<String> {
        let e = m
            .metadata
            .iter()
            .find(|e| e.name == name)
            .with_context(|| format!("the manifest lists no {name}"))?;
        String::from_utf8(bf::read_meta_file(dir, e)?)
            .with_context(|| format!("{name} is not UTF-8"))
    };
    let meta = Meta {
        types: meta_file("types.json")?,
        props: meta_file("props.json")?,
        security: meta_file("security.json")?,
    };
    meta_file("ring.json")?;
    let mut seen: Vec<u32> = m.partitions.iter().filter_map(|e| e.partition).collect();
    seen.sort_unstable();
    if seen != (0..m.ring_size).collect::<Vec<u32>>() {
        bail!(
            "the manifest does not list exactly one file per partition of a ring of {}",
            m.ring_size
        );
    }
    let bar = progress(m.partitions.len() as u64, json, "verify");
    for e in &m.partitions {
        bf::verify_partition(dir, e, m.ring_size)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((m, meta))
}

/// Runs `basalt admin restore DIR`.
pub(crate) fn restore(
    node: &AdminNode,
    args: &RestoreArgs,
    json: bool,
) -> anyhow::Result<crate::Outcome> {
    let rate = bytes_per_sec(args.max_mbps)?;
    let dir = &args.dir;
    let started = Instant::now();
    // 1. The backup, whole, before anything is written.
    let (m, meta) = verify(dir, json)?;
    // 2. The target cluster.
    let (asked, state, _) = info(node)?;
    if state.ring_size != m.ring_size {
        bail!(
            "the backup's ring size is {}, the cluster's {}: a restore needs the same ring size (nothing was written)",
            m.ring_size,
            state.ring_size
        );
    }
    if !state.next.is_empty() || !state.staged.is_empty() {
        bail!(
            "the cluster has {} pending transfers and {} staged changes: restore once `basalt admin ringready` is TRUE and nothing is staged (nothing was written)",
            state.next.len(),
            state.staged.len()
        );
    }
    let mut members: Vec<(String, AdminNode)> = Vec::new();
    for name in state.members.keys() {
        let addr = member_addr(&state, name, &asked, node.addr())?;
        members.push((name.clone(), node.at(&addr).with_timeout(RESTORE_TIMEOUT)));
    }
    let mut conns = std::collections::BTreeMap::new();
    for (name, n) in &members {
        let mut c = n
            .connect_with_max(MAX_FRAME)
            .with_context(|| format!("member {name} (nothing was written)"))?;
        match call(&mut c, n.addr(), &BackupReq::Occupied)? {
            BackupResp::Occupied(held) if held.is_empty() || args.force => {}
            BackupResp::Occupied(held) => bail!(
                "member {name} holds objects in {} partitions: restore into an empty cluster, or pass --force to merge (nothing was written)",
                held.len()
            ),
            other => bail!("unexpected reply {other:?}"),
        }
        conns.insert(name.clone(), c);
    }
    // 3. Bucket types, props and security, on every member.
    for (name, n) in &members {
        let c = conns.get_mut(name).context("a member's connection")?;
        match call(c, n.addr(), &BackupReq::Meta(meta.clone()))? {
            BackupResp::Ok => {}
            other => bail!("unexpected reply {other:?}"),
        }
    }
    // 4. Each partition's objects to its owner.
    let bar = progress(m.partitions.len() as u64, json, "restore");
    let (mut objects, mut bytes) = (0u64, 0u64);
    for e in &m.partitions {
        let Some(p) = e.partition else { continue };
        let owner = state.owner(p).to_string();
        let addr = member_addr(&state, &owner, &asked, node.addr())?;
        let c = conns
            .get_mut(&owner)
            .with_context(|| format!("owner {owner} of partition {p}"))?;
        let mut send = |batch: Vec<BackupObject>| -> anyhow::Result<()> {
            let n = batch.len() as u64;
            let req = BackupReq::Restore {
                ring_size: m.ring_size,
                partition: p,
                objects: batch,
            };
            match call(c, &addr, &req).with_context(|| format!("partition {p} on {owner}"))? {
                BackupResp::Restored(k) if k == n => Ok(()),
                other => bail!("partition {p} on {owner}: unexpected reply {other:?}"),
            }
        };
        restore_partition(
            dir,
            e,
            m.ring_size,
            rate,
            started,
            &mut objects,
            &mut bytes,
            &mut send,
        )?;
        bar.inc(1);
        bar.set_message(format!("{objects} objects, {:.1} MB", bytes as f64 / 1e6));
    }
    bar.finish_and_clear();
    let (_, _, now) = info(node)?;
    let mut s = Summary::new(
        dir,
        m.ring_size,
        m.partitions.len(),
        objects,
        bytes,
        started.elapsed(),
    );
    s.security_restored = Some(meta.security.is_empty() || now.security == meta.security);
    if s.security_restored == Some(false) && !json {
        eprintln!("note: the cluster kept its own security state (newer than the backup's)");
    }
    s.print("restored", json)?;
    Ok(crate::Outcome::Done)
}

/// Sends one partition file's objects in batches through `send`, paced
/// to `rate` bytes per second since `started` (with `bytes` sent before).
#[allow(clippy::too_many_arguments)]
fn restore_partition(
    dir: &Path,
    e: &FileEntry,
    ring_size: u32,
    rate: u64,
    started: Instant,
    objects: &mut u64,
    bytes: &mut u64,
    send: &mut dyn FnMut(Vec<BackupObject>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut r = PartitionReader::open(dir, e, ring_size)?;
    let mut batch: Vec<BackupObject> = Vec::new();
    let mut batch_bytes = 0usize;
    let mut flush = |batch: Vec<BackupObject>, bytes: u64| -> anyhow::Result<()> {
        if rate > 0 {
            let due = Duration::from_secs_f64(bytes as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        send(batch)
    };
    while let Some(rec) = r.next_record()? {
        let n = rec.data_bytes();
        batch_bytes += n as usize;
        *objects += 1;
        *bytes += n;
        batch.push((
            rec.bucket,
            rec.key,
            WireObject {
                meta: rec.meta,
                value: rec.value,
            },
        ));
        if batch.len() >= RESTORE_BATCH || batch_bytes >= RESTORE_BATCH_BYTES {
            batch_bytes = 0;
            flush(std::mem::take(&mut batch), *bytes)?;
        }
    }
    if !batch.is_empty() {
        flush(batch, *bytes)?;
    }
    r.finish()
}
