//! Value tests for the reduce family (expected values written literally or from closed forms
//! over the indices of `arange` inputs).

use crate::common::*;
use pfor::ops::{ReduceKind, ReduceOp};
use pfor::prelude::*;

/// `arange(24)` as a [2,3,4] tensor of `dt`: x[i,j,k] = 12i + 4j + k.
fn ar(dt: DType) -> Tensor {
    Tensor::arange(24).unwrap().reshape(&[2, 3, 4]).unwrap().cast(dt)
}

/// Row-major values of `f` over every index of `shape`.
fn grid(shape: &[usize], f: &dyn Fn(&[usize]) -> f64) -> Vec<f64> {
    let n: usize = shape.iter().product();
    let mut idx = vec![0usize; shape.len()];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(f(&idx));
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

fn red(k: ReduceKind, x: Tensor, axes: &[i64], keep: bool) -> Tensor {
    apply1(x, |g, x| g.reduce(k, x, Some(axes), keep))
}

/// Check kind `k` on `x` over `axes`: `kept` is the output shape without keep_dims, `kd` with
/// it, `f` the closed form over the kept indices.
#[track_caller]
fn check(k: ReduceKind, x: &Tensor, axes: &[i64], kept: &[usize], kd: &[usize], f: &dyn Fn(&[usize]) -> f64) {
    let want = grid(kept, f);
    let dt = x.dtype();
    let tol = if dt == DType::F32 { 1e-5 } else { 1e-12 };
    for (keep, shape) in [(false, kept), (true, kd)] {
        let got = red(k, x.clone(), axes, keep);
        assert_close(&got, &f64t(shape, &want).cast(dt), tol);
    }
}

/// The axis sets {0}, {1}, {0,2}, {-1}, all, with output shapes (plain, keep_dims).
const SETS: [(&[i64], &[usize], &[usize]); 5] = [
    (&[0], &[3, 4], &[1, 3, 4]),
    (&[1], &[2, 4], &[2, 1, 4]),
    (&[0, 2], &[3], &[1, 3, 1]),
    (&[-1], &[2, 3], &[2, 3, 1]),
    (&[2, 0, 1], &[], &[1, 1, 1]),
];

type Form = fn(&[usize]) -> f64;

fn f(i: usize) -> f64 {
    i as f64
}

#[test]
fn sum_mean_max_min_over_axis_sets() {
    let sum: [Form; 5] = [
        |p| 12.0 + 8.0 * f(p[0]) + 2.0 * f(p[1]),
        |p| 36.0 * f(p[0]) + 3.0 * f(p[1]) + 12.0,
        |p| 60.0 + 32.0 * f(p[0]),
        |p| 48.0 * f(p[0]) + 16.0 * f(p[1]) + 6.0,
        |_| 276.0,
    ];
    let mean: [Form; 5] = [
        |p| 6.0 + 4.0 * f(p[0]) + f(p[1]),
        |p| 12.0 * f(p[0]) + 4.0 + f(p[1]),
        |p| 7.5 + 4.0 * f(p[0]),
        |p| 12.0 * f(p[0]) + 4.0 * f(p[1]) + 1.5,
        |_| 11.5,
    ];
    let max: [Form; 5] = [
        |p| 12.0 + 4.0 * f(p[0]) + f(p[1]),
        |p| 12.0 * f(p[0]) + 8.0 + f(p[1]),
        |p| 15.0 + 4.0 * f(p[0]),
        |p| 12.0 * f(p[0]) + 4.0 * f(p[1]) + 3.0,
        |_| 23.0,
    ];
    let min: [Form; 5] = [
        |p| 4.0 * f(p[0]) + f(p[1]),
        |p| 12.0 * f(p[0]) + f(p[1]),
        |p| 4.0 * f(p[0]),
        |p| 12.0 * f(p[0]) + 4.0 * f(p[1]),
        |_| 0.0,
    ];
    for dt in [DType::F32, DType::F64, DType::I64] {
        let x = ar(dt);
        for (s, (axes, kept, kd)) in SETS.iter().enumerate() {
            check(ReduceKind::Sum, &x, axes, kept, kd, &sum[s]);
            check(ReduceKind::Max, &x, axes, kept, kd, &max[s]);
            check(ReduceKind::Min, &x, axes, kept, kd, &min[s]);
            if dt != DType::I64 {
                check(ReduceKind::Mean, &x, axes, kept, kd, &mean[s]);
            }
        }
    }
}

#[test]
fn prod_over_axis_sets() {
    // p = arange(24) % 3 + 1: every [3,4] slab is [[1,2,3,1],[2,3,1,2],[3,1,2,3]].
    let slab = [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 3.0];
    let p: Vec<f64> = slab.iter().chain(slab.iter()).copied().collect();
    let axis0 = [1.0, 4.0, 9.0, 1.0, 4.0, 9.0, 1.0, 4.0, 9.0, 1.0, 4.0, 9.0];
    let cases: [(&[i64], &[usize], Vec<f64>); 5] = [
        (&[0], &[3, 4], axis0.to_vec()),
        (&[1], &[2, 4], vec![6.0; 8]),
        (&[0, 2], &[3], vec![36.0, 144.0, 324.0]),
        (&[-1], &[2, 3], vec![6.0, 12.0, 18.0, 6.0, 12.0, 18.0]),
        (&[0, 1, 2], &[], vec![1_679_616.0]),
    ];
    for dt in [DType::I64, DType::F32, DType::F64] {
        let x = f64t(&[2, 3, 4], &p).cast(dt);
        for (axes, shape, want) in &cases {
            assert_close(&red(ReduceKind::Prod, x.clone(), axes, false), &f64t(shape, want).cast(dt), 1e-6);
        }
        let got = red(ReduceKind::Prod, x, &[0, 2], true);
        assert_close(&got, &f64t(&[1, 3, 1], &[36.0, 144.0, 324.0]).cast(dt), 1e-6);
    }
}

#[test]
fn all_any_over_axis_sets() {
    const T: bool = true;
    const F: bool = false;
    // a = (idx % 5 != 0), c = (idx % 7 == 0) over arange(24) as [2,3,4].
    let a: Vec<bool> = (0..24).map(|i| i % 5 != 0).collect();
    let c: Vec<bool> = (0..24).map(|i| i % 7 == 0).collect();
    let (a, c) = (boolt(&[2, 3, 4], &a), boolt(&[2, 3, 4], &c));
    let all_cases: [(&[i64], &[usize], Vec<bool>); 5] = [
        (&[0], &[3, 4], vec![F, T, T, F, T, F, T, T, F, T, F, T]),
        (&[1], &[2, 4], vec![F, F, F, T, F, T, T, F]),
        (&[0, 2], &[3], vec![F, F, F]),
        (&[-1], &[2, 3], vec![F, F, F, F, T, F]),
        (&[0, 1, 2], &[], vec![F]),
    ];
    let any_cases: [(&[i64], &[usize], Vec<bool>); 5] = [
        (&[0], &[3, 4], vec![T, F, T, F, F, F, F, T, F, T, F, F]),
        (&[1], &[2, 4], vec![T, F, F, T, F, T, T, F]),
        (&[0, 2], &[3], vec![T, T, T]),
        (&[-1], &[2, 3], vec![T, T, F, T, F, T]),
        (&[0, 1, 2], &[], vec![T]),
    ];
    for (axes, shape, want) in &all_cases {
        assert_eq!(red(ReduceKind::All, a.clone(), axes, false), boolt(shape, want), "all {axes:?}");
    }
    for (axes, shape, want) in &any_cases {
        assert_eq!(red(ReduceKind::Any, c.clone(), axes, false), boolt(shape, want), "any {axes:?}");
    }
    assert_eq!(red(ReduceKind::All, a, &[-1], true), boolt(&[2, 3, 1], &[F, F, F, F, T, F]));
    assert_eq!(red(ReduceKind::Any, c, &[0, 2], true), boolt(&[1, 3, 1], &[T, T, T]));
}

#[test]
fn logsumexp_values() {
    let e = std::f64::consts::E;
    let l4 = (1.0 + e + e * e + e * e * e).ln();
    let l2 = (1.0 + (-12.0f64).exp()).ln();
    for dt in [DType::F64, DType::F32] {
        let x = ar(dt);
        let tol = if dt == DType::F32 { 1e-5 } else { 1e-12 };
        let k = ReduceKind::LogSumExp;
        // Over the last axis: a + ln(1+e+e²+e³) with a = 12i + 4j.
        let want = grid(&[2, 3], &|p| 12.0 * f(p[0]) + 4.0 * f(p[1]) + l4);
        assert_close(&red(k, x.clone(), &[-1], false), &f64t(&[2, 3], &want).cast(dt), tol);
        assert_close(&red(k, x.clone(), &[2], true), &f64t(&[2, 3, 1], &want).cast(dt), tol);
        // Over axis 0: ln(e^v + e^(v+12)) = v + 12 + ln(1 + e^-12).
        let want = grid(&[3, 4], &|p| 12.0 + 4.0 * f(p[0]) + f(p[1]) + l2);
        assert_close(&red(k, x.clone(), &[0], false), &f64t(&[3, 4], &want).cast(dt), tol);
        // Over {0,2}: ln Σ_i Σ_k e^(12i+4j+k) = 4j + l4 + ln(1 + e^12).
        let want = grid(&[3], &|p| 4.0 * f(p[0]) + l4 + (1.0 + 12f64.exp()).ln());
        assert_close(&red(k, x.clone(), &[0, 2], false), &f64t(&[3], &want).cast(dt), tol);
        // Large values do not overflow.
        let big = f64t(&[2], &[1000.0, 1000.0]).cast(dt);
        assert_close(&red(k, big, &[0], false), &f64t(&[], &[1000.0 + 2f64.ln()]).cast(dt), tol);
        let neg = f64t(&[2], &[-1000.0, -1000.0]).cast(dt);
        assert_close(&red(k, neg, &[0], false), &f64t(&[], &[-1000.0 + 2f64.ln()]).cast(dt), tol);
        // Rows: all -inf, one -inf, +inf, NaN.
        let inf = f64::INFINITY;
        let rows = f64t(&[4, 2], &[-inf, -inf, -inf, 0.0, inf, 1.0, f64::NAN, 1.0]).cast(dt);
        let got = red(k, rows, &[1], false).to_f64_vec();
        assert_eq!(got[0], -inf);
        assert_eq!(got[1], 0.0);
        assert_eq!(got[2], inf);
        assert!(got[3].is_nan(), "{got:?}");
    }
}

#[test]
fn variance_values() {
    // Over ar(): x = 12i + 4j + k, so a group's variance is the sum of the variances of the
    // reduced index terms: var{0,12} = 36, var{0,4,8} = 32/3, var{0,1,2,3} = 5/4.
    let var: [Form; 5] = [|_| 36.0, |_| 32.0 / 3.0, |_| 36.0 + 1.25, |_| 1.25, |_| 36.0 + 32.0 / 3.0 + 1.25];
    for dt in [DType::F32, DType::F64] {
        let x = ar(dt);
        for (s, (axes, kept, kd)) in SETS.iter().enumerate() {
            check(ReduceKind::Variance, &x, axes, kept, kd, &var[s]);
        }
        // The named builder is the same op.
        let v = apply1(x.clone(), |g, x| g.reduce_variance(x, None, false));
        assert_close(&v, &f64t(&[], &[36.0 + 32.0 / 3.0 + 1.25]).cast(dt), 1e-5);
    }
    // Two passes: a large offset does not cancel the small spread (one-pass E[x²] - E[x]²
    // gives 0 or garbage here in f64).
    let x = f64t(&[4], &[1e9, 1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0]);
    assert_eq!(red(ReduceKind::Variance, x, &[0], false).to_f64_vec(), vec![1.25]);
    // NaN and inf propagate as NaN; zero elements give NaN; a single element gives 0.
    let inf = f64::INFINITY;
    let rows = f64t(&[3, 2], &[f64::NAN, 1.0, inf, 1.0, -2.0, -2.0]);
    let got = red(ReduceKind::Variance, rows, &[1], false).to_f64_vec();
    assert!(got[0].is_nan() && got[1].is_nan() && got[2] == 0.0, "{got:?}");
    let empty = Tensor::zeros(DType::F32, &[2, 0]).unwrap();
    let got = red(ReduceKind::Variance, empty, &[1], true);
    assert_eq!(got.shape(), &[2, 1]);
    assert!(got.to_f64_vec().iter().all(|v| v.is_nan()));
}

#[test]
fn an_op_whose_form_is_not_its_kinds_is_an_error() {
    let mut g = Graph::new();
    let f = g.constant(ar(DType::F32));
    let e = g.add_op(Op::Reduce(ReduceOp::Axes { kind: ReduceKind::ArgMax, axes: vec![0], keep_dims: false }), &[f]);
    assert!(matches!(e.unwrap_err().root(), Error::Unsupported { op, .. } if op == "argmax"));
    let e =
        g.add_op(Op::Reduce(ReduceOp::Scan { kind: ReduceKind::Sum, axis: 0, exclusive: false, reverse: false }), &[f]);
    assert!(matches!(e.unwrap_err().root(), Error::Unsupported { op, .. } if op == "reduce_sum"));
    let e = g.add_op(Op::Reduce(ReduceOp::Arg { kind: ReduceKind::CumSum, axis: 0 }), &[f]);
    assert!(matches!(e.unwrap_err().root(), Error::Unsupported { op, .. } if op == "cumsum"));
    let e = g.reduce(ReduceKind::ArgMin, f, None, false).unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { op, .. } if op == "argmin"), "{e}");
}

