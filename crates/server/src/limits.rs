//! Every fixed limit of the server in one place (the configurable ones are
//! in [`crate::config::Limits`]): batch and frame sizes, queue lengths,
//! intervals and timeouts. Each has its reason beside it; the assertions
//! below keep them consistent. ARCHITECTURE.md lists them with the
//! configurable limits.

use std::time::Duration;

// Streaming replies to clients.

/// Frames of a streamed reply queued between the request's handler and the
/// connection's socket writer; when the client reads slowly the handler
/// waits (back-pressure), so a listing never builds all its frames in memory.
pub const STREAM_QUEUE_FRAMES: usize = 8;
/// Keys per `RpbListKeysResp` frame at most (a vnode's batch is split so a
/// frame stays far below clients' frame limits).
pub const LIST_KEYS_FRAME_KEYS: usize = 1000;
/// Objects per `RpbCSBucketResp` frame at most.
pub const CS_BUCKET_FRAME_OBJECTS: usize = 100;
/// Results per `RpbIndexResp` frame of a streamed 2i query.
pub const INDEX_STREAM_CHUNK: usize = 100;

/// Keys a vnode scans per list-keys job (ordered backends).
pub const LIST_KEYS_BATCH: u32 = 1000;

/// Objects each covering vnode reads per round of a CS bucket fold.
pub const CS_FOLD_BATCH: usize = 100;

/// A handoff batch stops once its values and metadata pass this size.
pub const FOLD_BATCH_BYTES: usize = 4 << 20;

/// How long a shutdown waits, once the listeners are closed and their
/// requests answered, for the replica calls coordinators started as tasks
/// of their own (a PUT answers at its quorum; its last replica write may
/// still be on its way to a vnode) before the vnodes close. A call still
/// running after this is dropped: that replica misses the write and
/// anti-entropy repairs it; the acknowledged copies are kept.
pub const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

/// Each listener's accept queue (connections the kernel completed that the
/// node has not accepted yet); more wait in the client's SYN retries.
pub const LISTEN_BACKLOG: u32 = 1024;

/// How often a node looks for vnodes to hand off.
pub const HANDOFF_INTERVAL: Duration = Duration::from_millis(1000);

/// Reaps (delete_mode) waiting at once for their delay or a retry; beyond,
/// a delete's tombstone is kept (`reaps_dropped_total`).
pub const MAX_PENDING_REAPS: usize = 100_000;
/// Attempts of one reap that keeps being put off (a copy of the key's
/// partitions held for another owner, a node down), after which the
/// tombstone is kept.
pub const REAP_ATTEMPTS: u32 = 8;
/// The first wait before a reap put off is tried again; it doubles.
pub const REAP_RETRY_MIN: Duration = Duration::from_millis(1000);
/// The longest wait between two attempts of one reap (8 attempts span
/// about 3 minutes after the delete_mode delay).
pub const REAP_RETRY_MAX: Duration = Duration::from_secs(60);

/// The most handoffs a node may run at once (`transfer_limit`): each
/// folds one vnode and holds one batch in memory.
pub const MAX_TRANSFER_LIMIT: usize = 16;

/// Objects per handoff batch (also capped by bytes in the vnode's fold).
pub const HANDOFF_BATCH: u32 = 256;

/// Objects per frame of a cluster backup's partition stream (also capped
/// by [`FOLD_BATCH_BYTES`]; one larger object goes alone).
pub const BACKUP_BATCH: usize = 512;
/// Batches a backup's snapshot fold keeps ahead of the connection that
/// sends them (back-pressure: a slow client slows the fold).
pub const BACKUP_QUEUE_BATCHES: usize = 2;
/// Objects a restore request carries at most (the client's batches are
/// smaller; a larger request is refused before anything is written).
pub const RESTORE_BATCH_MAX: usize = 4096;

/// Dirty branches whose segments an exchange fetches (the rest wait for
/// the next exchange).
pub const AAE_MAX_BRANCHES: usize = 64;

/// Dirty segments examined per exchange loop (the rest wait for a
/// follow-up loop or the next exchange).
pub const MAX_DIRTY_SEGMENTS: usize = 256;

// Anti-entropy fold queries (`aae::fold`).

/// Keys a fold query returns at most (key-clock lists, `find_keys`,
/// `find_tombs`); a query matching more is refused with an error asking to
/// narrow it (key range, segment filter, modified range), and no covering
/// vnode collects more than this + 1.
pub const AAE_FOLD_MAX_RESULTS: usize = 10_000;

/// Segments a segment filter may name (`fetch_clocks_nval` and the range
/// queries' filters).
pub const AAE_FOLD_MAX_SEGMENTS: usize = 4096;

