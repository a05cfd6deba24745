//! Node configuration (TOML). [`DEFAULT_CONFIG`] is the documented default
//! file printed by `basalt start --print-default-config`.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The default configuration file, with comments.
pub const DEFAULT_CONFIG: &str = r#"# Basalt node configuration.
# Node name: reported by server info and part of every vclock actor id.
node_name = "basalt@127.0.0.1"
# Where the vnodes' stores (data_dir/vnodes/<partition>) and bucket props live.
data_dir = "./data"
# Protocol Buffers listener (Riak's default port).
pb_listen = "127.0.0.1:8087"
# HTTP listener (Riak's default port); "" disables the HTTP API.
http_listen = "127.0.0.1:8098"
# Number of ring partitions (vnodes); a power of two, 1..=1024.
ring_size = 64
# Storage backend of every vnode: leveled, bitcask, rocksdb, rocksdb-blob, memory.
backend = "leveled"
# Sync every write to stable storage before acknowledging it.
sync = false

[limits]
# Largest PB frame accepted (bytes, counting the message code).
max_frame_bytes = 67108864
# Largest object accepted (sum of sibling values); larger puts get an error.
max_object_bytes = 52428800
# Log a warning for objects above this size.
warn_object_bytes = 5242880
# Requests waiting per vnode; a full queue answers `overload`.
vnode_queue_len = 1000
# Time a request may wait for its vnodes (milliseconds) before `timeout`.
request_timeout_ms = 60000
"#;

/// Size and queue limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest PB frame.
    pub max_frame_bytes: usize,
    /// Largest object.
    pub max_object_bytes: usize,
    /// Warn above this object size.
    pub warn_object_bytes: usize,
    /// Bounded queue length of each vnode.
    pub vnode_queue_len: usize,
    /// Vnode request timeout.
    pub request_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: crate::pb::DEFAULT_MAX_FRAME,
            max_object_bytes: 50 * 1024 * 1024,
            warn_object_bytes: 5 * 1024 * 1024,
            vnode_queue_len: 1000,
            request_timeout_ms: 60_000,
        }
    }
}

/// A node's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Node name.
    pub node_name: String,
    /// Data directory.
    pub data_dir: PathBuf,
    /// PB listen address.
    pub pb_listen: String,
    /// HTTP listen address; empty = no HTTP listener.
    pub http_listen: String,
    /// Ring partitions.
    pub ring_size: u32,
    /// Backend name.
    pub backend: String,
    /// Sync writes.
    pub sync: bool,
    /// Limits.
    pub limits: Limits,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node_name: "basalt@127.0.0.1".into(),
            data_dir: PathBuf::from("./data"),
            pb_listen: "127.0.0.1:8087".into(),
            http_listen: "127.0.0.1:8098".into(),
            ring_size: 64,
            backend: "leveled".into(),
            sync: false,
            limits: Limits::default(),
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("config: {0}")]
pub struct ConfigError(pub String);

impl Config {
    /// Parses TOML (missing keys take their defaults) and validates it.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if crate::ring::Ring::new(self.ring_size).is_none() {
            return Err(ConfigError(format!(
                "ring_size must be a power of two in 1..=1024, got {}",
                self.ring_size
            )));
        }
        if self.limits.vnode_queue_len == 0 {
            return Err(ConfigError(
                "limits.vnode_queue_len must be at least 1".into(),
            ));
        }
        if self.limits.max_frame_bytes < 16 {
            return Err(ConfigError(
                "limits.max_frame_bytes must be at least 16".into(),
            ));
        }
        if self.node_name.is_empty() {
            return Err(ConfigError("node_name must not be empty".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_file_is_the_default() {
        let c = Config::from_toml(DEFAULT_CONFIG).ok();
        assert_eq!(c, Some(Config::default()));
        assert!(Config::from_toml("ring_size = 6").is_err());
        assert!(Config::from_toml("bogus = 1").is_err());
    }
}
