//! The errors of a request: what a client sees in
//! `RpbErrorResp` (or an HTTP status), mapped from vnode and props errors.

use crate::vnode::VnodeError;
use basalt_backend::BackendError;
use basalt_backends::DISK_FULL_MARK;

/// A request that failed; the `Display` text is what goes into `RpbErrorResp`.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Bad input from the client.
    #[error("{0}")]
    Invalid(String),
    /// A vnode queue was full.
    #[error("overload")]
    Overload,
    /// Vnodes did not answer in time.
    #[error("timeout")]
    Timeout,
    /// Fewer replicas answered than the quorum needs (`{r_val_unsatisfied,R,Got}` style).
    #[error("{{{kind}_val_unsatisfied,{need},{got}}}")]
    Unsatisfied {
        /// `r`, `w`, ...
        kind: &'static str,
        /// Needed.
        need: u32,
        /// Got.
        got: u32,
    },
    /// `if_none_match` and the object exists.
    #[error("match_found")]
    MatchFound,
    /// `if_not_modified` and the clock differs.
    #[error("modified")]
    Modified,
    /// `if_not_modified` and no object.
    #[error("notfound")]
    NotFound,
    /// The disk of a vnode is full (HTTP 507).
    #[error("disk full: {0}")]
    DiskFull(String),
    /// A storage failure.
    #[error("storage error: {0}")]
    Storage(String),
    /// A pre-commit hook refused the write; its reason (HTTP 403).
    #[error("{0}")]
    Forbidden(String),
}

/// True if `e` comes from a full disk (ENOSPC), here or, by its message,
/// on another node.
fn is_disk_full(e: &VnodeError) -> bool {
    const ENOSPC: &str = "No space left on device";
    match e {
        VnodeError::Backend(BackendError::Io { source, .. }) => {
            source.kind() == std::io::ErrorKind::StorageFull
        }
        VnodeError::Backend(BackendError::Closed(reason)) => reason.contains(ENOSPC),
        VnodeError::Remote(m) => m.contains(ENOSPC) || m.contains(DISK_FULL_MARK),
        _ => false,
    }
}

impl From<VnodeError> for RequestError {
    fn from(e: VnodeError) -> Self {
        match e {
            VnodeError::Overload => RequestError::Overload,
            VnodeError::Timeout => RequestError::Timeout,
            VnodeError::Backend(
                BackendError::NotSupported { .. } | BackendError::InvalidInput(_),
            ) => RequestError::Invalid(e.to_string()),
            other if is_disk_full(&other) => RequestError::DiskFull(other.to_string()),
            other => RequestError::Storage(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_its_own_error() {
        let io = VnodeError::Backend(BackendError::Io {
            op: "append",
            path: "journal".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        });
        assert!(matches!(RequestError::from(io), RequestError::DiskFull(_)));
        let guard = VnodeError::Remote(format!("admit write {}: ...", DISK_FULL_MARK));
        assert!(matches!(
            RequestError::from(guard),
            RequestError::DiskFull(_)
        ));
        let remote = VnodeError::Remote("append: No space left on device (os error 28)".into());
        assert!(matches!(
            RequestError::from(remote),
            RequestError::DiskFull(_)
        ));
        let other = VnodeError::Remote("connection lost".into());
        assert!(matches!(
            RequestError::from(other),
            RequestError::Storage(_)
        ));
        assert!(RequestError::DiskFull("x".into())
            .to_string()
            .starts_with("disk full"));
    }
}
