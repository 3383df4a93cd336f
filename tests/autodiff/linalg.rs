//! Derivative tests of the `linalg` family on well-conditioned (and, for Cholesky,
//! symmetric positive definite) batches, first and second order. Triangular solves and
//! Cholesky read only one triangle of `A`: finite differences then give zero on the other
//! triangle, which the rules must reproduce.

use super::fd::{FdCase, case, check, randn};
use pfor::prelude::*;

/// `[batch.., n, n]`: `shift · I + 0.3 · noise` (well conditioned for `|shift| >= 2`).
fn well_conditioned(batch: &[usize], n: usize, shift: f64, seed: u64) -> Tensor {
    let mut shape = batch.to_vec();
    shape.extend([n, n]);
    let v: Vec<f64> = randn(&shape, seed)
        .to_f64_vec()
        .into_iter()
        .enumerate()
        .map(|(i, x)| 0.3 * x + if (i % (n * n)).is_multiple_of(n + 1) { shift } else { 0.0 })
        .collect();
    Tensor::from_vec(&shape, v).unwrap()
}

/// `[batch.., n, n]` symmetric positive definite: `X Xᵀ / n + I` per item.
fn spd(batch: &[usize], n: usize, seed: u64) -> Tensor {
    let items: usize = batch.iter().product();
    let x = randn(&[items, n, n], seed).to_f64_vec();
    let mut v = vec![0.0; items * n * n];
    for b in 0..items {
        let xb = &x[b * n * n..(b + 1) * n * n];
        for i in 0..n {
            for j in 0..n {
                let dot: f64 = (0..n).map(|k| xb[i * n + k] * xb[j * n + k]).sum();
                v[b * n * n + i * n + j] = dot / n as f64 + if i == j { 1.0 } else { 0.0 };
            }
        }
    }
    let mut shape = batch.to_vec();
    shape.extend([n, n]);
    Tensor::from_vec(&shape, v).unwrap()
}

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    let mut v = vec![
        case("matrix_inverse", vec![well_conditioned(&[2], 3, 2.0, 1)], |g, x| Ok(vec![g.matrix_inverse(x[0])?]))
            .second(),
        case("matrix_inverse rank 2", vec![well_conditioned(&[], 4, -2.0, 2)], |g, x| {
            Ok(vec![g.matrix_inverse(x[0])?])
        }),
        case("determinant", vec![well_conditioned(&[2], 3, 2.0, 3)], |g, x| Ok(vec![g.determinant(x[0])?])).second(),
        case("determinant negative", vec![well_conditioned(&[], 3, -2.0, 4)], |g, x| Ok(vec![g.determinant(x[0])?])),
        case("log_abs_det", vec![well_conditioned(&[2], 3, 2.0, 5)], |g, x| Ok(vec![g.log_abs_det(x[0])?])).second(),
        case("log_abs_det negative determinant", vec![well_conditioned(&[3], 3, -2.0, 6)], |g, x| {
            Ok(vec![g.log_abs_det(x[0])?])
        }),
        // The input itself: only its lower triangle is read (zero gradient above).
        case("cholesky", vec![spd(&[2], 3, 7)], |g, x| Ok(vec![g.cholesky(x[0])?])).second(),
        case("cholesky rank 2 n=4", vec![spd(&[], 4, 8)], |g, x| Ok(vec![g.cholesky(x[0])?])),
        // Symmetrized in the graph: the usual symmetric-perturbation setting.
        case("cholesky of (A + Aᵀ)/2", vec![spd(&[2], 3, 9)], |g, x| {
            let t = g.transpose(x[0], &[0, 2, 1])?;
            let s = g.add(x[0], t)?;
            let s = g.mul_scalar(s, 0.5)?;
            Ok(vec![g.cholesky(s)?])
        })
        .second(),
        case("cholesky log-likelihood", vec![spd(&[], 3, 10), randn(&[3, 1], 11)], |g, x| {
            // ½ |L⁻¹ y|² + Σ log diag L
            let l = g.cholesky(x[0])?;
            let z = g.triangular_solve(l, x[1], true, false)?;
            let q = g.square(z)?;
            let q = g.sum_all(q)?;
            let d = g.matrix_diag_part(l)?;
            let ld = g.log(d)?;
            let ld = g.sum_all(ld)?;
            let q = g.mul_scalar(q, 0.5)?;
            Ok(vec![g.add(q, ld)?])
        })
        .second(),
        case("matrix_diag", vec![randn(&[2, 3], 12)], |g, x| Ok(vec![g.matrix_diag(x[0])?])).second(),
        case("matrix_diag rank 1", vec![randn(&[4], 13)], |g, x| Ok(vec![g.matrix_diag(x[0])?])),
        case("matrix_diag_part square", vec![randn(&[2, 3, 3], 14)], |g, x| Ok(vec![g.matrix_diag_part(x[0])?]))
            .second(),
        case("matrix_diag_part wide", vec![randn(&[2, 3, 4], 15)], |g, x| Ok(vec![g.matrix_diag_part(x[0])?])),
        case("matrix_diag_part tall", vec![randn(&[4, 2], 16)], |g, x| Ok(vec![g.matrix_diag_part(x[0])?])),
        case("trace square", vec![randn(&[2, 3, 3], 17)], |g, x| Ok(vec![g.trace(x[0])?])).second(),
        case("trace rectangular", vec![randn(&[3, 2], 18)], |g, x| Ok(vec![g.trace(x[0])?])),
        // Non-linear uses, so second derivatives are not trivially zero.
        case("trace of a square", vec![randn(&[2, 2, 2], 19)], |g, x| {
            let p = g.batch_matmul(x[0], x[0])?;
            Ok(vec![g.trace(p)?])
        })
        .second(),
    ];
    for (i, adjoint) in [false, true].into_iter().enumerate() {
        let seed = 30 + 2 * i as u64;
        v.push(
            case(
                &format!("solve adjoint={adjoint}"),
                vec![well_conditioned(&[2], 3, 2.0, seed), randn(&[2, 3, 2], seed + 1)],
                move |g, x| Ok(vec![g.solve_t(x[0], x[1], adjoint)?]),
            )
            .second(),
        );
    }
    for (i, (lower, adjoint)) in [(true, false), (true, true), (false, false), (false, true)].into_iter().enumerate() {
        let seed = 40 + 2 * i as u64;
        // A full matrix: the other triangle must get a zero gradient.
        v.push(
            case(
                &format!("triangular_solve lower={lower} adjoint={adjoint}"),
                vec![well_conditioned(&[2], 3, 2.0, seed), randn(&[2, 3, 2], seed + 1)],
                move |g, x| Ok(vec![g.triangular_solve(x[0], x[1], lower, adjoint)?]),
            )
            .second(),
        );
    }
    v.push(
        case("solve rank 2 wrt b only", vec![well_conditioned(&[], 3, 2.0, 50), randn(&[3, 1], 51)], |g, x| {
            Ok(vec![g.solve(x[0], x[1])?])
        })
        .wrt(&[1]),
    );
    v
}

