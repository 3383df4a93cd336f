//! Direct-loop kernels: depthwise convs and pools (memory bound, no GEMM).
//!
//! Loops run per output row (or input row for gathers), then per tap `(ky, kx)`, then over
//! the closed-form range of output columns whose tap is in bounds, with the innermost loop
//! over one pixel's contiguous channel vector (`C` or `C*M` elements). Forward ops and
//! row-gathered gradients are parallel over rows; `max_pool_grad` scatters and is parallel
//! over images; the depthwise filter gradient folds per-row partial sums.

use rayon::prelude::*;

use super::{Float, Geom, OutBuf, filled, for_each_chunk, is_parallel};

/// `o[c*m + j] += a[c] * b[c*m + j]` over one pixel.
fn madd<T: Float>(o: &mut [T], a: &[T], b: &[T], m: usize) {
    if m == 1 {
        for ((o, &a), &b) in o.iter_mut().zip(a).zip(b) {
            *o += a * b;
        }
    } else {
        for ((oc, &a), bc) in o.chunks_exact_mut(m).zip(a).zip(b.chunks_exact(m)) {
            for (o, &b) in oc.iter_mut().zip(bc) {
                *o += a * b;
            }
        }
    }
}

/// `v` wins over the current maximum `cur`: strictly greater, or the first NaN (written
/// without short-circuits, so loops of selects on it vectorize).
#[inline]
pub(crate) fn better<T: Float>(v: T, cur: T) -> bool {
    ((v > cur) | v.is_nan()) & !cur.is_nan()
}

/// 2x2 stride-2 max pool of one pair of rows (`r0`, `r1`: `2*PW` pixels of `o` channels
/// each) into `dst` (`PW` pixels): taps in row-major window order, [`better`] decides.
#[inline(always)]
pub(crate) fn pool_pair<T: Float>(r0: &[T], r1: &[T], o: usize, dst: &mut [T]) {
    for (px, d) in dst.chunks_exact_mut(o).enumerate() {
        let (a, b) = (&r0[2 * px * o..(2 * px + 2) * o], &r1[2 * px * o..(2 * px + 2) * o]);
        d.copy_from_slice(&a[..o]);
        for v in [&a[o..], &b[..o], &b[o..]] {
            for (d, &v) in d.iter_mut().zip(v) {
                *d = if better(v, *d) { v } else { *d };
            }
        }
    }
}

/// Gradient of [`pool_pair`]: the window's four input pixels of `dx` rows `d0`, `d1` get
/// `dy` at the first maximal tap and zero elsewhere, in one branch-free pass (no zero fill,
/// no scatter). Pixels past the last whole window are zeroed.
fn pool_pair_grad<T: Float>(r0: &[T], r1: &[T], dy: &[T], c: usize, d0: &mut [T], d1: &mut [T]) {
    let zero = T::default();
    let pw = dy.len() / c;
    for (px, dyp) in dy.chunks_exact(c).enumerate() {
        let win = 2 * px * c..(2 * px + 2) * c;
        let ((x0, x1), (x2, x3)) = (r0[win.clone()].split_at(c), r1[win.clone()].split_at(c));
        let ((g0, g1), (g2, g3)) = (d0[win.clone()].split_at_mut(c), d1[win].split_at_mut(c));
        let (x1, x2, x3) = (&x1[..c], &x2[..c], &x3[..c]);
        let (g0, g1, g2, g3) = (&mut g0[..c], &mut g1[..c], &mut g2[..c], &mut g3[..c]);
        for (i, &d) in dyp.iter().enumerate() {
            let (mut best, mut t) = (x0[i], 0u8);
            for (k, v) in [(1u8, x1[i]), (2, x2[i]), (3, x3[i])] {
                let w = better(v, best);
                best = if w { v } else { best };
                t = if w { k } else { t };
            }
            g0[i] = if t == 0 { d } else { zero };
            g1[i] = if t == 1 { d } else { zero };
            g2[i] = if t == 2 { d } else { zero };
            g3[i] = if t == 3 { d } else { zero };
        }
    }
    d0[2 * pw * c..].fill(zero);
    d1[2 * pw * c..].fill(zero);
}

