//! faer's parallel GEMM schedule vs one single-threaded GEMM per thread over half of C's
//! columns or rows (the reason `kernels::gemm` slices): `cargo run --release --example
//! gemm_split_probe -- M K N` prints three rounds of each, on a 2-thread pool.
use faer::{Accum, MatMut, MatRef, Par};
use std::time::Instant;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

/// How the product is computed.
#[derive(Clone, Copy)]
enum How {
    FaerParallel,
    HalvesOfColumns,
    HalvesOfRows,
}

fn gemm(how: How, c: MatMut<'_, f32>, a: MatRef<'_, f32>, b: MatRef<'_, f32>) {
    let mm = |c, a, b| faer::linalg::matmul::matmul(c, Accum::Replace, a, b, 1.0f32, Par::Seq);
    match how {
        How::FaerParallel => faer::linalg::matmul::matmul(c, Accum::Replace, a, b, 1.0f32, Par::rayon(0)),
        How::HalvesOfColumns => {
            let h = (c.ncols() / 2).div_ceil(16) * 16;
            let h = h.min(c.ncols());
            let ((c0, c1), (b0, b1)) = (c.split_at_col_mut(h), b.split_at_col(h));
            rayon::join(|| mm(c0, a, b0), || mm(c1, a, b1));
        }
        How::HalvesOfRows => {
            let h = ((c.nrows() / 2).div_ceil(16) * 16).min(c.nrows());
            let ((c0, c1), (a0, a1)) = (c.split_at_row_mut(h), a.split_at_row(h));
            rayon::join(|| mm(c0, a0, b), || mm(c1, a1, b));
        }
    }
}

fn main() {
    pfor::tune_system_allocator().unwrap();
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (m, k, n) = (args[0], args[1], args[2]);
    let a: Vec<f32> = (0..m * k).map(|i| (i % 5) as f32 * 0.1).collect();
    let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.1).collect();
    let mut c = vec![0f32; m * n];
    let reps = 400;
    let gflop = 2.0 * (m * k * n) as f64 / 1e9;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    pool.install(|| {
        for round in 0..3 {
            let mut line = format!("round {round}:");
            for (name, how) in
                [("faer par", How::FaerParallel), ("split n", How::HalvesOfColumns), ("split m", How::HalvesOfRows)]
            {
                let t = Instant::now();
                for _ in 0..reps {
                    let (am, bm) = (MatRef::from_row_major_slice(&a, m, k), MatRef::from_row_major_slice(&b, k, n));
                    gemm(how, MatMut::from_row_major_slice_mut(&mut c, m, n), am, bm);
                }
                let dt = t.elapsed().as_secs_f64() / reps as f64;
                line += &format!(" {name} {:.1} us ({:.0} GF/s) |", dt * 1e6, gflop / dt);
            }
            println!("{}", line.trim_end_matches(" |"));
        }
    });
}
