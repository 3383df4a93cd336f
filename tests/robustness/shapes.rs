//! Shapes at API edges: seeds and tangents must have their value's shape, and the feeds of
//! one run must agree on every named dim.

use pfor::autodiff::{gradients, jvp};
use pfor::prelude::*;
use pfor::vectorize::{Fallback, PforOptions, pfor_with};

use crate::common::f64t;

/// `y = 3 x` with `x` declared `[n]`.
fn tripled(g: &mut Graph, n: Dim) -> (ValueId, ValueId) {
    let x = g.input("x", DType::F64, [n]);
    let y = g.mul_scalar(x, 3.0).unwrap();
    (x, y)
}

#[test]
fn a_seed_of_the_wrong_fixed_shape_is_an_error_when_built() {
    let mut g = Graph::new();
    let (x, y) = tripled(&mut g, Dim::fixed(3));
    // [1] has y's rank and dtype but not its shape: it used to broadcast silently.
    let gy = g.constant(f64t(&[1], &[1.0]));
    let e = gradients(&mut g, &[y], &[x], Some(&[gy])).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("grad_ys[0] has type f64[1], but ys[0] has type f64[3]"), "{e}");
}

#[test]
fn a_seed_with_a_dynamic_dim_is_checked_when_run() {
    let mut g = Graph::new();
    let (x, y) = tripled(&mut g, Dim::unknown());
    let gy = g.input("gy", DType::F64, [Dim::unknown()]);
    let d = gradients(&mut g, &[y], &[x], Some(&[gy])).unwrap();
    let mut s = Session::new(&g, &d).unwrap();
    let xv = f64t(&[3], &[1.0, 2.0, 3.0]);
    let ok = s.run(&[(x, xv.clone()), (gy, f64t(&[3], &[1.0, 2.0, 3.0]))]).unwrap();
    assert_eq!(ok[0], f64t(&[3], &[3.0, 6.0, 9.0]));
    // A [1] seed for a [3] value: an error naming the check, not a broadcast [3, 3, 3].
    let e = s.run(&[(x, xv), (gy, f64t(&[1], &[1.0]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "match_shape"), "{e}");
    assert!(e.to_string().contains("[1] does not match [3]"), "{e}");
}

#[test]
fn a_provably_matching_seed_adds_no_check() {
    let mut g = Graph::new();
    let (x, y) = tripled(&mut g, Dim::dynamic("n"));
    let gy = g.input("gy", DType::F64, [Dim::dynamic("n")]);
    gradients(&mut g, &[y], &[x], Some(&[gy])).unwrap();
    let checks = g.node_ids().into_iter().filter(|n| g.node(*n).unwrap().op.name() == "match_shape").count();
    assert_eq!(checks, 0, "same named dim on both sides: equal by the feed check");
}

#[test]
fn a_tangent_of_the_wrong_shape_is_an_error() {
    let mut g = Graph::new();
    let (x, y) = tripled(&mut g, Dim::fixed(3));
    let t = g.constant(f64t(&[1], &[1.0]));
    let e = jvp(&mut g, &[y], &[x], &[t]).unwrap_err();
    assert!(e.to_string().contains("tangents[0] has type f64[1], but xs[0] has type f64[3]"), "{e}");
    // Dynamic: checked when run.
    let mut g = Graph::new();
    let (x, y) = tripled(&mut g, Dim::unknown());
    let t = g.input("t", DType::F64, [Dim::unknown()]);
    let d = jvp(&mut g, &[y], &[x], &[t]).unwrap();
    let e = run_once(&g, &d, &[(x, f64t(&[2], &[1.0, 2.0])), (t, f64t(&[1], &[1.0]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "match_shape"), "{e}");
}

#[test]
fn a_seed_checked_at_run_time_inside_pfor() {
    // Row i of the seeds weights the gradient of iteration i; the per-iteration seed [?] is
    // checked against y [?] by the vectorized check (a stacked seed, an unstacked value).
    let mut g = Graph::new();
    let (x, y) = tripled(&mut g, Dim::unknown());
    let seeds = g.input("seeds", DType::F64, [Dim::fixed(2), Dim::unknown()]);
    let opts = PforOptions { fallback: Fallback::Error, ..PforOptions::default() };
    let out = pfor_with(&mut g, 2, &opts, |g, i| {
        let gy = g.gather(seeds, i, 0)?;
        gradients(g, &[y], &[x], Some(&[gy]))
    })
    .unwrap();
    let xv = f64t(&[2], &[1.0, 2.0]);
    let got = run_once(&g, &out, &[(x, xv.clone()), (seeds, f64t(&[2, 2], &[1.0, 0.0, 0.0, 1.0]))]).unwrap();
    assert_eq!(got[0], f64t(&[2, 2], &[3.0, 0.0, 0.0, 3.0]));
    let e = run_once(&g, &out, &[(x, xv), (seeds, f64t(&[2, 1], &[1.0, 1.0]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "match_shape"), "{e}");
}

#[test]
fn named_dims_must_agree_across_the_feeds_of_a_run() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F64, [Dim::dynamic("n")]);
    let b = g.input("b", DType::F64, [Dim::dynamic("n"), Dim::fixed(1)]);
    let bt = g.reshape(b, &[-1]).unwrap();
    let s = g.add(a, bt).unwrap();
    let mut sess = Session::new(&g, &[s]).unwrap();
    let ok = sess.run(&[(a, f64t(&[2], &[1.0, 2.0])), (b, f64t(&[2, 1], &[10.0, 20.0]))]).unwrap();
    assert_eq!(ok[0], f64t(&[2], &[11.0, 22.0]));
    // 'n' = 3 in a but 1 in b: it used to broadcast b's row over a.
    let e = sess.run(&[(a, f64t(&[3], &[1.0, 2.0, 3.0])), (b, f64t(&[1, 1], &[10.0]))]).unwrap_err();
    assert!(matches!(&e, Error::Shape { op, .. } if op == "feed"), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("dim 'n' is 1 in input 'b'") && msg.contains("but 3 in input 'a'"), "{msg}");
}

#[test]
fn a_named_dim_may_repeat_within_one_input() {
    let mut g = Graph::new();
    let m = g.input("m", DType::F64, [Dim::dynamic("k"), Dim::dynamic("k")]);
    let t = g.transpose(m, &[1, 0]).unwrap();
    let mut sess = Session::new(&g, &[t]).unwrap();
    assert!(sess.run(&[(m, f64t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]))]).is_ok());
    let e = sess.run(&[(m, f64t(&[2, 1], &[1.0, 2.0]))]).unwrap_err();
    assert!(e.to_string().contains("dim 'k' is 1 in input 'm' [2, 1] but 2 in input 'm'"), "{e}");
}

/// Explicit conv pads that overflow, or that ask for an output no budget can hold, are
/// errors naming the op (at build or at run), never a panic or an abort.
#[test]
fn hostile_explicit_conv_pads_are_errors() {
    use pfor::ops::{Conv2dParams, Padding};
    for pads in [[(usize::MAX, 1), (0, 0)], [(0, 0), (1, usize::MAX)], [(1 << 40, 1 << 40), (1 << 40, 1 << 40)]] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [1, 4, 4, 2]);
        let w = g.input("w", DType::F32, [3, 3, 2, 2]);
        let params = Conv2dParams { padding: Padding::Explicit(pads), ..Conv2dParams::default() };
        let Ok(y) = g.conv2d(x, w, params) else { continue };
        let feeds = [
            (x, Tensor::zeros(DType::F32, &[1, 4, 4, 2]).unwrap()),
            (w, Tensor::zeros(DType::F32, &[3, 3, 2, 2]).unwrap()),
        ];
        let e = run_once(&g, &[y], &feeds).expect_err("a conv output beyond any budget");
        assert!(e.to_string().contains("conv2d") || matches!(e, Error::OutOfMemory { .. }), "{e}");
    }
}

