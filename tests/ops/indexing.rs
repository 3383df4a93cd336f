//! Value tests for the indexing family (gathers, scatters, segment ops, dynamic_update_slice,
//! top_k, nonzero); expected values computed by hand.

// The size of the crate-wide `Error` triggers this lint on every builder closure.

use crate::common::*;
use pfor::ops::{IndexKind, IndexOp};
use pfor::prelude::*;

/// `[0, 1, ..., n-1]` as i64 with `shape`.
fn iota(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    i64t(shape, &(0..n as i64).collect::<Vec<_>>())
}

/// Build with constants `ins`, apply `f`, run and return the root error (must fail at run time).
fn run_err(ins: Vec<Tensor>, f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<ValueId>) -> Error {
    let mut g = Graph::new();
    let vs: Vec<ValueId> = ins.into_iter().map(|t| g.constant(t)).collect();
    let y = f(&mut g, &vs).expect("graph builds; the error is at run time");
    run_recorded(&g, &[y], &[]).expect_err("must fail at run time").root().clone()
}

fn apply3(
    a: Tensor,
    b: Tensor,
    c: Tensor,
    f: impl FnOnce(&mut Graph, ValueId, ValueId, ValueId) -> Result<ValueId>,
) -> Tensor {
    let mut g = Graph::new();
    let (x, y, z) = (g.constant(a), g.constant(b), g.constant(c));
    let v = f(&mut g, x, y, z).unwrap();
    g.verify().unwrap();
    eval1(&g, v)
}

#[track_caller]
fn assert_oob(e: &Error, want_op: &str, want_index: i64, want_bound: usize) {
    match e {
        Error::IndexOutOfRange { op, index, bound } => {
            assert_eq!((op.as_str(), *index, *bound), (want_op, want_index, want_bound), "{e}")
        }
        other => panic!("expected IndexOutOfRange from {want_op}, got {other}"),
    }
    assert!(e.to_string().contains(want_op), "{e}");
}

#[track_caller]
fn assert_shape_err(e: &Error, want_op: &str) {
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == want_op), "expected a {want_op} shape error, got {e}");
    assert!(e.to_string().contains(want_op), "{e}");
}

