//! Runs the benchmark workloads W1–W9 (`benches/workloads/`) in pfor / loop / hand modes in ONE
//! process and prints markdown tables of throughputs and ratios (paste into BENCHMARKS.md),
//! with the peers' numbers (TF `vectorized_map`, JAX `vmap`, torch `vmap`, TFP
//! auto-batching, ONNX Runtime, TF `tf.data` for W9) read from the CSVs `benches/peers/run.sh`
//! writes. `ONNX`: models imported from ONNX files against ONNX Runtime ([`onnx_models`]). W9
//! (the pipeline over Parquet, [`w9`]) needs `--features parquet`.
//!
//! ```text
//! cargo run --release --example bench_report [-- --quick] [--only W1,W6] [--peers DIR]
//! ```
//! `--peers` defaults to the runner's output (`$PEERS_OUT` or `target/peers`, whichever was
//! written last) when it holds results, else `benches/peers/reference` (medians measured
//! earlier on this machine kind); see [`peers::default_dir`].
//! pfor's numbers are medians too, of 5-50 runs after 100 ms of warm-up runs (`--quick`:
//! within 0.3 s); the peers time theirs after one warm-up call. The modes of one row (pfor /
//! loop / hand, W3's four) are built together and timed A/B interleaved in rounds ([`rates`]),
//! so a change in the machine's load while a row runs shifts every mode alike, not the ratios.
//!
//! Every table ends with a `peak MB` column: the most memory resident while that row's modes
//! (all alive at once) ran (see [`mem`]); each row's sessions and buffers are dropped and the freed heap handed
//! back to the OS before the next row, and the last line gives each workload's peak. A
//! progress bar on stderr (hidden when stderr is not a terminal) counts the rows.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "../../benches/autobatch/mod.rs"]
mod autobatch_workloads;
mod mem;
mod onnx_models;
mod peers;
mod w9;
#[path = "../../benches/workloads/mod.rs"]
mod workloads;

use autobatch_workloads::{NUTS_DIM, fib_inputs, fib_program, nuts_inputs, nuts_program};
use peers::{Peers, best, cell, ratio};
use pfor::autobatch::{ExecConfig, reference, stackless, vm};
use workloads::{Mode, W3Mode, W8Mode, Workload, convert_body, tiny_chain, w1, w2, w3, w4, w5, w8};

/// Wall time of warm-up runs before each measurement.
const WARM_UP: Duration = Duration::from_millis(100);

/// Median wall time of `f` over at least 5 runs (after a warm-up), more while within
/// `budget` (at most 50): the statistic the peer scripts report (`benches/peers/peerlib.py`).
fn median_time(budget: Duration, f: impl FnMut()) -> f64 {
    // warm up for WARM_UP (at least one run): the first ~10 ms of back-to-back runs after a
    // quiet spell ran at half rate here (W1 n = 64: whichever mode was timed first)
    median_time_after(WARM_UP, budget, f)
}

