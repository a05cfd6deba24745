//! The pure core of a GET, as `riak_kv_get_core`: it only counts the
//! replicas' replies and decides (enough, give up early, or the final
//! answer); no I/O, so it is tested on its own against Riak's rules.

use super::GetOutcome;
use crate::error::RequestError;
use crate::object::RiakObject;

/// `riak_kv_get_core`'s early end of a GET (see [`Node::get_with_basic_quorum`]);
/// only applied with `basic_quorum`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailFast {
    /// Not-found + failed replies that end the GET (`None`: wait for all).
    threshold: Option<usize>,
    need: usize,
    notfound_ok: bool,
}

impl FailFast {
    pub(crate) fn new(n: usize, need: u32, notfound_ok: bool, basic_quorum: bool) -> FailFast {
        let need = need as usize;
        let threshold = basic_quorum.then(|| (n / 2 + 1).min((n + 1).saturating_sub(need)));
        FailFast {
            threshold,
            need,
            notfound_ok,
        }
    }

    /// After `answered` replicas answered (or failed), `heads` being the
    /// answers: the GET's result if it ends now.
    pub(crate) fn check(
        &self,
        heads: &[Option<&RiakObject>],
        answered: usize,
        overloaded: bool,
    ) -> Option<Result<GetOutcome, RequestError>> {
        let threshold = self.threshold?;
        let notfounds = if self.notfound_ok {
            0
        } else {
            heads.iter().filter(|h| h.is_none()).count()
        };
        let oks = heads.len() - notfounds;
        let fails = answered.saturating_sub(heads.len());
        if oks >= self.need || notfounds + fails < threshold {
            return None;
        }
        let live = heads.iter().any(|h| h.is_some_and(|o| !o.is_deleted()));
        Some(if fails == 0 && !live {
            Ok(GetOutcome::NotFound)
        } else if overloaded {
            Err(RequestError::Overload)
        } else {
            Err(RequestError::Unsatisfied {
                kind: "r",
                need: self.need as u32,
                got: oks as u32,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::vclock::VClock;
    use crate::object::Content;

    fn c(v: &[u8]) -> Content {
        Content {
            value: v.to_vec(),
            value_len: v.len() as u32,
            ..Content::default()
        }
    }

    #[test]
    fn fail_fast_follows_riak_get_core() {
        let obj = |deleted: bool| {
            let mut c = c(b"v");
            c.deleted = deleted;
            RiakObject {
                vclock: VClock::default(),
                contents: vec![c],
            }
        };
        let (dead, live) = (obj(true), obj(false));
        // n = 3, r = 1, notfound_ok = false: basic_quorum gives up after 2
        // not-founds (a majority); without it, never early.
        let ff = FailFast::new(3, 1, false, true);
        assert_eq!(ff.threshold, Some(2));
        assert!(ff.check(&[None], 1, false).is_none());
        assert!(matches!(
            ff.check(&[None, None], 2, false),
            Some(Ok(GetOutcome::NotFound))
        ));
        assert!(FailFast::new(3, 1, false, false)
            .check(&[None, None], 2, false)
            .is_none());
        // r = 3: one not-found already makes r unreachable.
        assert_eq!(FailFast::new(3, 3, false, true).threshold, Some(1));
        // Tombstones and not-founds → not found; a live object → r error.
        assert!(matches!(
            FailFast::new(3, 2, false, true).check(&[Some(&dead), None, None], 3, false),
            Some(Ok(GetOutcome::NotFound))
        ));
        assert!(matches!(
            FailFast::new(3, 2, false, true).check(&[Some(&live), None, None], 3, false),
            Some(Err(RequestError::Unsatisfied {
                need: 2,
                got: 1,
                ..
            }))
        ));
        // notfound_ok: not-founds are successes; failures still count.
        let ok = FailFast::new(3, 2, true, true);
        assert!(ok.check(&[None, None], 2, false).is_none());
        assert!(matches!(
            ok.check(&[], 2, true),
            Some(Err(RequestError::Overload))
        ));
    }
}
