//! GEMM rate by shape: `cargo run --release --example gemm_rates -- K N [M...]` prints
//! GFLOP/s of `[M,K] x [K,N]` (f32, row-major, our `kernels::gemm`) for each `M`; `--ta` / `--tb`
//! store `A` / `B` transposed (`[K,M]` / `[N,K]`).
use std::time::Instant;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

fn main() -> pfor::Result<()> {
    pfor::tune_system_allocator()?;
    let ta = std::env::args().any(|a| a == "--ta");
    let tb = std::env::args().any(|a| a == "--tb");
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (k, n) = (args.first().copied().unwrap_or(384), args.get(1).copied().unwrap_or(1024));
    let ms: Vec<usize> = if args.len() > 2 { args[2..].to_vec() } else { vec![512, 256, 128, 64, 32, 16, 8, 4, 1] };
    let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.1).collect();
    for m in ms {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 5) as f32 * 0.1).collect();
        let mut c = vec![0f32; m * n];
        let reps = (2e9 / (2.0 * (m * k * n) as f64)).clamp(3.0, 5000.0) as usize;
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t = Instant::now();
            for _ in 0..reps {
                pfor::kernels::gemm::gemm(m, k, n, &a, ta, &b, tb, &mut c, false)?;
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        println!(
            "m={m:5} k={k} n={n} ta={ta} tb={tb}: {:8.1} us  {:6.1} GFLOP/s",
            best * 1e6,
            2.0 * (m * k * n) as f64 / best / 1e9
        );
    }
    Ok(())
}
