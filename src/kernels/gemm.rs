//! Row-major GEMM on slices: `C (+)= op(A) · op(B)` with faer for floats.
//!
//! Invariants: `a`, `b`, `c` are dense row-major buffers of the stated logical shapes
//! (`op(A)` is `[m,k]`, `op(B)` is `[k,n]`, `C` is `[m,n]`); lengths are checked (an `Err`,
//! never a panic). faer runs single-threaded below [`PAR_FLOPS`] multiply-adds (rayon
//! overhead dominates small products) and on the rayon pool above it: as one independent
//! single-threaded faer GEMM per thread over a slice of `C`'s columns (or rows, when `C` is
//! taller than wide) when called on a pool thread, every slice gets at least [`MIN_SLICE`]
//! of them and `C` has at least 16 rows and columns; else with faer's own parallel schedule.
//!
//! Why slices: measured on the project's 2-core machine (`examples/gemm_split_probe.rs`),
//! faer's parallel schedule synchronizes its threads inside the product and reaches 143-276
//! GFLOP/s on thin shapes (`[128,1024]x[1024,128]`, `[128,128]x[128,1024]`), where two
//! independent halves reach 419-433; on square and tall shapes the halves are as fast or a
//! few percent faster (`[4096,768]x[768,768]`: 388 → 422). Each slice is a whole GEMM over
//! the full `k`, so no partial sums cross threads (the slicing depends only on the shape and
//! the thread count, so a given call is deterministic).

use faer::{Accum, MatMut, MatRef, Par};

use crate::error::{Error, Result};
use crate::kernels::conv::im2col::Epilogue;
#[cfg(target_arch = "x86_64")]
use crate::kernels::micro::Finish;
use crate::tensor::Element;

/// Multiply-add count above which GEMM runs multi-threaded.
pub const PAR_FLOPS: usize = 1 << 21;
/// Fewest columns (or rows) per thread for the sliced parallel GEMM.
pub const MIN_SLICE: usize = 64;
/// Fewest rows and columns of `C` for the sliced parallel GEMM.
const MIN_OTHER: usize = 16;

/// Element types with a GEMM kernel.
pub trait GemmElem: Element + Default + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    /// `c (+)= op(a) op(b)`; buffers already validated. `par`: may run multi-threaded (see
    /// the module docs); false keeps it on the calling thread whatever its size.
    #[allow(clippy::too_many_arguments)]
    fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        a: &[Self],
        ta: bool,
        b: &[Self],
        tb: bool,
        c: &mut [Self],
        acc: bool,
        par: bool,
    );
    /// `c [m, n] = aᵀ b` for depth-major `a [k, m]` and `b [k, n]` by a register-blocked
    /// kernel that needs no packing, where one takes the shapes ([`atb_applies`]) on this
    /// CPU; false (nothing written) elsewhere.
    fn atb(m: usize, k: usize, n: usize, a: &[Self], b: &[Self], c: &mut [Self]) -> bool {
        let _ = (m, k, n, a, b, c);
        false
    }
    /// [`GemmElem::atb`] has a kernel on this CPU.
    fn has_atb() -> bool {
        false
    }
    /// Whether `[m, k] x [k, n]` (row-major operands, no accumulation) runs the in-place
    /// kernel on this CPU ([`ab_applies`]): no operand is copied into panels, so a caller
    /// that splits the rows into independent products makes each read all of `B`.
    fn in_place(m: usize, k: usize, n: usize) -> bool {
        let _ = (m, k, n);
        false
    }
    /// Rows of an outer product: `out[r*n + j] = x[r] * y(r)[j]` for the `out.len() / n`
    /// rows, `y(r)` the row's `n` values. `stream`: the whole output is far larger than the
    /// caches, so floats bypass them with non-temporal stores where the CPU has AVX-512
    /// (the same products, so the same results).
    fn outer_rows<'a>(
        out: &mut [Self],
        n: usize,
        x: impl Fn(usize) -> Self,
        y: impl Fn(usize) -> &'a [Self],
        stream: bool,
    ) where
        Self: 'a,
    {
        let _ = stream;
        plain_outer_rows(out, n, x, y)
    }
}

/// One product `c [m, n] = epi(a [m, k] · B)` with `B` in [`Panels`] ([`PanelGemm`]): the
/// epilogue's residual is read from element `at` on (`c` is that part of the whole output).
pub(crate) struct PanelProduct<'a, T> {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a: &'a [T],
    pub panels: &'a Panels,
    /// May split over the rayon pool.
    pub par: bool,
    pub epi: &'a Epilogue<'a, T>,
    pub at: usize,
}

