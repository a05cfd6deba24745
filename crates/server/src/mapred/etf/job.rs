//! A MapReduce job sent as Erlang terms (`riak_kv_mapred_term`), read into
//! the [`Job`] a JSON job parses to, so the runner is the same for both.
//!
//! The job is what riakc sends, `term_to_binary([{inputs, Inputs},
//! {query, Query}, {timeout, Timeout}])`, read as `proplists` would (the
//! first pair of each name counts; a missing `timeout` is 60 s,
//! `infinity` or more than an hour is an hour, anything but a positive
//! integer is the default).
//!
//! Inputs: a bucket `<<"b">>`; a typed bucket `{<<"t">>, <<"b">>}`; key
//! filters `{Bucket, [[<<"starts_with">>, <<"a">>], ...]}` (Bucket binary
//! or `{T, B}`; the filters as in JSON, atoms and strings read as text);
//! listed keys `[{B, K} | {{B, K}, KeyData} | {{{T, B}, K}, KeyData}]`
//! (as Riak, `{{T, B}, K}` reads as bucket T, key B, key data K); 2i
//! `{index, Bucket, Index, Key}` and `{index, Bucket, Index, Start, End}`
//! (keys binaries or integers); and `{modfun, riak_index, mapred_index,
//! [Bucket, {eq, Index, Key} | {range, Index, Start, End}]}`, the 2i input
//! of Riak 1.x clients. Other `{modfun, M, F, Arg}` inputs and `{search,
//! ...}` fail with Riak's text for a node without them.
//!
//! Query: a list of `{map, FunSpec, Arg, Keep}`, `{reduce, FunSpec, Arg,
//! Keep}` and `{link, Bucket | '_', Tag | '_', Keep}`. FunSpec:
//! `{modfun, riak_kv_mapreduce, F}` and `{qfun, fun riak_kv_mapreduce:F/A}`
//! (the built-ins of [`crate::mapred::builtins`]; other modules are
//! refused as Riak refuses a module it cannot load), `{jsanon, Source}`,
//! `{jsfun, Name}`. Refused: `{strfun, ...}` (Riak's
//! [`STRFUN_REFUSED`]: `allow_strfun` is never on), an anonymous `{qfun,
//! Fun}` (no Erlang code runs here), `{jsanon, {Bucket, Key}}` (as in
//! JSON). `Arg` is read by [`super::value::arg_to_json`], key data by
//! [`Mode::Data`].
//!
//! Errors carry Riak's own words where Riak has some: `~p` of
//! `{inputs, {Message, Term}}` or `{query, ...}`, `Phase {xform_map,N}:
//! ...` for a map function Riak would not load.

use super::scan;
use super::value::{arg_to_json, erl_string, show, to_json, Mode};
use crate::limits::{
    MAPRED_DEFAULT_TIMEOUT, MAPRED_MAX_LISTED_INPUTS, MAPRED_MAX_PHASES, MAPRED_MAX_TIMEOUT,
};
use crate::mapred::builtins::Builtin;
use crate::mapred::job::{
    BucketName, Inputs, Job, JobError, KeyInput, Phase, PhaseFun, PhaseKind, STRFUN_REFUSED,
};
use crate::mapred::js::JsFun;
use crate::mapred::keyfilter;
use eetf::Term;
use std::time::Duration;

fn bad<T>(msg: impl Into<String>) -> Result<T, JobError> {
    Err(JobError(msg.into()))
}

/// Riak's message for inputs it does not recognise.
const INPUTS_FORMATS: &str = "Inputs must be a binary bucket, a tuple of bucket and key-filters, \
a list of target tuples, or a search, index, or modfun tuple:";

fn inputs_error<T>(msg: &str, t: &Term) -> Result<T, JobError> {
    bad(format!("{{inputs,{{{},{}}}}}", erl_string(msg), show(t)))
}

fn query_error<T>(msg: &str, t: &Term) -> Result<T, JobError> {
    bad(format!("{{query,{{{},{}}}}}", erl_string(msg), show(t)))
}

