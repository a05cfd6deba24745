//! A vnode's incarnation id: the part of its vclock actor that changes
//! whenever the vnode may have forgotten an event it issued.
//!
//! A vclock actor must never stamp two different writes with the same
//! counter; that needs the vnode to remember every event it issued. It may
//! not: a fallback vnode is handed off, deleted and later created again
//! empty; a node is killed before its last writes reached the disk; a
//! backend closes itself after an I/O failure. Each of these starts a new
//! **incarnation** with a new random id (as Riak's vnode ids with their
//! epoch), so its events can never collide with the old ones. A vnode
//! that shut down cleanly (every event durable) keeps its id, so clocks do
//! not grow with every restart.
//!
//! # File (`<data_dir>/vnodes/<partition>.vnode`, beside the backend's
//! directory, which backends keep to themselves)
//!
//! One line of text: `basalt-vnode <version> <id: 16 hex digits> <open|clean>
//! <crc32c of the text before it: 8 hex digits>`. The version names the
//! incarnation's actor form ([`ActorForm`]): 1 the named actor of builds
//! before 2026-12-07, 2 the 8-byte one every new incarnation now takes; a
//! kept incarnation keeps its version, so its actor does not change. A
//! build that knows only version 1 reads a version-2 file as damaged and
//! draws a new id (a downgrade costs one more clock entry, nothing else).
//! Written atomically
//! (write, fsync, rename, fsync dir). `open` is written when the vnode
//! starts, `clean` after its backend closed without error. On start, the
//! id is kept only if the file says `clean`, its CRC matches and the
//! backend's directory exists; otherwise (missing, damaged, `open`) a new
//! id is drawn. Deleting a vnode's data deletes this file first.

pub use crate::ring::{ActorForm, Incarnation};
use std::path::{Path, PathBuf};

const MAGIC: &str = "basalt-vnode";

fn version_of(form: ActorForm) -> u32 {
    match form {
        ActorForm::Named => 1,
        ActorForm::Short => 2,
    }
}

/// The state a vnode's status file records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// The vnode is running (or died without closing).
    Open,
    /// The vnode's backend closed without error.
    Clean,
}

/// The status file of the vnode whose backend lives in `dir`.
pub fn status_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".vnode");
    dir.with_file_name(name)
}

pub(crate) fn render(inc: Incarnation, state: Shutdown) -> String {
    let word = match state {
        Shutdown::Open => "open",
        Shutdown::Clean => "clean",
    };
    let (version, id) = (version_of(inc.form), inc.id);
    let body = format!("{MAGIC} {version} {id:016x} {word}");
    let crc = crc32c::crc32c(body.as_bytes());
    format!("{body} {crc:08x}\n")
}

/// Parses a status file; `None` if it is not one (wrong magic, version,
/// fields or CRC).
pub(crate) fn parse(text: &str) -> Option<(Incarnation, Shutdown)> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    let (body, crc) = line.rsplit_once(' ')?;
    if u32::from_str_radix(crc, 16).ok()? != crc32c::crc32c(body.as_bytes()) {
        return None;
    }
    let mut f = body.split(' ');
    if f.next()? != MAGIC {
        return None;
    }
    let form = match f.next()? {
        "1" => ActorForm::Named,
        "2" => ActorForm::Short,
        _ => return None,
    };
    let id = u64::from_str_radix(f.next()?, 16).ok()?;
    let state = match f.next()? {
        "open" => Shutdown::Open,
        "clean" => Shutdown::Clean,
        _ => return None,
    };
    f.next()
        .is_none()
        .then_some((Incarnation { id, form }, state))
}

fn write(dir: &Path, inc: Incarnation, state: Shutdown) -> std::io::Result<()> {
    crate::fsutil::atomic_write(&status_path(dir), render(inc, state).as_bytes())
}

/// Starts an incarnation of the vnode whose backend lives in `dir` (call
/// before opening the backend): the previous id after a clean shutdown,
/// else a new random one; records the vnode as `open`.
pub fn start(dir: &Path) -> std::io::Result<Incarnation> {
    let inc = next(dir)?;
    mark_open(dir, inc)?;
    Ok(inc)
}

