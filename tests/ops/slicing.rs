//! Value tests for the slicing family (expected values written out by hand).

use crate::common::*;
use pfor::ops::slicing::{AxisSelect, PadMode, SlicingKind, SlicingOp, StridedSliceSpec};
use pfor::prelude::*;

/// `0..n` as an i64 tensor of `shape`.
fn ar(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    i64t(shape, &(0..n as i64).collect::<Vec<_>>())
}

/// Assert the root error matches `pat` and is raised by op `op`.
macro_rules! assert_err {
    ($e:expr, $pat:pat, $op:expr) => {{
        let e: Error = $e;
        assert!(matches!(e.root(), $pat), "unexpected error: {e}");
        assert!(e.root().to_string().starts_with(&format!("{}:", $op)), "error does not name {}: {e}", $op);
    }};
}

fn build_err(x: Tensor, f: impl FnOnce(&mut Graph, ValueId) -> Result<ValueId>) -> Error {
    let mut g = Graph::new();
    let c = g.constant(x);
    f(&mut g, c).unwrap_err()
}

/// Build `f` on an input of `dtype`/`shape`, then run it fed with `feed`.
fn run_fed(
    dtype: DType,
    shape: impl Into<Shape>,
    feed: Tensor,
    f: impl FnOnce(&mut Graph, ValueId) -> Result<ValueId>,
) -> (Shape, Result<Vec<Tensor>>) {
    let mut g = Graph::new();
    let x = g.input("x", dtype, shape);
    let y = f(&mut g, x).unwrap();
    (g.shape(y).unwrap(), run_recorded(&g, &[y], &[(x, feed)]))
}

fn ss(x: Tensor, spec: StridedSliceSpec) -> Tensor {
    apply1(x, |g, x| g.strided_slice(x, &spec))
}

// ---------------------------------------------------------------- concat

#[test]
fn concat_values() {
    let a = ar(&[2, 3]);
    let b = i64t(&[2, 2], &[10, 11, 12, 13]);
    let want = i64t(&[2, 5], &[0, 1, 2, 10, 11, 3, 4, 5, 12, 13]);
    assert_eq!(apply2(a.clone(), b.clone(), |g, x, y| g.concat(&[x, y], 1)), want);
    assert_eq!(apply2(a.clone(), b, |g, x, y| g.concat(&[x, y], -1)), want);
    let c = i64t(&[1, 3], &[20, 21, 22]);
    let got = apply2(a.clone(), c, |g, x, y| {
        let e = g.constant(i64t(&[0, 3], &[]));
        g.concat(&[y, e, x, y], 0)
    });
    assert_eq!(got, i64t(&[4, 3], &[20, 21, 22, 0, 1, 2, 3, 4, 5, 20, 21, 22]));
    assert_eq!(apply1(a.clone(), |g, x| g.concat(&[x], 0)), a);
    let f = f64t(&[2], &[0.5, -1.0]);
    assert_eq!(apply1(f, |g, x| g.concat(&[x, x], 0)), f64t(&[4], &[0.5, -1.0, 0.5, -1.0]));
    let b1 = boolt(&[1, 1], &[true]);
    assert_eq!(apply2(b1, boolt(&[1, 1], &[false]), |g, x, y| g.concat(&[x, y], 1)), boolt(&[1, 2], &[true, false]));
}

#[test]
fn concat_dynamic_dims() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(2)]);
    let y = g.input("y", DType::F32, [Dim::dynamic("n"), Dim::fixed(1)]);
    let z = g.concat(&[x, y], 1).unwrap();
    assert_eq!(g.shape(z).unwrap(), Shape::from([Dim::dynamic("n"), Dim::fixed(3)]));
    let w = g.concat(&[x, x], 0).unwrap();
    assert_eq!(g.shape(w).unwrap(), Shape::from([Dim::unknown(), Dim::fixed(2)]));
    let fx = f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let got = run_recorded(&g, &[z], &[(x, fx.clone()), (y, f32t(&[2, 1], &[5.0, 6.0]))]).unwrap();
    assert_eq!(got[0], f32t(&[2, 3], &[1.0, 2.0, 5.0, 3.0, 4.0, 6.0]));
    // Rows disagree at run time: a named dim is checked across the feeds, ...
    let e = run_recorded(&g, &[z], &[(x, fx.clone()), (y, f32t(&[3, 1], &[5.0, 6.0, 7.0]))]).unwrap_err();
    assert_err!(e, Error::Shape { .. }, "feed");
    // ... anonymous ones by the kernel.
    let a = g.input("a", DType::F32, [Dim::unknown(), Dim::fixed(1)]);
    let za = g.concat(&[x, a], 1).unwrap();
    let e = run_recorded(&g, &[za], &[(x, fx), (a, f32t(&[3, 1], &[5.0, 6.0, 7.0]))]).unwrap_err();
    assert_err!(e, Error::Shape { .. }, "concat");
}

