//! Direct f32 `conv2d` for inputs of few channels (the first layer of an image model:
//! grayscale at stride 1, or RGB at any stride), output channels a multiple of 32, on CPUs
//! with AVX-512.
//!
//! im2col + GEMM is a poor fit there: the reduction is only `KH*KW*C` long (25 for a 5x5
//! single-channel filter, 27 for SqueezeNet's 3x3 stride-2 RGB one), so the GEMM spends much
//! of its time packing, and the patch matrix is `KH*KW` times the input (`KH*KW/4` at stride
//! 2). This kernel keeps a tile of 8 output pixels x 32 output channels in registers and
//! walks the taps `(ky, kx, c)`: per tap, one broadcast input value per pixel (every
//! `SW*C`-th band element) times one filter row, fused multiply-adds. The `+ bias` and `relu` epilogue is
//! applied to the finished tile in registers (`v + b`, then `v` if `v > 0` or NaN, else 0:
//! the arithmetic of the separate kernels). Measured on W2's first layer
//! (`cargo run --release --example conv_probe -- 512 28 28 1 5 32`): see BENCHMARKS.md.
//!
//! [`conv2d_pool`] adds a 2x2 stride-2 max pool (the executor's fused `conv → bias → relu →
//! max_pool` chains): each pooled row computes its two conv rows into a cache-resident pair
//! and pools them, so the conv output never reaches memory; [`conv2d_pool_window`] does the
//! same for any VALID window (SqueezeNet's 3x3 stride-2 pool), its conv rows in a rolling
//! scratch that keeps the rows consecutive pooled rows share.
//!
//! Work is split by output row `(n, oy)`, in tasks of whole rows. Each row first copies the
//! `KH` input rows its windows read into a zero-padded band (wide enough for full tiles past
//! the last column), so the tap loops have no bounds branches and padding costs nothing.
//!
//! Invariants: [`conv2d`] runs only where [`applies`] holds (f32 callers check the CPU);
//! for those shapes it computes the same function as the im2col path, up to the order of
//! float summation (taps in `(ky, kx, c)` order from zero, then the bias). Single-channel
//! strided convs and convs of more than [`MAX_C`] channels stay with im2col + GEMM (an
//! earlier measurement found strided single-channel and many-channel variants slower); for
//! the RGB first layer see the measurement in [`applies`].

use super::direct::pool_pair;
use super::im2col::Epilogue;
use super::{Dst, Geom, for_each_chunk, is_parallel};

/// Output channels per register (f32 lanes of a 512-bit register).
const BLOCK: usize = 16;
/// Output pixels per register tile.
const PIXELS: usize = 8;
/// Output values per parallel task (whole rows).
const TASK_VALUES: usize = 1 << 15;
/// Most input channels this kernel takes (beyond, the GEMM's reduction is long enough).
pub(crate) const MAX_C: usize = 4;

/// Whether this kernel handles an f32 conv of this geometry on this CPU: one channel at
/// horizontal stride 1, or 2 to [`MAX_C`] channels at any stride (SqueezeNet's first
/// layer, `[N,224,224,3]` 3x3 stride 2 VALID to 64 channels, fused bias + relu: 2.1x faster
/// than im2col + GEMM at N = 1 and 2.5x at N = 8, per-node profile of `onnx_profile`, loaded
/// 2-core machine).
pub(crate) fn applies(g: &Geom) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        ((g.c == 1 && g.sw == 1) || (2..=MAX_C).contains(&g.c))
            && g.o > 0
            && g.o.is_multiple_of(2 * BLOCK)
            && g.kh * g.kw > 1
            && crate::kernels::cpu::caps().avx512f
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = g;
        false
    }
}

/// `out [N*OH*OW, O] = epi(conv2d(x, w))` with `w` the `[KH*KW*C, O]` filter, into the
/// channels `dst` of `out`'s pixel rows (a row computed in a scratch row first when they
/// are not dense); every element of the slice is written. Callers check [`applies`] first;
/// a call where it does not hold leaves `out` untouched and returns false.
pub(crate) fn conv2d(g: &Geom, x: &[f32], w: &[f32], epi: Epilogue<'_, f32>, out: &mut [f32], dst: Dst) -> bool {
    if !applies(g)
        || epi.bias.is_some_and(|b| b.len() != g.o)
        || epi.residual.is_some()
        || w.len() != g.kh * g.kw * g.c * g.o
        || !dst.fits(g.n * g.oh * g.ow, g.o, out.len())
        || !band_holds_tiles(g)
    {
        return false;
    }
    let (row_len, out_row) = (g.ow * g.o, g.ow * dst.stride);
    if row_len == 0 || g.n * g.oh == 0 {
        return true;
    }
    let (c, (wp, taps)) = (g.c, layout(g));
    let par = is_parallel(g.n * g.oh * row_len * g.kh * g.kw * c);
    let rows = TASK_VALUES.div_ceil(row_len).max(1);
    let dense = dst.is_dense(g.o);
    for_each_chunk(out, rows * out_row, par, |i, chunk| {
        let mut band = vec![0.0; g.kh * wp * c];
        let mut scratch = vec![0.0; if dense { 0 } else { row_len }];
        for (j, orow) in chunk.chunks_exact_mut(out_row).enumerate() {
            fill_band(g, x, i * rows + j, wp, &mut band);
            let target = if dense { &mut orow[..] } else { &mut scratch[..] };
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `applies` checked that the CPU supports AVX-512F.
            unsafe {
                avx512::row(g, &band, &taps, w, &epi, target)
            };
            if !dense {
                dst.scatter(&scratch, g.o, orow);
            }
        }
    });
    true
}

