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
#[inline]
pub fn clear_upper() {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx")]
        fn vzeroupper() {
            std::arch::x86_64::_mm256_zeroupper();
        }
        if std::arch::is_x86_feature_detected!("avx") {
            // SAFETY: the CPU supports AVX (checked just above).
            unsafe { vzeroupper() }
        }
    }
}

/// Queue [`clear_upper`] on every rayon worker (after a parallel AVX-512 kernel ran on
/// them); returns at once, the workers run it before their next job.
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
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F (checked just above).
            return unsafe { avx512(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { avx2(f) };
        }
    }
    f()
}
