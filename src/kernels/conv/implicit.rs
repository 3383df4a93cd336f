//! Implicit-GEMM f32 `conv2d` on CPUs with AVX-512: the register-blocked micro-kernel of
//! [`crate::kernels::micro`] reads every tap's input straight from the image (or from a
//! zero-padded band of its rows), so no patch matrix is written.
//!
//! im2col + GEMM writes a patch matrix `KH*KW/(SH*SW)` times the input (2.25x for the 3x3
//! stride-2 convs of ResNet-50's stage transitions, 9x for a 3x3 stride-1 one) and reads it
//! back, and its GEMM streams the filter from memory in the filter's row-major order; at
//! one image, where every layer's filter is read once for few pixels, both dominate. Here a
//! call computes a tile of up to 6 output pixels x 64 output channels over one depth block
//! ([`depth_blocks`]: several kernel rows where a row's `KW*C` taps are short, else pieces
//! of at most `KC` of one kernel row), the pixels' input vectors `SW*C` apart; consecutive
//! blocks continue the tile's sums from where the previous block stored them (the
//! micro-kernel's `load`), so the whole depth is summed as one product in the filter's
//! `(ky, kx, c)` order. Per block the filter rows in use (at most 40 KiB: one contiguous run
//! of the filter's panels, `kernels::gemm::Panels`, where the plan prepared them) stay in
//! L1 while every pixel tile of a segment of output rows reads them. Measured per layer on
//! ResNet-50 at n = 1 (`PFOR_PROFILE` of `onnx_profile`, best of 20, against
//! `PFOR_NO_IMPLICIT_GEMM`): `[7,7,512]` 3x3 stride 1 1.62 → 1.25 ms, `[7,7,2048]` → 512
//! 1x1 0.76 → 0.58 ms, `[56,56,256]` 1x1 stride 2 1.14 → 0.98 ms; see BENCHMARKS.md.
//!
//! Work is split into tasks of (a segment of output rows of one image, a group of 64-channel
//! column blocks). A segment whose windows reach the padding first copies the input rows it
//! reads into a zero-padded band (at most [`BAND_BYTES`]); without padding the taps read the
//! input directly, and a 1x1 stride-1 conv's rows form one run of pixels (tiles do not stop
//! at row ends). The epilogue (`+ bias`, `+ residual`, relu: the arithmetic of the separate
//! ops) is applied in registers by the last depth block's micro-kernel calls, before their
//! stores (`micro::Finish`).
//!
//! Invariants: [`conv2d`] runs only where [`applies`] holds (the caller checks nothing
//! else); it writes every element of the output slice `dst` and no other, or returns false
//! having written nothing. Every output element is the sum of its taps' products in
//! `(ky, kx, c)` order from zero, one fused multiply-add each (a padded tap adds the product
//! of the padding's zero), whatever the batch, the segment, the thread or the filter's form
//! (panels or row-major): the kernel choice depends on the channel counts only (not on `N`),
//! so a batched conv gives the values of the per-example convs bit for bit, a constant
//! filter those of a fed one, and a fused epilogue those of the separate ops.

use rayon::prelude::*;

use super::im2col::Epilogue;
use super::{Dst, Geom, is_parallel};
use crate::kernels::gemm::GemmElem;

/// Output channels per column block (4 vectors of 16 lanes): a panel of the filter's
/// prepared form (`kernels::gemm::Panels`).
const COLS: usize = crate::kernels::gemm::PANEL;
/// Longest piece of a kernel row per micro-kernel call: `KC x COLS` filter values (32 KiB)
/// stay in L1 while a segment's pixel tiles read them.
const KC: usize = 128;
/// Longest depth block of whole kernel rows (see [`depth_blocks`]): `160 x 64` filter
/// values, 40 KiB, within L1.
const ROW_BLOCK: usize = 160;
/// Output pixels per micro-kernel call (6 x 4 vectors: 24 accumulators).
const PIXELS: usize = 6;
/// Bytes of input rows a segment reads (its padded band, where it needs one).
const BAND_BYTES: usize = 256 << 10;

/// Whether this kernel computes an f32 conv of this geometry on this CPU: any window over
/// more channels than the direct kernel for few channels takes ([`super::narrow::MAX_C`]),
/// except a 1x1 stride-1 conv whose product the in-place GEMM takes (`kernels::gemm::
/// ab_applies`: the input is its patch matrix already, and that kernel's row tasks balance
/// small layers better; SqueezeNet's `[13,13,384] → 48` ran 0.5-0.9x as fast here); the
/// caller tries Winograd first (the 3x3 and 5x5 stride-1 convs its cost rule picks).
pub(crate) fn applies(g: &Geom) -> bool {
    takes(g.c, g.o) && g.kh * g.kw > 0 && !(g.pointwise() && <f32 as GemmElem>::in_place(1, g.c, g.o))
}

