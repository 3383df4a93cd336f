//! Derivative tests of the elementwise family: select (with broadcasting), float casts,
//! clip (inside, below, above, with tensor bounds).

use super::fd::{FdCase, case, check, randn};
use pfor::prelude::*;

pub fn cases() -> Vec<FdCase> {
    let pred = Tensor::from_vec(&[2, 3], vec![true, false, true, false, false, true]).unwrap();
    vec![
        case("select", vec![pred.clone(), randn(&[2, 3], 1), randn(&[2, 3], 2)], |g, x| {
            Ok(vec![g.select(x[0], x[1], x[2])?])
        })
        .second(),
        case("select broadcast", vec![pred, randn(&[3], 3), randn(&[2, 1], 4)], |g, x| {
            Ok(vec![g.select(x[0], x[1], x[2])?])
        }),
        // Finite differences through f32 are too coarse; the cast rule is checked
        // exactly below and by an f64 -> f64 cast here.
        case("cast f64 -> f64", vec![randn(&[4], 5)], |g, x| {
            let y = g.cast(x[0], DType::F64)?;
            Ok(vec![g.square(y)?])
        }),
        case(
            "clip tensor bounds",
            vec![
                Tensor::vec1(&[-2.0f64, -0.3, 0.1, 0.4, 2.5, 0.9]),
                Tensor::vec1(&[-1.0f64, -1.0, -1.0, 0.0, 0.0, 0.0]),
                Tensor::vec1(&[1.0f64, 1.0, 1.0, 1.0, 1.0, 0.5]),
            ],
            |g, x| Ok(vec![g.clip(x[0], x[1], x[2])?]),
        )
        .second(),
        case("clip scalar bounds", vec![randn(&[2, 3], 7)], |g, x| {
            let lo = g.scalar(DType::F64, -0.5);
            let hi = g.scalar(DType::F64, 0.5);
            Ok(vec![g.clip(x[0], lo, hi)?])
        }),
    ]
}

#[test]
fn elementwise_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn integer_casts_stop_gradients() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let i = g.cast(x, DType::I64).unwrap();
    let f = g.cast(i, DType::F64).unwrap();
    let y = g.add(f, x).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, Tensor::vec1(&[1.5f64, -2.5]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![1.0, 1.0]);
}

#[test]
fn float_casts_cast_the_cotangent_back() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let y = g.cast(x, DType::F32).unwrap();
    let w = g.constant(Tensor::vec1(&[1.5f32, -2.0, 0.25]));
    let d = pfor::autodiff::gradients(&mut g, &[y], &[x], Some(&[w])).unwrap();
    assert_eq!(g.dtype(d[0]).unwrap(), DType::F64);
    let t = g.constant(Tensor::vec1(&[1.0f64, 2.0, 3.0]));
    let j = pfor::autodiff::jvp(&mut g, &[y], &[x], &[t]).unwrap();
    let v = run_once(&g, &[d[0], j[0]], &[(x, Tensor::vec1(&[0.0f64; 3]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![1.5, -2.0, 0.25]);
    assert_eq!(v[1].to_f64_vec(), vec![1.0, 2.0, 3.0]);
}
