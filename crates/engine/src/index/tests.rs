//! Tests of secondary indexes: term encoding, the journal blob,
//! continuations and cursors.

use super::changes::BLOB_VERSION;
use super::query::{plan, query_tag};
use super::*;
use crate::error::Error;
use crate::key::{self, KeyKind};
use base64::Engine as _;
use proptest::prelude::*;

#[test]
fn int_encoding_orders_numerically() {
    let vals = [
        i64::MIN + 1,
        -1000,
        -1,
        0,
        1,
        7,
        1000,
        i64::MAX - 1,
        i64::MAX,
    ];
    for w in vals.windows(2) {
        assert!(int_to_sortable(w[0]) < int_to_sortable(w[1]), "{w:?}");
    }
    for v in vals {
        let stored = encode_term(FieldKind::Int, b"f_int", v.to_string().as_bytes()).unwrap();
        assert_eq!(stored, int_to_sortable(v));
    }
    assert_eq!(int_to_sortable(0), [0x80, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(
        int_to_sortable(-1),
        [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
    );
}

#[test]
fn term_validation_names_field_and_term() {
    let e = encode_term(FieldKind::Int, b"age_int", b"12x").unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)));
    let m = e.to_string();
    assert!(m.contains("age_int") && m.contains("12x"), "{m}");
    assert_eq!(
        decode_term(
            FieldKind::Int,
            &encode_term(FieldKind::Int, b"a_int", b"-042").unwrap()
        )
        .unwrap(),
        b"-42"
    );
    assert!(decode_term(FieldKind::Int, b"short").is_err());
    let e = checked_field_kind(b"colour").unwrap_err().to_string();
    assert!(e.contains("colour") && e.contains("_bin"), "{e}");
    assert!(checked_field_kind(&[b'x'; 300]).is_err());
}

#[test]
fn blob_round_trip_and_empty() {
    assert!(encode_changes(&[]).is_empty());
    assert_eq!(decode_changes(&[]).unwrap(), vec![]);
    let changes = vec![
        IndexChange::add("a_bin", &b"x\0y"[..]),
        IndexChange::remove("n_int", "-5"),
    ];
    let blob = encode_changes(&changes);
    assert_eq!(blob[0], BLOB_VERSION);
    assert_eq!(decode_changes(&blob).unwrap(), changes);
    for n in 1..blob.len() {
        assert!(decode_changes(&blob[..n]).is_err(), "truncated at {n}");
    }
    let mut long = blob.clone();
    long.push(0);
    assert!(decode_changes(&long).is_err());
}

#[test]
fn continuation_round_trip_and_garbage() {
    let c = encode_continuation(7, b"term", b"key");
    assert_eq!(
        decode_continuation(&c, 7).unwrap(),
        (b"term".to_vec(), b"key".to_vec())
    );
    assert!(decode_continuation(&c, 8)
        .unwrap_err()
        .to_string()
        .contains("another"));
    for bad in ["", "!!!", "AAAA", "AQAAAAA=", &c[..c.len() - 4]] {
        let e = decode_continuation(bad, 7).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{bad}");
        assert!(e.to_string().contains("continuation"), "{e}");
    }
}

#[test]
fn a_cursor_is_the_scan_start() {
    let mut q = IndexQuery::range(b"b", b"n_int", b"-100", b"100");
    q.start_after = Some(IndexCursor::new("-7", "k"));
    let p = plan(&q).unwrap();
    let mut want = entry_key(b"b", b"n_int", &int_to_sortable(-7), b"k");
    want.push(0);
    assert_eq!(p.lo, want, "the scan seeks to the cursor");
    // Before the range: the range's own start.
    q.start_after = Some(IndexCursor::new("-1000", "k"));
    assert_eq!(
        plan(&q).unwrap().lo,
        key::prefix(KeyKind::Index, &[b"b", b"n_int", &int_to_sortable(-100)])
    );
    // Equality: an empty term is the query's term.
    let mut q = IndexQuery::eq(b"b", b"t_bin", b"red");
    q.start_after = Some(IndexCursor::new("", "k1"));
    let mut want = entry_key(b"b", b"t_bin", b"red", b"k1");
    want.push(0);
    assert_eq!(plan(&q).unwrap().lo, want);
    // $key: the term is ignored.
    let mut q = IndexQuery::range(b"b", b"$key", b"a", b"z");
    q.start_after = Some(IndexCursor::new("whatever", "m"));
    let mut want = key::object(b"b", b"m");
    want.push(0);
    assert_eq!(plan(&q).unwrap().lo, want);
    // Not with a continuation; bad integer terms are named.
    q.continuation = Some(encode_continuation(
        query_tag(&plan(&q).unwrap().prefix),
        b"",
        b"m",
    ));
    let e = plan(&q).err().unwrap().to_string();
    assert!(
        e.contains("continuation") && e.contains("start_after"),
        "{e}"
    );
    let mut q = IndexQuery::range(b"b", b"n_int", b"1", b"2");
    q.start_after = Some(IndexCursor::new("x1", "k"));
    let e = plan(&q).err().unwrap();
    assert!(
        matches!(e, Error::InvalidInput(_)) && e.to_string().contains("x1"),
        "{e}"
    );
}

proptest! {
    #[test]
    fn int_order_matches(a in any::<i64>(), b in any::<i64>()) {
        prop_assert_eq!(a.cmp(&b), int_to_sortable(a).cmp(&int_to_sortable(b)));
        let text = a.to_string();
        let stored = encode_term(FieldKind::Int, b"f_int", text.as_bytes()).unwrap();
        prop_assert_eq!(decode_term(FieldKind::Int, &stored).unwrap(), text.into_bytes());
    }

    #[test]
    fn blob_round_trips(changes in proptest::collection::vec(
        (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 0..12)),
        0..8)) {
        let changes: Vec<IndexChange> = changes
            .into_iter()
            .map(|(add, field, term)| IndexChange {
                op: if add { IndexOp::Add } else { IndexOp::Remove },
                field,
                term,
            })
            .collect();
        prop_assert_eq!(decode_changes(&encode_changes(&changes)).unwrap(), changes);
    }

    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode_changes(&bytes);
        let _ = decode_term(FieldKind::Int, &bytes);
        let _ = key::split_component(&bytes);
        let s = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let _ = decode_continuation(&s, 0);
        let _ = decode_continuation(&String::from_utf8_lossy(&bytes), 0);
    }

    #[test]
    fn stored_bin_term_order_is_key_order(t1 in proptest::collection::vec(any::<u8>(), 0..6),
                                          t2 in proptest::collection::vec(any::<u8>(), 0..6),
                                          k1 in proptest::collection::vec(any::<u8>(), 1..4),
                                          k2 in proptest::collection::vec(any::<u8>(), 1..4)) {
        let e1 = entry_key(b"b", b"f_bin", &t1, &k1);
        let e2 = entry_key(b"b", b"f_bin", &t2, &k2);
        prop_assert_eq!((&t1, &k1).cmp(&(&t2, &k2)), e1.cmp(&e2));
    }
}
