//! `conv2d` and its gradients as im2col + GEMM.
//!
//! The patch matrix has one row per output pixel (`N*OH*OW` rows) and `KH*KW*C` columns
//! (tap-major, channel-minor, matching the filter's `[KH,KW,C,O]` row-major layout, so the
//! filter is the `[KH*KW*C, O]` right operand as is). Rows are processed in chunks bounded
//! by [`IM2COL_BUDGET_BYTES`] in total across the threads working at once (see
//! [`par_chunk_rows`] for how chunks and GEMM parallelism are chosen).
//!
//! The forward conv (and its pooled form) chunks its rows by [`fwd_chunks`] instead: with
//! enough rows, L2-sized chunks run in parallel, each building its patches, running its own
//! single-threaded GEMM and applying the epilogue on one core while all of it is cache
//! resident (1x1 stride-1 convs multiply the input rows in place; strided 1x1 convs gather
//! their rows like any window); with few rows, or a filter too large to pack again for
//! every chunk, chunks run in order with the patches built on all threads and one parallel
//! GEMM. The chunking depends only on the shapes and the thread count, never on the
//! epilogue, so a fused conv computes the same GEMMs as the unfused one. [`conv2d_into`]
//! writes a channel slice of wider output rows (a fused concat's): the same chunks and
//! GEMMs, each chunk's result copied from a dense scratch into the slice while cache
//! resident.

use rayon::prelude::*;

use super::direct::pool_pair;
use super::{Dst, Float, Geom, Kernels, OutBuf, for_each_chunk, is_parallel};
use crate::error::Result;
use crate::kernels::gemm::{PAR_FLOPS, PanelProduct, gemm, gemm_seq};

/// Elementwise work applied to each chunk of `conv2d` output rows right after its GEMM
/// wrote it (while it is cache resident): `v += bias[channel]`, then `v = v + residual[i]`
/// (the element at the same flat index `i` of the output), then `relu`. The arithmetic and
/// its order are those of the separate `bias_add`, `add` and `relu` kernels, so fused
/// results are bit-identical to unfused ones.
#[derive(Clone, Copy)]
pub(crate) struct Epilogue<'a, T> {
    /// Per-output-channel bias (`O` values).
    pub bias: Option<&'a [T]>,
    /// A tensor added elementwise (a residual connection): as many values as the whole
    /// (unpooled) output, in its row-major order.
    pub residual: Option<&'a [T]>,
    /// Apply `relu` (NaN propagates; `-0.0` and negatives become `0.0`).
    pub relu: bool,
    /// Not output work: the filter in a kernel's form, made when the plan was compiled (the
    /// Winograd kernel uses its transform instead of transforming the filter, the GEMMs
    /// its panels; see [`super::PreparedFilter`]).
    pub filter: Option<&'a super::PreparedFilter>,
}

impl<'a, T: Float> Epilogue<'a, T> {
    /// Bias and relu only.
    pub(crate) fn new(bias: Option<&'a [T]>, relu: bool) -> Self {
        Epilogue { bias, residual: None, relu, filter: None }
    }
    /// Nothing to apply.
    pub(crate) fn is_none(&self) -> bool {
        self.bias.is_none() && self.residual.is_none() && !self.relu
    }
    /// Apply to `out`, whole rows of `o` channels starting at element `at` of the whole
    /// output (where the residual is read from); one branch-free loop per case.
    pub(crate) fn apply(&self, out: &mut [T], o: usize, at: usize) {
        let residual = self.residual.map(|r| &r[at..at + out.len()]);
        Self::apply_rows(out, o, self.bias, residual, self.relu);
    }
    /// Apply to `out`, channels `c0 .. c0 + out.len()` of the output pixel whose channel
    /// `c0` is element `at` of the whole output (a kernel that finishes column blocks).
    pub(crate) fn apply_span(&self, out: &mut [T], c0: usize, at: usize) {
        let len = out.len();
        let (bias, residual) = (self.bias.map(|b| &b[c0..c0 + len]), self.residual.map(|r| &r[at..at + len]));
        Self::apply_rows(out, len, bias, residual, self.relu);
    }
    /// Rows of `o` values: `+ bias` (`o` values), `+ residual` (as many values as `out`),
    /// then relu (NaN propagates), each as the separate ops compute it.
    fn apply_rows(out: &mut [T], o: usize, bias: Option<&[T]>, residual: Option<&[T]>, relu_on: bool) {
        let zero = T::default();
        let relu = |v: T| if v > zero || v.is_nan() { v } else { zero };
        if let Some(r) = residual {
            let end = |s: T| if relu_on { relu(s) } else { s };
            match bias {
                Some(b) => out.chunks_exact_mut(o).zip(r.chunks_exact(o)).for_each(|(row, rr)| {
                    row.iter_mut().zip(rr).zip(b).for_each(|((v, &x), &b)| {
                        let mut s = *v;
                        s += b;
                        *v = end(s + x);
                    })
                }),
                None => out.iter_mut().zip(r).for_each(|(v, &x)| *v = end(*v + x)),
            }
            return;
        }
        match (bias, relu_on) {
            (None, false) => {}
            (Some(b), false) => out.chunks_exact_mut(o).for_each(|r| r.iter_mut().zip(b).for_each(|(v, &b)| *v += b)),
            (Some(b), true) => out.chunks_exact_mut(o).for_each(|r| {
                r.iter_mut().zip(b).for_each(|(v, &b)| {
                    let mut s = *v;
                    s += b;
                    *v = relu(s);
                })
            }),
            (None, true) => out.iter_mut().for_each(|v| *v = relu(*v)),
        }
    }
}

