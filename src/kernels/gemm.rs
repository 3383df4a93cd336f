//! Row-major GEMM on slices: `C (+)= op(A) · op(B)` with faer for floats.
//!
//! Invariants: `a`, `b`, `c` are dense row-major buffers of the stated logical shapes
//! (`op(A)` is `[m,k]`, `op(B)` is `[k,n]`, `C` is `[m,n]`); lengths are checked (an `Err`,
//! never a panic). faer runs single-threaded below [`PAR_FLOPS`] multiply-adds (rayon
//! overhead dominates small products) and on the rayon pool above it.

use faer::{Accum, MatMut, MatRef, Par};

use crate::error::{Error, Result};
use crate::tensor::Element;

/// Multiply-add count above which GEMM runs multi-threaded.
pub const PAR_FLOPS: usize = 1 << 21;

/// Element types with a GEMM kernel.
pub trait GemmElem: Element + Default + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    /// `c (+)= op(a) op(b)`; buffers already validated.
    #[allow(clippy::too_many_arguments)]
    fn gemm_raw(m: usize, k: usize, n: usize, a: &[Self], ta: bool, b: &[Self], tb: bool, c: &mut [Self], acc: bool);
}

fn par_for(m: usize, k: usize, n: usize) -> Par {
    if m.saturating_mul(k).saturating_mul(n) >= PAR_FLOPS && rayon::current_num_threads() > 1 {
        Par::rayon(0)
    } else {
        Par::Seq
    }
}

macro_rules! faer_gemm {
    ($t:ty) => {
        impl GemmElem for $t {
            fn gemm_raw(m: usize, k: usize, n: usize, a: &[$t], ta: bool, b: &[$t], tb: bool, c: &mut [$t], acc: bool) {
                if m == 0 || n == 0 {
                    return;
                }
                let mut cm = MatMut::from_row_major_slice_mut(c, m, n);
                if k == 0 {
                    if !acc {
                        cm.fill(0.0);
                    }
                    return;
                }
                let am = if ta {
                    MatRef::from_row_major_slice(a, k, m).transpose()
                } else {
                    MatRef::from_row_major_slice(a, m, k)
                };
                let bm = if tb {
                    MatRef::from_row_major_slice(b, n, k).transpose()
                } else {
                    MatRef::from_row_major_slice(b, k, n)
                };
                let accum = if acc { Accum::Add } else { Accum::Replace };
                let par = par_for(m, k, n);
                faer::linalg::matmul::matmul(cm, accum, am, bm, 1.0, par);
                // faer's AVX-512 micro-kernels leave dirty upper register state, which makes
                // the SSE code that follows several times slower (see `kernels::simd`)
                crate::kernels::simd::clear_upper();
                if !matches!(par, Par::Seq) {
                    crate::kernels::simd::clear_upper_on_workers();
                }
            }
        }
    };
}
faer_gemm!(f32);
faer_gemm!(f64);

impl GemmElem for i64 {
    fn gemm_raw(m: usize, k: usize, n: usize, a: &[i64], ta: bool, b: &[i64], tb: bool, c: &mut [i64], acc: bool) {
        for i in 0..m {
            for j in 0..n {
                let mut s = if acc { c[i * n + j] } else { 0 };
                for p in 0..k {
                    let x = if ta { a[p * m + i] } else { a[i * k + p] };
                    let y = if tb { b[j * k + p] } else { b[p * n + j] };
                    s = s.wrapping_add(x.wrapping_mul(y));
                }
                c[i * n + j] = s;
            }
        }
    }
}

/// `c = op(a) · op(b)` (or `c += ...` with `accumulate`), row-major. `op(a)` is `[m,k]`
/// (`a` is stored `[k,m]` when `trans_a`), `op(b)` is `[k,n]` (stored `[n,k]` when `trans_b`).
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: GemmElem>(
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    trans_a: bool,
    b: &[T],
    trans_b: bool,
    c: &mut [T],
    accumulate: bool,
) -> Result<()> {
    if a.len() != m * k || b.len() != k * n || c.len() != m * n {
        return Err(Error::shape(
            "gemm",
            format!("buffers of {}, {}, {} elements for m={m}, k={k}, n={n}", a.len(), b.len(), c.len()),
        ));
    }
    T::gemm_raw(m, k, n, a, trans_a, b, trans_b, c, accumulate);
    Ok(())
}
