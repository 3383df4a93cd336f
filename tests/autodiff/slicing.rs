//! Derivative tests of the `slicing` family: every kind against finite differences, with
//! strided slices over negative strides and every mask, the mirror pad modes (whose adjoint
//! folds the borders back), and second order for concat, slice, pad, reverse and a strided slice.

use super::fd::{FdCase, case, check, randn};
use pfor::ops::slicing::{PadMode, StridedSliceSpec};
use pfor::prelude::*;

fn i64v(v: &[i64]) -> Tensor {
    Tensor::vec1(v)
}

/// `y * y` so that second derivatives are not identically zero.
fn sq(g: &mut Graph, y: ValueId) -> Result<ValueId> {
    g.mul(y, y)
}

fn strided(name: &str, shape: &[usize], spec: StridedSliceSpec, seed: u64) -> FdCase {
    case(&format!("strided_slice {name}"), vec![randn(shape, seed)], move |g, x| {
        Ok(vec![g.strided_slice(x[0], &spec)?])
    })
}

fn pad_case(name: &str, shape: &[usize], pads: &[(usize, usize)], mode: PadMode, seed: u64) -> FdCase {
    let pads = pads.to_vec();
    case(&format!("pad {name}"), vec![randn(shape, seed)], move |g, x| {
        let y = g.pad(x[0], &pads, mode)?;
        Ok(vec![sq(g, y)?])
    })
}

