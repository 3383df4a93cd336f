//! Tuning of the system allocator for large-tensor workloads.
//!
//! Kernels allocate output buffers of hundreds of KiB to tens of MiB at every step of a
//! loop. glibc's `malloc` serves such blocks with `mmap` (above a threshold that starts at
//! 128 KiB) or returns the freed top of its heap to the OS (above a trim threshold), so the
//! next step's buffer is fresh memory and every page of it faults on first touch: measured
//! here, a W3 LSTM step at 512 rows took 102k page faults per 6 runs instead of 5k, and W7's
//! auto-batched leaf steps ran ~1.5x slower. TensorFlow, PyTorch and XLA avoid this with
//! their own caching allocators; a Rust library cannot choose the process allocator, so
//! [`tune_system_allocator`] is an explicit, opt-in call (the examples, benches and
//! `bench_report` make it at start-up, for every mode alike, loop baselines included).
//!
//! Invariants: the call only changes when freed memory goes back to the OS (it keeps up to
//! [`TRIM_THRESHOLD`] bytes of freed heap and serves blocks below [`MMAP_THRESHOLD`] from
//! the heap); it never changes results. It is a no-op (returning `Ok(false)`) on platforms
//! other than Linux with glibc.

use crate::error::{Error, Result};

/// Blocks below this size come from the heap, not from a fresh `mmap` (glibc's maximum).
pub const MMAP_THRESHOLD: usize = 32 << 20;
/// Freed memory kept in the heap before glibc trims it back to the OS.
pub const TRIM_THRESHOLD: usize = 512 << 20;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    use std::os::raw::c_int;

    // Parameter numbers from glibc's <malloc.h>.
    pub const M_TRIM_THRESHOLD: c_int = -1;
    pub const M_MMAP_THRESHOLD: c_int = -3;

    unsafe extern "C" {
        pub fn mallopt(param: c_int, value: c_int) -> c_int;
    }

    /// `mallopt(param, value)`; true on success.
    pub fn set(param: c_int, value: usize) -> bool {
        let Ok(v) = c_int::try_from(value) else { return false };
        // SAFETY: `mallopt` only updates allocator parameters; it takes plain integers and
        // is safe to call at any time from any thread (glibc takes its arena locks).
        unsafe { mallopt(param, v) == 1 }
    }
}

/// Keep freed tensor buffers in the process heap instead of returning them to the OS after
/// every kernel (see the module docs). Returns `Ok(true)` when applied, `Ok(false)` on
/// platforms without glibc; an `Err` if glibc rejected a parameter.
pub fn tune_system_allocator() -> Result<bool> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if !glibc::set(glibc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) {
            return Err(Error::InvalidArgument(format!("mallopt(M_MMAP_THRESHOLD, {MMAP_THRESHOLD}) was rejected")));
        }
        if !glibc::set(glibc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) {
            return Err(Error::InvalidArgument(format!("mallopt(M_TRIM_THRESHOLD, {TRIM_THRESHOLD}) was rejected")));
        }
        Ok(true)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        Ok(false)
    }
}