/// Branches a `merge_branch_nval` may ask for.
pub const AAE_FOLD_MAX_BRANCHES: usize = 256;

/// Keys a covering vnode folds per job of a range query (ordered
/// backends; the coordinator asks for the next round after the last key),
/// so a query over a long range never holds a vnode's worker for long.
pub const AAE_FOLD_SCAN_BATCH: u32 = 10_000;

/// Keys each covering vnode returns per round of `reap_tombs` and
/// `erase_keys` (the coordinator reaps or deletes them, then asks for the
/// next round after the last key).
pub const AAE_FOLD_CHANGE_BATCH: u32 = 1000;

/// Reaps or deletes of `reap_tombs` / `erase_keys` in flight at once.
pub const AAE_FOLD_CHANGE_PARALLEL: usize = 16;

/// Keys one step of a tree rebuild sweeps (one job on the vnode's worker:
/// requests to the vnode wait at most one step).
pub const AAE_REBUILD_STEP_KEYS: usize = 2048;

/// How often the rebuild scheduler looks for vnodes whose trees are due
/// (or missing) when nothing wakes it.
pub const AAE_REBUILD_POLL: Duration = Duration::from_secs(5);

/// Tree rebuilds running at once per node.
pub const AAE_REBUILDS_AT_ONCE: usize = 1;
/// A follow-up loop scoped to a bucket or a last-modified range lists only
/// part of each vnode, so it examines this many times more segments than
/// the first loop (Riak's `tictacaae_rangeboost`).
pub const AAE_RANGE_BOOST: usize = 2;

/// Shortest pause between two scheduled exchanges of a node: a pass over
/// its exchange queue takes `aae_interval_secs` or, with more exchanges
/// than fit, this long per exchange.
pub const AAE_MIN_TICK: Duration = Duration::from_millis(100);

/// A last-modified range of a scoped follow-up loop is widened by this
/// much below when it prefilters on the time a replica stored its copy
/// (which follows the object's own time by the replication delay, give or
/// take the clock skew between nodes).
pub const AAE_RANGE_CLOCK_SLACK_US: u64 = 60_000_000;

/// Objects per replication batch (one push to a sink node).
pub const REPL_BATCH: usize = 100;

/// Bytes per replication batch (at least one entry is always sent).
pub const REPL_BATCH_BYTES: usize = 4 << 20;

/// Batches a node's sender keeps in flight to one sink cluster (each to
/// the next sink node; a key's entries still go in order).
pub const REPL_SEND_PARALLEL: usize = 4;

/// Replicated keys a sink node applies at once (entries of one key are
/// applied in order).
pub const REPL_APPLY_PARALLEL: usize = 16;

/// First back-off of a sink node after a failed push.
pub const REPL_FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Longest back-off of a sink node.
pub const REPL_MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How often a source asks its sink clusters for their members.
pub const REPL_DISCOVERY_INTERVAL: Duration = Duration::from_secs(60);

/// How often a sender flushes its queue's buffered spill appends.
pub const REPL_FLUSH_INTERVAL: Duration = Duration::from_secs(1);

/// Real-time entries waiting in a queue beyond which new objects are
/// queued as references (read at delivery), not whole: bounds the memory
/// whole objects take (Riak's `replrtq_srcobjectlimit`).
pub const REPL_WHOLE_OBJECTS: u64 = 1000;

/// Sinks per node.
pub const REPL_MAX_SINKS: usize = 16;

/// Requests in flight per connection.
pub const MAX_INFLIGHT: usize = 4096;

/// Frames already queued on a cluster connection are written together up
/// to this many bytes (one syscall, and with TLS full records, instead of
/// one per frame); a larger frame goes alone.
pub const CLUSTER_WRITE_BATCH_BYTES: usize = 256 * 1024;

/// Read buffer of a cluster connection (a frame's header and body
/// usually come in one read).
pub const CLUSTER_READ_BUFFER_BYTES: usize = 64 * 1024;

/// Dial timeout.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection with requests waiting and nothing received for this long
/// is closed and re-dialled.
pub const STALE_AFTER: Duration = Duration::from_secs(5);

/// How often a node pushes its state to the other members.
pub const GOSSIP_INTERVAL: Duration = Duration::from_millis(500);

/// A peer silent for this long is down.
pub const DOWN_AFTER: Duration = Duration::from_millis(2000);

/// Timeout of gossip and admin calls between nodes.
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// A vnode whose backend closed itself is reopened at most this often
/// (short, so writes resume within about a second once, e.g., disk space
/// returns; a reopen on a still-full disk fails cheaply).
pub const VNODE_RESTART_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Background vnode requests (read repair) waiting to be sent.
pub const BACKGROUND_QUEUE: usize = 10_000;

