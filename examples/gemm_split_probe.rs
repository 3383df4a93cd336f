//! faer's parallel GEMM schedule vs one single-threaded GEMM per thread over half of C's
//! columns or rows (the reason `kernels::gemm` slices): `cargo run --release --example
//! gemm_split_probe -- M K N` prints three rounds of each, on a 2-thread pool.
use faer::{Accum, MatMut, MatRef, Par};
use std::time::Instant;
fn main() {
    pfor::tune_system_allocator().unwrap();
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (m, k, n) = (args[0], args[1], args[2]);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 5) as f32 * 0.1).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.1).collect();
    let mut c = vec![0f32; m * n];
    let reps = 400;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    pool.install(|| {
        for round in 0..3 {
            let t = Instant::now();
            for _ in 0..reps {
                let am = MatRef::from_row_major_slice(&a, m, k);
                let bm = MatRef::from_row_major_slice(&b, k, n);
                let cm = MatMut::from_row_major_slice_mut(&mut c, m, n);
                faer::linalg::matmul::matmul(cm, Accum::Replace, am, bm, 1.0f32, Par::rayon(0));
            }
            let t1 = t.elapsed().as_secs_f64() / reps as f64;
            let t = Instant::now();
            for _ in 0..reps {
                let am = MatRef::from_row_major_slice(&a, m, k);
                let bm = MatRef::from_row_major_slice(&b, k, n);
                let cm = MatMut::from_row_major_slice_mut(&mut c, m, n);
                let h = ((n / 2).div_ceil(16) * 16).min(n);
                let (c0, c1) = cm.split_at_col_mut(h);
                let (b0, b1) = bm.split_at_col(h);
                rayon::join(
                    || faer::linalg::matmul::matmul(c0, Accum::Replace, am, b0, 1.0f32, Par::Seq),
                    || faer::linalg::matmul::matmul(c1, Accum::Replace, am, b1, 1.0f32, Par::Seq),
                );
            }
            let t2 = t.elapsed().as_secs_f64() / reps as f64;
            let t = Instant::now();
            for _ in 0..reps {
                let am = MatRef::from_row_major_slice(&a, m, k);
                let bm = MatRef::from_row_major_slice(&b, k, n);
                let cm = MatMut::from_row_major_slice_mut(&mut c, m, n);
                let h = ((m / 2).div_ceil(16) * 16).min(m);
                let (c0, c1) = cm.split_at_row_mut(h);
                let (a0, a1) = am.split_at_row(h);
                rayon::join(
                    || faer::linalg::matmul::matmul(c0, Accum::Replace, a0, bm, 1.0f32, Par::Seq),
                    || faer::linalg::matmul::matmul(c1, Accum::Replace, a1, bm, 1.0f32, Par::Seq),
                );
            }
            let t3 = t.elapsed().as_secs_f64() / reps as f64;
            let f = 2.0 * (m * k * n) as f64 / 1e9;
            println!(
                "round {round}: faer par {:.1} us ({:.0} GF/s) | split n {:.1} us ({:.0}) | split m {:.1} us ({:.0})",
                t1 * 1e6,
                f / t1,
                t2 * 1e6,
                f / t2,
                t3 * 1e6,
                f / t3
            );
        }
    });
}
