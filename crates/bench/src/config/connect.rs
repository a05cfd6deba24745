//! `pb_connect_options`: the `riakc_pb` driver's `riakc_pb_socket`
//! options ([`PbConnect`]) read from a [`RawConfig`] as riakc's
//! `parse_options` reads them (the meanings: [`crate::netcfg`]; what they
//! do after a disconnect: `pbconn`). The shape is checked here: a list of
//! atoms, `{Name, Value}` pairs and the one triple `{credentials, User,
//! Password}`; an option riakc has that Basalt cannot honour, or one riakc
//! does not have, is an error naming it and why. Passwords never appear in
//! a message.

use super::error::ConfigError;
use super::raw::RawConfig;
use crate::netcfg::{PbConnect, MAX_CONNECT_TIMEOUT};
use crate::term::Term;
use std::time::Duration;

/// The config key.
const KEY: &str = "pb_connect_options";

/// What `pb_connect_options` gave: the connection options, and the
/// security options spelled the riakc way (the caller merges them with
/// `basalt_pb_*`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ConnectSpec {
    /// The connection options.
    pub connect: PbConnect,
    /// `{credentials, User, Password}`.
    pub credentials: Option<(String, String)>,
    /// `{cacertfile, Path}`.
    pub cacertfile: Option<String>,
}

impl RawConfig {
    /// `pb_connect_options` (the driver's default `[{auto_reconnect,
    /// true}]` when absent); notes on the list go to `warnings`.
    pub(super) fn pb_connect(
        &self,
        warnings: &mut Vec<String>,
    ) -> Result<ConnectSpec, ConfigError> {
        let Some(t) = self.get(KEY) else {
            return Ok(ConnectSpec::default());
        };
        let at = self
            .location(KEY)
            .map(|l| format!(" ({l})"))
            .unwrap_or_default();
        let Term::List(items) = t else {
            return Err(self.invalid(
                KEY,
                format!(
                    "expected a list of riakc_pb_socket options (atoms, {{Name, Value}} or \
                     {{credentials, User, Password}}), got {t}"
                ),
            ));
        };
        // riakc's defaults once a list is given.
        let mut spec = ConnectSpec {
            connect: PbConnect {
                auto_reconnect: false,
                ..PbConnect::default()
            },
            ..ConnectSpec::default()
        };
        let mut auto_given = false;
        for item in items {
            match item {
                Term::Atom(a) => match a.as_str() {
                    "auto_reconnect" => {
                        spec.connect.auto_reconnect = true;
                        auto_given = true;
                    }
                    "queue_if_disconnected" => spec.connect.queue_if_disconnected = true,
                    "keepalive" => {
                        spec.connect.keepalive = false;
                        warnings.push(format!(
                            "{KEY}: a bare keepalive turns keepalive off, as riakc reads it \
                             ({{keepalive, false}}); write {{keepalive, true}} for SO_KEEPALIVE{at}"
                        ));
                    }
                    other => return Err(self.not_an_option(other, false)),
                },
                Term::Tuple(v) => match v.as_slice() {
                    [Term::Atom(name), value] => {
                        self.pair(&mut spec, name, value)?;
                        auto_given |= name == "auto_reconnect";
                    }
                    [Term::Atom(name), user, password] if name == "credentials" => {
                        match (user.as_text(), password.as_text()) {
                            (Some(u), Some(p)) if !u.is_empty() => {
                                spec.credentials = Some((u, p));
                            }
                            _ => {
                                return Err(self.invalid(
                                    KEY,
                                    "credentials: expected {credentials, User, Password} with \
                                     User and Password strings, User not empty",
                                ))
                            }
                        }
                    }
                    [Term::Atom(name), ..] if name == "credentials" => {
                        return Err(self
                            .invalid(KEY, "expected {credentials, User, Password} (3 elements)"))
                    }
                    _ => return Err(self.bad_shape(item)),
                },
                _ => return Err(self.bad_shape(item)),
            }
        }
        // As riakc: queueing while disconnected implies reconnecting.
        if spec.connect.queue_if_disconnected {
            spec.connect.auto_reconnect = true;
        } else if !auto_given {
            warnings.push(format!(
                "{KEY} has no auto_reconnect, so riakc's default false applies (the driver's \
                 [{{auto_reconnect, true}}] is only the default of a config without \
                 {KEY}): after a disconnect the worker's next op fails with crash and the \
                 worker reconnects, and the run stops if it cannot{at}"
            ));
        }
        Ok(spec)
    }

