//! Hard limits of the engine, in one place.
//!
//! Configurable limits have their defaults here; fixed limits are part of the
//! on-disk format and cannot change without a format version bump.

/// Largest object key (and largest bucket name), in bytes. Fixed.
pub const KEY_SIZE_BYTES_MAX: usize = 64 * 1024;

/// Default largest value accepted by `put`, in bytes (configurable).
pub const VALUE_SIZE_BYTES_MAX_DEFAULT: u64 = 50 * 1024 * 1024;

/// Default largest user metadata per object, in bytes (configurable).
pub const METADATA_SIZE_BYTES_MAX_DEFAULT: u64 = 1024 * 1024;

/// Absolute ceiling for a value: journal records use 32-bit lengths.
pub const VALUE_SIZE_BYTES_CEILING: u64 = 1 << 30;

/// Absolute ceiling for one journal record (header + key + metadata + value).
pub const JOURNAL_RECORD_BYTES_MAX: u64 = (1 << 31) - 1;

/// Largest SST block accepted when reading (guards against corrupt lengths).
pub const SST_BLOCK_BYTES_MAX: u64 = 64 * 1024 * 1024;

/// Most bytes an SST iterator (a merge, a fold, a range query) reads in one
/// I/O: the data blocks ahead of it that can hold keys of its range, up to
/// this much. SST handles have the kernel's read-ahead off, so GETs' block
/// reads read one block and scans read what this says. Fixed.
pub const SST_ITER_READ_BYTES: u64 = 256 * 1024;

/// The step a data file is shrunk by before its unlink
/// (`remover`: one large discard stalls reads on a file
/// system mounted with online discard). Fixed.
pub const REMOVE_STEP_BYTES: u64 = 8 * 1024 * 1024;

/// Replaced files that may wait for the remover (`remover`); past this a
/// removal runs on the thread that drops the file, unpaced. Fixed.
pub const REMOVE_QUEUE_FILES: usize = 1024;

/// Bytes of replaced files waiting for the remover past which it stops
/// pacing its steps, so that space is not held back for long when removal
/// falls behind. Fixed.
pub const REMOVE_HURRY_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Default largest number of index changes one put or delete may carry
/// (configurable: `Config::index_changes_max`).
pub const INDEX_CHANGES_MAX_DEFAULT: usize = 1024;

/// Default largest secondary-index term, in bytes, as given by the user
/// (configurable: `Config::index_term_bytes_max`).
pub const INDEX_TERM_BYTES_MAX_DEFAULT: usize = 4096;

/// Ceiling for `Config::index_term_bytes_max` (a term is one ledger key component).
pub const INDEX_TERM_BYTES_CEILING: usize = KEY_SIZE_BYTES_MAX;

/// Largest secondary-index field name, in bytes. Fixed.
pub const INDEX_FIELD_BYTES_MAX: usize = 255;

/// Most decimal digits of an `_int` index term (Riak's are integers of
/// any size; 600 digits keep the stored form under 255 magnitude bytes).
/// Fixed.
pub const INDEX_INT_DIGITS_MAX: usize = 600;

/// Largest `term_regex` pattern of an index query, in bytes. Fixed.
pub const INDEX_REGEX_BYTES_MAX: usize = 1024;

/// Largest compiled `term_regex` program, in bytes (guards memory). Fixed.
pub const INDEX_REGEX_COMPILED_BYTES_MAX: usize = 1 << 20;

/// Number of ledger levels, L0 .. L6. L6 is the basement.
pub const LEVELS: usize = 7;

/// Largest manifest file accepted when reading.
pub const MANIFEST_BYTES_MAX: u64 = 256 * 1024 * 1024;

const _: () = assert!(KEY_SIZE_BYTES_MAX < u32::MAX as usize);
const _: () = assert!(VALUE_SIZE_BYTES_MAX_DEFAULT <= VALUE_SIZE_BYTES_CEILING);
const _: () = assert!(VALUE_SIZE_BYTES_CEILING < JOURNAL_RECORD_BYTES_MAX);
const _: () = assert!(INDEX_TERM_BYTES_MAX_DEFAULT <= INDEX_TERM_BYTES_CEILING);

/// Largest ledger block cache a store accepts (`Config::block_cache_bytes`):
/// 64 GiB, so that a typo cannot reserve tables for a cache no machine holds.
pub const BLOCK_CACHE_BYTES_MAX: u64 = 64 << 30;

/// Largest value cache a store accepts (`Config::value_cache_bytes`), for
/// the same reason: 64 GiB.
pub const VALUE_CACHE_BYTES_MAX: u64 = 64 << 30;