/// Bytes of patch matrices in flight at once (all threads together, at least one row each).
const IM2COL_BUDGET_BYTES: usize = 64 << 20;
/// Patch bytes per chunk when chunks run in order (each GEMM parallel inside faer).
const SEQ_CHUNK_BYTES: usize = 16 << 20;
/// Fewest rows worth a GEMM of its own.
const MIN_GEMM_ROWS: usize = 32;

/// Rows per chunk when chunks run in parallel: each chunk's GEMM stays below [`PAR_FLOPS`]
/// (single-threaded, its patches cache resident). `None` for small problems (one chunk)
/// and for wide layers (`K*O` so large a chunk would be under [`MIN_GEMM_ROWS`] rows);
/// those run in order with faer's own parallel GEMM. Nesting faer's parallelism inside
/// rayon tasks is avoided: it was measured 10-100x slower for the filter-gradient shapes.
fn par_chunk_rows<T>(rows: usize, k: usize, o: usize) -> Option<usize> {
    let (threads, kk) = (rayon::current_num_threads().max(1), k.max(1));
    let gemm_rows = PAR_FLOPS / kk.saturating_mul(o).max(1);
    if rows.saturating_mul(kk).saturating_mul(o) < PAR_FLOPS || gemm_rows < MIN_GEMM_ROWS {
        return None;
    }
    let budget_rows = IM2COL_BUDGET_BYTES / threads / (kk * size_of::<T>());
    Some(gemm_rows.min(budget_rows).min(rows.div_ceil(threads)).max(1))
}

/// Rows per chunk when chunks run in order.
fn seq_chunk_rows<T>(rows: usize, k: usize) -> usize {
    (SEQ_CHUNK_BYTES / (k.max(1) * size_of::<T>())).clamp(1, rows.max(1))
}

/// Patch and output bytes per row chunk of the forward conv when its chunks run in
/// parallel: the chunk's patches stay in the core's L2 while its GEMM reads them, and its
/// output while the epilogue passes over it.
const FWD_CHUNK_BYTES: usize = 512 << 10;
/// Fewest rows per chunk of the row-parallel forward conv: every chunk's GEMM packs the
/// whole filter again, so a chunk must do enough multiply-adds per filter element.
const FWD_MIN_ROWS: usize = 64;
/// Largest filter (bytes) of the row-parallel forward conv: a larger one, packed again by
/// every chunk, cost more than its product (`[8,14,14,1024]` 1x1 stride 2 to 2048 channels:
/// 24 ms in 64-row chunks, where one parallel GEMM takes a fraction of it).
const FWD_FILTER_BYTES: usize = 1 << 20;

/// How the forward conv (and its pooled form) splits its output rows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Chunks {
    /// Chunks of this many rows in parallel, each with its own single-threaded GEMM: the
    /// chunk's patches are built, multiplied and its output's epilogue applied while they
    /// are cache resident, on one core.
    Par(usize),
    /// Chunks of this many rows in order, each GEMM parallel inside (small products, few
    /// rows, large filters: one GEMM split over the threads packs the filter once).
    Seq(usize),
}

