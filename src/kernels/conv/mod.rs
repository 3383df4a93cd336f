//! The convolution and pooling kernels behind `ops::conv` (NHWC inputs, `[KH, KW, C, O]`
//! filters, the window geometry [`Geom`] that `ops::conv` computes and checks).
//!
//! `conv2d` and its gradients run as im2col + GEMM over row chunks of the patch
//! matrix (≤ 64 MiB of patches in flight). The gradients' chunks are sized so each GEMM
//! stays below the GEMM kernel's parallel threshold and run in parallel with rayon; the
//! forward conv's are L2-sized, each GEMM single-threaded with the epilogue applied in
//! cache; layers with few rows or a large filter (`KH*KW*C*O`) run their chunks in order
//! with a parallel GEMM. 1x1 stride-1 convs use the input as the patch matrix (no
//! im2col). Depthwise convs and pools are
//! direct loops over contiguous channel vectors, parallel over rows or images above
//! [`PAR_THRESHOLD`] multiply-adds. On AVX-512 CPUs, f32 single-channel stride-1 convs and convs of 2-4
//! input channels at any stride use a direct register-tiled kernel instead (`narrow`), and f32 5x5 and 3x3 stride-1 convs with
//! channel counts that are multiples of 16 use Winograd F(2x2, 5x5) and, where its cost rule
//! picks it, F(4x4, 3x3) (`winograd`: 2.8x and 4x fewer multiplies, rounding within a small
//! multiple of a direct sum's; `KernelOptions::winograd` turns it off); the other f32 convs
//! over more than 4 channels run as an implicit GEMM that reads the taps in place
//! (`implicit`; `KernelOptions::implicit_gemm` turns it off).
//!
//!
//! Typed entry points: [`im2col`] (`conv2d`, its gradients, `extract_patches` and its
//! adjoint), [`direct`] (depthwise convs, pools and their gradients), and through
//! [`Float`] the shape-specialised kernels ([`narrow`], [`winograd`], [`implicit`]) and the pooled conv.
//!
//! Invariants: every entry point writes every element of its output (a recycled buffer's
//! stale content never shows; a conv told to write a channel slice [`Dst`] of wider rows
//! writes every element of that slice and nothing else); a specialised kernel either computes the whole output or
//! returns `false` having written nothing, so the caller falls back to im2col; the optional
//! kernels run only where their [`KernelOptions`] field allows and the CPU has them
//! ([`crate::kernels::cpu::caps`]).

pub(crate) mod direct;
mod geom;
pub(crate) mod im2col;
pub(crate) mod implicit;
pub(crate) mod narrow;
pub(crate) mod patch_product;
pub(crate) mod winograd;

use rayon::prelude::*;

use super::KernelOptions as Kernels;
use super::PAR_THRESHOLD;
use super::gemm::GemmElem;
use crate::error::Result;
pub(crate) use geom::Geom;

/// A conv filter in the form a kernel multiplies by, made once when a plan compiles from a
/// constant filter (the fused conv step holds it and the kernel's [`im2col::Epilogue`]
/// carries it): the Winograd transform `U` of a 3x3 or 5x5 filter, or the `[KH*KW*C, O]`
/// filter in the in-place GEMM's panels. A kernel that does not take the form it is given
/// uses the row-major filter, which the step still reads.
#[derive(Debug)]
pub(crate) enum PreparedFilter {
    /// The Winograd transform (see [`winograd`]).
    Winograd(winograd::Prepared),
    /// Panels of 64 output channels (see `kernels::gemm::Panels`).
    Panels(crate::kernels::gemm::Panels),
}

impl PreparedFilter {
    /// The Winograd transform, if that is the form.
    pub(crate) fn winograd(&self) -> Option<&winograd::Prepared> {
        match self {
            PreparedFilter::Winograd(p) => Some(p),
            PreparedFilter::Panels(_) => None,
        }
    }
    /// The panels, if that is the form.
    pub(crate) fn panels(&self) -> Option<&crate::kernels::gemm::Panels> {
        match self {
            PreparedFilter::Panels(p) => Some(p),
            PreparedFilter::Winograd(_) => None,
        }
    }
}

