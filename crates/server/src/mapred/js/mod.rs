//! JavaScript for MapReduce phases and commit hooks: pools of sandboxed
//! QuickJS VMs (the `rquickjs` crate; ARCHITECTURE.md says why).
//!
//! A [`JsPool`] is a fixed number of OS threads, each owning one VM (a
//! QuickJS runtime and context cannot move between threads), fed from one
//! bounded queue (`mapred.js_queue_len`); a caller waits for a place in the
//! queue and for its answer up to its deadline, never longer. Each VM has a
//! heap limit (`mapred.js_max_vm_mem_mb`), a stack limit
//! (`mapred.js_max_stack_kb`) and an interrupt handler that stops a script
//! at its call's deadline, so an infinite loop, a memory bomb or a deep
//! recursion ends the call with a [`JsError`] and the VM is rebuilt; the
//! thread and the node go on serving.
//!
//! Every VM evaluates `builtins.js` (Riak's `Riak.*` built-ins and the
//! `__basalt` entry points) and then the `.js` files of
//! `mapred.js_source_dir`. Data crosses as JSON text, one call per batch
//! of map inputs, per reduce and per hook.

use parking_lot::Mutex;
use rquickjs::{Context, Ctx, Function, Object, Runtime};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Riak's built-ins and Basalt's entry points, evaluated in every VM.
pub const BUILTINS_JS: &str = include_str!("builtins.js");

/// How long a VM's start (the built-ins and `js_source_dir`) may run.
const VM_START_LIMIT: Duration = Duration::from_secs(10);
/// How long past its deadline a caller waits for a VM that was told to stop
/// (the interrupt handler runs every few thousand instructions).
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A function to call: anonymous source, or a global name (`Riak.mapValues`,
/// a function of `js_source_dir`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsFun {
    /// `function(v, keydata, arg) { ... }`.
    Source(String),
    /// A dotted global name.
    Name(String),
}

impl JsFun {
    fn parts(&self) -> (&'static str, &str) {
        match self {
            JsFun::Source(s) => ("source", s),
            JsFun::Name(n) => ("name", n),
        }
    }
}

/// One call into a VM. Every payload is JSON text.
#[derive(Debug, Clone)]
pub enum JsCall {
    /// A map function over `inputs` = `[[object, keydata], ...]`; answers
    /// `[[results of input 1], ...]`.
    Map {
        /// The function.
        fun: JsFun,
        /// `[[object, keydata], ...]`.
        inputs: String,
        /// The phase's `arg`.
        arg: String,
    },
    /// A reduce function over `values` (a JSON list); answers a list.
    Reduce {
        /// The function.
        fun: JsFun,
        /// The values.
        values: String,
        /// The phase's `arg`.
        arg: String,
    },
    /// A commit hook over an object; answers the object or `{"fail": ...}`
    /// (with `"__basalt_same_data": true` and no data when the first
    /// value's data came back unchanged).
    Hook {
        /// The function.
        fun: JsFun,
        /// The object, its first value's `data` left out (`null`).
        object: String,
        /// That data.
        data: String,
    },
}

/// Why a JavaScript call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsError {
    /// The script threw (or returned something of the wrong shape).
    #[error("{message}")]
    Script {
        /// The exception's message.
        message: String,
        /// Its stack, when it has one.
        stack: Option<String>,
    },
    /// The call's deadline passed (the job's timeout, the hook timeout).
    #[error("timeout: the JavaScript call ran past its deadline")]
    Timeout,
    /// The VM's heap limit was reached.
    #[error("JavaScript VM out of memory (limit {limit_mb} MiB, mapred.js_max_vm_mem_mb)")]
    Memory {
        /// The limit.
        limit_mb: usize,
    },
    /// The pool is gone (node stopping) or a VM could not start.
    #[error("JavaScript VM unavailable: {0}")]
    Unavailable(String),
}

/// What every VM of a node gets.
#[derive(Debug, Clone)]
pub struct JsSettings {
    /// Heap limit, bytes.
    pub mem_bytes: usize,
    /// Stack limit, bytes.
    pub stack_bytes: usize,
    /// Calls waiting per pool.
    pub queue_len: usize,
    /// `(file name, source)` of `js_source_dir`, evaluated after the
    /// built-ins.
    pub sources: Vec<(String, String)>,
}

