//! Reads the network drivers' options ([`crate::netcfg`], where the keys
//! and their defaults are listed) from a [`RawConfig`]: address lists as
//! basho_bench's `normalize_ips`, quorums, timeouts, buckets, the NHS
//! workload's tuples, and the `riakc_pb` driver's TLS and user (from
//! `basalt_pb_*` or `pb_connect_options`, read in `connect`).

use super::connect::ConnectSpec;
use super::error::ConfigError;
use super::ops::{OpKind, OpSpec};
use super::raw::RawConfig;
use crate::netcfg::{
    HttpOptions, KeyOrder, NhsOptions, PbOptions, PbSecurity, Target, DEFAULT_CHECKREPL_TIMEOUT,
    MAX_TARGETS, MAX_UNIQUE_SIZE,
};
use crate::term::Term;
use riak_pb::quorum;
use std::sync::Arc;
use std::time::Duration;

fn ip_text(t: &Term) -> Option<String> {
    match t {
        Term::Tuple(parts) if parts.len() == 4 || parts.len() == 8 => {
            let nums: Option<Vec<i64>> = parts.iter().map(Term::as_int).collect();
            let nums = nums?;
            if parts.len() == 4 {
                if nums.iter().all(|n| (0..=255).contains(n)) {
                    Some(
                        nums.iter()
                            .map(i64::to_string)
                            .collect::<Vec<_>>()
                            .join("."),
                    )
                } else {
                    None
                }
            } else if nums.iter().all(|n| (0..=0xffff).contains(n)) {
                Some(
                    nums.iter()
                        .map(|n| format!("{n:x}"))
                        .collect::<Vec<_>>()
                        .join(":"),
                )
            } else {
                None
            }
        }
        // A host name or IP text: letters, digits, '.', '-', '_', ':'
        // (IPv6), with at least one letter or digit (so `...` is refused).
        Term::Str(_) | Term::Atom(_) | Term::Bin(_) => t.as_text().filter(|s| {
            s.chars().any(|c| c.is_ascii_alphanumeric())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
        }),
        _ => None,
    }
}

fn port_of(t: &Term) -> Option<u16> {
    t.as_int()
        .filter(|p| (1..=65535).contains(p))
        .map(|p| p as u16)
}

impl RawConfig {
    /// Parses an address list like basho_bench's `normalize_ips`.
    pub(crate) fn targets(
        &self,
        key: &str,
        port_key: &str,
        default_port: u16,
    ) -> Result<Vec<Target>, ConfigError> {
        let port = match self.get(port_key) {
            None => default_port,
            Some(t) => port_of(t).ok_or_else(|| {
                self.invalid(port_key, format!("expected a port 1..65535, got {t}"))
            })?,
        };
        let Some(list) = self.get(key) else {
            return Ok(vec![Target {
                host: "127.0.0.1".into(),
                port,
            }]);
        };
        let bad = |what: &Term| {
            self.invalid(
                key,
                format!(
                    "expected a list of IP, {{IP, Port}} or {{IP, [Port, ...]}} \
                     (IP a string or a tuple like {{127,0,0,1}}), got {what}"
                ),
            )
        };
        let Term::List(items) = list else {
            return Err(bad(list));
        };
        let mut out = Vec::new();
        for item in items {
            if let Some(host) = ip_text(item) {
                out.push(Target { host, port });
                continue;
            }
            let Term::Tuple(pair) = item else {
                return Err(bad(item));
            };
            let [ip, p] = pair.as_slice() else {
                return Err(bad(item));
            };
            let host = ip_text(ip).ok_or_else(|| bad(item))?;
            match p {
                Term::List(ports) => {
                    for p in ports {
                        out.push(Target {
                            host: host.clone(),
                            port: port_of(p).ok_or_else(|| bad(item))?,
                        });
                    }
                }
                p => out.push(Target {
                    host,
                    port: port_of(p).ok_or_else(|| bad(item))?,
                }),
            }
        }
        if out.is_empty() {
            return Err(self.invalid(key, "needs at least one address"));
        }
        if out.len() > MAX_TARGETS {
            return Err(self.invalid(key, format!("at most {MAX_TARGETS} addresses")));
        }
        Ok(out)
    }

