//! The queue's disk part: per priority, its files oldest first (spill files
//! appended through a write buffer, head files written at close), their
//! names and numbers, atomic writes, the clean marker (read positions at a
//! clean close) and the scan of every file after a crash.

use super::*;

/// One queue file (spill or head) of a priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct QueueFile {
    pub(super) no: u64,
    /// Offset of the next record to read.
    pub(super) read_pos: u64,
    /// Records not yet read.
    pub(super) remaining: u64,
    /// Scanned at open: its damage is already counted.
    pub(super) scanned: bool,
}

impl QueueFile {
    pub(super) fn unread(no: u64, remaining: u64, scanned: bool) -> QueueFile {
        QueueFile {
            no,
            read_pos: FILE_HEADER_BYTES as u64,
            remaining,
            scanned,
        }
    }
}

/// The file being appended to (always the priority's last file).
#[derive(Debug)]
pub(super) struct SpillWriter {
    pub(super) no: u64,
    pub(super) out: BufWriter<File>,
    pub(super) bytes: u64,
    pub(super) records: u64,
    /// Written since the last fsync.
    pub(super) dirty: bool,
}

/// The files of a priority, oldest (next to read) first.
#[derive(Debug)]
pub(super) struct Disk {
    pub(super) dir: PathBuf,
    pub(super) p: Priority,
    pub(super) files: VecDeque<QueueFile>,
    /// Sum of the files' `remaining`.
    pub(super) entries: u64,
    pub(super) writer: Option<SpillWriter>,
    /// Reader of the first file (its number).
    pub(super) reader: Option<(u64, FileReader)>,
    /// Files rolled since the last fsync.
    pub(super) unsynced: Vec<u64>,
    pub(super) read_errors: u32,
    /// Write-through: a file read to its end is deleted only once every
    /// entry read from it was acked (`pending` per file; `retired` = read
    /// to the end, waiting for those acks), so a crash finds it again.
    pub(super) keep_until_acked: bool,
    pub(super) pending: std::collections::BTreeMap<u64, u64>,
    pub(super) retired: std::collections::BTreeSet<u64>,
    /// A file was created since the directory was last synced.
    pub(super) created: bool,
}

pub(super) fn file_name(p: Priority, no: u64) -> String {
    format!("{}-{no:016x}{FILE_SUFFIX}", p as u8)
}

pub(super) fn parse_file_name(name: &str) -> Option<(Priority, u64)> {
    let (p, rest) = name.split_once('-')?;
    let no = rest.strip_suffix(FILE_SUFFIX)?;
    if p.len() != 1 || no.len() != 16 {
        return None;
    }
    let p = Priority::from_u8(p.parse().ok()?)?;
    Some((p, u64::from_str_radix(no, 16).ok()?))
}

pub(super) fn remove_logged(path: &Path) {
    if let Err(e) = fs::remove_file(path) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(path = %path.display(), error = %e, "replication queue: cannot delete");
        }
    }
}

/// No file number left (after 2^62 rolls or closes: not in practice).
pub(super) fn exhausted(dir: &Path) -> QueueError {
    io_err("number a file in", dir)(io::Error::other("file numbers exhausted"))
}

pub(super) fn sync_dir(dir: &Path) -> Result<(), QueueError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync", dir))
}

