//! Winograd F(2x2, 5x5) f32 `conv2d` for 5x5 stride-1 undilated filters with channel
//! counts that are multiples of 16, on CPUs with AVX-512 (W2's second layer and its kind).
//!
//! A 2x2 block of outputs reads a 6x6 input tile. Written as `Y = Aᵀ [U ⊙ V] A` with
//! `U = G g Gᵀ` (the filter, once per call) and `V = Bᵀ d B` (each input tile), the 100
//! multiply-adds per output channel and input channel of a direct 2x2 block become 36
//! element products, and summed over input channels those are 36 independent GEMMs
//! `M_p [tiles, O] = V_p [tiles, C] · U_p [C, O]`: 2.8x fewer multiplies than im2col. The
//! transform matrices come from Toom-Cook interpolation at the points `0, ±1, ±2, ∞`
//! (`Bᵀ` is the one of the classic F(4x4, 3x3)); `G` carries the fractions so that `Bᵀ`
//! and `Aᵀ` are small integers.
//!
//! Work is split into tasks of whole tile rows (whole images when `OH` is odd); a task
//! works through batches of [`BATCH`] tiles whose transformed inputs (`36 x BATCH x C`)
//! and GEMM results (`36 x BATCH x O`) stay in the core's L2 cache: input transform (tiles
//! inside the image read the input in place, edge tiles go through a zero-padded copy),
//! register-blocked GEMMs of 6 tiles x 64 channels over the reduction in order, then the
//! output transform with the `+ bias`, `relu` epilogue in registers. [`conv2d_pool`] also
//! applies the fused 2x2 max pool there: an output tile is exactly one pooling window.
//!
//! Invariants: the kernels run only where [`applies`] holds and then write every output
//! element; every output is a function of its own tile's inputs and the filter computed
//! in a fixed order (transforms, then the sum over input channels from the first), so a
//! batch of images gives bit-for-bit the per-image results, and the pooled kernel gives
//! `max_pool` of the unpooled one (its selection rule, `direct::better`). The results
//! differ from im2col's by rounding: the transforms scale values by up to ~100 before the
//! products, so errors are a small multiple of a direct sum's (measured in the tests), and
//! inputs with infinities can give NaN where a direct sum gives ±inf.
//! `ExecOptions::winograd` (`PFOR_NO_WINOGRAD`; on built in) turns the kernel off for a
//! session, leaving the im2col path; outside a run it is on.

use rayon::prelude::*;

use super::Geom;
use super::im2col::Epilogue;

/// Side of an input tile (`m + r - 1` for 2x2 outputs of a 5x5 filter).
const T6: usize = 6;
/// Transform points per tile.
const POINTS: usize = T6 * T6;
use crate::kernels::micro::LANES;
/// Tiles per batch (GEMM rows); see the module docs for the cache budget.
const BATCH: usize = 30;
/// Tiles per parallel task, about.
const TASK_TILES: usize = 64;

/// Whether this kernel handles an f32 conv of this geometry on this CPU.
pub(crate) fn applies(g: &Geom) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        g.kh == 5
            && g.kw == 5
            && [g.sh, g.sw, g.dh, g.dw] == [1; 4]
            && g.c > 0
            && g.o > 0
            && g.c.is_multiple_of(LANES)
            && g.o.is_multiple_of(LANES)
            && crate::kernels::cpu::caps().avx512f
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = g;
        false
    }
}

/// `out [N, OH, OW, O] = epi(conv2d(x, w))` with `w` the `[5, 5, C, O]` filter; every
/// element of `out` is written. False (nothing written) where [`applies`] does not hold.
pub(crate) fn conv2d(g: &Geom, x: &[f32], w: &[f32], epi: Epilogue<'_, f32>, out: &mut [f32]) -> bool {
    run(g, x, w, epi, out, false)
}

/// [`conv2d`], then a 2x2 stride-2 VALID max pool: `out [N, OH/2, OW/2, O]`. False (nothing
/// written) where [`applies`] does not hold or `OH`, `OW` are odd.
pub(crate) fn conv2d_pool(g: &Geom, x: &[f32], w: &[f32], epi: Epilogue<'_, f32>, out: &mut [f32]) -> bool {
    g.oh.is_multiple_of(2) && g.ow.is_multiple_of(2) && run(g, x, w, epi, out, true)
}