#[test]
fn the_winograd_test_hook_refuses_shapes_whose_element_count_overflows() {
    use pfor::kernels::{WinogradSchedule, winograd_conv2d};
    // [huge, 2, 1, 16]: the input's and the output's element counts overflow usize; an
    // error naming the hook, not a wrapped length or an overflow panic.
    let e = winograd_conv2d(
        &[],
        [usize::MAX / 2, 2, 1, 16],
        &[0.0; 9 * 16 * 16],
        [3, 16],
        None,
        None,
        false,
        WinogradSchedule::Auto,
    )
    .unwrap_err();
    assert!(matches!(&e, Error::Shape { op, .. } if op == "winograd_conv2d"), "{e}");
    assert!(e.to_string().contains("overflows"), "{e}");
}

#[test]
fn a_fed_input_that_does_not_fit_a_planned_filter_is_an_error() {
    // the plan copies a constant 1x1 f32 filter `[1, 1, 16, 32]` into the in-place GEMM's
    // panels (or keeps it row-major off AVX-512); an input whose channels are dynamic and
    // fed as 8 must not reach a product over 16: an error naming the conv, no panic, no
    // value read past a buffer
    let mut g = Graph::new();
    let x =
        g.input("x", DType::F32, Shape::from_dims([Dim::fixed(1), Dim::fixed(4), Dim::fixed(4), Dim::dynamic("c")]));
    let w = g.constant(Tensor::randn(&[1, 1, 16, 32], 3).unwrap());
    let y = g.conv2d(x, w, pfor::ops::Conv2dParams::default()).unwrap();
    let y = g.relu(y).unwrap();
    let mut s = Session::new(&g, &[y]).unwrap();
    let e = s.run(&[(x, Tensor::zeros(DType::F32, &[1, 4, 4, 8]).unwrap())]).unwrap_err();
    assert!(e.to_string().contains("conv2d"), "{e}");
    // the right channel count runs, and the session keeps working after the error
    let ok = s.run(&[(x, Tensor::zeros(DType::F32, &[1, 4, 4, 16]).unwrap())]).unwrap();
    assert_eq!(ok[0].shape(), &[1, 4, 4, 32]);
}

