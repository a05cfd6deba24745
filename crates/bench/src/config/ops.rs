//! What a run does: the operations ([`OpKind`]) with their config names,
//! the drivers ([`DriverKind`]) and the operations each accepts, one entry
//! of `operations` ([`OpSpec`]) with its label, and the reading and
//! checking of `operations` itself.

use super::error::ConfigError;
use super::raw::RawConfig;
use crate::term::Term;

/// Driver names accepted in `driver` (each also with the
/// `basho_bench_driver_` prefix).
pub const VALID_DRIVERS: &[&str] = &["basalt_embedded", "null", "riakc_pb", "nhs", "http_raw"];

/// Why an operation of basho_bench's `driver` is not run by basalt bench,
/// if `name` is one (tuple operations written as `{counter,value}`).
pub fn unsupported_op(driver: DriverKind, name: &str) -> Option<&'static str> {
    const DATA_TYPES: &str = "Riak data types (DtFetchReq / DtUpdateReq) are not \
        implemented by basalt bench's riakc_pb driver (the node serves them); they also \
        need a {Type, Bucket} riakc_pb_bucket, which is not supported";
    match (driver, name) {
        (DriverKind::RiakcPb, "search" | "search_interval") => Some(
            "Riak Search (Yokozuna / Solr) queries: Basalt serves no search \
             (riakc_pb_search_queries and query_step_interval are for them)",
        ),
        (
            DriverKind::RiakcPb,
            "mr_bucket_erlang" | "mr_bucket_js" | "mr_keylist_erlang" | "mr_keylist_js",
        ) => Some(
            "MapReduce ops are not implemented by basalt bench's riakc_pb driver (the \
             node serves RpbMapRedReq; pb_timeout_mapreduce is read and checked for them)",
        ),
        (DriverKind::RiakcPb, "counter_incr" | "counter_val") => Some(
            "Riak 1.4 counters (RpbCounterUpdateReq / RpbCounterGetReq) are not \
             implemented by basalt bench's riakc_pb driver (the node serves them)",
        ),
        (
            DriverKind::RiakcPb,
            "{counter,value}"
            | "{counter,increment}"
            | "{team,write}"
            | "{team,read}"
            | "{team,player,removal}"
            | "{team,player,addition}"
            | "{game,completed}",
        ) => Some(DATA_TYPES),
        (
            DriverKind::Null,
            "print_key"
            | "print_value"
            | "print_key_and_value"
            | "{print_value,_}"
            | "{print_key_and_value,_,_}",
        ) => Some("they print every key or value on the console; not implemented"),
        _ => None,
    }
}

/// Backends the embedded driver can open (every backend of `basalt-backends`).
pub fn valid_backends() -> Vec<&'static str> {
    basalt_backends::backend_names()
}

/// An operation a driver can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// Read a value (not found is a success).
    Get,
    /// Write a value.
    Put,
    /// Get, then put a new value.
    Update,
    /// Delete (not found is a success).
    Delete,
    /// Read metadata only.
    Head,
    /// Range query with return_terms on the index terms `put` writes.
    IndexQuery,
    /// `null` driver only: always fails (tests error accounting).
    AnError,
    /// Get; not found is an error.
    GetExisting,
    /// Update; not found is an error.
    UpdateExisting,
    /// Get (not found: a new object), replace the 2i terms with generated
    /// postcode / date-of-birth / last-modified terms, put.
    UpdateWith2i,
    /// 2i range query with return_terms on `postcode_bin`.
    QueryPostcode,
    /// 2i range query with return_terms on `dateofbirth_bin`.
    QueryDob,
    /// NHS: get from the record bucket (not found is a success).
    GetPb,
    /// NHS: get one of this worker's "always get" keys; not found is an error.
    AlwaysGetPb,
    /// NHS: grow the "always get" key set or update one of its keys, with
    /// new 2i terms.
    AlwaysGetUpdateWith2i,
    /// NHS: as `AlwaysGetUpdateWith2i`, keeping the object's 2i terms.
    AlwaysGetUpdateWithout2i,
    /// NHS: put a new object with a unique key in the document bucket.
    PutUnique,
    /// NHS: get one of the unique keys put so far.
    GetUnique,
    /// NHS: `put_unique` on the active cluster, then poll a GET of the key
    /// on the passive cluster (`replpb_ips`) until it is there.
    PutUniqueCheckRepl,
    /// `riakc_pb`: list the keys of `riakc_pb_bucket` (streamed
    /// `RpbListKeysReq`), done when the stream ends.
    ListKeys,
    /// `riakc_pb` (Basalt's own, not upstream's): `RpbPingReq`, no key or
    /// value; the loopback round trip `scripts/cluster-floor.sh` measures.
    Ping,
    /// `null` only: nothing (upstream draws no key either).
    AbsolutelyNothing,
    /// `null` only: nothing (a key is drawn).
    DoSomething,
    /// `null` only: nothing (a key and a value are drawn).
    DoSomethingElse,
    /// `null` only: always fails, with another reason than `an_error`.
    AnotherError,
}

