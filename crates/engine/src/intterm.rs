//! `_int` index terms: arbitrary-precision decimal integers, as Riak's
//! (Erlang integers have no size limit), with an order-preserving byte form
//! for the ledger.
//!
//! # Text
//!
//! A term is an optional sign (`+` or `-`) then 1 to
//! [`limits::INDEX_INT_DIGITS_MAX`] decimal digits; leading zeros are allowed
//! and `-0` is `0`. [`canonical`] gives the text results come back in (no
//! `+`, no leading zeros); [`cmp_text`] orders two terms numerically.
//!
//! # Stored form (ledger key component)
//!
//! ```text
//! |v| < 2^63 (i64 except i64::MIN): be64(v as u64 XOR 1<<63)       8 bytes
//! v >= 2^63:                         FF×8  len:u8  magnitude          9 + len
//! v <= -2^63:                        00×8  (255-len):u8  !magnitude   9 + len
//! magnitude := |v| big-endian, no leading zero byte, len in 8..=255
//! ```
//!
//! Values inside `i64` (but `i64::MIN`) keep the 8-byte form stores have
//! always used, so existing stores read and sort as before. Byte order is
//! numeric order: larger positives share the prefix of `i64::MAX` (`FF×8`)
//! and sort after it, longer magnitudes after shorter; negatives from
//! `-2^63` down share the prefix `00×8` and sort, within it, by
//! complemented length and magnitude (more negative first), all below
//! `i64::MIN + 1` (`00×7 01`). An 8-byte `00×8` can only come from a store
//! written before this form: it reads back as `i64::MIN` but sorts below
//! the extended negatives (`docs/formats.md`).

use crate::limits;
use std::cmp::Ordering;

/// A parsed `_int` term: sign and big-endian magnitude without leading
/// zero bytes (empty for 0, which is never negative).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntTerm {
    negative: bool,
    magnitude: Vec<u8>,
}

const EXT_LEN_MIN: usize = 8;
const EXT_LEN_MAX: usize = 255;
const _: () = assert!(limits::INDEX_INT_DIGITS_MAX * 100 / 240 < EXT_LEN_MAX);

impl IntTerm {
    /// Parses decimal text (see the module docs); `None` if it is not an
    /// integer or has more than [`limits::INDEX_INT_DIGITS_MAX`] digits.
    pub fn parse(text: &[u8]) -> Option<IntTerm> {
        let (negative, digits) = match text.first()? {
            b'-' => (true, &text[1..]),
            b'+' => (false, &text[1..]),
            _ => (false, text),
        };
        if digits.is_empty()
            || digits.len() > limits::INDEX_INT_DIGITS_MAX
            || !digits.iter().all(u8::is_ascii_digit)
        {
            return None;
        }
        let mut magnitude: Vec<u8> = Vec::with_capacity(digits.len() / 2 + 1);
        for d in digits {
            // magnitude = magnitude * 10 + d, big-endian.
            let mut carry = u32::from(d - b'0');
            for byte in magnitude.iter_mut().rev() {
                let x = u32::from(*byte) * 10 + carry;
                *byte = (x & 0xFF) as u8;
                carry = x >> 8;
            }
            if carry > 0 {
                magnitude.insert(0, carry as u8);
            }
        }
        Some(IntTerm::new(negative, magnitude))
    }

    fn new(negative: bool, mut magnitude: Vec<u8>) -> IntTerm {
        let zeros = magnitude.iter().take_while(|&&b| b == 0).count();
        magnitude.drain(..zeros);
        IntTerm {
            negative: negative && !magnitude.is_empty(),
            magnitude,
        }
    }

    /// The term as an `i64`, when it fits.
    pub fn to_i64(&self) -> Option<i64> {
        if self.magnitude.len() > 8 {
            return None;
        }
        let mut b = [0u8; 8];
        b[8 - self.magnitude.len()..].copy_from_slice(&self.magnitude);
        let m = u64::from_be_bytes(b);
        if self.negative {
            0i64.checked_sub_unsigned(m)
        } else {
            i64::try_from(m).ok()
        }
    }