/// Depthwise conv: `out[n,oy,ox,c*M+m] = Σ x[n,iy,ix,c] · w[ky,kx,c,m]`.
pub(crate) fn depthwise<T: Float>(g: &Geom, x: &[T], w: &[T], buf: OutBuf<T>) -> Vec<T> {
    let (c, m) = (g.c, g.o);
    let (cm, row_len) = (c * m, g.w * c);
    let mut out = buf.filled(g.n * g.oh * g.ow * cm, T::default());
    let par = is_parallel(out.len() * g.kh * g.kw);
    for_each_chunk(&mut out, g.ow * cm, par, |r, orow| {
        let (n, oy) = (r / g.oh, r % g.oh);
        for (ky, iy) in g.taps_y(oy) {
            let xrow = &x[(n * g.h + iy) * row_len..][..row_len];
            for kx in 0..g.kw {
                let wp = &w[(ky * g.kw + kx) * cm..][..cm];
                for ox in g.cols_for_tap(kx) {
                    let ix = g.ix(ox, kx);
                    madd(&mut orow[ox * cm..(ox + 1) * cm], &xrow[ix * c..(ix + 1) * c], wp, m);
                }
            }
        }
    });
    out
}

/// Gradient w.r.t. the input, per input row (n, iy) from the output rows whose windows
/// cover it: `dx[n,iy,ix,c] += Σ_m dy[n,oy,ox,c*M+m] · w[ky,kx,c,m]`.
pub(crate) fn depthwise_backprop_input<T: Float>(g: &Geom, w: &[T], dy: &[T], buf: OutBuf<T>) -> Vec<T> {
    let (c, m) = (g.c, g.o);
    let (cm, dy_row) = (c * m, g.ow * c * m);
    let mut dx = buf.filled(g.n * g.h * g.w * c, T::default());
    if m == 0 {
        return dx;
    }
    let par = is_parallel(dx.len() * g.kh * g.kw * m);
    for_each_chunk(&mut dx, g.w * c, par, |r, drow| {
        let (n, iy) = (r / g.h, r % g.h);
        for (ky, oy) in g.rev_taps_y(iy) {
            let dyr = &dy[(n * g.oh + oy) * dy_row..][..dy_row];
            for kx in 0..g.kw {
                let wp = &w[(ky * g.kw + kx) * cm..][..cm];
                for ox in g.cols_for_tap(kx) {
                    let (ix, dyp) = (g.ix(ox, kx), &dyr[ox * cm..(ox + 1) * cm]);
                    let dpix = &mut drow[ix * c..(ix + 1) * c];
                    if m == 1 {
                        for ((d, &a), &b) in dpix.iter_mut().zip(dyp).zip(wp) {
                            *d += a * b;
                        }
                    } else {
                        for ((d, a), b) in dpix.iter_mut().zip(dyp.chunks_exact(m)).zip(wp.chunks_exact(m)) {
                            *d += a.iter().zip(b).map(|(&a, &b)| a * b).sum::<T>();
                        }
                    }
                }
            }
        }
    });
    dx
}

