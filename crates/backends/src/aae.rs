//! Tictac trees over any backend.
//!
//! Backends with `native_aae` keep a tree on every write
//! ([`basalt_backend::Admin::tictac_tree`]); for the others [`build_tree`] folds one: head
//! folds where the backend has `fold_heads`, object folds otherwise (as
//! Riak's AAE does for eleveldb and bitcask). Every backend's
//! `Head::value_hash` is xxh3-64 of the value and segments are
//! `basalt_backend::segment_of`, so trees of the same data are equal across
//! backends and comparable with `TicTacTree::dirty_segments`.

use basalt_backend::{Backend, Result, TreeSize};
use basalt_engine::tictac::TicTacTree;
use std::ops::ControlFlow;

/// A tictac tree of every live object of `backend`, built by a fold.
pub fn build_tree(backend: &dyn Backend, size: TreeSize) -> Result<TicTacTree> {
    let mut tree = TicTacTree::new(size);
    let snap = backend.snapshot()?;
    if backend.capabilities().fold_heads {
        snap.fold_heads(None, None, &Default::default(), &mut |b, k, h| {
            tree.add(b, k, h.value_hash);
            ControlFlow::Continue(())
        })?;
    } else {
        for bucket in snap.list_buckets()? {
            snap.fold_objects(&bucket, None, &mut |b, k, o| {
                tree.add(b, k, o.head.value_hash);
                ControlFlow::Continue(())
            })?;
        }
    }
    Ok(tree)
}