/// Object bytes the background requests (read repair) may hold, waiting
/// and in flight together; past it a read repair is dropped (stat
/// `read_repairs_dropped_total`; anti-entropy repairs the replica later).
/// The count alone let 10,000 repairs of 50 KB objects hold 500 MB. One
/// request is always let through, however large its object.
pub const BACKGROUND_BYTES: u64 = 32 << 20;

/// Background requests sent at once (each a vnode call); the rest wait in
/// the queue.
pub const BACKGROUND_IN_FLIGHT: usize = 64;

/// Results per part of a streamed (`stream=true`) answer.
pub const RESULTS_PER_PART: usize = 100;

/// Buckets per chunk of a streamed bucket listing.
pub const BUCKETS_PER_CHUNK: usize = 100;

/// Largest accepted props body (`PUT .../props`), bytes; larger → 413.
pub const MAX_PROPS_BODY_BYTES: usize = 64 * 1024;

// Data types (crate::crdt). Riak sets none of these; Basalt refuses an
// update that would pass one (nothing is written) so a data type stays a
// value a replica can merge and send in one message.

/// HyperLogLog precision bounds and default (Riak's `hll_precision`:
/// 2^p one-byte registers; 14 = 16 KiB, about 0.8 % standard error).
pub const HLL_PRECISION_MIN: u32 = 4;
/// See [`HLL_PRECISION_MIN`].
pub const HLL_PRECISION_MAX: u32 = 16;
/// See [`HLL_PRECISION_MIN`].
pub const HLL_PRECISION_DEFAULT: u32 = 14;
/// Elements of one set or GSet (top level or in a map).
pub const CRDT_MAX_SET_ELEMENTS: usize = 100_000;
/// Fields of one map (each nested map counts its own).
pub const CRDT_MAX_MAP_FIELDS: usize = 10_000;
/// Nesting of maps in maps (the top-level map is depth 1); decoding
/// refuses deeper bytes, so a corrupt value cannot exhaust the stack.
pub const CRDT_MAX_DEPTH: usize = 8;
/// Bytes of one set element, map field name or register value.
pub const CRDT_MAX_ELEMENT_BYTES: usize = 64 * 1024;
/// Bytes of an encoded data type after an update.
pub const CRDT_MAX_ENCODED_BYTES: usize = 16 << 20;
/// Removes held back (their context not yet seen) per set or map.
pub const CRDT_MAX_DEFERRED: usize = 1024;
// MapReduce, JavaScript and commit hooks (`mapred`, `js`, `hooks`); the
// configurable ones (VM counts, VM memory and stack, input and result
// limits, hook timeout) are in `config::MapRedConfig`.

/// Largest MapReduce job accepted over HTTP (`POST /mapred` body); over PB
/// the frame limit (`limits.max_frame_bytes`) applies.
pub const MAPRED_MAX_JOB_BYTES: usize = 4 << 20;
/// Largest MapReduce job sent as Erlang terms (`application/x-erlang-binary`
/// over PB), and the largest a compressed one may inflate to.
pub const MAPRED_ETF_MAX_JOB_BYTES: usize = 4 << 20;
/// Nesting (tuples, lists, maps, funs' free variables) of an Erlang-term
/// job: checked before the term is decoded (the decoder recurses).
pub const MAPRED_ETF_MAX_DEPTH: usize = 64;
/// Terms in an Erlang-term job (each element of each list or tuple counts):
/// bounds the decoded job's memory (a 1-byte term decodes to ~50 bytes).
pub const MAPRED_ETF_MAX_TERMS: usize = 1_000_000;
/// Phases a job may have.
pub const MAPRED_MAX_PHASES: usize = 32;
/// `[bucket, key]` inputs a job may list (bucket, 2i and key-filter inputs
/// are bounded by `mapred.max_inputs` instead).
pub const MAPRED_MAX_LISTED_INPUTS: usize = 100_000;
/// Covering vnodes mapping a whole bucket at once (each one round of
/// [`CS_FOLD_BATCH`] keys at a time on its node).
pub const MAPRED_FOLD_PARALLEL: usize = 4;
/// Listed keys of one partition sent in one request to the node that
/// holds them for a map phase (`Msg::MapKeys`).
pub const MAPRED_KEYS_BATCH: usize = 100;
/// Objects fetched at once for a map or link phase.
pub const MAPRED_FETCH_PARALLEL: usize = 16;
/// Inputs handed to one JavaScript map call (one trip to a VM).
pub const MAPRED_JS_MAP_BATCH: usize = 64;
/// Riak's `reduce_phase_batch_size`: a reduce phase re-reduces its previous
/// output with this many new inputs at a time (a phase's `arg` may set
/// `{"reduce_phase_batch_size": N}` or `{"reduce_phase_only_1": true}`).
pub const MAPRED_REDUCE_BATCH: usize = 20;
/// The largest `reduce_phase_batch_size` a phase may ask for.
pub const MAPRED_MAX_REDUCE_BATCH: usize = 100_000;
/// Results per `RpbMapRedResp` frame (and per HTTP chunk).
pub const MAPRED_RESULTS_PER_FRAME: usize = 100;
/// A job's timeout when it gives none (Riak's 60 s).
pub const MAPRED_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest timeout a job may ask for.
pub const MAPRED_MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// Key filters in a job, counting nested `and` / `or` / `not` ones.
pub const MAPRED_MAX_KEY_FILTERS: usize = 64;
/// Compiled anonymous functions a VM keeps (cleared when full).
pub const JS_FUNCTION_CACHE: usize = 256;
/// Commit hooks per kind (pre / post) on one bucket.
pub const MAX_COMMIT_HOOKS: usize = 8;
/// Post-commit hook runs waiting or running at once per node; more are
/// dropped and counted (`postcommit_dropped`), never delaying a write.
pub const POSTCOMMIT_IN_FLIGHT: usize = 1024;