/// Float element types the kernels run on.
pub(crate) trait Float:
    GemmElem + super::gemm::PanelGemm + PartialOrd + std::ops::AddAssign + std::ops::Div<Output = Self> + std::iter::Sum
{
    fn is_nan(self) -> bool;
    /// `conv2d` by a kernel specialised for its shapes (the direct kernel for 1-4 input
    /// channels, [`narrow`]; Winograd for 5x5 and 3x3 filters, [`winograd`]) into the
    /// channels `dst` of `out`; false (nothing written) where none applies.
    fn special_conv(
        g: &Geom,
        x: &[Self],
        w: &[Self],
        epi: im2col::Epilogue<'_, Self>,
        out: &mut [Self],
        dst: Dst,
        k: Kernels,
    ) -> bool {
        let _ = (g, x, w, epi, out, dst, k);
        false
    }
    /// `conv2d_backprop_input` by a kernel specialised for its shapes (Winograd for 5x5
    /// filters: the input gradient is a conv of `dy` with the flipped filter), or the buffer
    /// back where none applies.
    fn special_backprop_input(
        g: &Geom,
        w: &[Self],
        dy: &[Self],
        buf: OutBuf<Self>,
        k: Kernels,
    ) -> std::result::Result<Vec<Self>, OutBuf<Self>> {
        let _ = (g, w, dy, k);
        Err(buf)
    }
    /// `conv2d` with `epi`, then a 2x2 stride-2 VALID max pool, into `out`; false (nothing
    /// written) where no pooled kernel takes the shapes.
    fn conv_pool(
        g: &Geom,
        x: &[Self],
        w: &[Self],
        epi: im2col::Epilogue<'_, Self>,
        out: &mut [Self],
        k: Kernels,
    ) -> Result<bool> {
        let _ = k;
        im2col::conv2d_pool(g, x, w, epi, out)
    }
    /// `conv2d` with `epi`, then the max pool `pg` (any window inside the conv output, see
    /// [`narrow::conv2d_pool_window`]), into `out`; false (nothing written) where no pooled
    /// kernel takes the shapes.
    fn conv_pool_window(
        g: &Geom,
        pg: &Geom,
        x: &[Self],
        w: &[Self],
        epi: im2col::Epilogue<'_, Self>,
        out: &mut [Self],
    ) -> bool {
        let _ = (g, pg, x, w, epi, out);
        false
    }
}
impl Float for f32 {
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn special_conv(
        g: &Geom,
        x: &[f32],
        w: &[f32],
        epi: im2col::Epilogue<'_, f32>,
        out: &mut [f32],
        dst: Dst,
        k: Kernels,
    ) -> bool {
        narrow::conv2d(g, x, w, epi, out, dst)
            || (k.winograd && winograd::conv2d(g, x, w, epi, out, dst, k))
            || (k.implicit_gemm && implicit::conv2d(g, x, w, epi, out, dst))
    }
    fn conv_pool(
        g: &Geom,
        x: &[f32],
        w: &[f32],
        epi: im2col::Epilogue<'_, f32>,
        out: &mut [f32],
        k: Kernels,
    ) -> Result<bool> {
        Ok(narrow::conv2d_pool(g, x, w, epi, out)
            || (k.winograd && winograd::conv2d_pool(g, x, w, epi, out, k))
            || im2col::conv2d_pool(g, x, w, epi, out)?)
    }
    fn conv_pool_window(
        g: &Geom,
        pg: &Geom,
        x: &[f32],
        w: &[f32],
        epi: im2col::Epilogue<'_, f32>,
        out: &mut [f32],
    ) -> bool {
        narrow::conv2d_pool_window(g, pg, x, w, epi, out)
    }
    fn special_backprop_input(
        g: &Geom,
        w: &[f32],
        dy: &[f32],
        buf: OutBuf<f32>,
        k: Kernels,
    ) -> std::result::Result<Vec<f32>, OutBuf<f32>> {
        match k.winograd.then(|| winograd::transposed(g)).flatten() {
            Some(t) => {
                let mut dx = buf.overwritten(g.n * g.h * g.w * g.c);
                if winograd::conv2d_backprop_input(&t, w, dy, &mut dx, k) { Ok(dx) } else { Err(OutBuf(Some(dx))) }
            }
            None => Err(buf),
        }
    }
}
impl Float for f64 {
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// Where a conv writes its `O` output channels: channels `[off, off + O)` of output pixel
/// rows of `stride` values each (a fused concat's channel slice, see
/// `exec::fuse::concat`); `stride == O`, `off == 0` is the plain dense output. The other
/// channels of each row are left as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dst {
    /// Values per output pixel row (at least `off + O`).
    pub stride: usize,
    /// First channel written.
    pub off: usize,
}