/// `conv2d` as in [`conv2d`], then a 2x2 stride-2 VALID max pool: `out [N, OH/2, OW/2, O]`
/// (rows and columns past the last full window dropped). Each pooled row computes its two
/// conv rows into a scratch pair (epilogue applied) and pools them while cache resident, so
/// the conv output never reaches memory. The pool's rule is `max_pool`'s: the first maximal
/// element in row-major window order wins, a NaN counts as maximal. Returns false (nothing
/// written) where [`applies`] does not hold.
pub(crate) fn conv2d_pool(g: &Geom, x: &[f32], w: &[f32], epi: Epilogue<'_, f32>, out: &mut [f32]) -> bool {
    if !applies(g)
        || epi.bias.is_some_and(|b| b.len() != g.o)
        || epi.residual.is_some()
        || w.len() != g.kh * g.kw * g.c * g.o
        || !band_holds_tiles(g)
    {
        return false;
    }
    let (ph, pw, o) = (g.oh / 2, g.ow / 2, g.o);
    let (row_len, prow_len) = (g.ow * o, pw * o);
    if out.len() != g.n * ph * prow_len {
        return false;
    }
    if prow_len == 0 || g.n * ph == 0 {
        return true;
    }
    let (c, (wp, taps)) = (g.c, layout(g));
    let par = is_parallel(g.n * ph * 2 * row_len * g.kh * g.kw * c);
    let rows = TASK_VALUES.div_ceil(2 * row_len).max(1);
    for_each_chunk(out, rows * prow_len, par, |i, chunk| {
        let mut band = vec![0.0; g.kh * wp * c];
        let mut pair = vec![0.0; 2 * row_len];
        for (j, prow) in chunk.chunks_exact_mut(prow_len).enumerate() {
            let pr = i * rows + j;
            let (n, py) = (pr / ph, pr % ph);
            for (k, crow) in pair.chunks_exact_mut(row_len).enumerate() {
                fill_band(g, x, n * g.oh + 2 * py + k, wp, &mut band);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `applies` checked that the CPU supports AVX-512F.
                unsafe {
                    avx512::row(g, &band, &taps, w, &epi, crow)
                };
            }
            let (r0, r1) = pair.split_at(row_len);
            crate::kernels::simd::widest(
                #[inline(always)]
                || pool_pair(r0, r1, o, prow),
            );
        }
    });
    true
}

