//! Core tests: a channel `concat` of conv chains (SqueezeNet's fire module: `expand1x1 ‖
//! expand3x3`) runs as one step whose conv kernels write their slices of the output: results
//! bit-identical to the unfused plan for each conv kernel (1x1 GEMM, 3x3 im2col, Winograd,
//! the narrow direct kernel), values that are fetched or read elsewhere stay out, other axes
//! are untouched, and bad operands report the unfused errors.

use pfor::exec::ProfileEntry;
use pfor::ops::conv::{Conv2dParams, Padding};
use pfor::prelude::*;

use super::fuse::{bits, rand};

fn opts(fuse: bool) -> ExecOptions {
    ExecOptions { fuse, profile: true, ..ExecOptions::default() }
}

/// The profiled steps of `kind` (`fused_concat`, `fused_conv`, `concat`).
fn steps_of(s: &Session, kind: &str) -> Vec<ProfileEntry> {
    s.profile().entries().into_iter().filter(|e| e.kind == kind).cloned().collect()
}

/// A fire module's expand side per example: `x [H, W, C]` → `concat(relu(bias_add(conv(x,
/// w_i), b_i)) for (k_i, o_i) in expands)` on the channel axis.
#[derive(Clone, Copy, Debug)]
struct Fire {
    hw: [usize; 2],
    c: usize,
    expands: [(usize, usize); 2],
}

/// Run the fire module vectorized over `n` examples, fused and unfused; the fused output
/// must be bit-identical and come from one `fused_concat` step.
fn check_fire(f: Fire, n: usize, dtype: DType, seed: u64) {
    let Fire { hw: [h, w], c, expands } = f;
    let mut g = Graph::new();
    let xs = g.input("xs", dtype, [n, h, w, c]);
    let mut weights = Vec::new();
    for (i, &(k, o)) in expands.iter().enumerate() {
        let wv = g.constant(rand(dtype, &[k, k, c, o], seed + 10 * i as u64));
        let bv = g.constant(rand(dtype, &[o], seed + 10 * i as u64 + 1));
        weights.push((wv, bv));
    }
    let ys = pfor::api::vectorized_map(
        &mut g,
        |g, x| {
            let x = g.expand_dims(x[0], 0)?;
            let mut parts = Vec::new();
            for &(wv, bv) in &weights {
                let y = g.conv2d(x, wv, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() })?;
                let y = g.bias_add(y, bv)?;
                parts.push(g.relu(y)?);
            }
            Ok(vec![g.concat(&parts, 3)?])
        },
        &[xs],
    )
    .unwrap();
    let mut xv = rand(dtype, &[n, h, w, c], seed + 100);
    if xv.len() > 7 {
        // a NaN must propagate through every kernel and the copy identically
        let mut a = xv.cast(DType::F64).to_array::<f64>().unwrap();
        a.as_slice_mut().unwrap()[xv.len() / 3] = f64::NAN;
        xv = Tensor::from_array(a).cast(dtype);
    }
    let feeds = [(xs, xv)];
    let mut fused = Session::with_options(&g, &ys, opts(true)).unwrap();
    let mut plain = Session::with_options(&g, &ys, opts(false)).unwrap();
    for _ in 0..2 {
        // the second run writes into recycled buffers (stale content must never show)
        let got = fused.run(&feeds).unwrap_or_else(|e| panic!("{f:?} n = {n} {dtype}: {e}"));
        let want = plain.run(&feeds).unwrap();
        assert_eq!(got[0].shape(), [n, 1, h, w, expands[0].1 + expands[1].1].as_slice());
        assert!(bits(&got[0]) == bits(&want[0]), "{f:?} n = {n} {dtype}: fused and unfused differ");
    }
    let cat = steps_of(&fused, "fused_concat");
    assert_eq!(cat.len(), 1, "{f:?} n = {n}: one fused concat step");
    assert!(!cat[0].op.contains("value"), "{f:?} n = {n}: both parts are convs: {}", cat[0].op);
    assert!(steps_of(&fused, "fused_conv").is_empty() && steps_of(&fused, "concat").is_empty());
}

