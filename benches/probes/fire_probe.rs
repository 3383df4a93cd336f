//! One SqueezeNet fire module's expand half, timed alone: `cargo run --release --example
//! fire_probe -- N H W S E` runs `concat(relu(conv1x1(x) + b1), relu(conv3x3(x) + b3))` on
//! `x: [N, H, W, S]` with `E` output channels per branch (the concat is fused, see
//! `exec::fuse::concat`), and prints the best-of-runs time and GFLOP/s; `PFOR_NO_FUSE=1`
//! times the unfused plan.
use std::time::Instant;

use pfor::prelude::*;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

fn main() -> Result<()> {
    pfor::tune_system_allocator()?;
    let v: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let [n, h, w, s, e] = v[..] else {
        eprintln!("usage: fire_probe N H W S E");
        return Ok(());
    };
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, h, w, s]);
    let branch = |g: &mut Graph, k: usize, seed: u64| -> Result<ValueId> {
        let f = g.constant(Tensor::randn(&[k, k, s, e], seed)?);
        let b = g.constant(Tensor::randn(&[e], seed + 1)?);
        let y = g.conv2d(x, f, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() })?;
        let y = g.bias_add(y, b)?;
        g.relu(y)
    };
    let a = branch(&mut g, 1, 1)?;
    let b = branch(&mut g, 3, 3)?;
    let y = g.concat(&[a, b], 3)?;
    let feeds = vec![(x, Tensor::randn(&[n, h, w, s], 5)?)];
    let mut sess = Session::new(&g, &[y])?;
    sess.run(&feeds)?;
    let mut best = f64::INFINITY;
    for _ in 0..50 {
        let t = Instant::now();
        sess.run(&feeds)?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    let flops = 2.0 * (n * h * w * s * e * 10) as f64;
    println!("fire [{n},{h},{w},{s}] -> 2x{e}: {:.3} ms, {:.1} GFLOP/s", best * 1e3, flops / best / 1e9);
    Ok(())
}