/// fsyncs a file by path (gone = nothing to do).
pub(super) fn sync_path(path: &Path) -> Result<(), QueueError> {
    match File::open(path) {
        Ok(f) => f.sync_data().map_err(io_err("sync", path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("sync", path)(e)),
    }
}

impl Disk {
    pub(super) fn new(dir: &Path, p: Priority, files: VecDeque<QueueFile>) -> Disk {
        let entries = files.iter().map(|f| f.remaining).sum();
        Disk {
            dir: dir.to_path_buf(),
            p,
            files,
            entries,
            writer: None,
            reader: None,
            unsynced: Vec::new(),
            read_errors: 0,
            keep_until_acked: false,
            pending: Default::default(),
            retired: Default::default(),
            created: false,
        }
    }

    /// Deletes file `no` now, or once the entries read from it are acked.
    pub(super) fn drop_file(&mut self, no: u64) {
        if self.keep_until_acked && self.pending.get(&no).is_some_and(|n| *n > 0) {
            self.retired.insert(no);
        } else {
            remove_logged(&self.path(no));
        }
    }

    /// An entry read from file `no` was acked (or dropped).
    pub(super) fn release(&mut self, no: u64) {
        let left = match self.pending.get_mut(&no) {
            Some(n) => {
                *n = n.saturating_sub(1);
                *n
            }
            None => return,
        };
        if left == 0 {
            self.pending.remove(&no);
            if self.retired.remove(&no) {
                remove_logged(&self.path(no));
            }
        }
    }

    /// Every entry read but not acked is persisted elsewhere (close) or
    /// dropped (clear): the retired files go.
    pub(super) fn forget_pending(&mut self) {
        self.pending.clear();
        for no in std::mem::take(&mut self.retired) {
            remove_logged(&self.path(no));
        }
    }

    pub(super) fn path(&self, no: u64) -> PathBuf {
        self.dir.join(file_name(self.p, no))
    }

    pub(super) fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Appends a record to the last file, rolling or starting one first.
    pub(super) fn append(&mut self, record: &[u8], roll_bytes: u64) -> Result<(), QueueError> {
        let len = record.len() as u64;
        let mut w = match self.writer.take() {
            Some(w) if w.records == 0 || w.bytes.saturating_add(len) <= roll_bytes => w,
            Some(full) => {
                self.seal(full)?;
                self.start_file()?
            }
            None => self.start_file()?,
        };
        let path = self.path(w.no);
        w.out.write_all(record).map_err(io_err("write", &path))?;
        w.bytes += len;
        w.records += 1;
        w.dirty = true;
        let last = self.files.back_mut();
        debug_assert_eq!(last.as_ref().map(|f| f.no), Some(w.no));
        if let Some(last) = last {
            last.remaining += 1;
            self.entries += 1;
        }
        self.writer = Some(w);
        Ok(())
    }

    /// Hands the writer's buffered records to the kernel (no fsync).
    pub(super) fn write_out(&mut self) -> Result<(), QueueError> {
        let Some(no) = self.writer.as_ref().map(|w| w.no) else {
            return Ok(());
        };
        let path = self.path(no);
        match self.writer.as_mut() {
            Some(w) => w.out.flush().map_err(io_err("write", &path)),
            None => Ok(()),
        }
    }

    /// Creates the next spill file after the last one.
    pub(super) fn start_file(&mut self) -> Result<SpillWriter, QueueError> {
        // After the last file, including files kept for unacked entries.
        let last = self
            .files
            .back()
            .map(|f| f.no)
            .into_iter()
            .chain(self.retired.iter().copied())
            .chain(self.pending.keys().copied())
            .max();
        let next = last.map_or(Some(FIRST_FILE_NO), |n| n.checked_add(1));
        let no = next.ok_or_else(|| exhausted(&self.dir))?;
        let path = self.path(no);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err("create", &path))?;
        let mut out = BufWriter::with_capacity(WRITE_BUFFER_BYTES, file);
        out.write_all(&file_header(self.p))
            .map_err(io_err("write", &path))?;
        self.files.push_back(QueueFile::unread(no, 0, false));
        self.created = true;
        Ok(SpillWriter {
            no,
            out,
            bytes: FILE_HEADER_BYTES as u64,
            records: 0,
            dirty: true,
        })
    }

    /// Ends appends to a file: its buffer to the OS, its fsync for later.
    pub(super) fn seal(&mut self, w: SpillWriter) -> Result<(), QueueError> {
        let path = self.path(w.no);
        w.out
            .into_inner()
            .map_err(|e| io_err("write", &path)(e.into_error()))?;
        if w.dirty {
            self.unsynced.push(w.no);
        }
        Ok(())
    }

    /// Writes the write buffer to the OS. A writer that fails is dropped
    /// (its buffered records show up as damage or missing when read).
    pub(super) fn write_buffer(&mut self) -> Result<(), QueueError> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        let no = w.no;
        if let Err(e) = w.out.flush() {
            self.writer = None;
            return Err(io_err("write", &self.path(no))(e));
        }
        Ok(())
    }

    /// The files to fsync: those rolled, and the writer's if written to,
    /// since the last call.
    pub(super) fn take_unsynced(&mut self) -> Vec<PathBuf> {
        let mut nos: Vec<u64> = self.unsynced.drain(..).collect();
        if let Some(w) = self.writer.as_mut() {
            if std::mem::take(&mut w.dirty) {
                nos.push(w.no);
            }
        }
        nos.into_iter().map(|no| self.path(no)).collect()
    }

    /// Next entry from the first file; None when the disk part is drained
    /// or caught up with the writer. Damage is skipped (and counted).
    pub(super) fn read_one(
        &mut self,
        corrupt: &mut u64,
    ) -> Result<Option<(Entry, u64)>, QueueError> {
        while let Some(front) = self.files.front().copied() {
            if self.writer.as_ref().is_some_and(|w| w.no == front.no) {
                self.write_buffer()?;
            }
            match self.read_front(front)? {
                Some(Next::Entry(entry)) => {
                    self.advance();
                    if self.keep_until_acked {
                        *self.pending.entry(front.no).or_default() += 1;
                    }
                    return Ok(Some((entry, front.no)));
                }
                Some(Next::Damaged) => {
                    self.damaged(front, corrupt);
                    self.advance_pos();
                }
                Some(Next::End) if self.writing(front.no) => return Ok(None),
                Some(Next::End) => self.finish_front(),
                Some(Next::DamagedToEnd) | None => {
                    self.damaged(front, corrupt);
                    self.finish_front();
                }
            }
        }
        Ok(None)
    }

    pub(super) fn writing(&self, no: u64) -> bool {
        self.writer.as_ref().is_some_and(|w| w.no == no)
    }

    /// The next record of the first file; None if its header is bad.
    pub(super) fn read_front(&mut self, front: QueueFile) -> Result<Option<Next>, QueueError> {
        let path = self.path(front.no);
        if self.reader.as_ref().is_none_or(|(no, _)| *no != front.no) {
            self.reader = None;
            match FileReader::open(&path, self.p, front.read_pos).map_err(io_err("open", &path))? {
                Some(reader) => self.reader = Some((front.no, reader)),
                None => return Ok(None),
            }
        }
        let Some((_, reader)) = self.reader.as_mut() else {
            return Ok(None);
        };
        reader.next().map(Some).map_err(io_err("read", &path))
    }

    /// One record of the first file was read.
    pub(super) fn advance(&mut self) {
        self.advance_pos();
        self.read_errors = 0;
        if let Some(front) = self.files.front_mut() {
            if front.remaining > 0 {
                front.remaining -= 1;
                self.entries -= 1;
            }
        }
    }

    pub(super) fn advance_pos(&mut self) {
        let pos = self.reader.as_ref().map(|(_, r)| r.pos);
        if let (Some(front), Some(pos)) = (self.files.front_mut(), pos) {
            debug_assert!(pos >= front.read_pos);
            front.read_pos = pos;
        }
    }

    pub(super) fn damaged(&self, front: QueueFile, corrupt: &mut u64) {
        if !front.scanned {
            *corrupt += 1;
            tracing::warn!(path = %self.path(front.no).display(), pos = front.read_pos,
                "replication queue: damaged record skipped");
        }
    }

    /// The first file is read through (or given up): forget and delete it.
    pub(super) fn finish_front(&mut self) {
        let Some(front) = self.files.pop_front() else {
            return;
        };
        self.entries -= front.remaining;
        if front.remaining > 0 {
            tracing::warn!(path = %self.path(front.no).display(), missing = front.remaining,
                "replication queue: records missing from a file");
        }
        if self.reader.as_ref().is_some_and(|(no, _)| *no == front.no) {
            self.reader = None;
        }
        if self.writing(front.no) {
            self.writer = None;
        }
        self.drop_file(front.no);
    }

    /// A read failed: retry at the next refill; after [`READ_ATTEMPTS`]
    /// in a row give the file up.
    pub(super) fn read_failed(&mut self, error: QueueError, corrupt: &mut u64) {
        tracing::warn!(%error, "replication queue: read failed");
        self.reader = None;
        self.read_errors += 1;
        if self.read_errors >= READ_ATTEMPTS {
            self.read_errors = 0;
            *corrupt += 1;
            self.finish_front();
        }
    }

    /// Deletes the files once nothing is left in them.
    pub(super) fn settle(&mut self) {
        if self.entries > 0 || self.files.is_empty() {
            return;
        }
        self.reader = None;
        self.writer = None;
        self.unsynced.clear();
        for f in std::mem::take(&mut self.files) {
            self.drop_file(f.no);
        }
    }

    /// Drops every record; returns how many there were.
    pub(super) fn clear(&mut self) -> Result<u64, QueueError> {
        let dropped = self.entries;
        self.reader = None;
        self.writer = None;
        self.unsynced.clear();
        self.entries = 0;
        let mut result = Ok(dropped);
        for f in std::mem::take(&mut self.files) {
            let path = self.path(f.no);
            if let Err(e) = fs::remove_file(&path) {
                if e.kind() != io::ErrorKind::NotFound && result.is_ok() {
                    result = Err(io_err("delete", &path)(e));
                }
            }
        }
        result
    }

    /// Before close: every append written and fsynced, files closed.
    pub(super) fn sync_for_close(&mut self) -> Result<(), QueueError> {
        self.reader = None;
        if let Some(w) = self.writer.take() {
            self.seal(w)?;
        }
        self.take_unsynced().iter().try_for_each(|p| sync_path(p))
    }

    /// Number of a new file in front of all others.
    pub(super) fn head_no(&self) -> Result<u64, QueueError> {
        // Before the first file, including files kept for unacked entries.
        let first = self
            .files
            .front()
            .map(|f| f.no)
            .into_iter()
            .chain(self.retired.iter().copied())
            .chain(self.pending.keys().copied())
            .min();
        let previous = first.map_or(Some(FIRST_FILE_NO), |n| n.checked_sub(1));
        previous.ok_or_else(|| exhausted(&self.dir))
    }
}