#[test]
fn empty_axes_reduce_each_element_alone() {
    let x = ar(DType::F32);
    for k in [ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Prod, ReduceKind::Max, ReduceKind::Min] {
        for keep in [false, true] {
            assert_eq!(red(k, x.clone(), &[], keep), x, "{}", k.name());
        }
    }
    assert_eq!(red(ReduceKind::LogSumExp, x.clone(), &[], false), x);
    let b = boolt(&[2], &[true, false]);
    assert_eq!(red(ReduceKind::All, b.clone(), &[], true), b);
    assert_eq!(red(ReduceKind::Any, b.clone(), &[], false), b);
    let s = Tensor::scalar(5i64);
    assert_eq!(red(ReduceKind::Sum, s.clone(), &[], false), s);
    // Each element is its own group: the variance of one element is 0.
    for keep in [false, true] {
        assert_eq!(red(ReduceKind::Variance, x.clone(), &[], keep), Tensor::zeros(DType::F32, &[2, 3, 4]).unwrap());
    }
    assert_eq!(red(ReduceKind::Variance, Tensor::scalar(2.5f64), &[], false), Tensor::scalar(0.0f64));
}

#[test]
fn sum_all_and_mean_all() {
    assert_eq!(apply1(ar(DType::I64), |g, x| g.sum_all(x)), i64t(&[], &[276]));
    assert_eq!(apply1(ar(DType::F64), |g, x| g.mean_all(x)), f64t(&[], &[11.5]));
    assert_eq!(apply1(Tensor::scalar(2.5f32), |g, x| g.sum_all(x)), f32t(&[], &[2.5]));
    assert_eq!(apply1(Tensor::scalar(2.5f32), |g, x| g.mean_all(x)), f32t(&[], &[2.5]));
    let mut g = Graph::new();
    let x = g.constant(ar(DType::F32));
    let y = g.sum_all(x).unwrap();
    assert_eq!(g.shape(y).unwrap(), Shape::scalar());
}

