//! `engine-bench`: measurements of the embedded Basalt engine, each set beside
//! the machine's own limit measured in the same run, so the ratios mean
//! something on a noisy virtual disk. Prints a Markdown report to stdout
//! (progress goes to stderr) and, with `--out FILE`, writes it there too.
//!
//! Build it with `--release`: a debug build says so in its report.

mod benches;
mod common;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use common::EngineOpts;
use std::path::PathBuf;

/// Benchmarks of the embedded Basalt engine.
#[derive(Debug, Parser)]
#[command(name = "engine-bench", version, about)]
struct Cli {
    /// Parent directory for the benchmark's files (default: target/enginebench-tmp).
    /// A fresh sub-directory is made in it and removed at the end unless --keep.
    #[arg(long, global = true, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Keep the benchmark's files.
    #[arg(long, global = true)]
    keep: bool,
    /// Also write the report to FILE (quick: default target/quick-report.md).
    #[arg(long, global = true, value_name = "FILE")]
    out: Option<PathBuf>,
    #[command(flatten)]
    engine: EngineOpts,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sequential write bandwidth of the disk vs unsynced puts of large values.
    SeqVsPut(benches::SeqVsPut),
    /// Synced puts from 1 writer vs 32 writers (group commit).
    SyncWriters(benches::SyncWriters),
    /// Random GET vs HEAD rates, cold (page cache dropped) and warm.
    GetVsHead(benches::GetVsHead),
    /// Write amplification of random overwrites, measured by /proc/self/io.
    WriteAmp(benches::WriteAmp),
    /// All four with their default sizes (about 1-2 minutes here), in one report.
    All,
    /// The ~30 s volume test: load, then 5 GET : 1 UPDATE from 4 threads.
    Quick(benches::Quick),
}

/// The process allocator: mimalloc, as the `basalt` binary (see there).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("engine-bench: error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    let ctx = benches::Ctx {
        dir: cli.dir.clone(),
        keep: cli.keep,
        engine: cli.engine.clone(),
    };
    let mut out = cli.out.clone();
    let report = match &cli.command {
        Command::SeqVsPut(a) => titled("seq-vs-put", &benches::seq_vs_put(&ctx, a)?),
        Command::SyncWriters(a) => titled("sync-writers", &benches::sync_writers(&ctx, a)?),
        Command::GetVsHead(a) => titled("get-vs-head", &benches::get_vs_head(&ctx, a)?),
        Command::WriteAmp(a) => titled("write-amp", &benches::write_amp(&ctx, a)?),
        Command::All => titled("all", &benches::all(&ctx)?),
        Command::Quick(a) => {
            out.get_or_insert_with(|| common::target_dir().join("quick-report.md"));
            titled("quick volume test", &benches::quick(&ctx, a)?)
        }
    };
    print!("{report}");
    if let Some(path) = out {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("create {}", parent.display()))?;
        }
        std::fs::write(&path, &report).with_context(|| format!("write {}", path.display()))?;
        eprintln!("engine-bench: report written to {}", path.display());
    }
    Ok(())
}

fn titled(name: &str, body: &str) -> String {
    format!(
        "{}\n{body}",
        common::header(&format!("Basalt engine-bench: {name}"))
    )
}
