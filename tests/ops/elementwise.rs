//! Value tests for the elementwise family: select, cast, clip (expected values by hand).

use crate::common::*;
use pfor::ops::ElementwiseOp;
use pfor::prelude::*;

fn apply3(
    a: Tensor,
    b: Tensor,
    c: Tensor,
    f: impl FnOnce(&mut Graph, ValueId, ValueId, ValueId) -> Result<ValueId>,
) -> Tensor {
    let mut g = Graph::new();
    let (x, y, z) = (g.constant(a), g.constant(b), g.constant(c));
    let r = f(&mut g, x, y, z).unwrap();
    g.verify().unwrap();
    eval1(&g, r)
}

#[test]
fn select_same_shape() {
    let c = boolt(&[4], &[true, false, false, true]);
    let x = f32t(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let y = f32t(&[4], &[-1.0, -2.0, -3.0, -4.0]);
    assert_eq!(apply3(c, x, y, |g, c, x, y| g.select(c, x, y)), f32t(&[4], &[1.0, -2.0, -3.0, 4.0]));
}

#[test]
fn select_three_way_broadcasting() {
    // cond[2,1], x[1,3], y scalar -> [2,3].
    let c = boolt(&[2, 1], &[true, false]);
    let x = i64t(&[1, 3], &[1, 2, 3]);
    let y = Tensor::scalar(0i64);
    assert_eq!(apply3(c, x, y, |g, c, x, y| g.select(c, x, y)), i64t(&[2, 3], &[1, 2, 3, 0, 0, 0]));
    // cond[3], x[2,1], y[2,3].
    let c = boolt(&[3], &[false, true, false]);
    let x = f64t(&[2, 1], &[10.0, 20.0]);
    let y = f64t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(apply3(c, x, y, |g, c, x, y| g.select(c, x, y)), f64t(&[2, 3], &[1.0, 10.0, 3.0, 4.0, 20.0, 6.0]));
    // bool payload.
    let c = boolt(&[2], &[true, false]);
    let x = boolt(&[2], &[false, false]);
    let y = Tensor::scalar(true);
    assert_eq!(apply3(c, x, y, |g, c, x, y| g.select(c, x, y)), boolt(&[2], &[false, true]));
}

#[test]
fn select_in_place_paths() {
    // x or y computed in the graph (owned buffers of the output shape).
    let mut g = Graph::new();
    let c = g.constant(boolt(&[2, 2], &[true, false, false, true]));
    let a = g.constant(f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]));
    let s = g.constant(Tensor::scalar(5.0f32));
    let x1 = g.neg(a).unwrap();
    let left = g.select(c, x1, s).unwrap();
    let y2 = g.neg(a).unwrap();
    let right = g.select(c, s, y2).unwrap();
    let out = eval(&g, &[left, right, a]);
    assert_eq!(out[0], f32t(&[2, 2], &[-1.0, 5.0, 5.0, -4.0]));
    assert_eq!(out[1], f32t(&[2, 2], &[5.0, -2.0, -3.0, 5.0]));
    assert_eq!(out[2], f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]));
}

#[test]
fn select_errors() {
    let mut g = Graph::new();
    let c = g.constant(boolt(&[2], &[true, false]));
    let f = g.constant(f32t(&[2], &[1.0, 2.0]));
    let i = g.constant(i64t(&[2], &[1, 2]));
    let f3 = g.constant(f32t(&[3], &[1.0, 2.0, 3.0]));
    let e = g.select(f, f, f).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::F32, .. } if op == "select"), "{e}");
    let e = g.select(c, f, i).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::I64, .. } if op == "select"), "{e}");
    assert!(e.to_string().contains("f32"), "{e}");
    let e = g.select(c, f, f3).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "select"), "{e}");
    let e = g.add_op(Op::Elementwise(ElementwiseOp::Select), &[c, f]).unwrap_err();
    assert!(matches!(e.root(), Error::Arity { got: 2, .. }), "{e}");
}