/// A reduction builder (`Graph::reduce_sum`, …).
type Reduction = fn(&mut Graph, ValueId, Option<&[i64]>, bool) -> Result<ValueId>;

#[test]
fn every_reduction_takes_none_for_all_axes() {
    // x[i,j,k] = 12i + 4j + k over [2, 3, 4]: one call each, `None` = every axis
    let x = ar(DType::F64);
    let all = |f: Reduction, x: Tensor, keep: bool| apply1(x, |g, v| f(g, v, None, keep));
    assert_eq!(all(Graph::reduce_sum, x.clone(), false), f64t(&[], &[276.0]));
    assert_eq!(all(Graph::reduce_mean, x.clone(), false), f64t(&[], &[11.5]));
    assert_eq!(all(Graph::reduce_max, x.clone(), false), f64t(&[], &[23.0]));
    assert_eq!(all(Graph::reduce_min, x.clone(), true), f64t(&[1, 1, 1], &[0.0]));
    let p = all(Graph::reduce_prod, f64t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]), false);
    assert_eq!(p, f64t(&[], &[24.0]));
    let lse = all(Graph::reduce_logsumexp, f64t(&[2], &[0.0, 0.0]), false);
    assert_close(&lse, &f64t(&[], &[2f64.ln()]), 1e-15);
    let b = boolt(&[2, 2], &[true, false, true, true]);
    assert_eq!(all(Graph::reduce_all, b.clone(), false), boolt(&[], &[false]));
    assert_eq!(all(Graph::reduce_any, b, true), boolt(&[1, 1], &[true]));
    // `None` is the explicit list of every axis; `Some(&[])` stays the identity
    assert_eq!(apply1(x.clone(), |g, v| g.reduce_max(v, Some(&[0, 1, 2]), false)), f64t(&[], &[23.0]));
    assert_eq!(apply1(x.clone(), |g, v| g.reduce_max(v, Some(&[]), false)), x);
}

