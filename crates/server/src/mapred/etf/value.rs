//! Erlang terms ↔ the JSON values a MapReduce job runs on, in one place.
//! A job sent as Erlang terms is translated at the edge into the same
//! [`crate::mapred::Job`] a JSON job parses to; its results are
//! translated back. Pure.
//!
//! Term → JSON, by [`Mode`]:
//!
//! | term | `Data` (key data: exact) | `Arg` (phase args) | `Text` (key filters) |
//! |---|---|---|---|
//! | binary, valid UTF-8 | string | string | string |
//! | other binary | marker | marker | marker |
//! | integer in i64/u64 | number | number | number |
//! | float | number | number | number |
//! | `true` / `false` / `null` | boolean / null | boolean / null | boolean / null |
//! | other atom | marker | string (as mochijson2) | string |
//! | list | array | array, or object if a proplist | array, or object if a proplist |
//! | string (a list of bytes) | array of integers | array of integers | string |
//! | `{struct, Props}` (mochijson2) | marker | object | object |
//! | map with atom / binary keys | marker | object | object |
//! | anything else (tuples, pids, funs, improper lists, big integers) | marker | marker | marker |
//!
//! A proplist here is a non-empty list of `{Key, Value}` pairs with atom
//! or binary keys (for a reduce phase's arg, bare atoms count as `{Atom,
//! true}`, as `proplists` reads them: `[reduce_phase_only_1]`).
//!
//! The **marker** is a one-key object `{"\u0000erlang_term": base64 of
//! term_to_binary(T)}` ([`crate::mapred::core::TERM_MARKER`]): a term
//! JSON cannot hold passes through the phases untouched and comes back
//! out as itself. JavaScript sees it as that object (Riak's JavaScript
//! phases could not take such a term at all: mochijson2 refuses it).
//!
//! JSON → term ([`to_term`], what Riak's mochijson2 decoding of a
//! JavaScript result gives): string → binary, integer → integer, float →
//! float, `true` / `false` / `null` → atoms, array → list, object →
//! `{struct, [{<<"k">>, V}]}`, a marker → its term, and Riak's not-found
//! object `{"not_found": {"bucket", "key", "keydata"}}` →
//! `{not_found, {B, K}, KeyData}` (`riak_kv_mapred_json:dejsonify_not_found`).
//! [`Shape`] adds what a phase's own results look like in Riak: inputs
//! as `{B, K}` / `{{B, K}, KeyData}`, a link phase's `{{B, K}, Tag}`,
//! `reduce_plist_sum`'s `{K, Sum}` and an Erlang map built-in's missing
//! object `{error, notfound}`.
//!
//! [`show`] prints a term as Erlang's `~p` would, on one line and
//! truncated: Riak's error texts for bad jobs are `~p` of a term.

use super::scan;
use crate::mapred::core::TERM_MARKER;
use base64::Engine;
use eetf::{Atom, Binary, FixInteger, List, Term, Tuple};
use serde_json::{Map, Number, Value};

/// How a term is read as JSON (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Exactly: what JSON cannot hold becomes a marker.
    Data,
    /// As a phase function's argument.
    Arg,
    /// As a key filter's words.
    Text,
}

/// A term as JSON.
pub fn to_json(t: &Term, mode: Mode) -> Value {
    match t {
        Term::Binary(b) => match std::str::from_utf8(&b.bytes) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => marker(t),
        },
        Term::FixInteger(i) => Value::from(i.value),
        Term::BigInteger(b) => i64::try_from(&b.value)
            .map(Value::from)
            .or_else(|_| u64::try_from(&b.value).map(Value::from))
            .unwrap_or_else(|_| marker(t)),
        Term::Float(f) => Number::from_f64(f.value).map_or_else(|| marker(t), Value::Number),
        Term::Atom(a) => match a.name.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" => Value::Null,
            _ if mode == Mode::Data => marker(t),
            n => Value::String(n.to_string()),
        },
        Term::ByteList(l) => match (mode, std::str::from_utf8(&l.bytes)) {
            (Mode::Text, Ok(s)) => Value::String(s.to_string()),
            _ => Value::Array(l.bytes.iter().map(|b| Value::from(*b)).collect()),
        },
        Term::List(l) => {
            if mode != Mode::Data {
                if let Some(o) = proplist(&l.elements, mode, false) {
                    return o;
                }
            }
            Value::Array(l.elements.iter().map(|e| to_json(e, mode)).collect())
        }
        Term::Tuple(tu) if mode != Mode::Data => match &tu.elements[..] {
            [Term::Atom(a), Term::List(props)] if a.name == "struct" => {
                if props.elements.is_empty() {
                    Value::Object(Map::new())
                } else {
                    proplist(&props.elements, mode, false).unwrap_or_else(|| marker(t))
                }
            }
            _ => marker(t),
        },
        Term::Map(m) if mode != Mode::Data => {
            let mut o = Map::new();
            for (k, v) in &m.map {
                match key_text(k) {
                    Some(k) => o.insert(k, to_json(v, mode)),
                    None => return marker(t),
                };
            }
            Value::Object(o)
        }
        _ => marker(t),
    }
}

