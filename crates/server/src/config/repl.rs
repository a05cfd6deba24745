//! The `[repl]` section: sinks, their queues' bounds, full-sync, and
//! replication's TLS credentials, as plain data with the checks that need
//! nothing but the section (a sink's filter is parsed by `repl`, which owns
//! its meaning). See the default config's comments (`default.toml`).

use super::ConfigError;
use serde::{Deserialize, Serialize};

/// The `[repl]` section of the config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplConfig {
    /// Shorthand: seed addresses of one sink named `default`, filter `any`.
    pub sinks: Vec<String>,
    /// Objects up to this size are queued whole, larger ones as references.
    pub object_limit_bytes: u64,
    /// Every entry written to disk (the kernel) before `push` returns.
    pub queue_write_through: bool,
    /// Entries of each priority in memory per queue before spilling.
    pub queue_memory_entries: usize,
    /// Entries of each priority per queue; beyond it new ones are discarded.
    pub queue_max_entries: u64,
    /// Sinks (`[[repl.sink]]`).
    pub sink: Vec<SinkConfig>,
    /// Full-sync (`[repl.fullsync]`).
    pub fullsync: FullSyncConfig,
    /// Certificate chain presented to sink clusters ("" = plain TCP).
    pub certfile: String,
    /// Private key of `certfile`.
    pub keyfile: String,
    /// The sink clusters' CA certificates.
    pub cacertfile: String,
}

/// The `[repl.fullsync]` section; see the default config's comments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FullSyncConfig {
    /// Cluster address of this node's peer in the other cluster.
    pub peer: String,
    /// The local sink whose queue takes repairs.
    pub sink: String,
    /// The peer's sink queue pointing back here (bi-directional repair).
    pub peer_queue: String,
    /// `all` or `bucket`.
    pub scope: String,
    /// The n_val of scope `all`.
    pub n_val: u32,
    /// The bucket of scope `bucket`.
    pub bucket: String,
    /// Its bucket type (empty: none).
    pub bucket_type: String,
    /// `all` checks per day.
    pub all_check: u32,
    /// `day` checks per day.
    pub day_check: u32,
    /// `hour` checks per day.
    pub hour_check: u32,
    /// `range` checks per day.
    pub range_check: u32,
    /// `auto` checks per day.
    pub auto_check: u32,
    /// Segments compared per check.
    pub max_results: usize,
    /// Multiplier of `max_results` for range checks.
    pub range_boost: usize,
    /// 1-4.
    pub cluster_slice: u32,
    /// [from, to) hours (UTC) when auto may run an `all` check.
    pub allcheck_window: Vec<u32>,
}

impl Default for FullSyncConfig {
    fn default() -> Self {
        FullSyncConfig {
            peer: String::new(),
            sink: String::new(),
            peer_queue: String::new(),
            scope: "all".into(),
            n_val: 3,
            bucket: String::new(),
            bucket_type: String::new(),
            all_check: 0,
            day_check: 0,
            hour_check: 0,
            range_check: 0,
            auto_check: 24,
            max_results: 32,
            range_boost: 16,
            cluster_slice: 1,
            allcheck_window: vec![0, 24],
        }
    }
}

impl FullSyncConfig {
    /// The all-check window.
    pub fn window(&self) -> (u32, u32) {
        match self.allcheck_window.as_slice() {
            [a, b] => (*a, *b),
            _ => (0, 24),
        }
    }

    /// The storage bucket of scope `bucket`, `None` for scope `all`.
    pub fn scope_bucket(&self) -> Result<Option<Vec<u8>>, String> {
        match self.scope.as_str() {
            "all" => Ok(None),
            "bucket" if !self.bucket.is_empty() => {
                let t = (!self.bucket_type.is_empty()).then_some(self.bucket_type.as_bytes());
                Ok(Some(crate::bucket::keying::storage_bucket(
                    t,
                    self.bucket.as_bytes(),
                )))
            }
            "bucket" => Err("repl.fullsync scope \"bucket\" needs `bucket`".into()),
            s => Err(format!("repl.fullsync scope {s:?}: \"all\" or \"bucket\"")),
        }
    }

