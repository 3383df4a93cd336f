//! CPU vector-state hygiene around AVX-512 kernels.
//!
//! faer's GEMM micro-kernels leave the upper halves of the ZMM registers dirty on the threads
//! that ran them. On this class of x86-64 CPU, every legacy-SSE instruction executed in that
//! state pays a merge penalty: measured, an SSE sigmoid loop ran at 6.2 ns per element right
//! after a dirty AVX-512 instruction and 1.3 ns after `vzeroupper` — and the crate's
//! auto-vectorized elementwise kernels are compiled for the x86-64 baseline (SSE2). In the W3
//! LSTM every gate kernel after the step's GEMM ran in that state.
//!
//! Invariants: [`clear_upper`] only zeroes the upper register halves (no value of the
//! program lives there across a call: the ABI treats them as clobbered), so it never
//! changes results; [`crate::kernels::gemm`] calls it on the calling thread after every
//! faer GEMM, and on every rayon worker after a parallel one ([`clear_upper_on_workers`],
//! queued without waiting). The crate's own AVX-512 loops (`kernels::fastmath`) are
//! compiled functions whose epilogue LLVM ends with `vzeroupper`.

/// Zero the upper halves of the vector registers on this thread (`vzeroupper`), when the CPU
/// has AVX; a no-op elsewhere.
///
/// ```
/// use pfor::kernels::simd::{clear_upper, clear_upper_on_workers, widest};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// clear_upper(); // after AVX-512 code, before SSE code on this thread; a no-op without AVX
/// # Ok(())
/// # }
/// ```
#[inline]
pub fn clear_upper() {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx")]
        fn vzeroupper() {
            std::arch::x86_64::_mm256_zeroupper();
        }
        if crate::kernels::cpu::caps().avx {
            // SAFETY: the CPU supports AVX (checked just above).
            unsafe { vzeroupper() }
        }
    }
}

/// Queue [`clear_upper`] on every rayon worker (after a parallel AVX-512 kernel ran on
/// them); returns at once, the workers run it before their next job.
///
/// ```
/// use pfor::kernels::simd::{clear_upper, clear_upper_on_workers, widest};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// clear_upper_on_workers(); // queued on every rayon worker; returns at once
/// # Ok(())
/// # }
/// ```
pub fn clear_upper_on_workers() {
    #[cfg(target_arch = "x86_64")]
    if rayon::current_num_threads() > 1 {
        rayon::spawn_broadcast(|_| clear_upper());
    }
}

/// Run `f` compiled for the widest vector extension this CPU has (AVX-512F, else AVX2, else
/// the baseline): the closure's loops are inlined into a `#[target_feature]` function, so
/// they vectorize 16 or 8 lanes wide. The same IEEE operations run in every variant (no
/// fused multiply-add contraction), so results are identical.
///
/// Mark the closure `#[inline(always)]` (and the kernel functions it calls): the closure is
/// called from three variants, and LLVM declines to inline a large closure with several
/// call sites, leaving a jump to a body compiled for the baseline (SSE2) — correct, but
/// 4x narrower. Forced inlining is what puts the loops in the wide variant.
///
/// ```
/// use pfor::kernels::simd::{clear_upper, clear_upper_on_workers, widest};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let xs: Vec<f32> = (0..1000).map(|i| i as f32).collect();
/// // the loop is compiled for AVX-512F, AVX2 or the baseline, whichever this CPU has
/// let sum = widest(#[inline(always)] || xs.iter().map(|x| x * 2.0).sum::<f32>());
/// assert_eq!(sum, 999_000.0);
/// # Ok(())
/// # }
/// ```
#[inline(always)]
pub fn widest<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn avx512<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx2")]
        fn avx2<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if crate::kernels::cpu::caps().avx512f {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { avx512(f) };
        }
        if crate::kernels::cpu::caps().avx2 {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { avx2(f) };
        }
    }
    f()
}

macro_rules! stream_outer_rows {
    ($name:ident, $t:ty, $lanes:expr, $stream:ident, $set1:ident, $loadu:ident, $mul:ident) => {
        /// Outer-product rows `out[r*n + j] = x(r) * y(r)[j]` written with non-temporal
        /// stores (for outputs far larger than the caches: no read-for-ownership of lines
        /// that are only written), one store fence at the end. False (nothing written) on
        /// CPUs without AVX-512F.
        pub fn $name<'a>(out: &mut [$t], n: usize, x: &dyn Fn(usize) -> $t, y: &dyn Fn(usize) -> &'a [$t]) -> bool {
            #[cfg(target_arch = "x86_64")]
            if crate::kernels::cpu::caps().avx512f {
                #[target_feature(enable = "avx512f")]
                fn nt<'a>(out: &mut [$t], n: usize, x: &dyn Fn(usize) -> $t, y: &dyn Fn(usize) -> &'a [$t]) {
                    use std::arch::x86_64::{_mm_sfence, $loadu, $mul, $set1, $stream};
                    for (r, row) in out.chunks_exact_mut(n.max(1)).enumerate() {
                        let (xr, src) = (x(r), y(r));
                        let src = &src[..src.len().min(row.len())];
                        let row = &mut row[..src.len()];
                        // scalar head up to a 64-byte boundary, streamed body, scalar tail
                        let head = row.as_ptr().align_offset(64).min(row.len());
                        let body = (row.len() - head) / $lanes * $lanes;
                        let (d0, rest) = row.split_at_mut(head);
                        let (d1, d2) = rest.split_at_mut(body);
                        let (s0, rest) = src.split_at(head);
                        let (s1, s2) = rest.split_at(body);
                        for (o, &v) in d0.iter_mut().zip(s0).chain(d2.iter_mut().zip(s2)) {
                            *o = xr * v;
                        }
                        let xv = $set1(xr);
                        for (o, v) in d1.chunks_exact_mut($lanes).zip(s1.chunks_exact($lanes)) {
                            // SAFETY: `o` and `v` hold LANES elements; `o` is 64-byte aligned
                            // (the body starts at an aligned offset and advances by 64 bytes).
                            unsafe { $stream(o.as_mut_ptr(), $mul(xv, $loadu(v.as_ptr()))) };
                        }
                    }
                    // the streaming stores are weakly ordered: fence before anyone reads
                    _mm_sfence();
                }
                // SAFETY: the CPU supports AVX-512F (checked just above).
                unsafe { nt(out, n, x, y) };
                return true;
            }
            let _ = (out, n, x, y);
            false
        }
    };
}

stream_outer_rows!(stream_outer_rows_f32, f32, 16, _mm512_stream_ps, _mm512_set1_ps, _mm512_loadu_ps, _mm512_mul_ps);
stream_outer_rows!(stream_outer_rows_f64, f64, 8, _mm512_stream_pd, _mm512_set1_pd, _mm512_loadu_pd, _mm512_mul_pd);
