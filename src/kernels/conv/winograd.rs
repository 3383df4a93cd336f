//! Winograd f32 `conv2d` on 6x6 input tiles for stride-1 undilated square filters with
//! channel counts that are multiples of 16, on CPUs with AVX-512: F(2x2, 5x5) for 5x5
//! filters (W2's second layer and its kind) and F(4x4, 3x3) for 3x3 filters (ResNet's and
//! SqueezeNet's 3x3 convs) where its cost rule ([`profitable`]) says it beats im2col.
//!
//! An `m x m` block of outputs reads a 6x6 input tile (`m + k - 1 = 6`). Written as
//! `Y = Aᵀ [U ⊙ V] A` with `U = G g Gᵀ` (the filter) and `V = Bᵀ d B` (each input tile), the
//! `m²k²` multiply-adds per output channel and input channel of a direct block become 36
//! element products, and summed over input channels those are 36 independent GEMMs
//! `M_p [tiles, O] = V_p [tiles, C] · U_p [C, O]`: 2.8x (5x5) and 4x (3x3) fewer multiplies
//! than im2col, less where the last tile row or column hangs over the output's edge. Both
//! algorithms interpolate at the points `0, ±1, ±2, ∞` (Lavin & Gray's F(4x4, 3x3)), so they
//! share `Bᵀ`; `G` carries the fractions so that `Bᵀ` and `Aᵀ` are small integers. A
//! plan's constant filter is transformed once, when the plan is compiled (see `filter`: the
//! epilogue hands the kernel the [`Prepared`] transform); other filters on every call.
//!
//! Work is split into tasks of whole tile rows (consecutive in the output, across images); a
//! task works through batches of tiles (across its rows and images, sized so the
//! transformed inputs `36 x batch x C` and GEMM results `36 x batch x O` stay in the core's
//! L2 cache): input transform (tiles inside the image read the input in place, edge tiles
//! go through a zero-padded copy), register-blocked GEMMs of 6 tiles x 64 channels over the
//! reduction in order (one 64-column block of `U_p` against every tile of the batch), then
//! the output transform with the `+ bias`, `+ residual`, `relu` epilogue in registers. That
//! tile-major schedule reads all of `U` once per batch; where `U` is larger than 16 MB
//! (ResNet-50's 3x3 convs of 512 channels: 37.7 MB), or 1 MB at few tiles, the
//! point-major schedule of `points` runs instead: all tiles' input transforms, then per
//! point one GEMM over all tiles (threads over points), then the output transforms.
//! [`conv2d_pool`]
//! (F(2x2, 5x5) only) also applies the fused 2x2 max pool there: an output tile is exactly
//! one pooling window.
//!
//! Accuracy (errors relative to `Σ |x·w|` over each output's window, against an f64 direct
//! conv, random normal data; f32 epsilon 6e-8): im2col ≤ 3e-7, F(2x2, 5x5) ≤ 1.4e-6,
//! F(4x4, 3x3) ≤ 2.6e-6 on the shapes of `tests/ops/conv_winograd.rs`, and up to 4.9e-6 seen
//! elsewhere (`[2,12,12,16] → 32`, seeds 5 / 6: about 80 epsilons). The transforms scale
//! values by up to ~100 before the products, so errors are a small multiple of a direct
//! sum's. A NaN or infinite input can make NaN every output of the tiles whose input
//! tile holds it (F(4x4, 3x3): up to 8x8 outputs around it), where a direct sum gives NaN
//! or ±inf only where the window covers it. f64 convs never come here.
//!
//! Invariants: the kernels run only where [`applies`] holds and then write every output
//! element; every output is a function of its own tile's inputs and the filter computed
//! in a fixed order (transforms, then the sum over input channels from the first), so a
//! batch of images gives bit-for-bit the per-image results wherever the cost rule picks the
//! same kernel for both (always for 5x5; for 3x3 when one image has ≥ 16 tiles, i.e. maps
//! larger than 12x12: smaller maps run F(4x4, 3x3) only in batches of ≥ 16 tiles, where
//! they differ from one image's im2col result by rounding), and the pooled kernel gives
//! `max_pool` of the unpooled one (its selection rule, `direct::better`).
//! `ExecOptions::winograd` (`PFOR_NO_WINOGRAD`; on built in) turns the kernel off for a
//! session, leaving the im2col path; outside a run it is on.