#[test]
fn concat_errors() {
    let mut g = Graph::new();
    let a = g.constant(ar(&[2, 3]));
    let b = g.constant(ar(&[6]));
    let c = g.constant(ar(&[3, 3]));
    let f = g.constant(f32t(&[2, 3], &[0.0; 6]));
    assert_err!(g.concat(&[a, b], 0).unwrap_err(), Error::Shape { .. }, "concat");
    assert_err!(g.concat(&[a, c], 1).unwrap_err(), Error::Shape { .. }, "concat");
    assert_err!(g.concat(&[a, f], 0).unwrap_err(), Error::DType { got: DType::F32, .. }, "concat");
    assert_err!(g.concat(&[a, a], 2).unwrap_err(), Error::Axis { axis: 2, rank: 2, .. }, "concat");
    assert_err!(g.concat(&[], 0).unwrap_err(), Error::Arity { got: 0, .. }, "concat");
    let s = g.constant(Tensor::scalar(1i64));
    assert_err!(g.concat(&[s, s], 0).unwrap_err(), Error::Axis { .. }, "concat");
    // Same axis sizes are fine.
    let ok = g.concat(&[a, c], 0).unwrap();
    assert_eq!(g.shape(ok).unwrap(), Shape::fixed(&[5, 3]));
}

#[test]
fn concat_large_and_strided_parts() {
    // big enough for the parallel copy; one part transposed (not standard layout), one empty
    // along the axis; every element checked against its source index
    let (rows, a_w, b_w) = (700usize, 130usize, 260usize);
    let mut g = Graph::new();
    let a = g.constant(ar(&[rows, 1, a_w]));
    let bt = g.constant(ar(&[b_w, 1, rows]));
    let b = g.transpose(bt, &[2, 1, 0]).unwrap();
    let e = g.constant(i64t(&[rows, 1, 0], &[]));
    let y = g.concat(&[a, e, b], 2).unwrap();
    let out = run_recorded(&g, &[y], &[]).unwrap().remove(0);
    assert_eq!(out.shape(), &[rows, 1, a_w + b_w]);
    let v = out.to_vec::<i64>().unwrap();
    for r in 0..rows {
        for c in 0..a_w + b_w {
            let want = if c < a_w { (r * a_w + c) as i64 } else { ((c - a_w) * rows + r) as i64 };
            assert_eq!(v[r * (a_w + b_w) + c], want, "row {r} col {c}");
        }
    }
    // along the leading axis (one block per part), and the stack built on the same copy
    let y0 = g.concat(&[a, a], 0).unwrap();
    let bs = g.slice(b, &[0, 0, 0], &[-1, -1, a_w as i64]).unwrap();
    let st = g.stack(&[bs, a], 1).unwrap();
    let outs = run_recorded(&g, &[y0, st], &[]).unwrap();
    let av = ar(&[rows, 1, a_w]).to_vec::<i64>().unwrap();
    assert_eq!(outs[0].to_vec::<i64>().unwrap(), [av.clone(), av.clone()].concat());
    assert_eq!(outs[1].shape(), &[rows, 2, 1, a_w]);
    let sv = outs[1].to_vec::<i64>().unwrap();
    for r in 0..rows {
        for c in 0..a_w {
            assert_eq!(sv[(r * 2) * a_w + c], (c * rows + r) as i64, "stack row {r} col {c}");
            assert_eq!(sv[(r * 2 + 1) * a_w + c], (r * a_w + c) as i64, "stack row {r} col {c}");
        }
    }
}

// ---------------------------------------------------------------- split

#[test]
fn split_values() {
    let mut g = Graph::new();
    let x = g.constant(ar(&[2, 5]));
    let parts = g.split(x, -1, &[1, 4]).unwrap();
    let rows = g.split(x, 0, &[2, 0]).unwrap();
    let got = run_recorded(&g, &[parts[0], parts[1], rows[0], rows[1]], &[]).unwrap();
    assert_eq!(got[0], i64t(&[2, 1], &[0, 5]));
    assert_eq!(got[1], i64t(&[2, 4], &[1, 2, 3, 4, 6, 7, 8, 9]));
    assert_eq!(got[2], ar(&[2, 5]));
    assert_eq!(got[3], i64t(&[0, 5], &[]));
    // Three uneven pieces of f32 data.
    let mut g = Graph::new();
    let x = g.constant(f32t(&[6], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]));
    let p = g.split(x, 0, &[3, 1, 2]).unwrap();
    let got = run_recorded(&g, &p, &[]).unwrap();
    assert_eq!(got, vec![f32t(&[3], &[0.0, 1.0, 2.0]), f32t(&[1], &[3.0]), f32t(&[2], &[4.0, 5.0])]);
}

