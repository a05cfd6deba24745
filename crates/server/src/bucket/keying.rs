//! How a typed bucket is keyed in the backends: the *storage bucket*
//! `00 'b' 't' 00 | type_len:u16 | type | bucket` for a bucket of a type
//! other than `default`, the bucket's own name for the default type
//! (`docs/formats.md` "Storage bucket of a typed bucket"). Pure byte
//! functions, used by every layer that places a key (vnodes, router, the
//! request FSMs), so this file imports nothing of the crate.

/// The first bytes of every typed storage bucket.
pub const STORAGE_PREFIX: &[u8] = b"\0bt\0";

/// The backend bucket name of (type, bucket): `bucket` itself for the
/// default type (`None`), else `00 'b' 't' 00 | type_len:u16 | type | bucket`.
pub fn storage_bucket(btype: Option<&[u8]>, bucket: &[u8]) -> Vec<u8> {
    match btype {
        None => bucket.to_vec(),
        Some(t) => {
            let mut out = STORAGE_PREFIX.to_vec();
            out.extend_from_slice(&(t.len() as u16).to_be_bytes());
            out.extend_from_slice(t);
            out.extend_from_slice(bucket);
            out
        }
    }
}

/// The inverse of [`storage_bucket`]: (type, bucket); `None` = default type.
pub fn split_storage_bucket(sb: &[u8]) -> (Option<&[u8]>, &[u8]) {
    if let Some(rest) = sb.strip_prefix(STORAGE_PREFIX) {
        if let Some(len) = rest.get(..2) {
            let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
            if let (Some(t), Some(b)) = (rest.get(2..2 + len), rest.get(2 + len..)) {
                return (Some(t), b);
            }
        }
    }
    (None, sb)
}
