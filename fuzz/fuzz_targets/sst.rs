//! An SST file's pieces as `SstReader::open` and block reads decode them:
//! the footer (`Footer::decode`, checked against the file length), the index
//! and meta sections (`parse_index`, `parse_meta`, after `split_crc`) and a
//! data block as stored (`Block::from_stored`: CRC, codec byte and
//! decompression in format version 2, trailer, then every entry's key and
//! `LedgerValue`). The first byte picks the piece (its bit 2 the format
//! version of the index and the block); an odd second byte fixes the
//! piece's CRC so the fuzzer gets past it. Checks: a footer that decodes
//! re-encodes to the same fields; decoded sections lie within the file.
#![no_main]

use basalt_engine::fuzz_api as f;
use basalt_engine::ledger::sst::FOOTER_BYTES;
use basalt_fuzz::{split2, with_crc};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&piece, rest)) = data.split_first() else {
        return;
    };
    let version = if piece & 4 == 0 { 1 } else { 2 };
    match piece % 4 {
        0 => {
            // Footer: a file length (8 bytes) then the footer.
            let Some((len, footer)) = rest.split_first_chunk::<8>() else {
                return;
            };
            let mut footer = footer.to_vec();
            if footer.len() == FOOTER_BYTES && len[0] & 1 == 1 {
                let c = f::checksum(&footer[..FOOTER_BYTES - 4]);
                footer[FOOTER_BYTES - 4..].copy_from_slice(&c.to_le_bytes());
            }
            let file_len = u64::from_le_bytes(*len);
            if let Ok(enc) = f::sst_footer(&footer, file_len) {
                // The reserved bytes before the CRC are not read back (only
                // checksummed), so compare the fields and re-decode.
                assert_eq!(enc[..48], footer[..48], "footer fields do not re-encode");
                assert_eq!(f::sst_footer(&enc, file_len), Ok(enc.clone()));
            }
        }
        1 | 2 => {
            // Index section, then the meta section checked against it.
            let (index, meta) = split2(rest);
            let index = with_crc(index);
            let Ok(content) = f::sst_split_crc(&index) else {
                return;
            };
            let data_end = 1 << 20;
            let Ok(blocks) = f::sst_index(content, data_end, version) else {
                return;
            };
            for b in &blocks {
                assert!(
                    b.offset + u64::from(b.len) <= data_end,
                    "block beyond the data"
                );
            }
            let meta = with_crc(meta);
            if let Ok(content) = f::sst_split_crc(&meta) {
                let _ = f::sst_meta(content, &blocks, data_end + 4096);
            }
        }
        _ => {
            // A stored data block: (codec,) content, CRC.
            let _ = f::sst_block(with_crc(rest), version);
        }
    }
});
