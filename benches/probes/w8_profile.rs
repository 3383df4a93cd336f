//! Profiling driver for W8 (one DP-SGD step on the MNIST CNN, `pfor::api::dp_gradients`).
//!
//! `cargo run --release --example w8_profile -- [pfor|materialized|loop] [n] [reps]` builds
//! one mode at one batch size, runs it once to warm up, then exactly `reps` times, and prints
//! examples/s of the best run and of the mean, and the process's CPU time per run (user +
//! system, all threads: robust to other processes time-slicing the machine; compare two
//! binaries interleaved under `/usr/bin/time`). With `PFOR_PROFILE=K` set it also prints the K
//! most expensive nodes and per-op totals of the timed runs (see `pfor::exec::Profile`).

use std::time::Instant;

#[path = "../workloads/mod.rs"]
mod workloads;
use workloads::{W8Mode, w8};

/// User + system CPU time of this process in seconds (Linux `/proc/self/stat`; 0 elsewhere).
fn process_cpu() -> f64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    // fields after the parenthesized command name: utime is the 14th field, stime the 15th
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn main() -> pfor::Result<()> {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc), as bench_report does
    pfor::tune_system_allocator()?;
    let args: Vec<String> = std::env::args().collect();
    let mode = match args.get(1).map(String::as_str) {
        Some("materialized") => W8Mode::Materialized,
        Some("loop") => W8Mode::Loop,
        _ => W8Mode::Pfor,
    };
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(128);
    let reps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20).max(1);
    let mut w = w8(n, mode)?;
    w.run();
    w.session.clear_profile();
    let (mut best, start, cpu0) = (f64::INFINITY, Instant::now(), process_cpu());
    for _ in 0..reps {
        let t = Instant::now();
        w.run();
        best = best.min(t.elapsed().as_secs_f64());
    }
    let (mean, cpu) = (start.elapsed().as_secs_f64() / reps as f64, (process_cpu() - cpu0) / reps as f64);
    println!(
        "W8 {} n={n}: best {:.0} ex/s ({:.2} ms), mean {:.0} ex/s, CPU {:.2} ms per run ({reps} runs)",
        mode.name(),
        w.units / best,
        best * 1e3,
        w.units / mean,
        cpu * 1e3
    );
    Ok(())
}