// Logins (`security::logins`): RpbAuthReq and HTTPS basic auth.

/// Password verifications (PBKDF2, 100,000 rounds: tens of milliseconds
/// of a core each) running at once per node; more wait for a slot, so
/// clients sending passwords can never hold more than this many cores.
pub const LOGIN_VERIFY_SLOTS: usize = 2;
/// How long a login waits for a verification slot before it is refused
/// ("busy verifying passwords"); not counted as a failed login.
pub const LOGIN_VERIFY_WAIT: Duration = Duration::from_secs(5);
/// Consecutive failed logins of one user from one address after which
/// further attempts are refused at once (no password hashed) for a
/// cool-down.
pub const LOGIN_FAILURES_BEFORE_LOCKOUT: u32 = 5;
/// The first cool-down; it doubles with each failure after it.
pub const LOGIN_LOCKOUT_FIRST: Duration = Duration::from_secs(1);
/// The longest cool-down: a guesser gets one password checked a minute.
pub const LOGIN_LOCKOUT_MAX: Duration = Duration::from_secs(60);
/// A (user, address) whose last failure is this old starts again from
/// zero failures.
pub const LOGIN_FAILURES_FORGOTTEN_AFTER: Duration = Duration::from_secs(600);
/// (user, address) pairs with failed logins tracked per node; when full,
/// forgotten pairs go first, then the oldest pair not in a cool-down,
/// then the oldest.
pub const LOGIN_TRACKED_MAX: usize = 10_000;

