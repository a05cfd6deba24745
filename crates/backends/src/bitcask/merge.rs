//! Bitcask merge: choosing the closed files whose dead bytes or
//! fragmentation pass their thresholds, and copying their live records
//! (a bounded step at a time, under the write lock) to the active file
//! before deleting them (see [`super`], Merge).

use super::format::FLAG_PUT;
use super::scanner::{Scanner, SCAN_WINDOW_BYTES};
use super::{
    data_path, format, hint_path, io, Bitcask, FileStat, MergeFile, MergeJob, StepBudget, Writer,
};
use basalt_backend::{BackendError, Result};
use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl Bitcask {
    fn triggered(&self, st: &FileStat, frag: u32, dead: u64) -> bool {
        st.dead_bytes >= dead || (st.keys > 0 && st.dead_keys * 100 >= u64::from(frag) * st.keys)
    }

    pub(super) fn maybe_merge(&self, w: &mut Writer) -> Result<()> {
        let active = w.active.id;
        let closed = || w.stats.iter().filter(move |(id, _)| **id != active);
        if !closed().any(|(_, s)| {
            self.triggered(
                s,
                self.opts.frag_merge_trigger,
                self.opts.dead_bytes_merge_trigger,
            )
        }) {
            return Ok(());
        }
        let mut pick: Vec<u32> = closed()
            .filter(|(_, s)| {
                self.triggered(s, self.opts.frag_threshold, self.opts.dead_bytes_threshold)
            })
            .map(|(id, _)| *id)
            .collect();
        pick.sort_unstable();
        self.merge_files(w, &pick)
    }

    /// Merges every closed file now, whatever the thresholds (tools, tests).
    pub fn merge_all(&self) -> Result<()> {
        self.check_open()?;
        let mut w = self.writer.lock();
        let active = w.active.id;
        while w.job.is_some() {
            self.merge_step(&mut w, StepBudget::ALL)?;
        }
        let mut all: Vec<u32> = w.stats.keys().copied().filter(|id| *id != active).collect();
        all.sort_unstable();
        self.merge_files(&mut w, &all)?;
        while w.job.is_some() {
            self.merge_step(&mut w, StepBudget::ALL)?;
        }
        Ok(())
    }

    /// Starts a merge of `pick` (a no-op if empty or one is under way); the
    /// writes that follow advance it ([`StepBudget::WRITE`] each).
    fn merge_files(&self, w: &mut Writer, pick: &[u32]) -> Result<()> {
        if pick.is_empty() || w.merging {
            return Ok(());
        }
        w.merging = true;
        w.job = Some(MergeJob {
            pick: pick.to_vec(),
            picked: pick.iter().copied().collect(),
            next_file: 0,
            current: None,
        });
        Ok(())
    }

    /// Reads up to `budget` of the merge under way, copying the live
    /// records; finishes it (fsync, unlink the merged files) once every
    /// file is copied.
    pub(super) fn merge_step(&self, w: &mut Writer, mut budget: StepBudget) -> Result<()> {
        let Some(mut job) = w.job.take() else {
            return Ok(());
        };
        let r = self.merge_advance(w, &mut job, &mut budget);
        match r {
            Ok(true) => {
                w.merging = false;
                self.merge_finish(w, &job.pick)
            }
            Ok(false) => {
                w.job = Some(job);
                Ok(())
            }
            Err(e) => {
                // Abandon the merge: copies already made are harmless (the
                // keydir points at them; the old records are dead).
                w.merging = false;
                Err(e)
            }
        }
    }

    /// Returns true once every picked file has been copied.
    fn merge_advance(
        &self,
        w: &mut Writer,
        job: &mut MergeJob,
        budget: &mut StepBudget,
    ) -> Result<bool> {
        while budget.left() {
            if job.current.is_none() {
                let Some(&id) = job.pick.get(job.next_file) else {
                    return Ok(true);
                };
                let older_unmerged = w.stats.keys().any(|o| *o < id && !job.picked.contains(o));
                let p = data_path(&self.dir, id);
                let file = match self.files.read().get(&id) {
                    Some(f) => Arc::clone(f),
                    None => Arc::new(File::open(&p).map_err(io("open", &p))?),
                };
                let len = file.metadata().map_err(io("stat", &p))?.len();
                job.current = Some(MergeFile {
                    id,
                    records: Scanner::new(file, len, SCAN_WINDOW_BYTES),
                    older_unmerged,
                });
            }
            let Some(MergeFile {
                id,
                records,
                older_unmerged,
            }) = job.current.as_mut()
            else {
                continue;
            };
            let p = data_path(&self.dir, *id);
            let mut finished = false;
            while budget.left() {
                let Some((offset, raw)) = records.next().map_err(io("read", &p))? else {
                    finished = true;
                    break;
                };
                budget.spend(raw.len());
                self.merge_bytes_read
                    .fetch_add(raw.len() as u64, Ordering::Relaxed);
                let Ok(r) = format::decode_record(raw) else {
                    continue;
                };
                let current = self.keydir.read().get(r.key).copied();
                let copy = if r.flags == FLAG_PUT {
                    current.is_some_and(|l| l.file == *id && l.offset == offset)
                } else {
                    current.is_none() && *older_unmerged
                };
                if copy {
                    self.append(w, r.key, raw, r.tstamp_us, r.expires_at, r.flags)?;
                    if w.active.size >= self.opts.max_file_bytes {
                        self.roll(w)?;
                    }
                }
            }
            if finished {
                job.current = None;
                job.next_file += 1;
            }
        }
        Ok(job.current.is_none() && job.next_file >= job.pick.len())
    }

    fn merge_finish(&self, w: &mut Writer, pick: &[u32]) -> Result<()> {
        let p = data_path(&self.dir, w.active.id);
        w.active.file.sync_all().map_err(io("fsync", &p))?;
        for &id in pick {
            self.files.write().remove(&id);
            w.stats.remove(&id);
            let d = data_path(&self.dir, id);
            std::fs::remove_file(&d).map_err(io("unlink", &d))?;
            let h = hint_path(&self.dir, id);
            if let Err(e) = std::fs::remove_file(&h) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    return Err(BackendError::io("unlink", &h, e));
                }
            }
        }
        basalt_engine::fsutil::sync_dir(&self.dir).map_err(crate::from_engine)?;
        self.merges.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
