//! Derivative tests of the `reduce` family: every differentiable axis reduction over several
//! axis sets (single, several, negative, all, none; the kinds read from the kind table) with and without `keep_dims`, and the
//! scans with every `exclusive` / `reverse` combination along two axes; first and second
//! order. Inputs of max/min have no ties (distinct normal samples); ties are checked exactly.

use super::fd::{FdCase, case, check, map, randn, unif};
use pfor::ops::unary::DtypeRule;
use pfor::ops::{Op, ReduceForm, ReduceKind, ReduceOp};
use pfor::prelude::*;

/// Every differentiable axis reduction, from the kind table (a new one is picked up here).
fn axis_kinds() -> Vec<ReduceKind> {
    let differentiable = |k: ReduceKind| k.dtype_rule() != DtypeRule::Logical;
    ReduceKind::ALL.iter().copied().filter(|&k| k.form() == ReduceForm::Axes && differentiable(k)).collect()
}

/// `[2, 3, 4]` values for `k`: products get magnitudes in [0.5, 1.5] with mixed signs.
fn input_for(k: ReduceKind, seed: u64) -> Tensor {
    match k {
        ReduceKind::Prod | ReduceKind::CumProd => {
            let s = randn(&[2, 3, 4], seed + 500).to_f64_vec();
            let v: Vec<f64> = unif(&[2, 3, 4], 0.5, 1.5, seed)
                .to_f64_vec()
                .into_iter()
                .zip(s)
                .map(|(x, s)| if s < 0.0 { -x } else { x })
                .collect();
            Tensor::from_vec(&[2, 3, 4], v).unwrap()
        }
        _ => randn(&[2, 3, 4], seed),
    }
}

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    let axis_sets: [&[i64]; 5] = [&[1], &[0, 2], &[-1], &[0, 1, 2], &[]];
    let mut v = Vec::new();
    let kinds = axis_kinds();
    assert!(kinds.contains(&ReduceKind::Variance) && kinds.len() >= 7, "{kinds:?}");
    for (i, &k) in kinds.iter().enumerate() {
        for (j, axes) in axis_sets.iter().enumerate() {
            for keep_dims in [false, true] {
                let axes = axes.to_vec();
                let seed = 100 * i as u64 + 10 * j as u64 + keep_dims as u64;
                let name = format!("{} axes={axes:?} keep_dims={keep_dims}", k.name());
                let c = case(&name, vec![input_for(k, seed)], move |g, x| {
                    let op = ReduceOp::axes_op(k, axes.clone(), keep_dims)
                        .ok_or_else(|| Error::InvalidArgument(format!("{} is not an axis reduction", k.name())))?;
                    Ok(vec![g.add_op(Op::Reduce(op), &[x[0]])?])
                });
                // Second order on two axis sets per kind.
                v.push(if j <= 1 && keep_dims == (j == 1) { c.second() } else { c });
            }
        }
    }
    for (i, k) in [ReduceKind::CumSum, ReduceKind::CumProd].into_iter().enumerate() {
        for axis in [1i64, -1] {
            for exclusive in [false, true] {
                for reverse in [false, true] {
                    let seed = 1000 + 100 * i as u64 + 10 * axis.unsigned_abs() + 2 * exclusive as u64 + reverse as u64;
                    let name = format!("{} axis={axis} exclusive={exclusive} reverse={reverse}", k.name());
                    let c = case(&name, vec![input_for(k, seed)], move |g, x| {
                        Ok(vec![if k == ReduceKind::CumSum {
                            g.cumsum(x[0], axis, exclusive, reverse)?
                        } else {
                            g.cumprod(x[0], axis, exclusive, reverse)?
                        }])
                    });
                    v.push(if axis == 1 { c.second() } else { c });
                }
            }
        }
    }
    // A product containing an exact zero (the rule must not divide by it).
    let with_zero = map(&input_for(ReduceKind::Prod, 7), |x| if x.abs() < 0.7 { 0.0 } else { x });
    v.push(case("reduce_prod with zeros", vec![with_zero], |g, x| Ok(vec![g.reduce_prod(x[0], Some(&[2]), false)?])));
    // Scans through exact zeros: one zero, two zeros, a zero first, a zero last (per line,
    // in both scan directions); first and second order.
    let zeros = Tensor::from_vec(
        &[4, 5],
        vec![
            0.9, -1.2, 0.0, 1.1, 0.7, //
            1.3, 0.0, 0.8, 0.0, -0.6, //
            0.0, 1.4, -0.9, 1.2, 0.8, //
            -0.7, 1.1, 0.9, 1.3, 0.0,
        ],
    )
    .unwrap();
    for exclusive in [false, true] {
        for reverse in [false, true] {
            v.push(
                case(
                    &format!("cumprod with zeros exclusive={exclusive} reverse={reverse}"),
                    vec![zeros.clone()],
                    move |g, x| Ok(vec![g.cumprod(x[0], 1, exclusive, reverse)?]),
                )
                .second(),
            );
        }
    }
    v.push(
        case("cumprod with zeros axis 0", vec![zeros.clone()], |g, x| Ok(vec![g.cumprod(x[0], 0, false, false)?]))
            .second(),
    );
    v.push(
        case("reduce_prod with zeros, second order", vec![zeros], |g, x| {
            Ok(vec![g.reduce_prod(x[0], Some(&[1]), false)?])
        })
        .second(),
    );
    // Reductions feeding non-linear ops, so second derivatives see non-constant cotangents.
    v.push(
        case("softmax-like chain", vec![randn(&[3, 4], 8)], |g, x| {
            let m = g.reduce_max(x[0], Some(&[1]), true)?;
            let d = g.sub(x[0], m)?;
            let l = g.reduce_logsumexp(d, Some(&[1]), true)?;
            let s = g.sub(d, l)?;
            let s = g.exp(s)?;
            let p = g.reduce_mean(s, Some(&[0]), false)?;
            Ok(vec![g.square(p)?])
        })
        .second(),
    );
    v
}

#[test]
fn reduce_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn max_shares_the_gradient_among_ties() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2, 3]);
    let m = g.reduce_max(x, Some(&[1]), false).unwrap();
    let l = g.sum_all(m).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let xv = Tensor::from_vec(&[2, 3], vec![1.0f64, 3.0, 3.0, 2.0, 2.0, 2.0]).unwrap();
    let v = run_once(&g, &d, &[(x, xv)]).unwrap();
    let third = 1.0 / 3.0;
    assert_eq!(v[0].to_f64_vec(), vec![0.0, 0.5, 0.5, third, third, third]);
}

#[test]
fn non_differentiable_reductions_stop_gradients() {
    // argmax feeds an index: no gradient through it, only through the direct path.
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let a = g.argmax(x, 0).unwrap();
    let a = g.cast(a, DType::F64).unwrap();
    let y = g.mul(a, x).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, Tensor::vec1(&[0.5f64, 2.0, -1.0]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![1.0, 1.0, 1.0]);
}