#[test]
fn reductions_of_empty_tensors() {
    let inf = f64::INFINITY;
    for dt in [DType::F32, DType::F64] {
        let x = Tensor::zeros(dt, &[0, 3]).unwrap();
        let r = |k| red(k, x.clone(), &[0], false).to_f64_vec();
        assert_eq!(r(ReduceKind::Sum), vec![0.0; 3]);
        assert_eq!(r(ReduceKind::Prod), vec![1.0; 3]);
        assert_eq!(r(ReduceKind::Max), vec![-inf; 3]);
        assert_eq!(r(ReduceKind::Min), vec![inf; 3]);
        assert_eq!(r(ReduceKind::LogSumExp), vec![-inf; 3]);
        assert!(r(ReduceKind::Mean).iter().all(|v| v.is_nan()));
        // Reducing the non-empty axis of an empty tensor gives an empty result.
        let y = red(ReduceKind::Sum, x.clone(), &[1], false);
        assert_eq!(y.shape(), &[0]);
        let y = red(ReduceKind::LogSumExp, x.clone(), &[1], true);
        assert_eq!(y.shape(), &[0, 1]);
        assert_eq!(red(ReduceKind::Sum, x.clone(), &[0, 1], false).to_f64_vec(), vec![0.0]);
    }
    let x = Tensor::zeros(DType::I64, &[2, 0]).unwrap();
    assert_eq!(red(ReduceKind::Max, x.clone(), &[1], false), i64t(&[2], &[i64::MIN, i64::MIN]));
    assert_eq!(red(ReduceKind::Min, x.clone(), &[-1], true), i64t(&[2, 1], &[i64::MAX, i64::MAX]));
    assert_eq!(red(ReduceKind::Sum, x.clone(), &[1], false), i64t(&[2], &[0, 0]));
    assert_eq!(red(ReduceKind::Prod, x, &[1], false), i64t(&[2], &[1, 1]));
    let b = boolt(&[0, 2], &[]);
    assert_eq!(red(ReduceKind::All, b.clone(), &[0], false), boolt(&[2], &[true, true]));
    assert_eq!(red(ReduceKind::Any, b, &[0], false), boolt(&[2], &[false, false]));
}

#[test]
fn max_min_propagate_nan_and_i64_sum_wraps() {
    let nan = f64::NAN;
    let x = f64t(&[2, 3], &[1.0, nan, 3.0, 4.0, 5.0, 6.0]);
    let mx = red(ReduceKind::Max, x.clone(), &[1], false).to_f64_vec();
    assert!(mx[0].is_nan() && mx[1] == 6.0, "{mx:?}");
    let mn = red(ReduceKind::Min, x.clone(), &[0], false).to_f64_vec();
    assert!(mn[0] == 1.0 && mn[1].is_nan() && mn[2] == 3.0, "{mn:?}");
    let mx = red(ReduceKind::Max, f64t(&[2], &[nan, 1.0]), &[0], false).to_f64_vec();
    assert!(mx[0].is_nan());
    assert_eq!(red(ReduceKind::Sum, i64t(&[2], &[i64::MAX, 1]), &[0], false), i64t(&[], &[i64::MIN]));
}

