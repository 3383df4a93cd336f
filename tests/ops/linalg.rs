//! Value tests for the linalg family (expected values written literally or in closed form).

use crate::common::*;
use pfor::prelude::*;

const FLOATS: [DType; 2] = [DType::F64, DType::F32];

fn tol(dt: DType) -> f64 {
    if dt == DType::F32 { 1e-4 } else { 1e-10 }
}

/// Apply a one-input op to an f64 literal cast to each float dtype and compare.
fn check1(shape: &[usize], x: &[f64], f: fn(&mut Graph, ValueId) -> Result<ValueId>, wshape: &[usize], want: &[f64]) {
    for dt in FLOATS {
        let got = apply1(f64t(shape, x).cast(dt), f);
        assert_close(&got, &f64t(wshape, want).cast(dt), tol(dt));
    }
}

const M2: [f64; 4] = [4.0, 7.0, 2.0, 6.0]; // det 10
const M2_INV: [f64; 4] = [0.6, -0.7, -0.2, 0.4];
const M3: [f64; 9] = [1.0, 2.0, 3.0, 0.0, 1.0, 4.0, 5.0, 6.0, 0.0]; // det 1
const M3_INV: [f64; 9] = [-24.0, 18.0, 5.0, 20.0, -15.0, -4.0, -5.0, 4.0, 1.0];
const SWAP: [f64; 4] = [0.0, 1.0, 1.0, 0.0]; // needs pivoting, det -1

#[test]
fn matrix_inverse_values() {
    check1(&[2, 2], &M2, |g, x| g.matrix_inverse(x), &[2, 2], &M2_INV);
    check1(&[3, 3], &M3, |g, x| g.matrix_inverse(x), &[3, 3], &M3_INV);
    check1(&[2, 2], &SWAP, |g, x| g.matrix_inverse(x), &[2, 2], &SWAP);
    // Batched [2,1,2,2].
    let x = [M2.as_slice(), &[2.0, 0.0, 0.0, 4.0]].concat();
    let want = [M2_INV.as_slice(), &[0.5, 0.0, 0.0, 0.25]].concat();
    check1(&[2, 1, 2, 2], &x, |g, x| g.matrix_inverse(x), &[2, 1, 2, 2], &want);
    // Empty batch and 0×0 matrices.
    check1(&[0, 2, 2], &[], |g, x| g.matrix_inverse(x), &[0, 2, 2], &[]);
    check1(&[3, 0, 0], &[], |g, x| g.matrix_inverse(x), &[3, 0, 0], &[]);
}

#[test]
fn matrix_inverse_large_and_many() {
    // (I + S)⁻¹ with S the superdiagonal of ones: entry (i, j) = (-1)^(j-i) for j >= i.
    let n = 130; // large enough for faer's parallel path
    let a: Vec<f64> = (0..n * n).map(|e| if e / n == e % n || e % n == e / n + 1 { 1.0 } else { 0.0 }).collect();
    let want: Vec<f64> = (0..n * n)
        .map(|e| {
            let (i, j) = (e / n, e % n);
            if j < i {
                0.0
            } else if (j - i) % 2 == 0 {
                1.0
            } else {
                -1.0
            }
        })
        .collect();
    let got = apply1(f64t(&[n, n], &a), |g, x| g.matrix_inverse(x));
    assert_close(&got, &f64t(&[n, n], &want), 1e-9);
    // Many 2×2 matrices diag(i+1, 2) (the rayon batch path).
    let b = 5000;
    let a: Vec<f64> = (0..b).flat_map(|i| [(i + 1) as f64, 0.0, 0.0, 2.0]).collect();
    let want: Vec<f64> = (0..b).flat_map(|i| [1.0 / (i + 1) as f64, 0.0, 0.0, 0.5]).collect();
    let got = apply1(f64t(&[b, 2, 2], &a), |g, x| g.matrix_inverse(x));
    assert_close(&got, &f64t(&[b, 2, 2], &want), 1e-12);
}

#[test]
fn singular_matrices_are_numerical_errors() {
    let cases: [(&[usize], &[f64]); 3] = [
        (&[2, 2], &[1.0, 2.0, 2.0, 4.0]),
        (&[3, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]),
        (&[2, 2, 2], &[1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]), // second item all zeros
    ];
    for dt in FLOATS {
        for (shape, x) in cases {
            let mut g = Graph::new();
            let c = g.constant(f64t(shape, x).cast(dt));
            let y = g.matrix_inverse(c).unwrap();
            let e = run_recorded(&g, &[y], &[]).unwrap_err();
            assert!(matches!(e.root(), Error::Numerical { op, .. } if op == "matrix_inverse"), "{e}");
            assert!(e.to_string().contains("singular"), "{e}");
            let n = shape[shape.len() - 1];
            let b = g.constant(Tensor::zeros(dt, &[&shape[..shape.len() - 1], &[1]].concat()).unwrap());
            let s = g.solve(c, b).unwrap();
            let e = run_recorded(&g, &[s], &[]).unwrap_err();
            assert!(matches!(e.root(), Error::Numerical { op, .. } if op == "solve"), "{e} (n={n})");
        }
    }
}