#[test]
fn cast_between_dtypes() {
    let f = f32t(&[4], &[1.7, -1.7, 2.5, 0.0]);
    let cast = |t: Tensor, to: DType| apply1(t, |g, x| g.cast(x, to));
    assert_eq!(cast(f.clone(), DType::I64), i64t(&[4], &[1, -1, 2, 0]));
    assert_eq!(cast(f.clone(), DType::Bool), boolt(&[4], &[true, true, true, false]));
    assert_eq!(cast(f.clone(), DType::F32), f.clone());
    let d = cast(f, DType::F64);
    assert_close(&d, &f64t(&[4], &[1.7, -1.7, 2.5, 0.0]), 1e-6);
    assert_eq!(cast(f64t(&[3], &[-0.5, 0.0, 3.99]), DType::I64), i64t(&[3], &[0, 0, 3]));
    assert_eq!(cast(f64t(&[3], &[0.0, 0.5, -1.0]), DType::Bool), boolt(&[3], &[false, true, true]));
    let b = boolt(&[2, 1], &[true, false]);
    assert_eq!(cast(b.clone(), DType::F32), f32t(&[2, 1], &[1.0, 0.0]));
    assert_eq!(cast(b, DType::I64), i64t(&[2, 1], &[1, 0]));
    let i = i64t(&[3], &[-3, 0, 7]);
    assert_eq!(cast(i.clone(), DType::F64), f64t(&[3], &[-3.0, 0.0, 7.0]));
    assert_eq!(cast(i.clone(), DType::Bool), boolt(&[3], &[true, false, true]));
    assert_eq!(cast(i, DType::F32), f32t(&[3], &[-3.0, 0.0, 7.0]));
    assert_eq!(cast(Tensor::scalar(2.0f64), DType::F32), Tensor::scalar(2.0f32));
}

#[test]
fn cast_infer_and_display() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [Dim::unknown(), Dim::fixed(2)]);
    let y = g.cast(x, DType::I64).unwrap();
    assert_eq!(g.value_type(y).unwrap(), &TensorType::new(DType::I64, [Dim::unknown(), Dim::fixed(2)]));
    assert_eq!(ElementwiseOp::Cast { to: DType::F32 }.to_string(), "cast{to=f32}");
    assert_eq!(ElementwiseOp::Clip.to_string(), "clip");
    assert_eq!(ElementwiseOp::Select.to_string(), "select");
}

#[test]
fn clip_with_scalar_bounds() {
    let x = f32t(&[5], &[-2.0, 0.0, 0.5, 1.0, 3.0]);
    let got = apply3(x, Tensor::scalar(0.0f32), Tensor::scalar(1.0f32), |g, x, l, h| g.clip(x, l, h));
    assert_eq!(got, f32t(&[5], &[0.0, 0.0, 0.5, 1.0, 1.0]));
    let x = i64t(&[2, 2], &[-5, 3, 10, 7]);
    let got = apply3(x, Tensor::scalar(0i64), Tensor::scalar(7i64), |g, x, l, h| g.clip(x, l, h));
    assert_eq!(got, i64t(&[2, 2], &[0, 3, 7, 7]));
    // lo > hi: hi wins (min(max(x, lo), hi)).
    let x = f64t(&[2], &[0.0, 10.0]);
    let got = apply3(x, Tensor::scalar(5.0f64), Tensor::scalar(2.0f64), |g, x, l, h| g.clip(x, l, h));
    assert_eq!(got, f64t(&[2], &[2.0, 2.0]));
}

#[test]
fn clip_with_broadcast_bounds_and_nan() {
    // Per-column lo[3], scalar hi.
    let x = f64t(&[2, 3], &[0.0, 5.0, -1.0, 3.0, 1.0, 9.0]);
    let lo = f64t(&[3], &[1.0, 2.0, 3.0]);
    let got = apply3(x, lo, Tensor::scalar(4.0f64), |g, x, l, h| g.clip(x, l, h));
    assert_eq!(got, f64t(&[2, 3], &[1.0, 4.0, 3.0, 3.0, 2.0, 4.0]));
    let got =
        apply3(f64t(&[1], &[f64::NAN]), Tensor::scalar(0.0f64), Tensor::scalar(1.0f64), |g, x, l, h| g.clip(x, l, h));
    assert!(got.to_vec::<f64>().unwrap()[0].is_nan());
}