/// A phase's argument: [`Mode::Arg`], and for a reduce phase a list of
/// bare atoms and pairs read as `proplists` reads it.
pub fn arg_to_json(t: &Term, reduce: bool) -> Value {
    if let (true, Term::List(l)) = (reduce, t) {
        if let Some(o) = proplist(&l.elements, Mode::Arg, true) {
            return o;
        }
    }
    to_json(t, Mode::Arg)
}

fn key_text(k: &Term) -> Option<String> {
    match k {
        Term::Atom(a) => Some(a.name.clone()),
        Term::Binary(b) => std::str::from_utf8(&b.bytes).ok().map(str::to_string),
        _ => None,
    }
}

/// `[{K, V}, ...]` (and with `bare`, `K` alone for `{K, true}`) as an
/// object; `None` if the list is not one.
fn proplist(items: &[Term], mode: Mode, bare: bool) -> Option<Value> {
    if items.is_empty() {
        return None;
    }
    let mut o = Map::new();
    let mut pairs = 0;
    for it in items {
        match it {
            Term::Tuple(tu) if tu.elements.len() == 2 => {
                o.insert(key_text(&tu.elements[0])?, to_json(&tu.elements[1], mode));
                pairs += 1;
            }
            Term::Atom(a) if bare => {
                o.insert(a.name.clone(), Value::Bool(true));
            }
            _ => return None,
        }
    }
    (bare || pairs > 0).then_some(Value::Object(o))
}

/// The marker carrying `t` through JSON.
pub fn marker(t: &Term) -> Value {
    let mut bytes = Vec::new();
    // Writing to a Vec fails only on a term eetf cannot encode; such a
    // term came from eetf's own decoder, so it can.
    let _ = t.encode(&mut bytes);
    let mut o = Map::new();
    o.insert(
        TERM_MARKER.to_string(),
        Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
    );
    Value::Object(o)
}

/// The term of a marker (`None`: not a marker, or one that does not
/// decode: JavaScript may return any object).
fn unmarker(o: &Map<String, Value>) -> Option<Term> {
    if o.len() != 1 {
        return None;
    }
    let text = o.get(TERM_MARKER)?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    scan::decode(&bytes, &scan::JOB).ok()
}

fn atom(name: &str) -> Term {
    Term::from(Atom::from(name))
}

fn binary(s: &str) -> Term {
    Term::from(Binary::from(s.as_bytes()))
}

fn tuple(items: Vec<Term>) -> Term {
    Term::from(Tuple::from(items))
}

/// A JSON value as the term Riak would give (see the module docs).
pub fn to_term(v: &Value) -> Term {
    match v {
        Value::Null => atom("null"),
        Value::Bool(b) => atom(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                match i32::try_from(i) {
                    Ok(i) => Term::from(FixInteger::from(i)),
                    Err(_) => Term::from(eetf::BigInteger::from(i)),
                }
            } else if let Some(u) = n.as_u64() {
                Term::from(eetf::BigInteger::from(u))
            } else {
                // serde_json numbers are finite.
                n.as_f64()
                    .and_then(|f| eetf::Float::try_from(f).ok())
                    .map_or_else(|| atom("nan"), Term::from)
            }
        }
        Value::String(s) => binary(s),
        Value::Array(a) => Term::from(List::from(a.iter().map(to_term).collect::<Vec<_>>())),
        Value::Object(o) => {
            if let Some(t) = unmarker(o) {
                return t;
            }
            if let Some(t) = not_found(o) {
                return t;
            }
            let props = o
                .iter()
                .map(|(k, v)| tuple(vec![binary(k), to_term(v)]))
                .collect::<Vec<_>>();
            tuple(vec![atom("struct"), Term::from(List::from(props))])
        }
    }
}