impl JsSettings {
    /// From the `[mapred]` config, reading `js_source_dir` (its `.js` files
    /// in name order).
    pub fn from_config(c: &crate::config::MapRedConfig) -> Result<JsSettings, String> {
        let mut sources = Vec::new();
        if !c.js_source_dir.is_empty() {
            sources = read_sources(Path::new(&c.js_source_dir))?;
        }
        Ok(JsSettings {
            mem_bytes: c.js_max_vm_mem_mb << 20,
            stack_bytes: c.js_max_stack_kb << 10,
            queue_len: c.js_queue_len,
            sources,
        })
    }
}

fn read_sources(dir: &Path) -> Result<Vec<(String, String)>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("js_source_dir {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in rd {
        let p = entry
            .map_err(|e| format!("js_source_dir {}: {e}", dir.display()))?
            .path();
        if p.extension().is_some_and(|x| x == "js") {
            files.push(p);
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let code = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok((p.display().to_string(), code))
        })
        .collect()
}

/// The three pools of a node (map phases, reduce phases, commit hooks),
/// each started on first use with its configured number of VMs.
pub struct JsPools {
    settings: Arc<JsSettings>,
    counts: [usize; 3],
    pools: [std::sync::OnceLock<Result<JsPool, String>>; 3],
}

/// Which pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// Map phases (`map_js_vm_count`).
    Map = 0,
    /// Reduce phases (`reduce_js_vm_count`).
    Reduce = 1,
    /// Commit hooks (`hook_js_vm_count`).
    Hook = 2,
}

impl std::fmt::Debug for JsPools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsPools")
            .field("counts", &self.counts)
            .finish()
    }
}

impl JsPools {
    /// The pools of a node with this config (nothing started yet); an
    /// unreadable `js_source_dir` is an error here, at the node's start.
    pub fn new(c: &crate::config::MapRedConfig) -> Result<JsPools, String> {
        let settings = JsSettings::from_config(c).map(Arc::new)?;
        Ok(JsPools {
            settings,
            counts: [c.map_js_vm_count, c.reduce_js_vm_count, c.hook_js_vm_count],
            pools: Default::default(),
        })
    }

    /// Runs `call` on a VM of pool `kind` (started now if it is not yet).
    pub async fn call(
        &self,
        kind: PoolKind,
        call: JsCall,
        deadline: Instant,
    ) -> Result<String, JsError> {
        let i = kind as usize;
        let pool = self.pools[i].get_or_init(|| {
            let s = self.settings.clone();
            let name = ["map", "reduce", "hook"][i];
            JsPool::start(name, self.counts[i], s).map_err(|e| e.to_string())
        });
        match pool {
            Ok(p) => p.call(call, deadline).await,
            Err(e) => Err(JsError::Unavailable(e.clone())),
        }
    }
}

struct Job {
    call: JsCall,
    deadline: Instant,
    reply: oneshot::Sender<Result<String, JsError>>,
    slot: Arc<Mutex<Slot>>,
}

/// Where a call is, shared by its caller and the VM thread: a caller whose
/// future is dropped (its client went away, its job failed elsewhere)
/// stops the script at once through the VM's deadline, instead of leaving
/// the VM busy until the call's own deadline.
enum Slot {
    /// Queued.
    Waiting,
    /// On a VM: that VM's deadline.
    Running(Arc<AtomicU64>),
    /// Answered.
    Done,
    /// The caller went away: a VM that takes the call skips it.
    Abandoned,
}

/// Abandons the call when the caller's future is dropped before its answer.
struct AbandonOnDrop(Arc<Mutex<Slot>>);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        let mut slot = self.0.lock();
        match &*slot {
            Slot::Done => return,
            // The handler stops the script at its next check.
            Slot::Running(deadline) => deadline.store(0, Ordering::Relaxed),
            Slot::Waiting | Slot::Abandoned => {}
        }
        *slot = Slot::Abandoned;
    }
}