#[test]
fn fused_concats_are_bit_identical_for_every_conv_kernel() {
    let cases = [
        // 1x1 GEMM (the input rows as patches) and 3x3 im2col + GEMM (5 channels: no
        // Winograd, no narrow kernel)
        Fire { hw: [5, 6], c: 5, expands: [(1, 8), (3, 24)] },
        // 1x1 GEMM and Winograd F(4x4, 3x3) (16 tiles per image at 16x16)
        Fire { hw: [16, 16], c: 16, expands: [(1, 32), (3, 32)] },
        // a 1x1 GEMM and the narrow direct kernel (3 channels, 32 outputs)
        Fire { hw: [7, 9], c: 3, expands: [(1, 16), (3, 32)] },
        // Winograd first, then the row-parallel GEMM chunks (large enough for several)
        Fire { hw: [24, 24], c: 16, expands: [(3, 48), (1, 64)] },
    ];
    for f in cases {
        for n in [0, 1, 3] {
            check_fire(f, n, DType::F32, 1 + n as u64);
        }
    }
    // f64: im2col and the 1x1 GEMM
    check_fire(cases[0], 3, DType::F64, 9);
    check_fire(cases[1], 1, DType::F64, 9);
}

/// `concat([relu(conv(x, w)), other], axis)` on a static `[2, 6, 5, 16]` input; returns the
/// graph, the input, the conv chain's result and the concat.
fn conv_and(other: impl FnOnce(&mut Graph, ValueId) -> ValueId, axis: i64) -> (Graph, ValueId, ValueId, ValueId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 6, 5, 16]);
    let w = g.constant(Tensor::randn(&[1, 1, 16, 16], 1).unwrap());
    let c = g.conv2d(x, w, Conv2dParams::default()).unwrap();
    let r = g.relu(c).unwrap();
    let o = other(&mut g, x);
    let y = g.concat(&[r, o], axis).unwrap();
    (g, x, r, y)
}

fn run_both(g: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> (Session, Vec<Tensor>) {
    let mut fused = Session::with_options(g, fetches, opts(true)).unwrap();
    let got = fused.run(feeds).unwrap();
    let want = Session::with_options(g, fetches, opts(false)).unwrap().run(feeds).unwrap();
    for (a, b) in got.iter().zip(&want) {
        assert!(bits(a) == bits(b), "fused and unfused differ");
    }
    (fused, got)
}

#[test]
fn a_concat_of_a_conv_and_another_value_copies_the_value() {
    // a plain (not vectorized) graph: conv → relu ‖ tanh(x), then a bare conv ‖ x
    let (g, x, _, y) = conv_and(|g, x| g.tanh(x).unwrap(), 3);
    let feeds = [(x, Tensor::randn(&[2, 6, 5, 16], 2).unwrap())];
    let (s, got) = run_both(&g, &[y], &feeds);
    assert_eq!(got[0].shape(), [2, 6, 5, 32]);
    let cat = steps_of(&s, "fused_concat");
    assert_eq!(cat.len(), 1);
    assert!(cat[0].op.contains("conv2d") && cat[0].op.contains("value"), "{}", cat[0].op);

    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 6, 5, 16]);
    let w = g.constant(Tensor::randn(&[3, 3, 16, 32], 3).unwrap());
    let c = g.conv2d(x, w, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() }).unwrap();
    let y = g.concat(&[x, c], -1).unwrap();
    let (s, _) = run_both(&g, &[y], &[(x, Tensor::randn(&[2, 6, 5, 16], 3).unwrap())]);
    assert_eq!(steps_of(&s, "fused_concat").len(), 1, "a bare conv writes its slice too");
}

#[test]
fn fetched_or_shared_conv_results_are_not_taken_in() {
    let (mut g, x, r, y) = conv_and(|g, x| g.tanh(x).unwrap(), 3);
    let feeds = [(x, Tensor::randn(&[2, 6, 5, 16], 4).unwrap())];
    // fetched: the chain keeps its own step; the concat has no conv to take in
    let (s, got) = run_both(&g, &[y, r], &feeds);
    assert!(steps_of(&s, "fused_concat").is_empty());
    assert_eq!(steps_of(&s, "fused_conv").len(), 1);
    assert_eq!(got[1].shape(), [2, 6, 5, 16]);
    // read by another op: the same
    let e = g.exp(r).unwrap();
    let (s, _) = run_both(&g, &[y, e], &feeds);
    assert!(steps_of(&s, "fused_concat").is_empty());
    assert_eq!(steps_of(&s, "concat").len(), 1);
    // the same conv result twice in one concat: two readers, not taken in
    let (mut g, x, r, _) = conv_and(|g, x| g.tanh(x).unwrap(), 3);
    let y = g.concat(&[r, r], 3).unwrap();
    let (s, _) = run_both(&g, &[y], &[(x, Tensor::randn(&[2, 6, 5, 16], 5).unwrap())]);
    assert!(steps_of(&s, "fused_concat").is_empty());
}

