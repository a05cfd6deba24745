//! Entry points for the fuzz targets in `fuzz/` (not part of the engine's
//! API, hidden from the docs): the private decoders of the SST file and of
//! 2i continuations, called exactly as the engine calls them. Nothing here
//! changes behaviour; it only makes the decoders reachable from outside the
//! crate so `cargo fuzz` can feed them arbitrary bytes.

use crate::codec::{crc, Reader};
use crate::entry::LedgerValue;
use crate::ledger::sst::{self, BlockHandle, SstSummary};

/// CRC32C as the SST, tictac and manifest formats use it (the targets fix up
/// checksums so the fuzzer gets past them).
pub fn checksum(bytes: &[u8]) -> u32 {
    crc(bytes)
}

/// Decodes an SST footer of a file of `file_len` bytes; on success returns
/// the footer re-encoded (which must equal the input).
pub fn sst_footer(bytes: &[u8], file_len: u64) -> Result<Vec<u8>, String> {
    sst::Footer::decode(bytes, file_len).map(|f| f.encode())
}

/// Checks a section's trailing CRC (as `SstReader::open` does) and returns
/// the content.
pub fn sst_split_crc(raw: &[u8]) -> Result<&[u8], String> {
    sst::split_crc(raw)
}

/// Parses an SST index block's content (CRC already stripped) of a file of
/// format `version`.
pub fn sst_index(bytes: &[u8], data_end: u64, version: u32) -> Result<Vec<BlockHandle>, String> {
    sst::parse_index(bytes, data_end, version)
}

/// Parses an SST meta block's content against `blocks`.
pub fn sst_meta(bytes: &[u8], blocks: &[BlockHandle], file_len: u64) -> Result<SstSummary, String> {
    sst::parse_meta(bytes, blocks, file_len)
}

/// Checks a stored data block of a file of format `version` (CRC included;
/// in version 2 the codec byte and possibly compressed content) and decodes
/// every entry in it the way the reader does (raw key + value, value
/// filling its slot exactly).
pub fn sst_block(raw: Vec<u8>, version: u32) -> Result<Vec<(Vec<u8>, LedgerValue)>, String> {
    let block = sst::Block::from_stored(raw, version)?;
    let mut r = Reader::new(block.entries());
    let mut out = Vec::new();
    while !r.is_empty() {
        let (k, v) = sst::read_entry(&mut r).map_err(|e| e.0)?;
        let v = sst::decode_value(v).map_err(|e| e.0)?;
        out.push((k.to_vec(), v));
    }
    Ok(out)
}

/// Decodes a 2i continuation for the query with tag `tag`.
pub fn index_continuation(c: &str, tag: u32) -> crate::Result<(Vec<u8>, Vec<u8>)> {
    crate::index::decode_continuation(c, tag)
}

/// Encodes a 2i continuation (the inverse of [`index_continuation`]).
pub fn index_encode_continuation(tag: u32, term: &[u8], key: &[u8]) -> String {
    crate::index::encode_continuation(tag, term, key)
}
