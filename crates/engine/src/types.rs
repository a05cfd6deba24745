//! The small value types the read paths share: [`Head`] and [`Object`]
//! (what HEAD and GET answer) and [`KeyRange`] (a key range within one
//! bucket). They are defined once, in `basalt-backend` (the storage
//! vocabulary every backend speaks); the engine re-exports them and adds
//! what only it needs: `head_of` and [`KeyRangeExt::encoded`].
//!
//! They are imported here, below [`crate::store`], [`crate::snapshot`] and
//! [`crate::fold`], so those modules import them one way; each is
//! re-exported from its old path (`store::Head`, `store::Object`,
//! `fold::KeyRange`) and from the crate root.

use crate::entry::LedgerValue;
use crate::key;

/// Metadata of an object (answered from the ledger alone; `version` is the
/// SQN of the current version) and an object: the backend crate's types.
pub use basalt_backend::{Head, Object};

pub(crate) fn head_of(v: LedgerValue) -> Head {
    Head {
        version: v.sqn,
        size: v.size,
        value_hash: v.value_hash,
        last_modified_us: v.last_modified_us,
        expires_at: v.expires_at,
        metadata: v.metadata,
    }
}

/// An inclusive range of keys within one bucket (Riak's `{StartKey,
/// EndKey}`): the backend crate's type.
pub use basalt_backend::KeyRange;

/// The engine's view of a [`KeyRange`]: its encoded ledger-key bounds.
pub trait KeyRangeExt {
    /// The encoded ledger-key bounds `[start, end)` of this range in `bucket`.
    fn encoded(&self, bucket: &[u8]) -> (Vec<u8>, Option<Vec<u8>>);
}

impl KeyRangeExt for KeyRange {
    fn encoded(&self, bucket: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
        let start = key::object(bucket, &self.start);
        // No encoded object key lies strictly between object(b, end) and
        // object(b, end) ++ [0] (encoded keys end with a terminator that no
        // longer key can extend), so this bound includes `end` exactly.
        let mut end = key::object(bucket, &self.end);
        end.push(0);
        (start, Some(end))
    }
}