impl Chunks {
    fn rows(self) -> usize {
        match self {
            Chunks::Par(r) | Chunks::Seq(r) => r,
        }
    }
}

fn fwd_chunks<T: Float>(rows: usize, k: usize, o: usize) -> Chunks {
    let threads = rayon::current_num_threads().max(1);
    let kk = k.max(1);
    // the in-place GEMM with fewer rows than filter columns: one parallel product splits the
    // filter's columns (each thread reads half of it), where row chunks would each read all
    // of it (ResNet-50 at n = 1, `[196, 256] x [256, 1024]`)
    let wide = T::in_place(rows, kk, o) && rows < o;
    if threads > 1
        && !wide
        && rows.saturating_mul(kk).saturating_mul(o) >= PAR_FLOPS
        && kk.saturating_mul(o).saturating_mul(size_of::<T>()) <= FWD_FILTER_BYTES
    {
        let cr = (FWD_CHUNK_BYTES / ((kk + o) * size_of::<T>())).max(FWD_MIN_ROWS).min(rows.div_ceil(threads));
        if cr >= FWD_MIN_ROWS {
            // that many rows at most, in a multiple of the thread count of chunks of nearly
            // equal rows, so that rayon's halves hold equal work (SqueezeNet's `[55*55,
            // 128] -> 16` in chunks of 910 rows had left one thread 1820 rows against 1205)
            let chunks = rows.div_ceil(cr).div_ceil(threads) * threads;
            return Chunks::Par(rows.div_ceil(chunks));
        }
    }
    Chunks::Seq(seq_chunk_rows::<T>(rows, k))
}

/// The patches of output rows `r0 .. r0 + nr` times the filter into `oc`, then `epi` on it:
/// the input rows themselves for a pointwise conv, else patches built into `col`
/// (transposed for a single channel). `par`: build the patches and run the GEMM on the
/// rayon pool (a chunk run in order), else all on the calling thread.
#[allow(clippy::too_many_arguments)]
fn chunk_product<T: Float>(
    g: &Geom,
    x: &[T],
    w: &[T],
    epi: Epilogue<'_, T>,
    col: &mut Vec<T>,
    r0: usize,
    oc: &mut [T],
    par: bool,
) -> Result<()> {
    let (k, o) = (g.kh * g.kw * g.c, g.o);
    let nr = oc.len() / o;
    let mm = if par { gemm::<T> } else { gemm_seq::<T> };
    // `patches · filter`, by the filter's panels where the plan made them
    let panels = epi.filter.and_then(super::PreparedFilter::panels);
    // (true: the panel product applied the epilogue as it stored its blocks)
    let product = |patches: &[T], oc: &mut [T]| -> Result<bool> {
        if let Some(panels) = panels {
            let job = PanelProduct { m: nr, k, n: o, a: patches, panels, par, epi: &epi, at: r0 * o };
            if T::gemm_panels(&job, oc) {
                return Ok(true);
            }
        }
        mm(nr, k, o, patches, false, w, false, oc, false).map(|()| false)
    };
    let finished = if g.pointwise() {
        product(&x[r0 * k..(r0 + nr) * k], oc)?
    } else {
        col.resize(nr * k, T::default());
        let patches = &mut col[..nr * k];
        if g.c == 1 {
            im2col_t_c1(g, x, r0, nr, patches);
            mm(nr, k, o, patches, true, w, false, oc, false)?;
            false
        } else {
            // tasks of whole rows, ≥ ~16K elements each
            let pr = (1usize << 14).div_ceil(k).max(1);
            for_each_chunk(patches, pr * k, par && is_parallel(nr * k), |i, c| im2col(g, x, r0 + i * pr, c));
            product(patches, oc)?
        }
    };
    if !epi.is_none() && !finished {
        let cr = (1usize << 14).div_ceil(o).max(1);
        for_each_chunk(oc, cr * o, par && is_parallel(oc.len()), |i, c| epi.apply(c, o, (r0 + i * cr) * o));
    }
    Ok(())
}