/// [`applies`] as far as a conv's input channels `c` and output channels `o` decide it (the
/// plan compiler's question: whether the filter is worth preparing in panels).
pub(crate) fn takes(c: usize, o: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        c > super::narrow::MAX_C && o > 0 && crate::kernels::cpu::caps().avx512f
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (c, o);
        false
    }
}

/// Where a segment's taps read: the input rows directly, or a zero-padded band.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Whether any window reaches the padding (then every segment reads a band).
    band: bool,
    /// Pixels per row of what the taps read (`W`, or the band's width).
    width: usize,
    /// Output rows per segment, at most.
    seg_rows: usize,
}

impl Layout {
    fn new(g: &Geom) -> Layout {
        let wp = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
        let hp = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
        let band = g.pt > 0 || g.pl > 0 || hp > g.h || wp > g.w;
        let width = if band { wp } else { g.w };
        // input rows a segment of s output rows reads: (s - 1) SH + (KH - 1) DH + 1
        let rows_fit = BAND_BYTES / (width * g.c * size_of::<f32>()).max(1);
        let tap_rows = (g.kh - 1) * g.dh + 1;
        let seg_rows = (rows_fit.saturating_sub(tap_rows) / g.sh + 1).min(g.oh);
        Layout { band, width, seg_rows }
    }
    /// Input rows (band rows) a segment of `rows` output rows reads.
    fn band_rows(&self, g: &Geom, rows: usize) -> usize {
        (rows - 1) * g.sh + (g.kh - 1) * g.dh + 1
    }
}