#[test]
fn size_one_axes_inside_the_reduced_block() {
    // [2,1,3] reduced over {0,2}: the size-1 axis between them is kept.
    let x = Tensor::arange(6).unwrap().reshape(&[2, 1, 3]).unwrap();
    assert_eq!(red(ReduceKind::Sum, x.clone(), &[0, 2], false), i64t(&[1], &[15]));
    assert_eq!(red(ReduceKind::Sum, x.clone(), &[0, 2], true), i64t(&[1, 1, 1], &[15]));
    assert_eq!(red(ReduceKind::Max, x, &[2, 0], false), i64t(&[1], &[5]));
    // Non-adjacent reduced axes on rank 4: [2,2,2,2] over {1,3}: out[a,c] = Σ_b Σ_d (8a+4b+2c+d).
    let x = Tensor::arange(16).unwrap().reshape(&[2, 2, 2, 2]).unwrap();
    let want: Vec<i64> = vec![10, 18, 42, 50];
    assert_eq!(red(ReduceKind::Sum, x, &[1, 3], false), i64t(&[2, 2], &want));
}

#[test]
fn argmax_argmin_values() {
    for dt in [DType::F32, DType::F64, DType::I64] {
        let x = ar(dt);
        let am = |axis| apply1(x.clone(), |g, x| g.argmax(x, axis));
        let an = |axis| apply1(x.clone(), |g, x| g.argmin(x, axis));
        assert_eq!(am(0), i64t(&[3, 4], &[1; 12]));
        assert_eq!(an(0), i64t(&[3, 4], &[0; 12]));
        assert_eq!(am(1), i64t(&[2, 4], &[2; 8]));
        assert_eq!(am(-1), i64t(&[2, 3], &[3; 6]));
        assert_eq!(an(-2), i64t(&[2, 4], &[0; 8]));
        // Mixed values on [2,3] along both axes.
        let y = f64t(&[2, 3], &[5.0, -1.0, 7.0, 2.0, 9.0, 0.0]).cast(dt);
        assert_eq!(apply1(y.clone(), |g, x| g.argmax(x, 1)), i64t(&[2], &[2, 1]));
        assert_eq!(apply1(y.clone(), |g, x| g.argmin(x, 1)), i64t(&[2], &[1, 2]));
        assert_eq!(apply1(y.clone(), |g, x| g.argmax(x, 0)), i64t(&[3], &[0, 1, 0]));
        assert_eq!(apply1(y, |g, x| g.argmin(x, 0)), i64t(&[3], &[1, 0, 1]));
        // Ties resolve to the smallest index; rank 1 gives a scalar.
        let t = f64t(&[5], &[1.0, 3.0, 0.0, 3.0, 0.0]).cast(dt);
        assert_eq!(apply1(t.clone(), |g, x| g.argmax(x, 0)), i64t(&[], &[1]));
        assert_eq!(apply1(t, |g, x| g.argmin(x, -1)), i64t(&[], &[2]));
        let t = f64t(&[2, 2], &[4.0, 4.0, 4.0, 4.0]).cast(dt);
        assert_eq!(apply1(t.clone(), |g, x| g.argmax(x, 0)), i64t(&[2], &[0, 0]));
        assert_eq!(apply1(t, |g, x| g.argmin(x, 1)), i64t(&[2], &[0, 0]));
    }
}

#[test]
fn argmax_argmin_nan_first_nan_wins() {
    let nan = f64::NAN;
    let x = f64t(&[2, 4], &[1.0, nan, 5.0, nan, 9.0, 2.0, -3.0, 4.0]);
    assert_eq!(apply1(x.clone(), |g, x| g.argmax(x, 1)), i64t(&[2], &[1, 0]));
    assert_eq!(apply1(x.clone(), |g, x| g.argmin(x, 1)), i64t(&[2], &[1, 2]));
    assert_eq!(apply1(x.clone(), |g, x| g.argmax(x, 0)), i64t(&[4], &[1, 0, 0, 0]));
    assert_eq!(apply1(x.cast(DType::F32), |g, x| g.argmin(x, 0)), i64t(&[4], &[0, 0, 1, 0]));
}

#[test]
fn argmax_of_an_empty_axis_is_a_shape_error() {
    // Fixed empty axis: rejected when the node is added.
    let mut g = Graph::new();
    let x = g.constant(Tensor::zeros(DType::F32, &[0, 3]).unwrap());
    let e = g.argmax(x, 0).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "argmax"), "{e}");
    // Reducing the non-empty axis of an empty tensor is fine.
    let y = g.argmin(x, 1).unwrap();
    assert_eq!(eval1(&g, y), i64t(&[0], &[]));
    // Dynamic axis that turns out empty: a run-time error.
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [Dim::unknown(), Dim::fixed(2)]);
    let y = g.argmin(x, 0).unwrap();
    assert_eq!(g.shape(y).unwrap(), Shape::fixed(&[2]));
    let e = run_recorded(&g, &[y], &[(x, Tensor::zeros(DType::F64, &[0, 2]).unwrap())]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "argmin"), "{e}");
    let ok = run_recorded(&g, &[y], &[(x, f64t(&[2, 2], &[3.0, 1.0, 2.0, 4.0]))]).unwrap();
    assert_eq!(ok[0], i64t(&[2], &[1, 0]));
}

fn scan(k: ReduceKind, x: Tensor, axis: i64, exclusive: bool, reverse: bool) -> Tensor {
    apply1(x, |g, x| match k {
        ReduceKind::CumSum => g.cumsum(x, axis, exclusive, reverse),
        _ => g.cumprod(x, axis, exclusive, reverse),
    })
}