impl OpKind {
    /// All operations, with their config names.
    pub const ALL: &'static [(&'static str, OpKind)] = &[
        ("get", OpKind::Get),
        ("put", OpKind::Put),
        ("update", OpKind::Update),
        ("delete", OpKind::Delete),
        ("head", OpKind::Head),
        ("index_query", OpKind::IndexQuery),
        ("an_error", OpKind::AnError),
        ("get_existing", OpKind::GetExisting),
        ("update_existing", OpKind::UpdateExisting),
        ("update_with2i", OpKind::UpdateWith2i),
        ("query_postcode", OpKind::QueryPostcode),
        ("query_dob", OpKind::QueryDob),
        ("get_pb", OpKind::GetPb),
        ("alwaysget_pb", OpKind::AlwaysGetPb),
        ("alwaysget_updatewith2i", OpKind::AlwaysGetUpdateWith2i),
        (
            "alwaysget_updatewithout2i",
            OpKind::AlwaysGetUpdateWithout2i,
        ),
        ("put_unique", OpKind::PutUnique),
        ("get_unique", OpKind::GetUnique),
        ("put_unique_checkrepl", OpKind::PutUniqueCheckRepl),
        ("listkeys", OpKind::ListKeys),
        ("ping", OpKind::Ping),
        ("absolutely_nothing", OpKind::AbsolutelyNothing),
        ("do_something", OpKind::DoSomething),
        ("do_something_else", OpKind::DoSomethingElse),
        ("another_error", OpKind::AnotherError),
    ];

    /// The config name.
    pub fn name(self) -> &'static str {
        OpKind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }

    /// True when the op writes a value from the value generator.
    pub fn writes(self) -> bool {
        matches!(
            self,
            OpKind::Put
                | OpKind::Update
                | OpKind::UpdateExisting
                | OpKind::UpdateWith2i
                | OpKind::AlwaysGetUpdateWith2i
                | OpKind::AlwaysGetUpdateWithout2i
                | OpKind::DoSomethingElse
        )
    }
}

/// Which driver runs the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverKind {
    /// `basalt_embedded`: stores opened in this process.
    Embedded,
    /// `null`: does nothing (harness overhead).
    Null,
    /// `basho_bench_driver_riakc_pb`: a Riak node over Protocol Buffers.
    RiakcPb,
    /// `basho_bench_driver_nhs`: the NHS workload over Protocol Buffers.
    Nhs,
    /// `basho_bench_driver_http_raw`: a Riak node over HTTP.
    HttpRaw,
}

impl DriverKind {
    /// Operations this driver accepts.
    pub fn valid_ops(self) -> &'static [&'static str] {
        match self {
            DriverKind::Embedded => &["get", "put", "update", "delete", "head", "index_query"],
            DriverKind::Null => &[
                "get",
                "put",
                "update",
                "delete",
                "head",
                "index_query",
                "an_error",
                "absolutely_nothing",
                "do_something",
                "do_something_else",
                "another_error",
            ],
            DriverKind::RiakcPb => &[
                "get",
                "get_existing",
                "put",
                "update",
                "update_existing",
                "update_with2i",
                "delete",
                "query_postcode",
                "query_dob",
                "listkeys",
                "ping",
            ],
            DriverKind::Nhs => &[
                "get_pb",
                "update_with2i",
                "alwaysget_pb",
                "alwaysget_updatewith2i",
                "alwaysget_updatewithout2i",
                "put_unique",
                "get_unique",
                "put_unique_checkrepl",
            ],
            DriverKind::HttpRaw => &[
                "get",
                "get_existing",
                "put",
                "update",
                "update_existing",
                "delete",
            ],
        }
    }

    /// True for the drivers that talk to a node over the network.
    pub fn is_network(self) -> bool {
        matches!(
            self,
            DriverKind::RiakcPb | DriverKind::Nhs | DriverKind::HttpRaw
        )
    }
}