pub fn cases() -> Vec<FdCase> {
    vec![
        case("concat axis 1", vec![randn(&[2, 3], 1), randn(&[2, 1], 2), randn(&[2, 2], 3)], |g, x| {
            let y = g.concat(x, 1)?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case("concat axis -2, one input differentiated", vec![randn(&[1, 3], 4), randn(&[2, 3], 5)], |g, x| {
            Ok(vec![g.concat(x, -2)?])
        })
        .wrt(&[1]),
        case(
            "concat, sizes known at run time",
            vec![randn(&[2, 3], 31), randn(&[2, 1], 32), randn(&[2, 2], 33)],
            |g, x| {
                let d: Vec<ValueId> = x.iter().map(|v| super::fd::dyn_dims(g, *v)).collect::<Result<_>>()?;
                let y = g.concat(&d, 1)?;
                Ok(vec![sq(g, y)?])
            },
        )
        .second(),
        case("split, both outputs", vec![randn(&[5, 3], 6)], |g, x| g.split(x[0], 0, &[2, 3])),
        case("split, one output unused", vec![randn(&[2, 6], 7)], |g, x| {
            let parts = g.split(x[0], -1, &[1, 2, 3])?;
            Ok(vec![sq(g, parts[1])?])
        })
        .second(),
        case("slice", vec![randn(&[4, 5], 8)], |g, x| {
            let y = g.slice(x[0], &[1, 2], &[2, -1])?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        case("dynamic_slice (run-time begin)", vec![randn(&[4, 5], 9), i64v(&[1, 2])], |g, x| {
            let y = g.dynamic_slice(x[0], x[1], &[2, 3])?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
        strided("stride 2", &[7, 3], StridedSliceSpec::new(&[1, 0], &[7, 3], &[2, 1]), 10),
        strided(
            "negative strides",
            &[6, 5],
            StridedSliceSpec::new(&[5, -1], &[0, 0], &[-2, -3]).with_end_mask(0b10),
            11,
        )
        .second(),
        strided(
            "ellipsis, new axis, shrink",
            &[3, 4, 5],
            StridedSliceSpec::new(&[0, 0, 1, 2], &[0, 0, 2, 5], &[1, 1, 1, 1])
                .with_ellipsis_mask(0b1)
                .with_new_axis_mask(0b10)
                .with_shrink_axis_mask(0b100),
            12,
        ),
        strided(
            "begin/end masks, shrink -1",
            &[4, 6],
            StridedSliceSpec::new(&[-1, 0], &[0, 0], &[1, 3])
                .with_shrink_axis_mask(0b1)
                .with_begin_mask(0b10)
                .with_end_mask(0b10),
            13,
        ),
        strided("empty range", &[4, 3], StridedSliceSpec::new(&[2, 0], &[2, 3], &[1, 1]), 14),
        pad_case("constant", &[2, 3], &[(1, 2), (0, 1)], PadMode::Constant(1.5), 15).second(),
        pad_case("reflect", &[4, 3], &[(2, 3), (1, 0)], PadMode::Reflect, 16).second(),
        pad_case("symmetric", &[3, 4], &[(3, 1), (2, 4)], PadMode::Symmetric, 17).second(),
        case("reverse", vec![randn(&[3, 4, 2], 18)], |g, x| Ok(vec![g.reverse(x[0], &[0, -1])?])).second(),
        case("roll (run-time shift)", vec![randn(&[4, 5], 19), i64v(&[-3, 7, 1])], |g, x| {
            let y = g.roll(x[0], x[1], &[0, 1, 1])?;
            Ok(vec![sq(g, y)?])
        })
        .second(),
    ]
}

#[test]
fn slicing_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn integer_offsets_get_no_gradient() {
    // d/d x of sum(dynamic_slice(x, begin)) is the window indicator; begin has none.
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [4]);
    let b = g.input("b", DType::I64, [1]);
    let y = g.dynamic_slice(x, b, &[2]).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, Tensor::vec1(&[1.0f64, 2.0, 3.0, 4.0])), (b, i64v(&[1]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![0.0, 1.0, 1.0, 0.0]);
    assert!(pfor::autodiff::gradients(&mut g, &[l], &[b], None).is_err(), "an i64 x has no gradient");
}

#[test]
fn reflect_pad_adjoint_folds_borders_back() {
    // pad([a, b, c], (2, 2), reflect) = [c, b, a, b, c, b, a]: d/d[a, b, c] of its sum.
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let y = g.pad(x, &[(2, 2)], PadMode::Reflect).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, Tensor::vec1(&[1.0f64, 2.0, 3.0]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![2.0, 3.0, 2.0]);
}

#[test]
fn dynamic_dims_use_shape_free_adjoints_or_clear_errors() {
    // x: [?, 3]. slice and constant pad have adjoints that work on run-time shapes.
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, Shape::from_dims([Dim::unknown(), Dim::Fixed(3)]));
    let s = g.slice(x, &[1, 0], &[2, -1]).unwrap();
    let p = g.pad(x, &[(1, 0), (0, 2)], PadMode::Constant(0.0)).unwrap();
    let w = g.constant(randn(&[5, 5], 3));
    let pw = g.mul(p, w).unwrap();
    let (ls, lp) = (g.sum_all(s).unwrap(), g.sum_all(pw).unwrap());
    let l = g.add(ls, lp).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, randn(&[4, 3], 4))]).unwrap()[0].to_f64_vec();
    let wv = randn(&[5, 5], 3).to_f64_vec();
    for r in 0..4 {
        for c in 0..3 {
            let want = f64::from(u8::from((1..3).contains(&r))) + wv[(r + 1) * 5 + c];
            assert!((v[r * 3 + c] - want).abs() < 1e-12, "[{r},{c}]: {} vs {want}", v[r * 3 + c]);
        }
    }
    // A strided slice over a dynamic dim needs static shapes for its adjoint: a clear error.
    let ss = g.strided_slice(x, &StridedSliceSpec::new(&[0], &[4], &[2])).unwrap();
    let l2 = g.sum_all(ss).unwrap();
    let e = pfor::autodiff::gradients(&mut g, &[l2], &[x], None).unwrap_err().to_string();
    assert!(e.contains("strided_slice") && e.contains("static"), "{e}");
}

#[test]
fn jacobians_through_slicing_and_indexing_vectorize() {
    // The derivative graphs of these rules run under strict pfor and agree with the loop.
    use pfor::api::{jacobian_fwd, jacobian_loop, jacobian_with};
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [6]);
    let sl = g.strided_slice(x, &StridedSliceSpec::new(&[5], &[0], &[-2])).unwrap();
    let pr = g.pad(sl, &[(2, 1)], PadMode::Reflect).unwrap();
    let xx = g.mul(x, x).unwrap();
    let idx = g.constant(i64v(&[4, 1, 4]));
    let ga = g.gather(xx, idx, 0).unwrap();
    let ids = g.constant(i64v(&[0, 1, 0, 1, -1, 0]));
    let sm = g.unsorted_segment_max(x, ids, 2).unwrap();
    let sh = g.constant(Tensor::scalar(2i64));
    let ro = g.roll(x, sh, &[0]).unwrap();
    let y = g.concat(&[pr, ga, sm, ro], 0).unwrap();
    let feeds = [(x, randn(&[6], 9))];
    let j = jacobian_with(&mut g, y, x, &pfor::vectorize::PforOptions::strict()).unwrap();
    let jl = jacobian_loop(&mut g, y, x).unwrap();
    let jf = jacobian_fwd(&mut g, y, x).unwrap();
    let v = run_once(&g, &[j, jl, jf], &feeds).unwrap();
    assert_eq!(v[0].shape(), &[17, 6]);
    for (a, b) in [(&v[0], &v[1]), (&v[0], &v[2])] {
        for (p, q) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
            assert!((p - q).abs() < 1e-12, "{a}\n{b}");
        }
    }
}
