//! Riak's security model, pure: users (with a salted password hash),
//! groups, grants of permissions on ANY / a bucket type / a bucket, and
//! sources (which user, from which network, authenticates how). No I/O:
//! [`crate::security`] keeps the state, spreads it and enforces it.
//!
//! Semantics as riak_core_security: a user's permissions are its own
//! grants plus those of its groups (one level); a grant on a bucket type
//! covers its buckets, a grant on ANY covers everything. A source is
//! chosen by user (the user's own before `all`), then by the most specific
//! CIDR that contains the peer's address; no matching source → refused.

use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// Every permission a grant may name: Riak's, plus Basalt's own for the
/// requests Riak has no permission for.
pub const PERMISSIONS: &[&str] = &[
    "riak_kv.get",
    "riak_kv.put",
    "riak_kv.delete",
    "riak_kv.index",
    "riak_kv.list_keys",
    "riak_kv.list_buckets",
    "riak_kv.mapreduce",
    "riak_kv.get_preflist",
    "riak_kv.cover",
    "riak_core.get_bucket",
    "riak_core.set_bucket",
    "riak_core.get_bucket_type",
    "riak_core.set_bucket_type",
    "basalt.aae_fold",
    "basalt.repl",
    "basalt.admin",
];

/// The most users, groups, grants or sources one cluster may hold (the
/// state travels whole with every gossip).
pub const MAX_ENTRIES: usize = 10_000;
/// The longest user or group name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;
/// PBKDF2-HMAC-SHA256 rounds of a new password hash.
pub const PBKDF2_ROUNDS: u32 = 100_000;

/// Why a change to the model was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ModelError> {
    Err(ModelError(msg.into()))
}

/// A salted PBKDF2-HMAC-SHA256 hash of a password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasswordHash {
    /// Random salt.
    pub salt: Vec<u8>,
    /// Rounds.
    pub rounds: u32,
    /// The derived key (32 bytes).
    pub hash: Vec<u8>,
}

impl PasswordHash {
    /// Hashes `password` with a fresh random salt.
    pub fn new(password: &str) -> PasswordHash {
        let salt: [u8; 16] = rand::random();
        let hash = derive(password, &salt, PBKDF2_ROUNDS);
        PasswordHash {
            salt: salt.to_vec(),
            rounds: PBKDF2_ROUNDS,
            hash,
        }
    }

    /// A hash no password is checked against for real: a login of an
    /// unknown user verifies against it, so that it costs what a wrong
    /// password costs and its timing does not tell which users exist.
    /// Made once, with a random salt and the rounds of a new hash.
    pub fn decoy() -> &'static PasswordHash {
        static DECOY: std::sync::OnceLock<PasswordHash> = std::sync::OnceLock::new();
        DECOY.get_or_init(|| PasswordHash::new("basalt decoy password"))
    }

    /// Whether `password` is the one hashed (constant time in the hash).
    pub fn verify(&self, password: &str) -> bool {
        let got = derive(password, &self.salt, self.rounds);
        got.len() == self.hash.len()
            && got
                .iter()
                .zip(&self.hash)
                .fold(0u8, |a, (x, y)| a | (x ^ y))
                == 0
    }
}

fn derive(password: &str, salt: &[u8], rounds: u32) -> Vec<u8> {
    let mut out = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(password.as_bytes(), salt, rounds.max(1), &mut out);
    out.to_vec()
}

/// What a login still needs once its source is found
/// ([`SecurityState::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proof {
    /// Nothing: admitted (trust, or the certificate names the user).
    Admitted,
    /// The password must match this hash.
    Password(PasswordHash),
}

/// A user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// Groups it belongs to.
    pub groups: BTreeSet<String>,
    /// Its password, for `password` sources.
    pub password: Option<PasswordHash>,
}

/// What a grant covers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Scope {
    /// Everything.
    Any,
    /// Every bucket of a bucket type.
    Type(String),
    /// One bucket of a bucket type (`default` for untyped buckets).
    Bucket(String, String),
}