impl Dst {
    /// The plain `[pixels, o]` output.
    pub(crate) fn dense(o: usize) -> Dst {
        Dst { stride: o, off: 0 }
    }
    /// Whether this is the plain output of `o` channels.
    pub(crate) fn is_dense(self, o: usize) -> bool {
        self.stride == o && self.off == 0
    }
    /// Whether `out` holds whole rows for `pixels` pixels of `o` channels at `off`.
    pub(crate) fn fits(self, pixels: usize, o: usize, out_len: usize) -> bool {
        self.off.checked_add(o).is_some_and(|end| end <= self.stride)
            && pixels.checked_mul(self.stride) == Some(out_len)
    }
    /// Copy the dense rows `src` (`o` values each) into this slice of the rows of `out`
    /// (as many rows as `src` has).
    pub(crate) fn scatter<T: Copy>(self, src: &[T], o: usize, out: &mut [T]) {
        if o == 0 {
            return;
        }
        if self.is_dense(o) {
            out[..src.len()].copy_from_slice(src);
            return;
        }
        for (s, d) in src.chunks_exact(o).zip(out.chunks_exact_mut(self.stride)) {
            d[self.off..self.off + o].copy_from_slice(s);
        }
    }
}

/// Run `f(chunk_index, chunk)` over `len`-sized chunks of `out`, with rayon when `parallel`.
pub(crate) fn for_each_chunk<T: Send>(
    out: &mut [T],
    len: usize,
    parallel: bool,
    f: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    if len == 0 {
        return;
    }
    if parallel && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(len).enumerate().for_each(|(i, c)| f(i, c));
    } else {
        out.chunks_mut(len).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// `len` copies of `v`, written explicitly (in parallel when large). Unlike `vec![0; n]`
/// (lazily zeroed pages, which a read-modify-write kernel then faults twice on, with TLB
/// shootdowns), every page is first touched by a write here.
pub(crate) fn filled<T: Float>(len: usize, v: T) -> Vec<T> {
    let mut out = Vec::with_capacity(len);
    if is_parallel(len) {
        out.par_extend(rayon::iter::repeat_n(v, len));
    } else {
        out.resize(len, v);
    }
    out
}

/// Where a kernel's output buffer comes from: a buffer recycled by the run (stale content,
/// see `exec::pool`) or, without one, a fresh allocation.
pub(crate) struct OutBuf<T>(pub(crate) Option<Vec<T>>);

impl<T: Float> OutBuf<T> {
    /// `len` copies of `v`.
    pub(crate) fn filled(self, len: usize, v: T) -> Vec<T> {
        match self.0 {
            Some(mut b) if b.len() == len => {
                for_each_chunk(&mut b, 1 << 16, is_parallel(len), |_, c| c.fill(v));
                b
            }
            _ => filled(len, v),
        }
    }
    /// `len` elements that the kernel overwrites, every one (stale when recycled).
    pub(crate) fn overwritten(self, len: usize) -> Vec<T> {
        match self.0 {
            Some(b) if b.len() == len => b,
            _ => filled(len, T::default()),
        }
    }
}

thread_local! {
    /// This thread's [`with_scratch`] buffer (empty while lent out).
    static SCRATCH: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Run `f` on a buffer of `len` f32 whose contents are stale (left by an earlier use: `f`
/// must write every element it reads), lent from this thread's cache and kept there for
/// the next call, so a kernel that runs every step does not zero (memset) megabytes of
/// scratch it overwrites anyway. Re-entrant: a call nested inside `f` on the same thread (a
/// rayon task stolen while `f` waits) finds the cache empty and allocates its own buffer.
pub(crate) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    let mut buf = SCRATCH.take();
    if buf.len() < len {
        // growth only: the zeros are written once per size, not once per call
        buf.resize(len, 0.0);
    }
    let r = f(&mut buf[..len]);
    SCRATCH.with(|s| {
        let kept = s.take();
        s.set(if kept.len() > buf.len() { kept } else { buf });
    });
    r
}

pub(crate) fn is_parallel(work: usize) -> bool {
    work >= PAR_THRESHOLD && rayon::current_num_threads() > 1
}