#[test]
fn linalg_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

#[test]
fn cholesky_gradient_is_zero_above_the_diagonal() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F64, [3, 3]);
    let l = g.cholesky(a).unwrap();
    let s = g.sum_all(l).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[s], &[a], None).unwrap();
    let v = run_once(&g, &d, &[(a, spd(&[], 3, 60))]).unwrap()[0].to_f64_vec();
    for (i, x) in v.iter().enumerate() {
        if i % 3 > i / 3 {
            assert_eq!(*x, 0.0, "entry {i} above the diagonal");
        } else {
            assert!(x.abs() > 1e-6, "entry {i} on or below the diagonal is {x}");
        }
    }
}

#[test]
fn gradient_of_log_abs_det_is_the_inverse_transpose() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F64, [2, 2]);
    let l = g.log_abs_det(a).unwrap();
    let d = pfor::autodiff::gradients(&mut g, &[l], &[a], None).unwrap();
    // A = [[2, 1], [1, 3]] (det 5): A⁻ᵀ = [[3, -1], [-1, 2]] / 5.
    let v = run_once(&g, &d, &[(a, Tensor::from_vec(&[2, 2], vec![2.0f64, 1.0, 1.0, 3.0]).unwrap())]).unwrap();
    let want = [0.6, -0.2, -0.2, 0.4];
    for (x, w) in v[0].to_f64_vec().iter().zip(want) {
        assert!((x - w).abs() < 1e-12, "{x} vs {w}");
    }
}

#[test]
fn dynamic_matrix_dims_give_the_same_derivatives() {
    // The masks of the triangular / diagonal rules are constants for static dims and are
    // built from cumulative sums for dynamic ones: both must agree.
    let av = spd(&[2], 3, 70);
    let bv = randn(&[2, 3, 2], 71);
    let tv = randn(&[2, 3, 3], 72);
    let run = |dynamic: bool| -> Vec<Vec<f64>> {
        let mut g = Graph::new();
        let (sa, sb) = if dynamic {
            let (b, n) = (Dim::dynamic("b"), Dim::dynamic("n"));
            (Shape::from_dims([b.clone(), n.clone(), n.clone()]), Shape::from_dims([b, n, Dim::fixed(2)]))
        } else {
            (Shape::from([2usize, 3, 3]), Shape::from([2usize, 3, 2]))
        };
        let a = g.input("a", DType::F64, sa.clone());
        let b = g.input("b", DType::F64, sb);
        let t = g.input("t", DType::F64, sa);
        let l = g.cholesky(a).unwrap();
        let x = g.triangular_solve(a, b, false, true).unwrap();
        let d = g.matrix_diag_part(a).unwrap();
        let tr = g.trace(a).unwrap();
        let mut terms = Vec::new();
        for v in [l, x, d, tr] {
            let s = g.sin(v).unwrap();
            terms.push(g.sum_all(s).unwrap());
        }
        let mut loss = terms[0];
        for s in &terms[1..] {
            loss = g.add(loss, *s).unwrap();
        }
        let mut fetches = pfor::autodiff::gradients(&mut g, &[loss], &[a, b], None).unwrap();
        fetches.extend(pfor::autodiff::jvp(&mut g, &[l, x], &[a], &[t]).unwrap());
        let feeds = [(a, av.clone()), (b, bv.clone()), (t, tv.clone())];
        run_once(&g, &fetches, &feeds).unwrap().iter().map(|v| v.to_f64_vec()).collect()
    };
    let (s, d) = (run(false), run(true));
    assert_eq!(s.len(), 4);
    for (k, (x, y)) in s.iter().zip(&d).enumerate() {
        assert_eq!(x.len(), y.len(), "fetch {k}");
        for (p, q) in x.iter().zip(y) {
            assert!((p - q).abs() <= 1e-12 * (1.0 + p.abs()), "fetch {k}: static {p} vs dynamic {q}");
        }
    }
}
