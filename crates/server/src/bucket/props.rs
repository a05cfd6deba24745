//! Bucket properties: Riak's defaults for the `default` bucket type, and
//! per-bucket overrides (get / set / reset) on top of the bucket type's
//! props, held in memory and persisted as JSON in
//! `<data_dir>/bucket_props.json` (temp file, fsync, rename, fsync dir).
//! Commit hooks (`precommit`, `postcommit`) are props too ([`CommitHook`]);
//! they are run by [`crate::mapred::hooks`].

use crate::object::vclock::PruneProps;
use crate::pb::{quorum, RpbBucketProps, RpbCommitHook, RpbModFun};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The properties of one bucket (quorum fields keep the PB encoding:
/// a number, or one of [`quorum`]'s symbolic values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct BucketProps {
    pub n_val: u32,
    pub allow_mult: bool,
    pub last_write_wins: bool,
    pub r: u32,
    pub w: u32,
    pub pr: u32,
    pub pw: u32,
    pub dw: u32,
    pub rw: u32,
    pub notfound_ok: bool,
    pub basic_quorum: bool,
    pub small_vclock: u32,
    pub big_vclock: u32,
    pub young_vclock: u32,
    pub old_vclock: u32,
    /// The data type of a bucket type's buckets (`counter`, `set`, `map`,
    /// `hll`, `gset`; see [`crate::crdt`]); set when the type is created,
    /// never changed after. (Always serialized: props also travel in
    /// postcard, which has no optional fields.)
    #[serde(default)]
    pub datatype: Option<String>,
    /// HyperLogLog precision of `hll` buckets (registers = 2^precision).
    #[serde(default = "default_hll_precision")]
    pub hll_precision: u32,
    /// Pre-commit hooks, run in order before a PUT is written.
    #[serde(default)]
    pub precommit: Vec<CommitHook>,
    /// Post-commit hooks, run after a PUT is acknowledged.
    #[serde(default)]
    pub postcommit: Vec<CommitHook>,
}

/// A commit hook as Riak names it: an Erlang-style `{"mod","fun"}` (here:
/// one of Basalt's built-in hooks, [`BUILTIN_HOOKS`]) or a JavaScript
/// function `{"name"}` (a `Riak.*` built-in or one loaded from
/// `mapred.js_source_dir`).
///
/// Its serde form is externally tagged (`{"ModFun": {"mod", "fun"}}`,
/// `{"Name": {"name"}}`) because props also travel in postcard (vnode
/// requests), which cannot read untagged enums; Riak's JSON shape is
/// [`CommitHook::to_riak_json`] / [`CommitHook::from_riak_json`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommitHook {
    /// A built-in hook.
    ModFun {
        /// Module (`basalt_hooks`).
        #[serde(rename = "mod")]
        module: String,
        /// Function.
        #[serde(rename = "fun")]
        function: String,
    },
    /// A named JavaScript function.
    Name {
        /// The function's name.
        name: String,
    },
}

/// The built-in hooks `(module, function, kind)`; kind `pre` or `post`.
/// `validate_json` refuses a value that is not JSON; `max_object_size`
/// refuses a value larger than `mapred.hook_max_object_bytes` (5 MB by
/// default, the Test Pilot limit); `log_commit` logs the written key.
pub const BUILTIN_HOOKS: &[(&str, &str, &str)] = &[
    ("basalt_hooks", "validate_json", "pre"),
    ("basalt_hooks", "max_object_size", "pre"),
    ("basalt_hooks", "log_commit", "post"),
];

impl CommitHook {
    /// Riak's JSON form: `{"mod": M, "fun": F}` or `{"name": N}`.
    pub fn to_riak_json(&self) -> serde_json::Value {
        match self {
            CommitHook::ModFun { module, function } => {
                serde_json::json!({"mod": module, "fun": function})
            }
            CommitHook::Name { name } => serde_json::json!({"name": name}),
        }
    }