impl Scope {
    /// Parses Riak's forms: `any`, `TYPE`, `TYPE BUCKET` (given as two
    /// words) — here `any`, `TYPE` or `TYPE/BUCKET`.
    pub fn parse(s: &str) -> Result<Scope, ModelError> {
        match s.split_once('/') {
            _ if s.eq_ignore_ascii_case("any") => Ok(Scope::Any),
            Some((t, b)) if !t.is_empty() && !b.is_empty() => Ok(Scope::Bucket(t.into(), b.into())),
            None if !s.is_empty() => Ok(Scope::Type(s.into())),
            _ => err(format!("bad grant scope {s:?}: any, TYPE or TYPE/BUCKET")),
        }
    }

    fn covers(&self, btype: &str, bucket: Option<&[u8]>) -> bool {
        match self {
            Scope::Any => true,
            Scope::Type(t) => t == btype,
            Scope::Bucket(t, b) => t == btype && bucket == Some(b.as_bytes()),
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Any => write!(f, "any"),
            Scope::Type(t) => write!(f, "{t}"),
            Scope::Bucket(t, b) => write!(f, "{t}/{b}"),
        }
    }
}

/// How a source authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Method {
    /// No password asked.
    Trust,
    /// The user's password.
    Password,
    /// The client certificate's common name must be the user's name.
    Certificate,
}

impl Method {
    /// `trust`, `password` or `certificate`.
    pub fn parse(s: &str) -> Result<Method, ModelError> {
        match s {
            "trust" => Ok(Method::Trust),
            "password" => Ok(Method::Password),
            "certificate" => Ok(Method::Certificate),
            _ => err(format!(
                "bad source method {s:?}: trust, password or certificate"
            )),
        }
    }

    /// `trust`, `password` or `certificate` (as [`Method::parse`] reads it).
    pub fn name(self) -> &'static str {
        match self {
            Method::Trust => "trust",
            Method::Password => "password",
            Method::Certificate => "certificate",
        }
    }
}

/// A source: `user` (or `all`) from `cidr` authenticates by `method`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// A user name, or `all`.
    pub user: String,
    /// The network.
    pub cidr: IpNet,
    /// How.
    pub method: Method,
}

/// The whole security state of a cluster. `stamp` orders versions: the
/// higher stamp wins when two nodes' states meet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityState {
    /// Security on: requests must authenticate and be granted.
    pub enabled: bool,
    /// Users by name.
    pub users: BTreeMap<String, User>,
    /// Groups by name (a group only carries grants).
    pub groups: BTreeSet<String>,
    /// Grants: user or group name → (scope, permissions), one entry per
    /// scope.
    pub grants: BTreeMap<String, Vec<(Scope, BTreeSet<String>)>>,
    /// Sources.
    pub sources: Vec<Source>,
    /// Change stamp (microseconds since the epoch of the last change).
    pub stamp: u64,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No source matches the user and address.
    #[error("No matching source")]
    NoSource,
    /// Unknown user or wrong password (one message: no user enumeration).
    #[error("Authentication failed")]
    BadCredentials,
    /// A certificate source, and no client certificate for this user.
    #[error("Authentication failed: the client certificate does not name this user")]
    BadCertificate,
    /// Authenticated, not granted.
    #[error("Permission denied: User '{user}' does not have '{perm}' on {on}")]
    Permission {
        /// User.
        user: String,
        /// Permission missing.
        perm: String,
        /// What it was asked on.
        on: String,
    },
}

fn check_name(what: &str, name: &str) -> Result<(), ModelError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return err(format!("{what} name must be 1..={MAX_NAME_BYTES} bytes"));
    }
    if name
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == '/' || c == ',')
    {
        return err(format!(
            "{what} name {name:?} has spaces, control characters, '/' or ','"
        ));
    }
    if name.eq_ignore_ascii_case("all") || name.eq_ignore_ascii_case("any") {
        return err(format!("{what} name {name:?} is reserved"));
    }
    Ok(())
}

