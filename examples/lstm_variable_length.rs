//! W3: an LSTM (input 128, state 256, f32) over sequences of per-example length U{1..100}.
//! The per-example body runs `while t < len_i` on its own sequence (no padding in the
//! body); prints tokens/s for pfor (Subset and Mask while conversion), the reference loop
//! and the hand-padded batch (`max_len` steps over all rows with a `t < len` mask).
//!
//! `cargo run --release --example lstm_variable_length [-- --quick]`

use std::time::{Duration, Instant};

#[path = "../benches/workloads/mod.rs"]
mod workloads;
use workloads::{W3Mode, Workload, w3};

/// Best time of a few runs within `budget` (at least `min_reps`).
fn best_time(w: &mut Workload, budget: Duration, min_reps: usize) -> f64 {
    w.run(); // warm-up
    let mut best = f64::INFINITY;
    let start = Instant::now();
    let mut reps = 0;
    while reps < min_reps || (start.elapsed() < budget && reps < 20) {
        let t = Instant::now();
        w.run();
        best = best.min(t.elapsed().as_secs_f64());
        reps += 1;
    }
    best
}

fn main() -> pfor::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (budget, min_reps) = if quick { (Duration::from_millis(200), 1) } else { (Duration::from_millis(1500), 3) };
    println!("W3 LSTM, in 128, state 256, f32, lengths U{{1..100}} (tokens/s, best of runs)\n");
    println!("| n | tokens | subset | mask | loop | padded | subset/loop | subset/padded |");
    println!("|---|---|---|---|---|---|---|---|");
    for n in [1usize, 16, 128, 512] {
        let mut rate = [0.0f64; 4];
        let mut tokens = 0.0;
        for (k, mode) in W3Mode::ALL.iter().enumerate() {
            let mut w = w3(n, *mode)?;
            tokens = w.units;
            rate[k] = w.units / best_time(&mut w, budget, min_reps);
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