/// A bucket as Riak's inputs carry it: `B`, or `{T, B}` for
/// `["type", "bucket"]`.
fn bucket_term(v: &Value) -> Option<Term> {
    match v {
        Value::String(b) => Some(binary(b)),
        Value::Array(tb) => match &tb[..] {
            [Value::String(t), Value::String(b)] => Some(tuple(vec![binary(t), binary(b)])),
            _ => None,
        },
        _ => None,
    }
}

/// `{"not_found": {"bucket", "key", "keydata"}}` → `{not_found, {B, K}, KD}`.
fn not_found(o: &Map<String, Value>) -> Option<Term> {
    let inner = o.get("not_found")?.as_object().filter(|_| o.len() == 1)?;
    let b = bucket_term(inner.get("bucket")?)?;
    let k = binary(inner.get("key")?.as_str()?);
    let kd = inner
        .get("keydata")
        .map_or_else(|| atom("undefined"), to_term);
    Some(tuple(vec![atom("not_found"), tuple(vec![b, k]), kd]))
}

/// What one phase's results look like in Riak (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Any values.
    Plain,
    /// The job's inputs (a job without phases): `{B, K}`, `{{B, K}, KD}`.
    Inputs,
    /// A link phase: `{{B, K}, Tag}`.
    Link,
    /// `reduce_plist_sum`: `{K, Sum}`.
    Pairs,
    /// An Erlang map built-in: a missing object is `{error, notfound}`.
    ErlangMap,
}

/// One result as the term a riakc client gets from Riak.
pub fn shaped(v: &Value, shape: Shape) -> Term {
    let arr = v.as_array().map(Vec::as_slice);
    match (shape, arr) {
        (Shape::Inputs, Some([b, Value::String(k)])) => match bucket_term(b) {
            Some(b) => tuple(vec![b, binary(k)]),
            None => to_term(v),
        },
        (Shape::Inputs, Some([b, Value::String(k), kd])) => match bucket_term(b) {
            Some(b) => tuple(vec![tuple(vec![b, binary(k)]), to_term(kd)]),
            None => to_term(v),
        },
        (Shape::Link, Some([b, Value::String(k), Value::String(tag)])) => match bucket_term(b) {
            Some(b) => tuple(vec![tuple(vec![b, binary(k)]), binary(tag)]),
            None => to_term(v),
        },
        (Shape::Pairs, Some([k, s])) => tuple(vec![to_term(k), to_term(s)]),
        (Shape::ErlangMap, _)
            if v.as_object()
                .is_some_and(|o| o.len() == 1 && o.contains_key("not_found")) =>
        {
            tuple(vec![atom("error"), atom("notfound")])
        }
        _ => to_term(v),
    }
}

/// Longest text [`show`] makes (then `...`).
const SHOW_MAX: usize = 1000;

