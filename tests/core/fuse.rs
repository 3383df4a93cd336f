//! Core tests: plan-level fusion of `conv2d → [reshape] → bias_add → [reshape] → add(residual)
//! → relu` (fused results bit-identical to the unfused plan; fetched or shared intermediates
//! and mismatched operands disable it or fall back with the unfused errors).

use pfor::ops::conv::{Conv2dParams, Padding};
use pfor::prelude::*;

fn unfused() -> ExecOptions {
    ExecOptions { fuse: false, ..ExecOptions::default() }
}

/// Bit patterns (so NaN == NaN and -0.0 != 0.0).
pub(super) fn bits(t: &Tensor) -> (Vec<usize>, Vec<u64>) {
    let v: Vec<u64> = match t.dtype() {
        DType::F32 => t.to_array::<f32>().unwrap().iter().map(|v| v.to_bits() as u64).collect(),
        DType::F64 => t.to_array::<f64>().unwrap().iter().map(|v| v.to_bits()).collect(),
        d => panic!("unexpected dtype {d}"),
    };
    (t.shape().to_vec(), v)
}

pub(super) fn rand(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    match dtype {
        DType::F64 => Tensor::randn_f64(shape, seed).unwrap(),
        _ => Tensor::randn(shape, seed).unwrap(),
    }
}

/// How the bias reaches the `bias_add`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bias {
    None,
    Const,
    Fed,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    nhwc: [usize; 4],
    k: [usize; 2],
    o: usize,
    s: [usize; 2],
    d: [usize; 2],
    pad: Padding,
    bias: Bias,
    relu: bool,
    /// Reshape the conv output to `[N*OH, OW, O]` before the bias and flatten before relu.
    reshapes: bool,
    /// A 2x2 stride-2 VALID `max_pool` after relu (the flattened value reshaped back first).
    pool: bool,
}

/// Build the chain, run it fused and unfused, and return (fused steps, unfused steps).
fn check(case: Case, dtype: DType, seed: u64) -> (usize, usize) {
    let Case { nhwc, k, o, s, d, pad, bias, relu, reshapes, pool } = case;
    let mut g = Graph::new();
    let x = g.input("x", dtype, nhwc);
    let w = g.constant(rand(dtype, &[k[0], k[1], nhwc[3], o], seed + 1));
    let b_val = rand(dtype, &[o], seed + 2);
    let params = Conv2dParams { strides: s, padding: pad, dilations: d };
    let mut h = g.conv2d(x, w, params).unwrap();
    let conv_shape: Vec<usize> =
        g.value_type(h).unwrap().shape.as_fixed().expect("static shapes in this test").to_vec();
    if reshapes {
        h = g.reshape(h, &[(conv_shape[0] * conv_shape[1]) as i64, conv_shape[2] as i64, o as i64]).unwrap();
    }
    let mut feeds_b = None;
    match bias {
        Bias::None => {}
        Bias::Const => {
            let b = g.constant(b_val.clone());
            h = g.bias_add(h, b).unwrap();
        }
        Bias::Fed => {
            let b = g.input("b", dtype, [Dim::dynamic("o")]);
            feeds_b = Some((b, b_val.clone()));
            h = g.bias_add(h, b).unwrap();
        }
    }
    if reshapes {
        h = g.reshape(h, &[-1]).unwrap();
    }
    if relu {
        h = g.relu(h).unwrap();
    }
    if pool {
        if reshapes {
            let back: Vec<i64> = conv_shape.iter().map(|&v| v as i64).collect();
            h = g.reshape(h, &back).unwrap();
        }
        h = g.max_pool(h, [2, 2], [2, 2], Padding::Valid).unwrap();
    }
    let mut xv = rand(dtype, &nhwc, seed);
    if xv.len() > 3 {
        // A NaN must propagate through bias and relu identically.
        let mut a = xv.to_array::<f64>().ok();
        if let Some(a) = a.as_mut() {
            a.as_slice_mut().unwrap()[xv.len() / 2] = f64::NAN;
            xv = Tensor::from_array(a.clone());
        } else {
            let mut a = xv.to_array::<f32>().unwrap();
            a.as_slice_mut().unwrap()[xv.len() / 2] = f32::NAN;
            xv = Tensor::from_array(a);
        }
    }
    let mut feeds = vec![(x, xv)];
    feeds.extend(feeds_b);
    let mut fused = Session::new(&g, &[h]).unwrap();
    let mut plain = Session::with_options(&g, &[h], unfused()).unwrap();
    let got = fused.run(&feeds).unwrap_or_else(|e| panic!("{case:?} {dtype}: {e}"));
    let want = plain.run(&feeds).unwrap();
    assert_eq!(bits(&got[0]), bits(&want[0]), "{case:?} {dtype}");
    (fused.num_steps(), plain.num_steps())
}