/// Fill `col` (`[rows, KH*KW*C]`) with the patches of output rows `r0..r0+rows`.
fn im2col<T: Float>(g: &Geom, x: &[T], r0: usize, col: &mut [T]) {
    let (c, k, ohw) = (g.c, g.kh * g.kw * g.c, g.oh * g.ow);
    if k == 0 {
        return;
    }
    let img_len = g.h * g.w * c;
    let zero = T::default();
    for (i, row) in col.chunks_exact_mut(k).enumerate() {
        let r = r0 + i;
        let (n, p) = (r / ohw, r % ohw);
        let (oy, ox) = (p / g.ow, p % g.ow);
        let img = &x[n * img_len..(n + 1) * img_len];
        // All taps of the window row inside the image and contiguous: one copy per ky.
        let x0 = (ox * g.sw).checked_sub(g.pl).filter(|&x0| g.dw == 1 && x0 + g.kw <= g.w);
        for (ky, dst) in row.chunks_exact_mut(g.kw * c).enumerate() {
            let Some(iy) = (oy * g.sh + ky * g.dh).checked_sub(g.pt).filter(|&iy| iy < g.h) else {
                dst.fill(zero);
                continue;
            };
            let src = &img[iy * g.w * c..(iy + 1) * g.w * c];
            if let Some(x0) = x0 {
                dst.copy_from_slice(&src[x0 * c..(x0 + g.kw) * c]);
                continue;
            }
            dst.fill(zero);
            for (kx, ix) in g.taps_x(ox) {
                dst[kx * c..(kx + 1) * c].copy_from_slice(&src[ix * c..(ix + 1) * c]);
            }
        }
    }
}

/// Single-channel inputs: fill `colt` (`[KH*KW, rows]`, the TRANSPOSED patch matrix) for
/// output rows `r0..r0+rows`. Along a run of output columns of one output row, a tap reads
/// consecutive input columns (stride 1), so each `(tap, run)` is one contiguous copy instead
/// of `KW`-element copies per output pixel.
fn im2col_t_c1<T: Float>(g: &Geom, x: &[T], r0: usize, rows: usize, colt: &mut [T]) {
    let (ohw, img_len, zero) = (g.oh * g.ow, g.h * g.w, T::default());
    let mut r = r0;
    while r < r0 + rows {
        // The run of output columns of output row (n, oy) inside this chunk.
        let (n, p) = (r / ohw, r % ohw);
        let (oy, ox0) = (p / g.ow, p % g.ow);
        let ox1 = g.ow.min(ox0 + (r0 + rows - r));
        let off = r - r0;
        let img = &x[n * img_len..(n + 1) * img_len];
        for ky in 0..g.kh {
            let iy = (oy * g.sh + ky * g.dh).checked_sub(g.pt).filter(|&iy| iy < g.h);
            for kx in 0..g.kw {
                let dst = &mut colt[(ky * g.kw + kx) * rows + off..][..ox1 - ox0];
                let Some(iy) = iy else {
                    dst.fill(zero);
                    continue;
                };
                let src = &img[iy * g.w..(iy + 1) * g.w];
                let valid = g.cols_for_tap(kx);
                let (lo, hi) = (valid.start.clamp(ox0, ox1), valid.end.clamp(ox0, ox1));
                dst[..lo - ox0].fill(zero);
                dst[hi - ox0..].fill(zero);
                if lo < hi {
                    let d = &mut dst[lo - ox0..hi - ox0];
                    if g.sw == 1 {
                        let ix = g.ix(lo, kx);
                        d.copy_from_slice(&src[ix..ix + (hi - lo)]);
                    } else {
                        for (v, ox) in d.iter_mut().zip(lo..hi) {
                            *v = src[g.ix(ox, kx)];
                        }
                    }
                }
            }
        }
        r += ox1 - ox0;
    }
}

/// Scatter-add `dcol` (patch gradients of output rows `r0..`) into `dx`, which holds the
/// images from `n0` on.
fn col2im<T: Float>(g: &Geom, dcol: &[T], r0: usize, n0: usize, dx: &mut [T]) {
    let (c, k, ohw) = (g.c, g.kh * g.kw * g.c, g.oh * g.ow);
    if k == 0 {
        return;
    }
    let img_len = g.h * g.w * c;
    for (i, row) in dcol.chunks_exact(k).enumerate() {
        let r = r0 + i;
        let (n, p) = (r / ohw - n0, r % ohw);
        let (oy, ox) = (p / g.ow, p % g.ow);
        let img = &mut dx[n * img_len..(n + 1) * img_len];
        let x0 = (ox * g.sw).checked_sub(g.pl).filter(|&x0| g.dw == 1 && x0 + g.kw <= g.w);
        for (ky, iy) in g.taps_y(oy) {
            let src = &row[ky * g.kw * c..(ky + 1) * g.kw * c];
            let dst = &mut img[iy * g.w * c..(iy + 1) * g.w * c];
            if let Some(x0) = x0 {
                add_to(&mut dst[x0 * c..(x0 + g.kw) * c], src);
                continue;
            }
            for (kx, ix) in g.taps_x(ox) {
                add_to(&mut dst[ix * c..(ix + 1) * c], &src[kx * c..(kx + 1) * c]);
            }
        }
    }
}

