//! The queue's record format: a record per entry (magic, body length,
//! CRC32C over both, the body), the file header, and the reader that walks
//! a file's records, skipping and counting damaged ones and resynchronising
//! at the next record magic. Layout: `docs/formats.md`, "Replication queue
//! files".

use super::*;

// Records.

/// The body length of `e`'s record.
pub(super) fn body_len(e: &Entry) -> u64 {
    let payload = match &e.payload {
        Payload::Object { meta, value } => 8 + meta.len() + value.len(),
        Payload::Ref { clock } | Payload::Reap { clock } => 4 + clock.len(),
    };
    (4 + e.bucket.len() + 4 + e.key.len() + 1 + payload) as u64
}

pub(super) fn record_crc(len: u32, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), body)
}

pub(super) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// The record of `e` (header and body), or None if it is too large.
pub(super) fn encode_record(e: &Entry) -> Option<Vec<u8>> {
    let len = u32::try_from(body_len(e))
        .ok()
        .filter(|&l| l <= MAX_RECORD_BYTES)?;
    let mut out = Vec::with_capacity(RECORD_HEADER_BYTES + len as usize);
    out.extend_from_slice(&RECORD_MAGIC);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    put_bytes(&mut out, &e.bucket);
    put_bytes(&mut out, &e.key);
    match &e.payload {
        Payload::Object { meta, value } => {
            out.push(1);
            put_bytes(&mut out, meta);
            put_bytes(&mut out, value);
        }
        Payload::Ref { clock } => {
            out.push(2);
            put_bytes(&mut out, clock);
        }
        Payload::Reap { clock } => {
            out.push(3);
            put_bytes(&mut out, clock);
        }
    }
    debug_assert_eq!(out.len(), RECORD_HEADER_BYTES + len as usize);
    let crc = record_crc(len, out.get(RECORD_HEADER_BYTES..)?);
    out.get_mut(8..12)?.copy_from_slice(&crc.to_le_bytes());
    Some(out)
}

/// Bounds-checked reading of a byte string.
pub(super) struct Cursor<'a> {
    pub(super) rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(super) fn u8(&mut self) -> Option<u8> {
        let (&byte, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(byte)
    }

    pub(super) fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.rest.split_first_chunk::<N>()?;
        self.rest = rest;
        Some(*head)
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    pub(super) fn bytes(&mut self) -> Option<Vec<u8>> {
        let len = self.u32()? as usize;
        let bytes = self.rest.get(..len)?;
        self.rest = self.rest.get(len..)?;
        Some(bytes.to_vec())
    }
}

/// The entry of a record body; None unless the body is exactly one entry.
pub(super) fn decode_body(body: &[u8]) -> Option<Entry> {
    let mut c = Cursor { rest: body };
    let bucket = c.bytes()?;
    let key = c.bytes()?;
    let payload = match c.u8()? {
        1 => Payload::Object {
            meta: c.bytes()?,
            value: c.bytes()?,
        },
        2 => Payload::Ref { clock: c.bytes()? },
        3 => Payload::Reap { clock: c.bytes()? },
        _ => return None,
    };
    c.rest.is_empty().then_some(Entry {
        bucket,
        key,
        payload,
    })
}

pub(super) fn file_header(p: Priority) -> [u8; FILE_HEADER_BYTES] {
    let mut header = [0; FILE_HEADER_BYTES];
    let version = FORMAT_VERSION.to_le_bytes();
    let priority = [p as u8];
    let fields = FILE_MAGIC.iter().chain(&version).chain(&priority);
    for (slot, byte) in header.iter_mut().zip(fields) {
        *slot = *byte;
    }
    header
}

/// Reads until `buf` is full or the end of the input; returns bytes read.
pub(super) fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        match input.read(rest) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

// Reading a queue file.

/// What the next read of a file found.
#[derive(Debug)]
pub(super) enum Next {
    Entry(Entry),
    /// The end, at a record boundary.
    End,
    /// A damaged region, skipped up to the next record magic.
    Damaged,
    /// A damaged region up to the end of the file.
    DamagedToEnd,
}

/// What one attempt at the current position found.
pub(super) enum Parsed {
    Record(Entry, u64),
    Eof,
    Bad,
}