    /// Canonical decimal text: no `+`, no leading zeros.
    pub fn to_decimal(&self) -> String {
        if let Some(v) = self.to_i64() {
            return v.to_string();
        }
        let mut digits = Vec::new();
        let mut m = self.magnitude.clone();
        while !m.is_empty() {
            // m, rem = m / 10, m % 10.
            let mut rem = 0u32;
            for byte in m.iter_mut() {
                let x = (rem << 8) | u32::from(*byte);
                *byte = (x / 10) as u8;
                rem = x % 10;
            }
            digits.push(b'0' + rem as u8);
            let zeros = m.iter().take_while(|&&b| b == 0).count();
            m.drain(..zeros);
        }
        if self.negative {
            digits.push(b'-');
        }
        digits.reverse();
        String::from_utf8(digits).unwrap_or_default()
    }

    /// The stored form (module docs); byte order equals numeric order.
    pub fn encode(&self) -> Vec<u8> {
        let small =
            self.magnitude.len() < 8 || (self.magnitude.len() == 8 && self.magnitude[0] < 0x80);
        if small {
            if let Some(v) = self.to_i64() {
                return ((v as u64) ^ (1 << 63)).to_be_bytes().to_vec();
            }
        }
        let len = self.magnitude.len();
        debug_assert!((EXT_LEN_MIN..=EXT_LEN_MAX).contains(&len));
        let mut out = Vec::with_capacity(9 + len);
        if self.negative {
            out.extend_from_slice(&[0u8; 8]);
            out.push((EXT_LEN_MAX - len) as u8);
            out.extend(self.magnitude.iter().map(|b| !b));
        } else {
            out.extend_from_slice(&[0xFFu8; 8]);
            out.push(len as u8);
            out.extend_from_slice(&self.magnitude);
        }
        out
    }

    /// Inverse of [`IntTerm::encode`] (and reads the 8-byte form of older
    /// stores). Never panics; an error says what is wrong.
    pub fn decode(stored: &[u8]) -> Result<IntTerm, String> {
        if let Ok(b) = <[u8; 8]>::try_from(stored) {
            let v = (u64::from_be_bytes(b) ^ (1 << 63)) as i64;
            return Ok(IntTerm::new(v < 0, v.unsigned_abs().to_be_bytes().to_vec()));
        }
        if stored.len() < 9 + EXT_LEN_MIN {
            return Err(format!("integer index term is {} bytes", stored.len()));
        }
        let (prefix, rest) = stored.split_at(8);
        let negative = match prefix {
            [0, 0, 0, 0, 0, 0, 0, 0] => true,
            [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] => false,
            _ => return Err("integer index term has an unknown prefix".into()),
        };
        let len = if negative {
            EXT_LEN_MAX - usize::from(rest[0])
        } else {
            usize::from(rest[0])
        };
        let body = &rest[1..];
        if body.len() != len {
            return Err(format!(
                "integer index term claims {len} magnitude bytes, has {}",
                body.len()
            ));
        }
        let magnitude: Vec<u8> = if negative {
            body.iter().map(|b| !b).collect()
        } else {
            body.to_vec()
        };
        let t = IntTerm {
            negative,
            magnitude,
        };
        // Only values outside the 8-byte form may be extended.
        let ext = t.magnitude.first().is_some_and(|&b| b != 0)
            && (t.magnitude.len() > 8 || t.magnitude[0] >= 0x80);
        if !ext {
            return Err("integer index term in the extended form is not canonical".into());
        }
        Ok(t)
    }
}

impl Ord for IntTerm {
    fn cmp(&self, other: &Self) -> Ordering {
        let mag = |a: &IntTerm, b: &IntTerm| {
            a.magnitude
                .len()
                .cmp(&b.magnitude.len())
                .then_with(|| a.magnitude.cmp(&b.magnitude))
        };
        match (self.negative, other.negative) {
            (false, false) => mag(self, other),
            (true, true) => mag(other, self),
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
        }
    }
}