/// Gradient w.r.t. the filter: `dw[ky,kx,c,m] = Σ x[n,iy,ix,c] · dy[n,oy,ox,c*M+m]`,
/// partial sums per output row folded in parallel.
pub(crate) fn depthwise_backprop_filter<T: Float>(g: &Geom, x: &[T], dy: &[T]) -> Vec<T> {
    let (c, m) = (g.c, g.o);
    let (cm, row_len) = (c * m, g.w * c);
    let (dw_len, rows) = (g.kh * g.kw * cm, g.n * g.oh);
    let zero = T::default();
    if dw_len == 0 || rows == 0 {
        return vec![zero; dw_len];
    }
    let row = |acc: &mut [T], r: usize| {
        let (n, oy) = (r / g.oh, r % g.oh);
        let dyr = &dy[r * g.ow * cm..(r + 1) * g.ow * cm];
        for (ky, iy) in g.taps_y(oy) {
            let xrow = &x[(n * g.h + iy) * row_len..][..row_len];
            for kx in 0..g.kw {
                let ap = &mut acc[(ky * g.kw + kx) * cm..][..cm];
                for ox in g.cols_for_tap(kx) {
                    let ix = g.ix(ox, kx);
                    madd(ap, &xrow[ix * c..(ix + 1) * c], &dyr[ox * cm..(ox + 1) * cm], m);
                }
            }
        }
    };
    if is_parallel(rows * g.ow * dw_len) {
        (0..rows)
            .into_par_iter()
            .fold(
                || vec![zero; dw_len],
                |mut acc, r| {
                    row(&mut acc, r);
                    acc
                },
            )
            .reduce(
                || vec![zero; dw_len],
                |mut a, b| {
                    for (a, b) in a.iter_mut().zip(b) {
                        *a += b;
                    }
                    a
                },
            )
    } else {
        let mut acc = vec![zero; dw_len];
        (0..rows).for_each(|r| row(&mut acc, r));
        acc
    }
}

/// Number of in-bounds taps of each output column.
fn col_counts(g: &Geom) -> Vec<usize> {
    let mut cnt = vec![0usize; g.ow];
    for kx in 0..g.kw {
        g.cols_for_tap(kx).for_each(|ox| cnt[ox] += 1);
    }
    cnt
}

/// Max pooling when every window lies inside the input (no padding taps): each output
/// pixel starts from its first tap and folds the others in row-major order (same result as
/// the general loop), per output row.
fn max_pool_inside<T: Float>(g: &Geom, x: &[T], buf: OutBuf<T>) -> Vec<T> {
    let (c, row_len) = (g.c, g.w * g.c);
    // every output element is written (the window's first tap is always inside)
    let mut out = buf.overwritten(g.n * g.oh * g.ow * c);
    let par = is_parallel(out.len() * g.kh * g.kw);
    if [g.kh, g.kw, g.sh, g.sw] == [2, 2, 2, 2] {
        // the row-pair kernel the fused pools use, compiled for the widest vectors
        for_each_chunk(&mut out, g.ow * c, par, |r, orow| {
            let (n, oy) = (r / g.oh, r % g.oh);
            let rows = &x[(n * g.h + 2 * oy) * row_len..][..2 * row_len];
            crate::kernels::simd::widest(
                #[inline(always)]
                || pool_pair(&rows[..row_len], &rows[row_len..], c, orow),
            );
        });
        return out;
    }
    for_each_chunk(&mut out, g.ow * c, par, |r, orow| {
        let (n, oy) = (r / g.oh, r % g.oh);
        let img = &x[n * g.h * row_len..(n + 1) * g.h * row_len];
        crate::kernels::simd::widest(
            #[inline(always)]
            || pool_row_inside(g, img, oy, orow),
        );
    });
    out
}

/// Output row 0 of the max pool `g` whose windows lie inside its input: `rows` holds the
/// `KH` input rows it reads; the same fold as [`max_pool_inside`] (a fused conv's pool
/// tail computes those rows and pools them while cache resident).
pub(crate) fn max_pool_row<T: Float>(g: &Geom, rows: &[T], orow: &mut [T]) {
    crate::kernels::simd::widest(
        #[inline(always)]
        || pool_row_inside(g, rows, 0, orow),
    );
}

/// One output row of [`max_pool_inside`]: each pixel folds its taps in row-major window
/// order. Without a NaN among the window rows, [`better`] reduces to `v > cur` (a plain
/// vector max, fewer instructions per tap); with one, the row takes the exact rule.
#[inline(always)]
fn pool_row_inside<T: Float>(g: &Geom, img: &[T], oy: usize, orow: &mut [T]) {
    let row_len = g.w * g.c;
    let rows = &img[oy * g.sh * row_len..][..g.kh * row_len];
    if any_nan(rows) {
        fold_windows(g, rows, orow, better);
    } else {
        fold_windows(g, rows, orow, |v, cur| v > cur);
    }
}