#[test]
fn a_strided_conv_planned_for_the_implicit_gemm_refuses_a_misfitting_fed_input() {
    // a constant 3x3 stride-2 f32 filter over 32 channels is prepared in panels for the
    // implicit-GEMM kernel when the plan compiles; an input fed with 24 channels (dynamic in
    // the graph) is an error naming the conv, never a product over the planned 32
    let mut g = Graph::new();
    let x =
        g.input("x", DType::F32, Shape::from_dims([Dim::fixed(1), Dim::fixed(9), Dim::fixed(9), Dim::dynamic("c")]));
    let w = g.constant(Tensor::randn(&[3, 3, 32, 64], 4).unwrap());
    let p = pfor::ops::Conv2dParams { strides: [2, 2], padding: Padding::Same, ..Default::default() };
    let y = g.conv2d(x, w, p).unwrap();
    let y = g.relu(y).unwrap();
    let mut s = Session::new(&g, &[y]).unwrap();
    let e = s.run(&[(x, Tensor::zeros(DType::F32, &[1, 9, 9, 24]).unwrap())]).unwrap_err();
    assert!(e.to_string().contains("conv2d"), "{e}");
    let ok = s.run(&[(x, Tensor::zeros(DType::F32, &[1, 9, 9, 32]).unwrap())]).unwrap();
    assert_eq!(ok[0].shape(), &[1, 5, 5, 64]);
}

#[test]
fn a_fused_conv_pool_whose_window_does_not_fit_the_conv_output_is_an_error() {
    // conv (3 channels: the direct kernel, which pools VALID windows in-kernel) → relu →
    // 3x3 max pool, the image size dynamic: fed so small that the conv output (2x2) is
    // narrower than the pool's window, the run fails naming max_pool (the fused kernel
    // declines, the op reports), no panic; a size that fits runs as the unfused ops do
    let mut g = Graph::new();
    let hw = |g: &mut Graph| {
        g.input("x", DType::F32, Shape::from_dims([Dim::fixed(1), Dim::dynamic("h"), Dim::dynamic("w"), Dim::fixed(3)]))
    };
    let x = hw(&mut g);
    let w = g.constant(Tensor::randn(&[3, 3, 3, 32], 5).unwrap());
    let p = pfor::ops::Conv2dParams { strides: [2, 2], ..Default::default() };
    let y = g.conv2d(x, w, p).unwrap();
    let y = g.relu(y).unwrap();
    let y = g.max_pool(y, [3, 3], [2, 2], Padding::Valid).unwrap();
    let mut s = Session::new(&g, &[y]).unwrap();
    let e = s.run(&[(x, Tensor::randn(&[1, 5, 5, 3], 6).unwrap())]).unwrap_err();
    assert!(e.to_string().contains("max_pool"), "{e}");
    let feed = [(x, Tensor::randn(&[1, 23, 23, 3], 7).unwrap())];
    let fused = s.run(&feed).unwrap().remove(0);
    let opts = ExecOptions { fuse: false, ..ExecOptions::default() };
    let plain = Session::with_options(&g, &[y], opts).unwrap().run(&feed).unwrap().remove(0);
    assert_eq!(fused.shape(), &[1, 5, 5, 32]);
    assert_eq!(fused.to_f64_vec(), plain.to_f64_vec());
}

#[test]
fn transposed_copies_of_empty_and_channel_last_views_keep_their_shapes() {
    // The NCHW -> NHWC copy (row by row for 2-4 channels, split on the pool when large):
    // a zero-size axis gives an empty result of the permuted shape, never a panic.
    for dims in [[2, 3, 0, 4], [0, 3, 5, 5], [1, 2, 300, 300]] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, dims);
        let y = g.transpose(x, &[0, 2, 3, 1]).unwrap();
        let z = g.neg(y).unwrap();
        let t = Tensor::randn(&dims, 5).unwrap();
        let out = Session::new(&g, &[z]).unwrap().run(&[(x, t.clone())]).unwrap().remove(0);
        assert_eq!(out.shape(), &[dims[0], dims[2], dims[3], dims[1]][..], "{dims:?}");
        let want: Vec<f64> = {
            let v = t.to_f64_vec();
            let [n, c, h, w] = dims;
            let mut o = Vec::with_capacity(v.len());
            for (ni, hi, wi, ci) in (0..n)
                .flat_map(|a| (0..h).flat_map(move |b| (0..w).flat_map(move |d| (0..c).map(move |e| (a, b, d, e)))))
            {
                o.push(-v[((ni * c + ci) * h + hi) * w + wi]);
            }
            o
        };
        assert_eq!(out.to_f64_vec(), want, "{dims:?}");
    }
}