#[test]
fn cumsum_cumprod_exclusive_reverse_combos_1d() {
    let s = ReduceKind::CumSum;
    let p = ReduceKind::CumProd;
    let cases: [(ReduceKind, bool, bool, [f64; 4]); 8] = [
        (s, false, false, [1.0, 3.0, 6.0, 10.0]),
        (s, true, false, [0.0, 1.0, 3.0, 6.0]),
        (s, false, true, [10.0, 9.0, 7.0, 4.0]),
        (s, true, true, [9.0, 7.0, 4.0, 0.0]),
        (p, false, false, [1.0, 2.0, 6.0, 24.0]),
        (p, true, false, [1.0, 1.0, 2.0, 6.0]),
        (p, false, true, [24.0, 24.0, 12.0, 4.0]),
        (p, true, true, [24.0, 12.0, 4.0, 1.0]),
    ];
    for dt in [DType::F32, DType::F64, DType::I64] {
        let x = f64t(&[4], &[1.0, 2.0, 3.0, 4.0]).cast(dt);
        for (k, ex, rev, want) in &cases {
            let got = scan(*k, x.clone(), 0, *ex, *rev);
            assert_eq!(got, f64t(&[4], want).cast(dt), "{} exclusive={ex} reverse={rev} {dt}", k.name());
        }
    }
}

#[test]
fn cumsum_cumprod_along_axes_2d() {
    let x = i64t(&[2, 3], &[1, 2, 3, 4, 5, 6]);
    let s = ReduceKind::CumSum;
    let cases: [(i64, bool, bool, [i64; 6]); 8] = [
        (0, false, false, [1, 2, 3, 5, 7, 9]),
        (0, true, false, [0, 0, 0, 1, 2, 3]),
        (0, false, true, [5, 7, 9, 4, 5, 6]),
        (-2, true, true, [4, 5, 6, 0, 0, 0]),
        (1, false, false, [1, 3, 6, 4, 9, 15]),
        (1, true, false, [0, 1, 3, 0, 4, 9]),
        (-1, false, true, [6, 5, 3, 15, 11, 6]),
        (-1, true, true, [5, 3, 0, 11, 6, 0]),
    ];
    for (axis, ex, rev, want) in &cases {
        assert_eq!(scan(s, x.clone(), *axis, *ex, *rev), i64t(&[2, 3], want), "axis={axis} ex={ex} rev={rev}");
    }
    let p = ReduceKind::CumProd;
    let xf = x.cast(DType::F32);
    assert_eq!(scan(p, xf.clone(), 0, false, false), f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 10.0, 18.0]));
    assert_eq!(scan(p, xf.clone(), 0, true, true), f32t(&[2, 3], &[4.0, 5.0, 6.0, 1.0, 1.0, 1.0]));
    assert_eq!(scan(p, xf.clone(), 1, false, true), f32t(&[2, 3], &[6.0, 6.0, 3.0, 120.0, 30.0, 6.0]));
    assert_eq!(scan(p, xf, 1, true, false), f32t(&[2, 3], &[1.0, 1.0, 2.0, 1.0, 4.0, 20.0]));
    // Middle axis of a rank-3 tensor: x[i,j,k] = 12i + 4j + k, cumsum over j.
    let want = grid(&[2, 3, 4], &|q| {
        let (i, j, k) = (f(q[0]), f(q[1]), f(q[2]));
        (j + 1.0) * (12.0 * i + k) + 2.0 * j * (j + 1.0)
    });
    assert_eq!(scan(s, ar(DType::I64), 1, false, false), f64t(&[2, 3, 4], &want).cast(DType::I64));
}

#[test]
fn scans_of_empty_tensors_and_shared_inputs() {
    for (shape, axis) in [(&[0, 3][..], 0), (&[0, 3][..], 1), (&[2, 0][..], 1), (&[2, 0][..], 0)] {
        for (ex, rev) in [(false, false), (true, true)] {
            let got = scan(ReduceKind::CumSum, Tensor::zeros(DType::F32, shape).unwrap(), axis, ex, rev);
            assert_eq!(got.shape(), shape);
            let got = scan(ReduceKind::CumProd, Tensor::zeros(DType::I64, shape).unwrap(), axis, ex, rev);
            assert_eq!(got.shape(), shape);
        }
    }
    // The scan must not write into a buffer that another consumer still reads.
    let mut g = Graph::new();
    let x = g.constant(i64t(&[3], &[1, 2, 3]));
    let y = g.cumsum(x, 0, false, false).unwrap();
    let z = g.reduce_sum(x, Some(&[0]), false).unwrap();
    let out = eval(&g, &[y, x, z]);
    assert_eq!(out[0], i64t(&[3], &[1, 3, 6]));
    assert_eq!(out[1], i64t(&[3], &[1, 2, 3]));
    assert_eq!(out[2], i64t(&[], &[6]));
}

