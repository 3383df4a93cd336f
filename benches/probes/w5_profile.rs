//! Profiling driver for W5 (jacobian of a 10-step LSTM + dense `out`) alone.
//!
//! `cargo run --release --example w5_profile -- [pfor|loop] [out] [reps]` builds one mode at
//! one `out` and prints rows/s from the best, median and mean of `reps` wall-clock runs after
//! a warm-up; for `perf record`. With `PFOR_PROFILE=K` set it also prints the K most
//! expensive nodes and per-op totals of the timed runs (see `pfor::exec::Profile`).

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "../workloads/mod.rs"]
mod workloads;
use workloads::{Mode, w5};

fn main() -> pfor::Result<()> {
    pfor::tune_system_allocator()?;
    let args: Vec<String> = std::env::args().collect();
    let mode = if args.get(1).map(String::as_str) == Some("loop") { Mode::Loop } else { Mode::Pfor };
    let out: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(128);
    let reps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(50).max(1);
    let mut w = w5(out, mode)?;
    let times = w.sorted_times(reps);
    let (best, median, mean) = (times[0], times[reps / 2], times.iter().sum::<f64>() / reps as f64);
    println!(
        "W5 {} out={out}: {:.0} rows/s best, {:.0} median, {:.0} mean ({:.3} / {:.3} / {:.3} ms, {reps} runs)",
        mode.name(),
        w.units / best,
        w.units / median,
        w.units / mean,
        best * 1e3,
        median * 1e3,
        mean * 1e3
    );
    Ok(())
}
