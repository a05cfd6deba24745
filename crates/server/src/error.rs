//! The errors of a request: what a client sees in
//! `RpbErrorResp` (or an HTTP status). The layers above map their own
//! errors into it (`vnode` its `VnodeError`, `bucket` its props errors).

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