#[test]
fn split_errors_and_dynamic_axis() {
    let mut g = Graph::new();
    let x = g.constant(ar(&[2, 5]));
    assert_err!(g.split(x, 1, &[2, 2]).unwrap_err(), Error::Shape { .. }, "split");
    assert_err!(g.split(x, 0, &[]).unwrap_err(), Error::Shape { .. }, "split");
    assert_err!(g.split(x, 0, &[usize::MAX, 3]).unwrap_err(), Error::Shape { .. }, "split");
    assert_err!(g.split(x, -3, &[2]).unwrap_err(), Error::Axis { axis: -3, .. }, "split");
    // Dynamic axis: checked at run time.
    let mut g = Graph::new();
    let x = g.input("x", DType::I64, [Dim::unknown(), Dim::fixed(2)]);
    let p = g.split(x, 0, &[1, 2]).unwrap();
    assert_eq!(g.shape(p[1]).unwrap(), Shape::fixed(&[2, 2]));
    let got = run_recorded(&g, &p, &[(x, ar(&[3, 2]))]).unwrap();
    assert_eq!(got, vec![i64t(&[1, 2], &[0, 1]), i64t(&[2, 2], &[2, 3, 4, 5])]);
    let e = run_recorded(&g, &p, &[(x, ar(&[4, 2]))]).unwrap_err();
    assert_err!(e, Error::Shape { .. }, "split");
}

#[test]
fn split_by_count() {
    let mut g = Graph::new();
    let x = g.constant(ar(&[2, 6]));
    let p = g.split_count(x, -1, 3).unwrap();
    let got = run_recorded(&g, &p, &[]).unwrap();
    assert_eq!(got, vec![i64t(&[2, 2], &[0, 1, 6, 7]), i64t(&[2, 2], &[2, 3, 8, 9]), i64t(&[2, 2], &[4, 5, 10, 11])]);
    // a count that does not divide the axis, zero parts, a dynamic axis: errors naming the axis
    let e = g.split_count(x, 1, 4).unwrap_err();
    assert_err!(e.clone(), Error::Shape { .. }, "split");
    assert!(e.to_string().contains("axis 1 of size 6") && e.to_string().contains("4 equal parts"), "{e}");
    assert_err!(g.split_count(x, 0, 0).unwrap_err(), Error::Shape { .. }, "split");
    assert_err!(g.split_count(x, 2, 1).unwrap_err(), Error::Axis { axis: 2, .. }, "split");
    let d = g.input("d", DType::I64, [Dim::unknown(), Dim::fixed(2)]);
    let e = g.split_count(d, 0, 2).unwrap_err();
    assert!(e.to_string().contains("fixed size along axis 0"), "{e}");
}

// ---------------------------------------------------------------- slice

#[test]
fn slice_values() {
    let x = ar(&[3, 4]);
    assert_eq!(apply1(x.clone(), |g, x| g.slice(x, &[1, 1], &[2, -1])), i64t(&[2, 3], &[5, 6, 7, 9, 10, 11]));
    assert_eq!(apply1(x.clone(), |g, x| g.slice(x, &[0, 2], &[3, 1])), i64t(&[3, 1], &[2, 6, 10]));
    assert_eq!(apply1(x.clone(), |g, x| g.slice(x, &[3, 0], &[0, -1])), i64t(&[0, 4], &[]));
    assert_eq!(apply1(x.clone(), |g, x| g.slice(x, &[0, 0], &[-1, -1])), x);
    let f = f64t(&[2, 2], &[1.5, 2.5, 3.5, 4.5]);
    assert_eq!(apply1(f, |g, x| g.slice(x, &[1, 0], &[1, 2])), f64t(&[1, 2], &[3.5, 4.5]));
}

#[test]
fn slice_errors() {
    let x = ar(&[3, 4]);
    let e = build_err(x.clone(), |g, x| g.slice(x, &[2, 0], &[2, 1]));
    assert_err!(e, Error::IndexOutOfRange { index: 4, bound: 4, .. }, "slice");
    let e = build_err(x.clone(), |g, x| g.slice(x, &[0, 5], &[1, -1]));
    assert_err!(e, Error::IndexOutOfRange { index: 5, bound: 5, .. }, "slice");
    assert_err!(build_err(x.clone(), |g, x| g.slice(x, &[-1, 0], &[1, 1])), Error::Shape { .. }, "slice");
    assert_err!(build_err(x.clone(), |g, x| g.slice(x, &[0, 0], &[1, -2])), Error::Shape { .. }, "slice");
    assert_err!(build_err(x, |g, x| g.slice(x, &[0], &[1])), Error::Shape { .. }, "slice");
    // A dynamic dim is checked at run time.
    let (shape, ok) =
        run_fed(DType::I64, [Dim::unknown(), Dim::fixed(4)], ar(&[3, 4]), |g, x| g.slice(x, &[1, 0], &[2, 2]));
    assert_eq!(shape, Shape::fixed(&[2, 2]));
    assert_eq!(ok.unwrap()[0], i64t(&[2, 2], &[4, 5, 8, 9]));
    let (shape, ok) = run_fed(DType::I64, [Dim::unknown()], ar(&[5]), |g, x| g.slice(x, &[2], &[-1]));
    assert_eq!(shape, Shape::from([Dim::unknown()]));
    assert_eq!(ok.unwrap()[0], i64t(&[3], &[2, 3, 4]));
    let (_, err) =
        run_fed(DType::I64, [Dim::unknown(), Dim::fixed(4)], ar(&[2, 4]), |g, x| g.slice(x, &[1, 0], &[2, 2]));
    assert_err!(err.unwrap_err(), Error::IndexOutOfRange { index: 3, bound: 3, .. }, "slice");
}