/// `conv2d` as in [`conv2d`], then the max pool `pg` (over the conv output: `pg.h = OH`,
/// `pg.w = OW`, `pg.c = O`; windows inside it, no padding) into `out [N, PH, PW, O]`:
/// each pooled row computes the `PKH` conv rows its windows read into a cache-resident
/// scratch (keeping those the previous pooled row of the task already computed: for a 3x3
/// stride-2 pool one row of three) and pools them, so the conv output never reaches
/// memory; a task's first pooled row computes all of its rows (one row at each task edge
/// twice for 3x3 stride 2). The rows are [`conv2d`]'s and the pool's fold is `max_pool`'s
/// ([`super::direct::max_pool_row`]), so the result is the unfused ops' bit for bit.
/// Returns false (nothing written) where [`applies`] does not hold or `pg` does not fit.
pub(crate) fn conv2d_pool_window(
    g: &Geom,
    pg: &Geom,
    x: &[f32],
    w: &[f32],
    epi: Epilogue<'_, f32>,
    out: &mut [f32],
) -> bool {
    let (ph, pw, o) = (pg.oh, pg.ow, g.o);
    let inside = pg.pt == 0
        && pg.pl == 0
        && [pg.dh, pg.dw] == [1, 1]
        && pg.kh > 0
        && pg.kw > 0
        && (ph == 0 || (ph - 1) * pg.sh + pg.kh <= pg.h)
        && (pw == 0 || (pw - 1) * pg.sw + pg.kw <= pg.w);
    if !applies(g)
        || !inside
        || [pg.n, pg.h, pg.w, pg.c] != [g.n, g.oh, g.ow, o]
        || epi.bias.is_some_and(|b| b.len() != o)
        || epi.residual.is_some()
        || w.len() != g.kh * g.kw * g.c * o
        || out.len() != g.n * ph * pw * o
        || !band_holds_tiles(g)
    {
        return false;
    }
    let (row_len, prow_len) = (g.ow * o, pw * o);
    if prow_len == 0 || g.n * ph == 0 {
        return true;
    }
    let (c, (wp, taps)) = (g.c, layout(g));
    let par = is_parallel(g.n * ph * pg.sh * row_len * g.kh * g.kw * c);
    let threads = if par { rayon::current_num_threads().max(1) } else { 1 };
    // pooled rows per task: 4 tasks per thread (the scratch holds `PKH` conv rows whatever
    // the task's length; each task computes its first rows' `PKH - PSH` shared rows again)
    let rows = (g.n * ph).div_ceil(4 * threads).max(1);
    // the pool over the scratch: its `PKH` conv rows as the input of output row 0
    let scratch_pool = Geom { h: pg.kh, oh: 1, ..*pg };
    for_each_chunk(out, rows * prow_len, par, |i, chunk| {
        let mut band = vec![0.0; g.kh * wp * c];
        let mut conv = vec![0.0; pg.kh * row_len];
        // (image, first conv row) of the rows `conv` holds
        let mut held: Option<(usize, usize)> = None;
        for (j, prow) in chunk.chunks_exact_mut(prow_len).enumerate() {
            let (n, py) = ((i * rows + j) / ph, (i * rows + j) % ph);
            let first = py * pg.sh;
            let kept = match held {
                Some((hn, hf)) if hn == n && hf <= first && first < hf + pg.kh => {
                    conv.copy_within((first - hf) * row_len.., 0);
                    hf + pg.kh - first
                }
                _ => 0,
            };
            for (k, crow) in conv.chunks_exact_mut(row_len).enumerate().skip(kept) {
                fill_band(g, x, n * g.oh + first + k, wp, &mut band);
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `applies` checked that the CPU supports AVX-512F.
                unsafe {
                    avx512::row(g, &band, &taps, w, &epi, crow)
                };
            }
            held = Some((n, first));
            super::direct::max_pool_row(&scratch_pool, &conv, prow);
        }
    });
    true
}

/// The band width `wp` (pixels: every tap of every output column lands inside, and so do
/// the reads of a full tile past the last column) and the band offset of each tap `(ky, kx,
/// c)` for output column 0, taps in the filter's row order (`[KH, KW, C]` row-major).
fn layout(g: &Geom) -> (usize, Vec<usize>) {
    let wp = (g.ow.div_ceil(PIXELS) * PIXELS - 1) * g.sw + (g.kw - 1) * g.dw + 1;
    let c = g.c;
    let taps = (0..g.kh)
        .flat_map(|ky| (0..g.kw).flat_map(move |kx| (0..c).map(move |ci| (ky * wp + kx * g.dw) * c + ci)))
        .collect();
    (wp, taps)
}

/// Whether every read of every full tile of an output row lies inside its band (`KH x wp
/// x C` values): the last tap of the last tile's last pixel, `((KH-1) wp + (KW-1) DW) C +
/// C - 1 + (8 tiles - 1) SW C`, is `KH wp C - 1` by [`layout`]'s choice of `wp`; checked
/// once per call, so the tap loops read without bounds checks.
fn band_holds_tiles(g: &Geom) -> bool {
    let (wp, taps) = layout(g);
    let last_pixel = g.ow.div_ceil(PIXELS) * PIXELS - 1;
    taps.iter().all(|&t| t + last_pixel * g.sw * g.c < g.kh * wp * g.c)
}