/// The in-place product by a [`Panels`] operand, its blocks finished with a conv's
/// epilogue (crate-internal: the epilogue type is the conv kernels').
pub(crate) trait PanelGemm: Sized {
    /// `c = p`'s product (no accumulation) where the in-place kernel takes the shapes on
    /// this CPU; false (nothing written) elsewhere. The epilogue is applied in registers
    /// before each block is stored: the values the separate pass `epi.apply(c, n, at)` would
    /// give.
    fn gemm_panels(p: &PanelProduct<'_, Self>, c: &mut [Self]) -> bool {
        let _ = (p, c);
        false
    }
}

impl PanelGemm for f32 {
    fn gemm_panels(p: &PanelProduct<'_, f32>, c: &mut [f32]) -> bool {
        panels_f32(p, c)
    }
}

/// No panel kernel: f64 multiplies by the row-major `B` (faer).
impl PanelGemm for f64 {}

/// [`GemmElem::outer_rows`] with ordinary stores.
fn plain_outer_rows<'a, T: GemmElem + 'a>(
    out: &mut [T],
    n: usize,
    x: impl Fn(usize) -> T,
    y: impl Fn(usize) -> &'a [T],
) {
    for (r, row) in out.chunks_exact_mut(n.max(1)).enumerate() {
        let xr = x(r);
        for (o, &v) in row.iter_mut().zip(y(r)) {
            *o = xr * v;
        }
    }
}

fn par_for(m: usize, k: usize, n: usize, allowed: bool) -> Par {
    if allowed && m.saturating_mul(k).saturating_mul(n) >= PAR_FLOPS && rayon::current_num_threads() > 1 {
        Par::rayon(0)
    } else {
        Par::Seq
    }
}

/// How to slice `C` `[m, n]` over `threads`: `(along columns, slice length)`, a multiple of 16
/// (whole vector registers) with at least [`MIN_SLICE`] per thread; `None` when too small.
fn slices(m: usize, n: usize, threads: usize) -> Option<(bool, usize)> {
    // Matrix-vector shapes stay with faer's schedule: its single-threaded kernels are made
    // for blocks, and a [1,3136]x[3136,512] slice ran 2.3x slower than faer's parallel GEMV.
    // So do calls from outside the pool: there the slices start one wake-up apart (the second
    // worker is woken by the first); `[64,768]x[768,768]` from the main thread ran at 212
    // GFLOP/s sliced vs 290 with faer's schedule. Runs that issue big products are handed to
    // a pool thread (`exec::workers`), where the same product sliced takes 226-235 us against
    // 283-291 us with faer's schedule from the caller.
    if m < MIN_OTHER || n < MIN_OTHER || rayon::current_thread_index().is_none() {
        return None;
    }
    let along_n = n >= m;
    let len = if along_n { n } else { m };
    if threads < 2 || len / threads < MIN_SLICE {
        return None;
    }
    Some((along_n, len.div_ceil(threads).div_ceil(16) * 16))
}

/// Shapes that [`GemmElem::atb`] takes: whole vectors of columns and a depth whose
/// `[k, 64]` block of `b` stays in L2 while every row block of `a` passes over it (measured
/// on W4's per-example conv filter gradients, `[196, 800]ᵀ [196, 64]`: ~1.9x faer, which
/// packs `a` first).
pub fn atb_applies(m: usize, k: usize, n: usize) -> bool {
    n.is_multiple_of(crate::kernels::micro::LANES) && n > 0 && m > 0 && (1..=1024).contains(&k)
}

/// Batched products of `batch` depth-major items that run [`GemmElem::atb`] per item (one
/// item per task) instead of faer: kernel shapes, enough items for every thread, and not
/// turned off by [`KernelOptions::atb`](super::KernelOptions::atb) (`ExecOptions::atb`,
/// `PFOR_NO_ATB=1`: for A/B measurements). The one decision `batch_matmul` and the
/// executor's fused patch product share, so the fused kernel runs exactly where the unfused
/// product would run `atb`.
pub fn atb_batched(opts: super::KernelOptions, batch: usize, m: usize, k: usize, n: usize) -> bool {
    opts.atb && batch >= 2 * rayon::current_num_threads() && atb_applies(m, k, n)
}

