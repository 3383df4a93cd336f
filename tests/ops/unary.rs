//! Value tests for unary elementwise ops (expected values computed by hand / closed form).

use crate::common::*;
use pfor::ops::UnaryKind;
use pfor::prelude::*;

fn check(k: UnaryKind, xs: &[f64], want: &[f64]) {
    let n = xs.len();
    for dt in [DType::F64, DType::F32] {
        let x = f64t(&[n], xs).cast(dt);
        let got = apply1(x, |g, x| g.unary(k, x));
        let tol = if dt == DType::F32 { 1e-5 } else { 1e-12 };
        assert_close(&got, &f64t(&[n], want).cast(dt), tol);
    }
}

#[test]
fn float_unary_values() {
    use UnaryKind::*;
    let e = std::f64::consts::E;
    check(Neg, &[1.0, -2.0, 0.0], &[-1.0, 2.0, 0.0]);
    check(Abs, &[-1.5, 2.0], &[1.5, 2.0]);
    check(Sign, &[-3.0, 0.0, 2.0], &[-1.0, 0.0, 1.0]);
    check(Square, &[3.0, -2.0], &[9.0, 4.0]);
    check(Exp, &[0.0, 1.0], &[1.0, e]);
    check(Expm1, &[0.0, 1.0], &[0.0, e - 1.0]);
    check(Log, &[1.0, e], &[0.0, 1.0]);
    check(Log1p, &[0.0, e - 1.0], &[0.0, 1.0]);
    check(Sqrt, &[4.0, 9.0], &[2.0, 3.0]);
    check(Rsqrt, &[4.0, 0.25], &[0.5, 2.0]);
    check(Reciprocal, &[4.0, -0.5], &[0.25, -2.0]);
    check(Sin, &[0.0, std::f64::consts::FRAC_PI_2], &[0.0, 1.0]);
    check(Cos, &[0.0, std::f64::consts::PI], &[1.0, -1.0]);
    check(Tan, &[0.0, std::f64::consts::FRAC_PI_4], &[0.0, 1.0]);
    check(Asin, &[0.0, 1.0], &[0.0, std::f64::consts::FRAC_PI_2]);
    check(Acos, &[1.0, 0.0], &[0.0, std::f64::consts::FRAC_PI_2]);
    check(Atan, &[0.0, 1.0], &[0.0, std::f64::consts::FRAC_PI_4]);
    check(Asinh, &[0.0, 1.0, -2.0], &[0.0, (1.0 + 2f64.sqrt()).ln(), -(2.0 + 5f64.sqrt()).ln()]);
    check(Sinh, &[0.0, 1.0], &[0.0, (e - 1.0 / e) / 2.0]);
    check(Cosh, &[0.0, 1.0], &[1.0, (e + 1.0 / e) / 2.0]);
    check(Tanh, &[0.0, 1.0], &[0.0, (e * e - 1.0) / (e * e + 1.0)]);
    check(Sigmoid, &[0.0, 1.0, -1.0], &[0.5, 1.0 / (1.0 + 1.0 / e), 1.0 / (1.0 + e)]);
    check(LogSigmoid, &[0.0], &[-(2.0f64).ln()]);
    check(Relu, &[-1.0, 0.0, 2.5], &[0.0, 0.0, 2.5]);
    check(Relu6, &[-1.0, 3.0, 7.0], &[0.0, 3.0, 6.0]);
    check(Step, &[-1.0, 0.0, -0.0, 1e-30, 2.5, f64::NAN, f64::INFINITY], &[0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0]);
    check(Elu, &[1.0, -1.0], &[1.0, 1.0 / e - 1.0]);
    check(Selu, &[1.0, 0.0], &[1.050_700_987_355_480_5, 0.0]);
    check(Softplus, &[0.0, 1.0], &[(2.0f64).ln(), (1.0 + e).ln()]);
    check(Softsign, &[1.0, -3.0], &[0.5, -0.75]);
    check(Silu, &[0.0, 1.0], &[0.0, 1.0 / (1.0 + 1.0 / e)]);
    check(Gelu, &[0.0, 1.0], &[0.0, 0.841_344_746_068_542_9]);
    check(Erf, &[0.0, 1.0, -0.5], &[0.0, 0.842_700_792_949_714_9, -0.520_499_877_813_046_5]);
    check(Erfc, &[0.0, 1.0], &[1.0, 0.157_299_207_050_285_1]);
    check(Floor, &[1.5, -1.5], &[1.0, -2.0]);
    check(Ceil, &[1.5, -1.5], &[2.0, -1.0]);
    check(Round, &[0.5, 1.5, 2.4, -2.5], &[0.0, 2.0, 2.0, -2.0]);
}

#[test]
fn predicate_and_logical_unary_values() {
    let x = f64t(&[4], &[1.0, f64::NAN, f64::INFINITY, -2.0]);
    assert_eq!(apply1(x.clone(), |g, x| g.is_nan(x)), boolt(&[4], &[false, true, false, false]));
    assert_eq!(apply1(x, |g, x| g.is_finite(x)), boolt(&[4], &[true, false, false, true]));
    let b = boolt(&[2, 1], &[true, false]);
    assert_eq!(apply1(b, |g, x| g.logical_not(x)), boolt(&[2, 1], &[false, true]));
}