#[test]
fn determinant_and_log_abs_det_values() {
    check1(&[2, 2], &M2, |g, x| g.determinant(x), &[], &[10.0]);
    check1(&[3, 3], &M3, |g, x| g.determinant(x), &[], &[1.0]);
    check1(&[2, 2], &SWAP, |g, x| g.determinant(x), &[], &[-1.0]);
    check1(&[2, 2], &[1.0, 2.0, 2.0, 4.0], |g, x| g.determinant(x), &[], &[0.0]);
    let x = [M2.as_slice(), &SWAP, &[3.0, 0.0, 0.0, -2.0]].concat();
    check1(&[3, 2, 2], &x, |g, x| g.determinant(x), &[3], &[10.0, -1.0, -6.0]);
    check1(&[0, 0], &[], |g, x| g.determinant(x), &[], &[1.0]);
    check1(&[2, 0, 3, 3], &[], |g, x| g.determinant(x), &[2, 0], &[]);
    check1(&[3, 2, 2], &x, |g, x| g.log_abs_det(x), &[3], &[10f64.ln(), 0.0, 6f64.ln()]);
    check1(&[3, 3], &M3, |g, x| g.log_abs_det(x), &[], &[0.0]);
    let got = apply1(f64t(&[2, 2], &[1.0, 2.0, 2.0, 4.0]), |g, x| g.log_abs_det(x));
    assert_eq!(got.to_vec::<f64>().unwrap(), vec![f64::NEG_INFINITY]);
}

#[test]
fn cholesky_values() {
    let s2 = 2f64.sqrt();
    check1(&[2, 2], &[4.0, 2.0, 2.0, 3.0], |g, x| g.cholesky(x), &[2, 2], &[2.0, 0.0, 1.0, s2]);
    let a3 = [4.0, 12.0, -16.0, 12.0, 37.0, -43.0, -16.0, -43.0, 98.0];
    let l3 = [2.0, 0.0, 0.0, 6.0, 1.0, 0.0, -8.0, 5.0, 3.0];
    check1(&[3, 3], &a3, |g, x| g.cholesky(x), &[3, 3], &l3);
    // Only the lower triangle is read: garbage above the diagonal changes nothing.
    let garbage = [4.0, 99.0, -7.0, 12.0, 37.0, 1e9, -16.0, -43.0, 98.0];
    check1(&[3, 3], &garbage, |g, x| g.cholesky(x), &[3, 3], &l3);
    // Batched.
    let x = [[4.0, 2.0, 2.0, 3.0], [9.0, 0.0, 0.0, 1.0]].concat();
    check1(&[2, 2, 2], &x, |g, x| g.cholesky(x), &[2, 2, 2], &[2.0, 0.0, 1.0, s2, 3.0, 0.0, 0.0, 1.0]);
}

#[test]
fn cholesky_not_positive_definite_is_numerical_error() {
    for (shape, x) in
        [(vec![2, 2], vec![1.0, 2.0, 2.0, 1.0]), (vec![2, 2, 2], vec![1.0, 0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 1.0])]
    {
        for dt in FLOATS {
            let mut g = Graph::new();
            let c = g.constant(f64t(&shape, &x).cast(dt));
            let y = g.cholesky(c).unwrap();
            let e = run_recorded(&g, &[y], &[]).unwrap_err();
            assert!(
                matches!(e.root(), Error::Numerical { op, msg } if op == "cholesky" && msg.contains("positive definite")),
                "{e}"
            );
        }
    }
}