fn atom_is(t: &Term, name: &str) -> bool {
    matches!(t, Term::Atom(a) if a.name == name)
}

fn bin(t: &Term) -> Option<&[u8]> {
    match t {
        Term::Binary(b) => Some(&b.bytes),
        _ => None,
    }
}

/// A binary, or an Erlang string (a list of bytes), as bytes.
fn text(t: &Term) -> Option<Vec<u8>> {
    match t {
        Term::Binary(b) => Some(b.bytes.clone()),
        Term::ByteList(l) => Some(l.bytes.clone()),
        Term::List(l) if l.elements.is_empty() => Some(Vec::new()),
        _ => None,
    }
}

fn untyped(b: &[u8]) -> BucketName {
    BucketName {
        btype: None,
        bucket: b.to_vec(),
    }
}

fn typed(t: &[u8], b: &[u8]) -> BucketName {
    BucketName {
        btype: Some(t.to_vec()).filter(|t| t != b"default"),
        bucket: b.to_vec(),
    }
}

/// `B` or `{T, B}`, both binaries.
fn bucket(t: &Term) -> Option<BucketName> {
    match t {
        Term::Binary(b) => Some(untyped(&b.bytes)),
        Term::Tuple(tb) => match &tb.elements[..] {
            [Term::Binary(ty), Term::Binary(b)] => Some(typed(&ty.bytes, &b.bytes)),
            _ => None,
        },
        _ => None,
    }
}

/// Reads a job's bytes (the body of an `application/x-erlang-binary`
/// `RpbMapRedReq`).
pub fn parse(bytes: &[u8]) -> Result<Job, JobError> {
    // Malformed: `badarg ...`; past a limit: the limit's name.
    let req = scan::decode(bytes, &scan::JOB).map_err(|e| JobError(e.to_string()))?;
    let props: &[Term] = match &req {
        Term::List(l) => &l.elements,
        Term::ByteList(_) => &[],
        // `proplists:get_value/3` on a non-list.
        _ => {
            return bad(
                "function_clause (a job is the list [{inputs, Inputs}, {query, Query}, {timeout, Timeout}])",
            )
        }
    };
    let get = |name: &str| {
        props.iter().find_map(|p| match p {
            Term::Tuple(t) if t.elements.len() == 2 && atom_is(&t.elements[0], name) => {
                Some(&t.elements[1])
            }
            _ => None,
        })
    };
    let undefined = Term::from(eetf::Atom::from("undefined"));
    let timeout = match get("timeout") {
        Some(Term::FixInteger(i)) if i.value > 0 => {
            Duration::from_millis(i.value as u64).min(MAPRED_MAX_TIMEOUT)
        }
        Some(Term::BigInteger(b)) if b.value > 0.into() => MAPRED_MAX_TIMEOUT,
        Some(t) if atom_is(t, "infinity") => MAPRED_MAX_TIMEOUT,
        _ => MAPRED_DEFAULT_TIMEOUT,
    };
    let inputs = parse_inputs(get("inputs").unwrap_or(&undefined))?;
    let query = parse_query(get("query").unwrap_or(&undefined))?;
    Ok(Job {
        inputs,
        query,
        timeout,
    })
}

fn parse_inputs(t: &Term) -> Result<Inputs, JobError> {
    match t {
        Term::Binary(b) => Ok(Inputs::Bucket {
            bucket: untyped(&b.bytes),
            filters: Vec::new(),
        }),
        Term::List(l) => targets(&l.elements).map(Inputs::Keys),
        Term::Tuple(tu) => tuple_inputs(t, &tu.elements),
        _ => inputs_error(INPUTS_FORMATS, t),
    }
}

