//! Derivative tests of the `shape` family: every differentiable kind (static and `*_dyn`
//! variants), with several axes / shapes, first and second order. The shape ops are linear,
//! so second-order cases compose them with a square to get non-zero hessians.

use super::fd::{FdCase, case, check, randn};
use pfor::prelude::*;

/// `op(x)²` so second derivatives are not identically zero.
fn sq(g: &mut Graph, op: impl FnOnce(&mut Graph) -> Result<ValueId>) -> Result<Vec<ValueId>> {
    let y = op(g)?;
    Ok(vec![g.square(y)?])
}

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    let x23 = || randn(&[2, 3], 1);
    let x234 = || randn(&[2, 3, 4], 2);
    vec![
        case("reshape [2,3] -> [3,2]", vec![x23()], |g, x| sq(g, |g| g.reshape(x[0], &[3, 2]))).second(),
        case("reshape [2,3,4] -> [-1, 4]", vec![x234()], |g, x| Ok(vec![g.reshape(x[0], &[-1, 4])?])),
        case("reshape_dyn", vec![x234()], |g, x| {
            let s = g.constant(Tensor::vec1(&[4i64, 6]));
            sq(g, |g| g.reshape_dyn(x[0], s))
        })
        .second(),
        case("transpose [2,0,1]", vec![x234()], |g, x| sq(g, |g| g.transpose(x[0], &[2, 0, 1]))).second(),
        case("transpose [1,0]", vec![x23()], |g, x| Ok(vec![g.transpose(x[0], &[1, 0])?])),
        case("expand_dims 1", vec![x23()], |g, x| sq(g, |g| g.expand_dims(x[0], 1))).second(),
        case("expand_dims -1", vec![x23()], |g, x| Ok(vec![g.expand_dims(x[0], -1)?])),
        case("squeeze [1]", vec![randn(&[2, 1, 3], 3)], |g, x| sq(g, |g| g.squeeze(x[0], Some(&[1])))).second(),
        case("squeeze all", vec![randn(&[1, 3, 1], 4)], |g, x| Ok(vec![g.squeeze(x[0], None)?])),
        case("broadcast_to [3] -> [2,3]", vec![randn(&[3], 5)], |g, x| sq(g, |g| g.broadcast_to(x[0], &[2, 3])))
            .second(),
        case("broadcast_to [2,1] -> [4,2,3]", vec![randn(&[2, 1], 6)], |g, x| {
            Ok(vec![g.broadcast_to(x[0], &[4, 2, 3])?])
        }),
        case("broadcast_to_dyn", vec![randn(&[1, 3], 7)], |g, x| {
            let s = g.constant(Tensor::vec1(&[2i64, 2, 3]));
            sq(g, |g| g.broadcast_to_dyn(x[0], s))
        })
        .second(),
        case("tile [2,1]", vec![x23()], |g, x| sq(g, |g| g.tile(x[0], &[2, 1]))).second(),
        case("tile [1,2,3]", vec![randn(&[2, 1, 2], 8)], |g, x| Ok(vec![g.tile(x[0], &[1, 2, 3])?])),
        case("tile, dims known at run time", vec![randn(&[2, 1, 2], 31)], |g, x| {
            let d = super::fd::dyn_dims(g, x[0])?;
            sq(g, |g| g.tile(d, &[1, 2, 3]))
        })
        .second(),
        case("fill", vec![randn(&[], 9)], |g, x| sq(g, |g| g.fill(&[2, 3], x[0]))).second(),
        case("fill_dyn", vec![randn(&[], 10)], |g, x| {
            let s = g.constant(Tensor::vec1(&[3i64, 2]));
            sq(g, |g| g.fill_dyn(s, x[0]))
        })
        .second(),
        case("identity", vec![x23()], |g, x| sq(g, |g| g.identity(x[0]))).second(),
        case("match_shape", vec![x23(), randn(&[2, 3], 32)], |g, x| sq(g, |g| g.match_shape(x[0], x[1]))).second(),
        case("stack axis 0", vec![x23(), randn(&[2, 3], 11), randn(&[2, 3], 12)], |g, x| {
            sq(g, |g| g.stack(&[x[0], x[1], x[2]], 0))
        })
        .second(),
        case("stack axis -1 with a repeated input", vec![x23(), randn(&[2, 3], 13)], |g, x| {
            Ok(vec![g.stack(&[x[0], x[1], x[0]], -1)?])
        }),
        // Only the second input differentiated (the rule must not stop at input 0).
        case("stack wrt input 1 only", vec![x23(), randn(&[2, 3], 14)], |g, x| sq(g, |g| g.stack(&[x[0], x[1]], 1)))
            .wrt(&[1]),
        case("unstack axis 1", vec![x234()], |g, x| {
            let parts = g.unstack(x[0], 1)?;
            parts.into_iter().map(|p| g.square(p)).collect()
        })
        .second(),
        // Only one output used: the others get zero cotangents.
        case("unstack axis -1, one output", vec![x23()], |g, x| {
            let parts = g.unstack(x[0], -1)?;
            Ok(vec![parts[1]])
        }),
    ]
}

#[test]
fn shape_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn stop_gradient_and_shape_queries_stop_gradients() {
    // y = stop_gradient(x) * x + size(x): d/dx = x (the stopped factor is a constant).
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let s = g.stop_gradient(x).unwrap();
    let y = g.mul(s, x).unwrap();
    let n = g.size_of(x).unwrap();
    let n = g.cast(n, DType::F64).unwrap();
    let y = g.add(y, n).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, Tensor::vec1(&[0.5f64, 2.0, -1.0]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![0.5, 2.0, -1.0]);
}
