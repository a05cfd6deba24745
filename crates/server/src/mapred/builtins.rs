//! Riak's Erlang built-in phase functions (`riak_kv_mapreduce`), by name,
//! in Rust, over JSON values: what Erlang terms become on the way to a
//! client (binaries → strings, `[B, K]` lists, `{not_found, ...}` →
//! `{"not_found": {...}}`). Pure.
//!
//! Map functions take a fetched input ([`super::core::Fetched`]) and the
//! phase's `arg`; reduce functions take the values and `arg`. Where Erlang
//! would crash (a sum over a string), the function returns an error naming
//! the offending value, and the job fails with it.

use super::core::Fetched;
use serde_json::{Number, Value};
use std::cmp::Ordering;

/// A built-in function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    /// `map_identity`: the object itself (as its JSON form).
    MapIdentity,
    /// `map_object_value`: the object's value.
    MapObjectValue,
    /// `map_object_value_list`: the object's value, a JSON list, spliced.
    MapObjectValueList,
    /// `map_key`: `[bucket, key]` of the input (found or not).
    MapKey,
    /// `reduce_identity`: `[bucket, key]` of each input.
    ReduceIdentity,
    /// `reduce_set_union`: distinct values.
    ReduceSetUnion,
    /// `reduce_sort`: values in Erlang term order.
    ReduceSort,
    /// `reduce_string_to_integer`: strings parsed as integers.
    ReduceStringToInteger,
    /// `reduce_sum`: the sum.
    ReduceSum,
    /// `reduce_plist_sum`: per-key sums of `[key, number]` pairs.
    ReducePlistSum,
    /// `reduce_count_inputs`: how many inputs (integers are earlier counts).
    ReduceCountInputs,
}

const TABLE: &[(&str, Builtin)] = &[
    ("map_identity", Builtin::MapIdentity),
    ("map_object_value", Builtin::MapObjectValue),
    ("map_object_value_list", Builtin::MapObjectValueList),
    ("map_key", Builtin::MapKey),
    ("reduce_identity", Builtin::ReduceIdentity),
    ("reduce_set_union", Builtin::ReduceSetUnion),
    ("reduce_sort", Builtin::ReduceSort),
    ("reduce_string_to_integer", Builtin::ReduceStringToInteger),
    ("reduce_sum", Builtin::ReduceSum),
    ("reduce_plist_sum", Builtin::ReducePlistSum),
    ("reduce_count_inputs", Builtin::ReduceCountInputs),
];

impl Builtin {
    /// `riak_kv_mapreduce:function`, if we have it.
    pub fn find(module: &str, function: &str) -> Option<Builtin> {
        if module != "riak_kv_mapreduce" {
            return None;
        }
        TABLE.iter().find(|(n, _)| *n == function).map(|(_, b)| *b)
    }

    /// Its function name in `riak_kv_mapreduce`.
    pub fn name(self) -> &'static str {
        TABLE
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("unknown", |(n, _)| *n)
    }

    /// `riak_kv_mapreduce:f` for every built-in.
    pub fn names() -> Vec<String> {
        TABLE
            .iter()
            .map(|(n, _)| format!("riak_kv_mapreduce:{n}"))
            .collect()
    }

    /// A map built-in over one input.
    pub fn map(self, input: &Fetched, arg: &Value) -> Result<Vec<Value>, String> {
        self.map_for(input, arg, false)
    }

    /// A map built-in over one input; with `exact` (a job sent as Erlang
    /// terms) `map_object_value` gives a value that is not UTF-8 as its
    /// bytes (`core::binary_marker`), not as lossy text.
    pub fn map_for(self, input: &Fetched, arg: &Value, exact: bool) -> Result<Vec<Value>, String> {
        let value = || input.value_text();
        match self {
            Builtin::MapIdentity => Ok(match &input.object {
                Some(_) => vec![input.to_json()],
                None => vec![input.not_found_json()],
            }),
            Builtin::MapKey => Ok(vec![input.bkey_json()]),
            Builtin::MapObjectValue => match &input.object {
                None => not_found_action(input, arg),
                Some(_) if exact => Ok(vec![input.value_exact()]),
                Some(_) => Ok(vec![Value::String(value())]),
            },
            Builtin::MapObjectValueList => match &input.object {
                None => not_found_action(input, arg),
                Some(_) => match serde_json::from_str::<Value>(&value()) {
                    Ok(Value::Array(list)) => Ok(list),
                    _ => Err(format!(
                        "map_object_value_list: the value of {} is not a JSON list",
                        input.describe()
                    )),
                },
            },
            other => Err(format!(
                "{other:?} is a reduce function, not a map function"
            )),
        }
    }

    /// A reduce built-in over a batch of values.
    pub fn reduce(self, values: Vec<Value>, _arg: &Value) -> Result<Vec<Value>, String> {
        match self {
            Builtin::ReduceIdentity => values
                .into_iter()
                .map(|v| match &v {
                    Value::Array(a) if (2..=4).contains(&a.len()) => {
                        Ok(Value::Array(a[..2].to_vec()))
                    }
                    _ => Err(format!("reduce_identity: unhandled_entry {v}")),
                })
                .collect(),
            Builtin::ReduceSetUnion => {
                let mut v = values;
                v.sort_by(erlang_cmp);
                v.dedup();
                Ok(v)
            }
            Builtin::ReduceSort => {
                let mut v = values;
                v.sort_by(erlang_cmp);
                Ok(v)
            }
            Builtin::ReduceStringToInteger => data(values)
                .map(|v| match &v {
                    Value::Number(n) if n.is_i64() || n.is_u64() => Ok(v),
                    Value::String(s) => s
                        .trim()
                        .parse::<i64>()
                        .map(Value::from)
                        .map_err(|_| format!("reduce_string_to_integer: not an integer: {v}")),
                    _ => Err(format!("reduce_string_to_integer: not an integer: {v}")),
                })
                .collect(),
            Builtin::ReduceSum => {
                let mut sum = Sum::Int(0);
                for v in data(values) {
                    sum = sum
                        .add(&v)
                        .ok_or_else(|| format!("reduce_sum: not a number: {v}"))?;
                }
                Ok(vec![sum.into_json()])
            }
            Builtin::ReducePlistSum => plist_sum(values),
            Builtin::ReduceCountInputs => {
                let mut n: i64 = 0;
                for v in &values {
                    n = n.saturating_add(
                        v.as_i64().filter(|_| v.is_i64() || v.is_u64()).unwrap_or(1),
                    );
                }
                Ok(vec![Value::from(n)])
            }
            other => Err(format!(
                "{other:?} is a map function, not a reduce function"
            )),
        }
    }
}