/// Listed keys (`riak_kv_mapred_term:valid_input_targets`).
fn targets(items: &[Term]) -> Result<Vec<KeyInput>, JobError> {
    if items.len() > MAPRED_MAX_LISTED_INPUTS {
        return bad(format!(
            "{{inputs,{} listed inputs; at most {MAPRED_MAX_LISTED_INPUTS}}}",
            items.len()
        ));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let Some(k) = target(it) else {
            let rest = Term::from(eetf::List::from(items[i..].to_vec()));
            return inputs_error(
                "Inputs target tuples must be {B,K} or {{B,K},KeyData}:",
                &rest,
            );
        };
        out.push(k);
    }
    Ok(out)
}

fn target(t: &Term) -> Option<KeyInput> {
    let Term::Tuple(tu) = t else { return None };
    let [first, second] = &tu.elements[..] else {
        return None;
    };
    if let (Some(b), Some(k)) = (bin(first), bin(second)) {
        return Some(KeyInput {
            bucket: untyped(b),
            key: k.to_vec(),
            keydata: None,
        });
    }
    let Term::Tuple(bk) = first else { return None };
    let [b, k] = &bk.elements[..] else {
        return None;
    };
    let key = bin(k)?.to_vec();
    let bucket = match b {
        Term::Binary(b) => untyped(&b.bytes),
        Term::Tuple(tb) => match &tb.elements[..] {
            [Term::Binary(ty), Term::Binary(b)] => typed(&ty.bytes, &b.bytes),
            _ => return None,
        },
        _ => return None,
    };
    // Riak hands `undefined` to a map function for a key without data.
    let keydata = (!atom_is(second, "undefined")).then(|| to_json(second, Mode::Data));
    Some(KeyInput {
        bucket,
        key,
        keydata,
    })
}

fn tuple_inputs(t: &Term, items: &[Term]) -> Result<Inputs, JobError> {
    match items {
        [Term::Binary(ty), Term::Binary(b)] => Ok(Inputs::Bucket {
            bucket: typed(&ty.bytes, &b.bytes),
            filters: Vec::new(),
        }),
        [b, filters @ (Term::List(_) | Term::ByteList(_))] if bucket(b).is_some() => {
            let Some(bucket) = bucket(b) else {
                return inputs_error(INPUTS_FORMATS, t);
            };
            let json = to_json(filters, Mode::Text);
            let filters = keyfilter::parse(&json)
                .map_err(|e| JobError(format!("inputs: key_filters: {}", e.0)))?;
            Ok(Inputs::Bucket { bucket, filters })
        }
        [tag, b, index, key] if atom_is(tag, "index") => index_input(t, b, index, key, None),
        [tag, b, index, start, end] if atom_is(tag, "index") => {
            index_input(t, b, index, start, Some(end))
        }
        [tag, Term::Atom(m), Term::Atom(f), arg] if atom_is(tag, "modfun") => {
            modfun_input(t, &m.name, &f.name, arg)
        }
        [tag, ..] if atom_is(tag, "search") && (3..=4).contains(&items.len()) => {
            bad("Error sending inputs: {error,\"search not enabled\"}")
        }
        _ => inputs_error(INPUTS_FORMATS, t),
    }
}

/// A 2i term: a binary, a string or an integer.
fn index_term(t: &Term) -> Option<Vec<u8>> {
    match t {
        Term::FixInteger(i) => Some(i.value.to_string().into_bytes()),
        Term::BigInteger(b) => Some(b.value.to_string().into_bytes()),
        _ => text(t),
    }
}

fn index_input(
    whole: &Term,
    b: &Term,
    index: &Term,
    start: &Term,
    end: Option<&Term>,
) -> Result<Inputs, JobError> {
    let (Some(bucket), Some(field)) = (bucket(b), text(index)) else {
        return inputs_error(INPUTS_FORMATS, whole);
    };
    let known = field.ends_with(b"_bin")
        || field.ends_with(b"_int")
        || field == b"$key"
        || field == b"$bucket";
    if !known {
        // `riak_index:parse_fields`.
        return bad(format!(
            "{{inputs,[{{unknown_field_type,{}}}]}}",
            show(&Term::from(eetf::Binary::from(field)))
        ));
    }
    let term = |t: &Term| {
        index_term(t).ok_or_else(|| {
            JobError(format!(
                "{{inputs,[{{invalid_field_value,{{{},{}}}}}]}}",
                show(&Term::from(eetf::Binary::from(field.clone()))),
                show(t)
            ))
        })
    };
    Ok(Inputs::Index {
        bucket,
        index: field.clone(),
        start: term(start)?,
        end: end.map(term).transpose()?,
    })
}