#[test]
fn concats_on_other_axes_are_untouched() {
    for axis in [0, 1, 2, -2] {
        let (g, x, _, y) = conv_and(|g, x| g.tanh(x).unwrap(), axis);
        let (s, _) = run_both(&g, &[y], &[(x, Tensor::randn(&[2, 6, 5, 16], 6).unwrap())]);
        assert!(steps_of(&s, "fused_concat").is_empty(), "axis {axis}");
        assert_eq!(steps_of(&s, "concat").len(), 1, "axis {axis}");
    }
}

#[test]
fn fused_concat_errors_are_the_unfused_ones() {
    // the other part's leading dims only known at run time: a mismatch is the concat's error
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 6, 5, 16]);
    let z = g.input("z", DType::F32, [Dim::dynamic("n"), Dim::fixed(6), Dim::fixed(5), Dim::fixed(8)]);
    let w = g.constant(Tensor::randn(&[1, 1, 16, 16], 1).unwrap());
    let b = g.input("b", DType::F32, [Dim::dynamic("o")]);
    let c = g.conv2d(x, w, Conv2dParams::default()).unwrap();
    let c = g.bias_add(c, b).unwrap();
    let r = g.relu(c).unwrap();
    let y = g.concat(&[r, z], 3).unwrap();
    let mut fused = Session::with_options(&g, &[y], opts(true)).unwrap();
    let mut plain = Session::with_options(&g, &[y], opts(false)).unwrap();
    let xv = Tensor::randn(&[2, 6, 5, 16], 2).unwrap();
    for (zn, bn) in [(3, 16), (2, 15), (3, 15)] {
        let feeds =
            [(x, xv.clone()), (z, Tensor::randn(&[zn, 6, 5, 8], 3).unwrap()), (b, Tensor::randn(&[bn], 4).unwrap())];
        let (e1, e2) = (fused.run(&feeds).unwrap_err(), plain.run(&feeds).unwrap_err());
        assert_eq!(e1.to_string(), e2.to_string(), "z batch {zn}, bias {bn}");
    }
    let feeds = [(x, xv), (z, Tensor::randn(&[2, 6, 5, 8], 3).unwrap()), (b, Tensor::randn(&[16], 4).unwrap())];
    let (got, want) = (fused.run(&feeds).unwrap(), plain.run(&feeds).unwrap());
    assert!(bits(&got[0]) == bits(&want[0]), "fused and unfused differ");
    assert_eq!(steps_of(&fused, "fused_concat").len(), 1);
}

#[test]
fn residual_chains_write_their_slices() {
    // `concat([relu(conv1x1(x)), relu(conv3x3(x) + b + x)])`: the second part's residual is
    // read in the conv output's layout while its values go to channels 32.. of 48 (Winograd
    // at 16x16, im2col at 6x5)
    for (hw, n) in [([16, 16], 2), ([6, 5], 3)] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [n, hw[0], hw[1], 16]);
        let w1 = g.constant(Tensor::randn(&[1, 1, 16, 32], 1).unwrap());
        let w3 = g.constant(Tensor::randn(&[3, 3, 16, 16], 2).unwrap());
        let b = g.constant(Tensor::randn(&[16], 3).unwrap());
        let a = g.conv2d(x, w1, Conv2dParams::default()).unwrap();
        let a = g.relu(a).unwrap();
        let c = g.conv2d(x, w3, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() }).unwrap();
        let c = g.bias_add(c, b).unwrap();
        let c = g.add(c, x).unwrap();
        let c = g.relu(c).unwrap();
        let y = g.concat(&[a, c], 3).unwrap();
        let (s, got) = run_both(&g, &[y], &[(x, Tensor::randn(&[n, hw[0], hw[1], 16], 4).unwrap())]);
        assert_eq!(got[0].shape(), [n, hw[0], hw[1], 48]);
        let cat = steps_of(&s, "fused_concat");
        assert_eq!(cat.len(), 1, "{hw:?}");
        assert!(cat[0].op.contains("→ add") && !cat[0].op.contains("value"), "{}", cat[0].op);
    }
}
