//! The point-major Winograd schedule: for a group of tiles, every tile's input transform
//! (`V [36, tiles, C]`), then per transform point `p` one GEMM `M_p = V_p · U_p` over the
//! whole group, then every tile's output transform. Each point's filter slice `U_p [C, O]`
//! is read once per group instead of once per tile batch (the tile-major schedule of
//! `winograd::run` reads all of `U` for every batch of at most 60 tiles), and the GEMMs are
//! split over threads by points, so a map of few tiles (a 7x7 map has 4) still keeps every
//! core busy.
//!
//! Where (the rule of [`Schedule::point_major`]): when `U` (`36 C O` f32) is larger than
//! [`U_ALWAYS`] (16 MB, half the L3 cache: ResNet-50's 512-channel layers), or larger than
//! [`U_FEW_TILES`] (1 MB) in a conv of at most [`FEW_TILES`] tiles, where the tile-major
//! schedule's few tasks each read all of `U` and a core may idle. Measured (2-core AVX-512
//! machine under load; CPU ms per conv with `benches/probes/winograd_probe.rs`,
//! `PFOR_WINOGRAD3=always`, `PFOR_WINOGRAD_SCHEDULE=tile|point`, two rounds; "model": ms
//! per layer in ResNet-50 light's `PFOR_PROFILE`, `onnx_profile`, mean of its layers),
//! tile-major / point-major:
//!
//! | layer (`U`)                     | n = 1                             | n = 8                                | n = 32                      |
//! |---------------------------------|-----------------------------------|--------------------------------------|-----------------------------|
//! | `[n,7,7,512] -> 512` (37.7 MB)  | 3.3, 3.8 / 2.0, 2.5 (im2col 1.2-1.9) | 15.2, 17.4 / 5.3, 5.8; model 7.0 / 2.7 | 55.5 / 17.8; model 34 / 15.3 |
//! | `[n,14,14,256] -> 256` (9.4 MB) | 0.68, 0.81 / 0.62, 0.86; model 0.87 / 0.54 | 6.2, 4.6 / 5.0, 4.8; model 2.6 / 2.6 | 21.3 / 17.8; model 13.7 / 14.9 |
//! | `[n,28,28,128] -> 128` (2.4 MB) | 0.45, 0.46 / 0.39, 0.44; model 0.50 / 0.40 | 3.7, 3.5 / 4.8, 5.0; model 1.9 / 2.7 | 14.0 / 14.6 |
//! | `[n,56,56,64] -> 64` (0.6 MB)   | 0.47, 0.44 / 0.45, 0.53           | 4.0, 3.8 / 5.8, 6.3                  | 15.7 / 18.8 |
//! | SqueezeNet `[n,13,13,64] -> 256` (2.4 MB) | 0.15, 0.20 / 0.24, 0.19 | 1.2, 1.3 / 1.1, 1.3                  | 5.4 / 5.8   |
//!
//! At n = 1 the 7x7 layer (4 tiles) stays on im2col all the same (the F(4x4, 3x3) cost
//! rule, `winograd::rule3`, wants 16 tiles). The 2.4 MB filters ran tile-major at n = 1
//! until the whole models were timed A/B (`onnx_profile MODEL pfor 1`, four rounds
//! interleaved, 2026-11-26): with [`U_FEW_TILES`] at 1 MB instead of 4 MB (ResNet's 28x28
//! layer and SqueezeNet's 13x13 ones point-major at n = 1), ResNet-50 ran 46.3-48.0 images/s
//! against 45.3-46.8 (ahead in every round), SqueezeNet 492-515 against 467-527.
//!
//! Invariants: the arithmetic is the tile-major schedule's (the same transforms and the same
//! micro-kernel summing over input channels in order from the first, whose results do not
//! depend on how rows are blocked), so both schedules give the same bits; each phase writes
//! disjoint parts of the scratch or output (input transforms: their tiles' rows of `V`;
//! GEMMs: their points' blocks of `M`; output transforms: their chunk of the output), and a
//! phase starts after the previous one has finished.

use rayon::prelude::*;

use super::{Chunk, Geom, Job, POINTS, avx512};
use crate::kernels::micro::SharedMut;

/// Bytes of a transformed filter `U` above which the point-major schedule always runs.
pub(super) const U_ALWAYS: usize = 16 << 20;
/// Bytes of `U` above which the point-major schedule runs a conv of at most [`FEW_TILES`].
pub(super) const U_FEW_TILES: usize = 1 << 20;
/// Tiles (over the batch) up to which [`U_FEW_TILES`] applies.
pub(super) const FEW_TILES: usize = 64;
/// Bytes of transformed inputs and GEMM results (`36 x tiles x (C + O)` f32) per group of
/// tiles, at most (a group holds at least one chunk of tile rows).
const GROUP_BYTES: usize = 16 << 20;

/// Which schedule the Winograd F(4x4, 3x3) / F(2x2, 5x5) kernel runs (the field
/// `winograd_schedule` of `ExecOptions`, `PFOR_WINOGRAD_SCHEDULE=tile|point`):
/// [`Schedule::Auto`] picks by a rule of the filter's size and the tile count; the others force one, for measuring that
/// rule (`benches/probes/winograd_probe.rs`) and for tests. Results are the same bits
/// whichever runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Point-major where the transformed filter is large (over 16 MB), or over 1 MB in a
    /// conv of at most 64 tiles; tile-major elsewhere.
    #[default]
    Auto,
    /// Batches of tiles, each through all 36 points (`U` read once per batch).
    TileMajor,
    /// Groups of tiles, each point's GEMM over the whole group (`U` read once per group).
    PointMajor,
}