/// `riak_kv_mapreduce`'s not-found actions: `filter_notfound` (nothing),
/// `include_notfound` (the not-found), `include_keydata` (the key data),
/// `{"sub": V}` (V); anything else, as Riak, includes the not-found.
fn not_found_action(input: &Fetched, arg: &Value) -> Result<Vec<Value>, String> {
    match arg {
        Value::String(s) if s == "filter_notfound" => Ok(vec![]),
        Value::String(s) if s == "include_keydata" => Ok(vec![input.keydata.clone()]),
        Value::Object(o) if o.len() == 1 && o.contains_key("sub") => Ok(match &o["sub"] {
            Value::Array(a) => a.clone(),
            v => vec![v.clone()],
        }),
        _ => Ok(vec![input.not_found_json()]),
    }
}

fn is_not_found(v: &Value) -> bool {
    v.as_object().is_some_and(|o| o.contains_key("not_found"))
}

/// The values that are not not-founds (Riak's `not_found_filter`).
fn data(values: Vec<Value>) -> impl Iterator<Item = Value> {
    values.into_iter().filter(|v| !is_not_found(v))
}

enum Sum {
    Int(i64),
    Float(f64),
}

impl Sum {
    fn add(self, v: &Value) -> Option<Sum> {
        let Value::Number(n) = v else { return None };
        Some(match (self, n.as_i64()) {
            (Sum::Int(a), Some(b)) => match a.checked_add(b) {
                Some(s) => Sum::Int(s),
                None => Sum::Float(a as f64 + b as f64),
            },
            (Sum::Int(a), None) => Sum::Float(a as f64 + n.as_f64()?),
            (Sum::Float(a), _) => Sum::Float(a + n.as_f64()?),
        })
    }

    fn into_json(self) -> Value {
        match self {
            Sum::Int(i) => Value::from(i),
            Sum::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        }
    }
}

/// Pairs are `[key, number]` (or `{"key": number}` objects); the input is
/// pairs or lists of pairs. The output is `[key, sum]` pairs in key order.
fn plist_sum(values: Vec<Value>) -> Result<Vec<Value>, String> {
    let mut sums: Vec<(Value, Sum)> = Vec::new();
    let mut add = |k: Value, v: &Value| -> Result<(), String> {
        let bad = || format!("reduce_plist_sum: not a number: {v}");
        match sums.iter().position(|(x, _)| *x == k) {
            Some(i) => {
                let (_, s) = sums.swap_remove(i);
                sums.push((k, s.add(v).ok_or_else(bad)?));
            }
            None => sums.push((k, Sum::Int(0).add(v).ok_or_else(bad)?)),
        }
        Ok(())
    };
    let mut pairs = |v: &Value| -> Result<(), String> {
        match v {
            Value::Array(a) if a.len() == 2 && !a[0].is_array() => add(a[0].clone(), &a[1]),
            Value::Array(a) => {
                for p in a {
                    match p {
                        Value::Array(pa) if pa.len() == 2 => add(pa[0].clone(), &pa[1])?,
                        other => return Err(format!("reduce_plist_sum: not a pair: {other}")),
                    }
                }
                Ok(())
            }
            Value::Object(o) => {
                for (k, x) in o {
                    add(Value::String(k.clone()), x)?;
                }
                Ok(())
            }
            other => Err(format!("reduce_plist_sum: not a pair: {other}")),
        }
    };
    for v in data(values) {
        pairs(&v)?;
    }
    sums.sort_by(|a, b| erlang_cmp(&a.0, &b.0));
    Ok(sums
        .into_iter()
        .map(|(k, s)| Value::Array(vec![k, s.into_json()]))
        .collect())
}

