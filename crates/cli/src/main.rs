//! `basalt`: the command-line tool of the Basalt key/value store.
//!
//! `basalt kv ...` runs one key/value command on an embedded store (the data
//! directory is opened, used and closed by this process); `basalt dump FILE`
//! prints and verifies one of the store's files. `basalt bench CONFIG...`
//! runs basho_bench config files and `basalt bench compare DIR...` compares
//! runs (both delegated to the `basalt-bench` library). Every error is one line on
//! stderr (`basalt: error: ...`); see [`EXIT_CODES`] for what the process
//! returns. `basalt --version` names the version and the commit built
//! (`build.rs`). Logs go to stderr, as text or JSON lines (`log_format` in
//! a node's config).

mod aae_fold;
mod admin;
mod admin_backup;
mod admin_btypes;
mod admin_client;
mod backup_file;
mod certs;
mod diag;
mod dump;
mod generate;
mod kv;
mod kv_common;
mod kv_features;
mod migrate;
mod ping;
mod start;
mod wait;

use basalt_server::config::LogFormat;
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::process::ExitCode;

/// The exit codes, shown by `--help`.
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  not found (kv get / kv head); `admin`: the node refused the request,
     `wait-for-service --timeout` gave up, `ringready` is FALSE or
     `diag` could not collect everything; `ping`: no answer
  2  error: bad arguments or input, the store could not be opened or used
     (locked, missing or damaged manifest, wrong store kind, I/O error),
     or a file `dump` cannot read or recognise
  3  `dump` read the file but found damage (the damaged parts are printed)
141  the reader of the output closed it early (as SIGPIPE)";

/// The version `--version` prints: the package version and the commit
/// built (short hash, "-dirty" when the tree had changes; "unknown"
/// without git, as from a source tarball).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("BASALT_COMMIT"),
    ")"
);

/// Basalt's command-line tool.
#[derive(Debug, Parser)]
#[command(name = "basalt", version = VERSION, about, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Key/value commands on an embedded store in a data directory.
    #[command(after_help = EXIT_CODES)]
    Kv(kv::KvArgs),
    /// Print and verify a store file (journal data/index/manifest, ledger
    /// MANIFEST or SST), recognised by its magic bytes.
    #[command(after_help = dump::AFTER_HELP)]
    Dump(dump::DumpArgs),
    /// basho_bench-compatible load generator: `basalt bench CONFIG...
    /// [-d RESULTS_DIR] [-n NAME] [-q]`, `basalt bench compare DIR... [-o OUT]`,
    /// `basalt bench report DIR`. Exit 1 when `shutdown_on_error` stopped a run.
    #[command(disable_help_flag = true)]
    Bench(BenchArgs),
    /// Run a node: Riak's PB API over vnodes (`--print-default-config` for
    /// the config file). Stops gracefully on SIGTERM / SIGINT.
    Start(start::StartArgs),
    /// Administer a running node over its cluster port, as `riak admin`
    /// (`basalt admin [--node ADDR] [--json] COMMAND`: status,
    /// member-status, transfers, vnode-status, cluster, bucket-type,
    /// security, aae, repl, diag DIR, ...; exit 1 when the node refuses,
    /// 2 on bad arguments or JSON).
    Admin(admin::AdminArgs),
    /// Is the node up? `pong` and exit 0 when it answers a ping on its PB
    /// port (--pb, default 127.0.0.1:8087) and/or cluster port (--node),
    /// as `riak ping`; else why not, and exit 1.
    Ping(ping::PingArgs),
    /// Certificates for a test or small cluster: `basalt certs ca --out
    /// DIR`, `basalt certs node --ca DIR --name N`, `basalt certs client
    /// --ca DIR --user U` (PEM files; existing files are not overwritten).
    Certs(certs::CertsArgs),
    /// Copy a Riak cluster's buckets into a Basalt node over Riak's PB API
    /// (clocks, siblings, metadata, 2i, data types), resumable from a
    /// checkpoint, paced; then keep it in step with `--sync` until
    /// cut-over (docs/operations.md "Migrating from Riak").
    Migrate(migrate::MigrateArgs),
    /// Files a package ships, from this binary: shell completions, man
    /// pages, the packaged config (`scripts/package-deb.sh`).
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
}

/// Arguments of `basalt bench`, passed as they are to `basalt_bench::cli::run`.
#[derive(Debug, clap::Args)]
struct BenchArgs {
    /// Config files (later ones override earlier ones), or `compare DIR...`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

/// How a command that did not fail ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Done,
    /// Exit 1: the object asked for does not exist.
    NotFound,
    /// Exit 3: `dump` found damage.
    Damaged,
    /// Exit with this code (`bench`).
    Code(u8),
}

/// The process allocator: mimalloc, not glibc's. A node or a bench moves
/// values of kilobytes through many threads (the request's buffer, the
/// record read, the copy handed back); under glibc `malloc` those sizes
/// cost ~12 % of the CPU of a long 8 KB run (profile in
/// `docs/benchmarks/2026-11-27-0844-mimalloc-vs-glibc.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Turns transparent huge pages off for this process. mimalloc commits its
/// arena eagerly and asks the kernel for huge pages there, so on a kernel in
/// THP `madvise` mode every thread's first small allocation faults a whole
/// 2 MiB page: an idle node of 64 vnodes (6 threads each) was 113 MiB
/// resident, 84 MiB of it huge pages; without them 47 MiB
/// (`docs/benchmarks/2026-12-02-1930-node-memory.md`). A refusal (an old
/// kernel, a seccomp filter) is only logged: it costs memory, not data.
fn no_huge_pages() {
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        eprintln!("basalt: note: could not turn transparent huge pages off ({e}); memory use may be higher");
    }
}

fn main() -> ExitCode {
    no_huge_pages();
    quiet_on_closed_stdout();
    let cli = Cli::parse();
    // A node sets up logging once its config is read (`log_format`).
    if !matches!(cli.command, Command::Start(_)) {
        init_logging(LogFormat::Text);
    }
    let result = match cli.command {
        Command::Kv(args) => kv::run(args),
        Command::Dump(args) => dump::run(&args),
        Command::Bench(args) => basalt_bench::cli::run(&args.args)
            .map(|code| Outcome::Code(u8::try_from(code).unwrap_or(2))),
        Command::Start(args) => start::run(args),
        Command::Admin(args) => admin::run(args),
        Command::Ping(args) => ping::run(&args),
        Command::Certs(args) => certs::run(args),
        Command::Migrate(args) => migrate::run(args),
        Command::Generate(args) => generate::run(args),
    };
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::NotFound) => ExitCode::from(1),
        Ok(Outcome::Damaged) => ExitCode::from(3),
        Ok(Outcome::Code(c)) => ExitCode::from(c),
        Err(e) => {
            eprintln!("basalt: error: {}", one_line(&e));
            ExitCode::from(2)
        }
    }
}

/// A reader that closed the pipe early (`basalt admin ring-status | grep
/// -q x`) ends the process quietly with status 141, as SIGPIPE does for
/// other tools, instead of a panic message: Rust ignores SIGPIPE, so
/// `println!` panics on a closed stdout.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

/// Logs go to stderr, as readable lines or one JSON object per line; the
/// default level is `warn`, `RUST_LOG` overrides it.
pub(crate) fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

/// The error and its causes on one line, leaving out a cause whose text the
/// line already holds (engine I/O errors print their source themselves).
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line.replace('\n', " ")
}