/// [`median_time`] after `warm_up` of warm-up runs (at least one).
fn median_time_after(warm_up: Duration, budget: Duration, mut f: impl FnMut()) -> f64 {
    let warm = Instant::now();
    f();
    while warm.elapsed() < warm_up {
        f();
    }
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < 5 || (start.elapsed() < budget && times.len() < 50) {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn rate(w: &mut Workload, budget: Duration) -> f64 {
    let units = w.units;
    units
        / median_time(budget, || {
            w.run();
        })
}

/// Rounds of [`rates`] (`--quick` / full).
const ROUNDS: [usize; 2] = [3, 5];

/// The rates of the modes of one table row, measured A/B interleaved so that the ratios
/// between modes do not depend on when each was timed on a shared, noisy machine: every mode
/// is built first, then `rounds` rounds each time every mode for `budget / rounds` (a median
/// of at least 5 runs, after a warm-up: [`WARM_UP`] in the first round, 20 ms after); a
/// mode's rate is the median of its round medians. `None` workloads stay `None`.
fn rates(a: &Args, ws: &mut [Option<Workload>]) -> Vec<Option<f64>> {
    let rounds = ROUNDS[usize::from(!a.quick)];
    let mut times = vec![Vec::with_capacity(rounds); ws.len()];
    for round in 0..rounds {
        let warm_up = if round == 0 { WARM_UP } else { Duration::from_millis(20) };
        for (w, t) in ws.iter_mut().zip(&mut times) {
            if let Some(w) = w {
                t.push(median_time_after(warm_up, a.budget / rounds as u32, || {
                    w.run();
                }));
            }
        }
    }
    ws.iter()
        .zip(&mut times)
        .map(|(w, t)| {
            let w = w.as_ref()?;
            t.sort_by(f64::total_cmp);
            Some(w.units / t[t.len() / 2])
        })
        .collect()
}

fn faer_gemm_rate(n: usize, budget: Duration) -> f64 {
    let d = 768;
    let a = faer::Mat::<f32>::from_fn(n, d, |i, j| ((i + j) % 7) as f32);
    let w = faer::Mat::<f32>::from_fn(d, d, |i, j| ((i * j) % 5) as f32);
    let mut out = faer::Mat::<f32>::zeros(n, d);
    let par = if n * d * d >= pfor::kernels::gemm::PAR_FLOPS { faer::Par::rayon(0) } else { faer::Par::Seq };
    let t = median_time(budget, || {
        faer::linalg::matmul::matmul(out.as_mut(), faer::Accum::Replace, a.as_ref(), w.as_ref(), 1.0, par)
    });
    2.0 * (n * d * d) as f64 / t / 1e9
}

/// The tables and their row counts (for the progress bar).
const TABLES: [(&str, u64); 10] = [
    ("W1", 5),
    ("W2", 4),
    ("W3", 4),
    ("W4", 4),
    ("W5", 4),
    ("W6", 4),
    ("W7", 4),
    ("ONNX", 9),
    ("W9", 2),
    ("OVERHEAD", 1),
];

struct Args {
    budget: Duration,
    quick: bool,
    only: Option<Vec<String>>,
    peers: Peers,
    progress: ProgressBar,
    peaks: RefCell<mem::Peaks>,
}

fn args() -> Args {
    let argv: Vec<String> = std::env::args().collect();
    let quick = argv.iter().any(|a| a == "--quick");
    let value = |flag: &str| argv.iter().position(|a| a == flag).and_then(|i| argv.get(i + 1)).cloned();
    let only = value("--only").map(|s| s.split(',').map(|w| w.trim().to_uppercase()).collect());
    let dir = value("--peers").map(PathBuf::from).unwrap_or_else(|| {
        let peers_out = std::env::var_os("PEERS_OUT").map(PathBuf::from);
        peers::default_dir(Path::new(env!("CARGO_MANIFEST_DIR")), peers_out.as_deref())
    });
    let mut a = Args {
        budget: Duration::from_millis(if quick { 300 } else { 1500 }),
        quick,
        only,
        peers: Peers::load(&dir),
        progress: ProgressBar::hidden(),
        peaks: RefCell::default(),
    };
    let rows = TABLES.iter().filter(|(w, _)| a.wants(w)).map(|(_, r)| r).sum();
    // drawn on stderr, only when it is a terminal (indicatif hides it otherwise)
    a.progress = ProgressBar::new(rows).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} rows, {elapsed} [{msg}]")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    a
}

impl Args {
    fn wants(&self, w: &str) -> bool {
        self.only.as_ref().is_none_or(|o| o.iter().any(|x| x == w))
    }

    /// Start a table row of `workload` (progress message, peak memory mark).
    fn row(&self, workload: &str, n: usize) -> Row {
        self.progress.set_message(format!("{workload} n = {n}"));
        Row { workload: workload.to_string(), peak: mem::Peak::start() }
    }
}

/// A table row being measured.
struct Row {
    workload: String,
    peak: mem::Peak,
}

impl Row {
    /// End the row (its sessions already dropped): record its peak, hand freed memory back,
    /// advance the progress bar; the peak as a table cell.
    fn end(self, a: &Args) -> String {
        let bytes = self.peak.bytes();
        a.peaks.borrow_mut().record(&self.workload, bytes);
        mem::release();
        a.progress.inc(1);
        mem::mb(bytes)
    }
}

fn main() -> pfor::Result<()> {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator()?;
    let a = args();
    println!(
        "machine: {} logical cores (rayon), {}; throughputs from median run times after 100 ms of warm-up runs; \
         the modes of a row timed A/B interleaved, {} rounds (the median of the round medians)",
        rayon::current_num_threads(),
        std::env::consts::ARCH,
        ROUNDS[usize::from(!a.quick)]
    );
    match &a.peers.source {
        Some(d) => println!("peers: {}", d.display()),
        None => println!("peers: none found (run benches/peers/run.sh)"),
    }
    if a.wants("W1") {
        w1_table(&a)?;
    }
    if a.wants("W2") {
        dense_table(&a, "W2 MNIST CNN inference (images/s)", "W2_mnist_cnn", &[1, 16, 128, 512], 0, &|n, m| w2(n, m))?;
    }
    if a.wants("W3") {
        w3_table(&a)?;
    }
    if a.wants("W4") {
        dense_table(
            &a,
            "W4 per-example gradients, MNIST CNN (examples/s; hand = gradient of the summed loss, a cost floor)",
            "W4_per_example_grad",
            &[1, 8, 32, 128],
            1,
            &|n, m| w4(n, m),
        )?;
    }
    if a.wants("W5") {
        dense_table(
            &a,
            "W5 jacobian of a 10-step LSTM + dense `out` (rows/s; no hand mode)",
            "W5_lstm_jacobian",
            &[1, 8, 32, 128],
            0,
            &|n, m| w5(n, m),
        )?;
    }
    if a.wants("W6") {
        w6_table(&a)?;
    }
    if a.wants("W7") {
        w7_table(&a)?;
    }
    if a.wants("W8") {
        w8_table(&a)?;
    }
    if a.wants("ONNX") {
        onnx_models::onnx_table(&a)?;
    }
    if a.wants("W9") {
        w9::w9_table(&a)?;
    }
    if a.wants("OVERHEAD") {
        overhead_table(&a)?;
    }
    a.progress.finish_and_clear();
    println!("\n{}", a.peaks.borrow().summary());
    Ok(())
}

fn w1_table(a: &Args) -> pfor::Result<()> {
    println!("\n### W1 linear projection x_i[1,768] @ W[768,768] (GFLOP/s)\n");
    println!(
        "| n | pfor | loop | hand | faer GEMM | TF | JAX | torch | pfor/loop | pfor/hand | pfor/faer | pfor/best peer | peak MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for n in [1usize, 8, 64, 512, 4096] {
        let row = a.row("W1", n);
        let mut ws = Vec::new();
        for mode in Mode::ALL {
            ws.push(if mode == Mode::Loop && n > 512 { None } else { Some(w1(n, mode)?) });
        }
        let r: Vec<_> = rates(a, &mut ws).into_iter().map(|r| r.map(|r| r / 1e9)).collect();
        drop(ws);
        let f = Some(faer_gemm_rate(n, a.budget));
        let p = a.peers.vectorized("W1_linear", n);
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(r[0], 1),
            cell(r[1], 1),
            cell(r[2], 1),
            cell(f, 1),
            cell(p[0], 1),
            cell(p[1], 1),
            cell(p[2], 1),
            ratio(r[0], r[1]),
            ratio(r[0], r[2]),
            ratio(r[0], f),
            ratio(r[0], best(&p)),
            row.end(a)
        );
    }
    Ok(())
}