/// Whether `xs` holds a NaN: a count, which compiles to vector adds over several
/// independent accumulators (a `bool` fold became one serial chain of mask-register ORs,
/// 60 % of SqueezeNet's `[1,111,111,64]` 3x3 stride-2 pool, `perf record` of `pool_probe`).
#[inline(always)]
fn any_nan<T: Float>(xs: &[T]) -> bool {
    xs.iter().map(|v| u32::from(v.is_nan())).sum::<u32>() != 0
}

/// `orow[ox] = ` the window fold of `rows` (the `kh` input rows of one output row) under
/// `wins(v, cur)`, taps in row-major order. Each block of channels (64, 16, then single
/// ones) folds all its taps in a local accumulator (registers) and is stored once: folding
/// into the output in memory would reload each block right after a masked store, which the
/// CPU cannot forward.
#[inline(always)]
fn fold_windows<T: Float>(g: &Geom, rows: &[T], orow: &mut [T], wins: impl Fn(T, T) -> bool + Copy) {
    let c = g.c;
    for (ox, o) in orow.chunks_exact_mut(c).enumerate() {
        let base = ox * g.sw * c;
        let mut c0 = 0;
        while c0 + 64 <= c {
            fold_block::<T, 64>(g, rows, base + c0, &mut o[c0..c0 + 64], wins);
            c0 += 64;
        }
        while c0 + 16 <= c {
            fold_block::<T, 16>(g, rows, base + c0, &mut o[c0..c0 + 16], wins);
            c0 += 16;
        }
        for c0 in c0..c {
            fold_block::<T, 1>(g, rows, base + c0, &mut o[c0..c0 + 1], wins);
        }
    }
}

/// `W` channels of one pooled pixel: the accumulator starts at the window's first tap,
/// then folds every tap in row-major order — the first one again, which neither rule
/// lets win over itself (`v > v` is false; a NaN does not replace a NaN), so the result is
/// the plain fold's.
#[inline(always)]
fn fold_block<T: Float, const W: usize>(g: &Geom, rows: &[T], at: usize, o: &mut [T], wins: impl Fn(T, T) -> bool) {
    let row_len = g.w * g.c;
    let mut acc = [T::default(); W];
    acc.copy_from_slice(&rows[at..][..W]);
    for ky in 0..g.kh {
        let r = &rows[ky * row_len + at..];
        for kx in 0..g.kw {
            for (a, &v) in acc.iter_mut().zip(&r[kx * g.c..][..W]) {
                *a = if wins(v, *a) { v } else { *a };
            }
        }
    }
    o.copy_from_slice(&acc);
}