/// `t` as Erlang's `~p` prints it, on one line, cut at [`SHOW_MAX`] bytes.
pub fn show(t: &Term) -> String {
    let mut out = String::new();
    write_term(&mut out, t);
    if out.len() > SHOW_MAX {
        let mut cut = SHOW_MAX;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

/// `s` as an Erlang string literal (`"..."`).
pub fn erl_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    quoted(&mut out, s, '"');
    out
}

fn quoted(out: &mut String, s: &str, q: char) {
    out.push(q);
    for ch in s.chars() {
        match ch {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\\' => out.push_str("\\\\"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

fn printable(s: &str) -> bool {
    s.chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\t' | '\r'))
}

fn write_atom(out: &mut String, name: &str) {
    const RESERVED: &[&str] = &[
        "after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl", "bsr", "bxor", "case",
        "catch", "cond", "div", "end", "fun", "if", "let", "not", "of", "or", "orelse", "receive",
        "rem", "try", "when", "xor", "maybe", "else",
    ];
    let bare = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '@')
        && !RESERVED.contains(&name);
    if bare {
        out.push_str(name);
    } else {
        quoted(out, name, '\'');
    }
}

fn write_seq<'a>(out: &mut String, items: impl IntoIterator<Item = &'a Term>) {
    for (i, x) in items.into_iter().enumerate() {
        if out.len() > SHOW_MAX {
            return;
        }
        if i > 0 {
            out.push(',');
        }
        write_term(out, x);
    }
}

fn write_term(out: &mut String, t: &Term) {
    if out.len() > SHOW_MAX {
        return;
    }
    match t {
        Term::Atom(a) => write_atom(out, &a.name),
        Term::FixInteger(i) => out.push_str(&i.value.to_string()),
        Term::BigInteger(b) => out.push_str(&b.value.to_string()),
        Term::Float(f) => out.push_str(&format!("{:?}", f.value)),
        Term::Binary(b) => match std::str::from_utf8(&b.bytes) {
            Ok(s) if printable(s) => {
                out.push_str("<<");
                quoted(out, s, '"');
                out.push_str(">>");
            }
            _ => out.push_str(&b.to_string()),
        },
        Term::ByteList(l) => match std::str::from_utf8(&l.bytes) {
            Ok(s) if printable(s) && !s.is_empty() => quoted(out, s, '"'),
            _ => out.push_str(&l.to_string()),
        },
        Term::List(l) => {
            out.push('[');
            write_seq(out, &l.elements);
            out.push(']');
        }
        Term::ImproperList(l) => {
            out.push('[');
            write_seq(out, &l.elements);
            out.push('|');
            write_term(out, &l.last);
            out.push(']');
        }
        Term::Tuple(tu) => {
            out.push('{');
            write_seq(out, &tu.elements);
            out.push('}');
        }
        Term::Map(m) => {
            out.push_str("#{");
            for (i, (k, v)) in m.map.iter().enumerate() {
                if out.len() > SHOW_MAX {
                    break;
                }
                if i > 0 {
                    out.push(',');
                }
                write_term(out, k);
                out.push_str(" => ");
                write_term(out, v);
            }
            out.push('}');
        }
        Term::Pid(p) => out.push_str(&format!("<0.{}.{}>", p.id, p.serial)),
        Term::ExternalFun(f) => {
            out.push_str("fun ");
            write_atom(out, &f.module.name);
            out.push(':');
            write_atom(out, &f.function.name);
            out.push_str(&format!("/{}", f.arity));
        }
        Term::InternalFun(f) => out.push_str(&f.to_string()),
        Term::Port(p) => out.push_str(&format!("#Port<0.{}>", p.id)),
        Term::Reference(r) => {
            out.push_str("#Ref<0");
            for id in r.id.iter().rev() {
                out.push_str(&format!(".{id}"));
            }
            out.push('>');
        }
        Term::BitBinary(b) => out.push_str(&b.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn term(text: &str) -> Term {
        // A tiny reader for the tests' terms: atoms, <<"bin">>, integers,
        // tuples and lists.
        fn parse(s: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Term {
            while s.peek() == Some(&' ') {
                s.next();
            }
            match s.peek().copied() {
                Some('{') | Some('[') => {
                    let open = s.next();
                    let mut items = Vec::new();
                    loop {
                        while s.peek() == Some(&' ') || s.peek() == Some(&',') {
                            s.next();
                        }
                        if matches!(s.peek(), Some('}') | Some(']')) {
                            s.next();
                            break;
                        }
                        items.push(parse(s));
                    }
                    if open == Some('{') {
                        tuple(items)
                    } else {
                        Term::from(List::from(items))
                    }
                }
                Some('<') => {
                    s.next();
                    s.next();
                    s.next();
                    let b: String = s.by_ref().take_while(|c| *c != '"').collect();
                    s.next();
                    s.next();
                    binary(&b)
                }
                Some(c) if c.is_ascii_digit() || c == '-' => {
                    let mut n = String::new();
                    while let Some(c) = s
                        .peek()
                        .copied()
                        .filter(|c| c.is_ascii_digit() || *c == '-')
                    {
                        n.push(c);
                        s.next();
                    }
                    Term::from(FixInteger::from(n.parse::<i32>().expect("int")))
                }
                _ => {
                    let mut a = String::new();
                    while let Some(c) = s
                        .peek()
                        .copied()
                        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                    {
                        a.push(c);
                        s.next();
                    }
                    atom(&a)
                }
            }
        }
        parse(&mut text.chars().peekable())
    }

    #[test]
    fn args_read_as_riak_hands_them_to_functions() {
        let a = |t: &str| to_json(&term(t), Mode::Arg);
        assert_eq!(a("<<\"filter_notfound\">>"), json!("filter_notfound"));
        assert_eq!(a("none"), json!("none"));
        assert_eq!(a("true"), json!(true));
        assert_eq!(a("null"), json!(null));
        assert_eq!(a("[1, 2, <<\"x\">>]"), json!([1, 2, "x"]));
        assert_eq!(a("{struct, [{<<\"sub\">>, [1]}]}"), json!({"sub": [1]}));
        assert_eq!(
            a("[{reduce_phase_batch_size, 10}]"),
            json!({"reduce_phase_batch_size": 10})
        );
        assert_eq!(
            arg_to_json(&term("[reduce_phase_only_1]"), true),
            json!({"reduce_phase_only_1": true})
        );
        assert_eq!(
            arg_to_json(&term("[reduce_phase_only_1]"), false),
            json!(["reduce_phase_only_1"])
        );
        assert_eq!(a("[]"), json!([]));
        // A tuple has no JSON form: a marker, back out as itself.
        let t = term("{a, <<\"b\">>, 3}");
        let m = a("{a, <<\"b\">>, 3}");
        assert!(m.as_object().is_some_and(|o| o.contains_key(TERM_MARKER)));
        assert_eq!(to_term(&m), t);
    }

    #[test]
    fn key_data_round_trips_exactly() {
        for t in [
            "undefined",
            "foo",
            "{1, 2}",
            "[1, {x, y}, <<\"z\">>]",
            "<<\"text\">>",
            "42",
            "true",
            "[]",
        ] {
            let term = term(t);
            assert_eq!(to_term(&to_json(&term, Mode::Data)), term, "{t}");
        }
        let raw = Term::from(Binary::from(vec![0xff, 0, 0xfe]));
        assert_eq!(to_term(&to_json(&raw, Mode::Data)), raw);
        let big = Term::from(eetf::BigInteger {
            value: eetf::BigInteger::from(u64::MAX).value * 1000u32,
        });
        assert_eq!(to_term(&to_json(&big, Mode::Data)), big);
        assert_eq!(
            to_json(&Term::from(eetf::ByteList::from("ab")), Mode::Text),
            json!("ab")
        );
    }

    #[test]
    fn results_take_riaks_shapes() {
        assert_eq!(to_term(&json!("v")), binary("v"));
        assert_eq!(
            to_term(&json!([1, 2.5, null])),
            Term::from(List::from(vec![
                Term::from(FixInteger::from(1)),
                Term::from(eetf::Float::try_from(2.5).expect("finite")),
                atom("null"),
            ]))
        );
        assert_eq!(
            to_term(&json!({"a": 1})),
            term("{struct, [{<<\"a\">>, 1}]}")
        );
        assert_eq!(
            to_term(&json!({"not_found": {"bucket": "b", "key": "k", "keydata": null}})),
            term("{not_found, {<<\"b\">>, <<\"k\">>}, null}")
        );
        assert_eq!(
            shaped(&json!(["b", "k"]), Shape::Inputs),
            term("{<<\"b\">>, <<\"k\">>}")
        );
        assert_eq!(
            shaped(&json!([["t", "b"], "k", 7]), Shape::Inputs),
            term("{{{<<\"t\">>, <<\"b\">>}, <<\"k\">>}, 7}")
        );
        assert_eq!(
            shaped(&json!(["b", "k", "tag"]), Shape::Link),
            term("{{<<\"b\">>, <<\"k\">>}, <<\"tag\">>}")
        );
        assert_eq!(
            shaped(&json!(["a", 3]), Shape::Pairs),
            term("{<<\"a\">>, 3}")
        );
        assert_eq!(
            shaped(
                &json!({"not_found": {"bucket": "b", "key": "k", "keydata": null}}),
                Shape::ErlangMap
            ),
            term("{error, notfound}")
        );
        assert_eq!(
            shaped(&json!(["b", "k"]), Shape::Plain),
            term("[<<\"b\">>, <<\"k\">>]")
        );
        // A forged or broken marker is just an object.
        let forged = json!({TERM_MARKER: "!!"});
        assert!(matches!(to_term(&forged), Term::Tuple(_)));
        assert_eq!(
            to_term(&json!(1u64 << 40)),
            Term::from(eetf::BigInteger::from(1i64 << 40))
        );
    }

    #[test]
    fn shows_terms_as_erlang_prints_them() {
        assert_eq!(
            show(&term("{inputs, {foo, <<\"b\">>, [1, 2], Foo}}")),
            "{inputs,{foo,<<\"b\">>,[1,2],'Foo'}}"
        );
        assert_eq!(show(&term("query")), "query");
        assert_eq!(show(&atom("end")), "'end'");
        assert_eq!(show(&Term::from(eetf::ByteList::from("abc"))), "\"abc\"");
        assert_eq!(show(&Term::from(Binary::from(vec![1u8, 2]))), "<<1,2>>");
        assert_eq!(erl_string("a\"b\n"), "\"a\\\"b\\n\"");
        let long = Term::from(List::from(vec![binary("x"); 2000]));
        let s = show(&long);
        assert!(s.len() <= SHOW_MAX + 3 && s.ends_with("..."), "{}", s.len());
    }
}
