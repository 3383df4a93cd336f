//! The process's CPU time, shared by the probes that time runs on a loaded machine.

#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}
unsafe extern "C" {
    fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
}

/// CPU seconds of the whole process (all threads): robust to time-slicing on a loaded
/// machine, where wall time is not.
pub fn process_cpu_seconds() -> f64 {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: CLOCK_PROCESS_CPUTIME_ID (2) with a valid out pointer.
    unsafe { clock_gettime(2, &mut ts) };
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}
