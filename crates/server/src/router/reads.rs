//! Reads from disk beside the vnodes' workers (`read_threads`).
//!
//! A vnode's worker runs its jobs one at a time, and with sync on each
//! write job holds it for an fsync; a HEAD or GET queued behind such
//! writes waits for them before its own disk read. Reads need no turn (a
//! backend is `Sync`; a read that overlaps a write sees the old or the new
//! version, as if queued before or after it), so a read the backend
//! cannot answer from memory runs here instead: on a blocking thread of
//! the node's runtime, at most `read_threads` at once over all its
//! vnodes. When all are busy, or the vnode serves nothing off its worker
//! now, or the read fails, the read goes to the vnode's queue as before:
//! the worker owns error handling and restarts. No queue of its own: a
//! read either takes a free thread at once or queues where it always did.

use super::Router;
use crate::vnode::request::{VnodeReply, VnodeReq};
use crate::vnode::{Vnode, VnodeError};
use std::sync::Arc;

impl Router {
    /// Runs the HEAD or GET `req` on a read thread beside `v`'s worker:
    /// `None` if it should be queued for the worker instead (not a HEAD or
    /// GET, no free thread, the vnode not serving off its worker, or the
    /// read failed); its answer, or `Timeout` past the request timeout.
    pub(super) async fn read_beside(
        &self,
        v: &Vnode,
        req: &VnodeReq,
        qlen: u32,
    ) -> Option<Result<VnodeReply, VnodeError>> {
        if !req.is_point_read() {
            return None;
        }
        let permit = Arc::clone(&self.read_threads).try_acquire_owned().ok()?;
        let beside = v.beside()?;
        let req = req.clone();
        let read = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            beside.read(|st| st.execute(req, qlen))
        });
        match tokio::time::timeout(self.timeout(), read).await {
            Ok(Ok(Ok(reply))) => Some(Ok(reply)),
            Ok(Ok(Err(e))) => {
                tracing::debug!(error = %e, "read beside the vnode failed; queueing it");
                None
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "read thread ended without an answer; queueing the read");
                None
            }
            Err(_) => Some(Err(VnodeError::Timeout)),
        }
    }
}
