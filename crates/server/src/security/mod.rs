//! Security as Riak's: the cluster's users, groups, grants and sources
//! ([`model`], pure), kept here per node in `<data_dir>/security.json` and
//! spread with the gossip (the state with the higher change stamp wins, as
//! a whole); the TLS settings of the client listener ([`tls`]); and the
//! admin commands of `basalt admin security`.
//!
//! Enforcement is in the APIs: with security enabled a PB connection must
//! upgrade with `RpbStartTls` and authenticate with `RpbAuthReq` before
//! anything else, and each request needs the permission its code maps to
//! (`api::pb::auth`); the plain HTTP listener refuses every request but
//! `/ping`, the HTTPS listener asks for basic auth and gives each route
//! the same permissions as PB (`api::http::auth`). [`Rule`] is the one
//! vocabulary of both tables. Refusals are counted
//! (`security_refused_total`) and logged with the user and the permission
//! missing. [`certs`] makes test certificates (`basalt certs`).

pub mod certs;
pub mod model;
pub mod tls;

use crate::fsutil::atomic_write;
use model::{Method, ModelError, Scope, SecurityState};
use parking_lot::RwLock;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a request needs once its user is authenticated: the one
/// vocabulary of the PB code table (`api::pb::auth::rule`) and the HTTP
/// route table (`api::http::auth::rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Nothing more (ping, client id, server info, authentication).
    Open,
    /// This permission on the bucket the request names.
    Bucket(&'static str),
    /// This permission on the bucket type the request names (`default`
    /// when none).
    Type(&'static str),
    /// This permission on everything (`any`).
    Any(&'static str),
}

/// The node's copy of the cluster's security state.
#[derive(Debug)]
pub struct Security {
    state: RwLock<SecurityState>,
    path: Option<PathBuf>,
    /// Requests refused (authentication or permission).
    pub refused: AtomicU64,
}

/// Loading the saved state failed.
#[derive(Debug, thiserror::Error)]
#[error("security state {path}: {reason}")]
pub struct LoadError {
    /// The file.
    pub path: String,
    /// Why.
    pub reason: String,
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl Security {
    /// Loads `path` (none: a new, disabled state); `None`: memory only.
    pub fn open(path: Option<PathBuf>) -> Result<Security, LoadError> {
        let state = match &path {
            Some(p) => match std::fs::read(p) {
                Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| LoadError {
                    path: p.display().to_string(),
                    reason: e.to_string(),
                })?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => SecurityState::default(),
                Err(e) => {
                    return Err(LoadError {
                        path: p.display().to_string(),
                        reason: e.to_string(),
                    })
                }
            },
            None => SecurityState::default(),
        };
        Ok(Security {
            state: RwLock::new(state),
            path,
            refused: AtomicU64::new(0),
        })
    }

    /// Whether security is on.
    pub fn enabled(&self) -> bool {
        self.state.read().enabled
    }

    /// Runs `f` on the state.
    pub fn with<T>(&self, f: impl FnOnce(&SecurityState) -> T) -> T {
        f(&self.state.read())
    }

    /// Whether authenticated `user` may make a request under `rule` naming
    /// `btype` (`None`: the default type) and `bucket`.
    pub fn permit(
        &self,
        user: &str,
        rule: Rule,
        btype: Option<&[u8]>,
        bucket: Option<&[u8]>,
    ) -> Result<(), model::Denied> {
        let (perm, bucket) = match rule {
            Rule::Open => return Ok(()),
            // An empty type is no bucket type's: only grants on ANY cover it.
            Rule::Any(p) => return self.with(|s| s.check(user, p, "", None)),
            Rule::Type(p) => (p, None),
            Rule::Bucket(p) => (p, bucket),
        };
        let btype = btype.map_or_else(
            || "default".to_string(),
            |t| String::from_utf8_lossy(t).into_owned(),
        );
        self.with(|s| s.check(user, perm, &btype, bucket))
    }

    /// Counts (and logs) a refused request.
    pub fn refused(&self, peer: &str, user: Option<&str>, why: &str) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%peer, user = user.unwrap_or("-"), reason = %why, "request refused by security");
    }

    /// Applies a change, stamps and saves it.
    fn change(
        &self,
        f: impl FnOnce(&mut SecurityState) -> Result<(), ModelError>,
    ) -> Result<(), String> {
        let mut s = self.state.write();
        let mut next = s.clone();
        f(&mut next).map_err(|e| e.to_string())?;
        next.stamp = now_us().max(s.stamp + 1);
        self.save(&next)?;
        *s = next;
        Ok(())
    }

    fn save(&self, s: &SecurityState) -> Result<(), String> {
        let Some(p) = &self.path else { return Ok(()) };
        let json = serde_json::to_vec_pretty(s).map_err(|e| e.to_string())?;
        atomic_write(p, &json).map_err(|e| format!("saving {}: {e}", p.display()))
    }

    /// The state as JSON for the gossip.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&*self.state.read()).unwrap_or_default()
    }

    /// Takes another node's state if its stamp is higher.
    pub fn merge_json(&self, json: &str) {
        if json.is_empty() {
            return;
        }
        let theirs: SecurityState = match serde_json::from_str(json) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "bad security state from a peer");
                return;
            }
        };
        let mut s = self.state.write();
        if theirs.stamp > s.stamp {
            if let Err(e) = self.save(&theirs) {
                tracing::error!(error = %e, "saving the security state");
            }
            *s = theirs;
        }
    }

    /// `basalt admin security ...` (the words after `security`).
    pub fn admin(&self, words: &[&str]) -> Result<String, String> {
        let ok = |r: Result<(), String>, what: String| r.map(|()| format!("{what}\n"));
        match words {
            ["enable"] => ok(self.change(|s| { s.enabled = true; Ok(()) }), "security enabled".into()),
            ["disable"] => ok(self.change(|s| { s.enabled = false; Ok(()) }), "security disabled".into()),
            ["status"] => Ok(self.with(|s| {
                format!(
                    "security: {}\nusers: {}\ngroups: {}\nsources: {}\nrefused requests (this node): {}\n",
                    if s.enabled { "enabled" } else { "disabled" },
                    s.users.len(),
                    s.groups.len(),
                    s.sources.len(),
                    self.refused.load(Ordering::Relaxed)
                )
            })),
            ["add-user", name, opts @ ..] => {
                let (password, groups) = user_opts(opts)?;
                let groups = groups.unwrap_or_default();
                ok(self.change(|s| s.add_user(name, password.as_deref(), &groups)), format!("user {name} added"))
            }
            ["alter-user", name, opts @ ..] => {
                let (password, groups) = user_opts(opts)?;
                ok(
                    self.change(|s| s.alter_user(name, password.as_deref(), groups.as_deref())),
                    format!("user {name} changed"),
                )
            }
            ["del-user", name] => ok(self.change(|s| s.del_user(name)), format!("user {name} removed")),
            ["add-group", name] => ok(self.change(|s| s.add_group(name)), format!("group {name} added")),
            ["del-group", name] => ok(self.change(|s| s.del_group(name)), format!("group {name} removed")),
            ["grant", perms, "on", scope, "to", role] => {
                let scope = Scope::parse(scope).map_err(|e| e.to_string())?;
                let perms = list(perms);
                ok(self.change(|s| s.grant(role, scope, &perms)), format!("granted to {role}"))
            }
            ["revoke", perms, "on", scope, "from", role] => {
                let scope = Scope::parse(scope).map_err(|e| e.to_string())?;
                let perms = list(perms);
                ok(self.change(|s| s.revoke(role, &scope, &perms)), format!("revoked from {role}"))
            }
            ["add-source", user, cidr, method] => {
                let m = Method::parse(method).map_err(|e| e.to_string())?;
                ok(self.change(|s| s.add_source(user, cidr, m)), format!("source added for {user}"))
            }
            ["del-source", user, cidr] => {
                ok(self.change(|s| s.del_source(user, cidr)), format!("source removed for {user}"))
            }
            ["print-users"] => Ok(self.with(SecurityState::print_users)),
            ["print-groups"] => Ok(self.with(SecurityState::print_groups)),
            ["print-grants"] => Ok(self.with(SecurityState::print_grants)),
            ["print-sources"] => Ok(self.with(SecurityState::print_sources)),
            _ => Err(format!(
                "unknown security command {:?}: enable | disable | status | add-user NAME [password=P] [groups=G,H] | alter-user NAME [password=P] [groups=G,H] | del-user NAME | add-group NAME | del-group NAME | grant PERM[,PERM] on any|TYPE|TYPE/BUCKET to ROLE | revoke PERM[,PERM] on SCOPE from ROLE | add-source USER|all CIDR trust|password|certificate | del-source USER|all CIDR | print-users | print-groups | print-grants | print-sources",
                words.join(" ")
            )),
        }
    }
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// `password=P` and `groups=G,H` options of add-user / alter-user.
type UserOpts = (Option<String>, Option<Vec<String>>);

fn user_opts(opts: &[&str]) -> Result<UserOpts, String> {
    let (mut password, mut groups) = (None, None);
    for o in opts {
        match o.split_once('=') {
            Some(("password", p)) if !p.is_empty() => password = Some(p.to_string()),
            Some(("groups", g)) => groups = Some(list(g)),
            _ => return Err(format!("bad user option {o:?}: password=P or groups=G,H")),
        }
    }
    Ok((password, groups))
}
