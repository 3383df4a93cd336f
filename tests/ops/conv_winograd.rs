//! The Winograd F(2x2, 5x5) conv kernel (`src/kernels/conv/winograd.rs`): f32 convs with 5x5
//! stride-1 filters and channel counts that are multiples of 16, on AVX-512 CPUs (other
//! CPUs run the same checks on the im2col path). F(4x4, 3x3): `conv_winograd3`, which shares
//! the helpers here.
//!
//! Checked: every output against an f64 naive reference, with an error bound scaled by
//! `Σ |x·w|` over the output's window (Winograd rounds differently from a direct sum, within
//! a small multiple of it); against the im2col path of the same session options (close;
//! different bits where the kernel ran); a batch gives each image's own results bit for bit;
//! fused `bias → relu → max_pool` chains give the unfused plan's bits (in `core::fuse`).

use pfor::ops::conv::{Conv2dParams, Padding};
use pfor::prelude::*;

/// Error bound relative to `Σ |x·w|` (f32 epsilon is 6e-8). Measured maxima: Winograd
/// 1.4e-6 (W2's layer), im2col 2.7e-7.
const REL_BOUND: f64 = 4e-6;

pub(crate) fn opts(winograd: bool) -> ExecOptions {
    ExecOptions { winograd, ..ExecOptions::default() }
}

/// `conv2d(x, w)` in a session with these options.
pub(crate) fn conv(x: &Tensor, w: &Tensor, pad: Padding, winograd: bool) -> Tensor {
    let mut g = Graph::new();
    let xi = g.input("x", DType::F32, x.shape().to_vec());
    let wc = g.constant(w.clone());
    let y = g.conv2d(xi, wc, Conv2dParams { padding: pad, ..Conv2dParams::default() }).unwrap();
    let mut s = Session::with_options(&g, &[y], opts(winograd)).unwrap();
    s.run(&[(xi, x.clone())]).unwrap().remove(0)
}

/// f64 reference `(y, Σ|x·w|, [OH, OW])` of a `k x k` stride-1 conv (`w [k, k, C, O]`).
pub(crate) fn reference(x: &Tensor, w: &Tensor, pad: Padding) -> (Vec<f64>, Vec<f64>, [usize; 2]) {
    let (xs, k, o) = (x.shape().to_vec(), w.shape()[0], w.shape()[3]);
    let [n, h, wd, c] = [xs[0], xs[1], xs[2], xs[3]];
    let (xv, wv) = (x.to_f64_vec(), w.to_f64_vec());
    let (oh, ow, pt, pl) = match pad {
        Padding::Valid => (h - (k - 1), wd - (k - 1), 0, 0),
        Padding::Same => (h, wd, (k - 1) / 2, (k - 1) / 2),
        Padding::Explicit(_) => unreachable!("the cases are VALID or SAME"),
    };
    let (mut y, mut mag) = (vec![0.0; n * oh * ow * o], vec![0.0; n * oh * ow * o]);
    for b in 0..n {
        for oy in 0..oh {
            for ox in 0..ow {
                let at = ((b * oh + oy) * ow + ox) * o;
                for ky in 0..k {
                    for kx in 0..k {
                        let (iy, ix) = ((oy + ky) as i64 - pt as i64, (ox + kx) as i64 - pl as i64);
                        if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= wd {
                            continue;
                        }
                        for ci in 0..c {
                            let xval = xv[((b * h + iy as usize) * wd + ix as usize) * c + ci];
                            for oi in 0..o {
                                let p = xval * wv[((ky * k + kx) * c + ci) * o + oi];
                                y[at + oi] += p;
                                mag[at + oi] += p.abs();
                            }
                        }
                    }
                }
            }
        }
    }
    (y, mag, [oh, ow])
}

/// Largest error of `t` against `want`, relative to the sum of magnitudes `mag`.
pub(crate) fn worst(t: &Tensor, want: &[f64], mag: &[f64]) -> f64 {
    t.to_f64_vec().iter().zip(want).zip(mag).map(|((g, y), m)| (g - y).abs() / m.max(1e-30)).fold(0.0, f64::max)
}

pub(crate) fn winograd_cpu() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[test]
fn winograd_conv_matches_f64_reference_and_im2col() {
    // (n, h, w, c, o, padding): even and odd outputs (a last tile row / column of one
    // pixel), inputs smaller than a tile, 16..80 output channels (partial register blocks),
    // several batches per task and parallel tasks (W2's second layer at n = 9).
    let cases = [
        (3, 10, 10, 16, 32, Padding::Same),
        (2, 9, 7, 32, 16, Padding::Same),
        (2, 3, 2, 16, 16, Padding::Same),
        (2, 12, 11, 16, 48, Padding::Valid),
        (1, 6, 6, 16, 80, Padding::Valid),
        (1, 5, 5, 16, 16, Padding::Valid),
        (9, 14, 14, 32, 64, Padding::Same),
    ];
    for (i, &(n, h, wd, c, o, pad)) in cases.iter().enumerate() {
        let (x, w) = (
            Tensor::randn(&[n, h, wd, c], 10 + i as u64).unwrap(),
            Tensor::randn(&[5, 5, c, o], 20 + i as u64).unwrap(),
        );
        let (want, mag, [oh, ow]) = reference(&x, &w, pad);
        let (fast, plain) = (conv(&x, &w, pad, true), conv(&x, &w, pad, false));
        assert_eq!(fast.shape(), [n, oh, ow, o], "case {i}");
        let (ef, ep) = (worst(&fast, &want, &mag), worst(&plain, &want, &mag));
        assert!(ef <= REL_BOUND, "case {i}: winograd error {ef:e} of Σ|x·w| (im2col: {ep:e})");
        assert!(ep <= REL_BOUND / 4.0, "case {i}: im2col error {ep:e} of Σ|x·w|");
        if winograd_cpu() {
            assert_ne!(fast.to_f64_vec(), plain.to_f64_vec(), "case {i}: the Winograd kernel did not run");
        }
        // each image alone gives the batch's bits
        for b in 0..n {
            let img = Tensor::from_vec(
                &[1, h, wd, c],
                x.to_array::<f32>().unwrap().as_slice().unwrap()[b * h * wd * c..][..h * wd * c].to_vec(),
            )
            .unwrap();
            let one = conv(&img, &w, pad, true).to_array::<f32>().unwrap();
            let all = fast.to_array::<f32>().unwrap();
            let len = oh * ow * o;
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(one.as_slice().unwrap()),
                bits(&all.as_slice().unwrap()[b * len..][..len]),
                "case {i} image {b}"
            );
        }
    }
}