fn add_to<T: Float>(dst: &mut [T], src: &[T]) {
    for (a, &b) in dst.iter_mut().zip(src) {
        *a += b;
    }
}

/// `out [N*OH*OW, O] = epi(patches(x) · filter [KH*KW*C, O])` over the row chunks of
/// [`fwd_chunks`] (see [`chunk_product`]).
pub(crate) fn conv2d<T: Float>(
    g: &Geom,
    x: &[T],
    w: &[T],
    epi: Epilogue<'_, T>,
    buf: OutBuf<T>,
    kernels: Kernels,
) -> Result<Vec<T>> {
    let (rows, k, o) = (g.n * g.oh * g.ow, g.kh * g.kw * g.c, g.o);
    // every path below overwrites the whole output (GEMMs without accumulation)
    let mut out = if k == 0 { buf.filled(rows * o, T::default()) } else { buf.overwritten(rows * o) };
    conv2d_into(g, x, w, epi, &mut out, Dst::dense(o), kernels)?;
    Ok(out)
}

/// [`conv2d`] into the channels `dst` of `out`'s `N*OH*OW` pixel rows (a fused concat's
/// slice), every element of the slice written, no other: the specialised kernels write
/// there directly; the GEMM of each row chunk writes a dense scratch chunk (the same GEMMs
/// as the dense conv, so the same values) that is copied into the slice while cache
/// resident.
pub(crate) fn conv2d_into<T: Float>(
    g: &Geom,
    x: &[T],
    w: &[T],
    epi: Epilogue<'_, T>,
    out: &mut [T],
    dst: Dst,
    kernels: Kernels,
) -> Result<()> {
    let (rows, k, o) = (g.n * g.oh * g.ow, g.kh * g.kw * g.c, g.o);
    if !dst.fits(rows, o, out.len()) {
        return Err(crate::error::Error::shape(
            "conv2d",
            format!("internal: {} output values for {rows} rows of {o} channels into {dst:?}", out.len()),
        ));
    }
    if rows == 0 || o == 0 {
        return Ok(());
    }
    if T::special_conv(g, x, w, epi, out, dst, kernels) {
        return Ok(());
    }
    let dense = dst.is_dense(o);
    // the chunk's dense output: the slice itself, or `tmp` copied into it afterwards
    let chunk = |col: &mut Vec<T>, tmp: &mut Vec<T>, r0: usize, oc: &mut [T], par: bool| -> Result<()> {
        if dense {
            return chunk_product(g, x, w, epi, col, r0, oc, par);
        }
        let nr = oc.len() / dst.stride;
        tmp.resize(nr * o, T::default());
        if k == 0 {
            // as the dense output's zero fill: an empty product writes nothing
            tmp.fill(T::default());
        }
        chunk_product(g, x, w, epi, col, r0, &mut tmp[..nr * o], par)?;
        dst.scatter(&tmp[..nr * o], o, oc);
        Ok(())
    };
    match fwd_chunks::<T>(rows, k, o) {
        Chunks::Par(cr) => out
            .par_chunks_mut(cr * dst.stride)
            .enumerate()
            .try_for_each_init(|| (Vec::new(), Vec::new()), |(col, tmp), (i, oc)| chunk(col, tmp, i * cr, oc, false))?,
        Chunks::Seq(cr) => {
            let (mut col, mut tmp) = (Vec::new(), Vec::new());
            for (i, oc) in out.chunks_mut(cr * dst.stride).enumerate() {
                chunk(&mut col, &mut tmp, i * cr, oc, true)?;
            }
        }
    }
    Ok(())
}

