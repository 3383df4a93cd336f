//! jacobian / jacobian_fwd / batch_jacobian / hessian / per_example_gradients: vectorized
//! (strict: no loop fallback) against the reference loop and finite differences.

use super::fd::randn;
use pfor::api::{
    batch_jacobian_with, hessian_with, jacobian_fwd_with, jacobian_loop, jacobian_with, per_example_gradients_loop,
    per_example_gradients_with,
};
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

fn strict() -> PforOptions {
    PforOptions::strict()
}

#[track_caller]
fn close(a: &Tensor, b: &Tensor, tol: f64) {
    assert_eq!(a.shape(), b.shape(), "shapes");
    for (i, (x, y)) in a.to_f64_vec().iter().zip(b.to_f64_vec()).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}\n{a}\n{b}");
    }
}

/// y[j] = sin(x[j]) · Σ x² + exp(x[j]) · max(x) — a dense jacobian.
fn f(g: &mut Graph, x: ValueId) -> Result<ValueId> {
    let s = g.sin(x)?;
    let sq = g.square(x)?;
    let n = g.reduce_sum(sq, Some(&[0]), true)?;
    let a = g.mul(s, n)?;
    let e = g.exp(x)?;
    let m = g.reduce_max(x, Some(&[0]), true)?;
    let r = g.mul(e, m)?;
    g.add(a, r)
}

/// Finite-difference jacobian of `f` at `x0` (rows: y, cols: x).
fn fd_jacobian(x0: &Tensor) -> Vec<f64> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, x0.shape());
    let y = f(&mut g, x).unwrap();
    let mut sess = Session::new(&g, &[y]).unwrap();
    let base = x0.to_f64_vec();
    let n = base.len();
    let eps = 1e-6;
    let mut cols = vec![vec![0.0; n]; n];
    for (k, col) in cols.iter_mut().enumerate() {
        let mut at = |d: f64| {
            let mut v = base.clone();
            v[k] += d;
            sess.run(&[(x, Tensor::from_vec(x0.shape(), v).unwrap())]).unwrap()[0].to_f64_vec()
        };
        let (p, m) = (at(eps), at(-eps));
        for j in 0..n {
            col[j] = (p[j] - m[j]) / (2.0 * eps);
        }
    }
    (0..n).flat_map(|j| cols.iter().map(move |c| c[j]).collect::<Vec<_>>()).collect()
}

#[test]
fn jacobian_equals_the_loop_of_gradients_and_finite_differences() {
    let x0 = randn(&[3], 1);
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let y = f(&mut g, x).unwrap();
    let j = jacobian_with(&mut g, y, x, &strict()).unwrap();
    let jl = jacobian_loop(&mut g, y, x).unwrap();
    let jf = jacobian_fwd_with(&mut g, y, x, &strict()).unwrap();
    assert_eq!(g.shape(j).unwrap(), Shape::fixed(&[3, 3]));
    let v = run_once(&g, &[j, jl, jf], &[(x, x0.clone())]).unwrap();
    close(&v[0], &v[1], 1e-12);
    close(&v[2], &v[0], 1e-12);
    close(&v[0], &Tensor::from_vec(&[3, 3], fd_jacobian(&x0)).unwrap(), 1e-6);
}

#[test]
fn jacobian_of_a_matrix_valued_function_has_both_shapes() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2, 2]);
    let y = g.tanh(x).unwrap();
    let y = g.mul_scalar(y, 2.0).unwrap();
    let j = jacobian_with(&mut g, y, x, &strict()).unwrap();
    assert_eq!(g.shape(j).unwrap(), Shape::fixed(&[2, 2, 2, 2]));
    let x0 = randn(&[2, 2], 2);
    let v = run_once(&g, &[j], &[(x, x0.clone())]).unwrap()[0].to_f64_vec();
    let xv = x0.to_f64_vec();
    for a in 0..4 {
        for b in 0..4 {
            let want = if a == b { 2.0 * (1.0 - xv[a].tanh().powi(2)) } else { 0.0 };
            assert!((v[a * 4 + b] - want).abs() < 1e-12);
        }
    }
}

#[test]
fn jacobian_with_chunks_matches_unchunked() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let y = f(&mut g, x).unwrap();
    let j = jacobian_with(&mut g, y, x, &strict()).unwrap();
    let jc = jacobian_with(&mut g, y, x, &strict().with_chunk_size(2)).unwrap();
    let v = run_once(&g, &[j, jc], &[(x, randn(&[3], 3))]).unwrap();
    close(&v[0], &v[1], 1e-12);
}

#[test]
fn hessian_is_the_jacobian_of_the_jacobian() {
    // y = Σ x³ + (Σ x)² → H = diag(6x) + 2·11ᵀ
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let c = g.mul(x, x).unwrap();
    let c = g.mul(c, x).unwrap();
    let s3 = g.sum_all(c).unwrap();
    let s = g.sum_all(x).unwrap();
    let s2 = g.square(s).unwrap();
    let y = g.add(s3, s2).unwrap();
    let h = hessian_with(&mut g, y, x, &strict()).unwrap();
    assert_eq!(g.shape(h).unwrap(), Shape::fixed(&[3, 3]));
    let x0 = Tensor::vec1(&[1.0f64, -2.0, 0.5]);
    let v = run_once(&g, &[h], &[(x, x0.clone())]).unwrap()[0].to_f64_vec();
    let xv = x0.to_f64_vec();
    for a in 0..3 {
        for b in 0..3 {
            let want = if a == b { 6.0 * xv[a] + 2.0 } else { 2.0 };
            assert!((v[a * 3 + b] - want).abs() < 1e-10, "H[{a},{b}] = {} want {want}", v[a * 3 + b]);
        }
    }
}