type Build<'a> = &'a dyn Fn(usize, Mode) -> pfor::Result<Workload>;

/// A pfor / loop / hand table with the three peers' vectorized rates.
fn dense_table(a: &Args, title: &str, peer_wl: &str, sizes: &[usize], prec: usize, build: Build) -> pfor::Result<()> {
    println!("\n### {title}\n");
    println!("| n | pfor | loop | hand | TF | JAX | torch | pfor/loop | pfor/hand | pfor/best peer | peak MB |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        let row = a.row(title.split(' ').next().unwrap_or(peer_wl), n);
        let mut ws = Vec::new();
        for mode in Mode::ALL {
            ws.push(match build(n, mode) {
                Ok(w) => Some(w),
                Err(pfor::Error::InvalidArgument(_)) if mode == Mode::Hand => None,
                Err(e) => return Err(e),
            });
        }
        let r = rates(a, &mut ws);
        drop(ws); // the row's sessions are gone: `row.end` hands their freed heap back
        let p = a.peers.vectorized(peer_wl, n);
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(r[0], prec),
            cell(r[1], prec),
            cell(r[2], prec),
            cell(p[0], prec),
            cell(p[1], prec),
            cell(p[2], prec),
            ratio(r[0], r[1]),
            ratio(r[0], r[2]),
            ratio(r[0], best(&p)),
            row.end(a)
        );
    }
    Ok(())
}

