//! The small-`M` f32 GEMM path (`kernels::gemm`, `M <= SMALL_M` rows, `N` a multiple of 16,
//! on AVX-512 CPUs: the register-blocked micro-kernel reading `B` in place, threads over
//! 64-column blocks) against a naive reference: odd `M`, `N`, `K` including 0 and 1, row
//! counts around the 6-row block and the `SMALL_M` limit, column counts with partial 64-wide
//! blocks and more blocks than threads or fewer; from a 2-thread pool (column parts run in
//! parallel) and from outside it. Small-integer data: the sums are exact in any order.

use pfor::kernels::gemm::{SMALL_M, gemm};

fn check(m: usize, k: usize, n: usize) {
    let a: Vec<f32> = (0..m * k).map(|x| ((x * 7) % 5) as f32 - 2.0).collect();
    let b: Vec<f32> = (0..k * n).map(|x| ((x * 3) % 7) as f32 - 3.0).collect();
    let mut want = vec![0.0f32; m * n];
    for i in 0..m {
        for p in 0..k {
            let x = a[i * k + p];
            for j in 0..n {
                want[i * n + j] += x * b[p * n + j];
            }
        }
    }
    // a stale output (NaN) must be overwritten everywhere
    let mut c = vec![f32::NAN; m * n];
    gemm(m, k, n, &a, false, &b, false, &mut c, false).unwrap();
    assert!(c.iter().zip(&want).all(|(x, w)| x == w), "m={m} k={k} n={n}");
    // accumulating products keep to the general path: c + a·b
    let mut c = vec![1.0f32; m * n];
    gemm(m, k, n, &a, false, &b, false, &mut c, true).unwrap();
    assert!(c.iter().zip(&want).all(|(x, w)| *x == w + 1.0), "acc m={m} k={k} n={n}");
}

fn cases() {
    for (m, k, n) in [
        (1, 1, 16),
        (0, 5, 32),
        (3, 0, 48),
        (5, 3, 0),
        (7, 33, 80),
        (6, 64, 64),
        (13, 100, 144),
        (49, 512, 2048),
        (SMALL_M, 40, 272),
        (SMALL_M + 1, 40, 96),
        (49, 300, 130),
        (196, 257, 1040),
    ] {
        check(m, k, n);
    }
}

#[test]
fn small_m_gemm_matches_naive_on_and_off_the_pool() {
    cases();
    rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap().install(cases);
    rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap().install(cases);
}