#[test]
fn solve_values() {
    let a = [2.0, 1.0, 0.0, 1.0];
    let b = [4.0, 5.0];
    for dt in FLOATS {
        let t = tol(dt);
        let run = |a: &[f64], sa: &[usize], b: &[f64], sb: &[usize], adj: bool| {
            apply2(f64t(sa, a).cast(dt), f64t(sb, b).cast(dt), |g, x, y| g.solve_t(x, y, adj))
        };
        // A x = b: x1 = 5, x0 = (4 - 5) / 2.
        assert_close(&run(&a, &[2, 2], &b, &[2, 1], false), &f64t(&[2, 1], &[-0.5, 5.0]).cast(dt), t);
        // Aᵀ x = b: [[2,0],[1,1]] x = b → x0 = 2, x1 = 3.
        assert_close(&run(&a, &[2, 2], &b, &[2, 1], true), &f64t(&[2, 1], &[2.0, 3.0]).cast(dt), t);
        // Pivoting, k = 2 columns.
        let got = run(&SWAP, &[2, 2], &[1.0, 2.0, 3.0, 4.0], &[2, 2], false);
        assert_close(&got, &f64t(&[2, 2], &[3.0, 4.0, 1.0, 2.0]).cast(dt), t);
        // Batched: [2,2,2] with [2,2,1]; second item A = M2 with b = M2·[1,1] = [11, 8].
        let got = run(&[a.as_slice(), &M2].concat(), &[2, 2, 2], &[4.0, 5.0, 11.0, 8.0], &[2, 2, 1], false);
        assert_close(&got, &f64t(&[2, 2, 1], &[-0.5, 5.0, 1.0, 1.0]).cast(dt), t);
        // 3×3, with solve(M3, I) = M3⁻¹.
        let eye = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0];
        assert_close(&run(&M3, &[3, 3], &eye, &[3, 3], false), &f64t(&[3, 3], &M3_INV).cast(dt), 1e3 * t);
        // k = 0.
        assert_eq!(run(&M2, &[2, 2], &[], &[2, 0], false).shape(), &[2, 0]);
    }
    // The plain builder is the non-adjoint solve.
    let got = apply2(f64t(&[2, 2], &a), f64t(&[2, 1], &b), |g, x, y| g.solve(x, y));
    assert_close(&got, &f64t(&[2, 1], &[-0.5, 5.0]), 1e-12);
}

#[test]
fn triangular_solve_values() {
    // Lower L = [[2,0],[3,1]] with garbage in the (unread) upper triangle.
    let l = [2.0, 99.0, 3.0, 1.0];
    // Upper U = [[2,3],[0,1]] with garbage in the (unread) lower triangle.
    let u = [2.0, 3.0, -99.0, 1.0];
    let b = [4.0, 7.0];
    let cases: [(&[f64], bool, bool, [f64; 2]); 4] = [
        (&l, true, false, [2.0, 1.0]),   // L x = b
        (&l, true, true, [-8.5, 7.0]),   // Lᵀ x = b
        (&u, false, false, [-8.5, 7.0]), // U x = b
        (&u, false, true, [2.0, 1.0]),   // Uᵀ x = b
    ];
    for dt in FLOATS {
        for (a, lower, adj, want) in cases {
            let got = apply2(f64t(&[2, 2], a).cast(dt), f64t(&[2, 1], &b).cast(dt), |g, x, y| {
                g.triangular_solve(x, y, lower, adj)
            });
            assert_close(&got, &f64t(&[2, 1], &want).cast(dt), tol(dt));
        }
        // Batched, two rhs columns.
        let a = [l.as_slice(), &[1.0, 0.0, 1.0, 1.0]].concat();
        let rhs = [4.0, 1.0, 7.0, 2.0, 1.0, 2.0, 3.0, 5.0];
        let got = apply2(f64t(&[2, 2, 2], &a).cast(dt), f64t(&[2, 2, 2], &rhs).cast(dt), |g, x, y| {
            g.triangular_solve(x, y, true, false)
        });
        // Item 0: columns (4,7)→(2,1), (1,2)→(0.5,0.5); item 1: [[1,0],[1,1]]: (1,3)→(1,2), (2,5)→(2,3).
        let want = [2.0, 0.5, 1.0, 0.5, 1.0, 2.0, 2.0, 3.0];
        assert_close(&got, &f64t(&[2, 2, 2], &want).cast(dt), tol(dt));
    }
    // Zero on the diagonal.
    let mut g = Graph::new();
    let a = g.constant(f64t(&[2, 2], &[1.0, 0.0, 5.0, 0.0]));
    let b = g.constant(f64t(&[2, 1], &b));
    let y = g.triangular_solve(a, b, true, false).unwrap();
    let e = run_recorded(&g, &[y], &[]).unwrap_err();
    assert!(matches!(e.root(), Error::Numerical { op, .. } if op == "triangular_solve"), "{e}");
}

