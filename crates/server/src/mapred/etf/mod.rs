//! MapReduce in Erlang's external term format (`RpbMapRedReq` with
//! `content_type = application/x-erlang-binary`, all that riakc sends):
//! the job is read into the same [`Job`] a JSON job parses to, so the
//! runner is the same; each batch of a kept phase's results goes back as
//! `term_to_binary(Results)`, as `riak_kv_pb_mapred` answers.
//!
//! - [`scan`]: bytes → term, bounded before `eetf` decodes anything
//!   (`limits::MAPRED_ETF_MAX_JOB_BYTES`, `MAPRED_ETF_MAX_DEPTH`,
//!   `MAPRED_ETF_MAX_TERMS`; a compressed job inflates within the first).
//! - [`job`]: term → [`Job`]: every input and phase shape riakc builds,
//!   with Riak's error texts.
//! - [`value`]: the one term ↔ JSON mapping (phase args, key data,
//!   results) and `~p` printing for error texts.
//!
//! Here: which [`Shape`] each phase's results take ([`shapes`]) and their
//! encoding ([`encode`]).

pub mod job;
pub mod scan;
pub mod value;

pub use job::parse;
pub use value::Shape;

use crate::mapred::builtins::Builtin;
use crate::mapred::job::{Job, PhaseFun, PhaseKind};
use serde_json::Value;

/// The shape of each phase's results, by phase index (a job without
/// phases sends its inputs as phase 0).
pub fn shapes(job: &Job) -> Vec<Shape> {
    if job.query.is_empty() {
        return vec![Shape::Inputs];
    }
    job.query
        .iter()
        .map(|p| match &p.kind {
            PhaseKind::Link { .. } => Shape::Link,
            PhaseKind::Map(PhaseFun::Erlang(b) | PhaseFun::ErlangTerms(b))
                if matches!(b, Builtin::MapObjectValue | Builtin::MapObjectValueList) =>
            {
                Shape::ErlangMap
            }
            PhaseKind::Reduce(PhaseFun::Erlang(Builtin::ReducePlistSum))
            | PhaseKind::Reduce(PhaseFun::ErlangTerms(Builtin::ReducePlistSum)) => Shape::Pairs,
            _ => Shape::Plain,
        })
        .collect()
}

/// `term_to_binary(Results)` for one `RpbMapRedResp`.
pub fn encode(values: &[Value], shape: Shape) -> Vec<u8> {
    let list = eetf::List::from(
        values
            .iter()
            .map(|v| value::shaped(v, shape))
            .collect::<Vec<_>>(),
    );
    let mut out = Vec::new();
    if eetf::Term::from(list).encode(&mut out).is_err() {
        // Only a term eetf cannot write (none that a job can make): say so
        // in the client's terms rather than send half a term.
        out.clear();
        let err = eetf::Term::from(eetf::List::from(vec![eetf::Term::from(eetf::Tuple::from(
            vec![
                eetf::Term::from(eetf::Atom::from("error")),
                eetf::Term::from(eetf::Atom::from("unencodable_result")),
            ],
        ))]));
        let _ = err.encode(&mut out);
    }
    out
}

#[cfg(test)]
mod tests;
