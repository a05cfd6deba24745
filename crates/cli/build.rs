//! Build script of the `basalt` binary: finds the commit the binary is
//! built from, for `basalt --version` ("0.1.0 (commit 15f2697)", with
//! "-dirty" when tracked files differ from that commit), and hands it to
//! the crate as the environment variable `BASALT_COMMIT`.
//!
//! The commit comes from `git`, when `git` is installed and this crate's
//! sources are tracked by the repository around them; otherwise (a source
//! tarball, a build without `git`) it is "unknown". `BASALT_COMMIT` set in
//! the build's environment wins (a distribution building from a tarball
//! can name the commit it took). Nothing here fails the build.
//!
//! The script runs again when the checked-out commit moves (HEAD, the
//! branch, packed refs), when the index changes (`git add`, a commit) and
//! when a file under the workspace's `crates/` or its `Cargo.toml` /
//! `Cargo.lock` changes, so "-dirty" follows edits.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=BASALT_COMMIT");
    let commit = match std::env::var("BASALT_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => from_git().unwrap_or_else(|| "unknown".to_string()),
    };
    println!("cargo:rustc-env=BASALT_COMMIT={commit}");
}

/// Runs `git ARGS` in this crate's directory; its trimmed stdout if it
/// succeeded.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The short commit, with "-dirty" when tracked files changed; `None`
/// without `git` or outside a repository that tracks this crate.
fn from_git() -> Option<String> {
    // A tarball unpacked inside some other repository is not that
    // repository's commit: this crate's manifest must be tracked.
    git(&["ls-files", "--error-unmatch", "Cargo.toml"])?;
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    watch_git();
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}

/// Asks cargo to run this script again when the commit or the tree moves.
fn watch_git() {
    let mut paths = Vec::new();
    for p in ["HEAD", "index", "packed-refs"] {
        paths.extend(git(&["rev-parse", "--git-path", p]));
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        paths.extend(git(&["rev-parse", "--git-path", &branch]));
    }
    if let Some(top) = git(&["rev-parse", "--show-toplevel"]) {
        // What the binary is built from (not docs, nor git-ignored trees
        // such as fuzz/target or interop's node_modules: large to scan).
        for p in ["crates", "Cargo.toml", "Cargo.lock"] {
            paths.push(Path::new(&top).join(p).display().to_string());
        }
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    for p in paths {
        // `--git-path` answers relative to the crate's directory.
        let p = Path::new(&dir).join(p);
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
}
