//! Bitcask byte formats: data-file header, records, hint files. See the
//! parent module's docs for the grammar. Decoders never panic.

/// Data-file magic.
pub(crate) const DATA_MAGIC: [u8; 8] = *b"BSLTBCD1";
/// Hint-file magic.
pub(crate) const HINT_MAGIC: [u8; 8] = *b"BSLTBCH1";
/// Format version of both.
pub(crate) const VERSION: u32 = 1;
/// Data-file header size.
pub(crate) const HEADER_BYTES: u64 = 16;
/// Per-record magic ("BCR1" little-endian), for resynchronising scans.
pub(crate) const RECORD_MAGIC: u32 = u32::from_le_bytes(*b"BCR1");
/// Fixed part of a record: magic, crc, tstamp, expires, flags, 3 lengths.
pub(crate) const RECORD_FIXED: usize = 4 + 4 + 8 + 8 + 1 + 4 + 4 + 4;
/// Largest record a scan accepts (a bound against garbage lengths).
pub(crate) const RECORD_BYTES_MAX: usize = 1 << 31;

/// Record flag: a put.
pub(crate) const FLAG_PUT: u8 = 0;
/// Record flag: a tombstone.
pub(crate) const FLAG_TOMBSTONE: u8 = 1;

/// The data-file header.
pub(crate) fn header() -> [u8; 16] {
    let mut h = [0u8; 16];
    h[..8].copy_from_slice(&DATA_MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h
}

/// A decoded record (borrowing its buffer).
#[derive(Debug)]
pub(crate) struct Record<'a> {
    pub(crate) tstamp_us: u64,
    pub(crate) expires_at: u64,
    pub(crate) flags: u8,
    pub(crate) key: &'a [u8],
    pub(crate) meta: &'a [u8],
    pub(crate) value: &'a [u8],
}

/// Encodes one record.
pub(crate) fn encode_record(
    tstamp_us: u64,
    expires_at: u64,
    flags: u8,
    key: &[u8],
    meta: &[u8],
    value: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(RECORD_FIXED + key.len() + meta.len() + value.len());
    out.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&tstamp_us.to_le_bytes());
    out.extend_from_slice(&expires_at.to_le_bytes());
    out.push(flags);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&(meta.len() as u32).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(meta);
    out.extend_from_slice(value);
    let crc = crc32c::crc32c(out.get(8..).unwrap_or_default());
    if let Some(slot) = out.get_mut(4..8) {
        slot.copy_from_slice(&crc.to_le_bytes());
    }
    out
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The total length of the record starting at `b`, from its header alone
/// (`None` if the header is incomplete, has no magic, or is implausible).
pub(crate) fn record_len(b: &[u8]) -> Option<usize> {
    if u32_at(b, 0)? != RECORD_MAGIC {
        return None;
    }
    let total = RECORD_FIXED
        .checked_add(u32_at(b, 25)? as usize)?
        .checked_add(u32_at(b, 29)? as usize)?
        .checked_add(u32_at(b, 33)? as usize)?;
    (total <= RECORD_BYTES_MAX).then_some(total)
}

/// Decodes exactly one record filling `b`, checking its CRC.
pub(crate) fn decode_record(b: &[u8]) -> Result<Record<'_>, &'static str> {
    let total = record_len(b).ok_or("bad record header")?;
    if total != b.len() {
        return Err("record length mismatch");
    }
    let crc = u32_at(b, 4).ok_or("short record")?;
    if crc32c::crc32c(b.get(8..).unwrap_or_default()) != crc {
        return Err("record checksum mismatch");
    }
    let kl = u32_at(b, 25).ok_or("short record")? as usize;
    let ml = u32_at(b, 29).ok_or("short record")? as usize;
    let key = b
        .get(RECORD_FIXED..RECORD_FIXED + kl)
        .ok_or("short record")?;
    let meta = b
        .get(RECORD_FIXED + kl..RECORD_FIXED + kl + ml)
        .ok_or("short record")?;
    let value = b.get(RECORD_FIXED + kl + ml..).ok_or("short record")?;
    Ok(Record {
        tstamp_us: u64_at(b, 8).ok_or("short record")?,
        expires_at: u64_at(b, 16).ok_or("short record")?,
        flags: *b.get(24).ok_or("short record")?,
        key,
        meta,
        value,
    })
}

/// One hint entry: where a record lies and what the keydir needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HintEntry {
    pub(crate) offset: u64,
    pub(crate) len: u32,
    pub(crate) tstamp_us: u64,
    pub(crate) expires_at: u64,
    pub(crate) flags: u8,
    pub(crate) key: Vec<u8>,
}

