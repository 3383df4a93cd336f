//! The Winograd F(4x4, 3x3) conv kernel (`src/kernels/conv/winograd.rs`): f32 convs with 3x3
//! stride-1 filters and channel counts that are multiples of 16, on AVX-512 CPUs, where its
//! cost rule picks it (other CPUs and shapes run the same checks on the im2col path).
//!
//! Checked: every output against an f64 naive reference, with an error bound scaled by
//! `Σ |x·w|` over the output's window; against the im2col path (different bits where the
//! kernel ran); a batch gives each image's own results bit for bit; the fused `+ bias →
//! relu` epilogue; NaN propagation; n = 0; a fed filter whose values change between runs is
//! transformed on every run; a constant filter once, when the plan compiles. Fused chains (also `→ max_pool`) give the unfused
//! plan's bits in `core::fuse`.

use super::conv_winograd::{conv, opts, reference, winograd_cpu, worst};
use pfor::ops::conv::{Conv2dParams, Padding};
use pfor::prelude::*;

/// Error bound relative to `Σ |x·w|` (f32 epsilon is 6e-8); the measured maxima are in the
/// kernel's module docs.
const REL_BOUND: f64 = 4e-6;

/// Image `b` of an `[N, H, W, C]` f32 tensor, as `[1, H, W, C]`.
fn image(x: &Tensor, b: usize) -> Tensor {
    let s = x.shape().to_vec();
    let len = s[1] * s[2] * s[3];
    let v = x.to_array::<f32>().unwrap().as_slice().unwrap()[b * len..][..len].to_vec();
    Tensor::from_vec(&[1, s[1], s[2], s[3]], v).unwrap()
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_array::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn winograd3_conv_matches_f64_reference_and_im2col() {
    // (n, h, w, c, o, padding): tiles that hang over the bottom and right edges by 1..3
    // outputs, an input smaller than a tile, 16..80 output channels (partial register
    // blocks), several batches per task and parallel tasks across images.
    // Every case has ≥ 16 tiles (the cost rule's minimum).
    let cases = [
        (2, 14, 14, 32, 32, Padding::Same),
        (1, 13, 13, 48, 64, Padding::Same),
        (3, 9, 11, 16, 48, Padding::Valid),
        (3, 16, 16, 16, 16, Padding::Same),
        (4, 7, 7, 64, 80, Padding::Same),
        (8, 3, 5, 16, 16, Padding::Same),
        (1, 30, 29, 16, 32, Padding::Same),
    ];
    let mut worst_seen = 0.0f64;
    for (i, &(n, h, wd, c, o, pad)) in cases.iter().enumerate() {
        let (x, w) = (
            Tensor::randn(&[n, h, wd, c], 50 + i as u64).unwrap(),
            Tensor::randn(&[3, 3, c, o], 60 + i as u64).unwrap(),
        );
        let (want, mag, [oh, ow]) = reference(&x, &w, pad);
        let (fast, plain) = (conv(&x, &w, pad, true), conv(&x, &w, pad, false));
        assert_eq!(fast.shape(), [n, oh, ow, o], "case {i}");
        let (ef, ep) = (worst(&fast, &want, &mag), worst(&plain, &want, &mag));
        worst_seen = worst_seen.max(ef);
        assert!(ef <= REL_BOUND, "case {i}: winograd error {ef:e} of Σ|x·w| (im2col: {ep:e})");
        assert!(ep <= REL_BOUND / 4.0, "case {i}: im2col error {ep:e} of Σ|x·w|");
        if winograd_cpu() {
            assert_ne!(bits(&fast), bits(&plain), "case {i}: the Winograd kernel did not run");
        }
        // each image alone gives the batch's bits where one image has ≥ 16 tiles (the
        // kernel runs on it alone too)
        for b in (0..n).filter(|_| oh.div_ceil(4) * ow.div_ceil(4) >= 16) {
            let len = oh * ow * o;
            let one = conv(&image(&x, b), &w, pad, true);
            assert_eq!(bits(&one), bits(&fast)[b * len..][..len], "case {i} image {b}");
        }
    }
    eprintln!("F(4x4, 3x3): largest error {worst_seen:.2e} of Σ|x·w|");
}

#[test]
fn winograd3_cost_rule_keeps_small_batches_of_small_maps_on_im2col() {
    // one 7x7 image is 4 tiles: im2col's bits; 4 images are 16 tiles: Winograd's
    let w = Tensor::randn(&[3, 3, 64, 64], 8).unwrap();
    let x = Tensor::randn(&[4, 7, 7, 64], 9).unwrap();
    let one = image(&x, 0);
    assert_eq!(bits(&conv(&one, &w, Padding::Same, true)), bits(&conv(&one, &w, Padding::Same, false)));
    if winograd_cpu() {
        assert_ne!(bits(&conv(&x, &w, Padding::Same, true)), bits(&conv(&x, &w, Padding::Same, false)));
    }
}

#[test]
fn winograd3_fused_bias_relu_matches_reference() {
    let (n, h, wd, c, o) = (2, 11, 10, 32, 48);
    let (x, w) = (Tensor::randn(&[n, h, wd, c], 1).unwrap(), Tensor::randn(&[3, 3, c, o], 2).unwrap());
    let bias = Tensor::randn(&[o], 3).unwrap();
    let mut g = Graph::new();
    let xi = g.input("x", DType::F32, x.shape().to_vec());
    let (wc, bc) = (g.constant(w.clone()), g.constant(bias.clone()));
    let y = g.conv2d(xi, wc, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() }).unwrap();
    let y = g.bias_add(y, bc).unwrap();
    let y = g.relu(y).unwrap();
    let run = |winograd: bool| {
        let mut s = Session::with_options(&g, &[y], opts(winograd)).unwrap();
        s.run(&[(xi, x.clone())]).unwrap().remove(0)
    };
    let (fast, plain) = (run(true), run(false));
    let (conv_ref, mag, _) = reference(&x, &w, Padding::Same);
    let bv = bias.to_f64_vec();
    let want: Vec<f64> = conv_ref.iter().enumerate().map(|(i, v)| (v + bv[i % o]).max(0.0)).collect();
    let mag: Vec<f64> = mag.iter().enumerate().map(|(i, m)| m + bv[i % o].abs()).collect();
    let got = fast.to_f64_vec();
    assert!(got.contains(&0.0) && got.iter().any(|&v| v > 0.0), "relu clipped some outputs");
    let ef = worst(&fast, &want, &mag);
    assert!(ef <= REL_BOUND, "winograd + bias + relu error {ef:e}");
    if winograd_cpu() {
        assert_ne!(bits(&fast), bits(&plain), "the Winograd kernel did not run");
    }
}