/// `{modfun, riak_index, mapred_index, [Bucket, Query]}`: Riak 1.x's 2i
/// input; any other input function is one this node does not have.
fn modfun_input(whole: &Term, m: &str, f: &str, arg: &Term) -> Result<Inputs, JobError> {
    if (m, f) == ("riak_index", "mapred_index") {
        if let Term::List(l) = arg {
            if let [b, Term::Tuple(q)] = &l.elements[..] {
                match &q.elements[..] {
                    [op, index, key] if atom_is(op, "eq") => {
                        return index_input(whole, b, index, key, None)
                    }
                    [op, index, start, end] if atom_is(op, "range") => {
                        return index_input(whole, b, index, start, Some(end))
                    }
                    _ => {}
                }
            }
        }
    }
    bad(format!(
        "Error sending inputs: {{{},error,undef,[]}}",
        show(whole)
    ))
}

fn parse_query(t: &Term) -> Result<Vec<Phase>, JobError> {
    let phases: &[Term] = match t {
        Term::List(l) => &l.elements,
        _ => return query_error("Query takes a list of step tuples", t),
    };
    if phases.len() > MAPRED_MAX_PHASES {
        return bad(format!(
            "{{query,{} phases; at most {MAPRED_MAX_PHASES}}}",
            phases.len()
        ));
    }
    phases
        .iter()
        .enumerate()
        .map(|(i, p)| parse_phase(i, p))
        .collect()
}

const PHASE_FORMS: &str =
    "Query steps are {map, FunSpec, Arg, Keep}, {reduce, FunSpec, Arg, Keep} \
or {link, Bucket, Tag, Keep}, Keep true or false:";

fn parse_phase(i: usize, t: &Term) -> Result<Phase, JobError> {
    let Term::Tuple(tu) = t else {
        return query_error(PHASE_FORMS, t);
    };
    let [Term::Atom(kind), a, b, Term::Atom(keep)] = &tu.elements[..] else {
        return query_error(PHASE_FORMS, t);
    };
    let keep = match keep.name.as_str() {
        "true" => true,
        "false" => false,
        _ => return query_error(PHASE_FORMS, t),
    };
    let (kind, arg) = match kind.name.as_str() {
        "map" => (
            PhaseKind::Map(fun_spec(i, false, a)?),
            arg_to_json(b, false),
        ),
        "reduce" => (
            PhaseKind::Reduce(fun_spec(i, true, a)?),
            arg_to_json(b, true),
        ),
        "link" => {
            let part = |x: &Term| match x {
                Term::Binary(v) => Ok(Some(v.bytes.clone())),
                _ if atom_is(x, "_") => Ok(None),
                _ => query_error("A link step's bucket and tag are binaries or '_':", t),
            };
            (
                PhaseKind::Link {
                    bucket: part(a)?,
                    tag: part(b)?,
                },
                serde_json::Value::Null,
            )
        }
        _ => return query_error(PHASE_FORMS, t),
    };
    Ok(Phase { kind, arg, keep })
}

/// Erlang's `type_of` word for a term (`riak_pipe_v:type_of`).
fn type_of(t: &Term) -> &'static str {
    match t {
        Term::Pid(_) => "pid",
        Term::Reference(_) => "reference",
        Term::List(_) | Term::ByteList(_) | Term::ImproperList(_) => "list",
        Term::Tuple(_) => "tuple",
        Term::Atom(_) => "atom",
        Term::FixInteger(_) | Term::BigInteger(_) | Term::Float(_) => "number",
        Term::Binary(_) | Term::BitBinary(_) => "binary",
        Term::ExternalFun(_) | Term::InternalFun(_) => "function",
        Term::Port(_) | Term::Map(_) => "unidentified",
    }
}