#[test]
fn dynamic_dims_are_reduced_or_kept_as_one() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(3)]);
    let a = g.reduce_sum(x, Some(&[0]), false).unwrap();
    let b = g.reduce_max(x, Some(&[0]), true).unwrap();
    let c = g.reduce_mean(x, Some(&[1]), true).unwrap();
    let d = g.cumsum(x, 0, true, false).unwrap();
    let e = g.argmax(x, 1).unwrap();
    assert_eq!(g.shape(a).unwrap(), Shape::fixed(&[3]));
    assert_eq!(g.shape(b).unwrap(), Shape::fixed(&[1, 3]));
    assert_eq!(g.shape(c).unwrap(), Shape::from_dims([Dim::dynamic("n"), Dim::fixed(1)]));
    assert_eq!(g.shape(d).unwrap(), Shape::from_dims([Dim::dynamic("n"), Dim::fixed(3)]));
    assert_eq!(g.shape(e).unwrap(), Shape::from_dims([Dim::dynamic("n")]));
    let feed = f32t(&[2, 3], &[1.0, 5.0, 3.0, 4.0, 2.0, 6.0]);
    let out = run_recorded(&g, &[a, b, c, d, e], &[(x, feed)]).unwrap();
    assert_eq!(out[0], f32t(&[3], &[5.0, 7.0, 9.0]));
    assert_eq!(out[1], f32t(&[1, 3], &[4.0, 5.0, 6.0]));
    assert_eq!(out[2], f32t(&[2, 1], &[3.0, 4.0]));
    assert_eq!(out[3], f32t(&[2, 3], &[0.0, 0.0, 0.0, 1.0, 5.0, 3.0]));
    assert_eq!(out[4], i64t(&[2], &[1, 2]));
}

#[test]
fn axis_errors_name_the_op() {
    let mut g = Graph::new();
    let x = g.constant(ar(DType::F32));
    let e = g.reduce_sum(x, Some(&[3]), false).unwrap_err();
    assert!(matches!(e.root(), Error::Axis { op, axis: 3, rank: 3 } if op == "reduce_sum"), "{e}");
    let e = g.reduce_max(x, Some(&[0, -4]), true).unwrap_err();
    assert!(matches!(e.root(), Error::Axis { op, axis: -4, rank: 3 } if op == "reduce_max"), "{e}");
    let e = g.argmin(x, 3).unwrap_err();
    assert!(matches!(e.root(), Error::Axis { op, axis: 3, .. } if op == "argmin"), "{e}");
    let e = g.cumprod(x, -4, false, false).unwrap_err();
    assert!(matches!(e.root(), Error::Axis { op, axis: -4, .. } if op == "cumprod"), "{e}");
    let s = g.constant(Tensor::scalar(1.0f32));
    let e = g.argmax(s, 0).unwrap_err();
    assert!(matches!(e.root(), Error::Axis { op, rank: 0, .. } if op == "argmax"), "{e}");
    // Duplicate axes (also when spelled differently).
    for axes in [&[1, 1][..], &[0, -3][..], &[2, 0, -1][..]] {
        let e = g.reduce_mean(x, Some(axes), false).unwrap_err();
        assert!(matches!(e.root(), Error::Shape { op, .. } if op == "reduce_mean"), "{e}");
        assert!(e.to_string().contains("reduce_mean"), "{e}");
    }
}

#[test]
fn dtype_and_arity_errors_name_the_op() {
    let mut g = Graph::new();
    let i = g.constant(ar(DType::I64));
    let f = g.constant(ar(DType::F32));
    let b = g.constant(boolt(&[2], &[true, false]));
    let dt_err = |r: Result<ValueId>, name: &str, got: DType| {
        let e = r.unwrap_err();
        assert!(matches!(e.root(), Error::DType { op, got: gd, .. } if op == name && *gd == got), "{name}: {e}");
    };
    dt_err(g.reduce_mean(i, Some(&[0]), false), "reduce_mean", DType::I64);
    dt_err(g.reduce_logsumexp(i, Some(&[]), false), "reduce_logsumexp", DType::I64);
    dt_err(g.reduce_all(f, Some(&[0]), false), "reduce_all", DType::F32);
    dt_err(g.reduce_any(i, Some(&[0]), false), "reduce_any", DType::I64);
    dt_err(g.reduce_sum(b, Some(&[0]), false), "reduce_sum", DType::Bool);
    dt_err(g.reduce_prod(b, Some(&[0]), false), "reduce_prod", DType::Bool);
    dt_err(g.reduce_max(b, Some(&[0]), false), "reduce_max", DType::Bool);
    dt_err(g.reduce_min(b, Some(&[0]), false), "reduce_min", DType::Bool);
    dt_err(g.argmax(b, 0), "argmax", DType::Bool);
    dt_err(g.argmin(b, 0), "argmin", DType::Bool);
    dt_err(g.cumsum(b, 0, false, false), "cumsum", DType::Bool);
    dt_err(g.cumprod(b, 0, true, true), "cumprod", DType::Bool);
    dt_err(g.mean_all(i), "reduce_mean", DType::I64);
    dt_err(g.reduce_variance(i, Some(&[0]), false), "reduce_variance", DType::I64);
    dt_err(g.reduce(ReduceKind::Variance, b, None, false), "reduce_variance", DType::Bool);
    let e = g.add_op(Op::Reduce(ReduceOp::Axes { kind: ReduceKind::Sum, axes: vec![], keep_dims: false }), &[f, f]);
    let e = e.unwrap_err();
    assert!(matches!(e.root(), Error::Arity { op, got: 2, .. } if op == "reduce_sum"), "{e}");
}