macro_rules! faer_gemm {
    ($t:ty, $stream_rows:path, $atb:ident, $has_atb:ident, $ab:ident) => {
        impl GemmElem for $t {
            fn atb(m: usize, k: usize, n: usize, a: &[$t], b: &[$t], c: &mut [$t]) -> bool {
                $atb(m, k, n, a, b, c)
            }
            fn has_atb() -> bool {
                $has_atb()
            }
            fn in_place(m: usize, k: usize, n: usize) -> bool {
                $has_atb() && ab_applies(m, k, n)
            }
            fn outer_rows<'a>(
                out: &mut [$t],
                n: usize,
                x: impl Fn(usize) -> $t,
                y: impl Fn(usize) -> &'a [$t],
                stream: bool,
            ) {
                if !(stream && $stream_rows(out, n, &x, &y)) {
                    plain_outer_rows(out, n, x, y);
                }
            }
            fn gemm_raw(
                m: usize,
                k: usize,
                n: usize,
                a: &[$t],
                ta: bool,
                b: &[$t],
                tb: bool,
                c: &mut [$t],
                acc: bool,
                par: bool,
            ) {
                if m == 0 || n == 0 || $ab(m, k, n, a, ta, b, tb, c, acc, par) {
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
                let par = par_for(m, k, n, par);
                let threads = rayon::current_num_threads();
                match (par, slices(m, n, threads)) {
                    (Par::Rayon(_), Some((along_n, step))) => {
                        use rayon::prelude::*;
                        let mut parts = Vec::with_capacity(threads);
                        let (mut c_rest, mut a_rest, mut b_rest) = (cm, am, bm);
                        loop {
                            let len = if along_n { c_rest.ncols() } else { c_rest.nrows() };
                            if len <= step {
                                parts.push((c_rest, a_rest, b_rest));
                                break;
                            }
                            if along_n {
                                let (c0, c1) = c_rest.split_at_col_mut(step);
                                let (b0, b1) = b_rest.split_at_col(step);
                                parts.push((c0, a_rest, b0));
                                (c_rest, b_rest) = (c1, b1);
                            } else {
                                let (c0, c1) = c_rest.split_at_row_mut(step);
                                let (a0, a1) = a_rest.split_at_row(step);
                                parts.push((c0, a0, b_rest));
                                (c_rest, a_rest) = (c1, a1);
                            }
                        }
                        // each slice cleans the register state of the thread that ran it
                        parts.into_par_iter().for_each(|(c, a, b)| {
                            faer::linalg::matmul::matmul(c, accum, a, b, 1.0, Par::Seq);
                            crate::kernels::simd::clear_upper();
                        });
                    }
                    _ => {
                        faer::linalg::matmul::matmul(cm, accum, am, bm, 1.0, par);
                        if !matches!(par, Par::Seq) {
                            crate::kernels::simd::clear_upper_on_workers();
                        }
                    }
                }
                // faer's AVX-512 micro-kernels leave dirty upper register state, which makes
                // the SSE code that follows several times slower (see `kernels::simd`)
                crate::kernels::simd::clear_upper();
            }
        }
    };
}
faer_gemm!(f32, crate::kernels::simd::stream_outer_rows_f32, atb_f32, avx512, ab_f32);
faer_gemm!(f64, crate::kernels::simd::stream_outer_rows_f64, no_atb, never, no_ab);

/// The CPU has AVX-512F (what the f32 [`GemmElem::atb`] kernel needs).
fn avx512() -> bool {
    crate::kernels::cpu::caps().avx512f
}

/// No kernel on any CPU.
fn never() -> bool {
    false
}

/// [`GemmElem::atb`] for f32: the AVX-512 kernel of [`crate::kernels::micro`].
fn atb_f32(m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if atb_applies(m, k, n) && a.len() == k * m && b.len() == k * n && c.len() == m * n && avx512() {
        // SAFETY: AVX-512F is present and the buffer lengths are checked just above.
        unsafe { crate::kernels::micro::atb(m, k, n, a, b, c) };
        return true;
    }
    let _ = (m, k, n, a, b, c);
    false
}

