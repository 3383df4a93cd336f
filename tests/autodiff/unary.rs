//! Derivative tests of the unary family: every differentiable kind, first and second
//! order, on inputs inside its domain and away from its kinks.

use super::fd::{FdCase, case, check, randn, unif};
use pfor::ops::UnaryKind;
use pfor::prelude::*;

fn input_for(k: UnaryKind, seed: u64) -> Tensor {
    use UnaryKind::*;
    let shape = [2, 3];
    match k {
        Log | Sqrt | Rsqrt | Reciprocal => unif(&shape, 0.5, 2.0, seed),
        Log1p => unif(&shape, -0.5, 2.0, seed),
        Asin | Acos => unif(&shape, -0.8, 0.8, seed),
        Tan => unif(&shape, -1.0, 1.0, seed),
        // Keep away from the kinks at 0 (and 6).
        Relu | Relu6 | Elu | Selu | Abs => {
            let v: Vec<f64> =
                unif(&shape, 0.1, 1.0, seed)
                    .to_f64_vec()
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        if i % 2 == 0 {
                            -x
                        } else {
                            *x + if k == Relu6 { 5.5 * (i % 4 == 1) as u8 as f64 } else { 0.0 }
                        }
                    })
                    .collect();
            Tensor::from_vec(&shape, v).unwrap()
        }
        _ => randn(&shape, seed),
    }
}

pub fn cases() -> Vec<FdCase> {
    UnaryKind::ALL
        .iter()
        .filter(|k| pfor::autodiff::rules::unary::differentiable(**k))
        .enumerate()
        .map(|(i, &k)| {
            let c = case(&format!("unary {}", k.name()), vec![input_for(k, 10 + i as u64)], move |g, x| {
                Ok(vec![g.unary(k, x[0])?])
            });
            // Second order everywhere except the piecewise-linear ones (zero second derivative
            // that finite differences reproduce anyway).
            c.second()
        })
        .collect()
}

#[test]
fn unary_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn non_differentiable_unary_ops_stop_gradients() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let f = g.floor(x).unwrap();
    let y = g.add(f, x).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, Tensor::vec1(&[0.5f64, 1.5, -2.5]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![1.0, 1.0, 1.0]);
}
