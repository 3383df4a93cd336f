//! One `max_pool` session at a given shape, timed alone in process CPU time (robust on a
//! loaded machine; run with `RAYON_NUM_THREADS=1` for a kernel's single-core cost):
//! `cargo run --release --example pool_probe -- N H W C K S [P]` (window `K`x`K`, stride `S`,
//! `P`: symmetric explicit padding, else VALID) prints the best of 30 runs.
use pfor::prelude::*;

#[path = "cpu_clock.rs"]
mod cpu_clock;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

fn main() -> Result<()> {
    pfor::tune_system_allocator()?;
    let v: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let (Some(&[n, h, w, c, k, s]), pad) = (v.get(..6).and_then(|d| <&[usize; 6]>::try_from(d).ok()), v.get(6)) else {
        eprintln!("usage: pool_probe N H W C K S [P]");
        return Ok(());
    };
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, h, w, c]);
    let padding = pad.map_or(Padding::Valid, |&p| Padding::Explicit([(p, p), (p, p)]));
    let y = g.max_pool(x, [k, k], [s, s], padding)?;
    let feeds = vec![(x, Tensor::randn(&[n, h, w, c], 3)?)];
    let mut sess = Session::new(&g, &[y])?;
    sess.run(&feeds)?;
    let mut best = f64::INFINITY;
    for _ in 0..30 {
        let t = cpu_clock::process_cpu_seconds();
        sess.run(&feeds)?;
        best = best.min(cpu_clock::process_cpu_seconds() - t);
    }
    let bytes = (n * h * w * c * 4) as f64;
    println!(
        "max_pool [{n},{h},{w},{c}] k{k} s{s} pad{}: {:.1} us CPU, {:.1} GB/s of input",
        pad.copied().unwrap_or(0),
        best * 1e6,
        bytes / best / 1e9
    );
    Ok(())
}