fn base(nhwc: [usize; 4], k: [usize; 2], o: usize) -> Case {
    Case {
        nhwc,
        k,
        o,
        s: [1, 1],
        d: [1, 1],
        pad: Padding::Same,
        bias: Bias::Const,
        relu: true,
        reshapes: false,
        pool: false,
    }
}

#[test]
fn fused_conv_chains_are_bit_identical_to_unfused() {
    let cases = [
        base([2, 7, 9, 3], [3, 3], 5),
        Case { s: [2, 1], pad: Padding::Valid, ..base([2, 9, 8, 4], [3, 2], 6) },
        Case { s: [2, 3], d: [2, 1], ..base([3, 11, 10, 2], [3, 3], 4) },
        // single-channel input (transposed patch path), MNIST conv1-like
        base([3, 12, 12, 1], [5, 5], 8),
        // single channel, 32/64 outputs: the direct kernel on AVX-512 CPUs (a NaN input
        // and negative sums go through its in-register bias + relu); a partial pixel tile
        base([3, 12, 12, 1], [5, 5], 32),
        Case { s: [2, 1], d: [1, 2], pad: Padding::Valid, ..base([2, 11, 13, 1], [3, 3], 64) },
        // 3 channels, stride 2, 64 outputs: the direct kernel too (SqueezeNet's first layer)
        Case { s: [2, 2], pad: Padding::Valid, ..base([1, 15, 15, 3], [3, 3], 64) },
        // 1x1 stride 1: the input is the patch matrix
        Case { pad: Padding::Valid, ..base([2, 5, 6, 7], [1, 1], 9) },
        // parallel chunks (rows*K*O above the GEMM parallel threshold)
        base([4, 16, 16, 8], [3, 3], 32),
        // wide layer: chunks in order, parallel GEMM
        base([1, 8, 8, 64], [3, 3], 128),
        // 5x5, channels multiples of 16: Winograd on AVX-512 CPUs (even and odd outputs)
        base([2, 10, 10, 16], [5, 5], 32),
        Case { pad: Padding::Valid, ..base([2, 11, 10, 16], [5, 5], 16) },
        // 3x3, channels multiples of 16: Winograd F(4x4, 3x3) (tiles over the edges)
        base([2, 10, 11, 16], [3, 3], 32),
        // n = 0 and n = 1
        base([0, 6, 6, 2], [3, 3], 3),
        base([1, 6, 6, 2], [3, 3], 3),
    ];
    let variants = [
        (Bias::Const, true, false),
        (Bias::Fed, true, true),
        (Bias::Const, false, true),
        (Bias::None, true, false),
        (Bias::None, true, true),
    ];
    for (i, &c) in cases.iter().enumerate() {
        for (j, &(bias, relu, reshapes)) in variants.iter().enumerate() {
            for dtype in [DType::F32, DType::F64] {
                let case = Case { bias, relu, reshapes, ..c };
                let (f, p) = check(case, dtype, (100 * i + 10 * j) as u64);
                // conv + bias_add + relu + 2 reshapes collapse to one step.
                let chain = 1 + usize::from(bias != Bias::None) + usize::from(relu) + 2 * usize::from(reshapes);
                // A trailing reshape after the last fused op stays its own step.
                let trailing = usize::from(reshapes && !relu);
                assert_eq!(p - f, chain - 1 - trailing, "{case:?} {dtype}: {f} fused vs {p} unfused steps");
            }
        }
    }
}