/// The hessian w.r.t. a graph CONSTANT equals the hessian w.r.t. an input fed the same
/// value (a constant is a point to differentiate at, not a value to fold away), with the
/// default options and strict ones.
#[test]
fn hessian_wrt_a_constant_equals_the_hessian_wrt_an_input() {
    let x0 = Tensor::vec1(&[1.0f64, -2.0, 0.5]);
    let build = |g: &mut Graph, x: ValueId| -> ValueId {
        // y = Σ x² + Σ sin(x)·x → H = diag(2 + 2cos(x) - x sin(x))
        let sq = g.square(x).unwrap();
        let a = g.sum_all(sq).unwrap();
        let s = g.sin(x).unwrap();
        let sx = g.mul(s, x).unwrap();
        let b = g.sum_all(sx).unwrap();
        g.add(a, b).unwrap()
    };
    let xv = x0.to_f64_vec();
    for opts in [PforOptions::default(), strict()] {
        for constant in [false, true] {
            let mut g = Graph::new();
            let x = if constant { g.constant(x0.clone()) } else { g.input("x", DType::F64, [3]) };
            let y = build(&mut g, x);
            let h = hessian_with(&mut g, y, x, &opts).unwrap();
            let feeds: Vec<(ValueId, Tensor)> = if constant { vec![] } else { vec![(x, x0.clone())] };
            let v = run_once(&g, &[h], &feeds).unwrap()[0].to_f64_vec();
            for a in 0..3 {
                for b in 0..3 {
                    let x = xv[a];
                    let want = if a == b { 2.0 + 2.0 * x.cos() - x * x.sin() } else { 0.0 };
                    let got = v[a * 3 + b];
                    assert!((got - want).abs() < 1e-10, "constant {constant}: H[{a},{b}] = {got}, want {want}");
                }
            }
        }
    }
}

#[test]
fn hessian_of_a_vector_function_has_three_parts() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let y = g.sin(x).unwrap();
    let h = hessian_with(&mut g, y, x, &strict()).unwrap();
    assert_eq!(g.shape(h).unwrap(), Shape::fixed(&[2, 2, 2]));
    let x0 = Tensor::vec1(&[0.3f64, -1.1]);
    let v = run_once(&g, &[h], &[(x, x0.clone())]).unwrap()[0].to_f64_vec();
    let xv = x0.to_f64_vec();
    for m in 0..2 {
        for a in 0..2 {
            for b in 0..2 {
                let want = if m == a && a == b { -xv[m].sin() } else { 0.0 };
                assert!((v[m * 4 + a * 2 + b] - want).abs() < 1e-12);
            }
        }
    }
}

#[test]
fn batch_jacobian_keeps_examples_apart() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [4, 3]);
    let y = g.tanh(x).unwrap();
    let s = g.reduce_sum(x, Some(&[1]), true).unwrap();
    let y = g.mul(y, s).unwrap(); // y[b, j] = tanh(x[b, j]) Σ_k x[b, k]
    let bj = batch_jacobian_with(&mut g, y, x, &strict()).unwrap();
    assert_eq!(g.shape(bj).unwrap(), Shape::fixed(&[4, 3, 3]));
    let full = jacobian_with(&mut g, y, x, &strict()).unwrap(); // [4,3,4,3]
    let x0 = randn(&[4, 3], 4);
    let v = run_once(&g, &[bj, full], &[(x, x0)]).unwrap();
    let (b, f) = (v[0].to_f64_vec(), v[1].to_f64_vec());
    for e in 0..4 {
        for j in 0..3 {
            for k in 0..3 {
                let want = f[((e * 3 + j) * 4 + e) * 3 + k];
                assert!((b[(e * 3 + j) * 3 + k] - want).abs() < 1e-12);
            }
        }
    }
}

#[test]
fn per_example_gradients_equal_a_loop_of_gradients() {
    for n in [0usize, 1, 5] {
        let mut g = Graph::new();
        let xs = g.input("x", DType::F64, [n, 3]);
        let w = g.input("w", DType::F64, [3]);
        let b = g.input("b", DType::F64, Shape::scalar());
        let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| -> Result<ValueId> {
            let z = g.mul(rows[0], p[0])?;
            let z = g.add(z, p[1])?;
            let t = g.tanh(z)?;
            let t = g.square(t)?;
            g.sum_all(t)
        };
        let pv = per_example_gradients_with(&mut g, &strict(), loss, &[xs], &[w, b]).unwrap();
        let pl = per_example_gradients_loop(&mut g, loss, &[xs], &[w, b]).unwrap();
        assert_eq!(g.shape(pv[0]).unwrap(), Shape::fixed(&[n, 3]));
        assert_eq!(g.shape(pv[1]).unwrap(), Shape::fixed(&[n]));
        let feeds = [(xs, randn(&[n, 3], 5)), (w, randn(&[3], 6)), (b, Tensor::scalar(0.3f64))];
        let v = run_once(&g, &[pv[0], pv[1], pl[0], pl[1]], &feeds).unwrap();
        close(&v[0], &v[2], 1e-12);
        close(&v[1], &v[3], 1e-12);
    }
}

#[test]
fn api_errors_name_the_function_and_shape() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, Shape::from_dims([Dim::dynamic("n")]));
    let y = g.exp(x).unwrap();
    let e = jacobian_with(&mut g, y, x, &strict()).unwrap_err().to_string();
    assert!(e.contains("jacobian") && e.contains("static"), "{e}");
    let i = g.input("i", DType::I64, [2]);
    let e = jacobian_with(&mut g, i, x, &strict()).unwrap_err().to_string();
    assert!(e.contains("dtype"), "{e}");
}
