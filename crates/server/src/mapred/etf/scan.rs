//! Bounded decoding of Erlang's external term format: a client's bytes
//! are walked once without building anything ([`check`]) before `eetf`
//! decodes them, because `eetf`'s decoder trusts its input. It recurses
//! once per nesting level (a deep term would overflow the stack), sizes
//! its vectors from the declared counts before reading them (a 10-byte
//! term declaring 2^32 elements would allocate gigabytes), panics on the
//! distribution-header and atom-cache tags and inflates a compressed term
//! without bound.
//!
//! The walk keeps an explicit stack of "terms still to read" per open
//! container and refuses, as [`ScanError::Malformed`] (what Erlang's
//! `binary_to_term` calls `badarg`): an unknown or unsupported tag, a
//! count or size larger than the bytes left (every element takes at
//! least one byte), a non-finite float, a bit binary with other than
//! 1–8 bits in its last byte, a pid, port, reference or fun whose parts
//! are not the terms `eetf` expects, and bytes after the term. As
//! [`ScanError::Limit`]: nesting deeper than [`Bounds::max_depth`], more
//! than [`Bounds::max_terms`] terms, or more than [`Bounds::max_bytes`]
//! bytes (a compressed term, tag 80, is inflated here to at most its
//! declared size, itself at most `max_bytes`; it may not nest another).
//! Pure.

use crate::limits::{MAPRED_ETF_MAX_DEPTH, MAPRED_ETF_MAX_JOB_BYTES, MAPRED_ETF_MAX_TERMS};
use eetf::Term;
use std::io::Read;

/// Why bytes are not a term Basalt decodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanError {
    /// Not a well-formed external term (Erlang: `badarg`).
    Malformed(String),
    /// Well-formed, past a limit.
    Limit(String),
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::Malformed(m) => write!(f, "badarg (not an Erlang external term: {m})"),
            ScanError::Limit(m) => f.write_str(m),
        }
    }
}

/// The bounds of one decode.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Bytes of the term (after inflating a compressed one).
    pub max_bytes: usize,
    /// Open containers at once.
    pub max_depth: usize,
    /// Terms in all.
    pub max_terms: usize,
}

/// The bounds of a MapReduce job (`limits::MAPRED_ETF_*`).
pub const JOB: Bounds = Bounds {
    max_bytes: MAPRED_ETF_MAX_JOB_BYTES,
    max_depth: MAPRED_ETF_MAX_DEPTH,
    max_terms: MAPRED_ETF_MAX_TERMS,
};

const VERSION: u8 = 131;
const COMPRESSED: u8 = 80;

fn malformed<T>(m: impl Into<String>) -> Result<T, ScanError> {
    Err(ScanError::Malformed(m.into()))
}

/// Decodes one whole external term (version byte first, possibly
/// compressed) within `bounds`.
pub fn decode(bytes: &[u8], bounds: &Bounds) -> Result<Term, ScanError> {
    if bytes.len() > bounds.max_bytes {
        return Err(ScanError::Limit(format!(
            "the Erlang term is {} bytes; at most {} (limits::MAPRED_ETF_MAX_JOB_BYTES)",
            bytes.len(),
            bounds.max_bytes
        )));
    }
    let Some((&VERSION, body)) = bytes.split_first() else {
        return malformed("it does not start with the version byte 131");
    };
    let inflated;
    let body = if body.first() == Some(&COMPRESSED) {
        inflated = inflate(&body[1..], bounds)?;
        if inflated.first() == Some(&COMPRESSED) {
            return malformed("a compressed term inside a compressed term");
        }
        &inflated[..]
    } else {
        body
    };
    check(body, bounds)?;
    let mut whole = Vec::with_capacity(body.len() + 1);
    whole.push(VERSION);
    whole.extend_from_slice(body);
    Term::decode(&whole[..]).map_err(|e| ScanError::Malformed(e.to_string()))
}

