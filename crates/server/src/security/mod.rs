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
//!
//! Logins ([`Security::login`], for `RpbAuthReq` and HTTPS basic auth)
//! hash passwords off the async workers, at most
//! `limits::LOGIN_VERIFY_SLOTS` at once, and back off per (user, address)
//! after repeated failures ([`logins`]): a guesser is refused at once,
//! without a password hashed, until its cool-down ends.

pub mod certs;
pub mod logins;
pub mod model;
pub mod tls;

use crate::fsutil::atomic_write;
use crate::limits;
use basalt_engine::clock::now_us;
use model::{Denied, Method, ModelError, Proof, Scope, SecurityState};
use parking_lot::{Mutex, RwLock};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

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
    /// Logins refused at once during a cool-down (also in `refused`).
    pub lockouts: AtomicU64,
    /// Passwords hashed to verify a login (also against the decoy hash,
    /// for unknown users: [`model::PasswordHash::decoy`]).
    pub hashed: AtomicU64,
    /// Failed logins per (user, address).
    logins: Mutex<logins::Throttle>,
    /// Password verifications running at once.
    verify_slots: tokio::sync::Semaphore,
}

/// Why a login ([`Security::login`]) failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// No source, bad credentials, no certificate for the user.
    #[error(transparent)]
    Denied(#[from] Denied),
    /// Too many failed logins of this user from this address: refused
    /// without hashing the password until the cool-down ends.
    #[error(transparent)]
    LockedOut(#[from] logins::LockedOut),
    /// No verification slot freed within `limits::LOGIN_VERIFY_WAIT`.
    #[error("the node is busy verifying passwords; retry later")]
    Busy,
    /// The verification task failed.
    #[error("password verification failed: {0}")]
    Task(String),
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

impl Security {
    /// Loads `path` (none: a new, disabled state); `None`: memory only.
    pub fn open(path: Option<PathBuf>) -> Result<Security, LoadError> {
        let state = match &path {
            Some(p) => match std::fs::read(p) {
                Ok(bytes) => crate::fsutil::decode_state(&bytes).map_err(|e| LoadError {
                    path: p.display().to_string(),
                    reason: e,
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
            lockouts: AtomicU64::new(0),
            hashed: AtomicU64::new(0),
            logins: Mutex::new(logins::Throttle::new(logins::Policy::DEFAULT)),
            verify_slots: tokio::sync::Semaphore::new(limits::LOGIN_VERIFY_SLOTS),
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

    /// Authenticates `user` connecting from `peer` with `password` (or the
    /// common name of its verified client certificate). A password is
    /// hashed on a blocking thread, holding one of
    /// `limits::LOGIN_VERIFY_SLOTS`; a (user, address) that failed too
    /// often is refused at once until its cool-down ends ([`logins`]).
    /// Unknown users and wrong passwords count as failures; a success
    /// resets the pair. The caller counts and logs the refusal.
    pub async fn login(
        &self,
        user: &str,
        password: &str,
        peer: IpAddr,
        cert_cn: Option<&str>,
    ) -> Result<(), LoginError> {
        let ip = model::canonical(peer);
        self.cooling(user, ip)?;
        // `None`: an unknown user (or one without a password), whose
        // password is hashed too, against the decoy: its refusal takes as
        // long as a wrong password's, so timing does not tell who exists.
        let hash = match self.with(|s| s.resolve(user, ip, cert_cn)) {
            Ok(Proof::Admitted) => {
                self.logins.lock().success(user, ip);
                return Ok(());
            }
            Ok(Proof::Password(h)) => Some(h),
            Err(Denied::BadCredentials) => None,
            Err(e) => return Err(e.into()),
        };
        let slot = tokio::time::timeout(limits::LOGIN_VERIFY_WAIT, self.verify_slots.acquire())
            .await
            .map_err(|_| LoginError::Busy)?
            .map_err(|_| LoginError::Busy)?;
        // Attempts queued for a slot behind failures of the same pair.
        self.cooling(user, ip)?;
        let password = password.to_string();
        // Off the async workers, the decoy's first hashing included.
        let verified = tokio::task::spawn_blocking(move || match hash {
            Some(h) => h.verify(&password),
            None => {
                // Hashed for its time only: an unknown user is never admitted.
                let _ = model::PasswordHash::decoy().verify(&password);
                false
            }
        })
        .await
        .map_err(|e| LoginError::Task(e.to_string()))?;
        drop(slot);
        self.hashed.fetch_add(1, Ordering::Relaxed);
        if verified {
            self.logins.lock().success(user, ip);
            Ok(())
        } else {
            self.failed(user, ip);
            Err(Denied::BadCredentials.into())
        }
    }

    /// `Err` (counted) while `user` from `ip` cools down.
    fn cooling(&self, user: &str, ip: IpAddr) -> Result<(), LoginError> {
        let r = self.logins.lock().check(user, ip, Instant::now());
        r.map_err(|e| {
            self.lockouts.fetch_add(1, Ordering::Relaxed);
            e.into()
        })
    }

    /// Records a failed login; logs the cool-down it starts.
    fn failed(&self, user: &str, ip: IpAddr) {
        let lockout = self.logins.lock().failure(user, ip, Instant::now());
        if let Some(d) = lockout {
            tracing::warn!(
                user,
                peer = %ip,
                cooldown_secs = d.as_secs_f64(),
                "too many failed logins: this user is refused from this address for the cool-down"
            );
        }
    }

    /// The login back-off's policy (default [`logins::Policy::DEFAULT`]);
    /// tests shorten or lengthen it.
    pub fn set_login_policy(&self, policy: logins::Policy) {
        self.logins.lock().set_policy(policy);
    }

    /// (user, address) pairs with failed logins tracked.
    pub fn login_pairs_tracked(&self) -> usize {
        self.logins.lock().len()
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
        let json = crate::fsutil::encode_state(s).map_err(|e| e.to_string())?;
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
                    "security: {}\nusers: {}\ngroups: {}\nsources: {}\nrefused requests (this node): {}\nlogins refused in a cool-down after failures (this node): {}\n",
                    if s.enabled { "enabled" } else { "disabled" },
                    s.users.len(),
                    s.groups.len(),
                    s.sources.len(),
                    self.refused.load(Ordering::Relaxed),
                    self.lockouts.load(Ordering::Relaxed)
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

impl Security {
    /// The `--json` form of the security commands that print data
    /// (`status`, `print-*`): the facts of their text, no password hash;
    /// `None` for the others (they change the state and print a message).
    pub fn admin_json(&self, words: &[&str]) -> Option<serde_json::Value> {
        use serde_json::json;
        let v = match words {
            ["status"] => self.with(|s| {
                json!({
                    "enabled": s.enabled,
                    "users": s.users.len(),
                    "groups": s.groups.len(),
                    "sources": s.sources.len(),
                    "refused_requests": self.refused.load(Ordering::Relaxed),
                    "logins_refused_in_cool_down": self.lockouts.load(Ordering::Relaxed),
                })
            }),
            ["print-users"] => self.with(|s| {
                let users: Vec<serde_json::Value> = s
                    .users
                    .iter()
                    .map(|(name, u)| {
                        json!({"name": name, "groups": u.groups, "password": u.password.is_some()})
                    })
                    .collect();
                json!({ "users": users })
            }),
            ["print-groups"] => self.with(|s| {
                let groups: Vec<serde_json::Value> = s
                    .groups
                    .iter()
                    .map(|g| {
                        let members: Vec<&String> = s
                            .users
                            .iter()
                            .filter(|(_, u)| u.groups.contains(g))
                            .map(|(n, _)| n)
                            .collect();
                        json!({"name": g, "members": members})
                    })
                    .collect();
                json!({ "groups": groups })
            }),
            ["print-grants"] => self.with(|s| {
                let mut grants = Vec::new();
                for (role, by_scope) in &s.grants {
                    for (scope, perms) in by_scope {
                        grants.push(json!({"role": role, "scope": scope.to_string(), "permissions": perms}));
                    }
                }
                json!({ "grants": grants })
            }),
            ["print-sources"] => self.with(|s| {
                let sources: Vec<serde_json::Value> = s
                    .sources
                    .iter()
                    .map(|x| json!({"user": x.user, "cidr": x.cidr.to_string(), "method": x.method.name()}))
                    .collect();
                json!({ "sources": sources })
            }),
            _ => return None,
        };
        Some(v)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    fn alice() -> Arc<Security> {
        let sec = Arc::new(Security::open(None).expect("open"));
        sec.set_login_policy(logins::Policy {
            first_lockout: Duration::from_secs(60),
            ..logins::Policy::DEFAULT
        });
        sec.admin(&["add-user", "alice", "password=right"])
            .expect("user");
        sec.admin(&["add-source", "all", "127.0.0.0/8", "password"])
            .expect("source");
        sec
    }

    /// Twenty wrong passwords at once: the attempts queued for a
    /// verification slot are refused once the pair is locked out, so at
    /// most the threshold plus the other slots' attempts are hashed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_wrong_passwords_stop_being_hashed_at_the_threshold() {
        let sec = alice();
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let s = sec.clone();
                tokio::spawn(async move { s.login("alice", "wrong", ip("127.0.0.1"), None).await })
            })
            .collect();
        let (mut hashed, mut locked, mut busy) = (0, 0, 0);
        for t in tasks {
            match t.await.expect("join") {
                Err(LoginError::Denied(Denied::BadCredentials)) => hashed += 1,
                Err(LoginError::LockedOut(_)) => locked += 1,
                // A machine so loaded that five hashes take longer than
                // LOGIN_VERIFY_WAIT: the waiters give up.
                Err(LoginError::Busy) => busy += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        let most = limits::LOGIN_FAILURES_BEFORE_LOCKOUT as usize + limits::LOGIN_VERIFY_SLOTS - 1;
        let why = format!("{hashed} hashed, {locked} locked out, {busy} busy");
        assert!(hashed <= most, "{why}");
        assert_eq!(hashed + locked + busy, 20, "{why}");
        if busy == 0 {
            assert!(hashed >= 5, "{why}");
        }
        assert_eq!(sec.lockouts.load(Ordering::Relaxed), locked as u64);
        if hashed < 5 {
            return; // not locked out yet: nothing more to check
        }
        // The right password too, and the IPv4-mapped address is the same
        // address.
        let r = sec
            .login("alice", "right", ip("::ffff:127.0.0.1"), None)
            .await;
        assert!(
            matches!(&r, Err(LoginError::LockedOut(l)) if l.user == "alice" && l.ip == ip("127.0.0.1")),
            "{r:?}"
        );
        // Another address is not locked out.
        assert_eq!(
            sec.login("alice", "right", ip("127.0.0.9"), None).await,
            Ok(())
        );
    }

    /// Unknown users count as failures (the same answer as a wrong
    /// password: no user enumeration) and hash their password as a wrong
    /// one does (no enumeration by timing); no source is not a failure.
    #[tokio::test]
    async fn unknown_users_count_and_missing_sources_do_not() {
        let sec = alice();
        for i in 1..=5 {
            let r = sec.login("nobody", "x", ip("127.0.0.1"), None).await;
            assert_eq!(r, Err(LoginError::Denied(Denied::BadCredentials)));
            assert_eq!(
                sec.hashed.load(Ordering::Relaxed),
                i,
                "hashed like a known user's"
            );
        }
        // Not even the decoy's own password admits an unknown user.
        let r = sec
            .login("nobody2", "basalt decoy password", ip("127.0.0.2"), None)
            .await;
        assert_eq!(r, Err(LoginError::Denied(Denied::BadCredentials)));
        let r = sec.login("nobody", "x", ip("127.0.0.1"), None).await;
        assert!(matches!(r, Err(LoginError::LockedOut(_))), "{r:?}");
        for _ in 0..8 {
            let r = sec.login("alice", "right", ip("192.168.1.1"), None).await;
            assert_eq!(r, Err(LoginError::Denied(Denied::NoSource)));
        }
        // nobody and nobody2 from their addresses.
        assert_eq!(sec.login_pairs_tracked(), 2);
        // A success removes the pair.
        for _ in 0..3 {
            let _ = sec.login("alice", "wrong", ip("127.0.0.1"), None).await;
        }
        assert_eq!(sec.login_pairs_tracked(), 3);
        assert_eq!(
            sec.login("alice", "right", ip("127.0.0.1"), None).await,
            Ok(())
        );
        assert_eq!(sec.login_pairs_tracked(), 2);
    }
}