#[test]
fn fused_conv_pool_chains_are_bit_identical_to_unfused() {
    let pool = |c: Case| Case { pool: true, ..c };
    let cases = [
        // single channel, 32/64 outputs: conv, epilogue and pool in one kernel on AVX-512
        pool(base([3, 12, 12, 1], [5, 5], 32)),
        // odd conv output (9 x 11): the last row and column are not pooled
        pool(Case { pad: Padding::Valid, ..base([2, 11, 13, 1], [3, 3], 64) }),
        // several channels: the conv kernel, then the pool op, in the same step
        pool(base([2, 8, 8, 3], [3, 3], 16)),
        // 3 channels, 32 outputs: the direct kernel pools in cache
        pool(base([2, 8, 10, 3], [3, 3], 32)),
        // Winograd: an output tile is one pooling window; odd outputs pool after the conv
        pool(base([2, 10, 10, 16], [5, 5], 32)),
        pool(base([2, 9, 11, 16], [5, 5], 16)),
        // F(4x4, 3x3): a tile is four pooling windows (two where it hangs over the edge)
        pool(base([2, 10, 12, 16], [3, 3], 32)),
        pool(base([0, 6, 6, 16], [5, 5], 16)),
        pool(base([0, 6, 6, 1], [3, 3], 32)),
        pool(base([1, 6, 6, 1], [3, 3], 32)),
    ];
    let variants = [(Bias::Const, false), (Bias::Fed, true), (Bias::None, false)];
    for (i, &c) in cases.iter().enumerate() {
        for (j, &(bias, reshapes)) in variants.iter().enumerate() {
            for dtype in [DType::F32, DType::F64] {
                let case = Case { bias, reshapes, ..c };
                let (f, p) = check(case, dtype, (200 + 100 * i + 10 * j) as u64);
                // conv, bias_add, relu, max_pool and the 3 reshapes collapse to one step
                let chain = 3 + usize::from(bias != Bias::None) + 3 * usize::from(reshapes);
                assert_eq!(p - f, chain - 1, "{case:?} {dtype}: {f} fused vs {p} unfused steps");
            }
        }
    }
}

/// A small conv → bias_add → relu graph: (graph, x, conv, biased, relu).
fn small_chain() -> (Graph, ValueId, ValueId, ValueId, ValueId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 6, 5, 3]);
    let w = g.constant(Tensor::randn(&[3, 3, 3, 4], 7).unwrap());
    let b = g.constant(Tensor::randn(&[4], 8).unwrap());
    let c = g.conv2d(x, w, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() }).unwrap();
    let y = g.bias_add(c, b).unwrap();
    let r = g.relu(y).unwrap();
    (g, x, c, y, r)
}

#[test]
fn fetched_or_shared_intermediates_are_not_fused_away() {
    let (mut g, x, c, y, r) = small_chain();
    let xv = Tensor::randn(&[2, 6, 5, 3], 9).unwrap();
    let feeds = [(x, xv.clone())];
    let reference = Session::with_options(&g, &[c, y, r], unfused()).unwrap().run(&feeds).unwrap();
    // Fully fusable: 4 steps (input, 2 consts, fused) instead of 6.
    let s = Session::new(&g, &[r]).unwrap();
    assert_eq!(s.num_steps(), 4);
    // Fetching the conv output: the conv chain cannot start there; bias_add and relu still
    // fuse as an elementwise group.
    let mut s = Session::new(&g, &[r, c]).unwrap();
    assert_eq!(s.num_steps(), 5);
    let out = s.run(&feeds).unwrap();
    assert_eq!(bits(&out[0]), bits(&reference[2]));
    assert_eq!(bits(&out[1]), bits(&reference[0]));
    // Fetching the bias_add output: conv + bias fuse, relu stays separate.
    let mut s = Session::new(&g, &[r, y]).unwrap();
    assert_eq!(s.num_steps(), 5);
    let out = s.run(&feeds).unwrap();
    assert_eq!(bits(&out[0]), bits(&reference[2]));
    assert_eq!(bits(&out[1]), bits(&reference[1]));
    // A second consumer of the biased value: the relu is not fused, the other reader sees
    // the pre-relu values.
    let e = g.exp(y).unwrap();
    let mut s = Session::new(&g, &[r, e]).unwrap();
    assert_eq!(s.num_steps(), 6);
    let out = s.run(&feeds).unwrap();
    let want_e = Session::with_options(&g, &[e], unfused()).unwrap().run(&feeds).unwrap();
    assert_eq!(bits(&out[0]), bits(&reference[2]));
    assert_eq!(bits(&out[1]), bits(&want_e[0]));
    // The relu output must have no negatives and equal max(y, 0) elementwise.
    let (yv, rv) = (reference[1].to_array::<f32>().unwrap(), reference[2].to_array::<f32>().unwrap());
    for (a, b) in yv.iter().zip(rv.iter()) {
        assert_eq!(*b, if *a > 0.0 { *a } else { 0.0 });
    }
}

