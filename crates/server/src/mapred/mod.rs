//! MapReduce, as Riak's (`riak_kv_mapred_json`, `riak_kv_mapreduce`,
//! `riak_kv_w_reduce`): [`job`] parses the JSON job, [`keyfilter`] its key
//! filters, [`builtins`] are the Erlang built-ins by name, [`core`] is the
//! pure phase logic (re-reduce, links, kept results), and [`run`] drives a
//! job over the node (inputs from listed keys, 2i or bounded coverage
//! folds; objects read with the KV GET; JavaScript on the VM pools of
//! [`crate::mapred::js`]). The PB and HTTP services are [`pb`] and
//! [`http`]; a job sent as Erlang terms (riakc) is read and answered by
//! [`etf`].
//!
//! Where phases run: a whole-bucket job's first map phase runs on the node
//! of each covering vnode ([`local`]: only map outputs cross the cluster,
//! as Riak). Everything else runs on the node that received the job: map
//! phases over listed keys, 2i inputs or a previous phase's output read
//! their objects with the KV GET, and reduce phases run there (as in
//! Riak, where reduce runs on the coordinating node).

pub mod builtins;
pub mod core;
pub mod etf;
pub mod hooks;
pub mod input;
pub mod job;
pub mod js;
pub mod keyfilter;
pub mod local;
pub mod run;

pub mod http;
pub mod pb;

use crate::error::RequestError;
use serde_json::{json, Value};

/// The MapReduce capability: jobs over the KV layer, JavaScript phases on
/// its VM pools, map phases where the data is. It dereferences to the
/// [`crate::kv::Kv`] it runs on: the platform is all it uses.
pub struct MapRed {
    kv: std::sync::Arc<crate::kv::Kv>,
    /// The JavaScript VM pools (map and reduce phases; commit hooks share
    /// them).
    pub(crate) js: std::sync::Arc<js::JsPools>,
}

impl std::ops::Deref for MapRed {
    type Target = crate::kv::Kv;
    fn deref(&self) -> &crate::kv::Kv {
        &self.kv
    }
}

impl MapRed {
    /// MapReduce over `kv` with the VM pools `js`.
    pub fn new(kv: std::sync::Arc<crate::kv::Kv>, js: std::sync::Arc<js::JsPools>) -> MapRed {
        MapRed { kv, js }
    }
}

pub use job::{parse, Job, JobError};

impl From<keyfilter::FilterError> for JobError {
    fn from(e: keyfilter::FilterError) -> Self {
        JobError(e.0)
    }
}

/// Why a job failed.
#[derive(Debug, thiserror::Error)]
pub enum MapRedError {
    /// The job itself is bad (a field named in the message).
    #[error("{0}")]
    Job(#[from] JobError),
    /// A phase failed on an input.
    #[error("phase {phase}: {error}")]
    Phase {
        /// The phase (from 0).
        phase: usize,
        /// What failed.
        error: String,
        /// The input it failed on, when known.
        input: Option<Value>,
        /// A JavaScript stack, when there is one.
        stack: Option<String>,
    },
    /// The job ran past its timeout.
    #[error("timeout")]
    Timeout,
    /// A node limit (inputs, result size, whole-bucket inputs refused).
    #[error("{0}")]
    Limit(String),
    /// Reading inputs failed.
    #[error(transparent)]
    Request(#[from] RequestError),
}

impl MapRedError {
    /// The job was refused before it ran (HTTP 400).
    pub fn is_bad_job(&self) -> bool {
        matches!(
            self,
            MapRedError::Job(_) | MapRedError::Request(RequestError::Invalid(_))
        )
    }

    /// Riak's JSON error object (`riak_kv_mapred_json:jsonify_pipe_error`
    /// shapes): `{"phase", "error", "input", "stack"}` for a phase error,
    /// `{"error": "timeout"}`, `{"error": message}` for the rest.
    pub fn to_json(&self) -> Value {
        match self {
            MapRedError::Phase {
                phase,
                error,
                input,
                stack,
            } => json!({
                "phase": phase,
                "error": error,
                "input": input.clone().unwrap_or(Value::Null),
                "type": "error",
                "stack": stack.clone().map_or(Value::Null, Value::String),
            }),
            MapRedError::Timeout => json!({"error": "timeout"}),
            other => json!({"error": other.to_string()}),
        }
    }
}