    fn millis(&self, key: &str, default: Duration) -> Result<Duration, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(t) => match t.as_int() {
                Some(ms) if (1..=3_600_000).contains(&ms) => Ok(Duration::from_millis(ms as u64)),
                _ => Err(self.invalid(key, format!("expected milliseconds 1..3600000, got {t}"))),
            },
        }
    }

    fn replies(&self, key: &str, default: u32) -> Result<u32, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(t) => match (t.as_atom(), t.as_int()) {
                (Some("one"), _) => Ok(quorum::ONE),
                (Some("quorum"), _) => Ok(quorum::QUORUM),
                (Some("all"), _) => Ok(quorum::ALL),
                (Some("default"), _) => Ok(quorum::DEFAULT),
                (_, Some(n)) if (0..=1000).contains(&n) => Ok(n as u32),
                _ => Err(self.invalid(
                    key,
                    format!("expected one, quorum, all, default or an integer 0..1000, got {t}"),
                )),
            },
        }
    }

    fn bytes_or(&self, key: &str, default: &str) -> Result<Vec<u8>, ConfigError> {
        let v = self
            .text(key)?
            .map_or_else(|| default.as_bytes().to_vec(), String::into_bytes);
        if v.is_empty() {
            return Err(self.invalid(key, "must not be empty"));
        }
        Ok(v)
    }

    fn key_order(&self, key: &str, t: &Term) -> Result<KeyOrder, ConfigError> {
        match t.as_atom() {
            Some("key_order") => Ok(KeyOrder::KeyOrder),
            Some("skew_order") => Ok(KeyOrder::SkewOrder),
            _ => Err(self.invalid(key, format!("expected key_order or skew_order, got {t}"))),
        }
    }

    /// The `riakc_pb` options; notes on them go to `warnings`.
    pub(crate) fn pb_options(&self, warnings: &mut Vec<String>) -> Result<PbOptions, ConfigError> {
        let replies = self.replies("riakc_pb_replies", quorum::QUORUM)?;
        let general = self.millis("pb_timeout_general", Duration::from_millis(62_000))?;
        let connect = self.pb_connect(warnings)?;
        if let Some(Term::Tuple(v)) = self.get("riakc_pb_bucket") {
            if v.len() == 2 {
                return Err(self.invalid(
                    "riakc_pb_bucket",
                    "a {Type, Bucket} bucket (a bucket type) is not supported by basalt \
                     bench's riakc_pb driver; give a bucket name",
                ));
            }
        }
        let max_results = match self.get("basalt_2i_max_results") {
            None => None,
            Some(t) => Some(
                t.as_int()
                    .filter(|n| (1..=u32::MAX as i64).contains(n))
                    .map(|n| n as u32)
                    .ok_or_else(|| {
                        self.invalid("basalt_2i_max_results", "expected a positive integer")
                    })?,
            ),
        };
        Ok(PbOptions {
            targets: self.targets("riakc_pb_ips", "riakc_pb_port", 8087)?,
            bucket: self.bytes_or("riakc_pb_bucket", "test")?,
            r: self.replies("riakc_pb_r", replies)?,
            pr: self.replies("riakc_pb_pr", replies)?,
            w: self.replies("riakc_pb_w", replies)?,
            dw: self.replies("riakc_pb_dw", replies)?,
            pw: self.replies("riakc_pb_pw", replies)?,
            rw: self.replies("riakc_pb_rw", replies)?,
            content_type: self
                .text("riakc_pb_content_type")?
                .unwrap_or_else(|| "application/octet-stream".into()),
            timeout_general: general,
            timeout_read: self.millis("pb_timeout_read", general)?,
            timeout_write: self.millis("pb_timeout_write", general)?,
            timeout_listkeys: self.millis("pb_timeout_listkeys", general)?,
            timeout_mapreduce: self.millis("pb_timeout_mapreduce", general)?,
            max_results,
            security: self.pb_security(&connect)?,
            connect: connect.connect,
        })
    }

    /// The security settings: `basalt_pb_cacertfile`, `basalt_pb_user`,
    /// `basalt_pb_password`, or the same spelled as riakc's `cacertfile`
    /// and `credentials` in `pb_connect_options` (both spellings must
    /// agree).
    fn pb_security(&self, riakc: &ConnectSpec) -> Result<Option<Arc<PbSecurity>>, ConfigError> {
        use rustls::pki_types::pem::PemObject;
        const OPTS: &str = "pb_connect_options";
        let mut user = self.text("basalt_pb_user")?;
        let mut password = self.text("basalt_pb_password")?;
        let mut ca = self.text("basalt_pb_cacertfile")?;
        let mut key = "basalt_pb_cacertfile";
        if let Some((u, p)) = &riakc.credentials {
            let given = user.is_some() || password.is_some();
            if given && (user.as_ref() != Some(u) || password.as_ref() != Some(p)) {
                return Err(self.invalid(
                    OPTS,
                    "{credentials, User, Password} and basalt_pb_user / basalt_pb_password \
                     differ: give one of them",
                ));
            }
            user = Some(u.clone());
            password = Some(p.clone());
        }
        if let Some(path) = &riakc.cacertfile {
            if ca.as_ref().is_some_and(|c| c != path) {
                return Err(self.invalid(
                    OPTS,
                    format!(
                        "{{cacertfile, {path:?}}} and basalt_pb_cacertfile {:?} differ: give \
                         one of them",
                        ca.unwrap_or_default()
                    ),
                ));
            }
            if user.is_none() {
                return Err(self.invalid(
                    OPTS,
                    "{cacertfile, Path} without {credentials, User, Password}: riakc uses TLS \
                     only with credentials, so it would connect without TLS and not read the \
                     file; add the credentials, or use basalt_pb_cacertfile for TLS without a \
                     user",
                ));
            }
            ca = Some(path.clone());
            key = OPTS;
        }
        let Some(ca) = ca else {
            if riakc.credentials.is_some() {
                return Err(self.invalid(
                    OPTS,
                    "{credentials, User, Password} needs TLS, which verifies the node's \
                     certificate: add {cacertfile, Path} (or basalt_pb_cacertfile)",
                ));
            }
            if user.is_some() || password.is_some() {
                return Err(self.invalid(
                    "basalt_pb_user",
                    "a user needs TLS: set basalt_pb_cacertfile too",
                ));
            }
            return Ok(None);
        };
        let mut roots = rustls::RootCertStore::empty();
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(&ca)
            .map_err(|e| self.invalid(key, format!("reading {ca}: {e}")))?;
        for c in certs {
            let c = c.map_err(|e| self.invalid(key, format!("parsing {ca}: {e}")))?;
            roots
                .add(c)
                .map_err(|e| self.invalid(key, format!("a CA certificate in {ca}: {e}")))?;
        }
        if roots.is_empty() {
            return Err(self.invalid(key, format!("no certificate in {ca}")));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| self.invalid(key, e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let user = match (user, password) {
            (None, None) => None,
            (Some(u), Some(p)) => Some((u, p)),
            _ => {
                return Err(self.invalid(
                    "basalt_pb_user",
                    "basalt_pb_user and basalt_pb_password go together",
                ))
            }
        };
        Ok(Some(Arc::new(PbSecurity {
            tls: Arc::new(tls),
            user,
        })))
    }

    /// The `nhs` options (`ops`: the parsed operations, which decide
    /// whether `replpb_ips` is needed).
    pub(crate) fn nhs_options(&self, ops: &[OpSpec]) -> Result<NhsOptions, ConfigError> {
        let (alwaysget_max, alwaysget_min, alwaysget_order) = match self.get("alwaysget") {
            None => (1, 1, KeyOrder::KeyOrder),
            Some(t) => match t {
                Term::Tuple(v) if v.len() == 3 => {
                    let max = v[0].as_int().filter(|n| *n >= 1);
                    let min = v[1].as_int().filter(|n| *n >= 1);
                    match (max, min) {
                        (Some(max), Some(min)) => {
                            (max as u64, min as u64, self.key_order("alwaysget", &v[2])?)
                        }
                        _ => {
                            return Err(self.invalid(
                                "alwaysget",
                                format!("expected {{MaxKeys >= 1, MinKeys >= 1, key_order | skew_order}}, got {t}"),
                            ))
                        }
                    }
                }
                _ => {
                    return Err(self.invalid(
                        "alwaysget",
                        format!("expected {{MaxKeys, MinKeys, key_order | skew_order}}, got {t}"),
                    ))
                }
            },
        };
        let (unique_size, unique_order) = match self.get("unique") {
            None => (8000, KeyOrder::KeyOrder),
            Some(t) => match t {
                Term::Tuple(v) if v.len() == 2 => {
                    let size = v[0]
                        .as_int()
                        .filter(|n| (1..=MAX_UNIQUE_SIZE as i64).contains(n))
                        .ok_or_else(|| {
                            self.invalid(
                                "unique",
                                format!("the size must be 1..{MAX_UNIQUE_SIZE} bytes, got {t}"),
                            )
                        })?;
                    (size as usize, self.key_order("unique", &v[1])?)
                }
                _ => {
                    return Err(self.invalid(
                        "unique",
                        format!("expected {{Size, key_order | skew_order}}, got {t}"),
                    ))
                }
            },
        };
        let postcode_indexcount = self.int("postcode_indexcount", 3, 1)?;
        if postcode_indexcount > 100 {
            return Err(self.invalid("postcode_indexcount", "at most 100"));
        }
        let targets = self.targets("pb_ips", "pb_port", 8087)?;
        let checkrepl = ops.iter().any(|o| o.op == OpKind::PutUniqueCheckRepl);
        let (repl_targets, checkrepl_timeout) = if checkrepl {
            if self.get("replpb_ips").is_none() {
                let at = self
                    .location("operations")
                    .map(|l| format!(" (operations at {l})"))
                    .unwrap_or_default();
                return Err(ConfigError::Invalid {
                    key: "replpb_ips".into(),
                    message: format!(
                        "missing: put_unique_checkrepl{at} reads each key back from the \
                         passive cluster, so replpb_ips must list its PB addresses (port \
                         pb_port), e.g. {{replpb_ips, [\"10.0.0.2\"]}}"
                    ),
                    at: None,
                });
            }
            (
                self.targets("replpb_ips", "pb_port", 8087)?,
                self.millis("basalt_checkrepl_timeout", DEFAULT_CHECKREPL_TIMEOUT)?,
            )
        } else {
            (Vec::new(), DEFAULT_CHECKREPL_TIMEOUT)
        };
        Ok(NhsOptions {
            targets,
            record_bucket: self.bytes_or("record_bucket", "domainRecord")?,
            document_bucket: self.bytes_or("document_bucket", "domainDocument")?,
            postcode_indexcount: postcode_indexcount as u32,
            alwaysget_max,
            alwaysget_min,
            alwaysget_order,
            unique_size,
            unique_order,
            node_name: self.text("node_name")?.unwrap_or_else(|| "basalt".into()),
            timeout: self.millis("pb_timeout_general", Duration::from_millis(30_000))?,
            repl_targets,
            checkrepl_timeout,
        })
    }

    /// The `http_raw` options.
    pub(crate) fn http_options(&self) -> Result<HttpOptions, ConfigError> {
        // Headers such as Authorization change what every request means:
        // refused rather than dropped.
        if self.get("http_raw_append_headers").is_some() {
            return Err(self.invalid(
                "http_raw_append_headers",
                "extra HTTP headers are not sent by basalt bench's http_raw driver",
            ));
        }
        let path = self
            .text("http_raw_path")?
            .unwrap_or_else(|| "/buckets/test/keys".into());
        if !path.starts_with('/') {
            return Err(self.invalid("http_raw_path", "must start with /"));
        }
        Ok(HttpOptions {
            targets: self.targets("http_raw_ips", "http_raw_port", 8098)?,
            path: path.trim_end_matches('/').to_string(),
            timeout: self.millis("http_timeout_general", Duration::from_millis(30_000))?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::OpKind;
    use crate::config::typed::BenchConfig;
    use crate::netcfg::{KeyOrder, NetOptions, Target, DEFAULT_CHECKREPL_TIMEOUT};
    use riak_pb::quorum;
    use std::time::Duration;

    fn t(host: &str, port: u16) -> Target {
        Target {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn pb_addresses_normalize_like_basho_bench() {
        let (c, w) = BenchConfig::from_text(
            "{driver, basho_bench_driver_riakc_pb}.\n\
             {riakc_pb_ips, [{127,0,0,1}, \"10.0.0.2\", {\"h\", 9000}, {{10,0,0,3}, [1, 2]}]}.\n\
             {riakc_pb_port, 10017}.\n{riakc_pb_replies, 1}.\n{riakc_pb_w, all}.\n\
             {operations, [{get, 1}, {update, 1}]}.",
        )
        .expect("cfg");
        assert!(w.is_empty(), "{w:?}");
        let Some(NetOptions::RiakcPb(o)) = c.net else {
            panic!("pb options")
        };
        assert_eq!(
            o.targets,
            vec![
                t("127.0.0.1", 10017),
                t("10.0.0.2", 10017),
                t("h", 9000),
                t("10.0.0.3", 1),
                t("10.0.0.3", 2)
            ]
        );
        assert_eq!((o.r, o.w, o.dw), (1, quorum::ALL, 1));
        assert_eq!(o.bucket, b"test");
        assert_eq!(o.timeout_read, Duration::from_millis(62_000));
    }

    #[test]
    fn defaults_and_nhs_tuples() {
        let (c, _) = BenchConfig::from_text(
            "{driver, riakc_pb}.\n{operations, [{query_postcode, 1}, {query_dob, 1}]}.",
        )
        .expect("cfg");
        let Some(NetOptions::RiakcPb(o)) = c.net else {
            panic!("pb")
        };
        assert_eq!(o.targets, vec![t("127.0.0.1", 8087)]);
        assert_eq!(o.r, quorum::QUORUM);
        let (c, _) = BenchConfig::from_text(
            "{driver, basho_bench_driver_nhs}.\n{alwaysget, {800, 400, key_order}}.\n\
             {unique, {8000, skew_order}}.\n{pb_ips, [\"127.0.0.1\"]}.\n{riakc_pb_replies, 1}.\n\
             {operations, [{alwaysget_pb, 1}, {put_unique, 1}]}.",
        )
        .expect("cfg");
        let Some(NetOptions::Nhs(o)) = c.net else {
            panic!("nhs")
        };
        assert_eq!((o.alwaysget_max, o.alwaysget_min), (800, 400));
        assert_eq!(o.alwaysget_order, KeyOrder::KeyOrder);
        assert_eq!((o.unique_size, o.unique_order), (8000, KeyOrder::SkewOrder));
        assert_eq!(o.record_bucket, b"domainRecord");
        assert_eq!(o.document_bucket, b"domainDocument");
    }

    #[test]
    fn checkrepl_needs_replpb_ips() {
        let e = BenchConfig::from_text(
            "{driver, basho_bench_driver_nhs}.\n{pb_ips, [\"127.0.0.1\"]}.\n\
             {operations, [{put_unique, 148}, {put_unique_checkrepl, 2}]}.",
        )
        .expect_err("checkrepl without replpb_ips");
        let msg = e.to_string();
        assert!(
            msg.starts_with("replpb_ips: missing: put_unique_checkrepl (operations at <text>:3)")
                && msg.contains("passive cluster"),
            "{msg}"
        );
        // An address that cannot be one (the seed's elision) names the key.
        let e = BenchConfig::from_text(
            "{driver, nhs}.\n{replpb_ips, [ ... ]}.\n{operations, [{put_unique_checkrepl, 2}]}.",
        )
        .expect_err("elided replpb_ips");
        assert!(
            e.to_string().starts_with("replpb_ips: expected a list"),
            "{e}"
        );
        let e = BenchConfig::from_text(
            "{driver, nhs}.\n{replpb_ips, [\"b\"]}.\n{basalt_checkrepl_timeout, 0}.\n\
             {operations, [{put_unique_checkrepl, 2}]}.",
        )
        .expect_err("zero bound");
        assert!(e.to_string().contains("basalt_checkrepl_timeout"), "{e}");
    }

    #[test]
    fn checkrepl_is_accepted_with_replpb_ips() {
        let (c, w) = BenchConfig::from_text(
            "{driver, basho_bench_driver_nhs}.\n{pb_ips, [\"a1\", \"a2\"]}.\n{pb_port, 10017}.\n\
             {replpb_ips, [\"b1\", {\"b2\", 9000}]}.\n\
             {operations, [{put_unique, 148}, {put_unique_checkrepl, 2}]}.",
        )
        .expect("cfg");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(c.operations[1].op, OpKind::PutUniqueCheckRepl);
        let net = c.net.expect("net");
        // The passive cluster's port is pb_port, as upstream.
        assert_eq!(net.repl_targets(), &[t("b1", 10017), t("b2", 9000)]);
        assert_eq!(net.targets(), &[t("a1", 10017), t("a2", 10017)]);
        let Some(NetOptions::Nhs(o)) = Some(net) else {
            panic!("nhs")
        };
        assert_eq!(o.checkrepl_timeout, DEFAULT_CHECKREPL_TIMEOUT);
        let (c, _) = BenchConfig::from_text(
            "{driver, nhs}.\n{replpb_ips, [\"b\"]}.\n{basalt_checkrepl_timeout, 250}.\n\
             {operations, [{put_unique_checkrepl, 1}]}.",
        )
        .expect("cfg");
        let Some(NetOptions::Nhs(o)) = c.net else {
            panic!("nhs")
        };
        assert_eq!(o.checkrepl_timeout, Duration::from_millis(250));
        // Without the op, replpb_ips is not read (so not checked) and no
        // passive connection is made.
        let (c, w) = BenchConfig::from_text(
            "{driver, nhs}.\n{replpb_ips, [ ... ]}.\n{operations, [{put_unique, 1}]}.",
        )
        .expect("cfg");
        assert!(w.is_empty(), "{w:?}");
        assert!(c.net.expect("net").repl_targets().is_empty());
    }

    #[test]
    fn bad_options_are_named() {
        for (text, want) in [
            ("{riakc_pb_ips, [{300,0,0,1}]}.", "riakc_pb_ips"),
            ("{riakc_pb_ips, []}.", "at least one address"),
            ("{riakc_pb_port, 70000}.", "riakc_pb_port"),
            ("{riakc_pb_replies, many}.", "riakc_pb_replies"),
            ("{pb_timeout_general, 0}.", "pb_timeout_general"),
            (
                "{riakc_pb_bucket, {<<\"maps\">>, <<\"b\">>}}.",
                "riakc_pb_bucket: a {Type, Bucket} bucket (a bucket type) is not supported",
            ),
        ] {
            let e = BenchConfig::from_text(&format!(
                "{{driver, riakc_pb}}.\n{{operations, [{{get,1}}]}}.\n{text}"
            ))
            .expect_err(text);
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
        let e = BenchConfig::from_text(
            "{driver, basho_bench_driver_nhs}.\n{alwaysget, {1, 1, sideways}}.\n{operations, [{alwaysget_pb,1}]}.",
        )
        .expect_err("bad order");
        assert!(e.to_string().contains("key_order or skew_order"), "{e}");
        let e = BenchConfig::from_text(
            "{driver, basho_bench_driver_http_raw}.\n{operations, [{query_dob,1}]}.",
        )
        .expect_err("2i over http");
        assert!(e.to_string().contains("valid: get"), "{e}");
    }
}