/// The forward geometry whose conv is `conv2d_backprop_input` of `g` (input `dy [N, OH, OW,
/// O]`, filter `[5, 5, O, C]` flipped, output `[N, H, W, C]`, leading padding `4 - p`),
/// where this kernel handles it.
pub(crate) fn transposed(g: &Geom) -> Option<Geom> {
    let t = Geom {
        h: g.oh,
        w: g.ow,
        c: g.o,
        o: g.c,
        oh: g.h,
        ow: g.w,
        pt: 4usize.checked_sub(g.pt)?,
        pl: 4usize.checked_sub(g.pl)?,
        ..*g
    };
    // dx[iy] = Σ_ky dy[iy + pt - ky] w[ky] = Σ_ky' dy[iy + ky' - (4 - pt)] w[4 - ky'], rows
    // of dy outside [0, OH) counting zero: the kernel's padding (stride 1, undilated)
    applies(&t).then_some(t)
}

/// `dx [N, H, W, C]` of a 5x5 stride-1 conv with filter `w [5, 5, C, O]`: the conv of `dy`
/// by the flipped, transposed filter over the [`transposed`] geometry `t`. False (nothing
/// written) where the kernel does not take it.
pub(crate) fn conv2d_backprop_input(t: &Geom, w: &[f32], dy: &[f32], dx: &mut [f32]) -> bool {
    let (c, o) = (t.o, t.c);
    if w.len() != 25 * c * o {
        return false;
    }
    // w'[ky][kx][o][c] = w[4-ky][4-kx][c][o]
    let mut wt = vec![0.0f32; w.len()];
    for tap in 0..25 {
        let src = &w[(24 - tap) * c * o..][..c * o];
        let dst = &mut wt[tap * c * o..][..c * o];
        for ci in 0..c {
            for oi in 0..o {
                dst[oi * c + ci] = src[ci * o + oi];
            }
        }
    }
    run(t, dy, &wt, Epilogue { bias: None, relu: false }, dx, false)
}

/// Shapes of one call, shared by its tasks.
struct Job<'a> {
    g: &'a Geom,
    x: &'a [f32],
    /// The transformed filter `U`, `[36, C, O]`.
    u: Vec<f32>,
    epi: Epilogue<'a, f32>,
    pooled: bool,
    tiles_y: usize,
    tiles_x: usize,
}

/// Per-task scratch: transformed inputs `[36, BATCH, C]`, GEMM results `[36, BATCH, O]`,
/// one zero-padded edge tile `[6, 6, C]`.
struct Scratch {
    v: Vec<f32>,
    m: Vec<f32>,
    patch: Vec<f32>,
}

fn run(g: &Geom, x: &[f32], w: &[f32], epi: Epilogue<'_, f32>, out: &mut [f32], pooled: bool) -> bool {
    let (tiles_y, tiles_x) = (g.oh.div_ceil(2), g.ow.div_ceil(2));
    let len = if pooled { g.n * tiles_y * tiles_x * g.o } else { g.n * g.oh * g.ow * g.o };
    if !applies(g)
        || epi.bias.is_some_and(|b| b.len() != g.o)
        || w.len() != 25 * g.c * g.o
        || x.len() != g.n * g.h * g.w * g.c
        || out.len() != len
    {
        return false;
    }
    if out.is_empty() {
        return true;
    }
    // Units: output blocks of whole tiles, contiguous in `out`.
    let (unit_tiles, unit_len) = if pooled {
        (tiles_x, tiles_x * g.o)
    } else if g.oh.is_multiple_of(2) {
        (tiles_x, 2 * g.ow * g.o)
    } else {
        (tiles_y * tiles_x, g.oh * g.ow * g.o)
    };
    let units = TASK_TILES.div_ceil(unit_tiles).max(1);
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY (all `avx512` calls below): `applies` checked that the CPU has AVX-512F.
        let u = unsafe { avx512::filter(g, w) };
        let job = Job { g, x, u, epi, pooled, tiles_y, tiles_x };
        let total = g.n * tiles_y * tiles_x;
        let scratch = || Scratch {
            v: vec![0.0; POINTS * BATCH * g.c],
            m: vec![0.0; POINTS * BATCH * g.o],
            patch: vec![0.0; POINTS * g.c],
        };
        let task = |s: &mut Scratch, i: usize, chunk: &mut [f32]| {
            let f0 = i * units * unit_tiles;
            let f1 = (f0 + units * unit_tiles).min(total);
            for b0 in (f0..f1).step_by(BATCH) {
                unsafe { avx512::batch(&job, s, b0..(b0 + BATCH).min(f1), i * units * unit_len, chunk) };
            }
        };
        if super::is_parallel(len * 25 * g.c) {
            out.par_chunks_mut(units * unit_len).enumerate().for_each_init(scratch, |s, (i, c)| task(s, i, c));
        } else {
            let mut s = scratch();
            out.chunks_mut(units * unit_len).enumerate().for_each(|(i, c)| task(&mut s, i, c));
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (units, unit_len, x);
        false
    }
}

