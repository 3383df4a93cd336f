//! Value tests for the conv family: hand-computed literals, a naive loop reference written
//! here (independent of the im2col kernels), and adjoint identities for the gradients.

use crate::common::*;
use pfor::ops::ConvKind;
use pfor::ops::conv::Conv2dParams;
use pfor::prelude::*;

use Padding::{Same, Valid};

pub(super) fn p(strides: [usize; 2], padding: Padding, dilations: [usize; 2]) -> Conv2dParams {
    Conv2dParams { strides, padding, dilations }
}

/// 1..=n as f64.
fn iota(n: usize) -> Vec<f64> {
    (1..=n).map(|v| v as f64).collect()
}

/// Run a two-input op in f64 and f32 and compare with `want` (shape `out`).
fn check2(
    a: (&[usize], &[f64]),
    b: (&[usize], &[f64]),
    out: &[usize],
    want: &[f64],
    f: impl Fn(&mut Graph, ValueId, ValueId) -> Result<ValueId>,
) {
    for dt in [DType::F64, DType::F32] {
        let got = apply2(f64t(a.0, a.1).cast(dt), f64t(b.0, b.1).cast(dt), &f);
        let tol = if dt == DType::F32 { 1e-4 } else { 1e-12 };
        assert_close(&got, &f64t(out, want).cast(dt), tol);
    }
}

fn check1(a: (&[usize], &[f64]), out: &[usize], want: &[f64], f: impl Fn(&mut Graph, ValueId) -> Result<ValueId>) {
    for dt in [DType::F64, DType::F32] {
        let got = apply1(f64t(a.0, a.1).cast(dt), &f);
        let tol = if dt == DType::F32 { 1e-5 } else { 1e-12 };
        assert_close(&got, &f64t(out, want).cast(dt), tol);
    }
}

const X33: &[usize] = &[1, 3, 3, 1];
const W22: &[usize] = &[2, 2, 1, 1];

#[test]
fn conv2d_literal_valid_same_stride_dilation() {
    let (x, w) = (iota(9), [1.0, 2.0, 3.0, 4.0]);
    let conv = |pr: Conv2dParams| move |g: &mut Graph, a: ValueId, b: ValueId| g.conv2d(a, b, pr);
    check2((X33, &x), (W22, &w), &[1, 2, 2, 1], &[37., 47., 67., 77.], conv(Conv2dParams::default()));
    // SAME: one padding row/column, at the bottom/right.
    let same = [37., 47., 21., 67., 77., 33., 23., 26., 9.];
    check2((X33, &x), (W22, &w), &[1, 3, 3, 1], &same, conv(p([1, 1], Same, [1, 1])));
    check2((X33, &x), (W22, &w), &[1, 2, 2, 1], &[37., 21., 23., 9.], conv(p([2, 2], Same, [1, 1])));
    check2((X33, &x), (W22, &w), &[1, 1, 1, 1], &[37.], conv(p([2, 2], Valid, [1, 1])));
    check2((X33, &x), (W22, &w), &[1, 2, 1, 1], &[37., 67.], conv(p([1, 2], Valid, [1, 1])));
    // Dilation 2: taps at the corners of a 3x3 window.
    check2((X33, &x), (W22, &w), &[1, 1, 1, 1], &[64.], conv(p([1, 1], Valid, [2, 2])));
    let dil_same = [20., 36., 15., 36., 64., 26., 10., 16., 5.];
    check2((X33, &x), (W22, &w), &[1, 3, 3, 1], &dil_same, conv(p([1, 1], Same, [2, 2])));
}

#[test]
fn conv2d_literal_multichannel_and_pointwise() {
    // x pixels (1,2) (3,4) / (5,6) (7,8); w[ky,kx,c,o] = flat index + 1.
    let x = iota(8);
    let conv = |pr: Conv2dParams| move |g: &mut Graph, a: ValueId, b: ValueId| g.conv2d(a, b, pr);
    let d = Conv2dParams::default();
    check2((&[1, 2, 2, 2], &x), (&[2, 2, 2, 3], &iota(24)), &[1, 1, 1, 3], &[540., 576., 612.], conv(d));
    // 1x1 conv (single GEMM path): each pixel times [[1,2],[3,4]].
    let want = [7., 10., 15., 22., 23., 34., 31., 46.];
    check2((&[1, 2, 2, 2], &x), (&[1, 1, 2, 2], &[1., 2., 3., 4.]), &[1, 2, 2, 2], &want, conv(d));
    // Batch 2 of one pixel each, 1x1 filter with strides 2 (not the GEMM-only path): first pixel.
    let want = [7., 10., 23., 34.];
    check2(
        (&[2, 2, 1, 2], &x),
        (&[1, 1, 2, 2], &[1., 2., 3., 4.]),
        &[2, 1, 1, 2],
        &want,
        conv(p([2, 2], Valid, [1, 1])),
    );
}

#[test]
fn conv2d_backprop_literals() {
    let dy = [1.0, 2.0, 3.0, 4.0];
    let d = Conv2dParams::default();
    let want = [1., 4., 4., 6., 20., 16., 9., 24., 16.];
    check2((W22, &[1., 2., 3., 4.]), (&[1, 2, 2, 1], &dy), X33, &want, |g, w, dy| {
        g.conv2d_backprop_input(w, dy, d, [3, 3])
    });
    check2((X33, &iota(9)), (&[1, 2, 2, 1], &dy), W22, &[37., 47., 67., 77.], |g, x, dy| {
        g.conv2d_backprop_filter(x, dy, d, [2, 2])
    });
    // SAME, stride 2: dy[0,0] hits the window at (0,0), dy[0,1] at (0,2), ... (padding dropped).
    let s2 = p([2, 2], Same, [1, 1]);
    let want = [1., 2., 2., 3., 4., 6., 3., 6., 4.];
    check2((W22, &[1., 2., 3., 4.]), (&[1, 2, 2, 1], &[1., 2., 3., 4.]), X33, &want, |g, w, dy| {
        g.conv2d_backprop_input(w, dy, s2, [3, 3])
    });
    // dw[ky,kx] = Σ x[2oy+ky, 2ox+kx] dy[oy,ox] over in-bounds taps.
    let want = [1. + 6. + 21. + 36., 2. + 24., 4. + 12., 5.];
    check2((X33, &iota(9)), (&[1, 2, 2, 1], &[1., 2., 3., 4.]), W22, &want, |g, x, dy| {
        g.conv2d_backprop_filter(x, dy, s2, [2, 2])
    });
}