mod filter;
mod points;

pub(crate) use filter::{Prepared, transforms_on_this_thread};
pub use points::Schedule;

use rayon::prelude::*;

use super::im2col::Epilogue;
use super::{Dst, Geom};
use crate::kernels::KernelOptions;
use crate::kernels::micro::LANES;

/// Side of an input tile (`m + k - 1`).
const T6: usize = 6;
/// Transform points per tile.
const POINTS: usize = T6 * T6;
/// Bytes of transformed inputs and GEMM results per batch (`36 x batch x (C + O)` f32).
const BATCH_BYTES: usize = 448 << 10;
/// Most tiles per batch.
const MAX_BATCH: usize = 60;
/// Tiles per parallel task, at most.
const TASK_TILES: usize = 64;

/// The Winograd algorithm of a filter size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alg {
    /// F(2x2, 5x5).
    F2x5,
    /// F(4x4, 3x3).
    F4x3,
}

impl Alg {
    fn of(g: &Geom) -> Option<Alg> {
        match (g.kh, g.kw) {
            (5, 5) => Some(Alg::F2x5),
            (3, 3) => Some(Alg::F4x3),
            _ => None,
        }
    }
    /// Filter side.
    fn k(self) -> usize {
        match self {
            Alg::F2x5 => 5,
            Alg::F4x3 => 3,
        }
    }
    /// Output block side.
    fn m(self) -> usize {
        T6 + 1 - self.k()
    }
    /// `G` (6 x k, zero-padded to 6 x 5) of the filter transform.
    fn g(self) -> &'static [[f32; 5]; T6] {
        match self {
            Alg::F2x5 => &G5,
            Alg::F4x3 => &G3,
        }
    }
}

/// Whether this kernel can run an f32 conv of this geometry on this CPU.
pub(crate) fn applies(g: &Geom) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        Alg::of(g).is_some()
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

/// The cost rule: whether Winograd beats im2col + GEMM on this geometry. F(2x2, 5x5):
/// always. F(4x4, 3x3): [`rule3`], measured on ResNet-50's and SqueezeNet's 3x3 layers
/// (`benches/probes/winograd_probe.rs`, CPU time, A/B interleaved).
/// `k.winograd3_rule` off (`PFOR_WINOGRAD3=always`) skips the F(4x4, 3x3) rule: for
/// measuring it (`benches/probes/winograd_probe.rs`).
pub(crate) fn profitable(g: &Geom, k: KernelOptions) -> bool {
    match Alg::of(g) {
        Some(Alg::F2x5) => true,
        Some(Alg::F4x3) => !k.winograd3_rule || rule3(g),
        None => false,
    }
}

/// The F(4x4, 3x3) cost rule: at least [`MIN_TILES3`] tiles in the batch. Below that the
/// 36 GEMMs have too few rows to pay for reading `U` (4x the filter's size): ResNet-50's
/// `[1, 7, 7, 512] -> 512` (4 tiles) runs at 0.45x im2col's speed tile-major and 0.7-0.85x
/// point-major (re-measured with the point-major schedule, see `points`), at n = 8 (32
/// tiles) at 6x; SqueezeNet's 13x13 layers (16 tiles per image) at 1.0-1.6x at n = 1.
fn rule3(g: &Geom) -> bool {
    g.n * g.oh.div_ceil(4) * g.ow.div_ceil(4) >= MIN_TILES3
}

/// Fewest tiles (over the batch) for which F(4x4, 3x3) runs.
const MIN_TILES3: usize = 16;

