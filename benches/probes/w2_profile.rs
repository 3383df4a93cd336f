//! Profiling driver for W2 (MNIST CNN inference) alone.
//!
//! `cargo run --release --example w2_profile -- [pfor|loop|hand] [n] [reps]` builds one mode
//! at one batch size and prints images/s (best of `reps` runs); for callgrind / perf.
//!
//! `cargo run --release --example w2_profile -- layers [n] [reps]` times hand-batched prefixes
//! of the network (conv1, +bias, +relu, +pool, ...) and prints each layer's marginal cost.

use std::time::Instant;

use pfor::ops::conv::Conv2dParams;
use pfor::prelude::*;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

#[path = "../workloads/mod.rs"]
mod workloads;
use workloads::{Mode, Workload, mnist_params, w2};

mod cpu_clock;

/// CPU seconds of the whole process (all threads): robust to time-slicing on a loaded
/// machine, where wall time is not. Wall time when `PFOR_WALL` is set.
fn now() -> f64 {
    if std::env::var_os("PFOR_WALL").is_some() {
        thread_local!(static T0: Instant = Instant::now());
        return T0.with(|t| t.elapsed().as_secs_f64());
    }
    cpu_clock::process_cpu_seconds()
}

fn best_of(w: &mut Workload, reps: usize) -> f64 {
    w.run();
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let t = now();
        w.run();
        best = best.min(now() - t);
    }
    best
}

const LAYERS: [&str; 14] = [
    "conv1", "bias1", "relu1", "pool1", "conv2", "bias2", "relu2", "pool2", "reshape", "fc1", "bias3", "relu3", "fc2",
    "bias4",
];

/// The hand-batched network cut after `k` layers.
fn prefix(n: usize, k: usize) -> Result<Workload> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, 28, 28, 1]);
    let p = mnist_params(&mut g);
    let v = &p.values;
    let same = Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() };
    let mut h = x;
    for (i, name) in LAYERS.iter().enumerate().take(k) {
        h = match *name {
            "conv1" => g.conv2d(h, v[0], same)?,
            "conv2" => g.conv2d(h, v[2], same)?,
            "bias1" => g.bias_add(h, v[1])?,
            "bias2" => g.bias_add(h, v[3])?,
            "bias3" => g.bias_add(h, v[5])?,
            "bias4" => g.bias_add(h, v[7])?,
            "pool1" | "pool2" => g.max_pool(h, [2, 2], [2, 2], Padding::Valid)?,
            "reshape" => g.reshape(h, &[-1, 3136])?,
            "fc1" => g.matmul(h, v[4])?,
            "fc2" => g.matmul(h, v[6])?,
            _ => {
                let _ = i;
                g.relu(h)?
            }
        };
    }
    Ok(Workload {
        session: Session::new(&g, &[h])?,
        feeds: vec![(x, Tensor::randn(&[n, 28, 28, 1], 3)?)],
        units: n as f64,
    })
}

fn main() -> pfor::Result<()> {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator()?;
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(128);
    let reps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    if args.get(1).map(String::as_str) == Some("gemm") {
        // Single GEMM shapes [m,k]x[k,o] (row-major, as the conv kernels call them).
        for (k, o) in [(800usize, 64usize), (25, 32), (3136, 1024)] {
            for m in [40usize, 128, 256, 512, 1024, 4096] {
                let a = vec![0.5f32; m * k];
                let b = vec![0.25f32; k * o];
                let mut c = vec![0.0f32; m * o];
                let reps = (2_000_000_000 / (m * k * o)).clamp(3, 2000);
                let mut best = f64::INFINITY;
                for _ in 0..5 {
                    let t = now();
                    for _ in 0..reps {
                        pfor::kernels::gemm::gemm(m, k, o, &a, false, &b, false, &mut c, false)?;
                    }
                    best = best.min((now() - t) / reps as f64);
                }
                println!("gemm m={m:5} k={k:5} n={o:5}: {:7.1} GFLOP/s", 2.0 * (m * k * o) as f64 / best / 1e9);
            }
        }
        return Ok(());
    }
    if args.get(1).map(String::as_str) == Some("layers") {
        let mut prev = 0.0;
        let mut total = 0.0;
        for k in 1..=LAYERS.len() {
            let t = best_of(&mut prefix(n, k)?, reps);
            let d = (t - prev).max(0.0);
            println!("{:>8}: {:8.3} ms  (prefix {:8.3} ms)", LAYERS[k - 1], d * 1e3, t * 1e3);
            prev = t;
            total = t;
        }
        println!("total {:.3} ms = {:.0} images/s", total * 1e3, n as f64 / total);
        return Ok(());
    }
    let mode = match args.get(1).map(String::as_str) {
        Some("loop") => Mode::Loop,
        Some("hand") => Mode::Hand,
        _ => Mode::Pfor,
    };
    let mut w = w2(n, mode)?;
    let best = best_of(&mut w, reps);
    let _ = Instant::now();
    println!("W2 {} n={n}: {:.0} images/s (best of {reps})", mode.name(), w.units / best);
    Ok(())
}