#[test]
fn winograd3_propagates_nan_handles_n0_and_odd_channels() {
    let w = Tensor::randn(&[3, 3, 16, 32], 3).unwrap();
    let mut xv = Tensor::randn(&[2, 9, 9, 16], 4).unwrap().to_array::<f32>().unwrap();
    // a NaN at (image 1, row 3, col 4, channel 5) reaches every output whose window covers
    // it, and (on the Winograd path) may reach the other outputs of a 4x4 tile whose 6x6
    // input tile holds it, never any other output
    xv[[1, 3, 4, 5]] = f32::NAN;
    let y = conv(&Tensor::from_array(xv), &w, Padding::Same, true).to_array::<f32>().unwrap();
    // tile t's input rows (columns) are 4t - 1 .. 4t + 5 (SAME: one row of padding)
    let in_tile = |o: usize, at: i64| (4 * (o / 4) as i64 - 1..4 * (o / 4) as i64 + 5).contains(&at);
    for ((b, oy, ox, _), v) in y.indexed_iter().map(|(ix, v)| ((ix[0], ix[1], ix[2], ix[3]), *v)) {
        let covers = b == 1 && (3 - oy as i64).abs() <= 1 && (4 - ox as i64).abs() <= 1;
        let tile = b == 1 && in_tile(oy, 3) && in_tile(ox, 4);
        assert!(!covers || v.is_nan(), "output ({b}, {oy}, {ox}) {v}");
        assert!(tile || !v.is_nan(), "output ({b}, {oy}, {ox}) {v}");
    }
    let empty = conv(&Tensor::zeros(DType::F32, &[0, 9, 9, 16]).unwrap(), &w, Padding::Same, true);
    assert_eq!(empty.shape(), [0, 9, 9, 32]);
    // channels that are not multiples of 16: the im2col path, same bits either way
    let (x, w) = (Tensor::randn(&[2, 12, 12, 24], 5).unwrap(), Tensor::randn(&[3, 3, 24, 40], 6).unwrap());
    let (want, mag, _) = reference(&x, &w, Padding::Same);
    let fast = conv(&x, &w, Padding::Same, true);
    assert!(worst(&fast, &want, &mag) <= REL_BOUND / 4.0);
    assert_eq!(bits(&fast), bits(&conv(&x, &w, Padding::Same, false)));
}