#[test]
fn fused_chain_with_a_bad_bias_reports_the_unfused_error() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [1, 4, 4, 2]);
    let b = g.input("b", DType::F32, [Dim::dynamic("o")]);
    let w = g.constant(Tensor::randn(&[3, 3, 2, 3], 1).unwrap());
    let c = g.conv2d(x, w, Conv2dParams::default()).unwrap();
    let y = g.bias_add(c, b).unwrap();
    let r = g.relu(y).unwrap();
    let feeds = [(x, Tensor::randn(&[1, 4, 4, 2], 2).unwrap()), (b, Tensor::randn(&[4], 3).unwrap())];
    let mut fused = Session::new(&g, &[r]).unwrap();
    assert!(fused.num_steps() < Session::with_options(&g, &[r], unfused()).unwrap().num_steps());
    let got = fused.run(&feeds).unwrap_err();
    let want = Session::with_options(&g, &[r], unfused()).unwrap().run(&feeds).unwrap_err();
    assert_eq!(got.to_string(), want.to_string());
    assert!(got.to_string().contains("bias_add"), "{got}");
    assert!(matches!(&got, Error::AtNode { node, .. } if *node == y.node), "{got:?}");
}

#[test]
fn fusion_inside_functions_matches() {
    // Function bodies compile their own (fused) plans; a loop of conv layers agrees with
    // the unfused top-level evaluation of the same layer.
    let (g, x, _c, _y, r) = small_chain();
    let xv = Tensor::randn(&[2, 6, 5, 3], 4).unwrap();
    let f = pfor::ir::Function::from_parts(g.clone(), vec![x], vec![r]).unwrap();
    let got = pfor::run_function(&f, vec![xv.clone()]).unwrap();
    let want = Session::with_options(&g, &[r], unfused()).unwrap().run(&[(x, xv)]).unwrap();
    assert_eq!(bits(&got[0]), bits(&want[0]));
}

/// How a residual `add` follows the conv chain in [`residual_chain`].
#[derive(Clone, Copy, Debug)]
struct Residual {
    bias: bool,
    relu: bool,
    /// The residual is the add's first operand.
    first: bool,
    /// Reshape the conv output to `[N*OH, OW, O]` before the bias and the add, flatten after.
    reshapes: bool,
}

/// `relu(add(bias_add(conv(x, w), b), r))` (each part as `v` says) run fused and unfused
/// (bit-identical results); returns (fused steps, unfused steps).
fn residual_chain(nhwc: [usize; 4], k: [usize; 2], o: usize, v: Residual, dtype: DType, seed: u64) -> (usize, usize) {
    let mut g = Graph::new();
    let x = g.input("x", dtype, nhwc);
    let w = g.constant(rand(dtype, &[k[0], k[1], nhwc[3], o], seed + 1));
    let params = Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() };
    let mut h = g.conv2d(x, w, params).unwrap();
    let shape: Vec<usize> = g.value_type(h).unwrap().shape.as_fixed().unwrap().to_vec();
    let mut r_shape = shape.clone();
    if v.reshapes {
        r_shape = vec![shape[0] * shape[1], shape[2], o];
        h = g.reshape(h, &r_shape.iter().map(|&d| d as i64).collect::<Vec<_>>()).unwrap();
    }
    if v.bias {
        let b = g.constant(rand(dtype, &[o], seed + 2));
        h = g.bias_add(h, b).unwrap();
    }
    let r = g.input("r", dtype, r_shape.as_slice());
    h = if v.first { g.add(r, h).unwrap() } else { g.add(h, r).unwrap() };
    if v.reshapes {
        h = g.reshape(h, &[-1]).unwrap();
    }
    if v.relu {
        h = g.relu(h).unwrap();
    }
    let mut rv = rand(dtype, &r_shape, seed + 3);
    if rv.len() > 2 {
        // a NaN residual propagates through the add and the relu identically
        let mut a = rv.cast(DType::F64).to_array::<f64>().unwrap();
        a.as_slice_mut().unwrap()[1] = f64::NAN;
        rv = Tensor::from_array(a).cast(dtype);
    }
    let feeds = [(x, rand(dtype, &nhwc, seed)), (r, rv)];
    let mut fused = Session::new(&g, &[h]).unwrap();
    let mut plain = Session::with_options(&g, &[h], unfused()).unwrap();
    let got = fused.run(&feeds).unwrap_or_else(|e| panic!("{nhwc:?} {k:?} {o} {v:?} {dtype}: {e}"));
    let want = plain.run(&feeds).unwrap();
    assert_eq!(bits(&got[0]), bits(&want[0]), "{nhwc:?} {k:?} {o} {v:?} {dtype}");
    (fused.num_steps(), plain.num_steps())
}

