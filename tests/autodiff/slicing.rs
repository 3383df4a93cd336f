//! Derivative tests of the `slicing` family: every kind against finite differences, with
//! strided slices over negative strides and every mask, the mirror pad modes (whose adjoint
//! folds the borders back), and second order for concat, slice and pad.

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
        strided("negative strides", &[6, 5], StridedSliceSpec::new(&[5, -1], &[0, 0], &[-2, -3]).with_end_mask(0b10), 11),
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
            StridedSliceSpec::new(&[-1, 0], &[0, 0], &[1, 3]).with_shrink_axis_mask(0b1).with_begin_mask(0b10).with_end_mask(0b10),
            13,
        ),
        strided("empty range", &[4, 3], StridedSliceSpec::new(&[2, 0], &[2, 3], &[1, 1]), 14),
        pad_case("constant", &[2, 3], &[(1, 2), (0, 1)], PadMode::Constant(1.5), 15).second(),
        pad_case("reflect", &[4, 3], &[(2, 3), (1, 0)], PadMode::Reflect, 16).second(),
        pad_case("symmetric", &[3, 4], &[(3, 1), (2, 4)], PadMode::Symmetric, 17).second(),
        case("reverse", vec![randn(&[3, 4, 2], 18)], |g, x| Ok(vec![g.reverse(x[0], &[0, -1])?])),
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
