//! Riak's key filters (`riak_kv_mapred_filters`): a list of transforms
//! (`tokenize`, `string_to_int`, `to_lower`, ...) and predicates (`eq`,
//! `between`, `matches`, `and`, ...) applied to each key of a bucket input
//! in order; a key passes when every predicate holds. Parsed once per job
//! ([`parse`]), applied by [`matches`]; pure.

use crate::limits::MAPRED_MAX_KEY_FILTERS;
use serde_json::Value;

/// A bad filter list (the message names the filter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError(pub String);

/// A key's value as the filters see it.
#[derive(Debug, Clone, PartialEq)]
enum Term {
    Str(String),
    Int(i64),
    Float(f64),
}

impl Term {
    fn from_json(v: &Value) -> Option<Term> {
        match v {
            Value::String(s) => Some(Term::Str(s.clone())),
            Value::Number(n) => n
                .as_i64()
                .map(Term::Int)
                .or_else(|| n.as_f64().map(Term::Float)),
            _ => None,
        }
    }

    fn cmp(&self, other: &Term) -> Option<std::cmp::Ordering> {
        match (self, other) {
            (Term::Str(a), Term::Str(b)) => Some(a.cmp(b)),
            (Term::Int(a), Term::Int(b)) => Some(a.cmp(b)),
            (a, b) => a.num()?.partial_cmp(&b.num()?),
        }
    }

    fn num(&self) -> Option<f64> {
        match self {
            Term::Int(i) => Some(*i as f64),
            Term::Float(f) => Some(*f),
            Term::Str(_) => None,
        }
    }

    fn text(&self) -> String {
        match self {
            Term::Str(s) => s.clone(),
            Term::Int(i) => i.to_string(),
            Term::Float(f) => f.to_string(),
        }
    }
}

/// One filter.
#[derive(Debug, Clone)]
pub enum KeyFilter {
    /// A transform of the value.
    Transform(Transform),
    /// A test of the value.
    Predicate(Predicate),
}

impl PartialEq for KeyFilter {
    fn eq(&self, other: &Self) -> bool {
        format!("{self:?}") == format!("{other:?}")
    }
}

/// Transforms.
#[derive(Debug, Clone)]
pub enum Transform {
    /// `int_to_string`, `float_to_string`.
    ToString,
    /// `string_to_int`.
    ToInt,
    /// `string_to_float`.
    ToFloat,
    /// `to_upper`.
    Upper,
    /// `to_lower`.
    Lower,
    /// `tokenize`: the n-th (from 1) token split by the separator.
    Tokenize(String, usize),
    /// `urldecode`.
    UrlDecode,
}