/// `conv2d` with `epi`, then a 2x2 stride-2 VALID max pool, for even `OH` and `OW`: each
/// chunk of whole conv-row pairs is computed (patches, GEMM, epilogue) into a scratch
/// buffer and pooled into `out [N, OH/2, OW/2, O]` while cache resident. The GEMMs have the
/// unfused kernel's row count (the last of a chunk fewer), and the pool's rule is
/// `max_pool`'s (first maximal element in row-major window order, NaN maximal). False
/// (nothing written) for odd `OH` or `OW`.
pub(crate) fn conv2d_pool<T: Float>(g: &Geom, x: &[T], w: &[T], epi: Epilogue<'_, T>, out: &mut [T]) -> Result<bool> {
    let (rows, k, o) = (g.n * g.oh * g.ow, g.kh * g.kw * g.c, g.o);
    let pair = 2 * g.ow;
    if !g.oh.is_multiple_of(2) || !g.ow.is_multiple_of(2) || out.len() != rows / 4 * o {
        return Ok(false);
    }
    if out.is_empty() {
        return Ok(true);
    }
    // `piece`: rows per GEMM (the unfused kernel's chunk size); `par` as in `chunk_product`
    let run =
        |col: &mut Vec<T>, conv: &mut Vec<T>, piece: usize, par: bool, r0: usize, pooled: &mut [T]| -> Result<()> {
            let nr = pooled.len() / o * 4;
            conv.resize(nr * o, T::default());
            for (i, dst) in conv[..nr * o].chunks_mut(piece * o).enumerate() {
                chunk_product(g, x, w, epi, col, r0 + i * piece, dst, par)?;
            }
            let row = g.ow * o;
            for (p, dst_row) in pooled.chunks_exact_mut(row / 2).enumerate() {
                let (a, b) = (&conv[2 * p * row..(2 * p + 1) * row], &conv[(2 * p + 1) * row..(2 * p + 2) * row]);
                crate::kernels::simd::widest(
                    #[inline(always)]
                    || pool_pair(a, b, o, dst_row),
                );
            }
            Ok(())
        };
    // chunks of whole conv-row pairs (a pair's pooled values are a quarter of its conv
    // values), about four GEMM pieces each
    let whole = |piece: usize| (4 * piece).div_ceil(pair) * pair;
    let chunks = fwd_chunks::<T>(rows, k, o);
    let (piece, cr) = (chunks.rows(), whole(chunks.rows()));
    match chunks {
        Chunks::Par(_) => out.par_chunks_mut(cr / 4 * o).enumerate().try_for_each_init(
            || (Vec::new(), Vec::new()),
            |(col, conv), (i, c)| run(col, conv, piece, false, i * cr, c),
        )?,
        Chunks::Seq(_) => {
            let (mut col, mut conv) = (Vec::new(), Vec::new());
            for (i, c) in out.chunks_mut(cr / 4 * o).enumerate() {
                run(&mut col, &mut conv, piece, true, i * cr, c)?;
            }
        }
    }
    Ok(true)
}

/// `dx = col2im(dy [N*OH*OW, O] · filterᵀ)`; chunks are whole images (disjoint scatters).
pub(crate) fn conv2d_backprop_input<T: Float>(
    g: &Geom,
    w: &[T],
    dy: &[T],
    buf: OutBuf<T>,
    kernels: Kernels,
) -> Result<Vec<T>> {
    let (ohw, k, o) = (g.oh * g.ow, g.kh * g.kw * g.c, g.o);
    let img_len = g.h * g.w * g.c;
    let buf = match T::special_backprop_input(g, w, dy, buf, kernels) {
        Ok(dx) => return Ok(dx),
        Err(buf) => buf,
    };
    let mut dx = buf.filled(g.n * img_len, T::default());
    if dx.is_empty() || ohw == 0 || o == 0 {
        return Ok(dx);
    }
    if g.pointwise() {
        gemm(g.n * ohw, o, k, dy, false, w, true, &mut dx, false)?;
        return Ok(dx);
    }
    let rows = g.n * ohw;
    // Scatters of different images never overlap: parallel chunks are whole images.
    let run = |dcol: &mut Vec<T>, cr: usize, n0: usize, dxc: &mut [T]| -> Result<()> {
        let (begin, end) = (n0 * ohw, (n0 + dxc.len() / img_len) * ohw);
        let mut r = begin;
        while r < end {
            let nr = cr.min(end - r);
            dcol.resize(nr * k, T::default());
            gemm(nr, o, k, &dy[r * o..(r + nr) * o], false, w, true, &mut dcol[..nr * k], false)?;
            col2im(g, &dcol[..nr * k], r, n0, dxc);
            r += nr;
        }
        Ok(())
    };
    match par_chunk_rows::<T>(rows, k, o).map(|cr| (cr, (cr / ohw).max(1))) {
        Some((cr, imgs)) if imgs < g.n => dx
            .par_chunks_mut(imgs * img_len)
            .enumerate()
            .try_for_each_init(Vec::new, |dcol, (i, c)| run(dcol, cr, i * imgs, c))?,
        _ => run(&mut Vec::new(), seq_chunk_rows::<T>(rows, k), 0, &mut dx)?,
    }
    Ok(dx)
}

