//! The numeric kernels: GEMM, the AVX-512 register-blocked micro-kernel of Winograd and
//! per-example filter gradients, vectorized f32 math, and the opt-in allocator tuning for
//! large-tensor workloads ([`alloc::tune_system_allocator`], and the caching global allocator
//! [`alloc::TensorAllocator`], the one process-wide switch here: it never changes results).
//!
//! Invariants: kernels read CPU features only through [`cpu::caps`] (probed once), and the
//! optional kernels a caller may take only through a [`KernelOptions`] value handed to them
//! (the session's options inside a run, [`KernelOptions::default`] outside one): no kernel
//! reads the environment or a process-wide switch.

pub mod alloc;
pub(crate) mod conv;
pub mod cpu;
pub mod fastmath;
pub mod gemm;
pub(crate) mod micro;
pub mod simd;

/// Winograd filter transforms computed on the calling thread so far (for tests: a plan with
/// a constant filter transforms it when compiled, not when run).
#[doc(hidden)]
pub fn winograd_filter_transforms() -> u64 {
    conv::winograd::transforms_on_this_thread()
}

/// Elements above which elementwise-like kernels use rayon (rayon costs ~15–35 µs per call).
pub const PAR_THRESHOLD: usize = 1 << 17;

/// Which optional kernels a call may take: the kernel-level knobs of
/// `ExecOptions` (`winograd`, `atb`), handed to kernels by value. Each one only picks
/// among kernels that compute the same op; [`Default`] turns all on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelOptions {
    /// Winograd F(2x2, 5x5) for the 5x5 stride-1 f32 convs it handles (AVX-512 CPUs).
    pub winograd: bool,
    /// The depth-major batched GEMM kernel for `Aᵀ B` items (per-example weight gradients)
    /// instead of faer ([`gemm::atb_batched`]).
    pub atb: bool,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions { winograd: true, atb: true }
    }
}
