//! `basalt admin services` and `basalt admin wait-for-service`, as
//! `riak admin services` / `riak admin wait-for-service SERVICE [NODE]`:
//! a node listens only once it can serve (vnodes opened, ring loaded), so
//! a service is up when the node's cluster port answers the admin line
//! `services` and lists it. Until then the command prints
//! `SERVICE is not up: REASON` once per [`POLL`] and tries again; then
//! `SERVICE is up`. Riak waits forever; `--timeout` gives up (exit 1).
//! With `--json` each of those lines is a JSON object instead.

use crate::admin_client::{call, AdminNode};
use riak_pb::code::basalt as bt;
use std::time::{Duration, Instant};

/// How often the node is asked.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The node's answer to `services`: its name and its services.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Services {
    pub(crate) node: String,
    pub(crate) services: Vec<String>,
}

/// Parses the `services` admin line's answer (`node: N\nservices: A B\n`).
pub(crate) fn parse(text: &str) -> Option<Services> {
    let mut node = None;
    let mut services = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("node: ") {
            node = Some(n.trim().to_string());
        } else if let Some(s) = line.strip_prefix("services: ") {
            services = Some(s.split_whitespace().map(str::to_string).collect());
        }
    }
    Some(Services {
        node: node?,
        services: services?,
    })
}

/// Asks the node once: its services, or why it cannot say.
pub(crate) fn ask(node: &AdminNode) -> Result<Services, String> {
    match call(node, bt::ADMIN_CLUSTER_REQ, b"services") {
        Ok(Ok((_, body))) => {
            let text = String::from_utf8_lossy(&body);
            parse(&text).ok_or_else(|| format!("unexpected answer {text:?}"))
        }
        Ok(Err(msg)) => Err(msg),
        // The whole chain: "cannot reach node …: Connection refused".
        Err(e) => Err(format!("{e:#}")),
    }
}

/// `basalt admin services` (`--json`: `{"node": N, "services": [..]}`).
pub(crate) fn services(node: &AdminNode, json: bool) -> anyhow::Result<crate::Outcome> {
    match ask(node) {
        Ok(s) if json => {
            println!(
                "{}",
                serde_json::json!({"node": s.node, "services": s.services})
            );
            Ok(crate::Outcome::Done)
        }
        Ok(s) => {
            println!("{}: {}", s.node, s.services.join(" "));
            Ok(crate::Outcome::Done)
        }
        Err(e) => {
            eprintln!("{e}");
            Ok(crate::Outcome::Code(1))
        }
    }
}

/// One progress line of `wait-for-service`: text, or with `json`
/// `{"service": S, "up": B, "reason": R}`.
fn report(service: &str, reason: Option<&str>, json: bool) {
    match (json, reason) {
        (true, _) => println!(
            "{}",
            serde_json::json!({"service": service, "up": reason.is_none(), "reason": reason})
        ),
        (false, None) => println!("{service} is up"),
        (false, Some(r)) => println!("{service} is not up: {r}"),
    }
}

/// `basalt admin wait-for-service`.
pub(crate) fn wait_for_service(
    node: &AdminNode,
    service: &str,
    node_name: Option<&str>,
    timeout: Option<Duration>,
    json: bool,
) -> anyhow::Result<crate::Outcome> {
    let known = basalt_server::server::admin::SERVICES;
    if !known.contains(&service) {
        eprintln!(
            "{service:?} is not a service of Basalt (services: {})",
            known.join(", ")
        );
        return Ok(crate::Outcome::Code(2));
    }
    let start = Instant::now();
    loop {
        let reason = match ask(node) {
            Ok(s) if node_name.is_some_and(|n| n != s.node) => {
                eprintln!(
                    "the node at that address is {}, not {}",
                    s.node,
                    node_name.unwrap_or_default()
                );
                return Ok(crate::Outcome::Code(2));
            }
            Ok(s) if s.services.iter().any(|x| x == service) => {
                report(service, None, json);
                return Ok(crate::Outcome::Done);
            }
            Ok(s) => format!("[{}]", s.services.join(",")),
            Err(e) => e,
        };
        report(service, Some(&reason), json);
        if timeout.is_some_and(|t| start.elapsed() + POLL > t) {
            eprintln!(
                "gave up waiting for {service} after {:.0?}",
                start.elapsed()
            );
            return Ok(crate::Outcome::Code(1));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_services_answer() {
        assert_eq!(
            parse("node: riak@127.0.0.1\nservices: riak_api riak_kv riak_pipe\n"),
            Some(Services {
                node: "riak@127.0.0.1".into(),
                services: vec!["riak_api".into(), "riak_kv".into(), "riak_pipe".into()],
            })
        );
        assert_eq!(parse("services: riak_kv\n"), None);
        assert_eq!(parse("something else"), None);
    }
}
