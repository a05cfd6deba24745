//! basho_bench configuration: read one or more files of `{Key, Value}.`
//! terms (a later file overrides an earlier one), apply basho_bench's
//! defaults, and check every value.
//!
//! Keys and defaults follow `shared/reference/basho_bench.md` §1. Keys of
//! basho_bench that have no meaning here (`log_level`, `code_paths`, hooks,
//! ...) are accepted and ignored; any other unknown key gives a warning that
//! names it. Our own keys all start with `basalt_` (see [`BenchConfig`]).
//!
//! The files, each importing only those listed before it (and modules
//! outside `config`; [`crate::netcfg`] imports nothing of `config`):
//!
//! - `upstream`: basho_bench's drivers and keys that are not run here,
//!   with why ([`UPSTREAM_DRIVERS`], [`UPSTREAM_KEYS`]).
//! - `error`: [`ConfigError`].
//! - `raw`: [`RawConfig`], the merged `{Key, Value}` pairs of the files
//!   with where each came from, the keys known and ignored, and typed
//!   readers of one key (integers, booleans, sizes, percentages).
//! - `ops`: the operations ([`OpKind`], [`OpSpec`]) and drivers
//!   ([`DriverKind`]), and the reading of `operations`.
//! - `typed`: the checked configuration, [`BenchConfig`], and its value
//!   types ([`Mode`], [`RateMode`], [`RngSeed`]).
//! - `connect`: `pb_connect_options`, the `riakc_pb` driver's
//!   `riakc_pb_socket` options.
//! - `net`: the network drivers' options ([`crate::netcfg`]) read from a
//!   [`RawConfig`].
//! - `build`: [`RawConfig::build`], every key's default and check.
//! - `tests`: the unit tests.

mod build;
mod connect;
mod error;
mod net;
mod ops;
mod raw;
mod typed;
mod upstream;

#[cfg(test)]
mod tests;

pub use error::ConfigError;
pub use ops::{
    normalize_label, unsupported_op, valid_backends, DriverKind, OpKind, OpSpec, VALID_DRIVERS,
};
pub use raw::RawConfig;
pub use typed::{BenchConfig, Mode, RateMode, RngSeed};
pub use upstream::{upstream_key, UPSTREAM_DRIVERS, UPSTREAM_KEYS};