#[test]
fn diag_ops_and_trace_values() {
    check1(
        &[2, 2],
        &[1.0, 2.0, 3.0, 4.0],
        |g, x| g.matrix_diag(x),
        &[2, 2, 2],
        &[1.0, 0.0, 0.0, 2.0, 3.0, 0.0, 0.0, 4.0],
    );
    check1(&[3], &[1.0, 2.0, 3.0], |g, x| g.matrix_diag(x), &[3, 3], &[1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0]);
    check1(&[0], &[], |g, x| g.matrix_diag(x), &[0, 0], &[]);
    let r23 = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    check1(&[2, 3], &r23, |g, x| g.matrix_diag_part(x), &[2], &[1.0, 5.0]);
    check1(&[3, 2], &r23, |g, x| g.matrix_diag_part(x), &[2], &[1.0, 4.0]);
    check1(
        &[2, 2, 2],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        |g, x| g.matrix_diag_part(x),
        &[2, 2],
        &[1.0, 4.0, 5.0, 8.0],
    );
    check1(&[2, 0], &[], |g, x| g.matrix_diag_part(x), &[0], &[]);
    check1(&[2, 3], &r23, |g, x| g.trace(x), &[], &[6.0]);
    check1(&[3, 3], &M3, |g, x| g.trace(x), &[], &[2.0]);
    check1(&[2, 2, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], |g, x| g.trace(x), &[2], &[5.0, 13.0]);
    check1(&[0, 0], &[], |g, x| g.trace(x), &[], &[0.0]);
}

#[test]
fn linalg_dynamic_dims() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, Shape::from_dims([Dim::unknown(), Dim::unknown(), Dim::fixed(2)]));
    let inv = g.matrix_inverse(x).unwrap();
    let det = g.determinant(x).unwrap();
    let dp = g.matrix_diag_part(x).unwrap();
    let t = g.value_type(inv).unwrap().clone();
    assert_eq!(t.shape.dim(1), &Dim::fixed(2));
    assert_eq!(t.shape.dim(2), &Dim::fixed(2));
    assert!(!g.value_type(det).unwrap().shape.dim(0).is_fixed());
    assert_eq!(g.value_type(dp).unwrap().shape.rank(), 2);
    let out = run_recorded(&g, &[inv, det], &[(x, f64t(&[1, 2, 2], &M2))]).unwrap();
    assert_close(&out[0], &f64t(&[1, 2, 2], &M2_INV), 1e-12);
    assert_close(&out[1], &f64t(&[1], &[10.0]), 1e-12);
    // Not square at run time.
    let e = run_recorded(&g, &[det], &[(x, f64t(&[1, 3, 2], &[0.0; 6]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "determinant"), "{e}");
}

#[test]
fn linalg_errors_name_the_op() {
    let mut g = Graph::new();
    let i = g.constant(i64t(&[2, 2], &[1, 0, 0, 1]));
    let e = g.matrix_inverse(i).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::I64, .. } if op == "matrix_inverse"), "{e}");
    let e = g.trace(i).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, .. } if op == "trace"), "{e}");
    let r23 = g.constant(f32t(&[2, 3], &[0.0; 6]));
    for (name, res) in [
        ("matrix_inverse", g.matrix_inverse(r23)),
        ("determinant", g.determinant(r23)),
        ("log_abs_det", g.log_abs_det(r23)),
        ("cholesky", g.cholesky(r23)),
    ] {
        let e = res.unwrap_err();
        assert!(matches!(e.root(), Error::Shape { op, msg } if op == name && msg.contains("[2,3]")), "{e}");
    }
    let v = g.constant(f32t(&[3], &[0.0; 3]));
    let e = g.trace(v).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "trace"), "{e}");
    let s = g.constant(Tensor::scalar(1.0f32));
    let e = g.matrix_diag(s).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "matrix_diag"), "{e}");
    // solve: batch dims must be equal (no broadcasting), rows must match, dtypes must match.
    let a = g.constant(f32t(&[2, 2, 2], &[0.0; 8]));
    let b1 = g.constant(f32t(&[1, 2, 1], &[0.0; 2]));
    let e = g.solve(a, b1).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, msg } if op == "solve" && msg.contains("no broadcasting")), "{e}");
    let b3 = g.constant(f32t(&[2, 3, 1], &[0.0; 6]));
    let e = g.triangular_solve(a, b3, true, false).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "triangular_solve"), "{e}");
    let bf = g.constant(f64t(&[2, 2, 1], &[0.0; 4]));
    let e = g.solve_t(a, bf, true).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::F64, .. } if op == "solve"), "{e}");
    let y = g.triangular_solve(a, a, false, true).unwrap();
    assert!(format!("{g}").contains("triangular_solve{lower=false, adjoint=true}"));
    let _ = y;
}
