//! Profiling driver for W3 (the variable-length LSTM of `examples/lstm_variable_length.rs`).
//!
//! `cargo run --release --example w3_profile -- [subset|mask|loop|padded] [n] [reps]` builds
//! one mode at one batch size, runs it once to warm up, then exactly `reps` times, and prints
//! tokens/s of the best run and of the mean. It installs pfor's caching allocator
//! (`PFOR_NO_BUFFER_CACHE` set: glibc's), which the example itself cannot (other targets
//! include it as a module): compare settings interleaved under `/usr/bin/time` (CPU time,
//! minor page faults). With `PFOR_PROFILE=K` it also prints the K most expensive nodes.

use std::time::Instant;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "../workloads/mod.rs"]
mod workloads;
use workloads::{W3Mode, w3};

fn main() -> pfor::Result<()> {
    pfor::tune_system_allocator()?;
    let args: Vec<String> = std::env::args().collect();
    let mode = match args.get(1).map(String::as_str) {
        Some("mask") => W3Mode::PforMask,
        Some("loop") => W3Mode::Loop,
        Some("padded") => W3Mode::Padded,
        _ => W3Mode::PforSubset,
    };
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let reps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(100).max(1);
    let mut w = w3(n, mode)?;
    w.run();
    w.session.clear_profile();
    let (mut best, start) = (f64::INFINITY, Instant::now());
    for _ in 0..reps {
        let t = Instant::now();
        w.run();
        best = best.min(t.elapsed().as_secs_f64());
    }
    let mean = start.elapsed().as_secs_f64() / reps as f64;
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