#[test]
fn gather_axis0_scalar_1d_2d_indices() {
    let p = f32t(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let y = apply2(p.clone(), Tensor::scalar(2i64), |g, p, i| g.gather(p, i, 0));
    assert_eq!(y, f32t(&[2], &[5., 6.]));
    let y = apply2(p.clone(), i64t(&[3], &[2, 0, 2]), |g, p, i| g.gather(p, i, 0));
    assert_eq!(y, f32t(&[3, 2], &[5., 6., 1., 2., 5., 6.]));
    let y = apply2(p.clone(), i64t(&[2, 2], &[1, 0, 2, 2]), |g, p, i| g.gather(p, i, 0));
    assert_eq!(y, f32t(&[2, 2, 2], &[3., 4., 1., 2., 5., 6., 5., 6.]));
    // Empty indices.
    let y = apply2(p, i64t(&[0], &[]), |g, p, i| g.gather(p, i, 0));
    assert_eq!(y, f32t(&[0, 2], &[]));
}

#[test]
fn gather_axis2_and_negative_axis() {
    // p[a][b][c] = 6a + 3b + c.
    let p = iota(&[2, 2, 3]);
    let y = apply2(p.clone(), i64t(&[2], &[2, 0]), |g, p, i| g.gather(p, i, 2));
    assert_eq!(y, i64t(&[2, 2, 2], &[2, 0, 5, 3, 8, 6, 11, 9]));
    let y = apply2(p.clone(), Tensor::scalar(1i64), |g, p, i| g.gather(p, i, 2));
    assert_eq!(y, i64t(&[2, 2], &[1, 4, 7, 10]));
    let y = apply2(p.clone(), i64t(&[2, 1], &[0, 1]), |g, p, i| g.gather(p, i, 2));
    assert_eq!(y, i64t(&[2, 2, 2, 1], &[0, 1, 3, 4, 6, 7, 9, 10]));
    // Middle axis: y[a][j][c] = p[a][idx[j]][c].
    let y = apply2(p, i64t(&[1], &[1]), |g, p, i| g.gather(p, i, 1));
    assert_eq!(y, i64t(&[2, 1, 3], &[3, 4, 5, 9, 10, 11]));

    let q = f64t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let y = apply2(q, i64t(&[2, 2], &[2, 1, 0, 0]), |g, p, i| g.gather(p, i, -1));
    assert_eq!(y, f64t(&[2, 2, 2], &[3., 2., 1., 1., 6., 5., 4., 4.]));
    let b = boolt(&[2, 2], &[true, false, false, true]);
    let y = apply2(b, i64t(&[3], &[1, 1, 0]), |g, p, i| g.gather(p, i, -1));
    assert_eq!(y, boolt(&[2, 3], &[false, false, true, true, true, false]));
}

#[test]
fn gather_batch_dims_1() {
    let p = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let y = apply2(p, i64t(&[2, 2], &[2, 0, 1, 1]), |g, p, i| g.gather_batched(p, i, 1, 1));
    assert_eq!(y, f32t(&[2, 2], &[3., 1., 5., 5.]));
    // p[a][b][c] = 6a + 2b + c; y[a][0][c] = p[a][idx[a]][c].
    let y = apply2(iota(&[2, 3, 2]), i64t(&[2, 1], &[2, 0]), |g, p, i| g.gather_batched(p, i, 1, 1));
    assert_eq!(y, i64t(&[2, 1, 2], &[4, 5, 6, 7]));
    // Axis after a non-batch outer dim: p [2,2,3], axis 2, batch 1, idx [2] per batch.
    // y[a][b][j] = p[a][b][idx[a][j]] = 6a + 3b + idx.
    let y = apply2(iota(&[2, 2, 3]), i64t(&[2, 1], &[2, 0]), |g, p, i| g.gather_batched(p, i, 2, 1));
    assert_eq!(y, i64t(&[2, 2, 1], &[2, 5, 6, 9]));
}

#[test]
fn gather_non_contiguous_params() {
    let a = ndarray::Array2::from_shape_vec((2, 3), vec![1.0f32, 2., 3., 4., 5., 6.]).unwrap();
    let t = Tensor::from_array(a.reversed_axes()); // [[1,4],[2,5],[3,6]], column-major
    let y = apply2(t, i64t(&[2], &[2, 0]), |g, p, i| g.gather(p, i, 0));
    assert_eq!(y, f32t(&[2, 2], &[3., 6., 1., 4.]));
}

#[test]
fn gather_nd_depth_1_2_and_batch_dims() {
    let p = f32t(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let y = apply2(p.clone(), i64t(&[2, 1], &[2, 0]), |g, p, i| g.gather_nd(p, i, 0));
    assert_eq!(y, f32t(&[2, 2], &[5., 6., 1., 2.]));
    let y = apply2(p.clone(), i64t(&[2, 2], &[0, 1, 2, 0]), |g, p, i| g.gather_nd(p, i, 0));
    assert_eq!(y, f32t(&[2], &[2., 5.]));
    let y = apply2(p, i64t(&[1, 2, 2], &[1, 1, 0, 0]), |g, p, i| g.gather_nd(p, i, 0));
    assert_eq!(y, f32t(&[1, 2], &[4., 1.]));
    // p[a][b][c] = 4a + 2b + c.
    let y = apply2(iota(&[2, 2, 2]), i64t(&[2, 1, 1], &[1, 0]), |g, p, i| g.gather_nd(p, i, 1));
    assert_eq!(y, i64t(&[2, 1, 2], &[2, 3, 4, 5]));
    let y = apply2(iota(&[2, 2, 2]), i64t(&[2, 2], &[1, 0, 0, 1]), |g, p, i| g.gather_nd(p, i, 1));
    assert_eq!(y, i64t(&[2], &[2, 5]));
}

#[test]
fn scatter_nd_adds_duplicates() {
    let y = apply2(i64t(&[3, 1], &[1, 3, 1]), f32t(&[3], &[10., 20., 5.]), |g, i, u| g.scatter_nd(i, u, &[5]));
    assert_eq!(y, f32t(&[5], &[0., 15., 0., 20., 0.]));
    let y = apply2(i64t(&[2, 1], &[0, 0]), f64t(&[2, 2], &[1., 2., 3., 4.]), |g, i, u| g.scatter_nd(i, u, &[2, 2]));
    assert_eq!(y, f64t(&[2, 2], &[4., 6., 0., 0.]));
    let y = apply2(i64t(&[3, 2], &[0, 1, 1, 0, 0, 1]), i64t(&[3], &[1, 2, 3]), |g, i, u| g.scatter_nd(i, u, &[2, 2]));
    assert_eq!(y, i64t(&[2, 2], &[0, 4, 2, 0]));
}

#[test]
fn tensor_scatter_update_last_wins_and_keeps_input() {
    let t = f32t(&[4], &[1., 2., 3., 4.]);
    let y = apply3(t.clone(), i64t(&[3, 1], &[1, 3, 1]), f32t(&[3], &[10., 20., 30.]), |g, t, i, u| {
        g.tensor_scatter_update(t, i, u)
    });
    assert_eq!(y, f32t(&[4], &[1., 30., 3., 20.]));
    assert_eq!(t, f32t(&[4], &[1., 2., 3., 4.]), "the shared input buffer must not change");

    let t = f32t(&[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let y = apply3(t, i64t(&[2, 1], &[2, 0]), f32t(&[2, 2], &[7., 8., 9., 10.]), |g, t, i, u| {
        g.tensor_scatter_update(t, i, u)
    });
    assert_eq!(y, f32t(&[3, 2], &[9., 10., 3., 4., 7., 8.]));

    let y = apply3(boolt(&[3], &[false; 3]), i64t(&[1, 1], &[1]), boolt(&[1], &[true]), |g, t, i, u| {
        g.tensor_scatter_update(t, i, u)
    });
    assert_eq!(y, boolt(&[3], &[false, true, false]));
}

#[test]
fn tensor_scatter_add_values() {
    let y =
        apply3(f64t(&[4], &[1., 2., 3., 4.]), i64t(&[3, 1], &[1, 3, 1]), f64t(&[3], &[10., 20., 30.]), |g, t, i, u| {
            g.tensor_scatter_add(t, i, u)
        });
    assert_eq!(y, f64t(&[4], &[1., 42., 3., 24.]));
    let y = apply3(iota(&[2, 2]), i64t(&[2, 2], &[1, 1, 1, 1]), i64t(&[2], &[10, 100]), |g, t, i, u| {
        g.tensor_scatter_add(t, i, u)
    });
    assert_eq!(y, i64t(&[2, 2], &[0, 1, 2, 113]));
}

#[test]
fn tensor_scatter_on_fed_input_runs_in_place() {
    // A fed tensor whose only reference goes to the op: the result must still be right.
    let mut g = Graph::new();
    let t = g.input("t", DType::F32, [3]);
    let i = g.constant(i64t(&[1, 1], &[0]));
    let u = g.constant(f32t(&[1], &[9.]));
    let y = g.tensor_scatter_add(t, i, u).unwrap();
    let out = run_recorded(&g, &[y], &[(t, f32t(&[3], &[1., 2., 3.]))]).unwrap();
    assert_eq!(out[0], f32t(&[3], &[10., 2., 3.]));
}

#[test]
fn unsorted_segment_ops_1d_with_empty_and_negative_ids() {
    let d = f32t(&[5], &[1., 2., 3., 4., 5.]);
    let ids = i64t(&[5], &[0, 2, 0, -1, 2]);
    let inf = f32::INFINITY;
    let y = apply2(d.clone(), ids.clone(), |g, d, s| g.unsorted_segment_sum(d, s, 4));
    assert_eq!(y, f32t(&[4], &[4., 0., 7., 0.]));
    let y = apply2(d.clone(), ids.clone(), |g, d, s| g.unsorted_segment_max(d, s, 4));
    assert_eq!(y, f32t(&[4], &[3., -inf, 5., -inf]));
    let y = apply2(d.clone(), ids.clone(), |g, d, s| g.unsorted_segment_min(d, s, 4));
    assert_eq!(y, f32t(&[4], &[1., inf, 2., inf]));
    let y = apply2(d, ids, |g, d, s| g.unsorted_segment_prod(d, s, 4));
    assert_eq!(y, f32t(&[4], &[3., 1., 10., 1.]));
}

#[test]
fn unsorted_segment_ops_rows_and_i64() {
    let d = iota(&[3, 2]); // [[0,1],[2,3],[4,5]]
    let ids = i64t(&[3], &[1, 1, 0]);
    let y = apply2(d.clone(), ids.clone(), |g, d, s| g.unsorted_segment_sum(d, s, 3));
    assert_eq!(y, i64t(&[3, 2], &[4, 5, 2, 4, 0, 0]));
    let y = apply2(d.clone(), ids.clone(), |g, d, s| g.unsorted_segment_max(d, s, 3));
    assert_eq!(y, i64t(&[3, 2], &[4, 5, 2, 3, i64::MIN, i64::MIN]));
    let y = apply2(d.clone(), ids.clone(), |g, d, s| g.unsorted_segment_min(d, s, 3));
    assert_eq!(y, i64t(&[3, 2], &[4, 5, 0, 1, i64::MAX, i64::MAX]));
    let y = apply2(d, ids, |g, d, s| g.unsorted_segment_prod(d, s, 3));
    assert_eq!(y, i64t(&[3, 2], &[4, 5, 0, 3, 1, 1]));
    // Rank-2 ids (a prefix of data's shape).
    let d = f64t(&[2, 2], &[1., 2., 3., 4.]);
    let y = apply2(d, i64t(&[2, 2], &[0, 1, 1, -1]), |g, d, s| g.unsorted_segment_sum(d, s, 2));
    assert_eq!(y, f64t(&[2], &[1., 5.]));
    // NaN propagates through max.
    let y = apply2(f64t(&[2], &[f64::NAN, 1.]), i64t(&[2], &[0, 0]), |g, d, s| g.unsorted_segment_max(d, s, 1));
    assert!(y.to_vec::<f64>().unwrap()[0].is_nan());
}

#[test]
fn dynamic_update_slice_values() {
    let y = apply3(
        Tensor::zeros(DType::F32, &[3, 4]).unwrap(),
        f32t(&[2, 2], &[1., 2., 3., 4.]),
        i64t(&[2], &[1, 2]),
        |g, o, u, s| g.dynamic_update_slice(o, u, s),
    );
    assert_eq!(y, f32t(&[3, 4], &[0., 0., 0., 0., 0., 0., 1., 2., 0., 0., 3., 4.]));
    let y = apply3(iota(&[4]), i64t(&[2], &[-1, -2]), i64t(&[1], &[0]), |g, o, u, s| g.dynamic_update_slice(o, u, s));
    assert_eq!(y, i64t(&[4], &[-1, -2, 2, 3]));
    // The update may end exactly at the bound.
    let y = apply3(iota(&[4]), i64t(&[2], &[-1, -2]), i64t(&[1], &[2]), |g, o, u, s| g.dynamic_update_slice(o, u, s));
    assert_eq!(y, i64t(&[4], &[0, 1, -1, -2]));
}

#[test]
fn top_k_ties_lower_index_first() {
    let mut g = Graph::new();
    let x = g.constant(f32t(&[2, 5], &[1., 3., 3., 2., 0., 5., -1., 5., 5., 4.]));
    let (v, i) = g.top_k(x, 3).unwrap();
    let (v1, i1) = g.top_k(x, 1).unwrap();
    let (v0, _) = g.top_k(x, 0).unwrap();
    let out = eval(&g, &[v, i, v1, i1, v0]);
    assert_eq!(out[0], f32t(&[2, 3], &[3., 3., 2., 5., 5., 5.]));
    assert_eq!(out[1], i64t(&[2, 3], &[1, 2, 3, 0, 2, 3]));
    assert_eq!(out[2], f32t(&[2, 1], &[3., 5.]));
    assert_eq!(out[3], i64t(&[2, 1], &[1, 0]));
    assert_eq!(out[4], f32t(&[2, 0], &[]));

    let mut g = Graph::new();
    let x = g.constant(i64t(&[4], &[3, 1, 4, 2]));
    let (v, i) = g.top_k(x, 4).unwrap();
    let unsorted = g.add_op_multi(Op::Index(IndexOp::TopK { k: 2, sorted: false }), &[x]).unwrap();
    let out = eval(&g, &[v, i, unsorted[0], unsorted[1]]);
    assert_eq!(out[0], i64t(&[4], &[4, 3, 2, 1]));
    assert_eq!(out[1], i64t(&[4], &[2, 0, 3, 1]));
    assert_eq!(out[2], i64t(&[2], &[3, 4]), "sorted=false: ascending index order");
    assert_eq!(out[3], i64t(&[2], &[0, 2]));

    // NaN ranks above every number.
    let mut g = Graph::new();
    let x = g.constant(f64t(&[3], &[1., f64::NAN, 2.]));
    let (v, i) = g.top_k(x, 2).unwrap();
    let out = eval(&g, &[v, i]);
    let vals = out[0].to_vec::<f64>().unwrap();
    assert!(vals[0].is_nan() && vals[1] == 2.0, "{vals:?}");
    assert_eq!(out[1], i64t(&[2], &[1, 2]));
}

#[test]
fn nonzero_bool_and_f32() {
    let mut g = Graph::new();
    let b = g.constant(boolt(&[2, 3], &[true, false, true, false, false, true]));
    let y = g.nonzero(b).unwrap();
    assert_eq!(g.shape(y).unwrap(), Shape::from_dims([Dim::unknown(), Dim::fixed(2)]));
    assert_eq!(eval1(&g, y), i64t(&[3, 2], &[0, 0, 0, 2, 1, 2]));

    let y = apply1(f32t(&[4], &[0., -1.5, 0., 2.]), |g, x| g.nonzero(x));
    assert_eq!(y, i64t(&[2, 1], &[1, 3]));
    // -0.0 is zero, NaN is nonzero.
    let y = apply1(f32t(&[2], &[-0.0, f32::NAN]), |g, x| g.nonzero(x));
    assert_eq!(y, i64t(&[1, 1], &[1]));
    let y = apply1(boolt(&[2, 2], &[false; 4]), |g, x| g.nonzero(x));
    assert_eq!(y, i64t(&[0, 2], &[]));
    // p[a][b][c] = 4a + 2b + c: nonzero everywhere but [0,0,0].
    let y = apply1(iota(&[2, 1, 2]), |g, x| g.nonzero(x));
    assert_eq!(y, i64t(&[3, 3], &[0, 0, 1, 1, 0, 0, 1, 0, 1]));
    let y = apply1(Tensor::scalar(5i64), |g, x| g.nonzero(x));
    assert_eq!(y, i64t(&[1, 0], &[]));
}

#[test]
fn nonzero_per_batch_element() {
    // two elements with two nonzeros each: coordinates within each element
    let x = f64t(&[2, 2, 2], &[0., 1., 2., 0., 3., 0., 0., 4.]);
    let mut g = Graph::new();
    let c = g.constant(x.clone());
    let y = g.nonzero_batched(c, 1).unwrap();
    assert_eq!(g.shape(y).unwrap(), Shape::from_dims([Dim::fixed(2), Dim::unknown(), Dim::fixed(2)]));
    assert_eq!(eval1(&g, y), i64t(&[2, 2, 2], &[0, 1, 1, 0, 0, 0, 1, 1]));
    // two batch dims over rows of a bool mask (one true per row); scalar elements
    let m = boolt(&[2, 2, 3], &[true, false, false, false, false, true, false, true, false, true, false, false]);
    assert_eq!(apply1(m, |g, x| g.nonzero_batched(x, 2)), i64t(&[2, 2, 1, 1], &[0, 2, 1, 0]));
    assert_eq!(apply1(boolt(&[3], &[true; 3]), |g, x| g.nonzero_batched(x, 1)), i64t(&[3, 1, 0], &[]));
    // no elements, empty elements, batch_dims 0 is plain nonzero
    assert_eq!(
        apply1(Tensor::zeros(DType::F64, &[0, 3]).unwrap(), |g, x| g.nonzero_batched(x, 1)),
        i64t(&[0, 0, 1], &[])
    );
    assert_eq!(
        apply1(Tensor::zeros(DType::F64, &[2, 0]).unwrap(), |g, x| g.nonzero_batched(x, 1)),
        i64t(&[2, 0, 1], &[])
    );
    assert_eq!(apply1(x, |g, x| g.nonzero_batched(x, 0)).shape(), &[4, 3]);
}

#[test]
fn nonzero_batch_elements_with_different_counts_are_an_error() {
    let mut g = Graph::new();
    let c = g.constant(f64t(&[3, 2], &[1., 1., 0., 1., 1., 1.]));
    let y = g.nonzero_batched(c, 1).unwrap();
    let e = run_recorded(&g, &[y], &[]).unwrap_err();
    assert_shape_err(&e, "nonzero");
    assert!(e.to_string().contains("batch element 1 has 1 nonzero elements, element 0 has 2"), "{e}");
    let e = g.nonzero_batched(c, 3).unwrap_err();
    assert_shape_err(&e, "nonzero");
}

#[test]
fn gather_index_out_of_range_at_run_time() {
    let mut g = Graph::new();
    let p = g.constant(f32t(&[3], &[1., 2., 3.]));
    let i = g.input("i", DType::I64, [Dim::unknown()]);
    let y = g.gather(p, i, 0).unwrap();
    let ok = run_recorded(&g, &[y], &[(i, i64t(&[2], &[2, 0]))]).unwrap();
    assert_eq!(ok[0], f32t(&[2], &[3., 1.]));
    let e = run_recorded(&g, &[y], &[(i, i64t(&[2], &[0, 3]))]).unwrap_err();
    assert_oob(e.root(), "gather", 3, 3);
    let e = run_recorded(&g, &[y], &[(i, i64t(&[1], &[-1]))]).unwrap_err();
    assert_oob(e.root(), "gather", -1, 3);
}

#[test]
fn other_index_errors_name_the_op() {
    let p = iota(&[2, 2]);
    let e = run_err(vec![p.clone(), i64t(&[1, 2], &[0, 2])], |g, v| g.gather_nd(v[0], v[1], 0));
    assert_oob(&e, "gather_nd", 2, 2);
    let e = run_err(vec![p.clone(), i64t(&[1, 1], &[-1])], |g, v| g.gather_nd(v[0], v[1], 0));
    assert_oob(&e, "gather_nd", -1, 2);
    let e = run_err(vec![i64t(&[1, 1], &[4]), i64t(&[1], &[1])], |g, v| g.scatter_nd(v[0], v[1], &[4]));
    assert_oob(&e, "scatter_nd", 4, 4);
    let e = run_err(vec![iota(&[3]), i64t(&[1, 1], &[-2]), i64t(&[1], &[1])], |g, v| {
        g.tensor_scatter_update(v[0], v[1], v[2])
    });
    assert_oob(&e, "tensor_scatter_update", -2, 3);
    let e =
        run_err(vec![iota(&[3]), i64t(&[1, 1], &[3]), i64t(&[1], &[1])], |g, v| g.tensor_scatter_add(v[0], v[1], v[2]));
    assert_oob(&e, "tensor_scatter_add", 3, 3);
    let e = run_err(vec![iota(&[3]), i64t(&[3], &[0, 2, 1])], |g, v| g.unsorted_segment_sum(v[0], v[1], 2));
    assert_oob(&e, "unsorted_segment_sum", 2, 2);
    let e = run_err(vec![iota(&[3]), i64t(&[3], &[0, 5, 1])], |g, v| g.unsorted_segment_max(v[0], v[1], 2));
    assert_oob(&e, "unsorted_segment_max", 5, 2);
    // Update [2] in operand [3]: valid starts are [0, 2); no clamping.
    let e = run_err(vec![iota(&[3]), iota(&[2]), i64t(&[1], &[2])], |g, v| g.dynamic_update_slice(v[0], v[1], v[2]));
    assert_oob(&e, "dynamic_update_slice", 2, 2);
    let e = run_err(vec![iota(&[3]), iota(&[2]), i64t(&[1], &[-1])], |g, v| g.dynamic_update_slice(v[0], v[1], v[2]));
    assert_oob(&e, "dynamic_update_slice", -1, 2);
}

#[test]
fn top_k_k_too_big() {
    let mut g = Graph::new();
    let x = g.constant(f32t(&[2, 3], &[0.; 6]));
    assert_shape_err(&g.top_k(x, 4).unwrap_err(), "top_k");
    // Dynamic last dim: checked at run time.
    let x = g.input("x", DType::F32, [Dim::unknown()]);
    let (v, _) = g.top_k(x, 4).unwrap();
    let e = run_recorded(&g, &[v], &[(x, f32t(&[3], &[1., 2., 3.]))]).unwrap_err();
    assert_shape_err(&e, "top_k");
}

#[test]
fn static_shape_and_dtype_errors() {
    let mut g = Graph::new();
    let p = g.constant(iota(&[2, 3]));
    let i = g.constant(i64t(&[3], &[0, 1, 0]));
    let fi = g.constant(f32t(&[2], &[0., 1.]));
    let e = g.gather(p, i, 2).unwrap_err();
    assert!(matches!(e.root(), Error::Axis { op, axis: 2, rank: 2 } if op == "gather"), "{e}");
    assert!(matches!(g.gather(p, fi, 0).unwrap_err().root(), Error::DType { op, .. } if op == "gather"));
    // Batch dim mismatch: 2 vs 3.
    assert_shape_err(&g.gather_batched(p, i, 1, 1).unwrap_err(), "gather");
    // batch_dims > axis.
    let i2 = g.constant(i64t(&[2, 1], &[0, 1]));
    assert_shape_err(&g.gather_batched(p, i2, 0, 1).unwrap_err(), "gather");
    // Index depth 3 > rank 2.
    let i3 = g.constant(i64t(&[1, 3], &[0, 0, 0]));
    assert_shape_err(&g.gather_nd(p, i3, 0).unwrap_err(), "gather_nd");
    // Updates of the wrong shape.
    let idx = g.constant(i64t(&[2, 1], &[0, 1]));
    let u = g.constant(f32t(&[3], &[1., 2., 3.]));
    assert_shape_err(&g.scatter_nd(idx, u, &[4]).unwrap_err(), "scatter_nd");
    let t = g.constant(f32t(&[4], &[0.; 4]));
    let ui = g.constant(i64t(&[2], &[1, 2]));
    let e = g.tensor_scatter_update(t, idx, ui).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, .. } if op == "tensor_scatter_update"), "{e}");
    let b = g.constant(boolt(&[2], &[true, false]));
    let bi = g.constant(i64t(&[2], &[0, 1]));
    let e = g.unsorted_segment_sum(b, bi, 2).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, .. } if op == "unsorted_segment_sum"), "{e}");
    // ids not a prefix of data.
    assert_shape_err(&g.unsorted_segment_min(p, i, 2).unwrap_err(), "unsorted_segment_min");
    // Update larger than operand; start of the wrong length.
    let big = g.constant(iota(&[3, 3]));
    let s2 = g.constant(i64t(&[2], &[0, 0]));
    let s1 = g.constant(i64t(&[1], &[0]));
    assert_shape_err(&g.dynamic_update_slice(p, big, s2).unwrap_err(), "dynamic_update_slice");
    assert_shape_err(&g.dynamic_update_slice(p, p, s1).unwrap_err(), "dynamic_update_slice");
}