// ---------------------------------------------------------------- dynamic_slice

#[test]
fn dynamic_slice_values() {
    let x = ar(&[3, 4]);
    let got = apply2(x.clone(), i64t(&[2], &[1, 2]), |g, x, b| g.dynamic_slice(x, b, &[2, 2]));
    assert_eq!(got, i64t(&[2, 2], &[6, 7, 10, 11]));
    let got = apply2(x.clone(), i64t(&[2], &[0, 0]), |g, x, b| g.dynamic_slice(x, b, &[3, 0]));
    assert_eq!(got, i64t(&[3, 0], &[]));
    // begin fed at run time.
    let mut g = Graph::new();
    let xc = g.constant(x);
    let b = g.input("b", DType::I64, [2]);
    let y = g.dynamic_slice(xc, b, &[2, 3]).unwrap();
    assert_eq!(g.shape(y).unwrap(), Shape::fixed(&[2, 3]));
    assert_eq!(run_recorded(&g, &[y], &[(b, i64t(&[2], &[0, 1]))]).unwrap()[0], i64t(&[2, 3], &[1, 2, 3, 5, 6, 7]));
    assert_eq!(run_recorded(&g, &[y], &[(b, i64t(&[2], &[1, 1]))]).unwrap()[0], i64t(&[2, 3], &[5, 6, 7, 9, 10, 11]));
    // Out of range at run time: an error, never clamped.
    let e = run_recorded(&g, &[y], &[(b, i64t(&[2], &[2, 0]))]).unwrap_err();
    assert_err!(e, Error::IndexOutOfRange { index: 2, bound: 2, .. }, "dynamic_slice");
    let e = run_recorded(&g, &[y], &[(b, i64t(&[2], &[0, -1]))]).unwrap_err();
    assert_err!(e, Error::IndexOutOfRange { index: -1, bound: 2, .. }, "dynamic_slice");
}

#[test]
fn dynamic_slice_errors() {
    let mut g = Graph::new();
    let x = g.constant(ar(&[3, 4]));
    let b2 = g.constant(i64t(&[2], &[0, 0]));
    let b3 = g.constant(i64t(&[3], &[0, 0, 0]));
    let bf = g.constant(f32t(&[2], &[0.0, 0.0]));
    assert_err!(g.dynamic_slice(x, b2, &[4, 1]).unwrap_err(), Error::Shape { .. }, "dynamic_slice");
    assert_err!(g.dynamic_slice(x, b2, &[1]).unwrap_err(), Error::Shape { .. }, "dynamic_slice");
    assert_err!(g.dynamic_slice(x, b3, &[1, 1]).unwrap_err(), Error::Shape { .. }, "dynamic_slice");
    assert_err!(g.dynamic_slice(x, bf, &[1, 1]).unwrap_err(), Error::DType { got: DType::F32, .. }, "dynamic_slice");
    // A dynamic-length begin is checked at run time.
    let b = g.input("b", DType::I64, [Dim::unknown()]);
    let y = g.dynamic_slice(x, b, &[1, 1]).unwrap();
    let e = run_recorded(&g, &[y], &[(b, i64t(&[1], &[0]))]).unwrap_err();
    assert_err!(e, Error::Shape { .. }, "dynamic_slice");
}

// ---------------------------------------------------------------- strided_slice

#[test]
fn strided_slice_basic_ranges() {
    let x = ar(&[3, 4]);
    // x[1:, ::-1]
    let spec = StridedSliceSpec::new(&[1, 0], &[0, 0], &[1, -1]).with_begin_mask(0b10).with_end_mask(0b11);
    assert_eq!(ss(x.clone(), spec), i64t(&[2, 4], &[7, 6, 5, 4, 11, 10, 9, 8]));
    // x[::2, 1::2]
    let spec = StridedSliceSpec::new(&[0, 1], &[0, 0], &[2, 2]).with_begin_mask(1).with_end_mask(0b11);
    assert_eq!(ss(x.clone(), spec), i64t(&[2, 2], &[1, 3, 9, 11]));
    // x[-2:, -3:-1]
    let spec = StridedSliceSpec::new(&[-2, -3], &[0, -1], &[1, 1]).with_end_mask(1);
    assert_eq!(ss(x.clone(), spec), i64t(&[2, 2], &[5, 6, 9, 10]));
    // x[2:0:-1, 3:0:-2]
    let spec = StridedSliceSpec::new(&[2, 3], &[0, 0], &[-1, -2]);
    assert_eq!(ss(x.clone(), spec), i64t(&[2, 2], &[11, 9, 7, 5]));
    // x[1:2] (trailing dim implicit)
    assert_eq!(ss(x.clone(), StridedSliceSpec::new(&[1], &[2], &[1])), i64t(&[1, 4], &[4, 5, 6, 7]));
    // x[:] is x
    assert_eq!(ss(x.clone(), StridedSliceSpec::new(&[0], &[0], &[1]).with_begin_mask(1).with_end_mask(1)), x);
}

