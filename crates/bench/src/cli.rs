//! The command line, as a library entry so that the `basalt` binary can
//! delegate `basalt bench ...` here:
//!
//! ```text
//! basalt-bench CONFIG... [-d RESULTS_DIR] [-n NAME] [-q] [--memory-limit SIZE]
//! basalt-bench compare DIR... [-o OUT_DIR]
//! basalt-bench report DIR
//! basalt-bench index DIR
//! ```
//!
//! `-d` is the parent of the run directory (default `tests`); the run goes
//! to `<RESULTS_DIR>/<NAME>` (NAME default: a `YYYYMMDD_HHMMSS` timestamp)
//! and `<RESULTS_DIR>/current` points at it, as basho_bench does.

use crate::compare;
use crate::run::{self, RunOptions};
use anyhow::{bail, Context};
use std::path::PathBuf;

/// Usage text.
pub const USAGE: &str = "usage:
  bench CONFIG... [-d RESULTS_DIR] [-n NAME] [-q] [--memory-limit SIZE]
                                                    run basho_bench config files (later files override);
                                                    --memory-limit 1.5G holds the process and its page
                                                    cache to SIZE in a memory cgroup (needs root)
  bench compare DIR... [-o OUT_DIR]                 compare runs (first = baseline): compare.md, .png, .html
  bench report DIR                                  (re)write report.md, report.html and summary.png of a results dir
  bench index DIR                                   write DIR/index.html over the runs and comparisons in DIR";

/// Runs the command; returns the process exit code.
pub fn run(args: &[String]) -> anyhow::Result<i32> {
    match args.first().map(String::as_str) {
        None | Some("-h") | Some("--help") | Some("help") => {
            println!("{USAGE}");
            Ok(if args.is_empty() { 2 } else { 0 })
        }
        Some("compare") => {
            let mut dirs = Vec::new();
            let mut out: Option<PathBuf> = None;
            let mut it = args[1..].iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "-o" | "--out" => out = Some(it.next().context("-o needs a directory")?.into()),
                    s if s.starts_with('-') => bail!("unknown option {s}\n{USAGE}"),
                    s => dirs.push(PathBuf::from(s)),
                }
            }
            if dirs.is_empty() {
                bail!("compare needs at least one results directory\n{USAGE}");
            }
            let out = out.unwrap_or_else(|| {
                let parent = dirs[0]
                    .parent()
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from("."));
                parent.join("compare")
            });
            let w = compare::compare(&dirs, &out)?;
            print!("{}", std::fs::read_to_string(&w.md).unwrap_or_default());
            println!(
                "wrote {}, {} and {}",
                w.md.display(),
                w.png.display(),
                w.html.display()
            );
            Ok(0)
        }
        Some("report") => {
            let dir = PathBuf::from(args.get(1).context("report needs a results directory")?);
            let (md, run) = crate::report::write_for_dir(&dir)?;
            let html = crate::htmlreport::write_report(&run, &Default::default())?;
            crate::chart::summary_png(&run, &dir.join("summary.png"))?;
            for p in &run.problems {
                eprintln!("left out: {p}");
            }
            println!("wrote {} and {}", md.display(), html.display());
            Ok(0)
        }
        Some("index") => {
            let dir = PathBuf::from(args.get(1).context("index needs a directory")?);
            let path = crate::htmlindex::write_index(&dir)?;
            println!("wrote {}", path.display());
            Ok(0)
        }
        Some(_) => {
            let mut files = Vec::new();
            let mut opts = RunOptions {
                results_parent: PathBuf::from("tests"),
                ..RunOptions::default()
            };
            let mut it = args.iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "-d" | "--results-dir" => {
                        opts.results_parent = it.next().context("-d needs a directory")?.into()
                    }
                    "-n" | "--bench-name" => {
                        opts.name = Some(it.next().context("-n needs a name")?.clone())
                    }
                    "-q" | "--quiet" => opts.quiet = true,
                    "--memory-limit" => {
                        let v = it
                            .next()
                            .context("--memory-limit needs a size, e.g. 1.5G")?;
                        opts.memory_limit = Some(crate::memlimit::parse_size(v)?);
                    }
                    s if s.starts_with("--memory-limit=") => {
                        opts.memory_limit =
                            Some(crate::memlimit::parse_size(&s["--memory-limit=".len()..])?);
                    }
                    s if s.starts_with('-') => bail!("unknown option {s}\n{USAGE}"),
                    s => files.push(PathBuf::from(s)),
                }
            }
            if files.is_empty() {
                bail!("no config file given\n{USAGE}");
            }
            let out = run::run_files(&files, &opts)?;
            if let Some(why) = &out.stopped {
                eprintln!("stopped early: {why}");
            }
            if let Some(d) = &out.replication {
                for l in d.lines() {
                    println!("{l}");
                }
            }
            println!(
                "{} ok, {} errors, avg {:.1} ops/s\nresults: {}\nreport:  {}",
                out.ok,
                out.errors,
                out.avg_tps,
                out.dir.display(),
                out.report.display()
            );
            Ok(out.exit_code)
        }
    }
}