#[test]
fn winograd_conv_propagates_nan_and_handles_n0() {
    let w = Tensor::randn(&[5, 5, 16, 16], 3).unwrap();
    let mut xv = Tensor::randn(&[2, 8, 8, 16], 4).unwrap().to_array::<f32>().unwrap();
    // a NaN at (image 1, row 3, col 4, channel 5) reaches every output whose window covers it
    xv[[1, 3, 4, 5]] = f32::NAN;
    let y = conv(&Tensor::from_array(xv), &w, Padding::Same, true).to_array::<f32>().unwrap();
    for ((b, oy, ox, _), v) in y.indexed_iter().map(|(ix, v)| ((ix[0], ix[1], ix[2], ix[3]), *v)) {
        let covers = b == 1 && (3 - oy as i64).abs() <= 2 && (4 - ox as i64).abs() <= 2;
        assert_eq!(v.is_nan(), covers, "output ({b}, {oy}, {ox})");
    }
    let empty = conv(&Tensor::zeros(DType::F32, &[0, 8, 8, 16]).unwrap(), &w, Padding::Same, true);
    assert_eq!(empty.shape(), [0, 8, 8, 16]);
}

/// `conv2d_backprop_input(w, dy)` in a session with these options.
fn backprop_input(w: &Tensor, dy: &Tensor, pad: Padding, hw: [usize; 2], winograd: bool) -> Tensor {
    let mut g = Graph::new();
    let dyi = g.input("dy", DType::F32, dy.shape().to_vec());
    let wc = g.constant(w.clone());
    let p = Conv2dParams { padding: pad, ..Conv2dParams::default() };
    let dx = g.conv2d_backprop_input(wc, dyi, p, hw).unwrap();
    let mut s = Session::with_options(&g, &[dx], opts(winograd)).unwrap();
    s.run(&[(dyi, dy.clone())]).unwrap().remove(0)
}

#[test]
fn winograd_backprop_input_matches_f64_reference() {
    // (n, h, w, c, o, padding): the input gradient is a Winograd conv of dy with the flipped
    // filter (C and O swap roles: both multiples of 16)
    let cases = [
        (2, 10, 10, 32, 16, Padding::Same),
        (2, 9, 7, 16, 48, Padding::Same),
        (1, 12, 11, 16, 32, Padding::Valid),
        (4, 14, 14, 32, 64, Padding::Same),
    ];
    for (i, &(n, h, wd, c, o, pad)) in cases.iter().enumerate() {
        let (oh, ow, pt, pl) = match pad {
            Padding::Valid => (h - 4, wd - 4, 0, 0),
            Padding::Same => (h, wd, 2, 2),
            Padding::Explicit(_) => unreachable!("the cases are VALID or SAME"),
        };
        let (dy, w) = (
            Tensor::randn(&[n, oh, ow, o], 30 + i as u64).unwrap(),
            Tensor::randn(&[5, 5, c, o], 40 + i as u64).unwrap(),
        );
        let (dyv, wv) = (dy.to_f64_vec(), w.to_f64_vec());
        let (mut want, mut mag) = (vec![0.0; n * h * wd * c], vec![0.0; n * h * wd * c]);
        for b in 0..n {
            for oy in 0..oh {
                for ox in 0..ow {
                    for ky in 0..5 {
                        for kx in 0..5 {
                            let (iy, ix) = ((oy + ky) as i64 - pt as i64, (ox + kx) as i64 - pl as i64);
                            if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= wd {
                                continue;
                            }
                            let at = ((b * h + iy as usize) * wd + ix as usize) * c;
                            for ci in 0..c {
                                for oi in 0..o {
                                    let p =
                                        dyv[((b * oh + oy) * ow + ox) * o + oi] * wv[((ky * 5 + kx) * c + ci) * o + oi];
                                    want[at + ci] += p;
                                    mag[at + ci] += p.abs();
                                }
                            }
                        }
                    }
                }
            }
        }
        let (fast, plain) = (backprop_input(&w, &dy, pad, [h, wd], true), backprop_input(&w, &dy, pad, [h, wd], false));
        assert_eq!(fast.shape(), [n, h, wd, c], "case {i}");
        let (ef, ep) = (worst(&fast, &want, &mag), worst(&plain, &want, &mag));
        assert!(ef <= REL_BOUND, "case {i}: winograd error {ef:e} of Σ|dy·w| (im2col: {ep:e})");
        assert!(ep <= REL_BOUND / 4.0, "case {i}: im2col error {ep:e}");
        if winograd_cpu() {
            assert_ne!(fast.to_f64_vec(), plain.to_f64_vec(), "case {i}: the Winograd kernel did not run");
        }
    }
}
