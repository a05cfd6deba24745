//! Ledger keys: an order-preserving byte encoding of (kind, bucket, key, ...).
//!
//! Every ledger key is one byte string whose byte order equals the order of
//! its parts, so the ledger, the SST files and range scans all compare keys
//! with plain `memcmp`:
//!
//! ```text
//! ledger key := kind:u8 component*
//! component  := escaped bytes, then 0x00 0x01
//! escaped    := every 0x00 byte written as 0x00 0xFF, other bytes as is
//! ```
//!
//! A component that is a prefix of another sorts first (its terminator
//! `0x00 0x01` is below both a non-zero byte and an escaped `0x00 0xFF`).
//!
//! Kinds: `o` = object (`bucket`, `key`); `i` = index entry (`bucket`,
//! `field`, `term`, `key`; added by the secondary-index work). The kind tag is
//! the first byte, so all objects sort before all index entries of any bucket.

use crate::codec::DecodeError;

/// What a ledger key refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum KeyKind {
    /// An object: components bucket, key.
    Object = b'o',
    /// A secondary-index entry: components bucket, field, term, key.
    Index = b'i',
}

impl KeyKind {
    /// Parses the kind tag byte.
    pub fn from_byte(b: u8) -> Option<KeyKind> {
        match b {
            b'o' => Some(KeyKind::Object),
            b'i' => Some(KeyKind::Index),
            _ => None,
        }
    }

    /// Number of components a key of this kind has.
    pub fn components(self) -> usize {
        match self {
            KeyKind::Object => 2,
            KeyKind::Index => 4,
        }
    }
}

const ESCAPE: u8 = 0x00;
const ESCAPED_ZERO: u8 = 0xFF;
const TERMINATOR: u8 = 0x01;

fn push_component(out: &mut Vec<u8>, part: &[u8]) {
    for &b in part {
        if b == ESCAPE {
            out.push(ESCAPE);
            out.push(ESCAPED_ZERO);
        } else {
            out.push(b);
        }
    }
    out.push(ESCAPE);
    out.push(TERMINATOR);
}

/// Encodes a key of `kind` from its components.
pub fn encode(kind: KeyKind, parts: &[&[u8]]) -> Vec<u8> {
    debug_assert_eq!(parts.len(), kind.components());
    let len: usize = parts.iter().map(|p| p.len() + 2).sum();
    let mut out = Vec::with_capacity(1 + len + len / 16);
    out.push(kind as u8);
    for p in parts {
        push_component(&mut out, p);
    }
    out
}

/// Encodes an object key.
pub fn object(bucket: &[u8], key: &[u8]) -> Vec<u8> {
    encode(KeyKind::Object, &[bucket, key])
}

/// The common prefix of every key of `kind` whose first components are `parts`.
pub fn prefix(kind: KeyKind, parts: &[&[u8]]) -> Vec<u8> {
    debug_assert!(parts.len() <= kind.components());
    let mut out = vec![kind as u8];
    for p in parts {
        push_component(&mut out, p);
    }
    out
}

/// The smallest byte string greater than every string starting with `prefix`,
/// or `None` if there is none (the prefix is all 0xFF).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A decoded ledger key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The kind tag.
    pub kind: KeyKind,
    /// The components, unescaped.
    pub parts: Vec<Vec<u8>>,
}

/// Decodes an encoded ledger key. Never panics on bad input.
pub fn decode(encoded: &[u8]) -> Result<Decoded, DecodeError> {
    let (&tag, mut rest) = encoded
        .split_first()
        .ok_or_else(|| DecodeError("empty ledger key".into()))?;
    let kind = KeyKind::from_byte(tag)
        .ok_or_else(|| DecodeError(format!("unknown key kind tag 0x{tag:02x}")))?;
    let mut parts = Vec::with_capacity(kind.components());
    for _ in 0..kind.components() {
        let mut part = Vec::new();
        loop {
            match rest {
                [ESCAPE, TERMINATOR, tail @ ..] => {
                    rest = tail;
                    break;
                }
                [ESCAPE, ESCAPED_ZERO, tail @ ..] => {
                    part.push(0);
                    rest = tail;
                }
                [ESCAPE, ..] | [] => {
                    return Err(DecodeError(
                        "bad escape or missing terminator in key".into(),
                    ))
                }
                [b, tail @ ..] => {
                    part.push(*b);
                    rest = tail;
                }
            }
        }
        parts.push(part);
    }
    if !rest.is_empty() {
        return Err(DecodeError("trailing bytes after key components".into()));
    }
    Ok(Decoded { kind, parts })
}