/// Sequential reader of one queue file; `pos` is the next record's offset.
#[derive(Debug)]
pub(super) struct FileReader {
    pub(super) input: BufReader<File>,
    pub(super) pos: u64,
}

impl FileReader {
    /// Opens `path` at `pos`; None if the file does not start with the
    /// header of a queue file of priority `p`.
    pub(super) fn open(path: &Path, p: Priority, pos: u64) -> io::Result<Option<FileReader>> {
        let mut input = BufReader::with_capacity(READ_BUFFER_BYTES, File::open(path)?);
        let mut header = [0; FILE_HEADER_BYTES];
        let got = read_full(&mut input, &mut header)?;
        if got < FILE_HEADER_BYTES || header != file_header(p) {
            return Ok(None);
        }
        let pos = pos.max(FILE_HEADER_BYTES as u64);
        input.seek(SeekFrom::Start(pos))?;
        Ok(Some(FileReader { input, pos }))
    }

    pub(super) fn next(&mut self) -> io::Result<Next> {
        match self.parse()? {
            Parsed::Record(entry, len) => {
                self.pos += len;
                Ok(Next::Entry(entry))
            }
            Parsed::Eof => Ok(Next::End),
            Parsed::Bad => self.resync(),
        }
    }

    /// One record at `pos` (the input is there).
    pub(super) fn parse(&mut self) -> io::Result<Parsed> {
        let mut head = [0; RECORD_HEADER_BYTES];
        let got = read_full(&mut self.input, &mut head)?;
        if got == 0 {
            return Ok(Parsed::Eof);
        }
        let mut c = Cursor { rest: &head };
        let (Some(magic), Some(len), Some(crc)) = (c.array::<4>(), c.u32(), c.u32()) else {
            return Ok(Parsed::Bad);
        };
        if got < RECORD_HEADER_BYTES || magic != RECORD_MAGIC || len > MAX_RECORD_BYTES {
            return Ok(Parsed::Bad);
        }
        // Grown as bytes arrive: a damaged length allocates no more than the file holds.
        let mut body = Vec::with_capacity((len as usize).min(READ_BUFFER_BYTES));
        (&mut self.input)
            .take(u64::from(len))
            .read_to_end(&mut body)?;
        if body.len() != len as usize || record_crc(len, &body) != crc {
            return Ok(Parsed::Bad);
        }
        let total = (RECORD_HEADER_BYTES as u64) + u64::from(len);
        Ok(decode_body(&body).map_or(Parsed::Bad, |e| Parsed::Record(e, total)))
    }

    /// Skips the damaged record at `pos`: on to the next record magic after
    /// it, or to the end of the file.
    pub(super) fn resync(&mut self) -> io::Result<Next> {
        let from = self.pos + 1;
        self.input.seek(SeekFrom::Start(from))?;
        let mut window = [0; 4];
        let mut byte = [0; 1];
        let mut read = 0u64;
        loop {
            if read_full(&mut self.input, &mut byte)? == 0 {
                self.pos = from + read;
                return Ok(Next::DamagedToEnd);
            }
            read += 1;
            window.rotate_left(1);
            window[3] = byte[0];
            if read >= 4 && window == RECORD_MAGIC {
                self.pos = from + read - 4;
                self.input.seek(SeekFrom::Start(self.pos))?;
                return Ok(Next::Damaged);
            }
        }
    }
}

/// Scans a whole file: (valid records, damaged regions).
pub(super) fn scan_file(path: &Path, p: Priority) -> io::Result<(u64, u64)> {
    if fs::metadata(path)?.len() == 0 {
        return Ok((0, 0)); // created, crashed before its header was written
    }
    let Some(mut reader) = FileReader::open(path, p, 0)? else {
        return Ok((0, 1));
    };
    let (mut valid, mut damaged) = (0, 0);
    loop {
        match reader.next()? {
            Next::Entry(_) => valid += 1,
            Next::Damaged => damaged += 1,
            Next::DamagedToEnd => return Ok((valid, damaged + 1)),
            Next::End => return Ok((valid, damaged)),
        }
    }
}

// The disk part of one priority.