    /// From Riak's JSON form.
    pub fn from_riak_json(v: &serde_json::Value) -> Option<CommitHook> {
        let text = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        };
        let o = v.as_object()?;
        match (text("mod"), text("fun"), text("name")) {
            (Some(module), Some(function), None) if o.len() == 2 => {
                Some(CommitHook::ModFun { module, function })
            }
            (None, None, Some(name)) if o.len() == 1 => Some(CommitHook::Name { name }),
            _ => None,
        }
    }

    /// From Riak's PB form.
    pub fn from_pb(h: &RpbCommitHook) -> Result<CommitHook, PropsError> {
        let text = |b: &[u8], what: &str| {
            String::from_utf8(b.to_vec())
                .map_err(|_| PropsError::Invalid(format!("commit hook {what} is not UTF-8")))
        };
        match (&h.modfun, &h.name) {
            (Some(mf), None) => Ok(CommitHook::ModFun {
                module: text(&mf.module, "module")?,
                function: text(&mf.function, "function")?,
            }),
            (None, Some(n)) => Ok(CommitHook::Name {
                name: text(n, "name")?,
            }),
            _ => Err(PropsError::Invalid(
                "a commit hook needs either modfun or name".into(),
            )),
        }
    }

    /// Riak's PB form.
    pub fn to_pb(&self) -> RpbCommitHook {
        match self {
            CommitHook::ModFun { module, function } => RpbCommitHook {
                modfun: Some(RpbModFun {
                    module: module.clone().into_bytes(),
                    function: function.clone().into_bytes(),
                }),
                name: None,
            },
            CommitHook::Name { name } => RpbCommitHook {
                modfun: None,
                name: Some(name.clone().into_bytes()),
            },
        }
    }

    /// Checks a hook set as `kind` (`precommit` / `postcommit`): a mod/fun
    /// must be a built-in of that kind; a name must not be empty.
    pub fn check(&self, kind: &str) -> Result<(), PropsError> {
        match self {
            CommitHook::ModFun { module, function } => {
                let want = if kind == "precommit" { "pre" } else { "post" };
                if BUILTIN_HOOKS
                    .iter()
                    .any(|(m, f, k)| m == module && f == function && *k == want)
                {
                    Ok(())
                } else {
                    Err(PropsError::Invalid(format!(
                        "{kind}: unknown built-in hook {module}:{function} (built-in {kind} hooks: {})",
                        BUILTIN_HOOKS
                            .iter()
                            .filter(|(_, _, k)| *k == want)
                            .map(|(m, f, _)| format!("{m}:{f}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )))
                }
            }
            CommitHook::Name { name } if name.trim().is_empty() => Err(PropsError::Invalid(
                format!("{kind}: a JavaScript hook needs a function name"),
            )),
            CommitHook::Name { .. } => Ok(()),
        }
    }
}

/// The hooks a PB props message sets for one kind: `Some(list)` when the
/// message carries hooks or `has_<kind> = true` (the list replaces the
/// current one; empty clears it), `None` when it leaves them alone.
fn hooks_from_pb(
    hooks: &[RpbCommitHook],
    has: Option<bool>,
    kind: &str,
) -> Result<Option<Vec<CommitHook>>, PropsError> {
    if hooks.is_empty() && has != Some(true) {
        return Ok(None);
    }
    if hooks.len() > crate::limits::MAX_COMMIT_HOOKS {
        return Err(PropsError::Invalid(format!(
            "{kind}: at most {} hooks",
            crate::limits::MAX_COMMIT_HOOKS
        )));
    }
    let list = hooks
        .iter()
        .map(CommitHook::from_pb)
        .collect::<Result<Vec<_>, _>>()?;
    for h in &list {
        h.check(kind)?;
    }
    Ok(Some(list))
}

fn default_hll_precision() -> u32 {
    crate::limits::HLL_PRECISION_DEFAULT
}

/// The bucket-level hash function Riak reports (and Basalt uses).
pub const CHASH_KEYFUN: (&str, &str) = ("riak_core_util", "chash_std_keyfun");
/// The link function Riak reports.
pub const LINKFUN: (&str, &str) = ("riak_kv_wm_link_walker", "mapreduce_linkfun");

impl Default for BucketProps {
    fn default() -> Self {
        BucketProps {
            n_val: 3,
            allow_mult: false,
            last_write_wins: false,
            r: quorum::QUORUM,
            w: quorum::QUORUM,
            pr: 0,
            pw: 0,
            dw: quorum::QUORUM,
            rw: quorum::QUORUM,
            notfound_ok: true,
            basic_quorum: false,
            small_vclock: 50,
            big_vclock: 50,
            young_vclock: 20,
            old_vclock: 86_400,
            datatype: None,
            hll_precision: crate::limits::HLL_PRECISION_DEFAULT,
            precommit: Vec::new(),
            postcommit: Vec::new(),
        }
    }
}

/// Why props or a quorum value were refused.
#[derive(Debug, thiserror::Error)]
pub enum PropsError {
    /// A bad value.
    #[error("{0}")]
    Invalid(String),
    /// The props file could not be written or read.
    #[error("bucket props file {path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

impl BucketProps {
    /// Vclock pruning limits.
    pub fn prune(&self) -> PruneProps {
        PruneProps {
            small: self.small_vclock,
            big: self.big_vclock,
            young: u64::from(self.young_vclock),
            old: u64::from(self.old_vclock),
        }
    }

    /// These props with a request's `n_val` (reading or writing the first
    /// n replicas only; quorums then count against it, as
    /// riak_kv_get_fsm / riak_kv_put_fsm); more than the bucket's `n_val`
    /// is Riak's `n_val_violation`.
    pub fn with_request_n(
        &self,
        n_val: Option<u32>,
    ) -> Result<BucketProps, crate::error::RequestError> {
        match n_val {
            None => Ok(self.clone()),
            Some(n) if (1..=self.n_val).contains(&n) => Ok(BucketProps {
                n_val: n,
                ..self.clone()
            }),
            Some(n) => Err(crate::error::RequestError::Invalid(format!(
                "{{n_val_violation,{n}}} (the bucket's n_val is {})",
                self.n_val
            ))),
        }
    }

    /// Resolves a quorum value (request value, else the prop `dflt`) against
    /// `n_val`: `one`, `quorum` (n/2+1), `all`, `default`, or a number ≤ n.
    pub fn resolve(
        &self,
        requested: Option<u32>,
        dflt: u32,
        name: &str,
    ) -> Result<u32, PropsError> {
        let n = self.n_val;
        let v = match requested {
            None | Some(quorum::DEFAULT) => dflt,
            Some(v) => v,
        };
        let out = match v {
            quorum::ONE => 1,
            quorum::QUORUM => n / 2 + 1,
            quorum::ALL => n,
            quorum::DEFAULT => n / 2 + 1,
            v if v <= n => v,
            v => {
                return Err(PropsError::Invalid(format!(
                    "{{{name}_val_violation,{v}}} (n_val is {n})"
                )))
            }
        };
        Ok(out)
    }

    /// Applies the fields present in `p`.
    pub fn apply(&mut self, p: &RpbBucketProps) -> Result<(), PropsError> {
        if let Some(n) = p.n_val {
            if n == 0 || n > 64 {
                return Err(PropsError::Invalid(format!(
                    "n_val must be 1..=64, got {n}"
                )));
            }
            self.n_val = n;
        }
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = p.$f { self.$f = v; } )* };
        }
        set!(
            allow_mult,
            last_write_wins,
            r,
            w,
            pr,
            pw,
            dw,
            rw,
            notfound_ok,
            basic_quorum,
            small_vclock,
            big_vclock,
            young_vclock,
            old_vclock
        );
        if let Some(h) = hooks_from_pb(&p.precommit, p.has_precommit, "precommit")? {
            self.precommit = h;
        }
        if let Some(h) = hooks_from_pb(&p.postcommit, p.has_postcommit, "postcommit")? {
            self.postcommit = h;
        }
        if p.consistent == Some(true) || p.write_once == Some(true) {
            return Err(PropsError::Invalid(
                "consistent and write_once buckets are not supported".into(),
            ));
        }
        if let Some(d) = &p.datatype {
            let d = String::from_utf8_lossy(d);
            if self.datatype.as_deref() != Some(&*d) {
                // As riak_kv_bucket: a datatype is fixed when its type is
                // created ([`BucketProps::apply_new`]).
                return Err(PropsError::Invalid(format!(
                    "datatype: cannot_modify_datatype ({} to {d})",
                    self.datatype.as_deref().unwrap_or("none")
                )));
            }
        }
        if let Some(h) = p.hll_precision {
            if !(crate::limits::HLL_PRECISION_MIN..=crate::limits::HLL_PRECISION_MAX).contains(&h) {
                return Err(PropsError::Invalid(format!(
                    "hll_precision: {h} is not in {}..{}",
                    crate::limits::HLL_PRECISION_MIN,
                    crate::limits::HLL_PRECISION_MAX
                )));
            }
            // As Riak: an HLL's precision may be lowered (existing values
            // fold down on their next merge) but never raised.
            if h > self.hll_precision {
                return Err(PropsError::Invalid(format!(
                    "hll_precision: cannot increase it from {} to {h}; it may only decrease",
                    self.hll_precision
                )));
            }
            self.hll_precision = h;
        }
        self.check_datatype()
    }

    /// [`BucketProps::apply`] for a bucket type being created: `datatype`
    /// may be set here, and only here.
    pub fn apply_new(&mut self, p: &RpbBucketProps) -> Result<(), PropsError> {
        if let Some(d) = &p.datatype {
            let d = String::from_utf8_lossy(d).into_owned();
            if crate::crdt::DataType::from_name(&d).is_none() {
                return Err(PropsError::Invalid(format!(
                    "datatype: {d} is not a supported data type (counter, set, map, hll, gset)"
                )));
            }
            self.datatype = Some(d);
        }
        // A new type may take any precision in range (`apply` refuses
        // only increases of an existing one).
        if let Some(h) = p.hll_precision {
            self.hll_precision = h;
        }
        self.apply(p)
    }

    /// A data-type bucket must allow siblings (as riak_kv_bucket).
    fn check_datatype(&self) -> Result<(), PropsError> {
        if self.datatype.is_some() && (!self.allow_mult || self.last_write_wins) {
            return Err(PropsError::Invalid(
                "Data Type buckets must be allow_mult=true (and not last_write_wins)".into(),
            ));
        }
        Ok(())
    }

    /// The PB form.
    pub fn to_pb(&self) -> RpbBucketProps {
        RpbBucketProps {
            n_val: Some(self.n_val),
            allow_mult: Some(self.allow_mult),
            last_write_wins: Some(self.last_write_wins),
            precommit: self.precommit.iter().map(CommitHook::to_pb).collect(),
            has_precommit: Some(!self.precommit.is_empty()),
            postcommit: self.postcommit.iter().map(CommitHook::to_pb).collect(),
            has_postcommit: Some(!self.postcommit.is_empty()),
            old_vclock: Some(self.old_vclock),
            young_vclock: Some(self.young_vclock),
            big_vclock: Some(self.big_vclock),
            small_vclock: Some(self.small_vclock),
            pr: Some(self.pr),
            r: Some(self.r),
            w: Some(self.w),
            pw: Some(self.pw),
            dw: Some(self.dw),
            rw: Some(self.rw),
            basic_quorum: Some(self.basic_quorum),
            notfound_ok: Some(self.notfound_ok),
            chash_keyfun: Some(modfun(CHASH_KEYFUN)),
            linkfun: Some(modfun(LINKFUN)),
            datatype: self.datatype.clone().map(String::into_bytes),
            hll_precision: Some(self.hll_precision),
            ..Default::default()
        }
    }
}

fn modfun((module, function): (&str, &str)) -> crate::pb::RpbModFun {
    crate::pb::RpbModFun {
        module: module.as_bytes().to_vec(),
        function: function.as_bytes().to_vec(),
    }
}

/// The properties a bucket overrides on top of its type's props (fields
/// absent = inherited). A props file written before bucket types held
/// complete props; it loads as overrides of every field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[allow(missing_docs)]
pub struct PropsPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_val: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_mult: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_write_wins: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub r: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub w: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pr: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pw: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dw: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rw: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notfound_ok: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub basic_quorum: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub small_vclock: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub big_vclock: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub young_vclock: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_vclock: Option<u32>,
    /// Pre-commit hooks (replace the type's list when set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precommit: Option<Vec<CommitHook>>,
    /// Post-commit hooks (replace the type's list when set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postcommit: Option<Vec<CommitHook>>,
    /// When this entry last changed (ms since the epoch; cluster merge:
    /// the later entry wins).
    #[serde(skip_serializing_if = "is_zero")]
    pub stamp: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// `mine` with every entry of `other` whose stamp is later than ours
/// (`None`: nothing newer).
pub fn merge_newer<V: Clone>(
    mine: &BTreeMap<String, V>,
    other: &BTreeMap<String, V>,
    stamp: impl Fn(&V) -> u64,
) -> Option<BTreeMap<String, V>> {
    let mut next: Option<BTreeMap<String, V>> = None;
    for (k, v) in other {
        if mine.get(k).is_none_or(|m| stamp(v) > stamp(m)) {
            next.get_or_insert_with(|| mine.clone())
                .insert(k.clone(), v.clone());
        }
    }
    next
}

/// A change stamp after `prev`: the wall clock in ms, or `prev + 1` if the
/// clock has not moved past it.
pub fn stamp_after(prev: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    now.max(prev + 1)
}

macro_rules! patch_fields {
    ($m:ident) => {
        $m!(
            n_val,
            allow_mult,
            last_write_wins,
            r,
            w,
            pr,
            pw,
            dw,
            rw,
            notfound_ok,
            basic_quorum,
            small_vclock,
            big_vclock,
            young_vclock,
            old_vclock
        )
    };
}

impl PropsPatch {
    /// Applies the overrides to `base`.
    pub fn apply_to(&self, base: &mut BucketProps) {
        macro_rules! f {
            ($($f:ident),*) => { $( if let Some(v) = self.$f { base.$f = v; } )* };
        }
        patch_fields!(f);
        if let Some(h) = &self.precommit {
            base.precommit = h.clone();
        }
        if let Some(h) = &self.postcommit {
            base.postcommit = h.clone();
        }
    }

    /// Adds the fields present in `p` (already validated by
    /// [`BucketProps::apply`]).
    pub fn merge_pb(&mut self, p: &RpbBucketProps) -> Result<(), PropsError> {
        macro_rules! f {
            ($($f:ident),*) => { $( if p.$f.is_some() { self.$f = p.$f; } )* };
        }
        patch_fields!(f);
        if let Some(h) = hooks_from_pb(&p.precommit, p.has_precommit, "precommit")? {
            self.precommit = Some(h);
        }
        if let Some(h) = hooks_from_pb(&p.postcommit, p.has_postcommit, "postcommit")? {
            self.postcommit = Some(h);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooked() -> BucketProps {
        BucketProps {
            precommit: vec![
                CommitHook::ModFun {
                    module: "basalt_hooks".into(),
                    function: "validate_json".into(),
                },
                CommitHook::Name {
                    name: "check".into(),
                },
            ],
            postcommit: vec![CommitHook::Name {
                name: "after".into(),
            }],
            ..BucketProps::default()
        }
    }

    #[test]
    fn props_with_hooks_cross_postcard_and_json() {
        // Vnode requests carry props in postcard, the props files in JSON.
        let p = hooked();
        let wire = postcard::to_allocvec(&p).unwrap_or_else(|e| panic!("{e}"));
        let back: BucketProps = postcard::from_bytes(&wire).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, p);
        let json = serde_json::to_string(&p).unwrap_or_else(|e| panic!("{e}"));
        let back: BucketProps = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, p);
        // A props file written before hooks existed still loads.
        let mut old = serde_json::to_value(BucketProps::default()).unwrap_or_default();
        if let Some(o) = old.as_object_mut() {
            o.remove("precommit");
            o.remove("postcommit");
        }
        let back: BucketProps = serde_json::from_value(old).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, BucketProps::default());
    }

    #[test]
    fn hooks_in_riak_shapes() {
        for h in hooked().precommit {
            assert_eq!(
                CommitHook::from_riak_json(&h.to_riak_json()),
                Some(h.clone())
            );
            assert_eq!(CommitHook::from_pb(&h.to_pb()).ok(), Some(h));
        }
        let bad = [
            serde_json::json!({"mod": "m"}),
            serde_json::json!({"mod": "m", "fun": "f", "name": "n"}),
            serde_json::json!("name"),
        ];
        for b in bad {
            assert_eq!(CommitHook::from_riak_json(&b), None, "{b}");
        }
        let mut p = BucketProps::default();
        let set = RpbBucketProps {
            precommit: vec![CommitHook::Name { name: "x".into() }.to_pb()],
            has_precommit: Some(true),
            ..Default::default()
        };
        assert!(p.apply(&set).is_ok());
        assert_eq!(p.to_pb().has_precommit, Some(true));
        let unknown = RpbBucketProps {
            postcommit: vec![CommitHook::ModFun {
                module: "basalt_hooks".into(),
                function: "validate_json".into(),
            }
            .to_pb()],
            ..Default::default()
        };
        assert!(
            p.apply(&unknown).is_err(),
            "a pre-commit built-in set as post"
        );
    }
}