/// Reset the process's peak resident set size (Linux `clear_refs` 5); false where unsupported.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident set size in MB since the last [`reset_peak_rss`] (`VmHWM`).
fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 =
        s.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb / 1024.0)
}

/// W8: one DP-SGD step (pfor with the product rewrites, pfor materialized, loop) with the
/// peers' W8 modes; peak RSS per pfor mode (measured from its build to its last run).
fn w8_table(a: &Args) -> pfor::Result<()> {
    println!("\n### W8 one DP-SGD step, MNIST CNN, C = 1, σ = 1 (examples/s; peak RSS in MB)\n");
    println!(
        "| n | pfor | pfor materialized | loop | peak pfor | peak materialized | TF | JAX | torch | Opacus hooks | Opacus ghost | pfor/materialized | pfor/best peer |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    // `W8_BATCHES=32,128` picks sizes (as the peers' runner; the materialized mode needs
    // ~7 GB at n = 512); `W8_MODES=pfor` skips the other modes.
    let list =
        |var: &str| std::env::var(var).ok().map(|v| v.split(',').map(|x| x.trim().to_string()).collect::<Vec<_>>());
    let sizes: Vec<usize> =
        list("W8_BATCHES").map_or(vec![32, 128, 512], |v| v.iter().filter_map(|x| x.parse().ok()).collect());
    let modes = list("W8_MODES");
    for n in sizes {
        let (mut r, mut peak) = ([None; 3], [None; 3]);
        for (k, mode) in W8Mode::ALL.iter().enumerate() {
            if modes.as_ref().is_some_and(|m| !m.iter().any(|x| x == mode.name())) {
                continue;
            }
            let measured = reset_peak_rss();
            r[k] = Some(rate(&mut w8(n, *mode)?, a.budget));
            peak[k] = peak_rss_mb().filter(|_| measured);
        }
        let wl = "W8_dpsgd_step";
        let mut p = a.peers.vectorized(wl, n).to_vec();
        p.extend(["hooks", "ghost"].map(|m| a.peers.get("opacus", wl, m, n)));
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(r[0], 0),
            cell(r[1], 0),
            cell(r[2], 0),
            cell(peak[0], 0),
            cell(peak[1], 0),
            cell(p[0], 0),
            cell(p[1], 0),
            cell(p[2], 0),
            cell(p[3], 0),
            cell(p[4], 0),
            ratio(r[0], r[1]),
            ratio(r[0], best(&p))
        );
    }
    Ok(())
}

fn w3_table(a: &Args) -> pfor::Result<()> {
    println!("\n### W3 LSTM, per-example length U{{1..100}}, in 128, state 256 (tokens/s)\n");
    println!(
        "| n | subset | mask | loop | padded | TF | JAX | subset/loop | subset/padded | subset/best peer | peak MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for n in [1usize, 16, 128, 512] {
        let row = a.row("W3", n);
        let mut ws = Vec::new();
        for mode in W3Mode::ALL {
            ws.push(Some(w3(n, mode)?));
        }
        let r = rates(a, &mut ws);
        drop(ws);
        let p = a.peers.vectorized("W3_lstm_varlen", n);
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(r[0], 0),
            cell(r[1], 0),
            cell(r[2], 0),
            cell(r[3], 0),
            cell(p[0], 0),
            cell(p[1], 0),
            ratio(r[0], r[2]),
            ratio(r[0], r[3]),
            ratio(r[0], best(&p)),
            row.end(a)
        );
    }
    Ok(())
}