/// Shapes of `C = A · B` (both row-major, no accumulation) that the in-place kernel
/// `micro::ab` runs instead of faer: products where faer's copy of the operands into
/// panels does not pay back. `A` is read in place, once per 64 columns (a `[k, 64]` block
/// of `B` stays in L2 while the rows of `A` pass over it), and `B` in place too, once per
/// task: no extra pass over either operand, and a plan's constant filter or weight is read
/// as stored. Measured (`cargo run --release --example gemm_rates -- K N M...`, two threads,
/// A/B against faer, three rounds): a narrow `B` (the 1x1 convs that squeeze channels,
/// SqueezeNet's `[N*55*55, 128] x [128, 16]`: 1.7x faer's rate) and depths up to 512 at
/// any width, 0.97-1.9x (SqueezeNet's classifier `[169, 512] x [512, 1000]`: 440-471 vs
/// 423-435 GFLOP/s; `[49, 512] x [512, 2048]`, a 1x1 conv on a 7x7 map: 384-420 vs
/// 331-364; the worst, `[1352, 512] x [512, 1000]`, 449-454 vs 457-466). Deeper products
/// stream their `[k, 64]` blocks from L2 faster than the kernel uses them (`[49, 2048] x
/// [2048, 512]`: 0.5-0.9x) and stay with faer, except narrow ones (≤ 64 columns, depth ≤
/// 1024: `[N*7*7, 1024] x [1024, 64]` 1.1-1.6x).
pub fn ab_applies(m: usize, k: usize, n: usize) -> bool {
    m > 0 && n > 0 && (1..=if n <= 64 { 1024 } else { 512 }).contains(&k)
}

/// Multiply-adds from which the in-place kernel splits over threads: lower than faer's
/// [`PAR_FLOPS`], as its tasks pack nothing and a split costs one fork-join (~5 µs with the
/// workers kept warm). SqueezeNet's `[169, 256] x [256, 48]` and `[169, 48] x [48, 192]`
/// (2.1M and 1.6M) had run on one thread.
const AB_PAR_FLOPS: usize = 1 << 20;

/// The rows of a parallel task of the in-place kernel are a multiple of this: the threads'
/// shares stay within 8 rows of each other (with tasks of 48 rows, a multiple of every
/// micro-kernel row block, `[196, k]` split 144 / 52); a task's last partial block of rows
/// runs in blocks of at most 6.
const AB_TASK_ROWS: usize = 8;

/// A constant right operand `B [k, n]` (f32) copied once into panels of 64 columns, each
/// `[k, 64]` contiguous (the last one zero-padded): the in-place kernel then reads each
/// panel front to back, one stream, where the row-major `B` gives it `k` rows of 256 bytes
/// `4n` bytes apart. Made when a plan compiles, for a constant conv filter that the
/// in-place kernel will multiply by (`exec::pretranspose::prepared_filter`) (weight-bound at small batches: ResNet-50's 1x1
/// convs at n = 1 read 4 MB of filter for 49 rows). The products are the same sums in the
/// same order as with the row-major `B` (bit-identical).
#[derive(Clone, Debug)]
pub struct Panels {
    k: usize,
    n: usize,
    data: Vec<f32>,
}

/// Columns per panel (one micro-kernel block).
pub(crate) const PANEL: usize = 64;

impl Panels {
    /// The panels of the row-major `b` (`[k, n]`); `None` where `b` does not hold `k * n`
    /// values, the sizes overflow or the memory cannot be had.
    pub(crate) fn new(k: usize, n: usize, b: &[f32]) -> Option<Panels> {
        let len = n.div_ceil(PANEL).checked_mul(k)?.checked_mul(PANEL)?;
        if b.len() != k.checked_mul(n)? {
            return None;
        }
        let mut data = Vec::new();
        data.try_reserve_exact(len).ok()?;
        data.resize(len, 0.0);
        for (p, panel) in data.chunks_exact_mut((k * PANEL).max(1)).enumerate() {
            let (n0, w) = (p * PANEL, PANEL.min(n - p * PANEL));
            for (row, src) in panel.chunks_exact_mut(PANEL).zip(b.chunks_exact(n)) {
                row[..w].copy_from_slice(&src[n0..n0 + w]);
            }
        }
        Some(Panels { k, n, data })
    }

    /// `(k, n)` of the operand.
    pub(crate) fn shape(&self) -> (usize, usize) {
        (self.k, self.n)
    }

    /// Panel `p`: columns `64p ..` (at most 64, the rest zero) of every row, `[k, 64]`
    /// row-major; `None` past the last panel.
    pub(crate) fn panel(&self, p: usize) -> Option<&[f32]> {
        self.data.get(p * self.k * PANEL..(p + 1) * self.k * PANEL)
    }
}

