//! Runs the benchmark workloads in pfor / loop / hand modes in ONE process and prints a
//! markdown table of throughputs and ratios (paste into BENCHMARKS.md).
//!
//! `cargo run --release --example bench_report [-- --quick] [--w2]` (`--w2`: only W2).

use std::time::{Duration, Instant};

#[path = "../benches/workloads/mod.rs"]
mod workloads;
use workloads::{Mode, W3Mode, Workload, w1, w2, w3};

fn time_it(w: &mut Workload, budget: Duration) -> f64 {
    w.run(); // warm-up
    let mut best = f64::INFINITY;
    let start = Instant::now();
    let mut reps = 0;
    while reps < 3 || (start.elapsed() < budget && reps < 50) {
        let t = Instant::now();
        w.run();
        best = best.min(t.elapsed().as_secs_f64());
        reps += 1;
    }
    best
}

fn faer_gemm_rate(n: usize, budget: Duration) -> f64 {
    let d = 768;
    let a = faer::Mat::<f32>::from_fn(n, d, |i, j| ((i + j) % 7) as f32);
    let w = faer::Mat::<f32>::from_fn(d, d, |i, j| ((i * j) % 5) as f32);
    let mut out = faer::Mat::<f32>::zeros(n, d);
    let par = if n * d * d >= pfor::kernels::gemm::PAR_FLOPS { faer::Par::rayon(0) } else { faer::Par::Seq };
    let mut best = f64::INFINITY;
    let start = Instant::now();
    let mut reps = 0;
    while reps < 3 || (start.elapsed() < budget && reps < 50) {
        let t = Instant::now();
        faer::linalg::matmul::matmul(out.as_mut(), faer::Accum::Replace, a.as_ref(), w.as_ref(), 1.0, par);
        best = best.min(t.elapsed().as_secs_f64());
        reps += 1;
    }
    2.0 * (n * d * d) as f64 / best / 1e9
}

fn main() -> pfor::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let budget = Duration::from_millis(if quick { 300 } else { 1500 });
    let only_w2 = std::env::args().any(|a| a == "--w2");
    println!("machine: {} logical cores (rayon), {}", rayon::current_num_threads(), std::env::consts::ARCH);
    if only_w2 {
        return w2_table(budget);
    }
    println!("\n### W1 linear projection x_i[1,768] @ W[768,768] (GFLOP/s)\n");
    println!("| n | pfor | loop | hand | faer GEMM | pfor/loop | pfor/hand | pfor/faer |");
    println!("|---|---|---|---|---|---|---|---|");
    for n in [1usize, 8, 64, 512, 4096] {
        let mut rate = [0.0f64; 3];
        for (k, mode) in Mode::ALL.iter().enumerate() {
            if *mode == Mode::Loop && n > 512 {
                continue;
            }
            let mut w = w1(n, *mode)?;
            rate[k] = w.units / time_it(&mut w, budget) / 1e9;
        }
        let f = faer_gemm_rate(n, budget);
        let loop_s = if rate[1] > 0.0 { format!("{:.1}", rate[1]) } else { "–".into() };
        let ratio_loop = if rate[1] > 0.0 { format!("{:.1}×", rate[0] / rate[1]) } else { "–".into() };
        println!(
            "| {n} | {:.1} | {loop_s} | {:.1} | {f:.1} | {ratio_loop} | {:.2} | {:.2} |",
            rate[0],
            rate[2],
            rate[0] / rate[2],
            rate[0] / f
        );
    }
    w2_table(budget)?;
    println!("\n### W3 LSTM, per-example length U{{1..100}}, in 128, state 256 (tokens/s)\n");
    println!("| n | subset | mask | loop | padded | subset/loop | subset/padded |");
    println!("|---|---|---|---|---|---|---|");
    for n in [1usize, 16, 128, 512] {
        let mut rate = [0.0f64; 4];
        for (k, mode) in W3Mode::ALL.iter().enumerate() {
            let mut w = w3(n, *mode)?;
            rate[k] = w.units / time_it(&mut w, budget);
        }
        println!(
            "| {n} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1}× | {:.2} |",
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

fn w2_table(budget: Duration) -> pfor::Result<()> {
    println!("\n### W2 MNIST CNN inference (images/s)\n");
    println!("| n | pfor | loop | hand | pfor/loop | pfor/hand |");
    println!("|---|---|---|---|---|---|");
    for n in [1usize, 16, 128, 512] {
        let mut rate = [0.0f64; 3];
        for (k, mode) in Mode::ALL.iter().enumerate() {
            let mut w = w2(n, *mode)?;
            rate[k] = w.units / time_it(&mut w, budget);
        }
        println!(
            "| {n} | {:.0} | {:.0} | {:.0} | {:.1}× | {:.2} |",
            rate[0],
            rate[1],
            rate[2],
            rate[0] / rate[1],
            rate[0] / rate[2]
        );
    }
    Ok(())
}