/// Best times of the VM, the stackless executor and the unbatched loop on one batch.
fn autobatch_times(a: &Args, program: &pfor::autobatch::Program, inputs: &[pfor::Tensor]) -> pfor::Result<[f64; 3]> {
    let cfg = ExecConfig::default();
    let sl = stackless::Executor::new(program)?;
    let machine = vm::Vm::new(program)?;
    Ok([
        median_time(a.budget, || {
            machine.run(inputs, &cfg).expect("vm runs");
        }),
        median_time(a.budget, || {
            sl.run(inputs, &cfg).expect("stackless runs");
        }),
        median_time(a.budget, || {
            reference::execute(program, inputs).expect("loop runs");
        }),
    ])
}

fn w6_table(a: &Args) -> pfor::Result<()> {
    let program = fib_program()?;
    let wl = "fib_n3..12";
    // TFP's best batched rate on numpy (its fastest backend), at any batch size it ran.
    let tfp_best = best(&[1, 16, 128, 1024].map(|b| a.peers.get("tfp_autobatch", wl, "numpy_stackless", b)));
    println!("\n### W6 recursive fibonacci, n ~ U{{3..12}} (fib calls/s)\n");
    println!("TFP auto_batching numpy stackless, best batch: {} calls/s\n", cell(tfp_best, 0));
    println!(
        "| batch | vm | stackless | loop | TFP numpy stackless | TFP tf.function VM | vm/loop | vm/TFP best | peak MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for batch in [1usize, 16, 128, 1024] {
        let row = a.row("W6", batch);
        let (n, calls) = fib_inputs(batch);
        let inputs = [n];
        let t = autobatch_times(a, &program, &inputs)?;
        let r = t.map(|s| Some(calls as f64 / s));
        println!(
            "| {batch} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(r[0], 0),
            cell(r[1], 0),
            cell(r[2], 0),
            cell(a.peers.get("tfp_autobatch", wl, "numpy_stackless", batch), 0),
            cell(a.peers.get("tfp_autobatch", wl, "tf_function_stack", batch), 0),
            ratio(r[0], r[2]),
            ratio(r[0], tfp_best),
            row.end(a)
        );
    }
    Ok(())
}

fn w7_table(a: &Args) -> pfor::Result<()> {
    let program = nuts_program(NUTS_DIM)?;
    println!("\n### W7 NUTS-like doubling to depth U{{1..6}}, 100-dim leapfrog leaf (leaf steps/s)\n");
    println!("| batch | vm | stackless | loop | vm/loop | stackless/loop | peak MB |");
    println!("|---|---|---|---|---|---|---|");
    for batch in [1usize, 16, 128, 512] {
        let row = a.row("W7", batch);
        let (inputs, steps) = nuts_inputs(batch, NUTS_DIM);
        let t = autobatch_times(a, &program, &inputs)?;
        let r = t.map(|s| Some(steps as f64 / s));
        println!(
            "| {batch} | {} | {} | {} | {} | {} | {} |",
            cell(r[0], 0),
            cell(r[1], 0),
            cell(r[2], 0),
            ratio(r[0], r[2]),
            ratio(r[1], r[2]),
            row.end(a)
        );
    }
    Ok(())
}

/// Issue 7's overhead measures: conversion time of a 1,000-node body and the executor's
/// cost per op on a chain of tiny ops (op by op, and with elementwise fusion).
fn overhead_table(a: &Args) -> pfor::Result<()> {
    println!("\n### Overheads\n");
    let row = a.row("overhead", 1000);
    println!("| measure | value |");
    println!("|---|---|");
    for simplify in [true, false] {
        let mut err = None;
        let t = median_time(a.budget, || {
            if let Err(e) = convert_body(1000, simplify) {
                err = Some(e);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        let what = if simplify { "with" } else { "without" };
        println!("| vectorize a 1,000-node body, {what} simplification | {:.2} ms |", t * 1e3);
    }
    let ops = 1000;
    for fuse in [false, true] {
        let (mut s, feeds) = tiny_chain(ops, fuse)?;
        let mut err = None;
        let t = median_time(a.budget, || {
            if let Err(e) = s.run(&feeds) {
                err = Some(e);
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
        let what = if fuse { "fused (elementwise groups)" } else { "op by op" };
        println!("| run a chain of {ops} f32[4] add/mul ops, {what} | {:.0} ns per op |", t * 1e9 / ops as f64);
    }
    println!("| peak resident memory of these measures | {} MB |", row.end(a));
    Ok(())
}