/// Max or average pooling (average over the in-bounds elements of each window).
pub(crate) fn pool<T: Float>(g: &Geom, x: &[T], max: bool, buf: OutBuf<T>) -> Vec<T> {
    let inside = g.pt == 0
        && g.pl == 0
        && g.oh > 0
        && g.ow > 0
        && (g.oh - 1) * g.sh + g.kh <= g.h
        && (g.ow - 1) * g.sw + g.kw <= g.w;
    if max && inside && g.kh > 0 && g.kw > 0 {
        return max_pool_inside(g, x, buf);
    }
    let (c, row_len) = (g.c, g.w * g.c);
    let init = if max { T::from_f64(f64::NEG_INFINITY) } else { T::default() };
    let mut out = buf.filled(g.n * g.oh * g.ow * c, init);
    let cnt_x = col_counts(g);
    let par = is_parallel(out.len() * g.kh * g.kw);
    for_each_chunk(&mut out, g.ow * c, par, |r, orow| {
        crate::kernels::simd::widest(
            #[inline(always)]
            || {
                let (n, oy) = (r / g.oh, r % g.oh);
                let mut cnt_y = 0;
                for (_, iy) in g.taps_y(oy) {
                    cnt_y += 1;
                    let xrow = &x[(n * g.h + iy) * row_len..][..row_len];
                    for kx in 0..g.kw {
                        for ox in g.cols_for_tap(kx) {
                            let ix = g.ix(ox, kx);
                            let (o, xp) = (&mut orow[ox * c..(ox + 1) * c], &xrow[ix * c..(ix + 1) * c]);
                            if max {
                                for (o, &v) in o.iter_mut().zip(xp) {
                                    *o = if better(v, *o) { v } else { *o };
                                }
                            } else {
                                for (o, &v) in o.iter_mut().zip(xp) {
                                    *o += v;
                                }
                            }
                        }
                    }
                }
                if !max {
                    for (opix, &cx) in orow.chunks_exact_mut(c).zip(&cnt_x) {
                        let cnt = T::from_f64((cnt_y * cx) as f64);
                        opix.iter_mut().for_each(|o| *o = *o / cnt);
                    }
                }
            },
        )
    });
    out
}

/// Max-pool gradient: each `dy` element is added at the first maximal element of its window
/// (row-major window order).
pub(crate) fn max_pool_grad<T: Float>(g: &Geom, x: &[T], dy: &[T], buf: OutBuf<T>) -> Vec<T> {
    if tiled(g) {
        return max_pool_grad_tiled(g, x, dy, buf);
    }
    let (c, img_len, ohw) = (g.c, g.h * g.w * g.c, g.oh * g.ow);
    let mut dx = buf.filled(x.len(), T::default());
    let par = g.n > 1 && is_parallel(g.n * ohw * c * g.kh * g.kw);
    for_each_chunk(&mut dx, img_len, par, |n, dimg| {
        let img = &x[n * img_len..(n + 1) * img_len];
        let dyi = &dy[n * ohw * c..(n + 1) * ohw * c];
        let mut best_v = filled(c, T::default());
        let mut best_i = vec![0usize; c];
        for (p, dyp) in dyi.chunks_exact(c).enumerate() {
            let (oy, ox) = (p / g.ow, p % g.ow);
            let mut first = true;
            for (_, iy) in g.taps_y(oy) {
                for (_, ix) in g.taps_x(ox) {
                    let pix = iy * g.w + ix;
                    let xp = &img[pix * c..(pix + 1) * c];
                    if first {
                        best_v.copy_from_slice(xp);
                        best_i.fill(pix);
                        first = false;
                        continue;
                    }
                    for ((bv, bi), &v) in best_v.iter_mut().zip(best_i.iter_mut()).zip(xp) {
                        if better(v, *bv) {
                            *bv = v;
                            *bi = pix;
                        }
                    }
                }
            }
            if !first {
                for (ci, (&bi, &d)) in best_i.iter().zip(dyp).enumerate() {
                    dimg[bi * c + ci] += d;
                }
            }
        }
    });
    dx
}

/// Windows that tile the input without overlap or padding (stride = window, every window
/// inside): each input element belongs to at most one window.
fn tiled(g: &Geom) -> bool {
    g.sh == g.kh
        && g.sw == g.kw
        && g.dh == 1
        && g.dw == 1
        && g.pt == 0
        && g.pl == 0
        && g.kh > 0
        && g.kw > 0
        && g.oh * g.kh <= g.h
        && g.ow * g.kw <= g.w
}