#[test]
fn depthwise_literals() {
    let x = iota(8); // pixels (1,2) (3,4) / (5,6) (7,8)
    let d = Conv2dParams::default();
    // M = 2, 1x1 filter [[1,2],[3,4]] (c, m): channel c*2+m = x[c] * w[c,m].
    let want = [1., 2., 6., 8., 3., 6., 12., 16., 5., 10., 18., 24., 7., 14., 24., 32.];
    check2((&[1, 2, 2, 2], &x), (&[1, 1, 2, 2], &[1., 2., 3., 4.]), &[1, 2, 2, 4], &want, |g, x, w| {
        g.depthwise_conv2d(x, w, d)
    });
    // M = 1, 2x2 filter: channel 0 taps the diagonal, channel 1 the anti-diagonal.
    let w = [1., 0., 0., 1., 0., 1., 1., 0.]; // [ky,kx,c]
    check2((&[1, 2, 2, 2], &x), (&[2, 2, 2, 1], &w), &[1, 1, 1, 2], &[8., 10.], |g, x, w| g.depthwise_conv2d(x, w, d));
    // SAME stride 2 on 3x3, one channel: same numbers as conv2d.
    check2((X33, &iota(9)), (W22, &[1., 2., 3., 4.]), &[1, 2, 2, 1], &[37., 21., 23., 9.], |g, x, w| {
        g.depthwise_conv2d(x, w, p([2, 2], Same, [1, 1]))
    });
    // Backprop input: dx[c] = Σ_m dy[c*2+m] w[c,m].
    let dy = [1., 0., 0., 1., 2., 1., 1., 0.];
    check2((&[1, 1, 2, 2], &[1., 2., 3., 4.]), (&[1, 1, 2, 4], &dy), &[1, 1, 2, 2], &[1., 4., 4., 3.], |g, w, dy| {
        g.depthwise_conv2d_backprop_input(w, dy, d, [1, 2])
    });
    // Backprop filter: dw[c,m] = Σ_pixels x[c] dy[c*2+m].
    check2((&[1, 1, 2, 2], &[1., 2., 3., 4.]), (&[1, 1, 2, 4], &dy), &[1, 1, 2, 2], &[7., 3., 4., 2.], |g, x, dy| {
        g.depthwise_conv2d_backprop_filter(x, dy, d, [1, 1])
    });
}

const X: [f64; 9] = [3., 1., 4., 1., 5., 9., 2., 6., 5.];

#[test]
fn pool_literals() {
    check1((X33, &X), &[1, 2, 2, 1], &[5., 9., 6., 9.], |g, x| g.max_pool(x, [2, 2], [1, 1], Valid));
    check1((X33, &X), &[1, 2, 2, 1], &[5., 9., 6., 5.], |g, x| g.max_pool(x, [2, 2], [2, 2], Same));
    // Padding never wins a max, even over negative values.
    let neg: Vec<f64> = X.iter().map(|v| -v).collect();
    check1((X33, &neg), &[1, 2, 2, 1], &[-1., -4., -2., -5.], |g, x| g.max_pool(x, [2, 2], [2, 2], Same));
    // Two channels pooled independently; rectangular window.
    let x2 = [1., 8., 2., 7., 3., 6., 4., 5.]; // [1,2,2,2]
    check1((&[1, 2, 2, 2], &x2), &[1, 2, 1, 2], &[2., 8., 4., 6.], |g, x| g.max_pool(x, [1, 2], [1, 1], Valid));
    check1((&[1, 2, 2, 2], &x2), &[1, 1, 2, 2], &[2., 7., 3., 6.], |g, x| g.avg_pool(x, [2, 1], [1, 1], Valid));

    let x = iota(9);
    check1((X33, &x), &[1, 2, 2, 1], &[3., 4., 6., 7.], |g, x| g.avg_pool(x, [2, 2], [1, 1], Valid));
    // SAME averages over the in-bounds elements only.
    let want = [3., 4., 4.5, 6., 7., 7.5, 7.5, 8.5, 9.];
    check1((X33, &x), &[1, 3, 3, 1], &want, |g, x| g.avg_pool(x, [2, 2], [1, 1], Same));
    check1((X33, &x), &[1, 2, 2, 1], &[3., 4., 6., 7.], |g, x| g.avg_pool(x, [3, 3], [2, 2], Same));
}

#[test]
fn pool_grad_literals() {
    let dy = [1., 2., 3., 4.];
    let want = [0., 0., 0., 0., 1., 6., 0., 3., 0.];
    check2((X33, &X), (&[1, 2, 2, 1], &dy), X33, &want, |g, x, dy| g.max_pool_grad(x, dy, [2, 2], [1, 1], Valid));
    // SAME stride 2: windows (0,0) (0,2) (2,0) (2,2) → maxima 5@(1,1) 9@(1,2) 6@(2,1) 5@(2,2).
    let want = [0., 0., 0., 0., 1., 2., 0., 3., 4.];
    check2((X33, &X), (&[1, 2, 2, 1], &dy), X33, &want, |g, x, dy| g.max_pool_grad(x, dy, [2, 2], [2, 2], Same));
    // Ties: the first maximal element in row-major window order gets everything.
    let one = (&[1usize, 1, 1, 1][..], &[5.0][..]);
    let mp = |g: &mut Graph, x, dy| g.max_pool_grad(x, dy, [2, 2], [1, 1], Valid);
    check2((&[1, 2, 2, 1], &[1., 1., 1., 1.]), one, &[1, 2, 2, 1], &[5., 0., 0., 0.], mp);
    check2((&[1, 2, 2, 1], &[0., 2., 2., 1.]), one, &[1, 2, 2, 1], &[0., 5., 0., 0.], mp);
    // NaN counts as maximal (the first NaN wins), in the forward op and its gradient.
    let nan = [1., f64::NAN, 3., f64::NAN];
    check1((&[1, 2, 2, 1], &nan), &[1, 1, 1, 1], &[f64::NAN], |g, x| g.max_pool(x, [2, 2], [1, 1], Valid));
    check2((&[1, 2, 2, 1], &nan), one, &[1, 2, 2, 1], &[0., 5., 0., 0.], mp);

    // Avg: SAME 2x2 stride 1 on 2x2; window counts 4, 2, 2, 1.
    check1((&[1, 2, 2, 1], &[4., 8., 12., 16.]), &[1, 2, 2, 1], &[1., 5., 7., 27.], |g, dy| {
        g.avg_pool_grad(dy, [2, 2], [1, 1], Same, [2, 2])
    });
    let want = [1., 2., 1., 2., 4., 2., 1., 2., 1.];
    check1((&[1, 2, 2, 1], &[4., 4., 4., 4.]), X33, &want, |g, dy| g.avg_pool_grad(dy, [2, 2], [1, 1], Valid, [3, 3]));
}