#[test]
fn strided_slice_negative_and_clamped_indices() {
    let v = ar(&[6]);
    let one = |b: i64, e: i64, s: i64| ss(v.clone(), StridedSliceSpec::new(&[b], &[e], &[s]));
    assert_eq!(one(-3, -1, 1), i64t(&[2], &[3, 4]));
    assert_eq!(one(-1, -4, -1), i64t(&[3], &[5, 4, 3]));
    assert_eq!(one(4, 1, -2), i64t(&[2], &[4, 2]));
    assert_eq!(one(10, -10, -1), i64t(&[6], &[5, 4, 3, 2, 1, 0]));
    assert_eq!(one(-100, 100, 1), v);
    assert_eq!(one(1, 100, 4), i64t(&[2], &[1, 5]));
    assert_eq!(one(3, 1, 1), i64t(&[0], &[]));
    assert_eq!(one(1, 3, -1), i64t(&[0], &[]));
    assert_eq!(one(0, 6, i64::MAX), i64t(&[1], &[0]));
    // x[::-2]
    let spec = StridedSliceSpec::new(&[0], &[0], &[-2]).with_begin_mask(1).with_end_mask(1);
    assert_eq!(ss(v.clone(), spec), i64t(&[3], &[5, 3, 1]));
    // x[:2:-1] (begin masked walking backwards starts at the end)
    let spec = StridedSliceSpec::new(&[0], &[2], &[-1]).with_begin_mask(1);
    assert_eq!(ss(v, spec), i64t(&[3], &[5, 4, 3]));
}

#[test]
fn strided_slice_ellipsis_new_and_shrink_axes() {
    let x = ar(&[2, 3, 4]);
    // x[..., 0]
    let spec = StridedSliceSpec::new(&[0, 0], &[0, 1], &[1, 1]).with_ellipsis_mask(1).with_shrink_axis_mask(0b10);
    assert_eq!(ss(x.clone(), spec), i64t(&[2, 3], &[0, 4, 8, 12, 16, 20]));
    // x[1, ..., ::-1]
    let spec = StridedSliceSpec::new(&[1, 0, 0], &[2, 0, 0], &[1, 1, -1])
        .with_ellipsis_mask(0b10)
        .with_shrink_axis_mask(1)
        .with_begin_mask(0b100)
        .with_end_mask(0b100);
    assert_eq!(ss(x.clone(), spec), i64t(&[3, 4], &[15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20]));
    // x[:, None, 1]
    let spec = StridedSliceSpec::new(&[0, 0, 1], &[0, 0, 2], &[1, 1, 1])
        .with_begin_mask(1)
        .with_end_mask(1)
        .with_new_axis_mask(0b10)
        .with_shrink_axis_mask(0b100);
    assert_eq!(ss(x.clone(), spec), i64t(&[2, 1, 4], &[4, 5, 6, 7, 16, 17, 18, 19]));
    // x[-1, 1, -2] is a scalar
    let spec = StridedSliceSpec::new(&[-1, 1, -2], &[0, 0, 0], &[1, 1, 1]).with_shrink_axis_mask(0b111);
    assert_eq!(ss(x.clone(), spec), i64t(&[], &[18]));
    // x[..., 1:3, None] on a 2-D tensor
    let m = ar(&[2, 4]);
    let spec =
        StridedSliceSpec::new(&[0, 1, 0], &[0, 3, 0], &[1, 1, 1]).with_ellipsis_mask(1).with_new_axis_mask(0b100);
    assert_eq!(ss(m.clone(), spec), i64t(&[2, 2, 1], &[1, 2, 5, 6]));
    // x[:, None] and x[None, ..., None]
    let spec =
        StridedSliceSpec::new(&[0, 0], &[0, 0], &[1, 1]).with_begin_mask(1).with_end_mask(1).with_new_axis_mask(2);
    assert_eq!(ss(m.clone(), spec), ar(&[2, 1, 4]));
    let spec =
        StridedSliceSpec::new(&[0, 0, 0], &[0, 0, 0], &[1, 1, 1]).with_ellipsis_mask(0b10).with_new_axis_mask(0b101);
    assert_eq!(ss(m.clone(), spec), ar(&[1, 2, 4, 1]));
    // x[-1] on f32 and bool data
    let f = f32t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    let spec = StridedSliceSpec::new(&[-1], &[0], &[1]).with_shrink_axis_mask(1);
    assert_eq!(ss(f, spec.clone()), f32t(&[2], &[3.0, 4.0]));
    assert_eq!(ss(boolt(&[2, 1], &[true, false]), spec), boolt(&[1], &[false]));
}