#[test]
fn integer_unary_values() {
    let x = i64t(&[3], &[-3, 0, 5]);
    assert_eq!(apply1(x.clone(), |g, x| g.neg(x)), i64t(&[3], &[3, 0, -5]));
    assert_eq!(apply1(x.clone(), |g, x| g.abs(x)), i64t(&[3], &[3, 0, 5]));
    assert_eq!(apply1(x.clone(), |g, x| g.sign(x)), i64t(&[3], &[-1, 0, 1]));
    assert_eq!(apply1(x, |g, x| g.square(x)), i64t(&[3], &[9, 0, 25]));
}

#[test]
fn unary_dtype_errors_name_the_op() {
    let mut g = Graph::new();
    let x = g.constant(i64t(&[2], &[1, 2]));
    let e = g.exp(x).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::I64, .. } if op == "exp"), "{e}");
    assert!(e.to_string().contains("exp"), "{e}");
    let b = g.constant(boolt(&[1], &[true]));
    assert!(matches!(g.neg(b).unwrap_err().root(), Error::DType { .. }));
    let f = g.constant(f32t(&[1], &[1.0]));
    assert!(matches!(g.logical_not(f).unwrap_err().root(), Error::DType { .. }));
}

#[test]
fn unary_large_tensor_parallel_path_matches() {
    let n = pfor::ops::unary::PAR_THRESHOLD + 3;
    let x = Tensor::randn(&[n], 1).unwrap();
    // the parallel path computes exactly what the sequential kernel computes per element
    let xs = x.to_vec::<f32>().unwrap();
    let mut want = xs.clone();
    pfor::kernels::fastmath::tanh_f32(&mut want);
    let got = apply1(x, |g, x| g.tanh(x));
    assert_eq!(got.to_vec::<f32>().unwrap(), want);
    for (g, v) in got.to_vec::<f32>().unwrap().iter().zip(&xs) {
        assert!((*g as f64 - (*v as f64).tanh()).abs() <= 1e-6 * (*v as f64).tanh().abs().max(1e-30), "tanh({v})");
    }
}

/// The vectorized f32 sigmoid / tanh kernels against the f64 functions: relative error
/// below 1e-6 over a dense sweep of [-100, 100] (both branches of each, every binade near
/// 0), exact limits at ±inf, NaN propagated, and tiny arguments kept exact.
#[test]
fn unary_f32_sigmoid_tanh_kernels_are_accurate() {
    use pfor::kernels::fastmath::{sigmoid_f32, tanh_f32};
    let mut xs: Vec<f32> = (-400_000..=400_000).map(|i| i as f32 * 2.5e-4).collect();
    xs.extend((-40..=40).map(|e| 2f32.powi(e)));
    xs.extend((-40..=40).map(|e| -(2f32.powi(e))));
    xs.extend([0.0, -0.0, 0.5, -0.5, 0.499_999_97, 87.0, -87.0, 87.5, -87.5, 100.0, -100.0, 1e-30, -1e-30]);
    let sig64 = |x: f64| 1.0 / (1.0 + (-x).exp());
    let (mut s, mut t) = (xs.clone(), xs.clone());
    sigmoid_f32(&mut s);
    tanh_f32(&mut t);
    let rel = |got: f32, want: f64| {
        if want == 0.0 { (got as f64).abs() } else { ((got as f64 - want) / want).abs() }
    };
    for (k, &x) in xs.iter().enumerate() {
        let ws = sig64(x as f64);
        // near and below the smallest normal f32 the result may be subnormal or 0
        if ws > 1.2e-37 {
            assert!(rel(s[k], ws) < 1e-6, "sigmoid({x}) = {} want {ws}", s[k]);
        } else {
            assert!((s[k] as f64 - ws).abs() < 2e-38, "sigmoid({x}) = {}", s[k]);
        }
        let wt = (x as f64).tanh();
        assert!(rel(t[k], wt) < 1e-6, "tanh({x}) = {} want {wt}", t[k]);
    }
    let mut sp = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
    let mut tp = sp;
    sigmoid_f32(&mut sp);
    tanh_f32(&mut tp);
    assert_eq!((sp[0], sp[1]), (1.0, 0.0));
    assert_eq!((tp[0], tp[1]), (1.0, -1.0));
    assert!(sp[2].is_nan() && tp[2].is_nan());
    let mut z = [0.0f32, -0.0];
    tanh_f32(&mut z);
    assert!(z[0] == 0.0 && z[1] == 0.0 && z[1].is_sign_negative());
}

/// The allocator tuning applies on Linux/glibc, is idempotent, and leaves results alone.
#[test]
fn allocator_tuning_applies_and_keeps_results() -> pfor::Result<()> {
    let mut g = pfor::Graph::new();
    let x = g.input("x", pfor::DType::F32, [300, 1000]);
    let y = g.tanh(x)?;
    let feed = pfor::Tensor::randn(&[300, 1000], 5).unwrap();
    let before = run_recorded(&g, &[y], &[(x, feed.clone())])?;
    let applied = pfor::tune_system_allocator()?;
    assert_eq!(applied, cfg!(all(target_os = "linux", target_env = "gnu")));
    assert_eq!(pfor::tune_system_allocator()?, applied);
    let after = run_recorded(&g, &[y], &[(x, feed)])?;
    assert_eq!(before[0].to_vec::<f32>()?, after[0].to_vec::<f32>()?);
    Ok(())
}
