//! Core tests: plan-level fusion of `extract_patches → reshape → batch_matmul(adj_a)` (the
//! vectorized per-example conv filter gradient): results bit-identical to the unfused plan
//! (NaN and infinities in `dy` included) and close to an f64 reference, over strides,
//! dilations, paddings, channel counts that leave partial register blocks, several examples
//! per batch item; fetched patches are not fused away.

use pfor::ops::conv::{Conv2dParams, Padding};
use pfor::prelude::*;

fn unfused() -> ExecOptions {
    ExecOptions { fuse: false, ..ExecOptions::default() }
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_array::<f32>().unwrap().iter().map(|v| v.to_bits()).collect()
}

#[derive(Clone, Copy, Debug)]
struct Case {
    /// Batch items and examples per item.
    b: usize,
    e: usize,
    hwc: [usize; 3],
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pad: Padding,
    o: usize,
}

/// `(graph, x, dy, patches, product)` and the output size `[OH, OW]`.
fn build(c: Case) -> (Graph, ValueId, ValueId, ValueId, ValueId, [usize; 2]) {
    let [h, w, ch] = c.hwc;
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [c.b * c.e, h, w, ch]);
    let params = Conv2dParams { strides: c.s, padding: c.pad, dilations: c.d };
    let p = g.extract_patches(x, c.k, params).unwrap();
    let ps = g.shape(p).unwrap().as_fixed().unwrap();
    let (oh, ow) = (ps[1], ps[2]);
    let kc = c.k[0] * c.k[1] * ch;
    let rows = (c.e * oh * ow) as i64;
    let pr = g.reshape(p, &[c.b as i64, rows, kc as i64]).unwrap();
    let dy = g.input("dy", DType::F32, [c.b, c.e * oh * ow, c.o]);
    let y = g.batch_matmul_t(pr, dy, true, false).unwrap();
    (g, x, dy, p, y, [oh, ow])
}