#[test]
fn clip_in_place_path() {
    let mut g = Graph::new();
    let a = g.constant(f32t(&[3], &[-2.0, 0.25, 2.0]));
    let lo = g.constant(Tensor::scalar(-1.0f32));
    let hi = g.constant(Tensor::scalar(1.0f32));
    let n = g.neg(a).unwrap();
    let c = g.clip(n, lo, hi).unwrap();
    let out = eval(&g, &[c, a]);
    assert_eq!(out[0], f32t(&[3], &[1.0, -0.25, -1.0]));
    assert_eq!(out[1], f32t(&[3], &[-2.0, 0.25, 2.0]));
}

#[test]
fn clip_errors() {
    let mut g = Graph::new();
    let x = g.constant(f32t(&[3], &[0.0; 3]));
    let s = g.constant(Tensor::scalar(0.0f32));
    let si = g.constant(Tensor::scalar(0i64));
    let b = g.constant(boolt(&[3], &[true; 3]));
    let big = g.constant(f32t(&[2, 3], &[0.0; 6]));
    let e = g.clip(b, b, b).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::Bool, .. } if op == "clip"), "{e}");
    let e = g.clip(x, si, s).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::I64, .. } if op == "clip"), "{e}");
    // Bounds must broadcast TO x: [2,3] does not, even though [3] and [2,3] broadcast.
    let e = g.clip(x, s, big).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "clip"), "{e}");
    assert!(e.to_string().contains("hi"), "{e}");
    // Dynamic dim of x: checked at run time.
    let xd = g.input("xd", DType::F32, [Dim::unknown()]);
    let lo3 = g.constant(f32t(&[3], &[0.0; 3]));
    let c = g.clip(xd, lo3, s).unwrap();
    let e = run_recorded(&g, &[c], &[(xd, f32t(&[1], &[1.0]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "clip"), "{e}");
    let ok = run_recorded(&g, &[c], &[(xd, f32t(&[3], &[-1.0, 2.0, -3.0]))]).unwrap();
    assert_eq!(ok[0], f32t(&[3], &[0.0, 0.0, 0.0]));
}

#[test]
fn scalar_conveniences() {
    let x = f32t(&[2], &[1.0, -2.0]);
    assert_eq!(apply1(x.clone(), |g, x| g.add_scalar(x, 0.5)), f32t(&[2], &[1.5, -1.5]));
    assert_eq!(apply1(x.clone(), |g, x| g.mul_scalar(x, -3.0)), f32t(&[2], &[-3.0, 6.0]));
    let i = i64t(&[3], &[1, 2, 3]);
    assert_eq!(apply1(i.clone(), |g, x| g.add_scalar(x, -4.0)), i64t(&[3], &[-3, -2, -1]));
    assert_eq!(apply1(i.clone(), |g, x| g.mul_scalar(x, 2.0)), i64t(&[3], &[2, 4, 6]));
    let mut g = Graph::new();
    let xv = g.constant(x);
    let s = g.scalar_like(xv, 2.5).unwrap();
    assert_eq!(g.value_type(s).unwrap(), &TensorType::scalar(DType::F32));
    assert_eq!(eval1(&g, s), Tensor::scalar(2.5f32));
    let iv = g.constant(i);
    let e = g.add_scalar(iv, 0.5).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let bv = g.constant(boolt(&[1], &[true]));
    assert!(g.scalar_like(bv, 1.0).is_ok());
    assert!(matches!(g.scalar_like(bv, 2.0).unwrap_err(), Error::InvalidArgument(_)));
}
