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

pub use conv::winograd::Schedule as WinogradSchedule;

/// `y [N, H, W, O] = relu?(conv2d(x, w) + bias + residual)` for `x [N, H, W, C]` and
/// `w [k, k, C, O]` (stride 1, SAME padding, odd `k`) by the f32 Winograd kernel alone, its
/// cost rule skipped, with this schedule: for tests and probes. `Ok(None)` where the kernel
/// does not take the conv (CPU, filter size, channel counts); an error when the buffers do
/// not have the shapes' lengths, when a shape's element count overflows, or when the output
/// cannot be allocated (`OutOfMemory`, never an abort).
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn winograd_conv2d(
    x: &[f32],
    [n, h, w, c]: [usize; 4],
    f: &[f32],
    [k, o]: [usize; 2],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    relu: bool,
    schedule: WinogradSchedule,
) -> crate::Result<Option<Vec<f32>>> {
    const OP: &str = "winograd_conv2d";
    let (len, x_len, f_len) = (
        alloc::checked_len(OP, &[n, h, w, o])?,
        alloc::checked_len(OP, &[n, h, w, c])?,
        alloc::checked_len(OP, &[k, k, c, o])?,
    );
    if x.len() != x_len
        || f.len() != f_len
        || k % 2 == 0
        || bias.is_some_and(|b| b.len() != o)
        || residual.is_some_and(|r| r.len() != len)
    {
        return Err(crate::Error::shape(
            OP,
            format!(
                "x of {} for [{n}, {h}, {w}, {c}], filter of {} for [{k}, {k}, {c}, {o}] (odd k), bias of {:?}, residual of {:?}",
                x.len(),
                f.len(),
                bias.map(<[f32]>::len),
                residual.map(<[f32]>::len)
            ),
        ));
    }
    let p = k.saturating_sub(1) / 2;
    let g = conv::Geom { n, h, w, c, kh: k, kw: k, o, oh: h, ow: w, sh: 1, sw: 1, dh: 1, dw: 1, pt: p, pl: p };
    let epi = conv::im2col::Epilogue { bias, residual, relu, filter: None };
    let mut out = alloc::try_zeroed::<f32>(OP, len)?;
    Ok(conv::winograd::conv2d_scheduled(&g, x, f, epi, &mut out, schedule).then_some(out))
}

/// Elements above which elementwise-like kernels use rayon (rayon costs ~15–35 µs per call).
pub const PAR_THRESHOLD: usize = 1 << 17;

/// Which optional kernels a call may take, and how: the kernel-level knobs of
/// `ExecOptions` (`winograd`, `atb`, `implicit_gemm`, `winograd_schedule`,
/// `winograd3_rule`), handed to kernels by value. Each one only picks among kernels (or
/// schedules) that compute the same op; [`Default`] is the built-in choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelOptions {
    /// Winograd F(2x2, 5x5) for the 5x5 stride-1 f32 convs it handles (AVX-512 CPUs).
    pub winograd: bool,
    /// The depth-major batched GEMM kernel for `Aᵀ B` items (per-example weight gradients)
    /// instead of faer ([`gemm::atb_batched`]).
    pub atb: bool,
    /// The implicit-GEMM kernel for f32 convs over more than 4 channels (AVX-512 CPUs;
    /// `kernels::conv::implicit`) instead of im2col + GEMM.
    pub implicit_gemm: bool,
    /// The Winograd kernel's schedule (tile- or point-major; `Auto` by its rule).
    pub winograd_schedule: WinogradSchedule,
    /// F(4x4, 3x3) Winograd only where its cost rule says it beats im2col (on), or for
    /// every conv the kernel handles (off: for measuring the rule).
    pub winograd3_rule: bool,
}

impl Default for KernelOptions {
    fn default() -> Self {
        KernelOptions {
            winograd: true,
            atb: true,
            implicit_gemm: true,
            winograd_schedule: WinogradSchedule::Auto,
            winograd3_rule: true,
        }
    }
}