/// Erlang's term order on the JSON forms of terms: numbers < atoms
/// (`false` < `null` < `true`, alphabetical as atoms) < maps (objects) <
/// lists (arrays) < binaries (strings).
pub fn erlang_cmp(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::Bool(_) | Value::Null => 1,
            Value::Object(_) => 2,
            Value::Array(_) => 3,
            Value::String(_) => 4,
        }
    }
    fn atom(v: &Value) -> &'static str {
        match v {
            Value::Bool(false) => "false",
            Value::Bool(true) => "true",
            _ => "null",
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i.cmp(&j),
            _ => x
                .as_f64()
                .unwrap_or(0.0)
                .total_cmp(&y.as_f64().unwrap_or(0.0)),
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let o = erlang_cmp(p, q);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => x.len().cmp(&y.len()).then_with(|| {
            for ((kx, vx), (ky, vy)) in x.iter().zip(y) {
                let o = kx.cmp(ky).then_with(|| erlang_cmp(vx, vy));
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        }),
        _ if rank(a) == 1 && rank(b) == 1 => atom(a).cmp(atom(b)),
        _ => rank(a).cmp(&rank(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn red(b: Builtin, v: Value) -> Result<Vec<Value>, String> {
        let Value::Array(list) = v else {
            panic!("not a list")
        };
        b.reduce(list, &Value::Null)
    }

    #[test]
    fn reduces_as_riak() {
        use Builtin::*;
        assert_eq!(red(ReduceSum, json!([1, 2, 3, 4])), Ok(vec![json!(10)]));
        assert_eq!(
            red(ReduceSum, json!([1, 2.5, {"not_found": {}}])),
            Ok(vec![json!(3.5)])
        );
        assert!(red(ReduceSum, json!([1, "2"])).is_err_and(|e| e.contains("\"2\"")));
        assert_eq!(red(ReduceSum, json!([])), Ok(vec![json!(0)]));
        assert_eq!(
            red(ReduceSort, json!(["b", 3, "a", [1], null, {"k": 1}, 1])),
            Ok(vec![
                json!(1),
                json!(3),
                json!(null),
                json!({"k": 1}),
                json!([1]),
                json!("a"),
                json!("b")
            ])
        );
        let mut u = red(ReduceSetUnion, json!(["foo", "foo", "bar", "baz"])).unwrap_or_default();
        u.sort_by(erlang_cmp);
        assert_eq!(u, vec![json!("bar"), json!("baz"), json!("foo")]);
        assert_eq!(
            red(
                ReducePlistSum,
                json!([[["a", 1]], [["a", 2]], [["b", 1]], [["b", 4]]])
            ),
            Ok(vec![json!(["a", 3]), json!(["b", 5])])
        );
        assert_eq!(
            red(
                ReducePlistSum,
                json!([["a", 1], ["a", 2], ["b", 1], ["b", 4]])
            ),
            Ok(vec![json!(["a", 3]), json!(["b", 5])])
        );
        assert_eq!(red(ReducePlistSum, json!([])), Ok(vec![]));
        assert_eq!(
            red(ReduceStringToInteger, json!(["1", "2", 3])),
            Ok(vec![json!(1), json!(2), json!(3)])
        );
        // Counts: integers are earlier counts (re-reduce), the rest count 1.
        assert_eq!(
            red(ReduceCountInputs, json!([["b", "k1"]])),
            Ok(vec![json!(1)])
        );
        assert_eq!(
            red(
                ReduceCountInputs,
                json!([["b", "k1"], ["b", "k2"], ["b", "k3"], 2, 4])
            ),
            Ok(vec![json!(9)])
        );
        assert_eq!(
            red(ReduceIdentity, json!([["b", "k", "kd"], ["b", "k2"]])),
            Ok(vec![json!(["b", "k"]), json!(["b", "k2"])])
        );
        assert!(red(ReduceIdentity, json!([5])).is_err());
    }

    #[test]
    fn names_resolve() {
        assert_eq!(
            Builtin::find("riak_kv_mapreduce", "reduce_sum"),
            Some(Builtin::ReduceSum)
        );
        assert_eq!(Builtin::find("riak_kv_mapreduce", "nope"), None);
        assert_eq!(Builtin::find("other", "reduce_sum"), None);
        assert_eq!(Builtin::names().len(), TABLE.len());
        for (n, b) in TABLE {
            assert_eq!(b.name(), *n);
        }
    }
}