/// The right operand of the in-place kernel.
#[derive(Clone, Copy)]
enum Rhs<'a> {
    /// Row-major `[k, n]`.
    Rows(&'a [f32]),
    /// In panels.
    Panels(&'a Panels),
}

/// `c [rows, n0..n1] = fin(a [rows, k] · B [k, n0..n1])` by `micro::ab_strided` (`c` rows
/// of `ldc`, which is also the row stride of a row-major `B`: both are `n` wide; `n0` a
/// multiple of 64 for panels; `fin` addresses `c`'s first row and column).
///
/// # Safety
/// AVX-512F is present; `a` holds `rows` rows of `k`, `c` `rows` rows of `ldc ≥ n1`, the
/// operand `B` has at least `n1` columns and `k` rows; `fin`'s terms cover those rows and
/// columns.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
unsafe fn in_place_cols(
    rows: usize,
    k: usize,
    a: *const f32,
    rhs: Rhs<'_>,
    n0: usize,
    n1: usize,
    c: *mut f32,
    ldc: usize,
    fin: Finish,
) {
    use crate::kernels::micro::ab_strided;
    // SAFETY (all calls): the caller's bounds; a panel holds `[k, 64]`.
    match rhs {
        Rhs::Rows(b) => unsafe {
            ab_strided(rows, k, n1 - n0, a, b.as_ptr().add(n0), ldc, c.add(n0), ldc, fin.at(0, n0))
        },
        Rhs::Panels(p) => {
            for q0 in (n0..n1).step_by(PANEL) {
                let panel = unsafe { p.data.as_ptr().add(q0 / PANEL * k * PANEL) };
                unsafe { ab_strided(rows, k, PANEL.min(n1 - q0), a, panel, PANEL, c.add(q0), ldc, fin.at(0, q0)) };
            }
        }
    }
}

/// `c [m, n] = a [m, k] · B` by the in-place kernel (the caller checked AVX-512F, the
/// shapes by [`ab_applies`] and the lengths); `par`: split over the rayon pool from
/// [`AB_PAR_FLOPS`] multiply-adds, into tasks of rows or of 64-column blocks, whichever
/// operand is larger (each task reads all of one and its share of the other). Every output
/// element is the same sum in the same order however the work is split (see
/// `kernels::micro`), so results depend neither on the thread count nor on `B`'s layout.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn in_place(m: usize, k: usize, n: usize, a: &[f32], rhs: Rhs<'_>, c: &mut [f32], par: bool, fin: Finish) {
    use rayon::prelude::*;
    let threads = rayon::current_num_threads();
    if !par || m.saturating_mul(k).saturating_mul(n) < AB_PAR_FLOPS || threads < 2 {
        // SAFETY: AVX-512F is present; the lengths were checked by the caller.
        unsafe { in_place_cols(m, k, a.as_ptr(), rhs, 0, n, c.as_mut_ptr(), n, fin) };
    } else if m >= n || n < 2 * PANEL {
        // tasks of whole rows
        let per = m.div_ceil(threads).div_ceil(AB_TASK_ROWS) * AB_TASK_ROWS;
        c.par_chunks_mut(per * n).enumerate().for_each(|(i, c)| {
            let fin = fin.at(i * per, 0);
            // SAFETY: rows i*per.. of `a` and the `c.len() / n` rows of the block `c`.
            unsafe { in_place_cols(c.len() / n, k, a[i * per * k..].as_ptr(), rhs, 0, n, c.as_mut_ptr(), n, fin) };
        });
    } else {
        // tasks of 64-column blocks, every task over all rows
        let per = n.div_ceil(threads).div_ceil(PANEL) * PANEL;
        let out = crate::kernels::micro::SharedMut(c.as_mut_ptr());
        (0..n.div_ceil(per)).into_par_iter().for_each(|t| {
            let n0 = t * per;
            // SAFETY: columns n0..n0+per (cut to n) of `B` and of `c`; each task writes only
            // its own columns of `c`.
            unsafe { in_place_cols(m, k, a.as_ptr(), rhs, n0, (n0 + per).min(n), out.ptr(), n, fin) };
        });
    }
}

