//! The pure core of a PUT, as `riak_kv_put_core`: it counts the replicas'
//! acknowledgements against w / dw / pw and decides; no I/O, so it is
//! tested on its own against Riak's rules.

use crate::error::RequestError;

/// Acknowledgements of one PUT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutCore {
    /// `max(w, dw)`: acknowledgements needed (each replica write here is
    /// durable when it acknowledges, so `dw` counts as `w`).
    need: u32,
    /// Primary acknowledgements needed.
    pw: u32,
    acks: u32,
    primary_acks: u32,
    failed: u32,
    /// Replicas asked in all (the coordinator included).
    n: u32,
}

impl PutCore {
    /// A PUT to `n` replicas needing `max(w, dw)` and `pw`, of which
    /// `primaries` are primaries; refused before any write when fewer
    /// primaries are up than `pw`, or when there is no replica at all.
    pub fn new(n: u32, primaries: u32, w: u32, dw: u32, pw: u32) -> Result<PutCore, RequestError> {
        if primaries < pw {
            return Err(RequestError::Unsatisfied {
                kind: "pw",
                need: pw,
                got: primaries,
            });
        }
        if n == 0 {
            return Err(RequestError::Invalid("empty preference list".into()));
        }
        Ok(PutCore {
            need: w.max(dw),
            pw,
            acks: 0,
            primary_acks: 0,
            failed: 0,
            n,
        })
    }

    /// A replica acknowledged the write.
    pub fn ack(&mut self, primary: bool) {
        self.acks += 1;
        self.primary_acks += u32::from(primary);
        debug_assert!(
            self.acks + self.failed <= self.n,
            "more replies than replicas"
        );
    }

    /// A replica failed (error, timeout, overload).
    pub fn fail(&mut self) {
        self.failed += 1;
        debug_assert!(
            self.acks + self.failed <= self.n,
            "more replies than replicas"
        );
    }

    /// The quorum is met: the PUT can answer success.
    pub fn enough(&self) -> bool {
        self.acks >= self.need && self.primary_acks >= self.pw
    }

    /// The quorum can no longer be met, whatever the replicas still to
    /// answer say.
    pub fn hopeless(&self) -> bool {
        let left = self.n - self.acks - self.failed;
        self.acks + left < self.need || self.primary_acks + left < self.pw
    }

    /// The answer once no more replies will come: `Ok` if the quorum was
    /// met, else Riak's `{w_val_unsatisfied, need, got}` (or `pw`).
    pub fn result(&self) -> Result<(), RequestError> {
        if self.acks < self.need {
            Err(RequestError::Unsatisfied {
                kind: "w",
                need: self.need,
                got: self.acks,
            })
        } else if self.primary_acks < self.pw {
            Err(RequestError::Unsatisfied {
                kind: "pw",
                need: self.pw,
                got: self.primary_acks,
            })
        } else {
            Ok(())
        }
    }

    /// (acknowledged, failed) so far.
    pub fn counts(&self) -> (u32, u32) {
        (self.acks, self.failed)
    }
}