/// [`max_pool_grad`] for [`tiled`] windows: each band of `KH` input rows is zeroed and each
/// of its windows' `dy` written at the window's first maximal element (no accumulation: a
/// window owns its elements). Parallel over images.
fn max_pool_grad_tiled<T: Float>(g: &Geom, x: &[T], dy: &[T], buf: OutBuf<T>) -> Vec<T> {
    let (c, img_len, ohw) = (g.c, g.h * g.w * g.c, g.oh * g.ow);
    let zero = T::default();
    let mut dx = buf.overwritten(x.len());
    let par = g.n > 1 && is_parallel(x.len());
    let band_len = g.kh * g.w * c;
    if g.kh == 2 && g.kw == 2 {
        let row = g.w * c;
        for_each_chunk(&mut dx, img_len, par, |n, dimg| {
            let img = &x[n * img_len..(n + 1) * img_len];
            let dyi = &dy[n * ohw * c..(n + 1) * ohw * c];
            for (oy, band) in dimg.chunks_mut(2 * row).enumerate() {
                if oy >= g.oh {
                    band.fill(zero);
                    continue;
                }
                let (d0, d1) = band.split_at_mut(row);
                let xb = &img[2 * oy * row..(2 * oy + 2) * row];
                pool_pair_grad(&xb[..row], &xb[row..], &dyi[oy * g.ow * c..(oy + 1) * g.ow * c], c, d0, d1);
            }
        });
        return dx;
    }
    for_each_chunk(&mut dx, img_len, par, |n, dimg| {
        let img = &x[n * img_len..(n + 1) * img_len];
        let dyi = &dy[n * ohw * c..(n + 1) * ohw * c];
        let mut best_v = vec![zero; c];
        let mut best_t = vec![0u32; c];
        // zeros everywhere, then each window's gradient at its winner (band by band, so the
        // stores hit cache-resident lines)
        for (oy, band) in dimg.chunks_mut(band_len).enumerate() {
            band.fill(zero);
            if oy >= g.oh {
                continue;
            }
            let xband = &img[oy * band_len..(oy + 1) * band_len];
            for ox in 0..g.ow {
                let dyp = &dyi[(oy * g.ow + ox) * c..(oy * g.ow + ox + 1) * c];
                for t in 0..g.kh * g.kw {
                    let pix = (t / g.kw) * g.w + ox * g.kw + t % g.kw;
                    let xp = &xband[pix * c..(pix + 1) * c];
                    if t == 0 {
                        best_v.copy_from_slice(xp);
                        best_t.fill(pix as u32);
                        continue;
                    }
                    for ((bv, bt), &v) in best_v.iter_mut().zip(best_t.iter_mut()).zip(xp) {
                        let win = better(v, *bv);
                        *bv = if win { v } else { *bv };
                        *bt = if win { pix as u32 } else { *bt };
                    }
                }
                for (ci, (&bt, &v)) in best_t.iter().zip(dyp).enumerate() {
                    band[bt as usize * c + ci] = v;
                }
            }
        }
    });
    dx
}

/// Average-pool gradient, per input row: `dx[iy,ix] += dy[oy,ox] / count(oy,ox)` over the
/// windows covering `(iy,ix)`.
pub(crate) fn avg_pool_grad<T: Float>(g: &Geom, dy: &[T], buf: OutBuf<T>) -> Vec<T> {
    let (c, dy_row) = (g.c, g.ow * g.c);
    let cnt_y: Vec<usize> = (0..g.oh).map(|oy| g.taps_y(oy).count()).collect();
    let cnt_x = col_counts(g);
    let mut dx = buf.filled(g.n * g.h * g.w * c, T::default());
    let par = is_parallel(dx.len() * g.kh * g.kw);
    for_each_chunk(&mut dx, g.w * c, par, |r, drow| {
        let (n, iy) = (r / g.h, r % g.h);
        for (_, oy) in g.rev_taps_y(iy) {
            let dyr = &dy[(n * g.oh + oy) * dy_row..][..dy_row];
            for kx in 0..g.kw {
                for ox in g.cols_for_tap(kx) {
                    let ix = g.ix(ox, kx);
                    let cnt = T::from_f64((cnt_y[oy] * cnt_x[ox]) as f64);
                    for (d, &v) in drow[ix * c..(ix + 1) * c].iter_mut().zip(&dyr[ox * c..(ox + 1) * c]) {
                        *d += v / cnt;
                    }
                }
            }
        }
    });
    dx
}