    /// Checks the section; the error names the setting.
    pub fn validate(&self) -> Result<(), String> {
        self.scope_bucket()?;
        let (a, b) = match self.allcheck_window.as_slice() {
            [a, b] => (*a, *b),
            _ => return Err("repl.fullsync allcheck_window: [from_hour, to_hour]".into()),
        };
        if a > 24 || b > 24 {
            return Err("repl.fullsync allcheck_window: hours in 0..=24".into());
        }
        if !(1..=4).contains(&self.cluster_slice) {
            return Err("repl.fullsync cluster_slice: 1 to 4".into());
        }
        if self.max_results == 0 || self.range_boost == 0 || self.n_val == 0 {
            return Err("repl.fullsync max_results, range_boost and n_val must be > 0".into());
        }
        let total =
            self.all_check + self.day_check + self.hour_check + self.range_check + self.auto_check;
        if total > 24 * 60 {
            return Err(format!(
                "repl.fullsync: {total} checks a day; at most one a minute"
            ));
        }
        Ok(())
    }
}

impl Default for ReplConfig {
    fn default() -> Self {
        ReplConfig {
            sinks: Vec::new(),
            object_limit_bytes: 200 * 1024,
            queue_write_through: true,
            queue_memory_entries: 10_000,
            queue_max_entries: 1_000_000,
            sink: Vec::new(),
            fullsync: FullSyncConfig::default(),
            certfile: String::new(),
            keyfile: String::new(),
            cacertfile: String::new(),
        }
    }
}

/// One sink cluster (`[[repl.sink]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SinkConfig {
    /// The sink's name (its queue's name): letters, digits, `_`, `-`.
    pub name: String,
    /// Cluster addresses of some of its nodes (the rest are discovered).
    pub peers: Vec<String>,
    /// Which real-time writes it takes (`any`, `block_rt`, `bucket:NAME`,
    /// `prefix:PREFIX`, `type:TYPE`).
    pub filter: String,
    /// Queue but do not deliver.
    pub suspended: bool,
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            name: String::new(),
            peers: Vec::new(),
            filter: "any".into(),
            suspended: false,
        }
    }
}

impl ReplConfig {
    /// `certfile`, `keyfile` and `cacertfile` are all set or all empty.
    pub fn check_tls(&self) -> Result<(), ConfigError> {
        let files = [&self.certfile, &self.keyfile, &self.cacertfile];
        if files.iter().any(|f| f.is_empty()) && files.iter().any(|f| !f.is_empty()) {
            return Err(ConfigError(
                "[repl] certfile, keyfile and cacertfile go together: set all three or none".into(),
            ));
        }
        Ok(())
    }

    /// The configured sinks: `[[repl.sink]]` plus the `sinks` shorthand
    /// (as `default`).
    pub fn all_sinks(&self) -> Vec<SinkConfig> {
        let mut all = self.sink.clone();
        if !self.sinks.is_empty() {
            all.push(SinkConfig {
                name: "default".into(),
                peers: self.sinks.clone(),
                ..SinkConfig::default()
            });
        }
        all
    }

    /// Checks names, filters, peers and limits; the error says which.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let all = self.all_sinks();
        let mut names = std::collections::BTreeSet::new();
        for s in &all {
            s.validate().map_err(ConfigError)?;
            if !names.insert(s.name.as_str()) {
                return Err(ConfigError(format!("repl: two sinks named {:?}", s.name)));
            }
        }
        if all.len() > crate::limits::REPL_MAX_SINKS {
            return Err(ConfigError(format!(
                "repl: {} sinks; at most {}",
                all.len(),
                crate::limits::REPL_MAX_SINKS
            )));
        }
        self.fullsync.validate().map_err(ConfigError)?;
        if self.queue_memory_entries == 0 || self.queue_max_entries == 0 {
            return Err(ConfigError(
                "repl: queue_memory_entries and queue_max_entries must be > 0".into(),
            ));
        }
        Ok(())
    }
}

impl SinkConfig {
    /// Checks the name and that there is a peer. The filter is replication's
    /// to parse: a sink with a bad one does not open (`repl::sinks`).
    pub fn validate(&self) -> Result<(), String> {
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if self.name.is_empty() || self.name.len() > 64 || !self.name.chars().all(ok) {
            return Err(format!(
                "repl sink name {:?}: 1-64 letters, digits, '_' or '-'",
                self.name
            ));
        }
        if self.peers.is_empty() || self.peers.iter().any(|p| p.trim().is_empty()) {
            return Err(format!(
                "repl sink {}: needs the cluster address of at least one of its nodes (peers)",
                self.name
            ));
        }
        Ok(())
    }
}