#[test]
fn strided_slice_resolve_helper() {
    let fixed = |d: &[usize]| d.iter().map(|&n| Dim::fixed(n)).collect::<Vec<_>>();
    // x[1:, ::-1] on [3, 4]
    let spec = StridedSliceSpec::new(&[1, 0], &[0, 0], &[1, -1]).with_begin_mask(0b10).with_end_mask(0b11);
    let plan = spec.resolve(&fixed(&[3, 4])).unwrap();
    assert_eq!(
        plan.axes,
        vec![AxisSelect::Range { start: 1, len: 2, step: 1 }, AxisSelect::Range { start: 3, len: 4, step: -1 }]
    );
    assert_eq!(plan.out, vec![Some(0), Some(1)]);
    // x[None, -2, ..., None] on [5, 6, 7]
    let spec = StridedSliceSpec::new(&[0, -2, 0, 0], &[0, 0, 0, 0], &[1, 1, 1, 1])
        .with_new_axis_mask(0b1001)
        .with_shrink_axis_mask(0b10)
        .with_ellipsis_mask(0b100);
    let dims = fixed(&[5, 6, 7]);
    let plan = spec.resolve(&dims).unwrap();
    assert_eq!(
        plan.axes,
        vec![
            AxisSelect::Index(3),
            AxisSelect::Range { start: 0, len: 6, step: 1 },
            AxisSelect::Range { start: 0, len: 7, step: 1 }
        ]
    );
    assert_eq!(plan.out, vec![None, Some(1), Some(2), None]);
    assert_eq!(plan.output_shape(&dims), Shape::fixed(&[1, 6, 7, 1]));
    // Dynamic dims: a whole range keeps the dim (and its symbol), anything else is unknown.
    let dims = vec![Dim::dynamic("n"), Dim::dynamic("m"), Dim::fixed(4)];
    let spec = StridedSliceSpec::new(&[0, 1, 0], &[0, 0, 0], &[-1, 1, 1]).with_begin_mask(1).with_end_mask(0b111);
    let plan = spec.resolve(&dims).unwrap();
    assert_eq!(plan.axes[0], AxisSelect::Dynamic { shrink: false, whole: true });
    assert_eq!(plan.axes[1], AxisSelect::Dynamic { shrink: false, whole: false });
    assert_eq!(plan.output_shape(&dims), Shape::from([Dim::dynamic("n"), Dim::unknown(), Dim::fixed(4)]));
    let spec = StridedSliceSpec::new(&[5], &[0], &[1]).with_shrink_axis_mask(1);
    let plan = spec.resolve(&dims).unwrap();
    assert_eq!(plan.axes[0], AxisSelect::Dynamic { shrink: true, whole: false });
    assert_eq!(plan.output_shape(&dims), Shape::from([Dim::dynamic("m"), Dim::fixed(4)]));
}

#[test]
fn strided_slice_errors() {
    let dims = vec![Dim::fixed(3), Dim::fixed(4)];
    let root = |s: StridedSliceSpec| s.resolve(&dims).unwrap_err();
    assert_err!(root(StridedSliceSpec::new(&[0], &[1], &[0])), Error::Shape { .. }, "strided_slice");
    assert_err!(root(StridedSliceSpec::new(&[0], &[1, 2], &[1])), Error::Shape { .. }, "strided_slice");
    assert_err!(root(StridedSliceSpec::new(&[0; 3], &[0; 3], &[1; 3])), Error::Shape { .. }, "strided_slice");
    let two_ellipses = StridedSliceSpec::new(&[0, 0], &[0, 0], &[1, 1]).with_ellipsis_mask(0b11);
    assert_err!(root(two_ellipses), Error::Shape { .. }, "strided_slice");
    let shrink_far = StridedSliceSpec::new(&[3], &[4], &[1]).with_shrink_axis_mask(1);
    assert_err!(root(shrink_far), Error::IndexOutOfRange { index: 3, bound: 3, .. }, "strided_slice");
    let shrink_neg = StridedSliceSpec::new(&[0, -5], &[0, 0], &[1, 1]).with_shrink_axis_mask(0b10);
    assert_err!(root(shrink_neg), Error::IndexOutOfRange { index: -5, bound: 4, .. }, "strided_slice");
    let shrink_back = StridedSliceSpec::new(&[1], &[0], &[-1]).with_shrink_axis_mask(1);
    assert_err!(root(shrink_back), Error::Shape { .. }, "strided_slice");
    // Through the graph builder, and at run time for a dynamic dim.
    let e = build_err(ar(&[3]), |g, x| g.strided_slice(x, &StridedSliceSpec::new(&[0], &[2], &[0])));
    assert_err!(e, Error::Shape { .. }, "strided_slice");
    let spec = StridedSliceSpec::new(&[-3], &[0], &[1]).with_shrink_axis_mask(1);
    let (shape, ok) =
        run_fed(DType::I64, [Dim::unknown(), Dim::fixed(2)], ar(&[3, 2]), |g, x| g.strided_slice(x, &spec));
    assert_eq!(shape, Shape::fixed(&[2]));
    assert_eq!(ok.unwrap()[0], i64t(&[2], &[0, 1]));
    let (_, err) = run_fed(DType::I64, [Dim::unknown(), Dim::fixed(2)], ar(&[2, 2]), |g, x| g.strided_slice(x, &spec));
    assert_err!(err.unwrap_err(), Error::IndexOutOfRange { index: -3, bound: 2, .. }, "strided_slice");
}