#[test]
fn dynamic_batch_dim_mismatch_is_a_run_time_shape_error() {
    let mut g = Graph::new();
    let p = g.constant(iota(&[2, 3]));
    let i = g.input("i", DType::I64, [Dim::unknown(), Dim::fixed(1)]);
    let y = g.gather_batched(p, i, 1, 1).unwrap();
    let e = run_recorded(&g, &[y], &[(i, i64t(&[3, 1], &[0, 0, 0]))]).unwrap_err();
    assert_shape_err(&e, "gather");
}

#[test]
fn display_names_attributes() {
    assert_eq!(IndexOp::Gather { axis: -1, batch_dims: 1 }.to_string(), "gather{axis=-1,batch_dims=1}");
    assert_eq!(IndexOp::ScatterNd { shape: vec![2, 3] }.to_string(), "scatter_nd{shape=[2, 3]}");
    assert_eq!(IndexOp::UnsortedSegmentProd { num_segments: 4 }.to_string(), "unsorted_segment_prod{num_segments=4}");
    assert_eq!(IndexOp::TopK { k: 2, sorted: true }.to_string(), "top_k{k=2,sorted=true}");
    assert_eq!(IndexOp::NonZero { batch_dims: 0 }.to_string(), "nonzero");
    assert_eq!(IndexOp::NonZero { batch_dims: 2 }.to_string(), "nonzero{batch_dims=2}");
    assert_eq!(IndexKind::ALL.len(), 12);
}