/// The [`Finish`] of `epi` for the product whose output starts at element `at` of the
/// whole output (`n` columns): `None` where a term does not cover the `m` rows.
#[cfg(target_arch = "x86_64")]
fn fin_of(epi: &Epilogue<'_, f32>, at: usize, m: usize, n: usize) -> Option<Finish> {
    let bias = match epi.bias {
        Some(b) if b.len() != n => return None,
        Some(b) => b.as_ptr(),
        None => std::ptr::null(),
    };
    let res = match epi.residual {
        Some(r) if r.len() < at.checked_add(m.checked_mul(n)?)? => return None,
        Some(r) => r[at..].as_ptr(),
        None => std::ptr::null(),
    };
    Some(Finish { bias, res, ldr: n, relu: epi.relu })
}

/// The f32 in-place product where [`ab_applies`] holds (row-major operands, no
/// accumulation, AVX-512F; see [`in_place`]). False (nothing written) elsewhere.
#[allow(clippy::too_many_arguments)]
fn ab_f32(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    ta: bool,
    b: &[f32],
    tb: bool,
    c: &mut [f32],
    acc: bool,
    par: bool,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if !ta && !tb && !acc && ab_applies(m, k, n) && avx512() {
        if a.len() != m * k || b.len() != k * n || c.len() != m * n {
            return false;
        }
        in_place(m, k, n, a, Rhs::Rows(b), c, par, Finish::NONE);
        return true;
    }
    let _ = (m, k, n, a, ta, b, tb, c, acc, par);
    false
}

/// `c [m, n] = epi(a [m, k] · B)` with `B` in `panels`, where the in-place kernel takes
/// the shapes on this CPU ([`ab_applies`]: exactly where it would take the row-major `B`, so
/// a conv gives the same bits with or without the plan's panels, fused or not, batched or
/// per example) and the buffers fit; false (nothing written) elsewhere (the caller
/// then multiplies by the row-major `B` and applies the epilogue itself).
fn panels_f32(p: &PanelProduct<'_, f32>, c: &mut [f32]) -> bool {
    let PanelProduct { m, k, n, a, panels, par, epi, at } = *p;
    #[cfg(target_arch = "x86_64")]
    if ab_applies(m, k, n) && avx512() && panels.shape() == (k, n) && a.len() == m * k && c.len() == m * n {
        let Some(fin) = fin_of(epi, at, m, n) else { return false };
        in_place(m, k, n, a, Rhs::Panels(panels), c, par, fin);
        return true;
    }
    let _ = (m, k, n, a, panels, c, par, epi, at);
    false
}

/// No in-place kernel (f64 goes to faer).
#[allow(clippy::too_many_arguments)]
fn no_ab<T>(
    m: usize,
    k: usize,
    n: usize,
    a: &[T],
    ta: bool,
    b: &[T],
    tb: bool,
    c: &mut [T],
    acc: bool,
    par: bool,
) -> bool {
    let _ = (m, k, n, a, ta, b, tb, c, acc, par);
    false
}

/// No [`GemmElem::atb`] kernel (f64 goes to faer).
fn no_atb<T>(m: usize, k: usize, n: usize, a: &[T], b: &[T], c: &mut [T]) -> bool {
    let _ = (m, k, n, a, b, c);
    false
}

impl GemmElem for i64 {
    fn gemm_raw(
        m: usize,
        k: usize,
        n: usize,
        a: &[i64],
        ta: bool,
        b: &[i64],
        tb: bool,
        c: &mut [i64],
        acc: bool,
        _par: bool,
    ) {
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
    checked(m, k, n, a, b, c)?;
    T::gemm_raw(m, k, n, a, trans_a, b, trans_b, c, accumulate, true);
    Ok(())
}

/// [`gemm`] on the calling thread whatever its size: for callers that run many products in
/// parallel themselves (the conv kernels' row chunks).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_seq<T: GemmElem>(
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
    checked(m, k, n, a, b, c)?;
    T::gemm_raw(m, k, n, a, trans_a, b, trans_b, c, accumulate, false);
    Ok(())
}

/// An error unless the buffers have the lengths of `[m,k]`, `[k,n]` and `[m,n]`.
fn checked<T>(m: usize, k: usize, n: usize, a: &[T], b: &[T], c: &[T]) -> Result<()> {
    if a.len() != m * k || b.len() != k * n || c.len() != m * n {
        return Err(Error::shape(
            "gemm",
            format!("buffers of {}, {}, {} elements for m={m}, k={k}, n={n}", a.len(), b.len(), c.len()),
        ));
    }
    Ok(())
}