// ---------- naive reference (TF geometry written out independently) ----------

#[derive(Clone, Copy, Debug)]
pub(super) struct Cfg {
    pub(super) n: usize,
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) c: usize,
    pub(super) kh: usize,
    pub(super) kw: usize,
    pub(super) o: usize,
    pub(super) pr: Conv2dParams,
}

/// (output size, padding before) of one axis.
fn axis(i: usize, k: usize, s: usize, d: usize, pad: Padding) -> (usize, usize) {
    let ke = d * (k - 1) + 1;
    match pad {
        Valid => ((i - ke + s) / s, 0),
        Same => {
            let out = i.div_ceil(s);
            let total = ((out - 1) * s + ke).saturating_sub(i);
            (out, total / 2)
        }
        Padding::Explicit(_) => unreachable!("explicit pads: see conv_explicit_padding"),
    }
}

impl Cfg {
    pub(super) fn out_hw(&self) -> (usize, usize) {
        let q = self.pr;
        (
            axis(self.h, self.kh, q.strides[0], q.dilations[0], q.padding).0,
            axis(self.w, self.kw, q.strides[1], q.dilations[1], q.padding).0,
        )
    }
    /// Calls `f(n, oy, ox, ky, kx, iy, ix)` for every in-bounds tap.
    pub(super) fn visit(&self, mut f: impl FnMut([usize; 7])) {
        let q = self.pr;
        let (oh, pt) = axis(self.h, self.kh, q.strides[0], q.dilations[0], q.padding);
        let (ow, pl) = axis(self.w, self.kw, q.strides[1], q.dilations[1], q.padding);
        for n in 0..self.n {
            for oy in 0..oh {
                for ox in 0..ow {
                    for ky in 0..self.kh {
                        for kx in 0..self.kw {
                            let iy = (oy * q.strides[0] + ky * q.dilations[0]) as i64 - pt as i64;
                            let ix = (ox * q.strides[1] + kx * q.dilations[1]) as i64 - pl as i64;
                            if iy >= 0 && ix >= 0 && (iy as usize) < self.h && (ix as usize) < self.w {
                                f([n, oy, ox, ky, kx, iy as usize, ix as usize]);
                            }
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn randv(shape: &[usize], seed: u64) -> Vec<f64> {
    Tensor::randn_f64(shape, seed).unwrap().to_vec::<f64>().unwrap()
}

/// Run `f` on a 4-thread rayon pool so the chunked parallel kernels run on any machine.
pub(super) fn in_pool(f: impl FnOnce() + Send) {
    rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap().install(f)
}

fn dot(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape());
    a.to_f64_vec().iter().zip(b.to_f64_vec()).map(|(x, y)| x * y).sum()
}

fn assert_same_dot(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "{what}: {a} vs {b}");
}

fn configs() -> Vec<Cfg> {
    let c = |n, h, w, c, kh, kw, o, pr| Cfg { n, h, w, c, kh, kw, o, pr };
    vec![
        c(3, 7, 6, 2, 3, 2, 4, p([2, 2], Valid, [1, 1])),
        c(3, 7, 5, 3, 3, 3, 2, p([1, 1], Same, [1, 1])),
        c(2, 9, 8, 2, 2, 3, 3, p([2, 3], Same, [1, 1])),
        c(2, 9, 9, 1, 3, 3, 2, p([1, 1], Valid, [2, 3])),
        c(1, 8, 7, 2, 3, 2, 2, p([2, 1], Same, [2, 2])),
        c(3, 4, 5, 3, 1, 1, 2, p([1, 1], Same, [1, 1])), // pointwise GEMM path
        c(2, 5, 5, 2, 4, 4, 1, p([1, 1], Same, [1, 1])), // window larger than half the input
        // Big enough for the chunked, parallel paths: chunks not aligned to images, and
        // images larger than one chunk.
        c(7, 15, 15, 12, 3, 3, 16, p([1, 1], Same, [1, 1])),
        c(2, 30, 30, 12, 3, 3, 16, p([1, 1], Same, [1, 1])),
        c(4, 16, 16, 64, 1, 1, 32, p([1, 1], Valid, [1, 1])), // pointwise, chunked filter grad
        // Single channel (transposed patch matrix): MNIST's first layer, chunks not aligned
        // to output rows; a strided one.
        c(9, 28, 28, 1, 5, 5, 32, p([1, 1], Same, [1, 1])),
        c(2, 11, 10, 1, 3, 4, 3, p([2, 3], Same, [1, 2])),
        // Single channel, 64 outputs, row stride 2, dilated, VALID, 7 output columns (a
        // partial pixel tile): f32 takes the direct kernel on AVX-512 CPUs.
        c(3, 13, 11, 1, 3, 3, 64, p([2, 1], Valid, [2, 2])),
    ]
}

#[test]
fn conv2d_matches_naive_reference_and_adjoints() {
    // A wide layer (large KH*KW*C*O): chunks in order, each GEMM parallel inside faer.
    let wide = Cfg { n: 1, h: 31, w: 31, c: 256, kh: 3, kw: 3, o: 32, pr: p([1, 1], Same, [1, 1]) };
    in_pool(|| {
        for (i, cfg) in configs().into_iter().chain([wide]).enumerate() {
            let Cfg { n, h, w, c, kh, kw, o, pr } = cfg;
            let (oh, ow) = cfg.out_hw();
            let (xs, ws, ys) = ([n, h, w, c], [kh, kw, c, o], [n, oh, ow, o]);
            let (xv, wv, dyv) = (randv(&xs, 10 + i as u64), randv(&ws, 20 + i as u64), randv(&ys, 30 + i as u64));
            let (mut y, mut dx, mut dw) =
                (vec![0.0; n * oh * ow * o], vec![0.0; n * h * w * c], vec![0.0; kh * kw * c * o]);
            cfg.visit(|[b, oy, ox, ky, kx, iy, ix]| {
                for ci in 0..c {
                    for oi in 0..o {
                        let (xi, wi, yi) = (
                            ((b * h + iy) * w + ix) * c + ci,
                            ((ky * kw + kx) * c + ci) * o + oi,
                            ((b * oh + oy) * ow + ox) * o + oi,
                        );
                        y[yi] += xv[xi] * wv[wi];
                        dx[xi] += dyv[yi] * wv[wi];
                        dw[wi] += xv[xi] * dyv[yi];
                    }
                }
            });
            let (xt, wt, dyt) = (f64t(&xs, &xv), f64t(&ws, &wv), f64t(&ys, &dyv));
            let got_y = apply2(xt.clone(), wt.clone(), |g, a, b| g.conv2d(a, b, pr));
            assert_close(&got_y, &f64t(&ys, &y), 1e-10);
            let got_dx = apply2(wt.clone(), dyt.clone(), |g, a, b| g.conv2d_backprop_input(a, b, pr, [h, w]));
            assert_close(&got_dx, &f64t(&xs, &dx), 1e-10);
            let got_dw = apply2(xt.clone(), dyt.clone(), |g, a, b| g.conv2d_backprop_filter(a, b, pr, [kh, kw]));
            assert_close(&got_dw, &f64t(&ws, &dw), 1e-10);
            let lhs = dot(&got_y, &dyt);
            assert_same_dot(lhs, dot(&xt, &got_dx), &format!("cfg {i} <conv(x,w),dy> vs <x,dx>"));
            assert_same_dot(lhs, dot(&wt, &got_dw), &format!("cfg {i} <conv(x,w),dy> vs <w,dw>"));
            // f32 agrees with f64 (the wide layer's 3x3 f32 conv runs Winograd F(4x4, 3x3) on
            // AVX-512 CPUs: errors up to ~7e-7 of its Σ|x·w| ≈ 1.5e3, 1e-3 absolute)
            let y32 = apply2(xt.cast(DType::F32), wt.cast(DType::F32), |g, a, b| g.conv2d(a, b, pr));
            assert_close(&y32, &got_y.cast(DType::F32), if c * kh * kw >= 1024 { 4e-3 } else { 1e-4 });
        }
    });
}

#[test]
fn depthwise_matches_naive_reference_and_adjoints() {
    in_pool(|| {
        for (i, cfg) in configs().into_iter().enumerate() {
            let Cfg { n, h, w, c, kh, kw, o: m, pr } = cfg;
            let (oh, ow) = cfg.out_hw();
            let (xs, ws, ys) = ([n, h, w, c], [kh, kw, c, m], [n, oh, ow, c * m]);
            let (xv, wv, dyv) = (randv(&xs, 40 + i as u64), randv(&ws, 50 + i as u64), randv(&ys, 60 + i as u64));
            let (mut y, mut dx, mut dw) =
                (vec![0.0; n * oh * ow * c * m], vec![0.0; n * h * w * c], vec![0.0; kh * kw * c * m]);
            cfg.visit(|[b, oy, ox, ky, kx, iy, ix]| {
                for ci in 0..c {
                    for mi in 0..m {
                        let xi = ((b * h + iy) * w + ix) * c + ci;
                        let wi = ((ky * kw + kx) * c + ci) * m + mi;
                        let yi = ((b * oh + oy) * ow + ox) * c * m + ci * m + mi;
                        y[yi] += xv[xi] * wv[wi];
                        dx[xi] += dyv[yi] * wv[wi];
                        dw[wi] += xv[xi] * dyv[yi];
                    }
                }
            });
            let (xt, wt, dyt) = (f64t(&xs, &xv), f64t(&ws, &wv), f64t(&ys, &dyv));
            let got_y = apply2(xt.clone(), wt.clone(), |g, a, b| g.depthwise_conv2d(a, b, pr));
            assert_close(&got_y, &f64t(&ys, &y), 1e-10);
            let got_dx = apply2(wt.clone(), dyt.clone(), |g, a, b| g.depthwise_conv2d_backprop_input(a, b, pr, [h, w]));
            assert_close(&got_dx, &f64t(&xs, &dx), 1e-10);
            let got_dw =
                apply2(xt.clone(), dyt.clone(), |g, a, b| g.depthwise_conv2d_backprop_filter(a, b, pr, [kh, kw]));
            assert_close(&got_dw, &f64t(&ws, &dw), 1e-10);
            let lhs = dot(&got_y, &dyt);
            assert_same_dot(lhs, dot(&xt, &got_dx), &format!("cfg {i} depthwise <y,dy> vs <x,dx>"));
            assert_same_dot(lhs, dot(&wt, &got_dw), &format!("cfg {i} depthwise <y,dy> vs <w,dw>"));
        }
    });
}

#[test]
fn pool_adjoints_on_random_data() {
    let cases = [
        (7, 6, 3, [3, 2], [2, 2], Same),
        (5, 5, 3, [2, 2], [1, 1], Valid),
        (6, 7, 2, [3, 3], [2, 3], Valid),
        (9, 9, 3, [3, 3], [1, 1], Same),
        (40, 40, 8, [3, 3], [1, 1], Same), // parallel kernels
    ];
    in_pool(|| {
        for (i, (h, w, c, k, s, pad)) in cases.into_iter().enumerate() {
            let xt = f64t(&[2, h, w, c], &randv(&[2, h, w, c], 70 + i as u64));
            let y = apply1(xt.clone(), |g, x| g.avg_pool(x, k, s, pad));
            let dyt = f64t(y.shape(), &randv(y.shape(), 80 + i as u64));
            let dx = apply1(dyt.clone(), |g, dy| g.avg_pool_grad(dy, k, s, pad, [h, w]));
            assert_same_dot(dot(&y, &dyt), dot(&xt, &dx), "avg_pool adjoint");
            // Max pool is linear in the selected elements: <max_pool(x), dy> == <x, max_pool_grad(x, dy)>.
            let m = apply1(xt.clone(), |g, x| g.max_pool(x, k, s, pad));
            let mdx = apply2(xt.clone(), dyt.clone(), |g, x, dy| g.max_pool_grad(x, dy, k, s, pad));
            assert_same_dot(dot(&m, &dyt), dot(&xt, &mdx), "max_pool_grad routing");
        }
    });
}

#[test]
fn max_pool_matches_naive_reference() {
    // VALID windows inside the input take the no-padding kernel; SAME ones the general loop.
    let cases = [
        (2, 28, 28, 32, [2, 2], [2, 2], Valid), // the MNIST pools (row-pair kernel), parallel
        (2, 7, 9, 5, [2, 2], [2, 2], Valid),    // row-pair kernel with a leftover row and column
        (3, 7, 6, 3, [3, 2], [2, 2], Valid),
        (2, 6, 7, 2, [3, 3], [2, 3], Valid),
        (2, 7, 6, 3, [3, 2], [2, 2], Same),
        (1, 27, 27, 128, [3, 3], [2, 2], Valid), // SqueezeNet's pools (vectorized folds), parallel
        (1, 15, 16, 37, [3, 3], [2, 2], Valid),  // channels not a multiple of 16, a column left over
        (0, 9, 9, 16, [3, 3], [2, 2], Valid),    // n = 0
    ];
    in_pool(|| {
        for (i, (n, h, w, c, k, s, pad)) in cases.into_iter().enumerate() {
            let mut xv = randv(&[n, h, w, c], 90 + i as u64);
            if let Some(v) = xv.get_mut(7) {
                *v = f64::NAN; // NaN counts as maximal
            }
            let cfg = Cfg { n, h, w, c, kh: k[0], kw: k[1], o: c, pr: p(s, pad, [1, 1]) };
            let (oh, ow) = cfg.out_hw();
            let mut want = vec![f64::NEG_INFINITY; n * oh * ow * c];
            cfg.visit(|[b, oy, ox, _, _, iy, ix]| {
                for ci in 0..c {
                    let (v, o) = (xv[((b * h + iy) * w + ix) * c + ci], &mut want[((b * oh + oy) * ow + ox) * c + ci]);
                    if v.is_nan() || v > *o {
                        *o = if o.is_nan() { *o } else { v };
                    }
                }
            });
            for dt in [DType::F64, DType::F32] {
                let got = apply1(f64t(&[n, h, w, c], &xv).cast(dt), |g, x| g.max_pool(x, k, s, pad));
                assert_close(&got, &f64t(&[n, oh, ow, c], &want).cast(dt), 0.0);
            }
        }
    });
}

#[test]
fn max_pool_grad_matches_naive_reference() {
    // Windows that tile the input (stride = window, VALID) take the one-pass kernel (2x2
    // windows a branch-free pass of their own), including leftover rows and columns outside
    // every window; the others the scatter.
    let cases = [
        (2, 28, 28, 32, [2, 2], [2, 2], Valid), // the MNIST pools, parallel over images
        (3, 7, 10, 3, [2, 3], [2, 3], Valid),   // a leftover row and column
        (2, 9, 7, 5, [2, 2], [2, 2], Valid),    // the 2x2 pass, with a leftover row and column
        (2, 9, 9, 2, [3, 3], [3, 3], Valid),
        (2, 6, 7, 2, [3, 3], [2, 3], Valid), // overlapping rows
        (2, 7, 6, 3, [3, 2], [2, 2], Same),
        (1, 27, 27, 128, [3, 3], [2, 2], Valid), // SqueezeNet's pool shape, parallel
        (1, 15, 16, 37, [3, 3], [2, 2], Valid),  // channels not a multiple of 16, a column left over
        (0, 9, 9, 16, [3, 3], [2, 2], Valid),    // n = 0
    ];
    in_pool(|| {
        for (i, (n, h, w, c, k, s, pad)) in cases.into_iter().enumerate() {
            // values rounded to halves: many ties, which the first maximal element wins
            let mut xv: Vec<f64> =
                randv(&[n, h, w, c], 70 + i as u64).iter().map(|v| (v * 2.0).round() / 2.0).collect();
            if let Some(v) = xv.get_mut(5) {
                *v = f64::NAN; // NaN counts as maximal
            }
            let cfg = Cfg { n, h, w, c, kh: k[0], kw: k[1], o: c, pr: p(s, pad, [1, 1]) };
            let (oh, ow) = cfg.out_hw();
            let dyv = randv(&[n, oh, ow, c], 80 + i as u64);
            // per (window, channel): the first maximal input index, in visit (row-major) order
            let mut best: Vec<Option<(f64, usize)>> = vec![None; n * oh * ow * c];
            cfg.visit(|[b, oy, ox, _, _, iy, ix]| {
                for ci in 0..c {
                    let xi = ((b * h + iy) * w + ix) * c + ci;
                    let slot = &mut best[((b * oh + oy) * ow + ox) * c + ci];
                    let v = xv[xi];
                    let wins = match *slot {
                        None => true,
                        Some((cur, _)) => !cur.is_nan() && (v.is_nan() || v > cur),
                    };
                    if wins {
                        *slot = Some((v, xi));
                    }
                }
            });
            let mut want = vec![0.0; n * h * w * c];
            for (yi, b) in best.iter().enumerate() {
                if let Some((_, xi)) = b {
                    want[*xi] += dyv[yi];
                }
            }
            for dt in [DType::F64, DType::F32] {
                let (xt, dyt) = (f64t(&[n, h, w, c], &xv).cast(dt), f64t(&[n, oh, ow, c], &dyv).cast(dt));
                let got = apply2(xt, dyt, |g, x, dy| g.max_pool_grad(x, dy, k, s, pad));
                let tol = if dt == DType::F64 { 1e-12 } else { 1e-6 };
                assert_close(&got, &f64t(&[n, h, w, c], &want).cast(dt), tol);
            }
        }
    });
}

#[test]
fn extract_patches_literals() {
    // 3x3 image, 2x2 VALID window: each output pixel holds its window row-major.
    let want = [1., 2., 4., 5., 2., 3., 5., 6., 4., 5., 7., 8., 5., 6., 8., 9.];
    let d = Conv2dParams::default();
    check1((X33, &iota(9)), &[1, 2, 2, 4], &want, |g, x| g.extract_patches(x, [2, 2], d));
    // SAME stride 2: padding at the bottom/right is zero.
    let want = [1., 2., 4., 5., 3., 0., 6., 0., 7., 8., 0., 0., 9., 0., 0., 0.];
    check1((X33, &iota(9)), &[1, 2, 2, 4], &want, |g, x| g.extract_patches(x, [2, 2], p([2, 2], Same, [1, 1])));
    // Two channels, 1x2 window: tap-major, channel-minor.
    check1((&[1, 1, 2, 2], &iota(4)), &[1, 1, 1, 4], &[1., 2., 3., 4.], |g, x| g.extract_patches(x, [1, 2], d));
    // The adjoint counts how many windows cover each pixel (VALID 2x2 on 3x3: 1 2 1 / 2 4 2 / 1 2 1).
    let want = [1., 2., 1., 2., 4., 2., 1., 2., 1.];
    check1((&[1, 2, 2, 4], &[1.0; 16]), X33, &want, |g, dcol| g.extract_patches_grad(dcol, [2, 2], d, [3, 3]));
}

/// `extract_patches` / `extract_patches_grad` (and the `patches` / `col2im` graph wrappers)
/// against the naive loops, in f64 and f32, with the adjoint identity on random data.
#[test]
fn extract_patches_matches_naive_reference_and_adjoint() {
    use pfor::ops::conv::patches::{WindowGeom, col2im, patches};
    let c = |n, h, w, c, kh, kw, pr| Cfg { n, h, w, c, kh, kw, o: c, pr };
    let cfgs = [
        c(2, 5, 4, 1, 2, 3, p([1, 1], Valid, [1, 1])),
        c(2, 5, 4, 3, 3, 2, p([1, 1], Same, [1, 1])),
        c(3, 7, 6, 3, 3, 2, p([2, 2], Valid, [1, 1])),
        c(1, 6, 7, 1, 3, 3, p([2, 2], Same, [1, 1])),
        c(2, 7, 6, 3, 2, 2, p([1, 1], Valid, [2, 2])),
        c(2, 6, 5, 1, 3, 2, p([2, 1], Same, [2, 2])),
        c(2, 9, 8, 3, 2, 3, p([1, 2], Same, [2, 1])),
        c(1, 5, 5, 2, 4, 4, p([1, 1], Same, [1, 1])), // window nearly the input
        c(2, 4, 3, 2, 1, 1, p([1, 1], Valid, [1, 1])), // 1x1: the identity
        // Parallel kernels (chunks not aligned to output rows or images).
        c(16, 28, 28, 1, 5, 5, p([1, 1], Same, [1, 1])),
        c(9, 14, 14, 32, 5, 5, p([1, 1], Same, [1, 1])),
        c(5, 13, 11, 3, 3, 3, p([2, 2], Valid, [1, 1])),
    ];
    in_pool(|| {
        for (i, cfg) in cfgs.into_iter().enumerate() {
            let Cfg { n, h, w, c, kh, kw, pr, .. } = cfg;
            let (oh, ow) = cfg.out_hw();
            let kc = kh * kw * c;
            let (xs, ys) = ([n, h, w, c], [n, oh, ow, kc]);
            let (xv, dv) = (randv(&xs, 200 + i as u64), randv(&ys, 300 + i as u64));
            let (mut y, mut dx) = (vec![0.0; n * oh * ow * kc], vec![0.0; n * h * w * c]);
            cfg.visit(|[b, oy, ox, ky, kx, iy, ix]| {
                for ci in 0..c {
                    let xi = ((b * h + iy) * w + ix) * c + ci;
                    let yi = ((b * oh + oy) * ow + ox) * kc + (ky * kw + kx) * c + ci;
                    y[yi] = xv[xi];
                    dx[xi] += dv[yi];
                }
            });
            let (xt, dt) = (f64t(&xs, &xv), f64t(&ys, &dv));
            let got_y = apply1(xt.clone(), |g, x| g.extract_patches(x, [kh, kw], pr));
            assert_close(&got_y, &f64t(&ys, &y), 0.0);
            let got_dx = apply1(dt.clone(), |g, d| g.extract_patches_grad(d, [kh, kw], pr, [h, w]));
            assert_close(&got_dx, &f64t(&xs, &dx), 1e-12);
            assert_same_dot(dot(&got_y, &dt), dot(&xt, &got_dx), &format!("cfg {i} <patches(x),y> vs <x,grad(y)>"));
            // f32: the same copies and sums.
            let y32 = apply1(xt.cast(DType::F32), |g, x| g.extract_patches(x, [kh, kw], pr));
            assert_close(&y32, &got_y.cast(DType::F32), 0.0);
            let dx32 = apply1(dt.cast(DType::F32), |g, d| g.extract_patches_grad(d, [kh, kw], pr, [h, w]));
            assert_close(&dx32, &got_dx.cast(DType::F32), 1e-5);
            // The graph wrappers: the same values as [M,OH,OW,KH*KW,C].
            let five = [n, oh, ow, kh * kw, c];
            let geom = |g: &Graph, x| WindowGeom::of(g, "test", x, [kh, kw], pr.strides, pr.dilations, pr.padding);
            let pw = apply1(xt.clone(), |g, x| {
                let wg = geom(g, x)?;
                patches(g, x, &wg)
            });
            assert_close(&pw, &f64t(&five, &y), 0.0);
            let cw = apply2(xt.clone(), f64t(&five, &dv), |g, x, d| {
                let wg = geom(g, x)?;
                col2im(g, d, &wg)
            });
            assert_close(&cw, &got_dx, 0.0);
        }
    });
}

// ---------- shapes and errors ----------

#[test]
fn dynamic_dims_propagate_and_are_checked_at_run_time() {
    let mut g = Graph::new();
    let x =
        g.input("x", DType::F32, Shape::from_dims([Dim::dynamic("n"), Dim::fixed(5), Dim::unknown(), Dim::fixed(1)]));
    let w = g.constant(Tensor::ones(DType::F32, &[3, 3, 1, 2]).unwrap());
    let y = g.conv2d(x, w, p([2, 2], Valid, [1, 1])).unwrap();
    assert_eq!(
        g.shape(y).unwrap(),
        Shape::from_dims([Dim::dynamic("n"), Dim::fixed(2), Dim::unknown(), Dim::fixed(2)])
    );
    // SAME: the output height follows from the input height alone.
    let pool = g.max_pool(x, [2, 2], [2, 2], Same).unwrap();
    assert_eq!(g.shape(pool).unwrap().dim(1), &Dim::fixed(3));
    let ok = run_recorded(&g, &[y], &[(x, Tensor::ones(DType::F32, &[2, 5, 4, 1]).unwrap())]).unwrap();
    assert_close(&ok[0], &Tensor::full(DType::F32, &[2, 2, 1, 2], 9.0).unwrap(), 1e-6);
    // Width 2 < filter width 3: only detectable at run time.
    let err = run_recorded(&g, &[y], &[(x, Tensor::ones(DType::F32, &[2, 5, 2, 1]).unwrap())]).unwrap_err();
    assert!(matches!(err.root(), Error::Shape { op, .. } if op == "conv2d"), "{err}");
    // Empty batch.
    let empty = run_recorded(&g, &[y], &[(x, Tensor::ones(DType::F32, &[0, 5, 4, 1]).unwrap())]).unwrap();
    assert_eq!(empty[0].shape(), &[0, 2, 1, 2]);
}

fn build_err(f: impl FnOnce(&mut Graph) -> Result<ValueId>) -> Error {
    let mut g = Graph::new();
    f(&mut g).unwrap_err()
}

fn cf(g: &mut Graph, shape: &[usize]) -> ValueId {
    g.constant(Tensor::zeros(DType::F32, shape).unwrap())
}

#[track_caller]
fn assert_shape_err(e: Error, name: &str) {
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == name), "{e}");
    assert!(e.to_string().contains(name), "{e}");
}

#[test]
fn errors_name_the_op_and_shapes() {
    let d = Conv2dParams::default();
    // Channel mismatch.
    let e = build_err(|g| {
        let (x, w) = (cf(g, &[1, 3, 3, 2]), cf(g, &[2, 2, 3, 1]));
        g.conv2d(x, w, d)
    });
    assert_shape_err(e.clone(), "conv2d");
    assert!(e.to_string().contains("[1,3,3,2]") && e.to_string().contains("[2,2,3,1]"), "{e}");
    // Filter larger than the (VALID) input; dilation makes it larger still.
    assert_shape_err(
        build_err(|g| {
            let (x, w) = (cf(g, &[1, 2, 2, 1]), cf(g, &[3, 3, 1, 1]));
            g.conv2d(x, w, d)
        }),
        "conv2d",
    );
    assert_shape_err(
        build_err(|g| {
            let (x, w) = (cf(g, &[1, 4, 4, 1]), cf(g, &[2, 2, 1, 1]));
            g.depthwise_conv2d(x, w, p([1, 1], Valid, [4, 1]))
        }),
        "depthwise_conv2d",
    );
    // Rank ≠ 4.
    assert_shape_err(
        build_err(|g| {
            let (x, w) = (cf(g, &[3, 3, 1]), cf(g, &[2, 2, 1, 1]));
            g.conv2d(x, w, d)
        }),
        "conv2d",
    );
    assert_shape_err(
        build_err(|g| {
            let x = cf(g, &[4, 4]);
            g.max_pool(x, [2, 2], [1, 1], Valid)
        }),
        "max_pool",
    );
    // Zero stride / dilation / window.
    for e in [
        build_err(|g| {
            let (x, w) = (cf(g, &[1, 3, 3, 1]), cf(g, &[2, 2, 1, 1]));
            g.conv2d(x, w, p([0, 1], Valid, [1, 1]))
        }),
        build_err(|g| {
            let (x, w) = (cf(g, &[1, 3, 3, 1]), cf(g, &[2, 2, 1, 1]));
            g.conv2d(x, w, p([1, 1], Same, [1, 0]))
        }),
        build_err(|g| {
            let x = cf(g, &[1, 3, 3, 1]);
            g.avg_pool(x, [0, 2], [1, 1], Same)
        }),
    ] {
        assert!(matches!(e.root(), Error::InvalidArgument(m) if m.contains("conv2d") || m.contains("avg_pool")), "{e}");
    }
    // Dtypes: integers and mixed floats.
    let e = build_err(|g| {
        let x = g.constant(Tensor::zeros(DType::I64, &[1, 3, 3, 1]).unwrap());
        g.max_pool(x, [2, 2], [1, 1], Valid)
    });
    assert!(matches!(e.root(), Error::DType { op, .. } if op == "max_pool"), "{e}");
    let e = build_err(|g| {
        let (x, w) = (cf(g, &[1, 3, 3, 1]), g.constant(Tensor::zeros(DType::F64, &[2, 2, 1, 1]).unwrap()));
        g.conv2d(x, w, d)
    });
    assert!(matches!(e.root(), Error::DType { op, .. } if op == "conv2d"), "{e}");
    // Gradient shapes inconsistent with the forward geometry.
    assert_shape_err(
        build_err(|g| {
            let (w, dy) = (cf(g, &[2, 2, 1, 1]), cf(g, &[1, 3, 2, 1]));
            g.conv2d_backprop_input(w, dy, d, [3, 3])
        }),
        "conv2d_backprop_input",
    );
    assert_shape_err(
        build_err(|g| {
            let (x, dy) = (cf(g, &[2, 3, 3, 1]), cf(g, &[1, 2, 2, 1]));
            g.conv2d_backprop_filter(x, dy, d, [2, 2])
        }),
        "conv2d_backprop_filter",
    );
    assert_shape_err(
        build_err(|g| {
            let (x, dy) = (cf(g, &[1, 3, 3, 2]), cf(g, &[1, 2, 2, 3]));
            g.depthwise_conv2d_backprop_filter(x, dy, d, [2, 2])
        }),
        "depthwise_conv2d_backprop_filter",
    );
    assert_shape_err(
        build_err(|g| {
            let (w, dy) = (cf(g, &[2, 2, 2, 2]), cf(g, &[1, 2, 2, 2]));
            g.depthwise_conv2d_backprop_input(w, dy, d, [3, 3])
        }),
        "depthwise_conv2d_backprop_input",
    );
    assert_shape_err(
        build_err(|g| {
            let (x, dy) = (cf(g, &[1, 3, 3, 1]), cf(g, &[1, 3, 3, 1]));
            g.max_pool_grad(x, dy, [2, 2], [1, 1], Valid)
        }),
        "max_pool_grad",
    );
    assert_shape_err(
        build_err(|g| {
            let dy = cf(g, &[1, 2, 2, 1]);
            g.avg_pool_grad(dy, [2, 2], [1, 1], Same, [3, 3])
        }),
        "avg_pool_grad",
    );
}

#[test]
fn display_and_names() {
    let op = pfor::ops::ConvOp::Conv2D { params: p([2, 1], Same, [1, 3]) };
    assert_eq!(op.to_string(), "conv2d{strides=[2, 1], padding=SAME, dilations=[1, 3]}");
    let op = pfor::ops::ConvOp::AvgPoolGrad { ksize: [2, 2], strides: [1, 1], padding: Valid, input_hw: [4, 5] };
    assert_eq!(op.to_string(), "avg_pool_grad{ksize=[2, 2], strides=[1, 1], padding=VALID, input_hw=[4, 5]}");
    let op = pfor::ops::ConvOp::ExtractPatches { ksize: [3, 2], params: p([2, 1], Valid, [1, 2]) };
    assert_eq!(op.to_string(), "extract_patches{ksize=[3, 2], strides=[2, 1], padding=VALID, dilations=[1, 2]}");
    let op = pfor::ops::ConvOp::ExtractPatchesGrad { ksize: [2, 2], params: p([1, 1], Same, [1, 1]), input_hw: [4, 5] };
    assert_eq!(
        op.to_string(),
        "extract_patches_grad{ksize=[2, 2], strides=[1, 1], padding=SAME, dilations=[1, 1], input_hw=[4, 5]}"
    );
    let names: Vec<&str> = ConvKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), 12);
    assert!(names.contains(&"depthwise_conv2d_backprop_filter") && names.contains(&"max_pool_grad"));
    assert!(names.contains(&"extract_patches") && names.contains(&"extract_patches_grad"));
}

#[test]
fn extract_patches_shapes_and_errors() {
    let d = Conv2dParams::default();
    // Dynamic batch propagates; a dynamic channel count gives a dynamic last dim.
    let mut g = Graph::new();
    let x =
        g.input("x", DType::F32, Shape::from_dims([Dim::dynamic("n"), Dim::fixed(5), Dim::fixed(4), Dim::fixed(3)]));
    let y = g.extract_patches(x, [3, 2], p([2, 1], Same, [1, 1])).unwrap();
    let want = Shape::from_dims([Dim::dynamic("n"), Dim::fixed(3), Dim::fixed(4), Dim::fixed(18)]);
    assert_eq!(g.shape(y).unwrap(), want);
    let dx = g.extract_patches_grad(y, [3, 2], p([2, 1], Same, [1, 1]), [5, 4]).unwrap();
    assert_eq!(g.shape(dx).unwrap(), g.shape(x).unwrap());
    let out = run_recorded(&g, &[y, dx], &[(x, Tensor::ones(DType::F32, &[2, 5, 4, 3]).unwrap())]).unwrap();
    assert_eq!((out[0].shape(), out[1].shape()), (&[2, 3, 4, 18][..], &[2, 5, 4, 3][..]));
    let empty = run_recorded(&g, &[y, dx], &[(x, Tensor::ones(DType::F32, &[0, 5, 4, 3]).unwrap())]).unwrap();
    assert_eq!((empty[0].shape(), empty[1].shape()), (&[0, 3, 4, 18][..], &[0, 5, 4, 3][..]));
    let xc = g.input("xc", DType::F32, Shape::from_dims([Dim::fixed(1), Dim::fixed(3), Dim::fixed(3), Dim::unknown()]));
    let yc = g.extract_patches(xc, [2, 2], d).unwrap();
    assert!(!g.shape(yc).unwrap().dim(3).is_fixed());

    // Rank ≠ 4.
    let e = build_err(|g| {
        let x = cf(g, &[3, 3, 1]);
        g.extract_patches(x, [2, 2], d)
    });
    assert_shape_err(e.clone(), "extract_patches");
    assert!(e.to_string().contains("[3,3,1]"), "{e}");
    assert_shape_err(
        build_err(|g| {
            let dcol = cf(g, &[1, 2, 2]);
            g.extract_patches_grad(dcol, [2, 2], d, [3, 3])
        }),
        "extract_patches_grad",
    );
    // Last dim not a multiple of the taps.
    let e = build_err(|g| {
        let dcol = cf(g, &[1, 2, 2, 6]);
        g.extract_patches_grad(dcol, [2, 2], d, [3, 3])
    });
    assert_shape_err(e.clone(), "extract_patches_grad");
    assert!(e.to_string().contains("[1,2,2,6]") && e.to_string().contains("multiple"), "{e}");
    // Window larger than a VALID input (also once dilated).
    for (k, dil) in [([3, 3], [1, 1]), ([2, 2], [3, 1])] {
        let e = build_err(|g| {
            let x = cf(g, &[1, 2, 4, 1]);
            g.extract_patches(x, k, p([1, 1], Valid, dil))
        });
        assert_shape_err(e.clone(), "extract_patches");
        assert!(e.to_string().contains("[1,2,4,1]"), "{e}");
    }
    // Patch grid inconsistent with the forward geometry.
    assert_shape_err(
        build_err(|g| {
            let dcol = cf(g, &[1, 3, 2, 4]);
            g.extract_patches_grad(dcol, [2, 2], d, [3, 3])
        }),
        "extract_patches_grad",
    );
    // Zero window / stride; integer dtype.
    let e = build_err(|g| {
        let x = cf(g, &[1, 3, 3, 1]);
        g.extract_patches(x, [0, 2], d)
    });
    assert!(matches!(e.root(), Error::InvalidArgument(m) if m.contains("extract_patches")), "{e}");
    let e = build_err(|g| {
        let dcol = cf(g, &[1, 2, 2, 4]);
        g.extract_patches_grad(dcol, [2, 2], p([1, 0], Valid, [1, 1]), [3, 3])
    });
    assert!(matches!(e.root(), Error::InvalidArgument(m) if m.contains("extract_patches_grad")), "{e}");
    let e = build_err(|g| {
        let x = g.constant(Tensor::zeros(DType::I64, &[1, 3, 3, 1]).unwrap());
        g.extract_patches(x, [2, 2], d)
    });
    assert!(matches!(e.root(), Error::DType { op, .. } if op == "extract_patches"), "{e}");
}