/// A map or reduce phase's function (phase `i`).
fn fun_spec(i: usize, reduce: bool, t: &Term) -> Result<PhaseFun, JobError> {
    // Riak's fitting names and labels for this phase's function.
    let (fitting, label, arity) = if reduce {
        (format!("{{reduce,{i}}}"), "arg", 2)
    } else {
        (format!("{{xform_map,{i}}}"), "PhaseSpec", 3)
    };
    let phase_err = |m: String| JobError(format!("Phase {fitting}: {m}"));
    let builtin = |m: &str, f: &str| -> Result<PhaseFun, JobError> {
        if m != "riak_kv_mapreduce" {
            return Err(phase_err(format!(
                "invalid module named in {label} function:\n must be a valid module name (failed to load {m}: nofile)"
            )));
        }
        match Builtin::find(m, f) {
            Some(b)
                if b.name()
                    .starts_with(if reduce { "reduce_" } else { "map_" }) =>
            {
                Ok(PhaseFun::ErlangTerms(b))
            }
            _ => Err(phase_err(format!(
                "{label} specifies {m}:{f}/{arity}, which is not exported"
            ))),
        }
    };
    let Term::Tuple(tu) = t else {
        return Err(phase_err(format!(
            "{label} must be a function or {{Mod, Fun}} (arity {arity}), not a {}",
            type_of(t)
        )));
    };
    match &tu.elements[..] {
        [tag, Term::Atom(m), Term::Atom(f)] if atom_is(tag, "modfun") => builtin(&m.name, &f.name),
        [tag, Term::ExternalFun(f)] if atom_is(tag, "qfun") => {
            if usize::from(f.arity) != arity {
                return Err(phase_err(format!(
                    "{label} must be of arity {arity}, not {}",
                    f.arity
                )));
            }
            builtin(&f.module.name, &f.function.name)
        }
        [tag, Term::InternalFun(f)] if atom_is(tag, "qfun") => Err(phase_err(format!(
            "{label} is an anonymous fun ({f}): Basalt runs no Erlang code; name a built-in \
             ({{modfun, riak_kv_mapreduce, Function}}) or use JavaScript ({{jsanon, Source}})"
        ))),
        [tag, other] if atom_is(tag, "qfun") => Err(phase_err(format!(
            "{label} must be a function or {{Mod, Fun}} (arity {arity}), not a {}",
            type_of(other)
        ))),
        [tag, _] if atom_is(tag, "strfun") => bad(STRFUN_REFUSED),
        [tag, Term::Tuple(_)] if atom_is(tag, "jsanon") => Err(phase_err(
            "{jsanon, {Bucket, Key}}: JavaScript stored in a Riak object is not supported; \
             give the source ({jsanon, Source}) or a name ({jsfun, Name})"
                .into(),
        )),
        [tag, src] if atom_is(tag, "jsanon") => match text(src).map(String::from_utf8) {
            Some(Ok(s)) if !s.trim().is_empty() => Ok(PhaseFun::Js(JsFun::Source(s))),
            _ => Err(phase_err(
                "{jsanon, Source}: Source must be the UTF-8 text of a JavaScript function".into(),
            )),
        },
        [tag, name] if atom_is(tag, "jsfun") => match text(name).map(String::from_utf8) {
            Some(Ok(s)) if !s.is_empty() => Ok(PhaseFun::Js(JsFun::Name(s))),
            _ => Err(phase_err(
                "{jsfun, Name}: Name must be the name of a JavaScript function".into(),
            )),
        },
        _ => Err(phase_err(format!(
            "{label} must be one of {{modfun, Module, Function}}, {{qfun, Function}}, \
             {{strfun, Source}}, {{jsanon, Source}}, {{jsfun, Name}}; got {}",
            show(t)
        ))),
    }
}