/// A compressed term's body: `Size:u32` then zlib data inflating to
/// exactly `Size` bytes, at most `max_bytes`.
fn inflate(data: &[u8], bounds: &Bounds) -> Result<Vec<u8>, ScanError> {
    let Some((size, z)) = data.split_first_chunk::<4>() else {
        return malformed("a compressed term without its size");
    };
    let size = u32::from_be_bytes(*size) as usize;
    if size > bounds.max_bytes {
        return Err(ScanError::Limit(format!(
            "the compressed Erlang term inflates to {size} bytes; at most {} (limits::MAPRED_ETF_MAX_JOB_BYTES)",
            bounds.max_bytes
        )));
    }
    let mut out = Vec::with_capacity(size);
    flate2::read::ZlibDecoder::new(z)
        .take(size as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| ScanError::Malformed(format!("compressed term: {e}")))?;
    if out.len() != size {
        return malformed(format!(
            "a compressed term declared {size} bytes and inflated to {}",
            out.len()
        ));
    }
    Ok(out)
}

struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cur<'a> {
    fn left(&self) -> usize {
        self.b.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ScanError> {
        if n > self.left() {
            return malformed(format!(
                "{n} bytes declared at offset {}, {} left",
                self.pos,
                self.left()
            ));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, ScanError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<usize, ScanError> {
        let s = self.take(2)?;
        Ok(usize::from(u16::from_be_bytes([s[0], s[1]])))
    }

    fn u32(&mut self) -> Result<usize, ScanError> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize)
    }

    /// An atom where `eetf` wants one (a pid's node, a fun's module).
    fn atom(&mut self) -> Result<(), ScanError> {
        let n = match self.u8()? {
            ATOM | ATOM_UTF8 => self.u16()?,
            SMALL_ATOM | SMALL_ATOM_UTF8 => usize::from(self.u8()?),
            t => return malformed(format!("tag {t} where an atom belongs")),
        };
        self.take(n).map(|_| ())
    }

    /// A fixed-size integer where `eetf` wants one (a fun's index).
    fn fix_int(&mut self) -> Result<(), ScanError> {
        match self.u8()? {
            SMALL_INTEGER => self.take(1).map(|_| ()),
            INTEGER => self.take(4).map(|_| ()),
            t => malformed(format!("tag {t} where a small integer belongs")),
        }
    }

    /// A pid where `eetf` wants one (a fun's creator).
    fn pid(&mut self) -> Result<(), ScanError> {
        let rest = match self.u8()? {
            PID => 9,
            NEW_PID => 12,
            t => return malformed(format!("tag {t} where a pid belongs")),
        };
        self.atom()?;
        self.take(rest).map(|_| ())
    }

    fn sign(&mut self) -> Result<(), ScanError> {
        match self.u8()? {
            0 | 1 => Ok(()),
            s => malformed(format!("bignum sign {s}")),
        }
    }
}

const NEW_FLOAT: u8 = 70;
const BIT_BINARY: u8 = 77;
const NEW_PID: u8 = 88;
const NEW_PORT: u8 = 89;
const NEWER_REFERENCE: u8 = 90;
const SMALL_INTEGER: u8 = 97;
const INTEGER: u8 = 98;
const FLOAT: u8 = 99;
const ATOM: u8 = 100;
const REFERENCE: u8 = 101;
const PORT: u8 = 102;
const PID: u8 = 103;
const SMALL_TUPLE: u8 = 104;
const LARGE_TUPLE: u8 = 105;
const NIL: u8 = 106;
const STRING: u8 = 107;
const LIST: u8 = 108;
const BINARY: u8 = 109;
const SMALL_BIG: u8 = 110;
const LARGE_BIG: u8 = 111;
const NEW_FUN: u8 = 112;
const EXPORT: u8 = 113;
const NEW_REFERENCE: u8 = 114;
const SMALL_ATOM: u8 = 115;
const MAP: u8 = 116;
const FUN: u8 = 117;
const ATOM_UTF8: u8 = 118;
const SMALL_ATOM_UTF8: u8 = 119;
const V4_PORT: u8 = 120;