/// The incarnation the vnode of `dir` starts with next: the previous one
/// (id and actor form) after a clean shutdown, else a new random id with
/// the short actor ([`ActorForm::Short`]). Reads only, so a
/// vnode whose backend then refuses to open (a newer format) leaves its
/// status file as it was; [`mark_open`] it once the backend is open, before
/// its first write.
pub fn next(dir: &Path) -> std::io::Result<Incarnation> {
    let path = status_path(dir);
    let previous = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let parsed = parse(&text);
            if parsed.is_none() {
                tracing::warn!(path = %path.display(), "damaged vnode status file; starting a new vnode incarnation");
            }
            parsed
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    Ok(match previous {
        Some((inc, Shutdown::Clean)) if dir.is_dir() => inc,
        _ => {
            if previous.is_some() {
                tracing::info!(dir = %dir.display(), "vnode did not shut down cleanly; new incarnation id");
            }
            Incarnation {
                id: rand::random(),
                form: ActorForm::Short,
            }
        }
    })
}

/// Records the vnode of `dir` as running incarnation `inc`.
pub fn mark_open(dir: &Path, inc: Incarnation) -> std::io::Result<()> {
    write(dir, inc, Shutdown::Open)
}

/// Records that the vnode of `dir` (incarnation `inc`) shut down cleanly.
pub fn mark_clean(dir: &Path, inc: Incarnation) -> std::io::Result<()> {
    write(dir, inc, Shutdown::Clean)
}

/// Removes the status file before the vnode's data is deleted.
pub fn remove(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(status_path(dir)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_shutdown_keeps_the_id_anything_else_draws_a_new_one() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("7");
        std::fs::create_dir_all(&dir)?;
        assert_eq!(status_path(&dir), tmp.path().join("7.vnode"));
        let a = start(&dir)?;
        // Not marked clean (a crash): a new id.
        let b = start(&dir)?;
        assert_ne!(a, b);
        mark_clean(&dir, b)?;
        assert_eq!(start(&dir)?, b);
        // Clean, but the data directory is gone: a new id.
        let c = start(&dir)?;
        mark_clean(&dir, c)?;
        std::fs::remove_dir_all(&dir)?;
        assert_ne!(start(&dir)?, c);
        Ok(())
    }

    #[test]
    fn a_flipped_byte_is_detected() {
        for form in [ActorForm::Named, ActorForm::Short] {
            let inc = Incarnation { id: 0xabcdef, form };
            let text = render(inc, Shutdown::Clean);
            assert_eq!(parse(&text), Some((inc, Shutdown::Clean)));
            let bytes = text.as_bytes();
            for i in 0..bytes.len() - 1 {
                let mut b = bytes.to_vec();
                b[i] ^= 0x01;
                if let Ok(t) = String::from_utf8(b) {
                    assert_eq!(parse(&t), None, "flip at {i} undetected");
                }
            }
        }
        assert_eq!(parse(""), None);
    }

    #[test]
    fn an_incarnation_of_an_older_build_keeps_its_named_actor() -> std::io::Result<()> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("3");
        std::fs::create_dir_all(&dir)?;
        // The file as builds before 2026-12-07 wrote it (version 1).
        let body = "basalt-vnode 1 0000000000abcdef clean";
        let text = format!("{body} {:08x}\n", crc32c::crc32c(body.as_bytes()));
        std::fs::write(status_path(&dir), &text)?;
        let kept = start(&dir)?;
        assert_eq!(
            kept,
            Incarnation {
                id: 0xabcdef,
                form: ActorForm::Named
            }
        );
        mark_clean(&dir, kept)?;
        assert_eq!(std::fs::read_to_string(status_path(&dir))?, text);
        // Kept again after the clean stop; then an unclean one (the file
        // still says `open`): the new incarnation takes the short actor.
        assert_eq!(start(&dir)?, kept);
        let new = start(&dir)?;
        assert_eq!(new.form, ActorForm::Short);
        assert_ne!(new.id, kept.id);
        // A version this build does not know: a new incarnation.
        let body = "basalt-vnode 3 0000000000abcdef clean";
        let text = format!("{body} {:08x}\n", crc32c::crc32c(body.as_bytes()));
        assert_eq!(parse(&text), None);
        Ok(())
    }
}
