//! Elementwise fusion on its own: the LSTM cell's gate and state ops (`split` of a
//! `[m, 1024]` pre-activation, three sigmoids, two tanh, three muls, one add) timed with
//! and without `ExecOptions::fuse`, best of many runs, per row count `m` (`NOBIAS=1` leaves
//! out the `bias_add` before the split).
//!
//! `cargo run --release --example fusion_micro [-- M...]`
use std::time::Instant;

use pfor::prelude::*;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

/// A graph, its fetches and its feeds.
type Case = (Graph, Vec<ValueId>, Vec<(ValueId, Tensor)>);

fn cell(m: usize) -> Result<Case> {
    let hid = 256;
    let mut g = Graph::new();
    let zin = g.input("z", DType::F32, [m, 4 * hid]);
    let c = g.input("c", DType::F32, [m, hid]);
    let b = g.input("b", DType::F32, [4 * hid]);
    let z = if std::env::var_os("NOBIAS").is_some() { zin } else { g.bias_add(zin, b)? };
    let gates = g.split(z, 1, &[hid; 4])?;
    let (h2, c2) = pfor::api::lstm_gates(&mut g, [gates[0], gates[1], gates[2], gates[3]], c)?;
    let feeds = vec![
        (zin, Tensor::randn(&[m, 4 * hid], 1)?),
        (c, Tensor::randn(&[m, hid], 2)?),
        (b, Tensor::randn(&[4 * hid], 3)?),
    ];
    Ok((g, vec![h2, c2], feeds))
}

fn main() -> Result<()> {
    pfor::tune_system_allocator()?;
    let ms: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let ms = if ms.is_empty() { vec![512, 256, 64, 8] } else { ms };
    println!("| m | unfused us | fused us | unfused/fused |\n|---|---|---|---|");
    for m in ms {
        let (g, fetch, feeds) = cell(m)?;
        let mut t = [0.0f64; 2];
        for (k, fuse) in [false, true].into_iter().enumerate() {
            let opts = ExecOptions { fuse, ..ExecOptions::default() };
            let mut s = Session::with_options(&g, &fetch, opts)?;
            let reps = (200_000 / m).clamp(20, 20_000);
            let mut best = f64::INFINITY;
            for _ in 0..5 {
                let t0 = Instant::now();
                for _ in 0..reps {
                    s.run(&feeds)?;
                }
                best = best.min(t0.elapsed().as_secs_f64() / reps as f64);
            }
            t[k] = best * 1e6;
        }
        println!("| {m} | {:.1} | {:.1} | {:.2} |", t[0], t[1], t[0] / t[1]);
    }
    Ok(())
}
