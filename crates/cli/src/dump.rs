//! `basalt dump FILE`: recognise a store file by its magic bytes and hand it
//! to the engine's dump for that kind, which prints a summary and the records
//! and verifies every checksum.

use crate::Outcome;
use anyhow::{bail, Context, Result};
use basalt_engine::ledger::{manifest, sst};
use basalt_engine::{journal, Error};
use clap::Args;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Shown after `basalt dump --help`.
pub const AFTER_HELP: &str = "\
Recognised files (by magic bytes, not by name):
  journal data file  (NNNNNNNN.jnl, starts with BSLTJNL1)
  journal index file (NNNNNNNN.jix, starts with BSLTJIX1)
  journal manifest   (journal/MANIFEST, starts with BSLTJMF1)
  ledger manifest    (ledger/MANIFEST, starts with BSLTLMF1)
  SST file           (NNNNNNNN.sst, ends with a footer holding BSLTSST1)
A file whose magic bytes are damaged is read as the kind its name suggests.

Exit codes:
  0  the file was read and every checksum matched
  2  the file cannot be read, or it is not a Basalt store file
  3  the file was read but damage was found: each damaged record, block or
     structure is printed on a line containing DAMAGED, and a summary line
     goes to stderr";

/// Arguments of `basalt dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    /// The file to read.
    file: PathBuf,
    /// Print the summary and any damage only, not every record.
    #[arg(long)]
    summary_only: bool,
}

/// The kinds of file `dump` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Journal data file, index file or journal manifest.
    Journal,
    /// The ledger manifest.
    LedgerManifest,
    /// An SST file of the ledger.
    Sst,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Journal => "journal",
            Kind::LedgerManifest => "ledger manifest",
            Kind::Sst => "SST",
        }
    }
}

/// Recognises `path` by its magic bytes.
fn detect(path: &Path) -> Result<Option<Kind>> {
    let mut file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut head = Vec::with_capacity(8);
    (&mut file)
        .take(8)
        .read_to_end(&mut head)
        .with_context(|| format!("read {}", path.display()))?;
    if journal::journal_file_kind(&head).is_some() {
        return Ok(Some(Kind::Journal));
    }
    if head.as_slice() == manifest::MAGIC.as_slice() {
        return Ok(Some(Kind::LedgerManifest));
    }
    if sst::is_sst_file(path)? {
        return Ok(Some(Kind::Sst));
    }
    Ok(None)
}

/// The kind a file's name (and its directory's) suggests.
fn guess_by_name(path: &Path) -> Option<Kind> {
    match path.extension().and_then(|e| e.to_str()) {
        Some("sst") => return Some(Kind::Sst),
        Some("jnl" | "jix") => return Some(Kind::Journal),
        _ => {}
    }
    if path.file_name()? != "MANIFEST" {
        return None;
    }
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| std::env::current_dir().ok(), |p| p.canonicalize().ok())?;
    match parent.file_name()?.to_str()? {
        "ledger" => Some(Kind::LedgerManifest),
        "journal" => Some(Kind::Journal),
        _ => None,
    }
}

/// Runs `basalt dump`.
pub fn run(args: &DumpArgs) -> Result<Outcome> {
    let path = args.file.as_path();
    let kind = match detect(path)? {
        Some(kind) => kind,
        None => match guess_by_name(path) {
            Some(kind) => {
                eprintln!(
                    "basalt: warning: {} has no recognisable magic bytes; reading it as a {} file because of its name",
                    path.display(),
                    kind.name()
                );
                kind
            }
            None => bail!(
                "{}: not a Basalt store file (no known magic bytes)",
                path.display()
            ),
        },
    };
    let show_records = !args.summary_only;
    let mut out = BufWriter::new(std::io::stdout().lock());
    // The number of damaged regions / blocks the dump reported.
    let result: basalt_engine::Result<u64> = match kind {
        Kind::Journal => journal::dump(path, &mut out, show_records).map(|r| r.corrupt_regions),
        Kind::LedgerManifest => manifest::dump(path, &mut out).map(|()| 0),
        Kind::Sst => sst::dump(path, &mut out, show_records)
            .map(|r| r.verify.damaged_blocks + u64::from(r.verify.summary_mismatch.is_some())),
    };
    let outcome = match result {
        Ok(0) => Outcome::Done,
        Ok(damaged) => {
            eprintln!(
                "basalt: {}: DAMAGED: {damaged} damaged part(s) found (see the DAMAGED lines above)",
                path.display()
            );
            Outcome::Damaged
        }
        Err(e @ (Error::Corrupt { .. } | Error::Manifest { .. })) => {
            writeln!(out, "DAMAGED: {e}").context("write to stdout")?;
            eprintln!(
                "basalt: {}: DAMAGED: the {} file cannot be read: {e}",
                path.display(),
                kind.name()
            );
            Outcome::Damaged
        }
        Err(e) => return Err(e.into()),
    };
    out.flush().context("write to stdout")?;
    Ok(outcome)
}