/// Writes a queue file atomically (the engine's atomic replace: temp file,
/// fsync, rename, fsync of the directory).
pub(super) fn write_file_atomic<'a>(
    path: &Path,
    p: Priority,
    entries: impl Iterator<Item = &'a Entry>,
) -> Result<(), QueueError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    basalt_engine::fsutil::write_atomic_with(path, &tmp, |out| {
        out.write_all(&file_header(p))?;
        for e in entries {
            let record = encode_record(e).ok_or_else(|| io::Error::other("entry too large"))?;
            out.write_all(&record)?;
        }
        Ok(())
    })
    .map_err(|e| match e {
        basalt_engine::Error::Io { op, path, source } => QueueError::Io { op, path, source },
        other => QueueError::Io {
            op: "write",
            path: tmp.clone(),
            source: io::Error::other(other.to_string()),
        },
    })
}

// Opening: the files present, the clean marker, the scan.

/// The queue files in `dir` per priority (index priority - 1), ascending;
/// leftover temp files are deleted, other files ignored.
pub(super) fn list_files(dir: &Path) -> Result<[Vec<u64>; 3], QueueError> {
    let mut found: [Vec<u64>; 3] = Default::default();
    for item in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let item = item.map_err(io_err("list", dir))?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(TMP_SUFFIX) {
            remove_logged(&item.path());
        } else if let Some((p, no)) = parse_file_name(name) {
            refuse_newer(&item.path())?;
            found[p.index()].push(no);
        }
    }
    for nos in &mut found {
        nos.sort_unstable();
    }
    Ok(found)
}

