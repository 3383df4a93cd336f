//! Probe: rate of `GemmElem::atb` (Aᵀ B of depth-major operands) vs faer on one thread,
//! one cache-resident item repeated and many distinct items.
//! `cargo run --release --example atb_probe -- [m] [k] [n] [items]`.
use std::time::Instant;

use pfor::kernels::gemm::{GemmElem, gemm};

fn main() {
    let a: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    let (m, k, n, items) = (
        a.first().copied().unwrap_or(800),
        a.get(1).copied().unwrap_or(196),
        a.get(2).copied().unwrap_or(64),
        a.get(3).copied().unwrap_or(64),
    );
    let av: Vec<f32> = (0..items * m * k).map(|i| ((i * 7919) % 1000) as f32 * 1e-3).collect();
    let bv: Vec<f32> = (0..items * k * n).map(|i| ((i * 104729) % 1000) as f32 * 1e-3).collect();
    let mut c = vec![0f32; items * m * n];
    let flops = 2.0 * (m * k * n) as f64;
    for (name, distinct) in [("same item", false), ("distinct items", true)] {
        for kernel in ["atb", "faer"] {
            let mut best = f64::INFINITY;
            for _ in 0..5 {
                let t = Instant::now();
                for i in 0..items {
                    let j = if distinct { i } else { 0 };
                    let (ai, bi, ci) =
                        (&av[j * m * k..][..m * k], &bv[j * k * n..][..k * n], &mut c[j * m * n..][..m * n]);
                    if kernel == "atb" {
                        assert!(f32::atb(m, k, n, ai, bi, ci));
                    } else {
                        gemm(m, k, n, ai, true, bi, false, ci, false).unwrap();
                    }
                }
                best = best.min(t.elapsed().as_secs_f64());
            }
            println!("{name:15} {kernel:5} [{k},{m}]ᵀ[{k},{n}]: {:.1} GFLOP/s", flops * items as f64 / best / 1e9);
        }
    }
}
