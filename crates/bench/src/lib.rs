//! `basalt bench`: a basho_bench-compatible load generator.
//!
//! It reads basho_bench's Erlang-term config files ([`config`], [`term`])
//! with basho_bench's meaning and defaults, generates keys and values as
//! basho_bench does ([`keygen`], [`valgen`]), drives an embedded Basalt store
//! or nothing ([`driver`]), or a live node over Riak's PB or HTTP API
//! ([`netdriver`], [`netcfg`], [`pbconn`], [`riakpb`], [`httpdriver`]) from worker threads ([`worker`]), measures with
//! HdrHistograms ([`stats`], [`sysstats`]) and writes basho_bench's CSVs
//! ([`output`]) plus a report ([`report`]) and charts ([`chart`]), and
//! self-contained HTML pages of both ([`htmlreport`], [`htmlindex`],
//! [`html`]).
//! [`compare`] puts several runs side by side. [`cli::run`] is the command
//! line; see `docs/bench.md` and `examples/`.

pub mod activity;
pub mod chart;
pub mod cli;
pub mod compare;
pub mod config;
pub mod driver;
pub mod html;
pub mod htmlindex;
pub mod htmlreport;
pub mod httpdriver;
pub mod keygen;
pub mod memlimit;
pub mod netcfg;
pub mod netdriver;
mod outerr;
pub mod output;
pub mod pbconn;
pub mod progress;
pub mod report;
pub mod riakpb;
pub mod run;
pub mod stats;
pub mod sysstats;
pub mod term;
pub mod valgen;
pub mod waits;
pub mod worker;

pub use config::BenchConfig;
