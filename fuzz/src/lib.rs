//! Helpers shared by the fuzz targets: how a target splits its input into
//! several byte strings, and the checksum fix-up that lets the fuzzer reach
//! the code behind a CRC (a random mutation almost never keeps a CRC32C
//! right, so without it only the checksum test would ever be exercised).

/// The engine's CRC32C (the one every checksummed format uses).
pub fn crc(bytes: &[u8]) -> u32 {
    basalt_engine::fuzz_api::checksum(bytes)
}

/// The input's first byte is a mode; the rest is the payload. With an odd
/// mode the payload is given a correct trailing CRC32C (little-endian, as the
/// SST, manifest and tictac formats store it); with an even one it is used
/// as it is (so damaged checksums are fuzzed too).
pub fn with_crc(data: &[u8]) -> Vec<u8> {
    let Some((&mode, rest)) = data.split_first() else {
        return Vec::new();
    };
    let mut out = rest.to_vec();
    if mode & 1 == 1 {
        let c = crc(&out);
        out.extend_from_slice(&c.to_le_bytes());
    }
    out
}

/// Splits `data` into two parts at a position given by its first two bytes.
pub fn split2(data: &[u8]) -> (&[u8], &[u8]) {
    match data {
        [a, b, rest @ ..] => {
            let at = usize::from(u16::from_le_bytes([*a, *b])).min(rest.len());
            rest.split_at(at)
        }
        _ => (data, &[]),
    }
}

/// Frames `a` and `b` as the input [`split2`] splits back (for the seeds).
pub fn join2(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = (a.len().min(usize::from(u16::MAX)) as u16)
        .to_le_bytes()
        .to_vec();
    out.extend_from_slice(a);
    out.extend_from_slice(b);
    out
}