/// `out [N*OH*OW, O] = epi(conv2d(x, w))` with `w` the `[KH*KW*C, O]` filter, into the
/// channels `dst` of `out`'s pixel rows; every element of the slice is written. Returns
/// false (nothing written) where [`applies`] does not hold or the buffers do not match the
/// geometry.
pub(crate) fn conv2d(g: &Geom, x: &[f32], w: &[f32], epi: Epilogue<'_, f32>, out: &mut [f32], dst: Dst) -> bool {
    let (pixels, o) = (g.n * g.oh * g.ow, g.o);
    if !applies(g)
        || epi.bias.is_some_and(|b| b.len() != o)
        || epi.residual.is_some_and(|r| r.len() != pixels * o)
        || w.len() != g.kh * g.kw * g.c * o
        || x.len() != g.n * g.h * g.w * g.c
        || !dst.fits(pixels, o, out.len())
    {
        return false;
    }
    if pixels == 0 {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    run(g, x, w, &epi, out, dst);
    true
}

#[cfg(target_arch = "x86_64")]
fn run(g: &Geom, x: &[f32], w: &[f32], epi: &Epilogue<'_, f32>, out: &mut [f32], dst: Dst) {
    use crate::kernels::micro::SharedMut;

    let lay = Layout::new(g);
    let blocks = g.o.div_ceil(COLS);
    let work = [g.n, g.oh, g.ow, g.kh, g.kw, g.c, g.o].iter().fold(1usize, |a, &b| a.saturating_mul(b));
    let par = is_parallel(work);
    let threads = if par { rayon::current_num_threads().max(1) } else { 1 };
    let want = 8 * threads;
    // segments of at most the band's rows, more (down to single rows) where there would be
    // fewer than 4 (segment, column block) tasks per thread (each segment reads the filter
    // once: as few as balance allows)
    let segs = g.oh.div_ceil(lay.seg_rows).max((4 * threads).div_ceil(g.n * blocks)).min(g.oh);
    // segment j of an image: output rows [j*OH/segs, (j+1)*OH/segs) (sizes within one row)
    let seg = |j: usize| (j * g.oh / segs, (j + 1) * g.oh / segs);
    // `want` tasks where there are that many (segment, column block) pairs, the rest as
    // wide column groups (each re-reads its segment's input)
    let per_task = (blocks * g.n * segs / want).clamp(1, blocks);
    let groups = blocks.div_ceil(per_task);
    let tasks = g.n * segs * groups;
    let band_len = if lay.band { lay.band_rows(g, seg(0).1 - seg(0).0 + 1) * lay.width * g.c } else { 0 };
    // the filter in panels where the plan prepared them (one contiguous stream per column
    // block), else row-major: the same values in the same order either way
    let panels = epi.filter.and_then(|f| f.panels()).filter(|p| p.shape() == (g.kh * g.kw * g.c, g.o));
    // the depth blocks, the same for every task (rows of `lay.width` pixels, band or input)
    let steps = depth_blocks(g, lay.width * g.c, if panels.is_some() { COLS } else { g.o });
    let optr = SharedMut(out.as_mut_ptr());
    let task = |band: &mut Vec<f32>, t: usize| {
        let (img, rest) = (t / (segs * groups), t % (segs * groups));
        let ((y0, y1), grp) = (seg(rest / groups), rest % groups);
        let cols = grp * per_task * COLS..((grp + 1) * per_task * COLS).min(g.o);
        let (src, row_len) = if lay.band {
            band.resize(band_len, 0.0);
            fill_band(g, &lay, x, img, y0, y1, band);
            (&band[..], lay.width * g.c)
        } else {
            (&x[(img * g.h + y0 * g.sh) * g.w * g.c..(img + 1) * g.h * g.w * g.c], g.w * g.c)
        };
        // SAFETY: AVX-512F (`applies`); the task writes only its rows y0..y1 of image `img`,
        // columns `cols` of the slice `dst` (disjoint from every other task's), and reads
        // `src` within its rows (see `segment`).
        unsafe { segment(g, src, row_len, &steps, w, panels, epi, optr, dst, img, (y0, y1), cols) };
    };
    if par {
        (0..tasks).into_par_iter().for_each_init(Vec::new, task);
    } else {
        let mut band = Vec::new();
        (0..tasks).for_each(|t| task(&mut band, t));
    }
}

/// The depth blocks of one output pixel's product, in the filter's `(ky, kx, c)` order:
/// `(offset of the block's first input value from the pixel's first, its first filter row,
/// the walk)`. With undilated columns a kernel row's taps are one contiguous run of `KW*C`
/// values in both the input and the filter: runs up to [`ROW_BLOCK`] long go several kernel
/// rows to a block (a first layer's `7x7x3` filter is one block), longer ones are cut into
/// equal pieces of at most [`KC`]; dilated columns go tap by tap, `KC` channels at a time.
fn depth_blocks(g: &Geom, row_len: usize, ldb: usize) -> Vec<(usize, usize, crate::kernels::micro::Depth)> {
    use crate::kernels::micro::Depth;
    let c = g.c;
    let run = g.kw * c;
    let mut out = Vec::new();
    if g.dw == 1 && run <= ROW_BLOCK {
        let rows = ROW_BLOCK / run;
        for ky in (0..g.kh).step_by(rows) {
            let r = rows.min(g.kh - ky);
            let depth = Depth { n: [1, r, run], sa: [0, g.dh * row_len, 1], sb: [0, run * ldb, ldb] };
            out.push((ky * g.dh * row_len, ky * run, depth));
        }
    } else if g.dw == 1 {
        let pieces = run.div_ceil(KC);
        for ky in 0..g.kh {
            for p in 0..pieces {
                let (j0, j1) = (p * run / pieces, (p + 1) * run / pieces);
                out.push((ky * g.dh * row_len + j0, ky * run + j0, Depth::flat(j1 - j0, 1, ldb)));
            }
        }
    } else {
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                for c0 in (0..c).step_by(KC) {
                    let a_off = ky * g.dh * row_len + kx * g.dw * c + c0;
                    out.push((a_off, (ky * g.kw + kx) * c + c0, Depth::flat((c - c0).min(KC), 1, ldb)));
                }
            }
        }
    }
    out
}

/// The band of image `img`'s input rows that output rows `y0..y1` read, zero-padded: band
/// row `r` is padded row `y0*SH + r` (input row `y0*SH + r - PT` where that is inside),
/// band column `j` input column `j - PL`.
fn fill_band(g: &Geom, lay: &Layout, x: &[f32], img: usize, y0: usize, y1: usize, band: &mut [f32]) {
    let (c, wp) = (g.c, lay.width);
    let image = &x[img * g.h * g.w * c..(img + 1) * g.h * g.w * c];
    let cols = g.w.min(wp.saturating_sub(g.pl));
    for (r, row) in band.chunks_exact_mut(wp * c).take(lay.band_rows(g, y1 - y0)).enumerate() {
        match (y0 * g.sh + r).checked_sub(g.pt).filter(|&iy| iy < g.h) {
            Some(iy) => {
                row[..g.pl * c].fill(0.0);
                row[g.pl * c..(g.pl + cols) * c].copy_from_slice(&image[iy * g.w * c..(iy * g.w + cols) * c]);
                row[(g.pl + cols) * c..].fill(0.0);
            }
            None => row.fill(0.0),
        }
    }
}

