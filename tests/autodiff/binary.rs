//! Derivative tests of the binary family: every differentiable kind, with broadcasting on
//! either side, first and second order.

use super::fd::{FdCase, case, check, map, randn, unif};
use pfor::ops::BinaryKind;
use pfor::prelude::*;

fn inputs_for(k: BinaryKind, a: &[usize], b: &[usize], seed: u64) -> Vec<Tensor> {
    use BinaryKind::*;
    match k {
        Pow => vec![unif(a, 0.5, 2.0, seed), randn(b, seed + 1)],
        Div | FloorMod => vec![randn(a, seed), unif(b, 0.7, 2.0, seed + 1)],
        // Keep a and b apart so max/min have a unique winner.
        Maximum | Minimum => vec![randn(a, seed), map(&randn(b, seed + 1), |x| x + 0.05)],
        _ => vec![randn(a, seed), randn(b, seed + 1)],
    }
}

pub fn cases() -> Vec<FdCase> {
    let shapes: [(&[usize], &[usize]); 3] = [(&[2, 3], &[2, 3]), (&[2, 3], &[3]), (&[1, 3], &[2, 1])];
    let mut v = Vec::new();
    for (i, &k) in BinaryKind::ALL.iter().filter(|k| pfor::autodiff::rules::binary::differentiable(**k)).enumerate() {
        for (j, (a, b)) in shapes.iter().enumerate() {
            let c = case(
                &format!("binary {} {:?} {:?}", k.name(), a, b),
                inputs_for(k, a, b, 100 + 10 * i as u64 + j as u64),
                move |g, x| Ok(vec![g.binary(k, x[0], x[1])?]),
            );
            v.push(if j == 0 { c.second() } else { c });
        }
    }
    v
}

#[test]
fn binary_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn a_shared_input_accumulates_both_paths() {
    // d/dx (x * x + x) = 2x + 1
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let xx = g.mul(x, x).unwrap();
    let y = g.add(xx, x).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, Tensor::vec1(&[1.0f64, 2.0, -3.0]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![3.0, 5.0, -5.0]);
}