/// A pool of VMs on their own threads (see the module docs).
pub struct JsPool {
    name: &'static str,
    tx: mpsc::Sender<Job>,
}

impl std::fmt::Debug for JsPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsPool").field("name", &self.name).finish()
    }
}

impl JsPool {
    /// Starts `count` VM threads named `js-<name>-<i>`. A VM is built on
    /// its thread's first call (and rebuilt after a call that broke a
    /// limit), so an unused pool costs only idle threads.
    pub fn start(
        name: &'static str,
        count: usize,
        settings: Arc<JsSettings>,
    ) -> std::io::Result<JsPool> {
        let (tx, rx) = mpsc::channel(settings.queue_len.max(1));
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..count.max(1) {
            let rx = rx.clone();
            let s = settings.clone();
            std::thread::Builder::new()
                .name(format!("js-{name}-{i}"))
                // QuickJS's own stack limit plus room for Rust and C frames.
                .stack_size(settings.stack_bytes + (2 << 20))
                .spawn(move || worker(&rx, &s))?;
        }
        Ok(JsPool { name, tx })
    }

    /// Runs `call` on a VM of the pool; waits at most until `deadline`
    /// (plus a short grace for a VM told to stop).
    pub async fn call(&self, call: JsCall, deadline: Instant) -> Result<String, JsError> {
        let (reply, answer) = oneshot::channel();
        let left = deadline.saturating_duration_since(Instant::now());
        let slot = Arc::new(Mutex::new(Slot::Waiting));
        let _abandon = AbandonOnDrop(slot.clone());
        let job = Job {
            call,
            deadline,
            reply,
            slot,
        };
        match tokio::time::timeout(left, self.tx.send(job)).await {
            Err(_) => return Err(JsError::Timeout),
            Ok(Err(_)) => {
                return Err(JsError::Unavailable(format!(
                    "the {} pool has stopped",
                    self.name
                )))
            }
            Ok(Ok(())) => {}
        }
        let left = deadline.saturating_duration_since(Instant::now()) + STOP_GRACE;
        match tokio::time::timeout(left, answer).await {
            Err(_) => Err(JsError::Timeout),
            Ok(Err(_)) => Err(JsError::Unavailable(format!(
                "a VM of the {} pool stopped",
                self.name
            ))),
            Ok(Ok(r)) => r,
        }
    }
}

/// A VM thread: takes calls until the pool is dropped.
fn worker(rx: &Mutex<mpsc::Receiver<Job>>, s: &JsSettings) {
    let mut vm: Option<Vm> = None;
    loop {
        let job = rx.lock().blocking_recv();
        let Some(job) = job else { return };
        if job.reply.is_closed() {
            continue;
        }
        if Instant::now() >= job.deadline {
            let _ = job.reply.send(Err(JsError::Timeout));
            continue;
        }
        let v = match vm.take() {
            Some(v) => v,
            None => match Vm::new(s) {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(error = %e, "JavaScript VM did not start");
                    let _ = job.reply.send(Err(e));
                    continue;
                }
            },
        };
        {
            let mut slot = job.slot.lock();
            if matches!(*slot, Slot::Abandoned) {
                vm = Some(v);
                continue;
            }
            v.arm(job.deadline);
            *slot = Slot::Running(v.deadline.clone());
        }
        let res = v.run(&job.call, job.deadline, s);
        // Under the lock: a caller that leaves from now on finds `Done`
        // and no longer touches this VM's deadline (the next call's).
        *job.slot.lock() = Slot::Done;
        // A VM that hit a limit may hold half-built state: rebuild it.
        let broken = match &res {
            Err(JsError::Timeout | JsError::Memory { .. } | JsError::Unavailable(_)) => true,
            Err(JsError::Script { message, .. }) => message.contains("stack overflow"),
            Ok(_) => false,
        };
        if !broken {
            vm = Some(v);
        }
        let _ = job.reply.send(res);
    }
}

/// One QuickJS runtime and context with the built-ins loaded. Field order
/// matters: the context is dropped before its runtime.
struct Vm {
    ctx: Context,
    _rt: Runtime,
    /// Milliseconds after `base` at which the interrupt handler stops the
    /// running script (`u64::MAX` = idle).
    deadline: Arc<AtomicU64>,
    base: Instant,
}