    /// One `{Name, Value}` option.
    fn pair(&self, spec: &mut ConnectSpec, name: &str, value: &Term) -> Result<(), ConfigError> {
        let boolean = |what: &str| match value.as_atom() {
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            _ => Err(self.invalid(
                KEY,
                format!("{what}: expected {{{what}, true}} or {{{what}, false}}, got {value}"),
            )),
        };
        match name {
            "auto_reconnect" => spec.connect.auto_reconnect = boolean(name)?,
            "queue_if_disconnected" => spec.connect.queue_if_disconnected = boolean(name)?,
            "keepalive" => spec.connect.keepalive = boolean(name)?,
            "silence_terminate_crash" => {
                // Only the exit reason riakc logs when it stops: nothing to do.
                boolean(name)?;
            }
            "connect_timeout" => {
                let max = MAX_CONNECT_TIMEOUT.as_millis() as i64;
                spec.connect.connect_timeout = match (value.as_atom(), value.as_int()) {
                    (Some("infinity"), _) => MAX_CONNECT_TIMEOUT,
                    (_, Some(ms)) if (1..=max).contains(&ms) => Duration::from_millis(ms as u64),
                    _ => {
                        return Err(self.invalid(
                            KEY,
                            format!(
                                "connect_timeout: expected milliseconds 1..{max} or infinity \
                                 (= {max}), got {value}"
                            ),
                        ))
                    }
                };
            }
            "linger" => {
                let ok = match value {
                    Term::Tuple(v) => match v.as_slice() {
                        [on, secs] => match (on.as_atom(), secs.as_int()) {
                            (Some("true"), Some(s)) if (0..=3600).contains(&s) => {
                                Some(Some(Duration::from_secs(s as u64)))
                            }
                            (Some("false"), Some(s)) if s >= 0 => Some(None),
                            _ => None,
                        },
                        _ => None,
                    },
                    _ => None,
                };
                spec.connect.linger = ok.ok_or_else(|| {
                    self.invalid(
                        KEY,
                        format!("linger: expected {{linger, {{true | false, Seconds 0..3600}}}}, got {value}"),
                    )
                })?;
            }
            "cacertfile" => match value.as_text() {
                Some(p) if !p.is_empty() => spec.cacertfile = Some(p),
                _ => {
                    return Err(self.invalid(
                        KEY,
                        format!("cacertfile: expected {{cacertfile, Path}}, got {value}"),
                    ))
                }
            },
            "credentials" => {
                return Err(self.invalid(KEY, "expected {credentials, User, Password} (3 elements)"))
            }
            other => return Err(self.not_an_option(other, true)),
        }
        Ok(())
    }

    /// An option riakc has that Basalt cannot honour, or an unknown one.
    fn not_an_option(&self, name: &str, pair: bool) -> ConfigError {
        let why = match name {
            "certfile" | "keyfile" => format!(
                "{name}: TLS client certificates are not supported by basalt bench; \
                 authenticate with {{credentials, User, Password}} (or basalt_pb_user / \
                 basalt_pb_password) over TLS instead"
            ),
            "ssl_opts" => "ssl_opts: Erlang ssl options cannot be applied to basalt bench's \
                 TLS client (rustls); the CA is {cacertfile, Path} and the node's certificate \
                 must name the address's host"
                .to_string(),
            _ if pair => format!(
                "unknown option {name}; riakc_pb_socket has auto_reconnect, \
                 queue_if_disconnected, keepalive, connect_timeout, linger, \
                 silence_terminate_crash, credentials, cacertfile (certfile, keyfile and \
                 ssl_opts are not supported)"
            ),
            _ => format!(
                "unknown option {name}; as a bare atom riakc_pb_socket takes auto_reconnect, \
                 queue_if_disconnected or keepalive"
            ),
        };
        self.invalid(KEY, why)
    }

