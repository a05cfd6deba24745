//! Process resource figures per report interval, from `/proc/self`:
//! CPU time (`/proc/self/stat` utime + stime, in clock ticks of 1/100 s,
//! Linux's USER_HZ) and bytes written (`/proc/self/io`: `write_bytes`, what
//! reached the block layer, and `wchar`, what went through `write` calls).
//! Write amplification = bytes written ÷ user bytes put (key + value of
//! successful puts and updates). Where `write_bytes` stays 0 (no block-I/O
//! accounting, e.g. some containers or tmpfs) `wchar` is used instead.
//! On other systems every figure reads as 0.

/// A reading of the process counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcSample {
    /// User + system CPU time, microseconds.
    pub cpu_us: u64,
    /// `write_bytes` of `/proc/self/io`.
    pub write_bytes: u64,
    /// `wchar` of `/proc/self/io`.
    pub wchar: u64,
}

/// Reads the counters now (zeros when `/proc` is not there).
pub fn sample() -> ProcSample {
    let cpu_us = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| parse_stat_cpu_ticks(&s))
        .map_or(0, |ticks| ticks * 10_000);
    let (write_bytes, wchar) = std::fs::read_to_string("/proc/self/io")
        .map(|s| parse_io(&s))
        .unwrap_or((0, 0));
    ProcSample {
        cpu_us,
        write_bytes,
        wchar,
    }
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line.
pub fn parse_stat_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may contain spaces: skip past its ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); utime is field 14 → index 11.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// (`write_bytes`, `wchar`) of a `/proc/<pid>/io` text.
pub fn parse_io(io: &str) -> (u64, u64) {
    let mut wb = 0;
    let mut wc = 0;
    for line in io.lines() {
        if let Some((k, v)) = line.split_once(':') {
            let v = v.trim().parse().unwrap_or(0);
            match k.trim() {
                "write_bytes" => wb = v,
                "wchar" => wc = v,
                _ => {}
            }
        }
    }
    (wb, wc)
}

/// One interval's resource use.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SysInterval {
    /// CPU seconds used in the interval.
    pub cpu_secs: f64,
    /// CPU use as a percentage of one core.
    pub cpu_pct: f64,
    /// Bytes written (see module doc for which counter).
    pub bytes_written: u64,
    /// User bytes put in the interval.
    pub user_bytes: u64,
}

impl SysInterval {
    /// Bytes written ÷ user bytes (0 when nothing was put).
    pub fn write_amp(&self) -> f64 {
        if self.user_bytes == 0 {
            0.0
        } else {
            self.bytes_written as f64 / self.user_bytes as f64
        }
    }
}

/// Bytes written between two samples: `write_bytes` unless the system
/// does not count it, then `wchar`.
pub fn written(a: &ProcSample, b: &ProcSample, use_wchar: bool) -> u64 {
    if use_wchar {
        b.wchar.saturating_sub(a.wchar)
    } else {
        b.write_bytes.saturating_sub(a.write_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat = "1234 (my proc) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 8 0 100 0 0";
        assert_eq!(parse_stat_cpu_ticks(stat), Some(300));
        let io = "rchar: 10\nwchar: 2048\nsyscr: 1\nsyscw: 2\nread_bytes: 0\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_io(io), (4096, 2048));
        let s = sample();
        if cfg!(target_os = "linux") {
            assert!(s.wchar > 0 || s.cpu_us > 0);
        }
        let i = SysInterval {
            bytes_written: 300,
            user_bytes: 100,
            ..Default::default()
        };
        assert!((i.write_amp() - 3.0).abs() < 1e-9);
    }
}
