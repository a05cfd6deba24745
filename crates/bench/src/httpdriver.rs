//! The `http_raw` driver (`basho_bench_driver_http_raw`): a Riak node's
//! HTTP API with the upstream driver's operation semantics (options:
//! [`crate::netcfg`]; the start-up check: `netdriver`). Each worker keeps
//! a blocking keep-alive `reqwest` client (request timeout
//! `http_timeout_general`, connect timeout 2 s) and walks the address list
//! request by request, starting at entry `N mod len` for worker *N*.
//!
//! Operations on `<http_raw_path>/<percent-encoded key>`: `get` (200/300
//! and 404 succeed; `get_existing`: 404 is `not_found`), `put` (PUT,
//! `Content-Type: application/octet-stream`, `X-Riak-ClientId` = base64
//! of the worker id), `update` / `update_existing` (GET, then PUT with the
//! `X-Riak-Vclock` it returned; `update_existing`: 404 is `not_found`),
//! `delete` (204 and 404 succeed). Errors: `timeout`, `econnrefused`,
//! `http_error`, `http_<status>`.

use crate::config::OpKind;
use crate::driver::{Driver, DriverError, Outcome};
use crate::netcfg::HttpOptions;
use crate::pbconn::CONNECT_TIMEOUT;
use base64::Engine;

/// `basho_bench_driver_http_raw` of one worker.
pub struct HttpDriver {
    client: reqwest::blocking::Client,
    bases: Vec<String>,
    next: usize,
    client_id: String,
}

fn http_reason(e: &reqwest::Error) -> DriverError {
    DriverError::new(if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "econnrefused"
    } else {
        "http_error"
    })
}

fn status_error(s: reqwest::StatusCode) -> DriverError {
    DriverError::new(format!("http_{}", s.as_u16()))
}

impl HttpDriver {
    /// The driver of worker `id` (1-based).
    pub fn new(o: &HttpOptions, id: usize) -> Result<HttpDriver, String> {
        let client = reqwest::blocking::Client::builder()
            .timeout(o.timeout)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot start an HTTP client: {e}"))?;
        let bases: Vec<String> = o
            .targets
            .iter()
            .map(|t| format!("http://{t}{}", o.path))
            .collect();
        Ok(HttpDriver {
            next: id % bases.len().max(1),
            bases,
            client,
            client_id: base64::engine::general_purpose::STANDARD.encode((id as u32).to_be_bytes()),
        })
    }

    fn url(&mut self, key: &[u8]) -> Result<String, DriverError> {
        let base = self
            .bases
            .get(self.next)
            .ok_or_else(|| DriverError::new("no_address"))?;
        self.next = (self.next + 1) % self.bases.len();
        let k = percent_encoding::percent_encode(key, percent_encoding::NON_ALPHANUMERIC);
        Ok(format!("{base}/{k}"))
    }

    /// GET: `Some(vclock header)` when found, `None` on 404.
    fn get(&self, url: &str) -> Result<Option<Option<String>>, DriverError> {
        let r = self.client.get(url).send().map_err(|e| http_reason(&e))?;
        let status = r.status();
        let vclock = r
            .headers()
            .get("x-riak-vclock")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        // Read the body so that the connection can be reused.
        r.bytes().map_err(|e| http_reason(&e))?;
        match status.as_u16() {
            200 | 300 => Ok(Some(vclock)),
            404 => Ok(None),
            _ => Err(status_error(status)),
        }
    }

    fn put(&self, url: &str, value: &[u8], vclock: Option<String>) -> Result<Outcome, DriverError> {
        let mut req = self
            .client
            .put(url)
            .header("Content-Type", "application/octet-stream")
            .header("X-Riak-ClientId", &self.client_id)
            .body(value.to_vec());
        if let Some(v) = vclock {
            req = req.header("X-Riak-Vclock", v);
        }
        let r = req.send().map_err(|e| http_reason(&e))?;
        let status = r.status();
        r.bytes().map_err(|e| http_reason(&e))?;
        if status.is_success() {
            Ok(Outcome::Done)
        } else {
            Err(status_error(status))
        }
    }
}

impl Driver for HttpDriver {
    fn run(&mut self, op: OpKind, key: &[u8], value: &[u8]) -> Result<Outcome, DriverError> {
        let url = self.url(key)?;
        match op {
            OpKind::Get => self.get(&url).map(|_| Outcome::Done),
            OpKind::GetExisting => match self.get(&url)? {
                Some(_) => Ok(Outcome::Done),
                None => Err(DriverError::new("not_found")),
            },
            OpKind::Put => self.put(&url, value, None),
            OpKind::Update | OpKind::UpdateExisting => match self.get(&url)? {
                Some(vclock) => self.put(&url, value, vclock),
                None if op == OpKind::Update => self.put(&url, value, None),
                None => Err(DriverError::new("not_found")),
            },
            OpKind::Delete => {
                let r = self
                    .client
                    .delete(&url)
                    .send()
                    .map_err(|e| http_reason(&e))?;
                let status = r.status();
                r.bytes().map_err(|e| http_reason(&e))?;
                if status.is_success() || status.as_u16() == 404 {
                    Ok(Outcome::Done)
                } else {
                    Err(status_error(status))
                }
            }
            _ => Err(DriverError::new("unsupported_op")),
        }
    }
}
