//! Value tests for the shape family (expected values written by hand or from closed forms).

use crate::common::*;
use pfor::ops::ShapeKind;
use pfor::prelude::*;

fn iota_f32(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    f32t(shape, &(0..n).map(|i| i as f32).collect::<Vec<_>>())
}

fn run(g: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> Result<Vec<Tensor>> {
    session(g, fetches)?.run(feeds)
}

/// Assert a build-time error of `op` with the given root variant.
#[track_caller]
fn assert_err(r: Result<impl std::fmt::Debug>, op: &str, variant: fn(&Error) -> bool) {
    let e = r.expect_err("expected an error");
    assert!(variant(e.root()), "wrong variant: {e:?}");
    assert!(e.to_string().contains(op), "message does not name {op}: {e}");
}

fn is_shape(e: &Error) -> bool {
    matches!(e, Error::Shape { .. })
}
fn is_axis(e: &Error) -> bool {
    matches!(e, Error::Axis { .. })
}
fn is_dtype(e: &Error) -> bool {
    matches!(e, Error::DType { .. })
}

#[test]
fn reshape_values_and_minus_one() {
    let x = iota_f32(&[2, 3]);
    assert_eq!(apply1(x.clone(), |g, x| g.reshape(x, &[3, 2])), f32t(&[3, 2], &[0., 1., 2., 3., 4., 5.]));
    assert_eq!(apply1(x.clone(), |g, x| g.reshape(x, &[-1])), f32t(&[6], &[0., 1., 2., 3., 4., 5.]));
    assert_eq!(apply1(x.clone(), |g, x| g.reshape(x, &[1, -1, 2])).shape(), &[1, 3, 2]);
    assert_eq!(apply1(x, |g, x| g.reshape(x, &[6, 1, 1])).shape(), &[6, 1, 1]);
    // Scalar <-> [1], other dtypes, empty tensors.
    assert_eq!(apply1(Tensor::scalar(4i64), |g, x| g.reshape(x, &[1, 1])), i64t(&[1, 1], &[4]));
    assert_eq!(apply1(i64t(&[1], &[4]), |g, x| g.reshape(x, &[])), Tensor::scalar(4i64));
    assert_eq!(
        apply1(boolt(&[2, 2], &[true, false, false, true]), |g, x| g.reshape(x, &[4])),
        boolt(&[4], &[true, false, false, true])
    );
    assert_eq!(apply1(f32t(&[0, 3], &[]), |g, x| g.reshape(x, &[-1, 3])).shape(), &[0, 3]);
    assert_eq!(apply1(f32t(&[0, 3], &[]), |g, x| g.reshape(x, &[3, 0, 5])).shape(), &[3, 0, 5]);
}

#[test]
fn reshape_of_standard_layout_does_not_copy() {
    // an input, not a constant: plans fold constants, and store what they fold in standard
    // layout
    let x = iota_f32(&[4, 3]);
    let ptr = x.array::<f32>().unwrap().as_ptr();
    let mut g = Graph::new();
    let c = g.input("x", DType::F32, [4, 3]);
    let r = g.reshape(c, &[2, 6]).unwrap();
    let t = g.transpose(c, &[1, 0]).unwrap();
    let out = run_once(&g, &[r, t], &[(c, x)]).unwrap();
    assert_eq!(out[0].array::<f32>().unwrap().as_ptr(), ptr);
    assert_eq!(out[1].array::<f32>().unwrap().as_ptr(), ptr);
    assert!(!out[1].array::<f32>().unwrap().is_standard_layout());
}

#[test]
fn reshape_errors() {
    let mut g = Graph::new();
    let x = g.constant(iota_f32(&[2, 3]));
    assert_err(g.reshape(x, &[4]), "reshape", is_shape);
    assert_err(g.reshape(x, &[4, -1]), "reshape", is_shape);
    assert_err(g.reshape(x, &[-1, -1]), "reshape", is_shape);
    assert_err(g.reshape(x, &[-2, 3]), "reshape", is_shape);
    assert_err(g.reshape(x, &[0, -1]), "reshape", is_shape);
}

#[test]
fn transpose_values_and_layout() {
    let x = iota_f32(&[2, 3]);
    assert_eq!(apply1(x, |g, x| g.transpose(x, &[1, 0])), f32t(&[3, 2], &[0., 3., 1., 4., 2., 5.]));
    // [2,3,4] with perm [2,0,1]: out[k,i,j] = x[i,j,k] = 12i + 4j + k.
    let got = apply1(iota_f32(&[2, 3, 4]), |g, x| g.transpose(x, &[2, 0, 1]));
    assert_eq!(got.shape(), &[4, 2, 3]);
    let mut want = vec![];
    for k in 0..4 {
        for i in 0..2 {
            for j in 0..3 {
                want.push((12 * i + 4 * j + k) as f32);
            }
        }
    }
    assert_eq!(got, f32t(&[4, 2, 3], &want));
    // Identity permutation and rank 0.
    assert_eq!(apply1(Tensor::scalar(2.0f64), |g, x| g.transpose(x, &[])), Tensor::scalar(2.0f64));
}

#[test]
fn transpose_of_transposed_view_then_reshape() {
    // x[i,j,k] = 12i + 4j + k; t1 = transpose [2,0,1] -> [4,2,3]; t2 = transpose(t1, [0,2,1])
    // -> [4,3,2] with t2[k,j,i] = x[i,j,k]; reshape to [-1] must read t2 in row-major order.
    let mut g = Graph::new();
    let x = g.constant(iota_f32(&[2, 3, 4]));
    let t1 = g.transpose(x, &[2, 0, 1]).unwrap();
    let t2 = g.transpose(t1, &[0, 2, 1]).unwrap();
    let flat = g.reshape(t2, &[-1]).unwrap();
    let back = g.reshape(t2, &[6, 4]).unwrap();
    let neg = g.neg(t2).unwrap();
    let out = eval(&g, &[flat, back, neg]);
    let mut want = vec![];
    for k in 0..4 {
        for j in 0..3 {
            for i in 0..2 {
                want.push((12 * i + 4 * j + k) as f32);
            }
        }
    }
    assert_eq!(out[0], f32t(&[24], &want));
    assert_eq!(out[1], f32t(&[6, 4], &want));
    assert_eq!(out[2], f32t(&[4, 3, 2], &want.iter().map(|v| -v).collect::<Vec<_>>()));
    assert_eq!(&want[..6], &[0., 12., 4., 16., 8., 20.]);
}

#[test]
fn transpose_errors() {
    let mut g = Graph::new();
    let x = g.constant(iota_f32(&[2, 3]));
    assert_err(g.transpose(x, &[0, 0]), "transpose", is_shape);
    assert_err(g.transpose(x, &[0]), "transpose", is_shape);
    assert_err(g.transpose(x, &[0, 2]), "transpose", is_shape);
    assert_err(g.transpose(x, &[1, 0, 2]), "transpose", is_shape);
}

#[test]
fn expand_dims_and_squeeze() {
    let x = iota_f32(&[2, 3]);
    let data = [0., 1., 2., 3., 4., 5.];
    for (axis, shape) in
        [(0, [1, 2, 3]), (1, [2, 1, 3]), (2, [2, 3, 1]), (-1, [2, 3, 1]), (-3, [1, 2, 3]), (-2, [2, 1, 3])]
    {
        assert_eq!(apply1(x.clone(), |g, x| g.expand_dims(x, axis)), f32t(&shape, &data), "axis {axis}");
    }
    assert_eq!(apply1(Tensor::scalar(1i64), |g, x| g.expand_dims(x, -1)), i64t(&[1], &[1]));

    let y = f32t(&[1, 2, 1], &[7., 8.]);
    assert_eq!(apply1(y.clone(), |g, x| g.squeeze(x, None)), f32t(&[2], &[7., 8.]));
    assert_eq!(apply1(y.clone(), |g, x| g.squeeze(x, Some(&[-1]))), f32t(&[1, 2], &[7., 8.]));
    assert_eq!(apply1(y.clone(), |g, x| g.squeeze(x, Some(&[0]))), f32t(&[2, 1], &[7., 8.]));
    assert_eq!(apply1(y, |g, x| g.squeeze(x, Some(&[2, -3]))), f32t(&[2], &[7., 8.]));
    assert_eq!(apply1(f32t(&[1, 1], &[3.]), |g, x| g.squeeze(x, None)), f32t(&[], &[3.]));
    // Nothing to squeeze: value unchanged.
    assert_eq!(apply1(iota_f32(&[2, 2]), |g, x| g.squeeze(x, None)), iota_f32(&[2, 2]));
    // `Some(&[])` removes no dim (unlike `None`, which removes them all)
    let z = f32t(&[1, 2, 1], &[7., 8.]);
    assert_eq!(apply1(z.clone(), |g, x| g.squeeze(x, Some(&[]))), z);

    let mut g = Graph::new();
    let c = g.constant(iota_f32(&[2, 1]));
    assert_err(g.expand_dims(c, 3), "expand_dims", is_axis);
    assert_err(g.expand_dims(c, -4), "expand_dims", is_axis);
    assert_err(g.squeeze(c, Some(&[0])), "squeeze", is_shape);
    assert_err(g.squeeze(c, Some(&[1, -1])), "squeeze", is_shape);
    assert_err(g.squeeze(c, Some(&[2])), "squeeze", is_axis);
}

#[test]
fn broadcast_to_values() {
    let row = f32t(&[3], &[1., 2., 3.]);
    assert_eq!(apply1(row, |g, x| g.broadcast_to(x, &[2, 3])), f32t(&[2, 3], &[1., 2., 3., 1., 2., 3.]));
    let col = i64t(&[2, 1], &[5, 6]);
    assert_eq!(apply1(col, |g, x| g.broadcast_to(x, &[2, 3])), i64t(&[2, 3], &[5, 5, 5, 6, 6, 6]));
    assert_eq!(apply1(Tensor::scalar(true), |g, x| g.broadcast_to(x, &[2])), boolt(&[2], &[true, true]));
    assert_eq!(apply1(f32t(&[1], &[1.]), |g, x| g.broadcast_to(x, &[0])), f32t(&[0], &[]));
    // Broadcasting a transposed view.
    let got = apply1(f32t(&[2, 1, 2], &[1., 2., 3., 4.]), |g, x| {
        let t = g.transpose(x, &[2, 1, 0])?; // [2,1,2]: t[a,0,b] = x[b,0,a]
        g.broadcast_to(t, &[2, 2, 2])
    });
    assert_eq!(got, f32t(&[2, 2, 2], &[1., 3., 1., 3., 2., 4., 2., 4.]));

    let mut g = Graph::new();
    let c = g.constant(f32t(&[2], &[1., 2.]));
    assert_err(g.broadcast_to(c, &[3]), "broadcast_to", is_shape);
    assert_err(g.broadcast_to(c, &[2, 3]), "broadcast_to", is_shape);
    assert_err(g.broadcast_to(c, &[]), "broadcast_to", is_shape);
}

#[test]
fn broadcast_to_dyn_values_and_types() {
    let mut g = Graph::new();
    let x = g.constant(f32t(&[3, 1], &[1., 2., 3.]));
    let s = g.constant(i64t(&[3], &[2, 3, 2]));
    let y = g.broadcast_to_dyn(x, s).unwrap();
    assert_eq!(g.shape(y).unwrap(), Shape::from([Dim::unknown(), Dim::fixed(3), Dim::unknown()]));
    let want = f32t(&[2, 3, 2], &[1., 1., 2., 2., 3., 3., 1., 1., 2., 2., 3., 3.]);
    assert_eq!(eval1(&g, y), want);

    // Shape fed at run time; a mismatch is a runtime error.
    let sin = g.input("s", DType::I64, [3]);
    let y2 = g.broadcast_to_dyn(x, sin).unwrap();
    assert_eq!(run(&g, &[y2], &[(sin, i64t(&[3], &[1, 3, 4]))]).unwrap()[0].shape(), &[1, 3, 4]);
    let e = run(&g, &[y2], &[(sin, i64t(&[3], &[1, 2, 4]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "broadcast_to_dyn"), "{e}");
    let e = run(&g, &[y2], &[(sin, i64t(&[3], &[1, 3, -1]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { .. }), "{e}");
    // Static errors: shape operand too short, wrong dtype, dynamic length.
    let s1 = g.constant(i64t(&[1], &[3]));
    assert_err(g.broadcast_to_dyn(x, s1), "broadcast_to_dyn", is_shape);
    let sf = g.constant(f32t(&[2], &[3., 1.]));
    assert_err(g.broadcast_to_dyn(x, sf), "broadcast_to_dyn", is_dtype);
    let sd = g.input("sd", DType::I64, [Dim::unknown()]);
    assert_err(g.broadcast_to_dyn(x, sd), "broadcast_to_dyn", is_shape);
}

#[test]
fn tile_values() {
    let x = f32t(&[2, 2], &[1., 2., 3., 4.]);
    assert_eq!(
        apply1(x.clone(), |g, x| g.tile(x, &[2, 3])),
        f32t(
            &[4, 6],
            &[1., 2., 1., 2., 1., 2., 3., 4., 3., 4., 3., 4., 1., 2., 1., 2., 1., 2., 3., 4., 3., 4., 3., 4.]
        )
    );
    assert_eq!(apply1(x.clone(), |g, x| g.tile(x, &[1, 1])), x);
    assert_eq!(apply1(x.clone(), |g, x| g.tile(x, &[0, 2])).shape(), &[0, 4]);
    assert_eq!(apply1(i64t(&[2], &[7, 8]), |g, x| g.tile(x, &[3])), i64t(&[6], &[7, 8, 7, 8, 7, 8]));
    // Tile of a transposed view: [[1,3],[2,4]] tiled [2,1].
    let got = apply1(x, |g, x| {
        let t = g.transpose(x, &[1, 0])?;
        g.tile(t, &[2, 1])
    });
    assert_eq!(got, f32t(&[4, 2], &[1., 3., 2., 4., 1., 3., 2., 4.]));
    let mut g = Graph::new();
    let c = g.constant(f32t(&[2], &[1., 2.]));
    assert_err(g.tile(c, &[2, 2]), "tile", is_shape);
}

#[test]
fn fill_and_like_ops() {
    assert_eq!(apply1(Tensor::scalar(7.5f32), |g, v| g.fill(&[2, 3], v)), f32t(&[2, 3], &[7.5; 6]));
    assert_eq!(apply1(Tensor::scalar(true), |g, v| g.fill(&[0], v)), boolt(&[0], &[]));
    let mut g = Graph::new();
    let s = g.constant(i64t(&[2], &[2, 1]));
    let v = g.constant(Tensor::scalar(-3i64));
    let f = g.fill_dyn(s, v).unwrap();
    assert_eq!(g.shape(f).unwrap(), Shape::from([Dim::unknown(), Dim::unknown()]));
    assert_eq!(eval1(&g, f), i64t(&[2, 1], &[-3, -3]));
    let vec_v = g.constant(f32t(&[1], &[1.]));
    assert_err(g.fill(&[2], vec_v), "fill", is_shape);
    assert_err(g.fill_dyn(s, vec_v), "fill_dyn", is_shape);
    let neg = g.constant(i64t(&[2], &[2, -1]));
    let bad = g.fill_dyn(neg, v).unwrap();
    let e = run(&g, &[bad], &[]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "fill_dyn"), "{e}");

    let x = f64t(&[2, 2], &[1., -2., 3., 4.]);
    assert_eq!(apply1(x.clone(), |g, x| g.zeros_like(x)), f64t(&[2, 2], &[0.; 4]));
    assert_eq!(apply1(x, |g, x| g.ones_like(x)), f64t(&[2, 2], &[1.; 4]));
    assert_eq!(apply1(i64t(&[3], &[4, 5, 6]), |g, x| g.ones_like(x)), i64t(&[3], &[1, 1, 1]));
    assert_eq!(apply1(boolt(&[2], &[true, false]), |g, x| g.zeros_like(x)), boolt(&[2], &[false, false]));
    assert_eq!(apply1(boolt(&[2], &[true, false]), |g, x| g.ones_like(x)), boolt(&[2], &[true, true]));
    // In-place fill must not clobber a fetched input.
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, [2]);
    let z = g.zeros_like(a).unwrap();
    let out = run(&g, &[a, z], &[(a, f32t(&[2], &[1., 2.]))]).unwrap();
    assert_eq!(out[0], f32t(&[2], &[1., 2.]));
    assert_eq!(out[1], f32t(&[2], &[0., 0.]));
    // Constants.
    let zc = g.zeros(DType::I64, &[2]).unwrap();
    let oc = g.ones(DType::F32, &[1, 2]).unwrap();
    let out = run(&g, &[zc, oc], &[]).unwrap();
    assert_eq!(out[0], i64t(&[2], &[0, 0]));
    assert_eq!(out[1], f32t(&[1, 2], &[1., 1.]));
}

#[test]
fn shape_queries_and_identity() {
    let x = iota_f32(&[2, 3, 4]);
    assert_eq!(apply1(x.clone(), |g, x| g.shape_of(x)), i64t(&[3], &[2, 3, 4]));
    assert_eq!(apply1(x.clone(), |g, x| g.size_of(x)), Tensor::scalar(24i64));
    assert_eq!(apply1(x.clone(), |g, x| g.rank_of(x)), Tensor::scalar(3i64));
    assert_eq!(apply1(Tensor::scalar(1.0f64), |g, x| g.shape_of(x)), i64t(&[0], &[]));
    assert_eq!(apply1(f32t(&[0, 5], &[]), |g, x| g.size_of(x)), Tensor::scalar(0i64));
    assert_eq!(apply1(x.clone(), |g, x| g.identity(x)), x);
    assert_eq!(apply1(x.clone(), |g, x| g.stop_gradient(x)), x);

    // Dynamic dims: queried at run time.
    let mut g = Graph::new();
    let d = g.input("d", DType::Bool, [Dim::dynamic("n"), Dim::fixed(2)]);
    let (s, n, r) = (g.shape_of(d).unwrap(), g.size_of(d).unwrap(), g.rank_of(d).unwrap());
    assert_eq!(g.shape(s).unwrap(), Shape::fixed(&[2]));
    let id = g.identity(d).unwrap();
    assert_eq!(g.shape(id).unwrap(), g.shape(d).unwrap());
    let out = run(&g, &[s, n, r], &[(d, boolt(&[3, 2], &[true; 6]))]).unwrap();
    assert_eq!(out, vec![i64t(&[2], &[3, 2]), Tensor::scalar(6i64), Tensor::scalar(2i64)]);
}

#[test]
fn match_shape_checks_fixed_dims_when_built_and_dynamic_ones_when_run() {
    let x = iota_f32(&[2, 3]);
    assert_eq!(apply2(x.clone(), f32t(&[2, 3], &[0.; 6]), |g, x, l| g.match_shape(x, l)), x);
    // Fixed dims that differ: a build-time error naming both shapes.
    let mut g = Graph::new();
    let (a, b) = (g.input("a", DType::F32, [2, 3]), g.input("b", DType::F32, [3, 2]));
    assert_err(g.match_shape(a, b), "match_shape", is_shape);
    // Dynamic dims: the static type takes the fixed one; checked when run.
    let d = g.input("d", DType::F32, [Dim::unknown(), Dim::fixed(3)]);
    let m = g.match_shape(d, a).unwrap();
    assert_eq!(g.shape(m).unwrap(), Shape::fixed(&[2, 3]));
    let l = g.input("l", DType::F32, [Dim::unknown(), Dim::fixed(3)]);
    let m2 = g.match_shape(d, l).unwrap();
    let ok = run(&g, &[m2], &[(d, x.clone()), (l, x.clone())]).unwrap();
    assert_eq!(ok[0], x);
    let e = run(&g, &[m2], &[(d, x), (l, f32t(&[1, 3], &[0.; 3]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "match_shape"), "{e}");
    assert!(e.to_string().contains("[2, 3] does not match [1, 3]"), "{e}");
}

#[test]
fn loop_max_is_the_identity_on_sizes_outside_pfor() {
    assert_eq!(apply1(i64t(&[3], &[4, 0, 7]), |g, x| g.loop_max(x)), i64t(&[3], &[4, 0, 7]));
    assert_eq!(apply1(Tensor::scalar(5i64), |g, x| g.loop_max(x)), Tensor::scalar(5i64));
    // Only i64 sizes: a float is a build-time dtype error, a negative size a run-time one.
    let mut g = Graph::new();
    let f = g.input("f", DType::F64, [2]);
    assert_err(g.loop_max(f), "loop_max", is_dtype);
    let k = g.input("k", DType::I64, [2]);
    let m = g.loop_max(k).unwrap();
    let e = run(&g, &[m], &[(k, i64t(&[2], &[3, -1]))]).unwrap_err();
    assert!(e.to_string().contains("loop_max") && e.to_string().contains("-1"), "{e}");
}

#[test]
fn one_hot_2d_indices_axes_and_out_of_range() {
    // Indices [[0, 2], [1, 5]] (5 is out of range), depth 3, on 5, off -1.
    let idx = i64t(&[2, 2], &[0, 2, 1, 5]);
    let last = apply1(idx.clone(), |g, x| g.one_hot(x, 3, -1, 5.0, -1.0, DType::F64));
    assert_eq!(last, f64t(&[2, 2, 3], &[5., -1., -1., -1., -1., 5., -1., 5., -1., -1., -1., -1.]));
    let last2 = apply1(idx.clone(), |g, x| g.one_hot(x, 3, 2, 5.0, -1.0, DType::F64));
    assert_eq!(last2, last);
    // axis 0: out[k, i, j] = on iff idx[i, j] == k.
    let first = apply1(idx.clone(), |g, x| g.one_hot(x, 3, 0, 5.0, -1.0, DType::F64));
    assert_eq!(first, f64t(&[3, 2, 2], &[5., -1., -1., -1., -1., -1., 5., -1., -1., 5., -1., -1.]));
    // axis 1 (= -2): out[i, k, j].
    let mid = apply1(idx.clone(), |g, x| g.one_hot(x, 3, -2, 1.0, 0.0, DType::I64));
    assert_eq!(mid, i64t(&[2, 3, 2], &[1, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0]));
    // Negative index -> all off; bool and f32 outputs; rank-0 indices; depth 0.
    let neg = apply1(i64t(&[3], &[-1, 1, 3]), |g, x| g.one_hot(x, 2, -1, 1.0, 0.0, DType::Bool));
    assert_eq!(neg, boolt(&[3, 2], &[false, false, false, true, false, false]));
    assert_eq!(
        apply1(Tensor::scalar(1i64), |g, x| g.one_hot(x, 3, -1, 2.0, 0.5, DType::F32)),
        f32t(&[3], &[0.5, 2.0, 0.5])
    );
    assert_eq!(apply1(i64t(&[2], &[0, 1]), |g, x| g.one_hot(x, 0, -1, 1.0, 0.0, DType::F32)).shape(), &[2, 0]);
    // Transposed indices.
    let tr = apply1(idx, |g, x| {
        let t = g.transpose(x, &[1, 0])?; // [[0,1],[2,5]]
        g.one_hot(t, 3, -1, 1.0, 0.0, DType::I64)
    });
    assert_eq!(tr, i64t(&[2, 2, 3], &[1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]));

    let mut g = Graph::new();
    let f = g.constant(f32t(&[2], &[0., 1.]));
    assert_err(g.one_hot(f, 3, -1, 1.0, 0.0, DType::F32), "one_hot", is_dtype);
    let i = g.constant(i64t(&[2], &[0, 1]));
    assert_err(g.one_hot(i, 3, 2, 1.0, 0.0, DType::F32), "one_hot", is_axis);
    assert_err(g.one_hot(i, 3, -3, 1.0, 0.0, DType::F32), "one_hot", is_axis);
}

#[test]
fn range_values() {
    let r3 = |a: Tensor, b: Tensor, c: Tensor| -> Result<Tensor> {
        let mut g = Graph::new();
        let (a, b, c) = (g.constant(a), g.constant(b), g.constant(c));
        let r = g.range(a, b, c)?;
        assert_eq!(g.shape(r).unwrap(), Shape::from([Dim::unknown()]));
        Ok(run(&g, &[r], &[])?.remove(0))
    };
    let i = |v: i64| Tensor::scalar(v);
    assert_eq!(r3(i(0), i(5), i(1)).unwrap(), i64t(&[5], &[0, 1, 2, 3, 4]));
    assert_eq!(r3(i(2), i(9), i(3)).unwrap(), i64t(&[3], &[2, 5, 8]));
    assert_eq!(r3(i(10), i(0), i(-3)).unwrap(), i64t(&[4], &[10, 7, 4, 1]));
    assert_eq!(r3(i(5), i(0), i(1)).unwrap(), i64t(&[0], &[]));
    assert_eq!(r3(i(0), i(5), i(-1)).unwrap(), i64t(&[0], &[]));
    assert_eq!(r3(i(3), i(3), i(1)).unwrap(), i64t(&[0], &[]));
    let d = |v: f64| Tensor::scalar(v);
    assert_eq!(r3(d(0.), d(1.), d(0.25)).unwrap(), f64t(&[4], &[0., 0.25, 0.5, 0.75]));
    assert_eq!(r3(d(0.), d(1.1), d(0.5)).unwrap(), f64t(&[3], &[0., 0.5, 1.0]));
    let f = |v: f32| Tensor::scalar(v);
    assert_eq!(r3(f(1.), f(-1.), f(-0.5)).unwrap(), f32t(&[4], &[1., 0.5, 0., -0.5]));
    // delta 0 and non-finite lengths are errors naming the op.
    let e = r3(i(0), i(5), i(0)).unwrap_err();
    assert!(matches!(e.root(), Error::InvalidArgument(m) if m.contains("range")), "{e}");
    let e = r3(d(0.), d(f64::INFINITY), d(1.)).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "range"), "{e}");
    let e = r3(d(0.), d(f64::NAN), d(1.)).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { .. }), "{e}");
    // Mixed dtypes / non-scalars / bool.
    assert_err(r3(i(0), d(1.), i(1)), "range", is_dtype);
    assert_err(r3(i64t(&[1], &[0]), i(1), i(1)), "range", is_shape);
    assert_err(r3(Tensor::scalar(true), Tensor::scalar(true), Tensor::scalar(true)), "range", is_dtype);
}

#[test]
fn stack_values() {
    let (a, b, c) = (f32t(&[2], &[1., 2.]), f32t(&[2], &[3., 4.]), f32t(&[2], &[5., 6.]));
    let st = |axis: i64| {
        let mut g = Graph::new();
        let xs = [g.constant(a.clone()), g.constant(b.clone()), g.constant(c.clone())];
        let s = g.stack(&xs, axis).unwrap();
        eval1(&g, s)
    };
    assert_eq!(st(0), f32t(&[3, 2], &[1., 2., 3., 4., 5., 6.]));
    assert_eq!(st(-2), f32t(&[3, 2], &[1., 2., 3., 4., 5., 6.]));
    assert_eq!(st(1), f32t(&[2, 3], &[1., 3., 5., 2., 4., 6.]));
    assert_eq!(st(-1), f32t(&[2, 3], &[1., 3., 5., 2., 4., 6.]));
    // 2-D parts along the middle axis; one part; scalars.
    let p = i64t(&[2, 2], &[1, 2, 3, 4]);
    let q = i64t(&[2, 2], &[5, 6, 7, 8]);
    let got = apply2(p.clone(), q, |g, x, y| g.stack(&[x, y], 1));
    assert_eq!(got, i64t(&[2, 2, 2], &[1, 2, 5, 6, 3, 4, 7, 8]));
    assert_eq!(apply1(p.clone(), |g, x| g.stack(&[x], 0)), i64t(&[1, 2, 2], &[1, 2, 3, 4]));
    assert_eq!(apply2(f64t(&[], &[1.]), f64t(&[], &[2.]), |g, x, y| g.stack(&[x, y], -1)), f64t(&[2], &[1., 2.]));

    let mut g = Graph::new();
    let x = g.constant(f32t(&[2], &[1., 2.]));
    let y = g.constant(f32t(&[3], &[1., 2., 3.]));
    let z = g.constant(i64t(&[2], &[1, 2]));
    assert_err(g.stack(&[x, y], 0), "stack", is_shape);
    assert_err(g.stack(&[x, z], 0), "stack", is_dtype);
    assert_err(g.stack(&[x, x], 2), "stack", is_axis);
    let e = g.stack(&[], 0).unwrap_err();
    assert!(matches!(e.root(), Error::Arity { .. }), "{e}");
}

#[test]
fn unstack_values_and_round_trip() {
    let x = iota_f32(&[2, 3]);
    let mut g = Graph::new();
    let c = g.constant(x.clone());
    let rows = g.unstack(c, 0).unwrap();
    let cols = g.unstack(c, -1).unwrap();
    assert_eq!((rows.len(), cols.len()), (2, 3));
    let back_rows = g.stack(&rows, 0).unwrap();
    let back_cols = g.stack(&cols, 1).unwrap();
    let mut fetch = cols.clone();
    fetch.extend([rows[1], back_rows, back_cols]);
    let out = eval(&g, &fetch);
    assert_eq!(out[0], f32t(&[2], &[0., 3.]));
    assert_eq!(out[1], f32t(&[2], &[1., 4.]));
    assert_eq!(out[2], f32t(&[2], &[2., 5.]));
    assert_eq!(out[3], f32t(&[3], &[3., 4., 5.]));
    assert_eq!(out[4], x);
    assert_eq!(out[5], x);
    // Dynamic dims elsewhere are fine; the unstacked axis must be fixed.
    let d = g.input("d", DType::I64, [Dim::dynamic("n"), Dim::fixed(2)]);
    let parts = g.unstack(d, 1).unwrap();
    assert_eq!(g.shape(parts[0]).unwrap(), Shape::from([Dim::dynamic("n")]));
    let out = run(&g, &parts, &[(d, i64t(&[3, 2], &[1, 2, 3, 4, 5, 6]))]).unwrap();
    assert_eq!(out, vec![i64t(&[3], &[1, 3, 5]), i64t(&[3], &[2, 4, 6])]);
    assert_err(g.unstack(d, 0), "unstack", is_shape);
    assert_err(g.unstack(d, 2), "unstack", is_axis);
}

#[test]
fn reshape_dyn_values() {
    let mut g = Graph::new();
    let x = g.constant(iota_f32(&[2, 3]));
    let s = g.constant(i64t(&[2], &[3, -1]));
    let r = g.reshape_dyn(x, s).unwrap();
    assert_eq!(g.shape(r).unwrap(), Shape::from([Dim::unknown(), Dim::unknown()]));
    assert_eq!(eval1(&g, r), f32t(&[3, 2], &[0., 1., 2., 3., 4., 5.]));
    let sin = g.input("s", DType::I64, [3]);
    let r2 = g.reshape_dyn(x, sin).unwrap();
    assert_eq!(
        run(&g, &[r2], &[(sin, i64t(&[3], &[1, 6, 1]))]).unwrap()[0],
        f32t(&[1, 6, 1], &[0., 1., 2., 3., 4., 5.])
    );
    for bad in [[1, 5, 1], [-1, -1, 1], [2, -2, 3]] {
        let e = run(&g, &[r2], &[(sin, i64t(&[3], &bad))]).unwrap_err();
        assert!(matches!(e.root(), Error::Shape { op, .. } if op == "reshape_dyn"), "{e}");
    }
    let sd = g.input("sd", DType::I64, [Dim::unknown()]);
    assert_err(g.reshape_dyn(x, sd), "reshape_dyn", is_shape);
    let sf = g.constant(f32t(&[1], &[6.]));
    assert_err(g.reshape_dyn(x, sf), "reshape_dyn", is_dtype);
}

#[test]
fn dynamic_dims_propagate_and_are_checked_at_run_time() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(3)]);
    let flat = g.reshape(x, &[-1]).unwrap();
    assert_eq!(g.shape(flat).unwrap(), Shape::from([Dim::unknown()]));
    // A -1 that provably equals the dynamic dim keeps its symbol.
    let same = g.reshape(x, &[-1, 3, 1]).unwrap();
    assert_eq!(g.shape(same).unwrap(), Shape::from([Dim::dynamic("n"), Dim::fixed(3), Dim::fixed(1)]));
    let six = g.reshape(x, &[6]).unwrap();
    assert_eq!(g.shape(six).unwrap(), Shape::fixed(&[6]));
    // 3 does not divide 4: no n makes this valid.
    assert_err(g.reshape(x, &[4]), "reshape", is_shape);
    let t = g.transpose(x, &[1, 0]).unwrap();
    assert_eq!(g.shape(t).unwrap(), Shape::from([Dim::fixed(3), Dim::dynamic("n")]));
    let e = g.expand_dims(x, 1).unwrap();
    assert_eq!(g.shape(e).unwrap(), Shape::from([Dim::dynamic("n"), Dim::fixed(1), Dim::fixed(3)]));
    let tl = g.tile(x, &[2, 2]).unwrap();
    assert_eq!(g.shape(tl).unwrap(), Shape::from([Dim::unknown(), Dim::fixed(6)]));
    let z = g.zeros_like(x).unwrap();
    assert_eq!(g.shape(z).unwrap(), g.shape(x).unwrap());
    let c = g.constant(f32t(&[3], &[1., 2., 3.]));
    let st = g.stack(&[x, x], 0).unwrap();
    assert_eq!(g.shape(st).unwrap(), Shape::from([Dim::fixed(2), Dim::dynamic("n"), Dim::fixed(3)]));
    let row = g.reshape(c, &[1, 3]).unwrap();
    let st2 = g.stack(&[x, row], 0).unwrap();
    assert_eq!(g.shape(st2).unwrap(), Shape::fixed(&[2, 1, 3]));

    let feed = iota_f32(&[2, 3]);
    let out = run(&g, &[flat, same, six, t, tl], &[(x, feed.clone())]).unwrap();
    assert_eq!(out[0], iota_f32(&[6]));
    assert_eq!(out[1], iota_f32(&[2, 3, 1]));
    assert_eq!(out[2], iota_f32(&[6]));
    assert_eq!(out[3], f32t(&[3, 2], &[0., 3., 1., 4., 2., 5.]));
    assert_eq!(out[4].shape(), &[4, 6]);
    // n = 4 breaks the fixed reshape to [6] at run time.
    let e = run(&g, &[six], &[(x, iota_f32(&[4, 3]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "reshape"), "{e}");
    assert_eq!(run(&g, &[flat], &[(x, iota_f32(&[4, 3]))]).unwrap()[0], iota_f32(&[12]));
    // st2 needs n = 1.
    let e = run(&g, &[st2], &[(x, feed)]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "stack"), "{e}");

    // Squeeze / broadcast of a dynamic dim: checked at run time.
    let mut g = Graph::new();
    let y = g.input("y", DType::F64, [Dim::unknown(), Dim::fixed(2)]);
    let sq = g.squeeze(y, Some(&[0])).unwrap();
    assert_eq!(g.shape(sq).unwrap(), Shape::fixed(&[2]));
    assert_eq!(run(&g, &[sq], &[(y, f64t(&[1, 2], &[1., 2.]))]).unwrap()[0], f64t(&[2], &[1., 2.]));
    let e = run(&g, &[sq], &[(y, f64t(&[2, 2], &[1., 2., 3., 4.]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "squeeze"), "{e}");
    // The builder resolves empty axes to the fixed size-1 dims only.
    let y1 = g.input("y1", DType::F64, [Dim::unknown(), Dim::fixed(1)]);
    let sq_all = g.squeeze(y1, None).unwrap();
    assert_eq!(g.shape(sq_all).unwrap(), Shape::from([Dim::unknown()]));
    assert_eq!(run(&g, &[sq_all], &[(y1, f64t(&[1, 1], &[9.]))]).unwrap()[0], f64t(&[1], &[9.]));
    let b = g.broadcast_to(y, &[3, 2]).unwrap();
    assert_eq!(run(&g, &[b], &[(y, f64t(&[1, 2], &[1., 2.]))]).unwrap()[0], f64t(&[3, 2], &[1., 2., 1., 2., 1., 2.]));
    assert_eq!(run(&g, &[b], &[(y, f64t(&[3, 2], &[1., 2., 3., 4., 5., 6.]))]).unwrap()[0].shape(), &[3, 2]);
    let e = run(&g, &[b], &[(y, f64t(&[2, 2], &[1., 2., 3., 4.]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "broadcast_to"), "{e}");
    // An op built directly with empty squeeze axes on a dynamic input is rejected.
    let raw = g.add_op(Op::Shape(pfor::ops::ShapeOp::Squeeze { axes: vec![] }), &[y1]);
    assert_err(raw, "squeeze", is_shape);
}

#[test]
fn display_names_attributes() {
    use pfor::ops::ShapeOp;
    assert_eq!(ShapeOp::Reshape { shape: vec![2, -1] }.to_string(), "reshape{shape=[2, -1]}");
    assert_eq!(ShapeOp::Unstack { axis: -1, num: 3 }.to_string(), "unstack{axis=-1, num=3}");
    assert_eq!(ShapeOp::Range.to_string(), "range");
    let oh = ShapeOp::OneHot { depth: 4, axis: 0, on: 1.0, off: 0.0, dtype: DType::F32 };
    assert_eq!(oh.to_string(), "one_hot{depth=4, axis=0, on=1, off=0, dtype=f32}");
    let names: std::collections::HashSet<&str> = ShapeKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), ShapeKind::ALL.len());
    assert_eq!(ShapeKind::ALL.len(), 23);
    let m = ShapeOp::MatchShape { x_lead: 1, like_lead: 0 };
    assert_eq!(m.to_string(), "match_shape{x_lead=1, like_lead=0}");
}
