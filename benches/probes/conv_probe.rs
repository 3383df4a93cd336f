//! One `conv2d → bias_add → relu` (optionally `→ max_pool 2x2`) session at a given shape,
//! timed alone: `cargo run --release --example conv_probe -- N H W C K O [pool] [s2] [valid]
//! [onnx] [nobias] [pool3] [nchw]` prints the best-of-runs time and GFLOP/s (the conv's
//! multiply-adds x 2). `s2`: stride 2; `valid`: VALID padding (else SAME); `onnx`: the
//! filter is a constant stored `[O, C, K, K]` and transposed in the graph, as the ONNX
//! importer emits it; `nobias`: no `bias_add → relu` after the conv; `pool3`: a 3x3
//! stride-2 VALID max pool after it (SqueezeNet's); `nchw`: the input is fed `[N, C, H, W]`
//! and transposed in the graph (as the ONNX importer emits an image model's input).
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
        eprintln!("usage: conv_probe N H W C K O [pool] [s2] [valid] [onnx] [nobias] [pool3] [nchw]");
        return Ok(());
    };
    let flag = |f: &str| a.iter().any(|s| s == f);
    let (pool, stride) = (flag("pool"), if flag("s2") { 2 } else { 1 });
    let mut g = Graph::new();
    let (nchw, pool3) = (flag("nchw"), flag("pool3"));
    let dims = if nchw { [n, c, h, w] } else { [n, h, w, c] };
    let x = g.input("x", DType::F32, dims);
    let xt = if nchw { g.transpose(x, &[0, 2, 3, 1])? } else { x };
    let f = if flag("onnx") {
        let f = g.constant(Tensor::randn(&[o, c, k, k], 1)?);
        g.transpose(f, &[2, 3, 1, 0])?
    } else {
        g.constant(Tensor::randn(&[k, k, c, o], 1)?)
    };
    let b = g.constant(Tensor::randn(&[o], 2)?);
    let padding = if flag("valid") { Padding::Valid } else { Padding::Same };
    let p = Conv2dParams { padding, strides: [stride, stride], ..Conv2dParams::default() };
    let mut y = g.conv2d(xt, f, p)?;
    if !flag("nobias") {
        y = g.bias_add(y, b)?;
        y = g.relu(y)?;
    }
    if pool {
        y = g.max_pool(y, [2, 2], [2, 2], Padding::Valid)?;
    }
    if pool3 {
        y = g.max_pool(y, [3, 3], [2, 2], Padding::Valid)?;
    }
    let feeds = vec![(x, Tensor::randn(&dims, 3)?)];
    let mut s = Session::new(&g, &[y])?;
    s.run(&feeds)?;
    let mut best = f64::INFINITY;
    for _ in 0..20 {
        let t = Instant::now();
        s.run(&feeds)?;
        best = best.min(t.elapsed().as_secs_f64());
    }
    // the conv's output size (before any pool)
    let span = |d: usize| {
        let d = if flag("valid") { d - (k - 1) } else { d };
        d.div_ceil(stride)
    };
    let (oh, ow) = (span(h), span(w));
    let flops = 2.0 * (n * oh * ow * k * k * c * o) as f64;
    println!(
        "conv [{n},{h},{w},{c}] k{k} s{stride} o{o}{}: {:.3} ms, {:.1} GFLOP/s",
        if pool {
            " +pool"
        } else if pool3 {
            " +pool3"
        } else {
            ""
        },
        best * 1e3,
        flops / best / 1e9
    );
    Ok(())
}