/// One entry of `operations`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSpec {
    /// Label (the op name unless `{Label, Op, Weight}` was given).
    pub label: String,
    /// The operation.
    pub op: OpKind,
    /// Integer weight.
    pub weight: u32,
}

impl OpSpec {
    /// The label as basho_bench writes it in file names: characters
    /// outside `[0-9A-Za-z]` become `-` (`index_query` → `index-query`).
    pub fn file_label(&self) -> String {
        normalize_label(&self.label)
    }
}

/// basho_bench's label normalisation for file names.
pub fn normalize_label(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

impl RawConfig {
    /// `operations`: a list of `{Op, Weight}` or `{Label, Op, Weight}`,
    /// each an operation `driver` accepts; entries of weight 0 are left
    /// out, and labels must differ.
    pub(super) fn parse_ops(
        &self,
        t: &Term,
        driver: DriverKind,
    ) -> Result<Vec<OpSpec>, ConfigError> {
        let Term::List(items) = t else {
            return Err(self.invalid("operations", "expected a list of {Op, Weight}"));
        };
        let valid = driver.valid_ops();
        let mut out = Vec::new();
        for item in items {
            let (label, name, weight) = match item {
                Term::Tuple(v) => match v.as_slice() {
                    [Term::Atom(o), w] => (o.clone(), o.as_str(), w),
                    // An operation that is a tuple, as the riakc_pb driver's
                    // data-type ops `{counter, value}`: none runs here.
                    [op @ Term::Tuple(_), _] | [_, op @ Term::Tuple(_), _] => {
                        let name = op.to_string();
                        let why = unsupported_op(driver, &name).map_or_else(
                            || format!("unknown operation {name}; valid: {}", valid.join(", ")),
                            |why| format!("operation {name} is not supported: {why}"),
                        );
                        return Err(self.invalid("operations", why));
                    }
                    [l, Term::Atom(o), w] => {
                        let label = match l {
                            Term::Tuple(parts) => parts
                                .iter()
                                .map(|p| p.as_text().unwrap_or_else(|| p.to_string()))
                                .collect::<Vec<_>>()
                                .join("-"),
                            other => other.as_text().unwrap_or_else(|| other.to_string()),
                        };
                        (label, o.as_str(), w)
                    }
                    _ => {
                        return Err(self.invalid(
                            "operations",
                            format!("expected {{Op, Weight}} or {{Label, Op, Weight}}, got {item}"),
                        ))
                    }
                },
                _ => {
                    return Err(
                        self.invalid("operations", format!("expected {{Op, Weight}}, got {item}"))
                    )
                }
            };
            let kind = OpKind::ALL
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, k)| *k)
                .filter(|_| valid.contains(&name))
                .ok_or_else(|| {
                    self.invalid(
                        "operations",
                        match unsupported_op(driver, name) {
                            Some(why) => format!("operation {name} is not supported: {why}"),
                            None => {
                                format!("unknown operation {name}; valid: {}", valid.join(", "))
                            }
                        },
                    )
                })?;
            let weight = weight
                .as_int()
                .filter(|w| (0..=u32::MAX as i64).contains(w))
                .ok_or_else(|| self.invalid("operations", format!("bad weight in {item}")))?;
            if weight > 0 {
                out.push(OpSpec {
                    label,
                    op: kind,
                    weight: weight as u32,
                });
            }
        }
        if out.is_empty() {
            return Err(self.invalid("operations", "no operation with a weight above 0"));
        }
        let mut labels: Vec<String> = out.iter().map(OpSpec::file_label).collect();
        labels.sort();
        labels.dedup();
        if labels.len() != out.len() {
            return Err(self.invalid(
                "operations",
                "two operations share a label; use {Label, Op, Weight} to tell them apart",
            ));
        }
        Ok(out)
    }
}