impl SecurityState {
    fn entries(&self) -> usize {
        self.users.len()
            + self.groups.len()
            + self.grants.values().map(Vec::len).sum::<usize>()
            + self.sources.len()
    }

    fn room(&self) -> Result<(), ModelError> {
        if self.entries() >= MAX_ENTRIES {
            return err(format!(
                "at most {MAX_ENTRIES} users, groups, grants and sources in all"
            ));
        }
        Ok(())
    }

    /// Adds a user (password optional, groups must exist).
    pub fn add_user(
        &mut self,
        name: &str,
        password: Option<&str>,
        groups: &[String],
    ) -> Result<(), ModelError> {
        check_name("user", name)?;
        self.room()?;
        if self.users.contains_key(name) {
            return err(format!("user {name:?} already exists"));
        }
        if self.groups.contains(name) {
            return err(format!("{name:?} is a group"));
        }
        let groups = self.known_groups(groups)?;
        self.users.insert(
            name.to_string(),
            User {
                groups,
                password: password.map(PasswordHash::new),
            },
        );
        Ok(())
    }

    /// Changes a user's password and/or groups.
    pub fn alter_user(
        &mut self,
        name: &str,
        password: Option<&str>,
        groups: Option<&[String]>,
    ) -> Result<(), ModelError> {
        let groups = groups.map(|g| self.known_groups(g)).transpose()?;
        let Some(u) = self.users.get_mut(name) else {
            return err(format!("no user {name:?}"));
        };
        if let Some(p) = password {
            u.password = Some(PasswordHash::new(p));
        }
        if let Some(g) = groups {
            u.groups = g;
        }
        Ok(())
    }

    fn known_groups(&self, groups: &[String]) -> Result<BTreeSet<String>, ModelError> {
        for g in groups {
            if !self.groups.contains(g) {
                return err(format!("no group {g:?}"));
            }
        }
        Ok(groups.iter().cloned().collect())
    }

    /// Removes a user, its grants and its own sources.
    pub fn del_user(&mut self, name: &str) -> Result<(), ModelError> {
        if self.users.remove(name).is_none() {
            return err(format!("no user {name:?}"));
        }
        self.grants.remove(name);
        self.sources.retain(|s| s.user != name);
        Ok(())
    }

    /// Adds a group.
    pub fn add_group(&mut self, name: &str) -> Result<(), ModelError> {
        check_name("group", name)?;
        self.room()?;
        if self.users.contains_key(name) {
            return err(format!("{name:?} is a user"));
        }
        if !self.groups.insert(name.to_string()) {
            return err(format!("group {name:?} already exists"));
        }
        Ok(())
    }

    /// Removes a group, its grants and its memberships.
    pub fn del_group(&mut self, name: &str) -> Result<(), ModelError> {
        if !self.groups.remove(name) {
            return err(format!("no group {name:?}"));
        }
        self.grants.remove(name);
        for u in self.users.values_mut() {
            u.groups.remove(name);
        }
        Ok(())
    }

    /// Grants `perms` on `scope` to a user or group.
    pub fn grant(&mut self, role: &str, scope: Scope, perms: &[String]) -> Result<(), ModelError> {
        self.check_role(role)?;
        check_perms(perms)?;
        self.room()?;
        let by_scope = self.grants.entry(role.to_string()).or_default();
        match by_scope.iter_mut().find(|(s, _)| *s == scope) {
            Some((_, set)) => set.extend(perms.iter().cloned()),
            None => by_scope.push((scope, perms.iter().cloned().collect())),
        }
        Ok(())
    }

    /// Revokes `perms` on `scope` from a user or group.
    pub fn revoke(
        &mut self,
        role: &str,
        scope: &Scope,
        perms: &[String],
    ) -> Result<(), ModelError> {
        self.check_role(role)?;
        check_perms(perms)?;
        if let Some(by_scope) = self.grants.get_mut(role) {
            for (s, set) in by_scope.iter_mut() {
                if s == scope {
                    for p in perms {
                        set.remove(p);
                    }
                }
            }
            by_scope.retain(|(_, set)| !set.is_empty());
            if by_scope.is_empty() {
                self.grants.remove(role);
            }
        }
        Ok(())
    }