/// `G` (6x5) of the filter transform `U = G g Gᵀ`.
const G: [[f32; 5]; T6] = [
    [1.0 / 4.0, 0.0, 0.0, 0.0, 0.0],
    [1.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0],
    [1.0 / 6.0, -1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0, 1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0, 1.0 / 3.0, 2.0 / 3.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0, -1.0 / 3.0, 2.0 / 3.0],
    [0.0, 0.0, 0.0, 0.0, 1.0],
];

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use super::{BATCH, G, Job, LANES, POINTS, Scratch, T6};
    use crate::kernels::conv::Geom;
    use crate::kernels::micro::{Depth, micro_dyn};

    /// `U [36, C, O] = G g Gᵀ` per `(c, o)`, `g` the 5x5 taps of `w [5, 5, C, O]`.
    #[target_feature(enable = "avx512f")]
    pub(crate) fn filter(g: &Geom, w: &[f32]) -> Vec<f32> {
        let (c, o) = (g.c, g.o);
        let mut u = vec![0.0f32; POINTS * c * o];
        // `gw [6, 5, O]`: G applied along the filter rows, for one input channel
        let mut gw = vec![0.0f32; T6 * 5 * o];
        for ci in 0..c {
            gw.fill(0.0);
            for (xi, grow) in G.iter().enumerate() {
                for (ky, &gk) in grow.iter().enumerate() {
                    if gk == 0.0 {
                        continue;
                    }
                    for kx in 0..5 {
                        let src = &w[((ky * 5 + kx) * c + ci) * o..][..o];
                        let dst = &mut gw[(xi * 5 + kx) * o..][..o];
                        dst.iter_mut().zip(src).for_each(|(d, &s)| *d += gk * s);
                    }
                }
            }
            for xi in 0..T6 {
                for (nu, grow) in G.iter().enumerate() {
                    let dst = &mut u[((xi * T6 + nu) * c + ci) * o..][..o];
                    for (kx, &gk) in grow.iter().enumerate() {
                        if gk == 0.0 {
                            continue;
                        }
                        let src = &gw[(xi * 5 + kx) * o..][..o];
                        dst.iter_mut().zip(src).for_each(|(d, &s)| *d += gk * s);
                    }
                }
            }
        }
        u
    }

    /// Tiles `tiles` (flat `(n, ty, tx)` indices) into `chunk`, the part of the output
    /// starting at element `base`.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `s` was sized for `job.g`; `tiles` has at most [`BATCH`]
    /// tiles and their outputs lie inside `chunk`.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn batch(job: &Job<'_>, s: &mut Scratch, tiles: Range<usize>, base: usize, chunk: &mut [f32]) {
        let g = job.g;
        let (c, o, nt) = (g.c, g.o, tiles.len());
        for (t, f) in tiles.clone().enumerate() {
            let (n, ty, tx) = (f / (job.tiles_y * job.tiles_x), f / job.tiles_x % job.tiles_y, f % job.tiles_x);
            let (y0, x0) = ((2 * ty) as isize - g.pt as isize, (2 * tx) as isize - g.pl as isize);
            let inside = y0 >= 0 && x0 >= 0 && y0 as usize + T6 <= g.h && x0 as usize + T6 <= g.w;
            let (src, row) = if inside {
                (&job.x[((n * g.h + y0 as usize) * g.w + x0 as usize) * c..], g.w * c)
            } else {
                edge_tile(g, job.x, n, y0, x0, &mut s.patch);
                (&s.patch[..], T6 * c)
            };
            // SAFETY: a 6x6 tile of `row`-strided rows of `c` channels lies in `src`; the
            // writes stay inside `s.v` ([36, BATCH, C], t < BATCH).
            unsafe { input_tile(src.as_ptr(), row, c, s.v.as_mut_ptr().add(t * c), BATCH * c) };
        }
        // SAFETY: `s.v`, `job.u`, `s.m` hold [36, BATCH, C], [36, C, O], [36, BATCH, O].
        unsafe { gemms(s.v.as_ptr(), job.u.as_ptr(), s.m.as_mut_ptr(), nt, c, o) };
        for (t, f) in tiles.enumerate() {
            let src = &s.m[t * o..];
            if job.pooled {
                // the pooled pixel of tile f is out[f * O..]
                let dst = &mut chunk[f * o - base..][..o];
                // SAFETY: `src` holds point p of this tile at p * BATCH * O, o channels each.
                unsafe { output_tile_pooled(src.as_ptr(), BATCH * o, o, &job.epi, dst) };
            } else {
                let (n, ty, tx) = (f / (job.tiles_y * job.tiles_x), f / job.tiles_x % job.tiles_y, f % job.tiles_x);
                let (rows, cols) = ((g.oh - 2 * ty).min(2), (g.ow - 2 * tx).min(2));
                let at = ((n * g.oh + 2 * ty) * g.ow + 2 * tx) * o - base;
                // SAFETY: as above; the `rows x cols` block of pixels at `at` lies in `chunk`.
                unsafe { output_tile(src.as_ptr(), BATCH * o, o, &job.epi, &mut chunk[at..], g.ow * o, rows, cols) };
            }
        }
    }

    /// The 6x6 input tile at `(y0, x0)` of image `n`, zero outside the image, into `patch`.
    fn edge_tile(g: &Geom, x: &[f32], n: usize, y0: isize, x0: isize, patch: &mut [f32]) {
        let c = g.c;
        patch.fill(0.0);
        for i in 0..T6 {
            let iy = y0 + i as isize;
            if iy < 0 || iy as usize >= g.h {
                continue;
            }
            let (lo, hi) = ((-x0).clamp(0, T6 as isize) as usize, (g.w as isize - x0).clamp(0, T6 as isize) as usize);
            if lo < hi {
                let src = ((n * g.h + iy as usize) * g.w) as isize + x0 + lo as isize;
                let src = &x[src as usize * c..][..(hi - lo) * c];
                patch[(i * T6 + lo) * c..(i * T6 + hi) * c].copy_from_slice(src);
            }
        }
    }

    /// `Bᵀ d` for one column of 6 vectors.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn bt(d: [__m512; T6]) -> [__m512; T6] {
        let (four, five, two) = (_mm512_set1_ps(4.0), _mm512_set1_ps(-5.0), _mm512_set1_ps(2.0));
        let s1 = _mm512_fmsub_ps(four, d[2], d[4]);
        let s2 = _mm512_fmsub_ps(four, d[1], d[3]);
        let s3 = _mm512_sub_ps(d[4], d[2]);
        let e = _mm512_sub_ps(d[3], d[1]);
        [
            _mm512_fmadd_ps(five, d[2], _mm512_fmadd_ps(four, d[0], d[4])),
            _mm512_add_ps(s1, s2),
            _mm512_sub_ps(s1, s2),
            _mm512_fmadd_ps(two, e, s3),
            _mm512_fnmadd_ps(two, e, s3),
            _mm512_fmadd_ps(five, d[3], _mm512_fmadd_ps(four, d[1], d[5])),
        ]
    }

    /// `Aᵀ m` for one column of 6 vectors.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn at(m: [__m512; T6]) -> [__m512; 2] {
        let (a, b) = (_mm512_add_ps(m[1], m[2]), _mm512_sub_ps(m[1], m[2]));
        let (c, d) = (_mm512_add_ps(m[3], m[4]), _mm512_sub_ps(m[3], m[4]));
        [_mm512_add_ps(_mm512_add_ps(m[0], a), c), _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(2.0), d, b), m[5])]
    }

    /// `V = Bᵀ d B` of one tile (`d[i][j]` at `src + i*row + j*c`), point `p` written to
    /// `dst + p*stride`, for every channel.
    #[target_feature(enable = "avx512f")]
    unsafe fn input_tile(src: *const f32, row: usize, c: usize, dst: *mut f32, stride: usize) {
        for cv in (0..c).step_by(LANES) {
            // `t[i][j]`: Bᵀ applied to column j of the tile
            let mut t = [[_mm512_setzero_ps(); T6]; T6];
            #[allow(clippy::needless_range_loop)]
            for j in 0..T6 {
                // SAFETY (loads and stores): see the caller.
                let col = bt(std::array::from_fn(|i| unsafe { _mm512_loadu_ps(src.add(i * row + j * c + cv)) }));
                for i in 0..T6 {
                    t[i][j] = col[i];
                }
            }
            for (i, ti) in t.iter().enumerate() {
                for (k, v) in bt(*ti).into_iter().enumerate() {
                    unsafe { _mm512_storeu_ps(dst.add((i * T6 + k) * stride + cv), v) };
                }
            }
        }
    }

    /// `Aᵀ M A` of one tile for the 16 channels at `m` (point `p` at `m + p*stride`).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn output_block(m: *const f32, stride: usize) -> [[__m512; 2]; 2] {
        // `s[a][j]`: row a of Aᵀ applied to column j of the tile
        let mut s = [[_mm512_setzero_ps(); T6]; 2];
        #[allow(clippy::needless_range_loop)]
        for j in 0..T6 {
            // SAFETY: see the callers.
            [s[0][j], s[1][j]] = at(std::array::from_fn(|i| unsafe { _mm512_loadu_ps(m.add((i * T6 + j) * stride)) }));
        }
        [at(s[0]), at(s[1])]
    }

    /// `v + bias`, then relu, as the separate kernels compute them (see `narrow`).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn finish(v: __m512, bias: Option<__m512>, relu: bool) -> __m512 {
        let v = match bias {
            Some(b) => _mm512_add_ps(v, b),
            None => v,
        };
        if relu { _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_NLE_UQ>(v, _mm512_setzero_ps()), v) } else { v }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    fn bias_at(epi: &super::Epilogue<'_, f32>, ov: usize) -> Option<__m512> {
        let b = epi.bias?.get(ov..ov + LANES)?;
        // SAFETY: `b` holds LANES f32.
        Some(unsafe { _mm512_loadu_ps(b.as_ptr()) })
    }

    /// One tile's `rows x cols` output pixels (`dst` row stride `orow`), epilogue applied.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    unsafe fn output_tile(
        m: *const f32,
        stride: usize,
        o: usize,
        epi: &super::Epilogue<'_, f32>,
        dst: &mut [f32],
        orow: usize,
        rows: usize,
        cols: usize,
    ) {
        for ov in (0..o).step_by(LANES) {
            // SAFETY: see the caller.
            let y = unsafe { output_block(m.add(ov), stride) };
            let b = bias_at(epi, ov);
            for (a, ya) in y.iter().enumerate().take(rows) {
                for (bx, &v) in ya.iter().enumerate().take(cols) {
                    let d = &mut dst[a * orow + bx * o + ov..][..LANES];
                    // SAFETY: `d` holds LANES f32.
                    unsafe { _mm512_storeu_ps(d.as_mut_ptr(), finish(v, b, epi.relu)) };
                }
            }
        }
    }

    /// One tile's 2x2 outputs, epilogue applied, max-pooled into `dst` (`o` channels):
    /// window taps in row-major order, a later tap wins where `direct::better` says so.
    #[target_feature(enable = "avx512f")]
    unsafe fn output_tile_pooled(
        m: *const f32,
        stride: usize,
        o: usize,
        epi: &super::Epilogue<'_, f32>,
        dst: &mut [f32],
    ) {
        for ov in (0..o).step_by(LANES) {
            // SAFETY: see the caller.
            let [[y00, y01], [y10, y11]] = unsafe { output_block(m.add(ov), stride) };
            let b = bias_at(epi, ov);
            let mut best = finish(y00, b, epi.relu);
            for v in [y01, y10, y11] {
                let v = finish(v, b, epi.relu);
                // (v > best or v is NaN) and best is not NaN
                let take = (_mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, best) | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v))
                    & _mm512_cmp_ps_mask::<_CMP_ORD_Q>(best, best);
                best = _mm512_mask_blend_ps(take, best, v);
            }
            let d = &mut dst[ov..ov + LANES];
            // SAFETY: `d` holds LANES f32.
            unsafe { _mm512_storeu_ps(d.as_mut_ptr(), best) };
        }
    }

    /// `M_p [nt, O] = V_p [nt, C] · U_p [C, O]` for the 36 points (row strides BATCH*C...).
    #[target_feature(enable = "avx512f")]
    unsafe fn gemms(v: *const f32, u: *const f32, m: *mut f32, nt: usize, c: usize, o: usize) {
        let depth = Depth::flat(c, 1, o);
        for p in 0..POINTS {
            // SAFETY: point p's blocks of the three buffers (see `batch`).
            let (vp, up, mp) = unsafe { (v.add(p * BATCH * c), u.add(p * c * o), m.add(p * BATCH * o)) };
            for t0 in (0..nt).step_by(6) {
                for o0 in (0..o).step_by(4 * LANES) {
                    let (r, nv) = ((nt - t0).min(6), ((o - o0) / LANES).min(4));
                    unsafe { micro_dyn(r, nv, vp.add(t0 * c), c, up.add(o0), &depth, mp.add(t0 * o + o0), o) };
                }
            }
        }
    }
}
