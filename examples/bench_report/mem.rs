//! Peak resident memory per table row, from Linux's high-water mark of the process.
//!
//! [`Peak::start`] resets the mark (`5` written to `/proc/self/clear_refs`, Linux ≥ 4.0) to
//! the current resident set; [`Peak::bytes`] reads it back (`VmHWM` of `/proc/self/status`).
//! A row's peak is therefore the most memory resident at any moment while its modes ran,
//! including what earlier rows left resident (freed heap the allocator keeps: bench_report
//! calls [`release`] after every row so that this is as little as the allocator allows).
//! [`Peaks`] keeps the largest peak per workload and of the whole run.
//!
//! Invariant: where the mark cannot be reset or read (not Linux, a sandbox that forbids
//! `clear_refs`), every reading is `None` and the tables print `–`: a number is never a
//! process-wide peak passed off as a row's.

use std::collections::BTreeMap;

/// `VmHWM` of this process in bytes.
fn high_water() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// Hand freed heap memory back to the OS (pfor's buffer cache, then glibc's `malloc_trim`;
/// the latter a no-op elsewhere), so the next row starts from what is really live.
pub fn release() {
    pfor::TensorAllocator::trim();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::os::raw::c_int;
        }
        // SAFETY: `malloc_trim` only returns free heap pages to the OS; it takes glibc's
        // arena locks and may be called from any thread at any time.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// The high-water mark since [`Peak::start`].
pub struct Peak {
    reset: bool,
}

impl Peak {
    /// Reset the mark to the current resident set.
    pub fn start() -> Peak {
        Peak { reset: std::fs::write("/proc/self/clear_refs", "5").is_ok() }
    }

    /// Peak resident bytes since [`start`](Self::start) (`None`: not measurable here).
    pub fn bytes(&self) -> Option<u64> {
        if self.reset { high_water() } else { None }
    }
}

/// The largest row peak of each workload and of the run.
#[derive(Default)]
pub struct Peaks {
    by_workload: BTreeMap<String, u64>,
}

impl Peaks {
    /// Record a row of `workload` that peaked at `bytes`.
    pub fn record(&mut self, workload: &str, bytes: Option<u64>) {
        if let Some(b) = bytes {
            let e = self.by_workload.entry(workload.to_string()).or_default();
            *e = (*e).max(b);
        }
    }

    /// One line: each workload's peak and the run's, in MB.
    pub fn summary(&self) -> String {
        if self.by_workload.is_empty() {
            return "peak resident memory: not measurable here (needs Linux /proc/self/clear_refs)".into();
        }
        let all = self.by_workload.values().max().copied();
        let each: Vec<String> = self.by_workload.iter().map(|(w, b)| format!("{w} {}", mb(Some(*b)))).collect();
        format!("peak resident memory (MB): {}; whole run {}", each.join(", "), mb(all))
    }
}

/// A cell: megabytes (10⁶ bytes), or `–`.
pub fn mb(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "–".into(), |b| format!("{:.0}", b as f64 / 1e6))
}