    fn check_role(&self, role: &str) -> Result<(), ModelError> {
        if self.users.contains_key(role) || self.groups.contains(role) {
            Ok(())
        } else {
            err(format!("no user or group {role:?}"))
        }
    }

    /// Adds (or replaces) the source of `user` (or `all`) on `cidr`.
    pub fn add_source(&mut self, user: &str, cidr: &str, method: Method) -> Result<(), ModelError> {
        if user != "all" && !self.users.contains_key(user) {
            return err(format!("no user {user:?}"));
        }
        let cidr: IpNet = cidr.parse().map_err(|_| {
            ModelError(format!(
                "bad CIDR {cidr:?} (e.g. 127.0.0.1/32, 10.0.0.0/8, ::1/128)"
            ))
        })?;
        let cidr = cidr.trunc();
        self.room()?;
        self.sources.retain(|s| !(s.user == user && s.cidr == cidr));
        self.sources.push(Source {
            user: user.to_string(),
            cidr,
            method,
        });
        Ok(())
    }

    /// Removes the source of `user` (or `all`) on `cidr`.
    pub fn del_source(&mut self, user: &str, cidr: &str) -> Result<(), ModelError> {
        let cidr: IpNet = cidr
            .parse()
            .map_err(|_| ModelError(format!("bad CIDR {cidr:?}")))?;
        let cidr = cidr.trunc();
        let before = self.sources.len();
        self.sources.retain(|s| !(s.user == user && s.cidr == cidr));
        if self.sources.len() == before {
            return err(format!("no source for {user:?} on {cidr}"));
        }
        Ok(())
    }

    /// The source for `user` connecting from `peer`: the user's own
    /// sources before `all`, the most specific network first.
    pub fn source_for(&self, user: &str, peer: IpAddr) -> Option<&Source> {
        let peer = canonical(peer);
        let best = |who: &str| {
            self.sources
                .iter()
                .filter(|s| s.user == who && s.cidr.contains(&peer))
                .max_by_key(|s| s.cidr.prefix_len())
        };
        best(user).or_else(|| best("all"))
    }

    /// Authenticates `user` from `peer` with `password`, or with the
    /// common name of a verified client certificate ([`Self::resolve`],
    /// then the password hashed here).
    pub fn authenticate(
        &self,
        user: &str,
        password: &str,
        peer: IpAddr,
        cert_cn: Option<&str>,
    ) -> Result<(), Denied> {
        match self.resolve(user, peer, cert_cn)? {
            Proof::Admitted => Ok(()),
            Proof::Password(h) if h.verify(password) => Ok(()),
            Proof::Password(_) => Err(Denied::BadCredentials),
        }
    }

    /// What admits `user` from `peer` (with the common name of a verified
    /// client certificate, if any), without hashing a password: the
    /// source decides here (trust, certificate), or the password must
    /// match the hash returned (a copy, to verify outside any lock).
    pub fn resolve(
        &self,
        user: &str,
        peer: IpAddr,
        cert_cn: Option<&str>,
    ) -> Result<Proof, Denied> {
        let Some(u) = self.users.get(user) else {
            return Err(Denied::BadCredentials);
        };
        let source = self.source_for(user, peer).ok_or(Denied::NoSource)?;
        match source.method {
            Method::Trust => Ok(Proof::Admitted),
            Method::Password => match &u.password {
                Some(h) => Ok(Proof::Password(h.clone())),
                None => Err(Denied::BadCredentials),
            },
            Method::Certificate => {
                if cert_cn == Some(user) {
                    Ok(Proof::Admitted)
                } else {
                    Err(Denied::BadCertificate)
                }
            }
        }
    }