/// `out [N, OH, OW, O] = epi(conv2d(x, w))` with `w` the `[k, k, C, O]` filter where
/// [`applies`] and [`profitable`] hold, into the channels `dst` of `out`'s pixel rows; every
/// element of that slice is written. False (nothing written) otherwise.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv2d(
    g: &Geom,
    x: &[f32],
    w: &[f32],
    epi: Epilogue<'_, f32>,
    out: &mut [f32],
    dst: Dst,
    k: KernelOptions,
) -> bool {
    profitable(g, k) && run(g, x, w, epi, out, false, dst, k.winograd_schedule)
}

/// [`conv2d`] into a dense output with this schedule and the cost rule skipped (for tests
/// and probes); false (nothing written) where [`applies`] does not hold or the buffers do
/// not fit `g`.
pub(crate) fn conv2d_scheduled(
    g: &Geom,
    x: &[f32],
    w: &[f32],
    epi: Epilogue<'_, f32>,
    out: &mut [f32],
    schedule: Schedule,
) -> bool {
    run(g, x, w, epi, out, false, Dst::dense(g.o), schedule)
}

/// [`conv2d`], then a 2x2 stride-2 VALID max pool: `out [N, OH/2, OW/2, O]` (an F(2x2, 5x5)
/// tile is one pooling window, an F(4x4, 3x3) tile four). False (nothing written) where
/// [`conv2d`] does not run or `OH`, `OW` are odd.
pub(crate) fn conv2d_pool(
    g: &Geom,
    x: &[f32],
    w: &[f32],
    epi: Epilogue<'_, f32>,
    out: &mut [f32],
    k: KernelOptions,
) -> bool {
    profitable(g, k)
        && g.oh.is_multiple_of(2)
        && g.ow.is_multiple_of(2)
        && run(g, x, w, epi, out, true, Dst::dense(g.o), k.winograd_schedule)
}

/// The forward geometry whose conv is `conv2d_backprop_input` of `g` (input `dy [N, OH, OW,
/// O]`, filter `[5, 5, O, C]` flipped, output `[N, H, W, C]`, leading padding `4 - p`),
/// where this kernel handles it (5x5 filters).
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
    (Alg::of(&t) == Some(Alg::F2x5) && applies(&t)).then_some(t)
}

/// `dx [N, H, W, C]` of a 5x5 stride-1 conv with filter `w [5, 5, C, O]`: the conv of `dy`
/// by the flipped, transposed filter over the [`transposed`] geometry `t`. False (nothing
/// written) where the kernel does not take it.
pub(crate) fn conv2d_backprop_input(t: &Geom, w: &[f32], dy: &[f32], dx: &mut [f32], k: KernelOptions) -> bool {
    let (c, o) = (t.o, t.c);
    if Alg::of(t) != Some(Alg::F2x5) || w.len() != 25 * c * o {
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
    run(t, dy, &wt, Epilogue::new(None, false), dx, false, Dst::dense(t.o), k.winograd_schedule)
}

/// Shapes of one call, shared by its tasks.
struct Job<'a> {
    g: &'a Geom,
    alg: Alg,
    x: &'a [f32],
    /// The transformed filter `U`, `[36, C, O]`.
    u: &'a [f32],
    epi: Epilogue<'a, f32>,
    pooled: bool,
    /// Where the (unpooled) output's channels go (dense when pooled).
    dst: Dst,
    tiles_y: usize,
    tiles_x: usize,
    /// Tiles per batch (a multiple of 6, the GEMM's row block).
    batch: usize,
}

/// Consecutive tile rows `(n, ty)` of the output and the part of it they write, which
/// starts at element `base`.
struct Chunk<'a> {
    rows: std::ops::Range<usize>,
    base: usize,
    out: &'a mut [f32],
}

/// Per-task scratch: transformed inputs `[36, batch, C]`, GEMM results `[36, batch, O]`,
/// one zero-padded edge tile `[6, 6, C]`. Stale contents will do (lent by
/// [`super::with_scratch`]): every element read is written first (a batch's transforms,
/// its products; `edge_tile` zeroes the tile before it copies the input in).
struct Scratch<'a> {
    v: &'a mut [f32],
    m: &'a mut [f32],
    patch: &'a mut [f32],
}

