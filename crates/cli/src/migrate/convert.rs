//! From what a source's PB API answers to the object Basalt stores: the
//! vclock and the siblings of an `RpbGetResp` (and, for a data-type
//! bucket, the value of a `DtFetchResp`) as a [`RiakObject`].
//!
//! **Clocks.** Riak hands a vclock out as `riak_object:encode_vclock/1`
//! encodes it: with the default `vclock_data_encoding` capability
//! (`encode_zlib`) `zlib:zip(term_to_binary(VClock))` (raw deflate, no
//! zlib header), otherwise `term_to_binary({Method, VClock})`. The clock
//! term is riak_core's `[{Actor, {Counter, Timestamp}}]`, the timestamp in
//! Gregorian seconds (`calendar:datetime_to_gregorian_seconds`). Each
//! entry becomes one of Basalt's clock entries: the actor's bytes as they
//! are when the actor is a binary (Riak's vnode ids are), else the
//! actor's external term bytes; the timestamp moved to Unix seconds. The
//! mapping is a pure function of the source clock, so the same source
//! version always becomes the same Basalt clock (a copy applied twice
//! merges into itself), and a newer source version, whose clock descends
//! the older one, still descends it here. A Basalt node as the source
//! hands out its own encoding (`crate::object::vclock`), read as it is.
//!
//! **Siblings** keep value, content type, charset, encoding, vtag,
//! last-modified, user metadata, 2i terms, links and the tombstone flag.
//! They carry no dot (Riak's PB API does not expose one): Basalt keeps a
//! dot-less sibling until a clock that dominates the object's replaces it.
//!
//! **Tombstones** (a GET with `deletedvclock` answering only a clock) are
//! one deleted sibling whose last-modified time is the clock's newest
//! timestamp: a function of the clock, so copying it twice adds nothing.

use basalt_server::crdt::DataType;
use basalt_server::datatypes::rebuild::rebuild;
use basalt_server::mapred::etf::scan::{self, Bounds};
use basalt_server::object::vclock::{Entry, VClock};
use basalt_server::object::{Content, RiakObject};
use eetf::Term;
use riak_pb::{DtFetchResp, RpbGetResp};
use std::io::Read;

/// Seconds from 0000-01-01 (Gregorian) to the Unix epoch.
const GREGORIAN_UNIX_OFFSET: u64 = 62_167_219_200;
/// The largest clock accepted, inflated (Riak prunes clocks at 50 entries;
/// this is far above any pruned clock).
pub const MAX_VCLOCK_BYTES: usize = 1 << 20;
/// The bounds of a clock's external term.
const CLOCK_TERM: Bounds = Bounds {
    max_bytes: MAX_VCLOCK_BYTES,
    max_depth: 16,
    max_terms: 100_000,
};

/// Why a source answer could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The clock is neither Basalt's nor Riak's encoding.
    #[error("unreadable vclock: {0}")]
    Clock(String),
    /// A data-type value that cannot be rebuilt.
    #[error(transparent)]
    DataType(#[from] basalt_server::datatypes::rebuild::RebuildError),
}

/// The source's clock bytes as a Basalt clock.
pub fn decode_vclock(bytes: &[u8]) -> Result<VClock, ConvertError> {
    if let Ok(vc) = VClock::decode(bytes) {
        return Ok(vc);
    }
    let term = if bytes.first() == Some(&131) {
        let t = scan::decode(bytes, &CLOCK_TERM).map_err(|e| ConvertError::Clock(e.to_string()))?;
        // {Method, Encoded}: encode_raw holds the clock itself,
        // encode_zlib the zipped bytes.
        match t {
            Term::Tuple(t) if t.elements.len() == 2 => {
                let mut e = t.elements.into_iter();
                let method = e.next();
                let inner = e.next().unwrap_or(Term::List(eetf::List::nil()));
                match (method, inner) {
                    (Some(Term::Atom(a)), inner) if a.name == "encode_raw" => inner,
                    (Some(Term::Atom(a)), Term::Binary(b)) if a.name == "encode_zlib" => {
                        unzip_term(&b.bytes)?
                    }
                    (m, _) => {
                        return Err(ConvertError::Clock(format!(
                            "unknown vclock encoding method {m:?}"
                        )))
                    }
                }
            }
            other => other,
        }
    } else {
        unzip_term(bytes)?
    };
    clock_of_term(term)
}