#[test]
fn winograd3_filter_transform_follows_the_filter_values() {
    // the filter is fed: every run gets new values, often in a buffer of a previous run's
    // address; the kept transform must never stand in for another filter's
    let (n, h, wd, c, o) = (2, 12, 12, 16, 32);
    let mut g = Graph::new();
    let xi = g.input("x", DType::F32, [n, h, wd, c]);
    let wi = g.input("w", DType::F32, [3, 3, c, o]);
    let y = g.conv2d(xi, wi, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() }).unwrap();
    let mut s = Session::with_options(&g, &[y], opts(true)).unwrap();
    let x = Tensor::randn(&[n, h, wd, c], 7).unwrap();
    for seed in 0..4 {
        let w = Tensor::randn(&[3, 3, c, o], 70 + seed).unwrap();
        let got = s.run(&[(xi, x.clone()), (wi, w.clone())]).unwrap().remove(0);
        let (want, mag, _) = reference(&x, &w, Padding::Same);
        let e = worst(&got, &want, &mag);
        assert!(e <= REL_BOUND, "run {seed}: error {e:e}");
        drop(w);
        // the same values twice in a row: the same bits (a cache hit or not)
        let w = Tensor::randn(&[3, 3, c, o], 70 + seed).unwrap();
        let again = s.run(&[(xi, x.clone()), (wi, w)]).unwrap().remove(0);
        assert_eq!(bits(&got), bits(&again), "run {seed}");
    }
}

#[test]
fn winograd3_constant_filter_is_transformed_when_the_plan_compiles() {
    // A constant filter: the plan holds its transform (made once, at compile time) and no run
    // transforms it; a fed filter with the same values is transformed on every run (nothing
    // kept between runs) and gives the same bits. With and without a fused `bias → relu`.
    let count = pfor::kernels::winograd_filter_transforms;
    let (n, h, wd, c, o) = (2, 12, 12, 16, 32);
    let x = Tensor::randn(&[n, h, wd, c], 5).unwrap();
    let w = Tensor::randn(&[3, 3, c, o], 6).unwrap();
    let b = Tensor::randn(&[o], 7).unwrap();
    let expect = |k: u64| if winograd_cpu() { k } else { 0 };
    for epilogue in [false, true] {
        let mut g = Graph::new();
        let xi = g.input("x", DType::F32, [n, h, wd, c]);
        let (wc, wi) = (g.constant(w.clone()), g.input("w", DType::F32, [3, 3, c, o]));
        let params = Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() };
        let (mut yc, mut yi) = (g.conv2d(xi, wc, params).unwrap(), g.conv2d(xi, wi, params).unwrap());
        if epilogue {
            let bc = g.constant(b.clone());
            yc = g.bias_add(yc, bc).unwrap();
            yc = g.relu(yc).unwrap();
            yi = g.bias_add(yi, bc).unwrap();
            yi = g.relu(yi).unwrap();
        }
        let before = count();
        let mut constant = Session::with_options(&g, &[yc], opts(true)).unwrap();
        assert_eq!(count() - before, expect(1), "epilogue {epilogue}: one transform, at compile time");
        let mut fed = Session::with_options(&g, &[yi], opts(true)).unwrap();
        let mut first = None;
        for run in 0..3 {
            let before = count();
            let got = constant.run(&[(xi, x.clone())]).unwrap().remove(0);
            assert_eq!(count(), before, "epilogue {epilogue}, run {run}: no transform");
            let again = fed.run(&[(xi, x.clone()), (wi, w.clone())]).unwrap().remove(0);
            assert_eq!(count() - before, expect(1), "epilogue {epilogue}, run {run}: a fed filter, every run");
            assert_eq!(bits(&got), bits(&again), "epilogue {epilogue}, run {run}");
            first.get_or_insert_with(|| bits(&got));
            assert_eq!(first.as_ref(), Some(&bits(&got)));
        }
    }
}