    /// Whether `user` may `perm` on `bucket` of `btype` (`bucket` `None`:
    /// the request names only the type, e.g. list buckets).
    pub fn check(
        &self,
        user: &str,
        perm: &str,
        btype: &str,
        bucket: Option<&[u8]>,
    ) -> Result<(), Denied> {
        let granted = |role: &str| {
            self.grants.get(role).is_some_and(|by_scope| {
                by_scope
                    .iter()
                    .any(|(scope, perms)| perms.contains(perm) && scope.covers(btype, bucket))
            })
        };
        let groups = self
            .users
            .get(user)
            .map(|u| u.groups.iter().collect::<Vec<_>>())
            .unwrap_or_default();
        if granted(user) || groups.into_iter().any(|g| granted(g)) {
            return Ok(());
        }
        let on = match bucket {
            Some(b) if btype == "default" => format!("{:?}", String::from_utf8_lossy(b)),
            Some(b) => format!("{{{:?},{:?}}}", btype, String::from_utf8_lossy(b)),
            None if btype.is_empty() => "any".to_string(),
            None => format!("{btype:?}"),
        };
        Err(Denied::Permission {
            user: user.to_string(),
            perm: perm.to_string(),
            on,
        })
    }

    /// `print-users`: one line per user.
    pub fn print_users(&self) -> String {
        let mut out = String::new();
        for (name, u) in &self.users {
            let groups: Vec<&str> = u.groups.iter().map(String::as_str).collect();
            out.push_str(&format!(
                "{name}\tgroups: {}\tpassword: {}\n",
                if groups.is_empty() {
                    "-".to_string()
                } else {
                    groups.join(",")
                },
                if u.password.is_some() { "set" } else { "none" }
            ));
        }
        out
    }

    /// `print-groups`: one line per group with its members.
    pub fn print_groups(&self) -> String {
        let mut out = String::new();
        for g in &self.groups {
            let members: Vec<&str> = self
                .users
                .iter()
                .filter(|(_, u)| u.groups.contains(g))
                .map(|(n, _)| n.as_str())
                .collect();
            out.push_str(&format!("{g}\tmembers: {}\n", members.join(",")));
        }
        out
    }

    /// `print-grants`: one line per (role, scope).
    pub fn print_grants(&self) -> String {
        let mut out = String::new();
        for (role, by_scope) in &self.grants {
            for (scope, perms) in by_scope {
                let p: Vec<&str> = perms.iter().map(String::as_str).collect();
                out.push_str(&format!("{role}\t{scope}\t{}\n", p.join(",")));
            }
        }
        out
    }

    /// `print-sources`: one line per source.
    pub fn print_sources(&self) -> String {
        let mut out = String::new();
        for s in &self.sources {
            out.push_str(&format!("{}\t{}\t{}\n", s.user, s.cidr, s.method.name()));
        }
        out
    }
}

