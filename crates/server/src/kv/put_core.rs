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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn pw_is_checked_before_any_write() {
        let e = PutCore::new(3, 1, 2, 0, 2).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("{pw_val_unsatisfied,2,1}"));
        assert!(PutCore::new(0, 0, 1, 0, 0).is_err());
    }

    #[test]
    fn dw_counts_as_w_and_primaries_count_for_pw() {
        let mut c = PutCore::new(3, 3, 1, 2, 1).unwrap_or_else(|e| panic!("{e}"));
        c.ack(false);
        assert!(!c.enough(), "dw = 2 needs two acknowledgements");
        c.ack(false);
        assert!(!c.enough(), "pw = 1 needs a primary");
        c.ack(true);
        assert!(c.enough());
        assert!(c.result().is_ok());
    }

    proptest! {
        /// Against a model that recounts the replies: `enough` iff the
        /// counts meet the quorum, `hopeless` iff even all the replicas
        /// still to answer could not meet it, and `result` names the first
        /// unmet rule with the count Riak reports.
        #[test]
        fn the_core_agrees_with_riaks_rules(
            n in 1u32..=5,
            w in 1u32..=5,
            dw in 0u32..=5,
            pw in 0u32..=5,
            replies in proptest::collection::vec((any::<bool>(), any::<bool>()), 5),
        ) {
            let (w, dw, pw) = (w.min(n), dw.min(n), pw.min(n));
            let mut core = PutCore::new(n, n, w, dw, pw).unwrap_or_else(|e| panic!("{e}"));
            let (mut acks, mut primary, mut failed) = (0u32, 0u32, 0u32);
            for &(ok, is_primary) in replies.iter().take(n as usize) {
                if ok {
                    core.ack(is_primary);
                    acks += 1;
                    primary += u32::from(is_primary);
                } else {
                    core.fail();
                    failed += 1;
                }
                let need = w.max(dw);
                let left = n - acks - failed;
                prop_assert_eq!(core.enough(), acks >= need && primary >= pw);
                prop_assert_eq!(core.hopeless(), acks + left < need || primary + left < pw);
                let want = if acks < need {
                    Err(("w", need, acks))
                } else if primary < pw {
                    Err(("pw", pw, primary))
                } else {
                    Ok(())
                };
                let got = core.result().map_err(|e| match e {
                    RequestError::Unsatisfied { kind, need, got } => (kind, need, got),
                    other => panic!("{other}"),
                });
                prop_assert_eq!(got, want);
            }
        }
    }
}