#[test]
fn fused_residual_adds_are_bit_identical_to_unfused() {
    let cases: [([usize; 4], [usize; 2], usize); 9] = [
        // im2col, odd shapes
        ([2, 7, 9, 3], [3, 3], 5),
        // 1x1 stride 1 (ResNet's bottleneck end): the input rows are the patch matrix
        ([2, 5, 6, 16], [1, 1], 32),
        // parallel chunks
        ([4, 16, 16, 8], [3, 3], 32),
        // wide layer: chunks in order, parallel GEMM
        ([1, 8, 8, 64], [3, 3], 128),
        // Winograd F(4x4, 3x3) and F(2x2, 5x5) on AVX-512 CPUs (tiles over the edges)
        ([2, 10, 11, 16], [3, 3], 32),
        ([2, 10, 10, 16], [5, 5], 16),
        // single channel (the direct kernel declines a residual)
        ([3, 12, 12, 1], [5, 5], 32),
        // n = 0 and n = 1
        ([0, 6, 6, 2], [3, 3], 3),
        ([1, 6, 6, 2], [3, 3], 3),
    ];
    let variants = [
        Residual { bias: true, relu: true, first: false, reshapes: false },
        Residual { bias: true, relu: true, first: true, reshapes: true },
        Residual { bias: false, relu: true, first: true, reshapes: false },
        Residual { bias: true, relu: false, first: false, reshapes: false },
        Residual { bias: false, relu: false, first: false, reshapes: true },
    ];
    for (i, &(nhwc, k, o)) in cases.iter().enumerate() {
        for (j, &v) in variants.iter().enumerate() {
            for dtype in [DType::F32, DType::F64] {
                let (f, p) = residual_chain(nhwc, k, o, v, dtype, (300 + 100 * i + 10 * j) as u64);
                // conv, bias_add, add, relu and the reshapes collapse to one step (a trailing
                // reshape after the last fused op stays its own step)
                let chain = 2
                    + usize::from(v.bias)
                    + usize::from(v.relu)
                    + usize::from(v.reshapes)
                    + usize::from(v.reshapes && v.relu);
                assert_eq!(p - f, chain - 1, "{nhwc:?} {k:?} {o} {v:?} {dtype}: {f} fused vs {p} unfused steps");
            }
        }
    }
}

#[test]
fn broadcasting_or_self_adds_are_not_fused_as_residuals() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 6, 5, 3]);
    let w = g.constant(Tensor::randn(&[3, 3, 3, 4], 7).unwrap());
    let c = g.conv2d(x, w, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() }).unwrap();
    // a broadcast `[4]` operand and the chain's own value are not residuals
    let small = g.input("s", DType::F32, [4]);
    let a = g.add(c, small).unwrap();
    let twice = g.add(a, a).unwrap();
    let y = g.relu(twice).unwrap();
    let feeds = [(x, Tensor::randn(&[2, 6, 5, 3], 9).unwrap()), (small, Tensor::randn(&[4], 10).unwrap())];
    let mut fused = Session::new(&g, &[y]).unwrap();
    let want = Session::with_options(&g, &[y], unfused()).unwrap().run(&feeds).unwrap();
    assert_eq!(bits(&fused.run(&feeds).unwrap()[0]), bits(&want[0]));
}

