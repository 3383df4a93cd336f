//! Derivative tests of the `state` family: no kind is differentiable (reads have no inputs,
//! writes are side effects); differentiating w.r.t. a read's VALUE works like any value.

use super::fd::FdCase;
use pfor::autodiff::{gradients, gradients_with, is_differentiable, jvp};
use pfor::ops::StateKind;
use pfor::prelude::*;

/// No state kind is differentiable, so the family has no finite-difference case.
pub fn cases() -> Vec<FdCase> {
    vec![]
}

#[test]
fn no_state_kind_is_differentiable() {
    for k in StateKind::ALL {
        assert!(!is_differentiable(OpKind::State(*k)), "{}", k.name());
    }
}

#[test]
fn gradient_with_respect_to_a_read_value() {
    // y = 3 * w^2 with w a variable read: d y / d w = 6 w.
    let mut g = Graph::new();
    let w = g.variable("w", Tensor::vec1(&[1.0f64, -2.0])).unwrap();
    let w2 = g.mul(w, w).unwrap();
    let y = g.mul_scalar(w2, 3.0).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = gradients(&mut g, &[l], &[w], None).unwrap();
    let t = g.ones_like(w).unwrap();
    let j = jvp(&mut g, &[l], &[w], &[t]).unwrap();
    let v = run_once(&g, &[d[0], j[0]], &[]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![6.0, -12.0]);
    assert_eq!(v[1].scalar_f64().unwrap(), -6.0);
}

#[test]
fn writes_pass_no_derivatives() {
    // loss = sum(assign(v, 2x)) + sum(assign_add(u, x)): the writes stop derivatives.
    let mut g = Graph::new();
    g.variable("v", Tensor::vec1(&[0.0f64, 0.0])).unwrap();
    g.variable("u", Tensor::vec1(&[1.0f64, 1.0])).unwrap();
    let x = g.input("x", DType::F64, [2]);
    let x2 = g.mul_scalar(x, 2.0).unwrap();
    let a = g.assign("v", x2).unwrap();
    let b = g.assign_add("u", x).unwrap();
    let s = g.add(a, b).unwrap();
    let l = g.sum_all(s).unwrap();
    let d = gradients_with(&mut g, &[l], &[x], None).unwrap();
    assert!(d[0].is_none(), "no cotangent reaches a written value");
    let t = g.ones_like(x).unwrap();
    let j = jvp(&mut g, &[l], &[x], &[t]).unwrap();
    let v = run_once(&g, &[j[0]], &[(x, Tensor::vec1(&[1.0f64, 2.0]))]).unwrap();
    assert_eq!(v[0].scalar_f64().unwrap(), 0.0);
}