#[allow(clippy::too_many_arguments)]
fn run(
    g: &Geom,
    x: &[f32],
    w: &[f32],
    epi: Epilogue<'_, f32>,
    out: &mut [f32],
    pooled: bool,
    dst: Dst,
    schedule: Schedule,
) -> bool {
    let Some(alg) = Alg::of(g) else { return false };
    let (k, m) = (alg.k(), alg.m());
    let (tiles_y, tiles_x) = (g.oh.div_ceil(m), g.ow.div_ceil(m));
    let len = if pooled { g.n * (g.oh / 2) * (g.ow / 2) * g.o } else { g.n * g.oh * g.ow * g.o };
    if !applies(g)
        || (pooled && !dst.is_dense(g.o))
        || !dst.fits(len / g.o, g.o, out.len())
        || epi.bias.is_some_and(|b| b.len() != g.o)
        || epi.residual.is_some_and(|r| pooled || r.len() != g.n * g.oh * g.ow * g.o)
        || w.len() != k * k * g.c * g.o
        || x.len() != g.n * g.h * g.w * g.c
    {
        return false;
    }
    if out.is_empty() {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // Tile rows `(n, ty)` in order cover consecutive ranges of `out`; row `r` starts at:
        let (ph, pw, pm) = if pooled { (g.oh / 2, g.ow / 2, m / 2) } else { (g.oh, g.ow, m) };
        let start = |r: usize| ((r / tiles_y) * ph + pm * (r % tiles_y)) * pw * dst.stride;
        let (rows, total) = (g.n * tiles_y, g.n * tiles_y * tiles_x);
        let parallel = super::is_parallel(len * k * k * g.c);
        let threads = if parallel { rayon::current_num_threads() } else { 1 };
        // tasks of whole tile rows, at most TASK_TILES tiles and at least two per thread,
        // their sizes spread evenly (14 rows in 4 tasks: 3, 4, 3, 4, so that rayon's halves
        // hold 7 each; 4, 4, 4, 2 left one thread 8 rows against 6)
        let tasks = rows.div_ceil((TASK_TILES / tiles_x).max(1)).max((2 * threads).min(rows));
        let bound = |i: usize| i * rows / tasks;
        let mut chunks = Vec::with_capacity(tasks);
        let mut rest = &mut out[..];
        for i in 0..tasks {
            let (r0, r1) = (bound(i), bound(i + 1));
            let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(start(r1) - start(r0));
            chunks.push(Chunk { rows: r0..r1, base: start(r0), out: chunk });
            rest = tail;
        }
        let batch = (BATCH_BYTES / (POINTS * (g.c + g.o) * 4)).clamp(6, MAX_BATCH) / 6 * 6;
        // the plan's transform of its constant filter, else this filter's
        let fresh;
        let u = match epi.filter.and_then(super::PreparedFilter::winograd).and_then(|p| p.get(alg, g.c, g.o)) {
            Some(u) => u,
            None => {
                fresh = filter::transform(alg, g.c, g.o, w);
                &fresh[..]
            }
        };
        let job = Job { g, alg, x, u, epi, pooled, dst, tiles_y, tiles_x, batch };
        if schedule.point_major(g, total) {
            points::run(&job, chunks, parallel);
            return true;
        }
        let (vs, ms) = (POINTS * batch * g.c, POINTS * batch * g.o);
        let task = |ch: Chunk<'_>| {
            super::with_scratch(vs + ms + POINTS * g.c, |buf| {
                let (v, rest) = buf.split_at_mut(vs);
                let (m, patch) = rest.split_at_mut(ms);
                let mut s = Scratch { v, m, patch };
                let (f0, f1) = (ch.rows.start * tiles_x, ch.rows.end * tiles_x);
                for b0 in (f0..f1).step_by(batch) {
                    // SAFETY: `applies` checked that the CPU has AVX-512F; `s` is sized for
                    // the job; the batch's outputs lie in `ch.out` (its tile rows).
                    unsafe { avx512::batch(&job, &mut s, b0..(b0 + batch).min(f1), ch.base, ch.out) };
                }
            })
        };
        if parallel && chunks.len() > 1 {
            chunks.into_par_iter().for_each(task);
        } else {
            chunks.into_iter().for_each(task);
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (x, w);
        false
    }
}

