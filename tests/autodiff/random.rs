//! Derivative tests of the `random` family: dropout is differentiable w.r.t. `x` with the
//! forward mask rebuilt from the same key; samplers and keys get nothing.

use super::fd::{FdCase, case, check, randn};
use pfor::autodiff::{gradients, is_differentiable, jvp};
use pfor::ops::RandomKind;
use pfor::prelude::*;

fn i64t(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec()).unwrap()
}

pub fn cases() -> Vec<FdCase> {
    vec![
        case("dropout, scalar key", vec![randn(&[4, 6], 1), i64t(&[], &[7])], |g, x| {
            let y = g.dropout(x[0], x[1], 0.5)?;
            Ok(vec![g.mul(y, y)?])
        })
        .second(),
        case("dropout, per-row keys", vec![randn(&[3, 5], 2), i64t(&[3], &[1, 2, 3])], |g, x| {
            Ok(vec![g.dropout(x[0], x[1], 0.3)?])
        }),
    ]
}

#[test]
fn random_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn dropout_gradient_uses_the_forward_mask() {
    let rate = 0.4;
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [50]);
    let key = g.input("key", DType::I64, Shape::scalar());
    let y = g.dropout(x, key, rate).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = gradients(&mut g, &[l], &[x], None).unwrap();
    let t = g.ones_like(x).unwrap();
    let j = jvp(&mut g, &[y], &[x], &[t]).unwrap();
    let xs = Tensor::from_vec(&[50], (1..=50).map(f64::from).collect::<Vec<_>>()).unwrap();
    let v = run_once(&g, &[y, d[0], j[0]], &[(x, xs.clone()), (key, i64t(&[], &[11]))]).unwrap();
    let (yv, dv, jv) = (v[0].to_f64_vec(), v[1].to_f64_vec(), v[2].to_f64_vec());
    let kept = yv.iter().filter(|&&a| a != 0.0).count();
    assert!(kept > 10 && kept < 45, "the mask keeps some and drops some ({kept} of 50)");
    for (i, (&yi, &xi)) in yv.iter().zip(xs.to_f64_vec().iter()).enumerate() {
        let want = if yi != 0.0 { 1.0 / (1.0 - rate) } else { 0.0 };
        assert!((dv[i] - want).abs() < 1e-12, "grad[{i}] = {}, want {want} (y = {yi}, x = {xi})", dv[i]);
        assert!((jv[i] - want).abs() < 1e-12, "jvp[{i}] = {}, want {want}", jv[i]);
    }
}

#[test]
fn samplers_are_not_differentiable_but_reparameterization_is() {
    for k in RandomKind::ALL {
        assert_eq!(is_differentiable(OpKind::Random(*k)), *k == RandomKind::Dropout, "{}", k.name());
    }
    // loss = sum(mu + sigma * eps): d/dmu = n, d/dsigma = sum(eps); the bernoulli p gets 0.
    let mut g = Graph::new();
    let mu = g.input("mu", DType::F64, Shape::scalar());
    let sigma = g.input("sigma", DType::F64, Shape::scalar());
    let p = g.input("p", DType::F64, Shape::scalar());
    let key = g.scalar(DType::I64, 3.0);
    let eps = g.random_normal(key, &[8], DType::F64, 0.0, 1.0).unwrap();
    let s = g.mul(sigma, eps).unwrap();
    let z = g.add(mu, s).unwrap();
    let b = g.random_bernoulli(key, p, &[8]).unwrap();
    let bf = g.cast(b, DType::F64).unwrap();
    let z = g.add(z, bf).unwrap();
    let l = g.sum_all(z).unwrap();
    let se = g.sum_all(eps).unwrap();
    let d = gradients(&mut g, &[l], &[mu, sigma, p], None).unwrap();
    let feeds = [(mu, Tensor::scalar(0.5f64)), (sigma, Tensor::scalar(2.0f64)), (p, Tensor::scalar(0.5f64))];
    let v = run_once(&g, &[d[0], d[1], d[2], se], &feeds).unwrap();
    assert_eq!(v[0].scalar_f64().unwrap(), 8.0);
    assert!((v[1].scalar_f64().unwrap() - v[3].scalar_f64().unwrap()).abs() < 1e-12);
    assert_eq!(v[2].scalar_f64().unwrap(), 0.0);
}