impl PartialOrd for IntTerm {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Canonical text of an `_int` term, or `None` if it is not one.
pub fn canonical(text: &[u8]) -> Option<String> {
    IntTerm::parse(text).map(|t| t.to_decimal())
}

/// Orders two `_int` terms numerically; `None` if either is not one.
pub fn cmp_text(a: &[u8], b: &[u8]) -> Option<Ordering> {
    Some(IntTerm::parse(a)?.cmp(&IntTerm::parse(b)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(s: &str) -> IntTerm {
        IntTerm::parse(s.as_bytes()).unwrap()
    }

    #[test]
    fn parses_and_prints() {
        assert_eq!(canonical(b"007").as_deref(), Some("7"));
        assert_eq!(canonical(b"-0").as_deref(), Some("0"));
        assert_eq!(canonical(b"+12").as_deref(), Some("12"));
        let big = "123456789012345678901234567890123456789";
        assert_eq!(canonical(big.as_bytes()).as_deref(), Some(big));
        assert_eq!(
            canonical(format!("-000{big}").as_bytes()),
            Some(format!("-{big}"))
        );
        for bad in ["", "-", "+", "1x", " 1", "1.0", "--1"] {
            assert_eq!(canonical(bad.as_bytes()), None, "{bad:?}");
        }
        let limit = "9".repeat(limits::INDEX_INT_DIGITS_MAX);
        assert!(IntTerm::parse(limit.as_bytes()).is_some());
        assert!(IntTerm::parse(format!("{limit}9").as_bytes()).is_none());
    }

    #[test]
    fn i64_terms_keep_the_old_form() {
        for v in [i64::MIN + 1, -1, 0, 1, i64::MAX] {
            let want = ((v as u64) ^ (1 << 63)).to_be_bytes().to_vec();
            assert_eq!(t(&v.to_string()).encode(), want, "{v}");
        }
        // i64::MIN is extended; its old form still reads back.
        assert_eq!(t(&i64::MIN.to_string()).encode().len(), 17);
        assert_eq!(
            IntTerm::decode(&[0u8; 8]).unwrap().to_decimal(),
            i64::MIN.to_string()
        );
    }

    #[test]
    fn byte_order_is_numeric_order_beyond_64_bits() {
        let ordered = [
            format!("-{}", "9".repeat(limits::INDEX_INT_DIGITS_MAX)),
            "-340282366920938463463374607431768211456".into(),
            "-18446744073709551616".into(),
            "-18446744073709551615".into(),
            "-9223372036854775809".into(),
            i64::MIN.to_string(),
            (i64::MIN + 1).to_string(),
            "-1".into(),
            "0".into(),
            i64::MAX.to_string(),
            "9223372036854775808".into(),
            "18446744073709551615".into(),
            "18446744073709551616".into(),
            "9".repeat(limits::INDEX_INT_DIGITS_MAX),
        ];
        for w in ordered.windows(2) {
            let (a, b) = (t(&w[0]), t(&w[1]));
            assert!(a < b, "{w:?}");
            assert!(a.encode() < b.encode(), "{w:?}");
        }
        for s in &ordered {
            assert_eq!(&IntTerm::decode(&t(s).encode()).unwrap().to_decimal(), s);
        }
    }

    #[test]
    fn decode_refuses_bad_bytes() {
        assert!(IntTerm::decode(b"short").is_err());
        assert!(IntTerm::decode(&[0x11; 20]).is_err());
        // An extended form of a value that fits in 8 bytes.
        let mut e = vec![0xFF; 8];
        e.push(8);
        e.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        assert!(IntTerm::decode(&e).is_err());
        let mut e = t("18446744073709551616").encode();
        e.pop();
        assert!(IntTerm::decode(&e).is_err());
    }

    fn big_text() -> impl Strategy<Value = String> {
        (any::<bool>(), "[0-9]{1,60}").prop_map(|(n, d)| if n { format!("-{d}") } else { d })
    }

    proptest! {
        #[test]
        fn order_and_round_trip(a in big_text(), b in big_text()) {
            let (x, y) = (t(&a), t(&b));
            prop_assert_eq!(x.cmp(&y), x.encode().cmp(&y.encode()));
            prop_assert_eq!(IntTerm::decode(&x.encode()).unwrap(), x.clone());
            prop_assert_eq!(t(&x.to_decimal()), x);
        }

        #[test]
        fn agrees_with_i128(a in any::<i128>(), b in any::<i128>()) {
            let (x, y) = (t(&a.to_string()), t(&b.to_string()));
            prop_assert_eq!(x.to_decimal(), a.to_string());
            prop_assert_eq!(x.cmp(&y), a.cmp(&b));
            prop_assert_eq!(x.encode().cmp(&y.encode()), a.cmp(&b));
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = IntTerm::decode(&bytes);
        }
    }
}