/// `binary_to_term(zlib:unzip(Bytes))`, bounded.
fn unzip_term(bytes: &[u8]) -> Result<Term, ConvertError> {
    let mut out = Vec::new();
    flate2::read::DeflateDecoder::new(bytes)
        .take(MAX_VCLOCK_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| ConvertError::Clock(format!("not zlib:zip data: {e}")))?;
    if out.len() > MAX_VCLOCK_BYTES {
        return Err(ConvertError::Clock(format!(
            "inflates past {MAX_VCLOCK_BYTES} bytes"
        )));
    }
    scan::decode(&out, &CLOCK_TERM).map_err(|e| ConvertError::Clock(e.to_string()))
}

fn int_of(t: &Term) -> Option<u64> {
    match t {
        Term::FixInteger(i) => u64::try_from(i.value).ok(),
        Term::BigInteger(b) => b.value.to_string().parse().ok(),
        _ => None,
    }
}

/// riak_core's `[{Actor, {Counter, Timestamp}}]` as a Basalt clock.
fn clock_of_term(term: Term) -> Result<VClock, ConvertError> {
    let elements = match term {
        Term::List(l) => l.elements,
        Term::ByteList(_) => return Err(ConvertError::Clock("a string, not a clock".into())),
        other => return Err(ConvertError::Clock(format!("not a list: {other}"))),
    };
    let mut entries = Vec::with_capacity(elements.len());
    for e in elements {
        let bad = || ConvertError::Clock(format!("not a clock entry: {e}"));
        let Term::Tuple(t) = &e else {
            return Err(bad());
        };
        let [actor, Term::Tuple(ct)] = t.elements.as_slice() else {
            return Err(bad());
        };
        let [c, ts] = ct.elements.as_slice() else {
            return Err(bad());
        };
        let counter = int_of(c).ok_or_else(bad)?;
        let timestamp = int_of(ts)
            .ok_or_else(bad)?
            .saturating_sub(GREGORIAN_UNIX_OFFSET);
        let actor = match actor {
            Term::Binary(b) => b.bytes.clone(),
            other => {
                let mut out = Vec::new();
                other
                    .encode(&mut out)
                    .map_err(|e| ConvertError::Clock(format!("actor term: {e}")))?;
                out
            }
        };
        entries.push(Entry {
            actor,
            counter,
            timestamp,
        });
    }
    Ok(VClock::from_entries(entries))
}

/// What one source GET holds.
#[derive(Debug)]
pub enum Fetched {
    /// Nothing there (the key went after it was listed).
    Missing,
    /// Only a tombstone: its object (one deleted sibling).
    Tombstone(RiakObject),
    /// An object (siblings possibly including tombstones).
    Object(RiakObject),
}

/// An `RpbGetResp` (asked with `deletedvclock`) as what it holds.
pub fn from_get(resp: RpbGetResp) -> Result<Fetched, ConvertError> {
    let Some(vc) = resp.vclock else {
        return Ok(Fetched::Missing);
    };
    let vclock = decode_vclock(&vc)?;
    if resp.content.is_empty() {
        let newest = vclock.entries().iter().map(|e| e.timestamp).max();
        let tomb = Content {
            deleted: true,
            last_mod: newest.unwrap_or(0).min(u64::from(u32::MAX)) as u32,
            ..Content::default()
        };
        return Ok(Fetched::Tombstone(RiakObject {
            vclock,
            contents: vec![tomb],
        }));
    }
    let mut o = RiakObject {
        vclock,
        contents: resp.content.into_iter().map(Content::from_pb).collect(),
    };
    o.canonicalize();
    Ok(Fetched::Object(o))
}