/// Encodes a hint file.
pub(crate) fn encode_hint(entries: &[HintEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + entries.len() * 48);
    out.extend_from_slice(&HINT_MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        out.extend_from_slice(&e.offset.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
        out.extend_from_slice(&e.tstamp_us.to_le_bytes());
        out.extend_from_slice(&e.expires_at.to_le_bytes());
        out.push(e.flags);
        out.extend_from_slice(&(e.key.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.key);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a hint file; `None` if it is damaged in any way.
pub(crate) fn decode_hint(b: &[u8]) -> Option<Vec<HintEntry>> {
    let body_len = b.len().checked_sub(4)?;
    let body = b.get(..body_len)?;
    if crc32c::crc32c(body) != u32_at(b, body_len)? {
        return None;
    }
    if body.get(..8)? != HINT_MAGIC || u32_at(body, 8)? != VERSION {
        return None;
    }
    let count = u64_at(body, 12)?;
    let mut at = 20;
    let mut out = Vec::new();
    for _ in 0..count {
        let kl = u32_at(body, at + 29)? as usize;
        out.push(HintEntry {
            offset: u64_at(body, at)?,
            len: u32_at(body, at + 8)?,
            tstamp_us: u64_at(body, at + 12)?,
            expires_at: u64_at(body, at + 20)?,
            flags: *body.get(at + 28)?,
            key: body.get(at + 33..at + 33 + kl)?.to_vec(),
        });
        at += 33 + kl;
    }
    (at == body.len()).then_some(out)
}

/// Scans a whole data file in memory: every intact record as (offset,
/// record), and the number of damaged regions skipped (a scan
/// resynchronises on the record magic after damage). The reference the
/// windowed [`super::scanner::Scanner`] is tested against.
#[cfg(test)]
pub(crate) fn scan(b: &[u8]) -> (Vec<(u64, Record<'_>)>, u64) {
    let mut out = Vec::new();
    let mut damaged = 0u64;
    let mut in_damage = false;
    let mut at = HEADER_BYTES as usize;
    while at + RECORD_FIXED <= b.len() {
        let rest = b.get(at..).unwrap_or_default();
        let ok = record_len(rest)
            .and_then(|n| rest.get(..n))
            .and_then(|r| decode_record(r).ok());
        match ok {
            Some(rec) => {
                let n = RECORD_FIXED + rec.key.len() + rec.meta.len() + rec.value.len();
                out.push((at as u64, rec));
                at += n;
                in_damage = false;
            }
            None => {
                if !in_damage {
                    damaged += 1;
                    in_damage = true;
                }
                // Resynchronise: the next occurrence of the record magic.
                let magic = RECORD_MAGIC.to_le_bytes();
                match rest
                    .get(1..)
                    .unwrap_or_default()
                    .windows(4)
                    .position(|w| w == magic)
                {
                    Some(p) => at += 1 + p,
                    None => break,
                }
            }
        }
    }
    if at < b.len() && !in_damage {
        // A torn tail: too short to be a record.
        damaged += 1;
    }
    (out, damaged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip_and_every_flip_detected() {
        let r = encode_record(7, 9, FLAG_PUT, b"k", b"m", b"value");
        let d = decode_record(&r).unwrap();
        assert_eq!(
            (d.tstamp_us, d.expires_at, d.key, d.meta, d.value),
            (7, 9, &b"k"[..], &b"m"[..], &b"value"[..])
        );
        for i in 0..r.len() {
            let mut bad = r.clone();
            bad[i] ^= 0x40;
            assert!(decode_record(&bad).is_err(), "flip at {i} undetected");
        }
    }

    #[test]
    fn hint_round_trip_and_damage_detected() {
        let e = vec![HintEntry {
            offset: 16,
            len: 50,
            tstamp_us: 1,
            expires_at: 0,
            flags: 0,
            key: b"abc".to_vec(),
        }];
        let h = encode_hint(&e);
        assert_eq!(decode_hint(&h).unwrap(), e);
        for i in 0..h.len() {
            let mut bad = h.clone();
            bad[i] ^= 1;
            assert!(decode_hint(&bad).is_none());
        }
    }

    #[test]
    fn scan_skips_damage_and_finds_later_records() {
        let mut f = header().to_vec();
        for i in 0..5u8 {
            f.extend(encode_record(i as u64, 0, FLAG_PUT, &[i], b"", &[i; 30]));
        }
        let rec_len = RECORD_FIXED + 1 + 30;
        f[16 + rec_len * 2 + 40] ^= 0xFF; // damage record 2's value
        let (recs, damaged) = scan(&f);
        assert_eq!(damaged, 1);
        let keys: Vec<u8> = recs.iter().map(|(_, r)| r.key[0]).collect();
        assert_eq!(keys, vec![0, 1, 3, 4]);
        let (recs, _) = scan(&f[..f.len() - 3]);
        assert_eq!(recs.len(), 3, "torn tail dropped");
    }
}