/// Live-chart streams (`/console/api/events`) one node serves at once;
/// another is refused with 503 until one closes.
pub const CONSOLE_MAX_STREAMS: usize = 8;
/// How often the console's stream sends a sample.
pub const CONSOLE_SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// A comment line on an idle console stream at least this often (so
/// proxies keep it open and the browser sees a dead node).
pub const CONSOLE_KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Bench reports the console lists from `bench_results_dir` (the newest
/// first, by name).
pub const CONSOLE_MAX_REPORTS: usize = 500;
/// The largest report file the console serves.
pub const CONSOLE_MAX_REPORT_BYTES: u64 = 64 << 20;
/// The largest body of a console action (a POST).
pub const CONSOLE_MAX_ACTION_BYTES: usize = 64 << 10;

const _: () = {
    assert!(LOGIN_VERIFY_SLOTS > 0 && LOGIN_FAILURES_BEFORE_LOCKOUT > 0 && LOGIN_TRACKED_MAX > 0);
    assert!(LOGIN_LOCKOUT_FIRST.as_millis() > 0);
    assert!(LOGIN_LOCKOUT_FIRST.as_millis() <= LOGIN_LOCKOUT_MAX.as_millis());
    assert!(LOGIN_FAILURES_FORGOTTEN_AFTER.as_millis() >= LOGIN_LOCKOUT_MAX.as_millis());
};

const _: () = {
    assert!(MAPRED_MAX_PHASES > 0 && MAPRED_FETCH_PARALLEL > 0 && MAPRED_JS_MAP_BATCH > 0);
    assert!(MAPRED_FOLD_PARALLEL > 0 && MAPRED_KEYS_BATCH > 0);
    assert!(MAPRED_REDUCE_BATCH > 0 && MAPRED_REDUCE_BATCH <= MAPRED_MAX_REDUCE_BATCH);
    assert!(MAPRED_RESULTS_PER_FRAME > 0 && MAPRED_MAX_KEY_FILTERS > 0);
    assert!(MAPRED_ETF_MAX_JOB_BYTES > 0 && MAPRED_ETF_MAX_DEPTH >= 8);
    assert!(MAPRED_ETF_MAX_TERMS >= MAPRED_MAX_LISTED_INPUTS * 5);
    assert!(MAPRED_DEFAULT_TIMEOUT.as_millis() <= MAPRED_MAX_TIMEOUT.as_millis());
    assert!(JS_FUNCTION_CACHE > 0 && MAX_COMMIT_HOOKS > 0 && POSTCOMMIT_IN_FLIGHT > 0);
};

const _: () = {
    assert!(
        HLL_PRECISION_MIN <= HLL_PRECISION_DEFAULT && HLL_PRECISION_DEFAULT <= HLL_PRECISION_MAX
    );
    assert!(HLL_PRECISION_MIN >= 4 && HLL_PRECISION_MAX <= 16);
    assert!(CRDT_MAX_DEPTH >= 2 && CRDT_MAX_DEPTH <= 32);
    assert!(CRDT_MAX_ELEMENT_BYTES < CRDT_MAX_ENCODED_BYTES);
    assert!(CRDT_MAX_SET_ELEMENTS > 0 && CRDT_MAX_MAP_FIELDS > 0 && CRDT_MAX_DEFERRED > 0);
    assert!(STREAM_QUEUE_FRAMES > 0);
    assert!(LIST_KEYS_FRAME_KEYS > 0 && LIST_KEYS_FRAME_KEYS <= LIST_KEYS_BATCH as usize);
    assert!(CS_BUCKET_FRAME_OBJECTS >= 1 && CS_BUCKET_FRAME_OBJECTS <= CS_FOLD_BATCH);
    assert!(INDEX_STREAM_CHUNK > 0);
    assert!(AAE_REBUILD_STEP_KEYS > 0 && AAE_REBUILD_STEP_KEYS <= 65_536);
    assert!(
        AAE_REBUILDS_AT_ONCE == 1,
        "the scheduler runs one rebuild at a time"
    );
    assert!(HANDOFF_BATCH > 0 && FOLD_BATCH_BYTES >= 1 << 20);
    assert!(BACKUP_BATCH > 0 && BACKUP_QUEUE_BATCHES > 0 && RESTORE_BATCH_MAX >= BACKUP_BATCH);
    assert!(AAE_MAX_BRANCHES > 0 && MAX_DIRTY_SEGMENTS > 0 && AAE_RANGE_BOOST >= 1);
    assert!(AAE_MIN_TICK.as_millis() > 0);
    assert!(MAX_INFLIGHT > 0 && BACKGROUND_QUEUE > 0);
    assert!(BACKGROUND_BYTES >= 1 << 20 && BACKGROUND_IN_FLIGHT > 0);
    assert!(CONSOLE_MAX_STREAMS > 0 && CONSOLE_MAX_REPORTS > 0);
    assert!(CONSOLE_KEEP_ALIVE.as_millis() > CONSOLE_SAMPLE_EVERY.as_millis());
    assert!(
        REPL_BATCH > 0
            && REPL_SEND_PARALLEL > 0
            && REPL_APPLY_PARALLEL > 0
            && REPL_FIRST_BACKOFF.as_millis() < REPL_MAX_BACKOFF.as_millis()
    );
    assert!(AAE_FOLD_MAX_RESULTS > 0 && AAE_FOLD_MAX_RESULTS < u32::MAX as usize);
    // A segment filter can name a whole branch; a branch request the
    // whole root of the default (xsmall) tree.
    assert!(AAE_FOLD_MAX_SEGMENTS >= 256 && AAE_FOLD_MAX_BRANCHES >= 64);
    assert!(AAE_FOLD_CHANGE_BATCH > 0 && AAE_FOLD_CHANGE_PARALLEL > 0);
    assert!(AAE_FOLD_SCAN_BATCH >= AAE_FOLD_CHANGE_BATCH);
    // A peer is down only after missing several gossip rounds, and a
    // connection is stale only after a request could have timed out.
    assert!(DOWN_AFTER.as_millis() >= 2 * GOSSIP_INTERVAL.as_millis());
    assert!(STALE_AFTER.as_millis() >= CONNECT_TIMEOUT.as_millis());
};