impl Schedule {
    /// The schedule a `PFOR_WINOGRAD_SCHEDULE` value names (`tile`, `point`; anything else:
    /// `Auto`), as `ExecOptions::from_env` reads it.
    ///
    /// ```
    /// use pfor::kernels::WinogradSchedule;
    ///
    /// assert_eq!(WinogradSchedule::from_name("point"), WinogradSchedule::PointMajor);
    /// assert_eq!(WinogradSchedule::from_name("?"), WinogradSchedule::Auto);
    /// ```
    pub fn from_name(name: &str) -> Schedule {
        match name {
            "tile" => Schedule::TileMajor,
            "point" => Schedule::PointMajor,
            _ => Schedule::Auto,
        }
    }

    /// Whether this conv of `tiles` tiles runs point-major: forced, or (`Auto`) by the rule
    /// in the module docs.
    pub(super) fn point_major(self, g: &Geom, tiles: usize) -> bool {
        let u = POINTS * g.c * g.o * 4;
        match self {
            Schedule::Auto => u > U_ALWAYS || (u > U_FEW_TILES && tiles <= FEW_TILES),
            Schedule::TileMajor => false,
            Schedule::PointMajor => true,
        }
    }
}

/// The whole conv of `job`, point-major, into `chunks` (consecutive tile rows covering the
/// output in order).
pub(super) fn run(job: &Job<'_>, chunks: Vec<Chunk<'_>>, parallel: bool) {
    let (c, o, tiles_x) = (job.g.c, job.g.o, job.tiles_x);
    let most = chunks.iter().map(|ch| ch.rows.len() * tiles_x).max().unwrap_or(0);
    let per_group = (GROUP_BYTES / (POINTS * (c + o) * 4)).max(most);
    // groups of consecutive chunks of at most `per_group` tiles
    let mut groups: Vec<Vec<Chunk<'_>>> = Vec::new();
    let mut size = 0;
    for ch in chunks {
        let nt = ch.rows.len() * tiles_x;
        match groups.last_mut() {
            Some(gr) if size + nt <= per_group => {
                size += nt;
                gr.push(ch);
            }
            _ => {
                size = nt;
                groups.push(vec![ch]);
            }
        }
    }
    let span = |gr: &[Chunk<'_>]| gr[0].rows.start * tiles_x..gr[gr.len() - 1].rows.end * tiles_x;
    let largest = groups.iter().map(|gr| span(gr).len()).max().unwrap_or(0);
    // [36, tiles, C] transformed inputs and [36, tiles, O] point products: every element
    // that is read is written first (each group's tiles), so stale scratch will do
    super::super::with_scratch(POINTS * largest * (c + o), |buf| {
        let (v, m) = buf.split_at_mut(POINTS * largest * c);
        groups_run(job, groups, v, m, tiles_x, parallel, span)
    });
}

/// The groups of [`run`], through the scratch `v` and `m`.
#[allow(clippy::too_many_arguments)]
fn groups_run(
    job: &Job<'_>,
    groups: Vec<Vec<Chunk<'_>>>,
    v: &mut [f32],
    m: &mut [f32],
    tiles_x: usize,
    parallel: bool,
    span: impl Fn(&[Chunk<'_>]) -> std::ops::Range<usize>,
) {
    let (c, o) = (job.g.c, job.g.o);
    for group in groups {
        let tiles = span(&group);
        let (f0, bt) = (tiles.start, tiles.len());
        let vp = SharedMut(v.as_mut_ptr());
        let input = |patch: &mut Vec<f32>, ch: &Chunk<'_>| {
            let own = ch.rows.start * tiles_x..ch.rows.end * tiles_x;
            // SAFETY: `applies` checked AVX-512F; `v` holds [36, bt, C] and this chunk's
            // tiles are rows `own - f0` of it, written by this task only.
            unsafe { avx512::inputs(job, patch, own.clone(), vp.ptr().add((own.start - f0) * c), bt) };
        };
        let patch = || vec![0.0f32; POINTS * c];
        if parallel {
            group.par_iter().for_each_init(patch, input);
        } else {
            let mut scratch = patch();
            group.iter().for_each(|ch| input(&mut scratch, ch));
        }
        let gemm = |(p, mp): (usize, &mut [f32])| {
            // SAFETY: AVX-512F; point p of `V` ([bt, C]) and `U` ([C, O]); `mp` is [bt, O].
            unsafe {
                let (vp, up) = (v.as_ptr().add(p * bt * c), job.u.as_ptr().add(p * c * o));
                avx512::point_gemm(vp, up, mp.as_mut_ptr(), bt, c, o)
            };
        };
        let m_used = &mut m[..POINTS * bt * o];
        if parallel {
            m_used.par_chunks_mut(bt * o).enumerate().for_each(gemm);
        } else {
            m_used.chunks_mut(bt * o).enumerate().for_each(gemm);
        }
        let m = &m[..];
        let output = |ch: Chunk<'_>| {
            let own = ch.rows.start * tiles_x..ch.rows.end * tiles_x;
            // SAFETY: AVX-512F; `m` holds [36, bt, O] with this chunk's tiles at rows
            // `own - f0`; their outputs lie in `ch.out`.
            unsafe { avx512::outputs(job, m.as_ptr().add((own.start - f0) * o), bt, own, ch.base, ch.out) };
        };
        if parallel {
            group.into_par_iter().for_each(output);
        } else {
            group.into_iter().for_each(output);
        }
    }
}
