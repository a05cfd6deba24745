//! What the `kv` commands of [`crate::kv`] and [`crate::kv_features`]
//! share: the check of bucket and key names and the JSON shape of a head.
//!
//! `kv` dispatches to `kv_features`; both import these from here, so
//! imports run one way.

use anyhow::{bail, Result};
use basalt_engine::{limits, Head};
use serde_json::{json, Value};

/// The engine checks names on writes; reads answer "not found" for a name no
/// write could have used, so the CLI refuses those names itself, with the
/// engine's wording.
pub(crate) fn check_name(what: &str, name: &[u8]) -> Result<()> {
    if name.is_empty() {
        bail!("invalid input: {what} must not be empty");
    }
    if name.len() > limits::KEY_SIZE_BYTES_MAX {
        bail!(
            "invalid input: {what} is {} bytes; the limit is {} bytes",
            name.len(),
            limits::KEY_SIZE_BYTES_MAX
        );
    }
    Ok(())
}

/// Bytes as text, invalid UTF-8 replaced.
pub(crate) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Bytes as lowercase hex.
fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A head as the JSON object `kv head` prints (`kv fold heads` prints one
/// a line).
pub(crate) fn head_json(bucket: &[u8], key: &[u8], head: &Head) -> Value {
    json!({
        "bucket": lossy(bucket),
        "key": lossy(key),
        "sqn": head.version,
        "size": head.size,
        "hash": head.value_hash,
        "hash_hex": format!("{:016x}", head.value_hash),
        "last_modified": head.last_modified_us,
        "expires_at": head.expires_at,
        "metadata": lossy(&head.metadata),
        "metadata_hex": hex(&head.metadata),
    })
}