/// `G` (6x5) of the F(2x2, 5x5) filter transform.
const G5: [[f32; 5]; T6] = [
    [1.0 / 4.0, 0.0, 0.0, 0.0, 0.0],
    [1.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0],
    [1.0 / 6.0, -1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0, 1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0, 1.0 / 3.0, 2.0 / 3.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0, -1.0 / 3.0, 2.0 / 3.0],
    [0.0, 0.0, 0.0, 0.0, 1.0],
];

/// `G` (6x3, zero-padded) of the F(4x4, 3x3) filter transform: the same point scalings as
/// [`G5`] (rows 1 and 2 have the opposite sign of Lavin & Gray's, as `bt`'s rows do).
const G3: [[f32; 5]; T6] = [
    [1.0 / 4.0, 0.0, 0.0, 0.0, 0.0],
    [1.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0, 0.0, 0.0],
    [1.0 / 6.0, -1.0 / 6.0, 1.0 / 6.0, 0.0, 0.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0, 0.0, 0.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0, 0.0, 0.0],
    [0.0, 0.0, 1.0, 0.0, 0.0],
];

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;
    use std::ops::Range;

    use super::{Alg, Job, LANES, POINTS, Scratch, T6};
    use crate::kernels::conv::Geom;
    use crate::kernels::micro::ab;

    /// Tiles `tiles` (flat `(n, ty, tx)` indices) into `chunk`, the part of the output
    /// starting at element `base`: [`inputs`], [`gemms`], [`outputs`] on the task's scratch.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `s` was sized for `job`; `tiles` has at most `job.batch`
    /// tiles and their outputs lie inside `chunk`.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn batch(
        job: &Job<'_>,
        s: &mut Scratch<'_>,
        tiles: Range<usize>,
        base: usize,
        chunk: &mut [f32],
    ) {
        let (bt, nt) = (job.batch, tiles.len());
        // SAFETY: `s.v`, `job.u`, `s.m` hold [36, batch, C], [36, C, O], [36, batch, O].
        unsafe {
            inputs(job, s.patch, tiles.clone(), s.v.as_mut_ptr(), bt);
            gemms(s.v.as_ptr(), job.u.as_ptr(), s.m.as_mut_ptr(), nt, bt, job.g.c, job.g.o);
            outputs(job, s.m.as_ptr(), bt, tiles, base, chunk);
        }
    }

    /// `(n, ty, tx)` of flat tile `f`.
    fn tile_at(job: &Job<'_>, f: usize) -> (usize, usize, usize) {
        (f / (job.tiles_y * job.tiles_x), f / job.tiles_x % job.tiles_y, f % job.tiles_x)
    }

    /// The input transforms of `tiles`: tile `tiles.start + t`, point `p` to
    /// `v + (p * bt + t) * C` (`patch`: `[6, 6, C]` scratch for edge tiles).
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `v` is valid for writes of `[36, bt, C]` with
    /// `tiles.len() <= bt`, and no other thread touches those rows meanwhile.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn inputs(job: &Job<'_>, patch: &mut [f32], tiles: Range<usize>, v: *mut f32, bt: usize) {
        let (g, m) = (job.g, job.alg.m());
        let c = g.c;
        for (t, f) in tiles.enumerate() {
            let (n, ty, tx) = tile_at(job, f);
            let (y0, x0) = ((m * ty) as isize - g.pt as isize, (m * tx) as isize - g.pl as isize);
            let inside = y0 >= 0 && x0 >= 0 && y0 as usize + T6 <= g.h && x0 as usize + T6 <= g.w;
            let (src, row) = if inside {
                (&job.x[((n * g.h + y0 as usize) * g.w + x0 as usize) * c..], g.w * c)
            } else {
                edge_tile(g, job.x, n, y0, x0, patch);
                (&patch[..], T6 * c)
            };
            // SAFETY: a 6x6 tile of `row`-strided rows of `c` channels lies in `src`; the
            // writes stay inside `v` ([36, bt, C], t < bt).
            unsafe { input_tile(src.as_ptr(), row, c, v.add(t * c), bt * c) };
        }
    }

    /// The output transforms and epilogue of `tiles` (tile `tiles.start + t`, point `q` at
    /// `m + (q * bt + t) * O`) into `chunk`, the part of the output starting at element `base`.
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `m` holds `[36, bt, O]` with `tiles.len() <= bt`; the
    /// tiles' outputs lie inside `chunk`.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn outputs(
        job: &Job<'_>,
        m: *const f32,
        bt: usize,
        tiles: Range<usize>,
        base: usize,
        chunk: &mut [f32],
    ) {
        let (g, o, mm) = (job.g, job.g.o, job.alg.m());
        // the output (pooled: the pooled output) as `[N, ph, pw, O]` in blocks of `pm x pm`
        let (ph, pw, pm) = if job.pooled { (g.oh / 2, g.ow / 2, mm / 2) } else { (g.oh, g.ow, mm) };
        for (t, f) in tiles.enumerate() {
            let (n, ty, tx) = tile_at(job, f);
            let size = [(ph - pm * ty).min(pm), (pw - pm * tx).min(pm)];
            let (at, px) = ((n * ph + pm * ty) * pw + pm * tx, job.dst.stride);
            let dst = &mut chunk[at * px + job.dst.off - base..];
            let res = job.epi.residual.map(|r| &r[at * o..]);
            // SAFETY: point q of this tile at p + q * bt * O, o channels each (see above).
            let (p, orow) = (unsafe { m.add(t * o) }, pw * o);
            // SAFETY: the `size` block of pixels at `dst` (rows of `px` values) lies in `chunk`.
            unsafe {
                match job.alg {
                    Alg::F2x5 => output_tile::<2>(p, bt * o, o, &job.epi, res, dst, [orow, px], size, job.pooled),
                    Alg::F4x3 => output_tile::<4>(p, bt * o, o, &job.epi, res, dst, [orow, px], size, job.pooled),
                }
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

    /// `Aᵀ m` for one column of 6 vectors: F(2x2, 5x5)'s 2 rows or F(4x4, 3x3)'s 4.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn at<const M: usize>(m: [__m512; T6]) -> [__m512; M] {
        let (a, b) = (_mm512_add_ps(m[1], m[2]), _mm512_sub_ps(m[1], m[2]));
        let (c, d) = (_mm512_add_ps(m[3], m[4]), _mm512_sub_ps(m[3], m[4]));
        let (two, four, eight) = (_mm512_set1_ps(2.0), _mm512_set1_ps(4.0), _mm512_set1_ps(8.0));
        let row0 = _mm512_add_ps(_mm512_add_ps(m[0], a), c);
        let r = if M == 2 {
            [row0, _mm512_add_ps(_mm512_fmadd_ps(two, d, b), m[5]), row0, row0]
        } else {
            [
                row0,
                _mm512_fmadd_ps(two, d, b),
                _mm512_fmadd_ps(four, c, a),
                _mm512_add_ps(_mm512_fmadd_ps(eight, d, b), m[5]),
            ]
        };
        std::array::from_fn(|i| r[i])
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

    /// `Aᵀ M A` (`M x M`) of one tile for the 16 channels at `m` (point `p` at `m + p*stride`).
    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn output_block<const M: usize>(m: *const f32, stride: usize) -> [[__m512; M]; M] {
        // `s[a][j]`: row a of Aᵀ applied to column j of the tile
        let mut s = [[_mm512_setzero_ps(); T6]; M];
        for j in 0..T6 {
            // SAFETY: see the callers.
            let col = at::<M>(std::array::from_fn(|i| unsafe { _mm512_loadu_ps(m.add((i * T6 + j) * stride)) }));
            for (sa, v) in s.iter_mut().zip(col) {
                sa[j] = v;
            }
        }
        let mut y = [[_mm512_setzero_ps(); M]; M];
        for (ya, sa) in y.iter_mut().zip(s) {
            *ya = at::<M>(sa);
        }
        y
    }

    /// `v + bias`, then `+ residual`, then relu, as the separate kernels compute them (see
    /// `narrow`).
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn finish(v: __m512, bias: Option<__m512>, res: Option<__m512>, relu: bool) -> __m512 {
        let v = match bias {
            Some(b) => _mm512_add_ps(v, b),
            None => v,
        };
        let v = match res {
            Some(r) => _mm512_add_ps(v, r),
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

    /// One tile's `rows x cols` output pixels (the residual `res` with row stride `orow`,
    /// `dst` with pixels `px` values apart, `orow / o * px` per row), epilogue applied;
    /// with `pool` (never with a residual, `px == o`), its
    /// `rows x cols` 2x2 max-pooled pixels instead: window taps in row-major order, a later
    /// tap wins where `direct::better` says so.
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f")]
    unsafe fn output_tile<const M: usize>(
        m: *const f32,
        stride: usize,
        o: usize,
        epi: &super::Epilogue<'_, f32>,
        res: Option<&[f32]>,
        dst: &mut [f32],
        [orow, px]: [usize; 2],
        [rows, cols]: [usize; 2],
        pool: bool,
    ) {
        let drow = orow / o * px;
        for ov in (0..o).step_by(LANES) {
            // SAFETY: see the caller.
            let y = unsafe { output_block::<M>(m.add(ov), stride) };
            let b = bias_at(epi, ov);
            for a in 0..rows {
                for bx in 0..cols {
                    let v = if pool {
                        let mut best = finish(y[2 * a][2 * bx], b, None, epi.relu);
                        for v in [y[2 * a][2 * bx + 1], y[2 * a + 1][2 * bx], y[2 * a + 1][2 * bx + 1]] {
                            let v = finish(v, b, None, epi.relu);
                            // (v > best or v is NaN) and best is not NaN
                            let take = (_mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, best)
                                | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v))
                                & _mm512_cmp_ps_mask::<_CMP_ORD_Q>(best, best);
                            best = _mm512_mask_blend_ps(take, best, v);
                        }
                        best
                    } else {
                        let i = a * orow + bx * o + ov;
                        // SAFETY: the residual holds LANES f32 at `i`, laid out as `dst`.
                        let r = res.map(|r| unsafe { _mm512_loadu_ps(r[i..i + LANES].as_ptr()) });
                        finish(y[a][bx], b, r, epi.relu)
                    };
                    let d = &mut dst[a * drow + bx * px + ov..][..LANES];
                    // SAFETY: `d` holds LANES f32.
                    unsafe { _mm512_storeu_ps(d.as_mut_ptr(), v) };
                }
            }
        }
    }

    /// `M_p [nt, O] = V_p [nt, C] · U_p [C, O]` for the 36 points (`V_p`, `M_p` at
    /// `p * bt` rows): [`point_gemm`] per point.
    #[target_feature(enable = "avx512f")]
    unsafe fn gemms(v: *const f32, u: *const f32, m: *mut f32, nt: usize, bt: usize, c: usize, o: usize) {
        for p in 0..POINTS {
            // SAFETY: point p's blocks of the three buffers (see `batch`).
            unsafe { point_gemm(v.add(p * bt * c), u.add(p * c * o), m.add(p * bt * o), nt, c, o) };
        }
    }

    /// `M_p [nt, O] = V_p [nt, C] · U_p [C, O]` for one point (see [`ab`]).
    ///
    /// # Safety
    /// The CPU supports AVX-512F; `vp`, `up`, `mp` hold `[nt, C]`, `[C, O]`, `[nt, O]`, `O` a
    /// multiple of 16.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn point_gemm(vp: *const f32, up: *const f32, mp: *mut f32, nt: usize, c: usize, o: usize) {
        // SAFETY: the caller's bounds.
        unsafe { ab(nt, c, o, vp, up, mp) }
    }
}