/// Fails with [`QueueError::Version`] if the queue file at `path` is of
/// another format version (a damaged or short header is the reader's to
/// skip, as before).
fn refuse_newer(path: &Path) -> Result<(), QueueError> {
    let mut header = [0; 12];
    let mut f = fs::File::open(path).map_err(io_err("open", path))?;
    let got = read_full(&mut f, &mut header).map_err(io_err("read", path))?;
    let (magic, version) = header.split_at(8);
    match <[u8; 4]>::try_from(version).map(u32::from_le_bytes) {
        Ok(found) if got == header.len() && magic == FILE_MAGIC && found != FORMAT_VERSION => {
            Err(QueueError::Version {
                path: path.to_path_buf(),
                found,
            })
        }
        _ => Ok(()),
    }
}

pub(super) fn encode_marker(lanes: &[Lane; 3]) -> Vec<u8> {
    let files: Vec<(Priority, &QueueFile)> = lanes
        .iter()
        .flat_map(|l| l.disk.files.iter().map(|f| (l.disk.p, f)))
        .collect();
    let mut out = Vec::with_capacity(16 + files.len() * MARKER_FILE_BYTES + 4);
    out.extend_from_slice(MARKER_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(files.len() as u32).to_le_bytes());
    for (p, f) in files {
        out.push(p as u8);
        out.extend_from_slice(&f.no.to_le_bytes());
        out.extend_from_slice(&f.read_pos.to_le_bytes());
        out.extend_from_slice(&f.remaining.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub(super) fn decode_marker(bytes: &[u8]) -> Option<Vec<(Priority, QueueFile)>> {
    let (body, crc) = bytes.split_last_chunk::<4>()?;
    if crc32c::crc32c(body) != u32::from_le_bytes(*crc) {
        return None;
    }
    let mut c = Cursor { rest: body };
    if c.array::<8>()? != *MARKER_MAGIC || c.u32()? != FORMAT_VERSION {
        return None;
    }
    let count = c.u32()? as usize;
    if c.rest.len() != count.checked_mul(MARKER_FILE_BYTES)? {
        return None;
    }
    let mut files = Vec::with_capacity(count);
    for _ in 0..count {
        let p = Priority::from_u8(c.u8()?)?;
        let (no, read_pos, remaining) = (c.u64()?, c.u64()?, c.u64()?);
        files.push((
            p,
            QueueFile {
                no,
                read_pos,
                remaining,
                scanned: false,
            },
        ));
    }
    Some(files)
}

/// Reads and deletes the clean marker (so a crash from now on is seen as
/// one); None if there is none or it is damaged.
pub(super) fn take_marker(dir: &Path) -> Result<Option<Vec<(Priority, QueueFile)>>, QueueError> {
    let path = dir.join(MARKER_NAME);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read", &path)(e)),
    };
    fs::remove_file(&path).map_err(io_err("delete", &path))?;
    sync_dir(dir)?;
    let files = decode_marker(&bytes);
    if files.is_none() {
        tracing::warn!(path = %path.display(), "replication queue: damaged clean marker ignored");
    }
    Ok(files)
}

/// The files as the marker describes them, if it names exactly the files
/// present with plausible read positions.
pub(super) fn marker_files(
    dir: &Path,
    marker: Vec<(Priority, QueueFile)>,
    found: &[Vec<u64>; 3],
) -> Option<[VecDeque<QueueFile>; 3]> {
    let mut files: [VecDeque<QueueFile>; 3] = Default::default();
    for (p, f) in marker {
        let len = fs::metadata(dir.join(file_name(p, f.no))).ok()?.len();
        if f.read_pos < FILE_HEADER_BYTES as u64 || f.read_pos > len {
            return None;
        }
        files[p.index()].push_back(f);
    }
    let matches = files
        .iter()
        .zip(found)
        .all(|(f, nos)| f.iter().map(|f| f.no).eq(nos.iter().copied()));
    matches.then_some(files)
}

/// Scans every file from its beginning; files without a record are deleted.
pub(super) fn scan_files(
    dir: &Path,
    found: &[Vec<u64>; 3],
    corrupt: &mut u64,
) -> Result<[VecDeque<QueueFile>; 3], QueueError> {
    let mut files: [VecDeque<QueueFile>; 3] = Default::default();
    for p in Priority::ALL {
        for &no in &found[p.index()] {
            let path = dir.join(file_name(p, no));
            let (valid, damaged) = scan_file(&path, p).map_err(io_err("scan", &path))?;
            if damaged > 0 {
                tracing::warn!(path = %path.display(), damaged,
                    "replication queue: damaged records skipped");
            }
            *corrupt += damaged;
            if valid == 0 {
                remove_logged(&path);
            } else {
                files[p.index()].push_back(QueueFile::unread(no, valid, true));
            }
        }
    }
    Ok(files)
}