#[test]
fn fused_residual_with_a_bad_residual_reports_the_unfused_error() {
    // a residual fed with another shape or dtype than its input's: the unfused error (the
    // fused step's run-time check falls back to op by op where the feed check lets one in)
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [1, 4, 4, 2]);
    let r = g.input("r", DType::F32, [1, 4, 4, 3]);
    let w = g.constant(Tensor::randn(&[3, 3, 2, 3], 1).unwrap());
    let c = g.conv2d(x, w, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() }).unwrap();
    let y = g.add(c, r).unwrap();
    let z = g.relu(y).unwrap();
    let mut fused = Session::new(&g, &[z]).unwrap();
    assert_eq!(fused.num_steps() + 2, Session::with_options(&g, &[z], unfused()).unwrap().num_steps());
    for bad in [Tensor::randn(&[1, 4, 4, 2], 3).unwrap(), Tensor::randn(&[1, 4, 4, 3], 3).unwrap().cast(DType::F64)] {
        let feeds = [(x, Tensor::randn(&[1, 4, 4, 2], 2).unwrap()), (r, bad)];
        let got = fused.run(&feeds).unwrap_err();
        let want = Session::with_options(&g, &[z], unfused()).unwrap().run(&feeds).unwrap_err();
        assert_eq!(got.to_string(), want.to_string());
    }
}

#[test]
fn vectorized_residual_blocks_fuse_and_match_the_loop() {
    // A bottleneck's end, per example: relu(bias_add(conv1x1(h)) + x), under pfor (the conv
    // runs on the batch, the add on `[n, ...]` values) fused like the plain graph.
    let run = |n: usize, fuse: bool| {
        let mut g = Graph::new();
        let xs = g.input("xs", DType::F32, [n, 1, 5, 6, 16]);
        let w = g.constant(Tensor::randn(&[1, 1, 16, 16], 1).unwrap());
        let b = g.constant(Tensor::randn(&[16], 2).unwrap());
        let ys = pfor::api::vectorized_map(
            &mut g,
            |g, x| {
                let c = g.conv2d(x[0], w, Conv2dParams::default())?;
                let c = g.bias_add(c, b)?;
                let s = g.add(c, x[0])?;
                Ok(vec![g.relu(s)?])
            },
            &[xs],
        )
        .unwrap();
        let opts = ExecOptions { fuse, ..ExecOptions::default() };
        let mut s = Session::with_options(&g, &ys, opts).unwrap();
        let xv = Tensor::randn(&[n, 1, 5, 6, 16], 3).unwrap();
        (s.run(&[(xs, xv)]).unwrap().remove(0), s.num_steps())
    };
    for n in [0, 1, 3] {
        let ((got, f), (want, p)) = (run(n, true), run(n, false));
        assert_eq!(bits(&got), bits(&want), "n = {n}");
        // the conv, the bias_add, the add, the relu and a reshape between run as one step;
        // at n = 1 pfor emits the per-example body itself (the one-row form: no reshape)
        let saved = if n == 1 { 3 } else { 4 };
        assert_eq!(p - f, saved, "n = {n}: {f} fused vs {p} unfused steps");
    }
}

#[test]
fn an_add_of_two_conv_chains_is_fused_into_one_of_them() {
    // ResNet's projection shortcut: relu(bias_add(conv(x, w1), b1) + bias_add(conv(x, w2), b2)):
    // each side is a conv chain that could take the add; exactly one does, the other's
    // result is its residual
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 6, 5, 16]);
    let mut side = |seed: u64| {
        let w = g.constant(Tensor::randn(&[1, 1, 16, 32], seed).unwrap());
        let b = g.constant(Tensor::randn(&[32], seed + 1).unwrap());
        let c = g.conv2d(x, w, Conv2dParams::default()).unwrap();
        g.bias_add(c, b).unwrap()
    };
    let (a, b) = (side(1), side(3));
    let s = g.add(a, b).unwrap();
    let y = g.relu(s).unwrap();
    let feeds = [(x, Tensor::randn(&[2, 6, 5, 16], 9).unwrap())];
    let mut fused = Session::new(&g, &[y]).unwrap();
    let mut plain = Session::with_options(&g, &[y], unfused()).unwrap();
    assert_eq!(bits(&fused.run(&feeds).unwrap()[0]), bits(&plain.run(&feeds).unwrap()[0]));
    // conv, bias_add, add, relu and conv, bias_add: two steps
    assert_eq!(plain.num_steps() - fused.num_steps(), 4);
}