/// Walks one term (no version byte) and checks it is well-formed, within
/// `bounds`, and all of `body`.
pub fn check(body: &[u8], bounds: &Bounds) -> Result<(), ScanError> {
    let mut c = Cur { b: body, pos: 0 };
    // Terms still to read in each open container (the root first).
    let mut stack: Vec<usize> = vec![1];
    let mut terms = 0usize;
    while let Some(top) = stack.last_mut() {
        if *top == 0 {
            stack.pop();
            continue;
        }
        *top -= 1;
        terms += 1;
        if terms > bounds.max_terms {
            return Err(ScanError::Limit(format!(
                "the Erlang term has more than {} terms (limits::MAPRED_ETF_MAX_TERMS)",
                bounds.max_terms
            )));
        }
        let at = c.pos;
        let children = match c.u8()? {
            SMALL_INTEGER => c.take(1).map(|_| 0)?,
            INTEGER => c.take(4).map(|_| 0)?,
            FLOAT => c.take(31).map(|_| 0)?,
            NEW_FLOAT => {
                let s = c.take(8)?;
                let f = f64::from_be_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
                if !f.is_finite() {
                    return malformed(format!("a non-finite float at offset {at}"));
                }
                0
            }
            ATOM | ATOM_UTF8 | STRING => {
                let n = c.u16()?;
                c.take(n).map(|_| 0)?
            }
            SMALL_ATOM | SMALL_ATOM_UTF8 => {
                let n = usize::from(c.u8()?);
                c.take(n).map(|_| 0)?
            }
            SMALL_TUPLE => usize::from(c.u8()?),
            LARGE_TUPLE => c.u32()?,
            NIL => 0,
            // The elements, then the tail.
            LIST => c.u32()?.saturating_add(1),
            BINARY => {
                let n = c.u32()?;
                c.take(n).map(|_| 0)?
            }
            BIT_BINARY => {
                let n = c.u32()?;
                let bits = c.u8()?;
                if !(1..=8).contains(&bits) {
                    return malformed(format!("a bit binary with {bits} bits in its last byte"));
                }
                c.take(n).map(|_| 0)?
            }
            SMALL_BIG => {
                let n = usize::from(c.u8()?);
                c.sign()?;
                c.take(n).map(|_| 0)?
            }
            LARGE_BIG => {
                let n = c.u32()?;
                c.sign()?;
                c.take(n).map(|_| 0)?
            }
            MAP => c.u32()?.saturating_mul(2),
            PID => c.atom().and_then(|()| c.take(9)).map(|_| 0)?,
            NEW_PID | V4_PORT => c.atom().and_then(|()| c.take(12)).map(|_| 0)?,
            PORT | REFERENCE => c.atom().and_then(|()| c.take(5)).map(|_| 0)?,
            NEW_PORT => c.atom().and_then(|()| c.take(8)).map(|_| 0)?,
            NEW_REFERENCE => {
                let n = c.u16()?;
                c.atom()?;
                c.take(1 + 4 * n).map(|_| 0)?
            }
            NEWER_REFERENCE => {
                let n = c.u16()?;
                c.atom()?;
                c.take(4 + 4 * n).map(|_| 0)?
            }
            EXPORT => {
                c.atom()?;
                c.atom()?;
                if c.u8()? != SMALL_INTEGER {
                    return malformed(format!("an export fun's arity at offset {at}"));
                }
                c.take(1).map(|_| 0)?
            }
            NEW_FUN => {
                c.take(4 + 1 + 16 + 4)?;
                let free = c.u32()?;
                c.atom()?;
                c.fix_int()?;
                c.fix_int()?;
                c.pid()?;
                free
            }
            FUN => {
                let free = c.u32()?;
                c.pid()?;
                c.atom()?;
                c.fix_int()?;
                c.fix_int()?;
                free
            }
            t => return malformed(format!("tag {t} at offset {at}")),
        };
        if children > 0 {
            if children > c.left() {
                return malformed(format!(
                    "{children} elements declared at offset {at}, {} bytes left",
                    c.left()
                ));
            }
            if stack.len() > bounds.max_depth {
                return Err(ScanError::Limit(format!(
                    "the Erlang term nests deeper than {} levels (limits::MAPRED_ETF_MAX_DEPTH)",
                    bounds.max_depth
                )));
            }
            stack.push(children);
        }
    }
    if c.left() != 0 {
        return malformed(format!("{} bytes after the term", c.left()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use eetf::{Atom, Binary, FixInteger, List, Tuple};

    fn enc(t: &Term) -> Vec<u8> {
        let mut v = Vec::new();
        t.encode(&mut v).expect("encode");
        v
    }

    fn nested(depth: usize) -> Vec<u8> {
        // [[[...[]...]]] as LIST_EXT of one element each.
        let mut v = vec![VERSION];
        for _ in 0..depth {
            v.extend_from_slice(&[LIST, 0, 0, 0, 1]);
        }
        v.extend(std::iter::repeat_n(NIL, depth + 1));
        v
    }

    #[test]
    fn decodes_what_eetf_encodes() {
        let t = Term::from(List::from(vec![
            Term::from(Tuple::from(vec![
                Term::from(Atom::from("inputs")),
                Term::from(Binary::from(&b"b"[..])),
            ])),
            Term::from(FixInteger::from(-5)),
            Term::from(eetf::Float::try_from(1.5).expect("finite")),
            Term::from(eetf::BigInteger::from(u64::MAX)),
            Term::from(eetf::ByteList::from("text")),
            Term::from(eetf::ExternalFun::from(("m", "f", 3))),
        ]));
        assert_eq!(decode(&enc(&t), &JOB), Ok(t));
    }

    #[test]
    fn depth_is_bounded_before_decoding() {
        let b = Bounds {
            max_depth: 8,
            ..JOB
        };
        assert!(decode(&nested(7), &b).is_ok());
        assert!(matches!(decode(&nested(9), &b), Err(ScanError::Limit(m)) if m.contains("deeper")));
        // A million levels: refused without recursion.
        assert!(matches!(
            decode(&nested(1_000_000), &JOB),
            Err(ScanError::Limit(_))
        ));
    }

    #[test]
    fn counts_and_sizes_are_checked_against_the_bytes() {
        // A list declaring 2^32-1 elements in 10 bytes.
        let v = [VERSION, LIST, 0xff, 0xff, 0xff, 0xff, NIL, NIL];
        assert!(
            matches!(decode(&v, &JOB), Err(ScanError::Malformed(m)) if m.contains("elements declared"))
        );
        let v = [VERSION, BINARY, 0xff, 0xff, 0xff, 0xff, 1];
        assert!(matches!(decode(&v, &JOB), Err(ScanError::Malformed(_))));
        let v = [VERSION, MAP, 0x80, 0, 0, 0];
        assert!(matches!(decode(&v, &JOB), Err(ScanError::Malformed(_))));
        let b = Bounds {
            max_terms: 3,
            ..JOB
        };
        let v = [VERSION, LIST, 0, 0, 0, 3, NIL, NIL, NIL, NIL];
        assert!(matches!(decode(&v, &b), Err(ScanError::Limit(m)) if m.contains("terms")));
    }

    #[test]
    fn tags_eetf_would_panic_on_are_refused() {
        for v in [
            vec![VERSION, 68, 0],
            vec![VERSION, 82, 0],
            vec![VERSION, BIT_BINARY, 0, 0, 0, 1, 0, 0xff],
            vec![VERSION, NEW_FLOAT, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0],
            vec![VERSION, SMALL_INTEGER, 1, 2],
            vec![1, SMALL_INTEGER, 1],
            vec![],
            vec![VERSION],
        ] {
            assert!(
                matches!(decode(&v, &JOB), Err(ScanError::Malformed(_))),
                "{v:?}"
            );
        }
    }

    #[test]
    fn compressed_terms_inflate_within_the_bound() {
        use std::io::Write;
        let t = Term::from(Binary::from(vec![7u8; 10_000]));
        let plain = enc(&t);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(&plain[1..]).expect("zlib");
        let z = z.finish().expect("zlib");
        let mut v = vec![VERSION, COMPRESSED];
        v.extend_from_slice(&((plain.len() - 1) as u32).to_be_bytes());
        v.extend_from_slice(&z);
        assert_eq!(decode(&v, &JOB), Ok(t));
        let small = Bounds {
            max_bytes: 5000,
            ..JOB
        };
        assert!(matches!(decode(&v, &small), Err(ScanError::Limit(_))));
        // A size that lies.
        v[2..6].copy_from_slice(&100u32.to_be_bytes());
        assert!(matches!(decode(&v, &JOB), Err(ScanError::Malformed(_))));
    }

    proptest::proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let mut v = vec![VERSION];
            v.extend_from_slice(&bytes);
            let _ = decode(&v, &JOB);
            let _ = decode(&bytes, &JOB);
        }

        #[test]
        fn mutated_terms_never_panic(pos in 0usize..64, byte in proptest::prelude::any::<u8>()) {
            let t = Term::from(List::from(vec![
                Term::from(Tuple::from(vec![Term::from(Atom::from("a")), Term::from(Binary::from(&b"xyz"[..]))])),
                Term::from(eetf::ExternalFun::from(("m", "f", 2))),
                Term::from(eetf::BigInteger::from(i64::MIN)),
            ]));
            let mut v = enc(&t);
            let i = pos % v.len();
            v[i] = byte;
            let _ = decode(&v, &JOB);
        }
    }
}