/// Predicates.
#[derive(Debug, Clone)]
pub enum Predicate {
    /// `greater_than`, `less_than`, `greater_than_eq`, `less_than_eq`,
    /// `eq`, `neq`: the value compared with a term.
    Cmp(&'static str, TermArg),
    /// `between` lo hi, inclusive unless the third arg is false.
    Between(TermArg, TermArg, bool),
    /// `matches` a regular expression.
    Matches(regex::Regex),
    /// `set_member`.
    SetMember(Vec<TermArg>),
    /// `similar_to`: Levenshtein distance at most n.
    SimilarTo(String, usize),
    /// `starts_with`.
    StartsWith(String),
    /// `ends_with`.
    EndsWith(String),
    /// `and` of two filter lists.
    And(Vec<KeyFilter>, Vec<KeyFilter>),
    /// `or` of two filter lists.
    Or(Vec<KeyFilter>, Vec<KeyFilter>),
    /// `not` a filter list.
    Not(Vec<KeyFilter>),
}

/// A term argument of a predicate.
#[derive(Debug, Clone)]
pub struct TermArg(Term);

fn fail<T>(m: impl Into<String>) -> Result<T, FilterError> {
    Err(FilterError(m.into()))
}

/// Parses a `key_filters` list.
pub fn parse(v: &Value) -> Result<Vec<KeyFilter>, FilterError> {
    let mut count = 0;
    parse_list(v, &mut count)
}

fn parse_list(v: &Value, count: &mut usize) -> Result<Vec<KeyFilter>, FilterError> {
    let Value::Array(items) = v else {
        return fail(format!("a filter list is a list, got {v}"));
    };
    items.iter().map(|f| parse_one(f, count)).collect()
}

fn parse_one(v: &Value, count: &mut usize) -> Result<KeyFilter, FilterError> {
    *count += 1;
    if *count > MAPRED_MAX_KEY_FILTERS {
        return fail(format!("more than {MAPRED_MAX_KEY_FILTERS} filters"));
    }
    let Some((Value::String(name), args)) = v.as_array().and_then(|a| a.split_first()) else {
        return fail(format!("a filter is [\"name\", args...], got {v}"));
    };
    let term = |i: usize| -> Result<TermArg, FilterError> {
        args.get(i)
            .and_then(Term::from_json)
            .map(TermArg)
            .ok_or_else(|| {
                FilterError(format!(
                    "{name}: argument {} must be a string or a number",
                    i + 1
                ))
            })
    };
    let string = |i: usize| -> Result<String, FilterError> {
        args.get(i)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| FilterError(format!("{name}: argument {} must be a string", i + 1)))
    };
    let uint = |i: usize| -> Result<usize, FilterError> {
        args.get(i)
            .and_then(Value::as_u64)
            .map(|n| n as usize)
            .ok_or_else(|| {
                FilterError(format!(
                    "{name}: argument {} must be a non-negative integer",
                    i + 1
                ))
            })
    };
    use KeyFilter::{Predicate as P, Transform as T};
    Ok(match name.as_str() {
        "int_to_string" | "float_to_string" => T(Transform::ToString),
        "string_to_int" => T(Transform::ToInt),
        "string_to_float" => T(Transform::ToFloat),
        "to_upper" => T(Transform::Upper),
        "to_lower" => T(Transform::Lower),
        "tokenize" => {
            let n = uint(1)?;
            if n == 0 {
                return fail("tokenize: tokens are numbered from 1");
            }
            T(Transform::Tokenize(string(0)?, n))
        }
        "urldecode" => T(Transform::UrlDecode),
        "greater_than" => P(Predicate::Cmp("greater_than", term(0)?)),
        "less_than" => P(Predicate::Cmp("less_than", term(0)?)),
        "greater_than_eq" => P(Predicate::Cmp("greater_than_eq", term(0)?)),
        "less_than_eq" => P(Predicate::Cmp("less_than_eq", term(0)?)),
        "eq" => P(Predicate::Cmp("eq", term(0)?)),
        "neq" => P(Predicate::Cmp("neq", term(0)?)),
        "between" => {
            let incl = match args.get(2) {
                None => true,
                Some(Value::Bool(b)) => *b,
                Some(o) => {
                    return fail(format!(
                        "between: argument 3 must be true or false, got {o}"
                    ))
                }
            };
            P(Predicate::Between(term(0)?, term(1)?, incl))
        }
        "matches" => {
            let re = string(0)?;
            P(Predicate::Matches(regex::Regex::new(&re).map_err(|e| {
                FilterError(format!("matches: bad regular expression: {e}"))
            })?))
        }
        "set_member" => {
            let set = (0..args.len()).map(term).collect::<Result<Vec<_>, _>>()?;
            P(Predicate::SetMember(set))
        }
        "similar_to" => P(Predicate::SimilarTo(string(0)?, uint(1)?)),
        "starts_with" => P(Predicate::StartsWith(string(0)?)),
        "ends_with" => P(Predicate::EndsWith(string(0)?)),
        "and" | "or" => {
            let (Some(a), Some(b)) = (args.first(), args.get(1)) else {
                return fail(format!("{name}: needs two filter lists"));
            };
            let (a, b) = (parse_list(a, count)?, parse_list(b, count)?);
            if name == "and" {
                P(Predicate::And(a, b))
            } else {
                P(Predicate::Or(a, b))
            }
        }
        "not" => {
            let Some(a) = args.first() else {
                return fail("not: needs a filter list");
            };
            P(Predicate::Not(parse_list(a, count)?))
        }
        other => return fail(format!("unknown key filter {other:?}")),
    })
}

/// True if `key` passes every filter.
pub fn matches(filters: &[KeyFilter], key: &[u8]) -> bool {
    run(
        filters,
        Term::Str(String::from_utf8_lossy(key).into_owned()),
    )
}

fn run(filters: &[KeyFilter], mut v: Term) -> bool {
    for f in filters {
        match f {
            KeyFilter::Transform(t) => match transform(t, v) {
                Some(next) => v = next,
                // A key the transform cannot take (e.g. not a number) fails.
                None => return false,
            },
            KeyFilter::Predicate(p) => {
                if !predicate(p, &v) {
                    return false;
                }
            }
        }
    }
    true
}