/// `dfilter [KH*KW*C, O] = patches(x)ᵀ · dy [N*OH*OW, O]`, chunk partial sums reduced.
pub(crate) fn conv2d_backprop_filter<T: Float>(g: &Geom, x: &[T], dy: &[T]) -> Result<Vec<T>> {
    let (rows, k, o) = (g.n * g.oh * g.ow, g.kh * g.kw * g.c, g.o);
    let zero = T::default();
    let mut dw = vec![zero; k * o];
    if dw.is_empty() || rows == 0 {
        return Ok(dw);
    }
    // 1x1 stride 1: the input is the patch matrix (no copy); still chunked, as one GEMM
    // with a long reduction dim parallelizes poorly.
    let chunk = |cr: usize, i: usize, col: &mut Vec<T>, acc: &mut [T]| -> Result<()> {
        let (r0, nr) = (i * cr, cr.min(rows - i * cr));
        let patches = if g.pointwise() {
            &x[r0 * k..(r0 + nr) * k]
        } else {
            col.resize(nr * k, zero);
            im2col(g, x, r0, &mut col[..nr * k]);
            &col[..nr * k]
        };
        gemm(k, nr, o, patches, true, &dy[r0 * o..(r0 + nr) * o], false, acc, true)
    };
    let Some(cr) = par_chunk_rows::<T>(rows, k, o) else {
        let (cr, mut col) = (seq_chunk_rows::<T>(rows, k), Vec::new());
        for i in 0..rows.div_ceil(cr) {
            chunk(cr, i, &mut col, &mut dw)?;
        }
        return Ok(dw);
    };
    (0..rows.div_ceil(cr))
        .into_par_iter()
        .try_fold(
            || (Vec::new(), vec![zero; k * o]),
            |(mut col, mut acc), i| chunk(cr, i, &mut col, &mut acc).map(|()| (col, acc)),
        )
        .map(|r| r.map(|(_, acc)| acc))
        .try_reduce(
            || vec![zero; k * o],
            |mut a, b| {
                add_to(&mut a, &b);
                Ok(a)
            },
        )
}

/// `extract_patches`: the patch matrix `[N*OH*OW, KH*KW*C]` itself, filled by [`im2col`]
/// over chunks of whole rows (in parallel above the parallel threshold).
pub(crate) fn extract_patches<T: Float>(g: &Geom, x: &[T], buf: OutBuf<T>) -> Vec<T> {
    let (rows, k) = (g.n * g.oh * g.ow, g.kh * g.kw * g.c);
    // im2col writes every element of its rows (zeros in the padding)
    let mut out = buf.overwritten(rows * k);
    if out.is_empty() {
        return out;
    }
    // Tasks of whole rows, ≥ ~16K elements each.
    let cr = (1usize << 14).div_ceil(k).max(1);
    for_each_chunk(&mut out, cr * k, is_parallel(rows * k), |i, chunk| im2col(g, x, i * cr, chunk));
    out
}

/// `extract_patches_grad`: [`col2im`] of the patch gradients `[N*OH*OW, KH*KW*C]` into
/// `[N,H,W,C]`, in parallel over whole images (scatters of different images never overlap).
pub(crate) fn extract_patches_grad<T: Float>(g: &Geom, dcol: &[T], buf: OutBuf<T>) -> Vec<T> {
    let (ohw, k, img_len) = (g.oh * g.ow, g.kh * g.kw * g.c, g.h * g.w * g.c);
    let mut dx = buf.filled(g.n * img_len, T::default());
    if dx.is_empty() || ohw == 0 || k == 0 {
        return dx;
    }
    let per_img = ohw * k;
    for_each_chunk(&mut dx, img_len, is_parallel(g.n * per_img), |n, img| {
        col2im(g, &dcol[n * per_img..(n + 1) * per_img], n * ohw, n, img)
    });
    dx
}