    fn bad_shape(&self, item: &Term) -> ConfigError {
        self.invalid(
            KEY,
            format!(
                "expected an option: an atom, {{Name, Value}} or {{credentials, User, \
                 Password}}, got {item}"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<(ConnectSpec, Vec<String>), ConfigError> {
        let mut raw = RawConfig::default();
        raw.add_text(&format!("\n{{pb_connect_options, {text}}}."), "c.config")
            .expect("syntax");
        let mut w = Vec::new();
        raw.pb_connect(&mut w).map(|s| (s, w))
    }

    fn connect(text: &str) -> PbConnect {
        read(text).expect(text).0.connect
    }

    #[test]
    fn absent_is_the_drivers_default_and_a_list_starts_from_riakcs() {
        let (s, w) = {
            let raw = RawConfig::default();
            let mut w = Vec::new();
            (raw.pb_connect(&mut w).expect("default"), w)
        };
        assert!(s.connect.auto_reconnect && !s.connect.queue_if_disconnected);
        assert!(w.is_empty());
        // The example configs' list: no warning.
        let (s, w) = read("[{auto_reconnect, true}]").expect("example");
        assert_eq!(s.connect, PbConnect::default());
        assert!(w.is_empty(), "{w:?}");
        // A list without auto_reconnect: riakc's false, with a warning.
        let (s, w) = read("[{keepalive, true}]").expect("keepalive");
        assert!(!s.connect.auto_reconnect && s.connect.keepalive);
        assert!(
            w[0].contains("no auto_reconnect") && w[0].contains("c.config:2"),
            "{w:?}"
        );
        let (s, w) = read("[]").expect("empty");
        assert!(!s.connect.auto_reconnect);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn every_option_shape() {
        assert!(connect("[auto_reconnect]").auto_reconnect);
        assert!(!connect("[{auto_reconnect, false}]").auto_reconnect);
        // Later wins, as riakc folds the list.
        assert!(!connect("[auto_reconnect, {auto_reconnect, false}]").auto_reconnect);
        // queue_if_disconnected turns auto_reconnect on, in either spelling.
        let c = connect("[queue_if_disconnected, {auto_reconnect, false}]");
        assert!(c.queue_if_disconnected && c.auto_reconnect);
        assert!(connect("[{queue_if_disconnected, true}]").auto_reconnect);
        assert!(!connect("[auto_reconnect, {queue_if_disconnected, false}]").queue_if_disconnected);
        // A bare keepalive is riakc's {keepalive, false}, with a warning.
        let (s, w) = read("[auto_reconnect, {keepalive, true}, keepalive]").expect("kq");
        assert!(!s.connect.keepalive);
        assert!(w.iter().any(|w| w.contains("bare keepalive")), "{w:?}");
        assert!(connect("[auto_reconnect, {keepalive, true}]").keepalive);
        assert_eq!(
            connect("[auto_reconnect, {connect_timeout, 750}]").connect_timeout,
            Duration::from_millis(750)
        );
        assert_eq!(
            connect("[auto_reconnect, {connect_timeout, infinity}]").connect_timeout,
            MAX_CONNECT_TIMEOUT
        );
        assert_eq!(
            connect("[auto_reconnect, {linger, {true, 0}}]").linger,
            Some(Duration::ZERO)
        );
        assert_eq!(
            connect("[auto_reconnect, {linger, {false, 5}}]").linger,
            None
        );
        assert_eq!(
            connect("[auto_reconnect, {silence_terminate_crash, true}]"),
            PbConnect::default()
        );
        let (s, _) =
            read("[{credentials, \"u\", <<\"p\">>}, {cacertfile, \"/ca.pem\"}]").expect("security");
        assert_eq!(s.credentials, Some(("u".into(), "p".into())));
        assert_eq!(s.cacertfile.as_deref(), Some("/ca.pem"));
    }

    #[test]
    fn bad_options_name_the_key_the_line_and_why() {
        for (text, want) in [
            ("auto_reconnect", "expected a list"),
            (
                "[{auto_reconnect, yes}]",
                "{auto_reconnect, true} or {auto_reconnect, false}",
            ),
            ("[{keepalive, 1}]", "keepalive"),
            (
                "[{connect_timeout, 0}]",
                "connect_timeout: expected milliseconds",
            ),
            ("[{connect_timeout, 120001}]", "1..120000 or infinity"),
            ("[{linger, true}]", "linger"),
            (
                "[{certfile, \"c.pem\"}]",
                "certfile: TLS client certificates",
            ),
            ("[{keyfile, \"k.pem\"}]", "keyfile: TLS client certificates"),
            ("[{ssl_opts, []}]", "ssl_opts: Erlang ssl options"),
            ("[{nodelay, true}]", "unknown option nodelay"),
            ("[reconnect]", "unknown option reconnect"),
            (
                "[{credentials, \"u\"}]",
                "{credentials, User, Password} (3 elements)",
            ),
            ("[{credentials, \"\", \"p\"}]", "User not empty"),
            ("[{a, b, c}]", "expected an option"),
            ("[42]", "expected an option"),
            ("[{cacertfile, 7}]", "cacertfile"),
        ] {
            let e = read(text).expect_err(text).to_string();
            assert!(
                e.starts_with("pb_connect_options: ")
                    && e.contains(want)
                    && e.ends_with("(c.config:2)"),
                "{text}: {e}"
            );
        }
        // A password is never echoed.
        for text in [
            "[{credentials, 7, \"hunter2\"}]",
            "[{credentials, \"hunter2\"}]",
        ] {
            let e = read(text).expect_err(text).to_string();
            assert!(!e.contains("hunter2"), "{e}");
        }
    }
}