// ---------------------------------------------------------------- pad

#[test]
fn pad_constant_values() {
    let got = apply1(ar(&[2, 3]), |g, x| g.pad(x, &[(1, 0), (0, 2)], PadMode::Constant(9.0)));
    assert_eq!(got, i64t(&[3, 5], &[9, 9, 9, 9, 9, 0, 1, 2, 9, 9, 3, 4, 5, 9, 9]));
    let got = apply1(f32t(&[2], &[1.0, 2.0]), |g, x| g.pad(x, &[(2, 1)], PadMode::Constant(-1.5)));
    assert_eq!(got, f32t(&[5], &[-1.5, -1.5, 1.0, 2.0, -1.5]));
    let got = apply1(boolt(&[1], &[false]), |g, x| g.pad(x, &[(1, 1)], PadMode::Constant(1.0)));
    assert_eq!(got, boolt(&[3], &[true, false, true]));
    let got = apply1(i64t(&[0], &[]), |g, x| g.pad(x, &[(1, 2)], PadMode::Constant(0.0)));
    assert_eq!(got, i64t(&[3], &[0, 0, 0]));
    assert_eq!(apply1(ar(&[2, 2]), |g, x| g.pad(x, &[(0, 0), (0, 0)], PadMode::Reflect)), ar(&[2, 2]));
}

#[test]
fn pad_mirror_values() {
    let v = i64t(&[4], &[1, 2, 3, 4]);
    assert_eq!(apply1(v.clone(), |g, x| g.pad(x, &[(2, 2)], PadMode::Reflect)), i64t(&[8], &[3, 2, 1, 2, 3, 4, 3, 2]));
    assert_eq!(apply1(v.clone(), |g, x| g.pad(x, &[(3, 0)], PadMode::Reflect)), i64t(&[7], &[4, 3, 2, 1, 2, 3, 4]));
    assert_eq!(
        apply1(v.clone(), |g, x| g.pad(x, &[(2, 2)], PadMode::Symmetric)),
        i64t(&[8], &[2, 1, 1, 2, 3, 4, 4, 3])
    );
    assert_eq!(apply1(v, |g, x| g.pad(x, &[(0, 4)], PadMode::Symmetric)), i64t(&[8], &[1, 2, 3, 4, 4, 3, 2, 1]));
    let m = f64t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let got = apply1(m.clone(), |g, x| g.pad(x, &[(1, 1), (2, 2)], PadMode::Reflect));
    #[rustfmt::skip]
    let want = f64t(&[4, 7], &[
        6.0, 5.0, 4.0, 5.0, 6.0, 5.0, 4.0,
        3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0,
        6.0, 5.0, 4.0, 5.0, 6.0, 5.0, 4.0,
        3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0,
    ]);
    assert_eq!(got, want);
    let got = apply1(m, |g, x| g.pad(x, &[(0, 1), (1, 0)], PadMode::Symmetric));
    assert_eq!(got, f64t(&[3, 4], &[1.0, 1.0, 2.0, 3.0, 4.0, 4.0, 5.0, 6.0, 4.0, 4.0, 5.0, 6.0]));
}

#[test]
fn pad_errors() {
    let v = ar(&[4]);
    assert_err!(build_err(v.clone(), |g, x| g.pad(x, &[(4, 0)], PadMode::Reflect)), Error::Shape { .. }, "pad");
    assert_err!(build_err(v.clone(), |g, x| g.pad(x, &[(0, 5)], PadMode::Symmetric)), Error::Shape { .. }, "pad");
    assert_err!(
        build_err(v.clone(), |g, x| g.pad(x, &[(1, 1), (1, 1)], PadMode::Constant(0.0))),
        Error::Shape { .. },
        "pad"
    );
    assert_err!(build_err(v, |g, x| g.pad(x, &[(usize::MAX, 1)], PadMode::Constant(0.0))), Error::Shape { .. }, "pad");
    // Dynamic dim: the reflect bound is checked at run time.
    let (shape, ok) = run_fed(DType::I64, [Dim::unknown()], ar(&[3]), |g, x| g.pad(x, &[(2, 0)], PadMode::Reflect));
    assert_eq!(shape, Shape::from([Dim::unknown()]));
    assert_eq!(ok.unwrap()[0], i64t(&[5], &[2, 1, 0, 1, 2]));
    let (_, err) = run_fed(DType::I64, [Dim::unknown()], ar(&[2]), |g, x| g.pad(x, &[(2, 0)], PadMode::Reflect));
    assert_err!(err.unwrap_err(), Error::Shape { .. }, "pad");
}

// ---------------------------------------------------------------- reverse

