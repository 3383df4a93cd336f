//! Profiling driver for W4 (per-example gradients of the MNIST CNN) alone.
//!
//! `cargo run --release --example w4_profile -- [pfor|loop|hand] [n] [reps]` builds one mode
//! at one batch size and prints examples/s (best of `reps` wall-clock runs after a warm-up);
//! for `perf record`. With `PFOR_PROFILE=K` set it also prints the K most expensive nodes
//! and per-op totals of the timed runs (see `pfor::exec::Profile`).

use std::time::Instant;

#[path = "../workloads/mod.rs"]
mod workloads;
use workloads::{Mode, w4};

fn main() -> pfor::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mode = match args.get(1).map(String::as_str) {
        Some("loop") => Mode::Loop,
        Some("hand") => Mode::Hand,
        _ => Mode::Pfor,
    };
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(128);
    let reps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let mut w = w4(n, mode)?;
    w.run();
    w.session.clear_profile();
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = Instant::now();
        w.run();
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!("W4 {} n={n}: {:.0} examples/s (best of {reps}, {:.2} ms)", mode.name(), w.units / best, best * 1e3);
    Ok(())
}
