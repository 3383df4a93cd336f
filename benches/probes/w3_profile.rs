//! Profiling driver for W3 (the variable-length LSTM of `examples/lstm_variable_length.rs`).
//!
//! `cargo run --release --example w3_profile -- [subset|mask|loop|padded] [n] [reps]` builds
//! one mode at one batch size, runs it once to warm up, then exactly `reps` times, and prints
//! tokens/s of the best run and of the mean. It installs pfor's caching allocator
//! (`PFOR_NO_BUFFER_CACHE` set: glibc's), which the example itself cannot (other targets
//! include it as a module): compare settings interleaved under `/usr/bin/time` (CPU time,
//! minor page faults). With `PFOR_PROFILE=K` it also prints the K most expensive nodes.

#[path = "../workloads/mod.rs"]
mod workloads;
use workloads::{W3Mode, w3};

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

fn main() -> pfor::Result<()> {
    pfor::tune_system_allocator()?;
    let arg = |i: usize| std::env::args().nth(i);
    let mode = match arg(1).as_deref() {
        Some("mask") => W3Mode::PforMask,
        Some("loop") => W3Mode::Loop,
        Some("padded") => W3Mode::Padded,
        _ => W3Mode::PforSubset,
    };
    let n: usize = arg(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let reps: usize = arg(3).and_then(|s| s.parse().ok()).unwrap_or(100).max(1);
    let mut w = w3(n, mode)?;
    let times = w.sorted_times(reps);
    let (best, mean) = (times[0], times.iter().sum::<f64>() / reps as f64);
    let s = pfor::TensorAllocator::stats();
    println!(
        "W3 {} n={n}: best {:.0} tok/s, mean {:.0} tok/s ({reps} runs); cache hits {} misses {} cached {} KiB",
        mode.name(),
        w.units / best,
        w.units / mean,
        s.hits,
        s.misses,
        s.cached_bytes >> 10
    );
    Ok(())
}