#[test]
fn vectorized_conv_pool_chains_fuse_at_a_dynamic_batch() {
    // W2's conv block per example (expand_dims, conv, bias_add, relu, max_pool) under
    // `vectorized_map` over a dynamic batch: the conv output is `[?, 1, H, W, C]` and the pool
    // reads it reshaped back to `[?, H, W, C]`; the pool joins the fused step as it does at a
    // static batch (equal fixed trailing dims force an equal batch), and the values equal the
    // unfused plan's.
    let build = |batch: Dim| {
        let mut g = Graph::new();
        let xs = g.input("xs", DType::F32, [batch, Dim::fixed(12), Dim::fixed(10), Dim::fixed(1)]);
        let w = g.constant(Tensor::randn(&[5, 5, 1, 32], 1).unwrap());
        let b = g.constant(Tensor::randn(&[32], 2).unwrap());
        let ys = pfor::api::vectorized_map(
            &mut g,
            |g, x| {
                let x = g.expand_dims(x[0], 0)?;
                let c = g.conv2d(x, w, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() })?;
                let c = g.bias_add(c, b)?;
                let r = g.relu(c)?;
                Ok(vec![g.max_pool(r, [2, 2], [2, 2], Padding::Valid)?])
            },
            &[xs],
        )
        .unwrap();
        (Session::new(&g, &ys).unwrap(), Session::with_options(&g, &ys, unfused()).unwrap(), xs)
    };
    let (fixed, fixed_plain, _) = build(Dim::fixed(3));
    let (mut fused, mut plain, xs) = build(Dim::dynamic("n"));
    // the dynamic plan computes shapes at run time (more steps); fusion removes as many
    let saved = |f: &Session, p: &Session| p.num_steps() - f.num_steps();
    assert_eq!(saved(&fused, &plain), saved(&fixed, &fixed_plain), "the pool fuses as at a static batch");
    for n in [0, 1, 3] {
        let feeds = [(xs, Tensor::randn(&[n, 12, 10, 1], 3 + n as u64).unwrap())];
        let (got, want) = (fused.run(&feeds).unwrap(), plain.run(&feeds).unwrap());
        assert_eq!(got[0].shape(), [n, 1, 6, 5, 32]);
        assert_eq!(bits(&got[0]), bits(&want[0]), "n = {n}");
    }
}

#[test]
fn three_by_three_pools_join_the_conv_chain_and_run_by_images() {
    // SqueezeNet's VALID and ResNet's padded 3x3 stride-2 pools after conv → bias_add →
    // relu: the pool joins the fused step; over a conv output of several MiB (n = 7 here:
    // 1.6 MiB per image) the step runs the conv and the pool a group of images at a time.
    // The values equal the unfused plan's at every batch, incl. 0, 1 and a last group that
    // is not full.
    for padding in [Padding::Valid, Padding::Explicit([(1, 1), (1, 1)])] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(40), Dim::fixed(40), Dim::fixed(8)]);
        let w = g.constant(Tensor::randn(&[3, 3, 8, 256], 1).unwrap());
        let b = g.constant(Tensor::randn(&[256], 2).unwrap());
        let c = g.conv2d(x, w, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() }).unwrap();
        let c = g.bias_add(c, b).unwrap();
        let r = g.relu(c).unwrap();
        let y = g.max_pool(r, [3, 3], [2, 2], padding).unwrap();
        let (mut fused, mut plain) =
            (Session::new(&g, &[y]).unwrap(), Session::with_options(&g, &[y], unfused()).unwrap());
        assert_eq!(plain.num_steps() - fused.num_steps(), 3, "{padding}: bias_add, relu and max_pool join the conv");
        let side = if padding == Padding::Valid { 19 } else { 20 };
        for n in [0, 1, 2, 7] {
            let feeds = [(x, Tensor::randn(&[n, 40, 40, 8], 3 + n as u64).unwrap())];
            let (got, want) = (fused.run(&feeds).unwrap(), plain.run(&feeds).unwrap());
            assert_eq!(got[0].shape(), [n, side, side, 256]);
            assert_eq!(bits(&got[0]), bits(&want[0]), "{padding}, n = {n}");
        }
    }
}
