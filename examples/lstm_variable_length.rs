//! W3: an LSTM (input 128, state 256, f32) over sequences of per-example length U{1..100}.
//! The per-example body runs `while t < len_i` on its own sequence (no padding in the
//! body); prints tokens/s for pfor (Subset and Mask while conversion), the reference loop
//! and the hand-padded batch (`max_len` steps over all rows with a `t < len` mask).
//!
//! `cargo run --release --example lstm_variable_length [-- --quick] [--mode subset|mask|loop|padded]
//! [--n N] [--reps R]` (`--mode`/`--n` restrict the table to one mode / size, for profiling;
//! `--reps R` runs exactly R timed runs).

use std::time::{Duration, Instant};

#[path = "../benches/workloads/mod.rs"]
mod workloads;
use workloads::{W3Mode, Workload, w3};

/// Best time of a few runs within `budget` (at least `min_reps`).
fn best_time(w: &mut Workload, budget: Duration, min_reps: usize, max_reps: usize) -> f64 {
    w.run(); // warm-up
    let mut best = f64::INFINITY;
    let start = Instant::now();
    let mut reps = 0;
    while reps < min_reps || (start.elapsed() < budget && reps < max_reps) {
        let t = Instant::now();
        w.run();
        best = best.min(t.elapsed().as_secs_f64());
        reps += 1;
    }
    best
}

/// The value following `--flag` on the command line.
fn arg_value(flag: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1).cloned())
}

fn main() -> pfor::Result<()> {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator()?;
    let quick = std::env::args().any(|a| a == "--quick");
    let (budget, mut min_reps) = if quick { (Duration::from_millis(200), 1) } else { (Duration::from_millis(1500), 3) };
    let mut max_reps = 20;
    if let Some(r) = arg_value("--reps").and_then(|r| r.parse::<usize>().ok()) {
        (min_reps, max_reps) = (r, r);
    }
    let only_mode = arg_value("--mode");
    let sizes: Vec<usize> = match arg_value("--n").and_then(|n| n.parse::<usize>().ok()) {
        Some(n) => vec![n],
        None => vec![1, 16, 128, 512],
    };
    println!("W3 LSTM, in 128, state 256, f32, lengths U{{1..100}} (tokens/s, best of runs)\n");
    println!("| n | tokens | subset | mask | loop | padded | subset/loop | subset/padded |");
    println!("|---|---|---|---|---|---|---|---|");
    for n in sizes {
        let mut rate = [0.0f64; 4];
        let mut tokens = 0.0;
        for (k, mode) in W3Mode::ALL.iter().enumerate() {
            if only_mode.as_deref().is_some_and(|m| !mode.name().ends_with(m)) {
                continue;
            }
            let mut w = w3(n, *mode)?;
            tokens = w.units;
            rate[k] = w.units / best_time(&mut w, budget, min_reps, max_reps);
        }
        println!(
            "| {n} | {tokens:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1}× | {:.2} |",
            rate[0],
            rate[1],
            rate[2],
            rate[3],
            rate[0] / rate[2],
            rate[0] / rate[3]
        );
    }
    Ok(())
}