impl Vm {
    fn new(s: &JsSettings) -> Result<Vm, JsError> {
        let start = |e: rquickjs::Error| JsError::Unavailable(format!("VM start: {e}"));
        let rt = Runtime::new().map_err(start)?;
        rt.set_memory_limit(s.mem_bytes);
        rt.set_max_stack_size(s.stack_bytes);
        let base = Instant::now();
        let deadline = Arc::new(AtomicU64::new(
            VM_START_LIMIT.as_millis().try_into().unwrap_or(u64::MAX),
        ));
        let d = deadline.clone();
        rt.set_interrupt_handler(Some(Box::new(move || {
            let now: u64 = base.elapsed().as_millis().try_into().unwrap_or(u64::MAX);
            now >= d.load(Ordering::Relaxed)
        })));
        let ctx = Context::full(&rt).map_err(start)?;
        let vm = Vm {
            ctx,
            _rt: rt,
            deadline,
            base,
        };
        vm.ctx.with(|ctx| {
            eval_script(&ctx, BUILTINS_JS)
                .map_err(|e| JsError::Unavailable(format!("builtins.js: {e}")))?;
            for (name, code) in &s.sources {
                eval_script(&ctx, code)
                    .map_err(|e| JsError::Unavailable(format!("{name}: {e}")))?;
            }
            Ok::<(), JsError>(())
        })?;
        vm.deadline.store(u64::MAX, Ordering::Relaxed);
        Ok(vm)
    }

