//! One `conv2d → bias_add → relu` (optionally `→ max_pool 2x2`) session at a given shape,
//! timed alone: `cargo run --release --example conv_probe -- N H W C K O [pool]` prints the
//! best-of-runs time and GFLOP/s (the conv's multiply-adds x 2).
use std::time::Instant;

use pfor::prelude::*;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

fn main() -> Result<()> {
    pfor::tune_system_allocator()?;
    let a: Vec<String> = std::env::args().skip(1).collect();
    let v: Vec<usize> = a.iter().filter_map(|s| s.parse().ok()).collect();
    let [n, h, w, c, k, o] = v[..] else {
        eprintln!("usage: conv_probe N H W C K O [pool]");
        return Ok(());
    };
    let pool = a.iter().any(|s| s == "pool");
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, h, w, c]);
    let f = g.constant(Tensor::randn(&[k, k, c, o], 1)?);
    let b = g.constant(Tensor::randn(&[o], 2)?);
    let p = Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() };
    let y = g.conv2d(x, f, p)?;
    let y = g.bias_add(y, b)?;
    let mut y = g.relu(y)?;
    if pool {
        y = g.max_pool(y, [2, 2], [2, 2], Padding::Valid)?;
    }
    let feeds = vec![(x, Tensor::randn(&[n, h, w, c], 3)?)];
    let mut s = Session::new(&g, &[y])?;
    s.run(&feeds)?;
    let mut best = f64::INFINITY;
    for _ in 0..20 {
        let t = Instant::now();
        s.run(&feeds)?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    let flops = 2.0 * (n * h * w * k * k * c * o) as f64;
    println!(
        "conv [{n},{h},{w},{c}] k{k} o{o}{}: {:.3} ms, {:.1} GFLOP/s",
        if pool { " +pool" } else { "" },
        best * 1e3,
        flops / best / 1e9
    );
    Ok(())
}