/// Splits the first escaped component off `encoded` (which starts right
/// after the kind tag or a previous component): returns it unescaped and the
/// rest. Never panics on bad input.
pub fn split_component(encoded: &[u8]) -> Result<(Vec<u8>, &[u8]), DecodeError> {
    let mut part = Vec::with_capacity(encoded.len().min(64));
    let mut rest = encoded;
    loop {
        match rest {
            [ESCAPE, TERMINATOR, tail @ ..] => return Ok((part, tail)),
            [ESCAPE, ESCAPED_ZERO, tail @ ..] => {
                part.push(0);
                rest = tail;
            }
            [ESCAPE, ..] | [] => {
                return Err(DecodeError(
                    "bad escape or missing terminator in key".into(),
                ))
            }
            [b, tail @ ..] => {
                part.push(*b);
                rest = tail;
            }
        }
    }
}

/// Decodes an object key into (bucket, key).
pub fn decode_object(encoded: &[u8]) -> Result<(Vec<u8>, Vec<u8>), DecodeError> {
    let d = decode(encoded)?;
    if d.kind != KeyKind::Object {
        return Err(DecodeError("not an object key".into()));
    }
    let mut it = d.parts.into_iter();
    match (it.next(), it.next()) {
        (Some(b), Some(k)) => Ok((b, k)),
        _ => Err(DecodeError("object key needs two components".into())),
    }
}

/// The 64-bit hash of an encoded key, used by blooms and lookups (xxh3).
pub fn hash(encoded: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(encoded)
}

/// Renders bytes for humans: UTF-8 text as is, otherwise hex.
pub fn display_bytes(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if !s.chars().any(char::is_control) => s.to_string(),
        _ => {
            let mut out = String::from("0x");
            for x in b {
                out.push_str(&format!("{x:02x}"));
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn round_trip_with_zero_bytes() {
        let k = object(b"b\0x", b"\0\0k\xff");
        let (b, key) = decode_object(&k).unwrap();
        assert_eq!(b, b"b\0x");
        assert_eq!(key, b"\0\0k\xff");
    }

    #[test]
    fn bucket_prefix_covers_exactly_the_bucket() {
        let p = prefix(KeyKind::Object, &[b"ab"]);
        let end = prefix_end(&p).unwrap();
        let inside = object(b"ab", b"zzz");
        let other = object(b"abc", b"a");
        let shorter = object(b"a", b"zzzz");
        assert!(inside.as_slice() >= p.as_slice() && inside < end);
        assert!(!(other.as_slice() >= p.as_slice() && other < end));
        assert!(!(shorter.as_slice() >= p.as_slice() && shorter < end));
    }

    #[test]
    fn garbage_does_not_panic() {
        for bad in [
            &b""[..],
            b"o",
            b"o\0",
            b"o\0\x05",
            b"x\0\x01\0\x01",
            b"oab\0\x01",
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn order_is_preserved(b1 in proptest::collection::vec(any::<u8>(), 0..6),
                              k1 in proptest::collection::vec(any::<u8>(), 0..6),
                              b2 in proptest::collection::vec(any::<u8>(), 0..6),
                              k2 in proptest::collection::vec(any::<u8>(), 0..6)) {
            let e1 = object(&b1, &k1);
            let e2 = object(&b2, &k2);
            prop_assert_eq!((b1.clone(), k1.clone()).cmp(&(b2.clone(), k2.clone())), e1.cmp(&e2));
            prop_assert_eq!(decode_object(&e1).unwrap(), (b1, k1));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode(&bytes);
        }
    }
}