/// `o` (a data type's object as a raw GET answered it) with its value
/// replaced by the Basalt state of `dt`'s value: one sibling, the newest
/// live one's metadata, the clock unchanged.
pub fn with_datatype(
    mut o: RiakObject,
    t: DataType,
    dt: &DtFetchResp,
) -> Result<RiakObject, ConvertError> {
    let Some(newest) = o
        .contents
        .iter()
        .filter(|c| !c.deleted)
        .max_by_key(|c| (c.last_mod_us(), c.vtag.clone()))
        .cloned()
    else {
        return Ok(o);
    };
    let state = rebuild(t, dt, newest.last_mod_us())?;
    let value = state.encode();
    let content = Content {
        value_len: value.len() as u32,
        value,
        content_type: Some(t.content_type().as_bytes().to_vec()),
        ..newest
    };
    o.contents = vec![content];
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn riak_clock(entries: &[(&[u8], u32, u64)]) -> Term {
        let list: Vec<Term> = entries
            .iter()
            .map(|(a, c, ts)| {
                Term::Tuple(eetf::Tuple::from(vec![
                    Term::Binary(eetf::Binary::from(a.to_vec())),
                    Term::Tuple(eetf::Tuple::from(vec![
                        Term::FixInteger(eetf::FixInteger::from(*c as i32)),
                        Term::BigInteger(eetf::BigInteger::from(*ts)),
                    ])),
                ]))
            })
            .collect();
        Term::List(eetf::List::from(list))
    }

    fn t2b(t: &Term) -> Vec<u8> {
        let mut out = Vec::new();
        t.encode(&mut out).expect("encodes");
        out
    }

    /// `zlib:zip/1`: raw deflate.
    fn zip(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(b).expect("deflate");
        e.finish().expect("deflate")
    }

    #[test]
    fn riak_clocks_in_every_encoding_become_the_same_basalt_clock() {
        let unix = 1_700_000_000u64;
        let term = riak_clock(&[
            (b"vnode-b", 3, unix + GREGORIAN_UNIX_OFFSET),
            (b"vnode-a", 7, unix + 5 + GREGORIAN_UNIX_OFFSET),
        ]);
        let zlib = zip(&t2b(&term));
        let raw = t2b(&Term::Tuple(eetf::Tuple::from(vec![
            Term::Atom(eetf::Atom::from("encode_raw")),
            term.clone(),
        ])));
        let embedded_zlib = t2b(&Term::Tuple(eetf::Tuple::from(vec![
            Term::Atom(eetf::Atom::from("encode_zlib")),
            Term::Binary(eetf::Binary::from(zlib.clone())),
        ])));
        let want = VClock::from_entries([
            Entry {
                actor: b"vnode-a".to_vec(),
                counter: 7,
                timestamp: unix + 5,
            },
            Entry {
                actor: b"vnode-b".to_vec(),
                counter: 3,
                timestamp: unix,
            },
        ]);
        for bytes in [&zlib, &raw, &embedded_zlib] {
            assert_eq!(decode_vclock(bytes).expect("decodes"), want);
        }
        // Basalt's own encoding is read as it is.
        assert_eq!(decode_vclock(&want.encode()).expect("decodes"), want);
        // Garbage is an error, never a panic.
        assert!(decode_vclock(b"\x83\x6c\xff\xff\xff\xff").is_err());
        assert!(decode_vclock(b"not a clock").is_err());
    }

    #[test]
    fn a_tombstone_is_a_function_of_its_clock() {
        let mut vc = VClock::new();
        vc.increment(b"a", 1_700_000_000);
        let resp = || RpbGetResp {
            vclock: Some(vc.encode()),
            ..Default::default()
        };
        let (Fetched::Tombstone(x), Fetched::Tombstone(y)) =
            (from_get(resp()).expect("ok"), from_get(resp()).expect("ok"))
        else {
            panic!("not tombstones")
        };
        assert_eq!(x, y);
        assert!(x.is_deleted());
        assert_eq!(x.contents[0].last_mod, 1_700_000_000);
        assert!(matches!(
            from_get(RpbGetResp::default()).expect("ok"),
            Fetched::Missing
        ));
    }
}