#[test]
fn large_inputs_take_the_parallel_paths() {
    let n = pfor::ops::unary::PAR_THRESHOLD * 2 + 7;
    let nn = n as i64;
    // One long contiguous reduction.
    let x = Tensor::arange(n).unwrap();
    assert_eq!(apply1(x.clone(), |g, x| g.sum_all(x)), i64t(&[], &[nn * (nn - 1) / 2]));
    assert_eq!(apply1(x.clone(), |g, x| g.argmax(x, 0)), i64t(&[], &[nn - 1]));
    let c = apply1(x, |g, x| g.cumsum(x, 0, true, false)).to_vec::<i64>().unwrap();
    assert_eq!((c[0], c[n - 1]), (0, (nn - 1) * (nn - 2) / 2));
    // Many rows, with inner > 1 and inner == 1: x[r, c] = 4r + c.
    let rows = n / 4;
    let r = rows as i64;
    let x = Tensor::arange(rows * 4).unwrap().reshape(&[rows, 4]).unwrap();
    let s0 = apply1(x.clone(), |g, x| g.reduce_sum(x, Some(&[0]), false)).to_vec::<i64>().unwrap();
    let want0: Vec<i64> = (0..4).map(|c| 4 * r * (r - 1) / 2 + c * r).collect();
    assert_eq!(s0, want0);
    let s1 = apply1(x.clone(), |g, x| g.reduce_sum(x, Some(&[1]), false)).to_vec::<i64>().unwrap();
    assert!(s1.iter().enumerate().all(|(i, &v)| v == 16 * i as i64 + 6));
    let m = apply1(x.clone().cast(DType::F64), |g, x| g.reduce_logsumexp(x, Some(&[0]), false)).to_f64_vec();
    // Column 3 holds 4t + 3: lse = 4(r-1) + 3 + ln Σ_t e^(-4t) = 4(r-1) + 3 - ln(1 - e^-4).
    let want3 = 4.0 * (r - 1) as f64 + 3.0 - (1.0 - (-4.0f64).exp()).ln();
    assert!((m[3] - want3).abs() < 1e-9, "{} vs {want3}", m[3]);
    let cs = apply1(x.clone(), |g, x| g.cumsum(x, 0, false, true)).to_vec::<i64>().unwrap();
    assert_eq!(cs[0], 4 * r * (r - 1) / 2);
    assert_eq!(cs[(rows - 1) * 4 + 3], 4 * (r - 1) + 3);
    // Many short scans / reductions (row-parallel): row i is [4i, 4i+1, 4i+2, 4i+3].
    let cs = apply1(x.clone(), |g, x| g.cumsum(x, 1, false, false)).to_vec::<i64>().unwrap();
    assert!(cs.chunks(4).enumerate().all(|(i, c)| {
        let i = i as i64;
        c == [4 * i, 8 * i + 1, 12 * i + 3, 16 * i + 6]
    }));
    assert_eq!(apply1(x.clone(), |g, x| g.argmax(x, 1)), i64t(&[rows], &vec![3; rows]));
    let l = apply1(x.cast(DType::F64), |g, x| g.reduce_logsumexp(x, Some(&[1]), false)).to_f64_vec();
    let tail = (1.0 + (-1.0f64).exp() + (-2.0f64).exp() + (-3.0f64).exp()).ln();
    assert!(l.iter().enumerate().all(|(i, &v)| (v - (4.0 * i as f64 + 3.0 + tail)).abs() < 1e-9));
    // Row-parallel with inner > 1: x[a,b,c] = 8a + 4b + c over [m, 2, 4], reduced over b.
    let m = pfor::ops::unary::PAR_THRESHOLD / 8 + 1;
    let x = Tensor::arange(8 * m).unwrap().reshape(&[m, 2, 4]).unwrap();
    let s = apply1(x.clone(), |g, x| g.reduce_sum(x, Some(&[1]), false)).to_vec::<i64>().unwrap();
    assert!(s.chunks(4).enumerate().all(|(a, c)| (0..4).all(|k| c[k] == 16 * a as i64 + 4 + 2 * k as i64)));
    assert_eq!(apply1(x.clone(), |g, x| g.argmax(x, 1)), i64t(&[m, 4], &vec![1; 4 * m]));
    assert_eq!(apply1(x, |g, x| g.argmin(x, 1)), i64t(&[m, 4], &vec![0; 4 * m]));
}

#[test]
fn names_and_display() {
    let names: Vec<&str> = ReduceKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(
        names,
        [
            "reduce_sum",
            "reduce_mean",
            "reduce_prod",
            "reduce_max",
            "reduce_min",
            "reduce_all",
            "reduce_any",
            "reduce_logsumexp",
            "reduce_variance",
            "argmax",
            "argmin",
            "cumsum",
            "cumprod"
        ]
    );
    let op = Op::Reduce(ReduceOp::Axes { kind: ReduceKind::Sum, axes: vec![0, -1], keep_dims: true });
    assert_eq!(op.to_string(), "reduce_sum{axes=[0, -1], keep_dims=true}");
    assert_eq!(Op::Reduce(ReduceOp::Arg { kind: ReduceKind::ArgMin, axis: 2 }).to_string(), "argmin{axis=2}");
    let op = Op::Reduce(ReduceOp::Scan { kind: ReduceKind::CumProd, axis: -1, exclusive: true, reverse: false });
    assert_eq!(op.to_string(), "cumprod{axis=-1, exclusive=true, reverse=false}");
    assert_eq!(op.kind(), OpKind::Reduce(ReduceKind::CumProd));
}