fn transform(t: &Transform, v: Term) -> Option<Term> {
    Some(match t {
        Transform::ToString => Term::Str(v.text()),
        Transform::ToInt => Term::Int(v.text().trim().parse().ok()?),
        Transform::ToFloat => Term::Float(v.text().trim().parse().ok()?),
        Transform::Upper => Term::Str(v.text().to_uppercase()),
        Transform::Lower => Term::Str(v.text().to_lowercase()),
        Transform::Tokenize(sep, n) => Term::Str(
            v.text()
                .split(sep.as_str())
                .filter(|t| !t.is_empty())
                .nth(n - 1)?
                .to_string(),
        ),
        Transform::UrlDecode => Term::Str(percent_decode(&v.text().replace('+', " "))?),
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn predicate(p: &Predicate, v: &Term) -> bool {
    use std::cmp::Ordering::*;
    match p {
        Predicate::Cmp(op, TermArg(t)) => match (*op, v.cmp(t)) {
            ("greater_than", Some(o)) => o == Greater,
            ("less_than", Some(o)) => o == Less,
            ("greater_than_eq", Some(o)) => o != Less,
            ("less_than_eq", Some(o)) => o != Greater,
            ("eq", Some(o)) => o == Equal,
            ("neq", Some(o)) => o != Equal,
            ("neq", None) => true,
            _ => false,
        },
        Predicate::Between(TermArg(lo), TermArg(hi), incl) => match (v.cmp(lo), v.cmp(hi)) {
            (Some(a), Some(b)) if *incl => a != Less && b != Greater,
            (Some(a), Some(b)) => a == Greater && b == Less,
            _ => false,
        },
        Predicate::Matches(re) => re.is_match(&v.text()),
        Predicate::SetMember(set) => set.iter().any(|TermArg(t)| v.cmp(t) == Some(Equal)),
        Predicate::SimilarTo(s, n) => levenshtein(&v.text(), s) <= *n,
        Predicate::StartsWith(s) => v.text().starts_with(s.as_str()),
        Predicate::EndsWith(s) => v.text().ends_with(s.as_str()),
        Predicate::And(a, b) => run(a, v.clone()) && run(b, v.clone()),
        Predicate::Or(a, b) => run(a, v.clone()) || run(b, v.clone()),
        Predicate::Not(a) => !run(a, v.clone()),
    }
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(v: Value) -> Vec<KeyFilter> {
        parse(&v).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn riak_examples() {
        let tok = f(json!([
            ["tokenize", "-", 2],
            ["string_to_int"],
            ["between", 2009, 2010]
        ]));
        assert!(matches(&tok, b"user-2009-x"));
        assert!(!matches(&tok, b"user-2011-x"));
        assert!(!matches(&tok, b"user-abc"), "not a number: out");
        let m = f(json!([["matches", "^ab"]]));
        assert!(matches(&m, b"abc") && !matches(&m, b"cab"));
        let o = f(json!([["or", [["eq", "a"]], [["ends_with", "z"]]]]));
        assert!(matches(&o, b"a") && matches(&o, b"xyz") && !matches(&o, b"b"));
        let n = f(json!([["not", [["starts_with", "tmp"]]]]));
        assert!(matches(&n, b"key") && !matches(&n, b"tmp1"));
        let s = f(json!([["to_upper"], ["set_member", "A", "B"]]));
        assert!(matches(&s, b"a") && !matches(&s, b"c"));
        let l = f(json!([["similar_to", "basalt", 1]]));
        assert!(matches(&l, b"basalr") && !matches(&l, b"granite"));
        let u = f(json!([["urldecode"], ["eq", "a b/c"]]));
        assert!(matches(&u, b"a%20b%2Fc"));
        let g = f(json!([["string_to_int"], ["greater_than_eq", 10]]));
        assert!(matches(&g, b"10") && !matches(&g, b"9"));
    }

    #[test]
    fn bad_filters_are_named() {
        assert!(parse(&json!([["bogus"]])).is_err_and(|e| e.0.contains("\"bogus\"")));
        assert!(parse(&json!([["matches", "("]])).is_err_and(|e| e.0.starts_with("matches")));
        assert!(parse(&json!([["tokenize", "-", 0]])).is_err());
        assert!(parse(&json!("x")).is_err());
        let deep = (0..=MAPRED_MAX_KEY_FILTERS)
            .map(|_| json!(["to_lower"]))
            .collect::<Vec<_>>();
        assert!(parse(&Value::Array(deep)).is_err());
    }
}
