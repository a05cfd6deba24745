//! Which writes a replication queue takes: Riak's `replrtq_srcqueue`
//! filters. A [`Filter`] is parsed from the text an operator writes
//! (`any`, `block_rt`, `bucket:NAME`, `prefix:P`, `type:T`) and matched
//! against a storage bucket (bucket type and name) for each real-time
//! entry. Full-sync repairs and requeues ignore filters: they name their
//! queue themselves.

use crate::bucket::keying::split_storage_bucket;
use std::fmt;

/// The bucket type of keys written without one.
const DEFAULT_TYPE: &[u8] = b"default";

/// A queue's filter; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Every write.
    Any,
    /// No real-time entries (only full-sync repairs and requeues).
    BlockRealTime,
    /// Buckets of this name, in any bucket type.
    Bucket(Vec<u8>),
    /// Buckets whose name starts with this prefix, in any bucket type.
    Prefix(Vec<u8>),
    /// Every bucket of this bucket type (`default` for untyped buckets).
    Type(Vec<u8>),
}

impl Filter {
    /// Parses `any`, `block_rt`, `bucket:NAME`, `prefix:P` or `type:T`;
    /// the error says what is accepted.
    pub fn parse(s: &str) -> Result<Filter, String> {
        let named = |what: &str, v: &str| {
            if v.is_empty() {
                Err(format!("filter {what}: needs a name after the colon"))
            } else {
                Ok(v.as_bytes().to_vec())
            }
        };
        match s.split_once(':') {
            None if s == "any" => Ok(Filter::Any),
            None if s == "block_rt" => Ok(Filter::BlockRealTime),
            Some(("bucket", v)) => named("bucket", v).map(Filter::Bucket),
            Some(("prefix", v)) => named("prefix", v).map(Filter::Prefix),
            Some(("type", v)) => named("type", v).map(Filter::Type),
            _ => Err(format!(
                "bad repl filter {s:?}: one of any, block_rt, bucket:NAME, prefix:PREFIX, type:TYPE"
            )),
        }
    }

    /// Whether a real-time write to `storage_bucket` goes to the queue.
    pub fn takes(&self, storage_bucket: &[u8]) -> bool {
        let (btype, name) = split_storage_bucket(storage_bucket);
        match self {
            Filter::Any => true,
            Filter::BlockRealTime => false,
            Filter::Bucket(b) => name == b.as_slice(),
            Filter::Prefix(p) => name.starts_with(p),
            Filter::Type(t) => btype.unwrap_or(DEFAULT_TYPE) == t.as_slice(),
        }
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match self {
            Filter::Any => write!(f, "any"),
            Filter::BlockRealTime => write!(f, "block_rt"),
            Filter::Bucket(b) => write!(f, "bucket:{}", s(b)),
            Filter::Prefix(p) => write!(f, "prefix:{}", s(p)),
            Filter::Type(t) => write!(f, "type:{}", s(t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::keying::storage_bucket;

    #[test]
    fn parse_and_print_round_trip() {
        for s in ["any", "block_rt", "bucket:b1", "prefix:nhs_", "type:maps"] {
            let f = Filter::parse(s).map(|f| f.to_string());
            assert_eq!(f.as_deref(), Ok(s));
        }
        for bad in ["", "all", "bucket:", "bucket", "kind:x", "prefix:"] {
            assert!(Filter::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn filters_match_type_and_name() {
        let plain = storage_bucket(None, b"nhs_docs");
        let typed = storage_bucket(Some(b"maps"), b"nhs_docs");
        let other = storage_bucket(Some(b"maps"), b"other");
        let f = |s: &str| Filter::parse(s).unwrap_or(Filter::BlockRealTime);
        assert!(f("any").takes(&plain) && f("any").takes(&typed));
        assert!(!f("block_rt").takes(&plain));
        assert!(f("bucket:nhs_docs").takes(&plain) && f("bucket:nhs_docs").takes(&typed));
        assert!(!f("bucket:nhs_docs").takes(&other));
        assert!(f("prefix:nhs").takes(&typed) && !f("prefix:nhs").takes(&other));
        assert!(f("type:maps").takes(&typed) && f("type:maps").takes(&other));
        assert!(!f("type:maps").takes(&plain));
        assert!(f("type:default").takes(&plain) && !f("type:default").takes(&typed));
    }
}