#[test]
fn reverse_values_and_errors() {
    let x = ar(&[3, 4]);
    let r = |axes: &[i64]| apply1(x.clone(), |g, x| g.reverse(x, axes));
    assert_eq!(r(&[0]), i64t(&[3, 4], &[8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3]));
    assert_eq!(r(&[1]), i64t(&[3, 4], &[3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8]));
    assert_eq!(r(&[-1, 0]), i64t(&[3, 4], &[11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]));
    assert_eq!(r(&[]), x);
    let f = f32t(&[3], &[1.0, 2.0, 3.0]);
    assert_eq!(apply1(f, |g, x| g.reverse(x, &[0])), f32t(&[3], &[3.0, 2.0, 1.0]));
    assert_err!(build_err(x.clone(), |g, x| g.reverse(x, &[0, -2])), Error::Shape { .. }, "reverse");
    assert_err!(build_err(x, |g, x| g.reverse(x, &[2])), Error::Axis { axis: 2, rank: 2, .. }, "reverse");
}

// ---------------------------------------------------------------- roll

#[test]
fn roll_values() {
    let v = ar(&[5]);
    let r1 = |s: i64| apply2(v.clone(), Tensor::scalar(s), |g, x, s| g.roll(x, s, &[0]));
    assert_eq!(r1(2), i64t(&[5], &[3, 4, 0, 1, 2]));
    assert_eq!(r1(-1), i64t(&[5], &[1, 2, 3, 4, 0]));
    assert_eq!(r1(7), i64t(&[5], &[3, 4, 0, 1, 2]));
    assert_eq!(r1(-12), i64t(&[5], &[2, 3, 4, 0, 1]));
    assert_eq!(r1(5), v);
    let m = ar(&[3, 4]);
    let got = apply2(m.clone(), i64t(&[2], &[1, -1]), |g, x, s| g.roll(x, s, &[0, 1]));
    assert_eq!(got, i64t(&[3, 4], &[9, 10, 11, 8, 1, 2, 3, 0, 5, 6, 7, 4]));
    // A repeated axis adds its shifts (1 + 2 = 3 along axis -1).
    let got = apply2(m.clone(), i64t(&[2], &[1, 2]), |g, x, s| g.roll(x, s, &[-1, 1]));
    assert_eq!(got, i64t(&[3, 4], &[1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8]));
    let f = f64t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(apply2(f, i64t(&[1], &[-1]), |g, x, s| g.roll(x, s, &[0])), f64t(&[2, 2], &[3.0, 4.0, 1.0, 2.0]));
    // Shift fed at run time.
    let mut g = Graph::new();
    let x = g.constant(m);
    let s = g.input("s", DType::I64, [2]);
    let y = g.roll(x, s, &[1, 0]).unwrap();
    let got = run_recorded(&g, &[y], &[(s, i64t(&[2], &[-2, 2]))]).unwrap();
    assert_eq!(got[0], i64t(&[3, 4], &[6, 7, 4, 5, 10, 11, 8, 9, 2, 3, 0, 1]));
}

#[test]
fn roll_errors() {
    let mut g = Graph::new();
    let x = g.constant(ar(&[3, 4]));
    let s1 = g.constant(i64t(&[1], &[1]));
    let s0 = g.constant(Tensor::scalar(1i64));
    let sf = g.constant(f32t(&[1], &[1.0]));
    assert_err!(g.roll(x, s1, &[0, 1]).unwrap_err(), Error::Shape { .. }, "roll");
    assert_err!(g.roll(x, s0, &[0, 1]).unwrap_err(), Error::Shape { .. }, "roll");
    assert_err!(g.roll(x, sf, &[0]).unwrap_err(), Error::DType { got: DType::F32, .. }, "roll");
    assert_err!(g.roll(x, s1, &[-3]).unwrap_err(), Error::Axis { axis: -3, .. }, "roll");
    let s = g.input("s", DType::I64, [Dim::unknown()]);
    let y = g.roll(x, s, &[0]).unwrap();
    let e = run_recorded(&g, &[y], &[(s, i64t(&[2], &[1, 1]))]).unwrap_err();
    assert_err!(e, Error::Shape { .. }, "roll");
}

#[test]
fn slicing_ops_display() {
    assert_eq!(SlicingOp::Concat { axis: -1 }.to_string(), "concat{axis=-1}");
    assert_eq!(SlicingOp::Split { axis: 0, sizes: vec![1, 2] }.to_string(), "split{axis=0, sizes=[1, 2]}");
    let s = SlicingOp::StridedSlice {
        begin: vec![1],
        end: vec![0],
        strides: vec![1],
        begin_mask: 0,
        end_mask: 1,
        ellipsis_mask: 0,
        new_axis_mask: 0,
        shrink_axis_mask: 0,
    };
    assert_eq!(s.to_string(), "strided_slice{begin=[1], end=[0], strides=[1], end_mask=0b1}");
    let p = SlicingOp::Pad { paddings: vec![(1, 2)], mode: PadMode::Reflect };
    assert_eq!(p.to_string(), "pad{paddings=[(1, 2)], mode=Reflect}");
    let names: Vec<&str> = SlicingKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names, ["concat", "split", "slice", "dynamic_slice", "strided_slice", "pad", "reverse", "roll"]);
}