/// An IPv4 address mapped into IPv6 (`::ffff:a.b.c.d`, as a dual-stack
/// listener reports it) as the IPv4 address, so IPv4 sources match it.
/// `ip`, an IPv4-mapped IPv6 address as its IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn check_perms(perms: &[String]) -> Result<(), ModelError> {
    if perms.is_empty() {
        return err("no permission named");
    }
    for p in perms {
        if !PERMISSIONS.contains(&p.as_str()) {
            return err(format!(
                "unknown permission {p:?}; known: {}",
                PERMISSIONS.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse()
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))
    }

    fn state() -> SecurityState {
        let mut s = SecurityState::default();
        s.add_group("readers").expect("group");
        s.add_user("alice", Some("secret"), &["readers".into()])
            .expect("user");
        s.add_user("bob", None, &[]).expect("user");
        s.add_source("all", "127.0.0.1/32", Method::Password)
            .expect("source");
        s.add_source("bob", "127.0.0.0/8", Method::Trust)
            .expect("source");
        s
    }

    #[test]
    fn passwords_are_checked_against_the_most_specific_source() {
        let s = state();
        assert_eq!(
            s.authenticate("alice", "secret", ip("127.0.0.1"), None),
            Ok(())
        );
        assert_eq!(
            s.authenticate("alice", "wrong", ip("127.0.0.1"), None),
            Err(Denied::BadCredentials)
        );
        assert_eq!(
            s.authenticate("nobody", "secret", ip("127.0.0.1"), None),
            Err(Denied::BadCredentials)
        );
        assert_eq!(
            s.authenticate("alice", "secret", ip("10.0.0.1"), None),
            Err(Denied::NoSource)
        );
        // bob's own source (trust) comes before `all` (password).
        assert_eq!(s.authenticate("bob", "", ip("127.0.0.1"), None), Ok(()));
        assert_eq!(
            s.authenticate("bob", "", ip("::ffff:127.0.0.1"), None),
            Ok(())
        );
    }

    #[test]
    fn grants_cover_their_scope_and_reach_group_members() {
        let mut s = state();
        s.grant(
            "readers",
            Scope::Type("default".into()),
            &["riak_kv.get".into()],
        )
        .expect("grant");
        s.grant(
            "bob",
            Scope::Bucket("maps".into(), "b".into()),
            &["riak_kv.put".into()],
        )
        .expect("grant");
        assert_eq!(
            s.check("alice", "riak_kv.get", "default", Some(b"x")),
            Ok(())
        );
        assert!(s
            .check("alice", "riak_kv.put", "default", Some(b"x"))
            .is_err());
        assert!(s
            .check("bob", "riak_kv.get", "default", Some(b"x"))
            .is_err());
        assert_eq!(s.check("bob", "riak_kv.put", "maps", Some(b"b")), Ok(()));
        assert!(s.check("bob", "riak_kv.put", "maps", Some(b"c")).is_err());
        s.revoke(
            "readers",
            &Scope::Type("default".into()),
            &["riak_kv.get".into()],
        )
        .expect("revoke");
        let e = s.check("alice", "riak_kv.get", "default", Some(b"x"));
        assert_eq!(
            e.map_err(|e| e.to_string()),
            Err("Permission denied: User 'alice' does not have 'riak_kv.get' on \"x\"".to_string())
        );
        s.grant("alice", Scope::Any, &["riak_kv.get".into()])
            .expect("grant");
        assert_eq!(s.check("alice", "riak_kv.get", "maps", Some(b"z")), Ok(()));
    }

    #[test]
    fn bad_input_is_refused_with_the_reason() {
        let mut s = state();
        assert!(s.add_user("a b", None, &[]).is_err());
        assert!(s.add_user("all", None, &[]).is_err());
        assert!(s.add_user("x\u{1}", None, &[]).is_err());
        assert!(s.add_user("alice", None, &[]).is_err());
        assert!(s.add_user("carol", None, &["nogroup".into()]).is_err());
        assert!(s.add_source("alice", "300.0.0.1/8", Method::Trust).is_err());
        assert!(s.add_source("nobody", "10.0.0.0/8", Method::Trust).is_err());
        assert!(s
            .grant("alice", Scope::Any, &["riak_kv.fly".into()])
            .is_err());
        assert!(s
            .grant("nobody", Scope::Any, &["riak_kv.get".into()])
            .is_err());
        assert!(Scope::parse("").is_err());
        assert!(Scope::parse("t/").is_err());
        assert!(Method::parse("magic").is_err());
    }

    #[test]
    fn deleting_a_user_or_group_removes_what_named_it() {
        let mut s = state();
        s.grant("readers", Scope::Any, &["riak_kv.get".into()])
            .expect("grant");
        s.grant("alice", Scope::Any, &["riak_kv.put".into()])
            .expect("grant");
        s.del_group("readers").expect("del group");
        assert!(s.users["alice"].groups.is_empty());
        assert!(!s.grants.contains_key("readers"));
        s.del_user("bob").expect("del user");
        assert!(s.sources.iter().all(|x| x.user != "bob"));
    }
}