/// `Σ_{e, oy, ox} x[tap window] · dy` in f64, and the same sum of magnitudes.
fn reference(c: Case, [oh, ow]: [usize; 2], x: &[f64], dy: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let [h, w, ch] = c.hwc;
    let kc = c.k[0] * c.k[1] * ch;
    let (pt, pl) = match c.pad {
        Padding::Valid => (0, 0),
        Padding::Same => {
            let span = |o: usize, s: usize, k: usize, d: usize, i: usize| {
                ((o - 1) * s + (k - 1) * d + 1).saturating_sub(i) / 2
            };
            (span(oh, c.s[0], c.k[0], c.d[0], h), span(ow, c.s[1], c.k[1], c.d[1], w))
        }
        Padding::Explicit([(t, _), (l, _)]) => (t, l),
    };
    let (mut want, mut mag) = (vec![0.0; c.b * kc * c.o], vec![0.0; c.b * kc * c.o]);
    for b in 0..c.b {
        for e in 0..c.e {
            let ex = b * c.e + e;
            for oy in 0..oh {
                for ox in 0..ow {
                    let row = (e * oh + oy) * ow + ox;
                    for ky in 0..c.k[0] {
                        for kx in 0..c.k[1] {
                            let iy = (oy * c.s[0] + ky * c.d[0]) as i64 - pt as i64;
                            let ix = (ox * c.s[1] + kx * c.d[1]) as i64 - pl as i64;
                            if iy < 0 || ix < 0 || iy as usize >= h || ix as usize >= w {
                                continue;
                            }
                            for ci in 0..ch {
                                let xv = x[((ex * h + iy as usize) * w + ix as usize) * ch + ci];
                                let m = (ky * c.k[1] + kx) * ch + ci;
                                for o in 0..c.o {
                                    let p = xv * dy[(b * c.e * oh * ow + row) * c.o + o];
                                    want[(b * kc + m) * c.o + o] += p;
                                    mag[(b * kc + m) * c.o + o] += p.abs();
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    (want, mag)
}

#[test]
fn fused_patch_products_are_bit_identical_to_unfused() {
    let base = Case { b: 4, e: 1, hwc: [14, 14, 32], k: [5, 5], s: [1, 1], d: [1, 1], pad: Padding::Same, o: 64 };
    let cases = [
        base,                                                                     // W4's second conv layer
        Case { hwc: [28, 28, 1], o: 32, ..base },                                 // W4's first: one channel
        Case { hwc: [9, 11, 5], o: 48, k: [3, 3], ..base },                       // partial channel block, 3 vectors
        Case { hwc: [10, 9, 12], o: 80, s: [2, 2], ..base },                      // strided, a partial column block
        Case { hwc: [11, 12, 6], o: 16, d: [2, 2], pad: Padding::Valid, ..base }, // dilated, VALID
        Case { b: 6, e: 2, hwc: [7, 6, 8], o: 32, k: [3, 2], s: [2, 1], ..base }, // 2 examples per item
        Case { b: 1, ..base },                                                    // too few items: unfused kernel
    ];
    for (i, c) in cases.into_iter().enumerate() {
        let (g, x, dy, _p, y, ohw) = build(c);
        let [h, w, ch] = c.hwc;
        let xv = Tensor::randn(&[c.b * c.e, h, w, ch], 10 + i as u64).unwrap();
        let mut dyv = Tensor::randn(&[c.b, c.e * ohw[0] * ohw[1], c.o], 20 + i as u64).unwrap();
        if i == 0 {
            // a NaN and an infinity in dy: the padded taps multiply them too (0 · inf = NaN)
            let mut v = dyv.to_array::<f32>().unwrap();
            v[[0, 0, 3]] = f32::NAN;
            v[[1, 5, 7]] = f32::INFINITY;
            dyv = Tensor::from_array(v.into_dyn());
        }
        let feeds = [(x, xv.clone()), (dy, dyv.clone())];
        let mut fused = Session::new(&g, &[y]).unwrap();
        let mut plain = Session::with_options(&g, &[y], unfused()).unwrap();
        assert!(fused.num_steps() < plain.num_steps(), "case {i}: not fused");
        let (got, want) = (fused.run(&feeds).unwrap().remove(0), plain.run(&feeds).unwrap().remove(0));
        assert_eq!(got.shape(), want.shape(), "case {i}");
        assert!(bits(&got) == bits(&want), "case {i}: fused and unfused results differ");
        if i > 0 {
            let (r, mag) = reference(c, ohw, &xv.to_f64_vec(), &dyv.to_f64_vec());
            for (j, ((g, r), m)) in got.to_f64_vec().iter().zip(&r).zip(&mag).enumerate() {
                assert!((g - r).abs() <= 1e-6 * m.max(1e-30), "case {i} at {j}: {g} vs {r} (Σ|.| {m})");
            }
        } else {
            let v = got.to_f64_vec();
            assert!(v.iter().any(|x| x.is_nan()) && v.iter().any(|x| x.is_finite()), "case 0: NaN reach");
        }
    }
}

#[test]
fn fetched_patches_are_not_fused_away() {
    let c = Case { b: 4, e: 1, hwc: [6, 6, 3], k: [3, 3], s: [1, 1], d: [1, 1], pad: Padding::Same, o: 16 };
    let (g, x, dy, p, y, ohw) = build(c);
    let feeds =
        [(x, Tensor::randn(&[4, 6, 6, 3], 1).unwrap()), (dy, Tensor::randn(&[4, ohw[0] * ohw[1], 16], 2).unwrap())];
    let want = Session::with_options(&g, &[y, p], unfused()).unwrap().run(&feeds).unwrap();
    let mut s = Session::new(&g, &[y, p]).unwrap();
    assert_eq!(s.num_steps(), Session::with_options(&g, &[y, p], unfused()).unwrap().num_steps());
    let got = s.run(&feeds).unwrap();
    assert!(bits(&got[0]) == bits(&want[0]) && bits(&got[1]) == bits(&want[1]));
}

#[test]
fn patch_products_the_kernel_does_not_take_run_unfused() {
    // (a) the patches reshaped to a rank-2 left operand that broadcasts over dy's items: the
    // product is [B, B*KC, O], not the per-example [B, KC, O]; also with a dynamic batch and a
    // -1 in the reshape (where a wrong fused shape would pass the type check)
    for dynamic in [false, true] {
        let mut g = Graph::new();
        let x = if dynamic {
            g.input("x", DType::F32, [Dim::dynamic("n"), Dim::from(6), Dim::from(6), Dim::from(3)])
        } else {
            g.input("x", DType::F32, [4, 6, 6, 3])
        };
        let p =
            g.extract_patches(x, [3, 3], Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() }).unwrap();
        let pr = g.reshape(p, &[36, -1]).unwrap();
        let dy = g.input("dy", DType::F32, [4, 36, 16]);
        let y = g.batch_matmul_t(pr, dy, true, false).unwrap();
        let feeds = [(x, Tensor::randn(&[4, 6, 6, 3], 1).unwrap()), (dy, Tensor::randn(&[4, 36, 16], 2).unwrap())];
        let want = Session::with_options(&g, &[y], unfused()).unwrap().run(&feeds).unwrap().remove(0);
        let got = Session::new(&g, &[y]).unwrap().run(&feeds).unwrap().remove(0);
        assert_eq!(want.shape(), [4, 108, 16]);
        assert_eq!(got.shape(), want.shape(), "dynamic={dynamic}");
        assert!(bits(&got) == bits(&want), "dynamic={dynamic}");
    }
    // (b) one output pixel per example: one row per item, an outer product (plain multiplies,
    // so a padded tap times a negative dy is -0, not an FMA's +0)
    let c = Case { b: 4, e: 1, hwc: [2, 2, 3], k: [3, 3], s: [1, 1], d: [1, 1], pad: Padding::Same, o: 16 };
    let c = Case { hwc: [1, 1, 3], ..c };
    let (g, x, dy, _p, y, ohw) = build(c);
    assert_eq!(ohw, [1, 1]);
    let feeds = [(x, Tensor::randn(&[4, 1, 1, 3], 3).unwrap()), (dy, Tensor::randn(&[4, 1, 16], 4).unwrap())];
    let want = Session::with_options(&g, &[y], unfused()).unwrap().run(&feeds).unwrap().remove(0);
    let got = Session::new(&g, &[y]).unwrap().run(&feeds).unwrap().remove(0);
    assert!(want.to_array::<f32>().unwrap().iter().any(|v| *v == 0.0 && v.is_sign_negative()), "no -0 to tell apart");
    assert!(bits(&got) == bits(&want), "one row per item");
}