    /// Sets the deadline of the next [`Vm::run`] (the interrupt handler's).
    fn arm(&self, deadline: Instant) {
        let at = deadline.saturating_duration_since(self.base).as_millis();
        self.deadline
            .store(at.try_into().unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Runs `call` until the deadline [`Vm::arm`] set (or a stop).
    fn run(&self, call: &JsCall, deadline: Instant, s: &JsSettings) -> Result<String, JsError> {
        let res = self.ctx.with(|ctx| {
            let entry: Object = ctx.globals().get("__basalt").map_err(|e| script(&ctx, e))?;
            let (method, fun, a, b) = match call {
                JsCall::Map { fun, inputs, arg } => ("map", fun, inputs.as_str(), arg.as_str()),
                JsCall::Reduce { fun, values, arg } => {
                    ("reduce", fun, values.as_str(), arg.as_str())
                }
                JsCall::Hook { fun, object, data } => ("hook", fun, object.as_str(), data.as_str()),
            };
            let f: Function = entry.get(method).map_err(|e| script(&ctx, e))?;
            let (kind, spec) = fun.parts();
            f.call::<_, String>((kind, spec, a, b))
                .map_err(|e| script(&ctx, e))
        });
        self.deadline.store(u64::MAX, Ordering::Relaxed);
        res.map_err(|e| match e {
            // The handler's clock is in whole milliseconds: "interrupted"
            // can come a little before `deadline`.
            JsError::Script { message, .. } if message == "interrupted" => JsError::Timeout,
            _ if Instant::now() >= deadline => JsError::Timeout,
            JsError::Script { message, .. } if message.contains("out of memory") => {
                JsError::Memory {
                    limit_mb: s.mem_bytes >> 20,
                }
            }
            other => other,
        })
    }
}

/// Evaluates a script in the global scope (not strict: Riak's scripts
/// predate strict mode).
fn eval_script(ctx: &Ctx<'_>, code: &str) -> Result<(), JsError> {
    let mut opts = rquickjs::context::EvalOptions::default();
    opts.strict = false;
    ctx.eval_with_options::<(), _>(code, opts)
        .map_err(|e| script(ctx, e))
}

/// A [`JsError`] from an rquickjs error, taking the pending exception.
fn script(ctx: &Ctx<'_>, e: rquickjs::Error) -> JsError {
    match e {
        rquickjs::Error::Exception => {
            let v = ctx.catch();
            if let Some(x) = v.as_exception() {
                JsError::Script {
                    message: x.message().unwrap_or_else(|| "exception".into()),
                    stack: x.stack().filter(|s| !s.is_empty()),
                }
            } else if let Some(s) = v.as_string() {
                JsError::Script {
                    message: s.to_string().unwrap_or_default(),
                    stack: None,
                }
            } else {
                JsError::Script {
                    message: format!("{v:?}"),
                    stack: None,
                }
            }
        }
        rquickjs::Error::Allocation => JsError::Script {
            message: "out of memory".into(),
            stack: None,
        },
        other => JsError::Script {
            message: other.to_string(),
            stack: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Arc<JsSettings> {
        Arc::new(JsSettings {
            mem_bytes: 8 << 20,
            stack_bytes: 256 << 10,
            queue_len: 16,
            sources: vec![(
                "test.js".into(),
                "function double_it(v, kd, arg) { return [v * 2]; }".into(),
            )],
        })
    }

    fn soon(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn cache_limit_matches_limits() {
        let want = format!("CACHE_MAX = {};", crate::limits::JS_FUNCTION_CACHE);
        assert!(BUILTINS_JS.contains(&want));
    }

    #[test]
    fn builtins_and_source_functions_run() {
        let pool = JsPool::start("test", 1, settings()).unwrap_or_else(|e| panic!("{e}"));
        rt().block_on(async {
            let r = pool
                .call(
                    JsCall::Reduce {
                        fun: JsFun::Name("Riak.reduceSum".into()),
                        values: "[1,2,3,{\"not_found\":{}}]".into(),
                        arg: "null".into(),
                    },
                    soon(5000),
                )
                .await;
            assert_eq!(r, Ok("[6]".to_string()));
            let r = pool
                .call(
                    JsCall::Map {
                        fun: JsFun::Source(
                            "function(v, kd, a) { return [v.values[0].data + a]; }".into(),
                        ),
                        inputs: r#"[[{"values":[{"data":"x"}]}, null]]"#.into(),
                        arg: "\"y\"".into(),
                    },
                    soon(5000),
                )
                .await;
            assert_eq!(r, Ok(r#"[["xy"]]"#.to_string()));
            let r = pool
                .call(
                    JsCall::Reduce {
                        fun: JsFun::Name("double_it".into()),
                        values: "3".into(),
                        arg: "null".into(),
                    },
                    soon(5000),
                )
                .await;
            assert_eq!(r, Ok("[6]".to_string()));
        });
    }

    #[test]
    fn errors_loops_and_bombs_end_with_an_error_and_the_vm_recovers() {
        let pool = JsPool::start("test", 1, settings()).unwrap_or_else(|e| panic!("{e}"));
        rt().block_on(async {
            let reduce = |src: &str| JsCall::Reduce {
                fun: JsFun::Source(src.into()),
                values: "[]".into(),
                arg: "null".into(),
            };
            let r = pool
                .call(reduce("function(v) { throw new Error('boom'); }"), soon(5000))
                .await;
            assert!(
                matches!(&r, Err(JsError::Script { message, .. }) if message.contains("boom")),
                "{r:?}"
            );
            let r = pool
                .call(reduce("function(v) { while (true) {} }"), soon(300))
                .await;
            assert_eq!(r, Err(JsError::Timeout));
            let r = pool
                .call(
                    reduce("function(v) { var a = []; while (true) { a.push(new Array(10000).fill(1)); } }"),
                    soon(20_000),
                )
                .await;
            assert!(matches!(r, Err(JsError::Memory { limit_mb: 8 })), "{r:?}");
            let r = pool
                .call(reduce("function f(v) { return f(v); }"), soon(20_000))
                .await;
            assert!(
                matches!(&r, Err(JsError::Script { message, .. }) if message.contains("stack")),
                "{r:?}"
            );
            let r = pool.call(reduce("function(v) { return 5; }"), soon(5000)).await;
            assert!(
                matches!(&r, Err(JsError::Script { message, .. }) if message.contains("must return a list")),
                "{r:?}"
            );
            // The VM (rebuilt) still answers.
            let r = pool.call(reduce("function(v) { return [1]; }"), soon(5000)).await;
            assert_eq!(r, Ok("[1]".to_string()));
        });
    }
}