/// Output rows `y0..y1` of image `img`, output channels `cols`: per 64-channel block, the
/// depth blocks `steps` ([`depth_blocks`] of `row_len` and the filter's row stride), each
/// over every pixel tile of the rows, the last one finishing with the epilogue. `src` holds the rows the taps read
/// (`row_len` values each, the first one padded row `y0*SH`).
///
/// # Safety
/// The CPU has AVX-512F; `panels` (if any) are `w`'s; `src` holds [`Layout::band_rows`] rows of `row_len >= ((OW-1) SW +
/// (KW-1) DW + 1) C` values; `out` is the output slice `dst` of `N*OH*OW` pixel rows, of
/// which no other thread touches rows `y0..y1` of image `img` in columns `cols`.
#[allow(clippy::too_many_arguments)]
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn segment(
    g: &Geom,
    src: &[f32],
    row_len: usize,
    steps: &[(usize, usize, crate::kernels::micro::Depth)],
    w: &[f32],
    panels: Option<&crate::kernels::gemm::Panels>,
    epi: &Epilogue<'_, f32>,
    out: crate::kernels::micro::SharedMut,
    dst: Dst,
    img: usize,
    (y0, y1): (usize, usize),
    cols: std::ops::Range<usize>,
) {
    use crate::kernels::micro::{FULL, Finish, LANES, micro_dyn};

    let (c, o) = (g.c, g.o);
    // runs of output pixels whose inputs are `SW*C` apart: each output row, or all the
    // segment's rows as one run where the rows follow each other that way too (a 1x1
    // stride-1 conv without padding), so that tiles do not stop at row ends
    let (runs, run) = if g.sh * row_len == g.ow * g.sw * c { (1, (y1 - y0) * g.ow) } else { (y1 - y0, g.ow) };
    let tiles = run.div_ceil(PIXELS);
    let (a, out) = (src.as_ptr(), out.ptr());
    let first_pixel = (img * g.oh + y0) * g.ow;
    let ldb = if panels.is_some() { COLS } else { o };
    // the epilogue, applied by the last depth block's micro-kernel calls in registers
    let fin = Finish {
        bias: epi.bias.map_or(std::ptr::null(), <[f32]>::as_ptr),
        res: epi.residual.map_or(std::ptr::null(), <[f32]>::as_ptr),
        ldr: o,
        relu: epi.relu,
    };
    for n0 in cols.clone().step_by(COLS) {
        let width = (cols.end - n0).min(COLS);
        let nv = width.div_ceil(LANES);
        let last = match width % LANES {
            0 => FULL,
            t => (1u16 << t) - 1,
        };
        // column n0 of the filter's rows: its panel (rows of 64), or the row-major filter
        let b = match panels.and_then(|p| p.panel(n0 / COLS)) {
            Some(panel) => panel.as_ptr(),
            None => w.as_ptr().wrapping_add(n0),
        };
        for (k, &(a_off, b_row, depth)) in steps.iter().enumerate() {
            let (load, bp) = (k > 0, b.wrapping_add(b_row * ldb));
            for y in 0..runs {
                let row_a = a_off + y * g.sh * row_len;
                for t in 0..tiles {
                    // pixel tiles of (nearly) equal sizes: x0 .. x1
                    let (x0, x1) = (t * run / tiles, (t + 1) * run / tiles);
                    let p = first_pixel + y * run + x0;
                    let fin = if k + 1 == steps.len() { fin.at(p, n0) } else { Finish::NONE };
                    // SAFETY: the caller's bounds: the tile's taps lie in `src`'s rows, its
                    // outputs in rows y0..y1, columns n0..n0+width (and so do the
                    // epilogue's bias and residual terms: `O` and `N*OH*OW*O` values).
                    unsafe {
                        micro_dyn(
                            x1 - x0,
                            nv,
                            a.add(row_a + x0 * g.sw * c),
                            g.sw * c,
                            bp,
                            &depth,
                            out.add(p * dst.stride + dst.off + n0),
                            dst.stride,
                            last,
                            load,
                            fin,
                        )
                    };
                }
            }
        }
        if !epi.is_none() && steps.is_empty() {
            for p in first_pixel..first_pixel + (y1 - y0) * g.ow {
                // SAFETY: pixel p's columns n0..n0+width of the slice: this task's.
                let vals = unsafe { std::slice::from_raw_parts_mut(out.add(p * dst.stride + dst.off + n0), width) };
                epi.apply_span(vals, n0, p * o + n0);
            }
        }
    }
}