/// The `KH` input rows read by output row `r = n*OH + oy`, zero-padded to `wp` pixels.
fn fill_band(g: &Geom, x: &[f32], r: usize, wp: usize, band: &mut [f32]) {
    let (n, oy, c) = (r / g.oh, r % g.oh, g.c);
    let img = &x[n * g.h * g.w * c..(n + 1) * g.h * g.w * c];
    for (ky, dst) in band.chunks_exact_mut(wp * c).enumerate() {
        dst.fill(0.0);
        let Some(iy) = (oy * g.sh + ky * g.dh).checked_sub(g.pt).filter(|&iy| iy < g.h) else { continue };
        // input column ix lands at band column ix + pl (cut to the band's width)
        let cols = g.w.min(wp.saturating_sub(g.pl));
        dst[g.pl * c..(g.pl + cols) * c].copy_from_slice(&img[iy * g.w * c..(iy * g.w + cols) * c]);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{BLOCK, Epilogue, Geom, PIXELS};

    /// One output row, epilogue included.
    #[target_feature(enable = "avx512f")]
    pub(crate) fn row(g: &Geom, band: &[f32], taps: &[usize], w: &[f32], epi: &Epilogue<'_, f32>, orow: &mut [f32]) {
        pairs(g, band, taps, w, epi, orow)
    }

    /// `v + bias`, then relu, as the epilogue's separate kernels compute them.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn finish(v: __m512, bias: Option<__m512>, relu: bool) -> __m512 {
        let v = match bias {
            Some(b) => _mm512_add_ps(v, b),
            None => v,
        };
        if relu {
            // kept where v > 0 or v is NaN (not less-or-equal, unordered); 0.0 elsewhere
            _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_NLE_UQ>(v, _mm512_setzero_ps()), v)
        } else {
            v
        }
    }

    /// The bias lanes `cb..cb+BLOCK`, if any.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn bias_at(epi: &Epilogue<'_, f32>, cb: usize) -> Option<__m512> {
        let b = epi.bias?.get(cb..cb + BLOCK)?;
        // SAFETY: `b` holds BLOCK = 16 f32.
        Some(unsafe { _mm512_loadu_ps(b.as_ptr()) })
    }

    /// Tiles of 8 pixels x 32 channels (16 accumulators; each broadcast input value feeds
    /// two FMAs). Pixel `p` of a tile reads band element `off + (ox0 + p) * SW * C`; the
    /// common steps `SW * C` are compile-time constants (the 8 pixel offsets then fit in
    /// the load instructions instead of taking registers, which the loop ran out of).
    #[target_feature(enable = "avx512f")]
    fn pairs(g: &Geom, band: &[f32], taps: &[usize], w: &[f32], epi: &Epilogue<'_, f32>, orow: &mut [f32]) {
        match g.sw * g.c {
            1 => tiles::<1>(g, band, taps, w, epi, orow),
            2 => tiles::<2>(g, band, taps, w, epi, orow),
            3 => tiles::<3>(g, band, taps, w, epi, orow),
            4 => tiles::<4>(g, band, taps, w, epi, orow),
            6 => tiles::<6>(g, band, taps, w, epi, orow),
            8 => tiles::<8>(g, band, taps, w, epi, orow),
            _ => tiles::<0>(g, band, taps, w, epi, orow),
        }
    }

    /// [`pairs`] for the step `S` (0: `SW * C` at run time).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn tiles<const S: usize>(
        g: &Geom,
        band: &[f32],
        taps: &[usize],
        w: &[f32],
        epi: &Epilogue<'_, f32>,
        orow: &mut [f32],
    ) {
        let (o, step) = (g.o, if S > 0 { S } else { g.sw * g.c });
        let (bp, wp) = (band.as_ptr(), w.as_ptr());
        for cb in (0..o).step_by(2 * BLOCK) {
            let (b0, b1) = (bias_at(epi, cb), bias_at(epi, cb + BLOCK));
            for ox0 in (0..g.ow).step_by(PIXELS) {
                let mut lo = [_mm512_setzero_ps(); PIXELS];
                let mut hi = [_mm512_setzero_ps(); PIXELS];
                for (t, &off) in taps.iter().enumerate() {
                    // SAFETY: `band_holds_tiles` (checked by the callers) puts every pixel of
                    // every full tile inside the band; the filter holds `taps.len()` rows of
                    // `o` values (`o` a multiple of 2 * BLOCK, checked by `applies`).
                    unsafe {
                        let xs = bp.add(off + ox0 * step);
                        let wv = wp.add(t * o + cb);
                        let (w0, w1) = (_mm512_loadu_ps(wv), _mm512_loadu_ps(wv.add(BLOCK)));
                        for p in 0..PIXELS {
                            let xb = _mm512_set1_ps(*xs.add(p * step));
                            lo[p] = _mm512_fmadd_ps(xb, w0, lo[p]);
                            hi[p] = _mm512_fmadd_ps(xb, w1, hi[p]);
                        }
                    }
                }
                for p in 0..PIXELS.min(g.ow - ox0) {
                    let Some(dst) =
                        orow.get_mut((ox0 + p) * o + cb..).and_then(|s| s.first_chunk_mut::<{ 2 * BLOCK }>())
                    else {
                        continue;
                    };
                    // SAFETY: `dst` holds 2 * BLOCK = 32 f32.
                    unsafe {
                        _mm512_storeu_ps(dst.as_mut_ptr(), finish(lo[p], b0, epi.relu));
                        _mm512_storeu_ps(dst.as_mut_ptr().add(BLOCK), finish(hi[p], b1, epi.relu));
                    }
                }
            }
        }
    }
}
