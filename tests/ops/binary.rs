//! Value tests for the binary family (expected values computed by hand).

use crate::common::*;
use pfor::ops::BinaryKind;
use pfor::prelude::*;

fn bin(k: BinaryKind, a: Tensor, b: Tensor) -> Tensor {
    apply2(a, b, |g, x, y| g.binary(k, x, y))
}

/// Check a float kind in f64 and f32 on rank-1 operands of equal length.
fn check_float(k: BinaryKind, a: &[f64], b: &[f64], want: &[f64]) {
    let n = a.len();
    for dt in [DType::F64, DType::F32] {
        let got = bin(k, f64t(&[n], a).cast(dt), f64t(&[n], b).cast(dt));
        let tol = if dt == DType::F32 { 1e-5 } else { 1e-12 };
        assert_close(&got, &f64t(&[n], want).cast(dt), tol);
    }
}

fn err_of(r: Result<ValueId>) -> Error {
    r.expect_err("expected an error")
}

#[test]
fn float_arithmetic_values() {
    use BinaryKind::*;
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};
    check_float(Add, &[1.0, -2.5, 0.0], &[2.0, 0.5, -1.0], &[3.0, -2.0, -1.0]);
    check_float(Sub, &[1.0, -2.5, 0.0], &[2.0, 0.5, -1.0], &[-1.0, -3.0, 1.0]);
    check_float(Mul, &[1.5, -2.0, 0.0], &[2.0, 3.0, -1.0], &[3.0, -6.0, 0.0]);
    check_float(Div, &[3.0, -1.0, 7.0], &[2.0, 4.0, -0.5], &[1.5, -0.25, -14.0]);
    check_float(Pow, &[2.0, 4.0, 9.0, -2.0, 0.0], &[3.0, 0.5, -0.5, 2.0, 0.0], &[8.0, 2.0, 1.0 / 3.0, 4.0, 1.0]);
    check_float(Maximum, &[1.0, -2.0, 3.0], &[2.0, -3.0, 3.0], &[2.0, -2.0, 3.0]);
    check_float(Minimum, &[1.0, -2.0, 3.0], &[2.0, -3.0, 3.0], &[1.0, -3.0, 3.0]);
    check_float(SquaredDifference, &[1.0, -2.0, 0.5], &[4.0, 1.0, 0.5], &[9.0, 9.0, 0.0]);
    // atan2(a, b) = angle of the point (x=b, y=a).
    check_float(
        Atan2,
        &[1.0, 1.0, 0.0, -1.0, 1.0],
        &[1.0, 0.0, -1.0, 0.0, -1.0],
        &[FRAC_PI_4, FRAC_PI_2, PI, -FRAC_PI_2, 3.0 * FRAC_PI_4],
    );
}

#[test]
fn float_floor_div_and_floor_mod_follow_python() {
    use BinaryKind::*;
    let a = [7.0, -7.0, 7.0, -7.0, 6.0, 5.5, -5.5, 0.5];
    let b = [3.0, 3.0, -3.0, -3.0, 3.0, -2.0, 2.0, 0.25];
    check_float(FloorDiv, &a, &b, &[2.0, -3.0, -3.0, 2.0, 2.0, -3.0, -3.0, 2.0]);
    check_float(FloorMod, &a, &b, &[1.0, 2.0, -2.0, -1.0, 0.0, -0.5, 0.5, 0.0]);
}

#[test]
fn float_division_by_zero_is_ieee() {
    let got = bin(BinaryKind::Div, f64t(&[3], &[1.0, -1.0, 0.0]), f64t(&[3], &[0.0, 0.0, 0.0]));
    let v = got.to_vec::<f64>().unwrap();
    assert_eq!(v[0], f64::INFINITY);
    assert_eq!(v[1], f64::NEG_INFINITY);
    assert!(v[2].is_nan());
    let m = bin(BinaryKind::FloorMod, f64t(&[1], &[1.0]), f64t(&[1], &[0.0]));
    assert!(m.to_vec::<f64>().unwrap()[0].is_nan());
}

#[test]
fn maximum_minimum_propagate_nan() {
    let a = f64t(&[3], &[f64::NAN, 1.0, 2.0]);
    let b = f64t(&[3], &[1.0, f64::NAN, 0.0]);
    for k in [BinaryKind::Maximum, BinaryKind::Minimum] {
        let v = bin(k, a.clone(), b.clone()).to_vec::<f64>().unwrap();
        assert!(v[0].is_nan() && v[1].is_nan(), "{k:?}: {v:?}");
        assert_eq!(v[2], if k == BinaryKind::Maximum { 2.0 } else { 0.0 });
    }
}

#[test]
fn broadcasting_row_vector() {
    // x[2,3] - y[3] and y[3] - x[2,3] (order matters).
    let x = f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let y = f32t(&[3], &[10.0, 20.0, 30.0]);
    assert_eq!(bin(BinaryKind::Sub, x.clone(), y.clone()), f32t(&[2, 3], &[-9.0, -18.0, -27.0, -6.0, -15.0, -24.0]));
    assert_eq!(bin(BinaryKind::Sub, y.clone(), x.clone()), f32t(&[2, 3], &[9.0, 18.0, 27.0, 6.0, 15.0, 24.0]));
    assert_eq!(bin(BinaryKind::Add, x, y), f32t(&[2, 3], &[11.0, 22.0, 33.0, 14.0, 25.0, 36.0]));
}

#[test]
fn broadcasting_column_times_row() {
    let x = i64t(&[2, 1], &[1, 2]);
    let y = i64t(&[1, 3], &[3, 4, 5]);
    assert_eq!(bin(BinaryKind::Mul, x.clone(), y.clone()), i64t(&[2, 3], &[3, 4, 5, 6, 8, 10]));
    assert_eq!(bin(BinaryKind::Sub, x.clone(), y.clone()), i64t(&[2, 3], &[-2, -3, -4, -1, -2, -3]));
    assert_eq!(bin(BinaryKind::Less, x, y), boolt(&[2, 3], &[true, true, true, true, true, true]));
    let xf = f64t(&[2, 1], &[4.0, 5.0]);
    let yf = f64t(&[1, 3], &[3.0, 4.0, 5.0]);
    assert_eq!(bin(BinaryKind::GreaterEqual, xf, yf), boolt(&[2, 3], &[true, true, false, true, true, true]));
}

#[test]
fn broadcasting_scalars() {
    let s = Tensor::scalar(2.0f64);
    let v = f64t(&[3], &[1.0, 2.0, 3.0]);
    assert_eq!(bin(BinaryKind::Div, s.clone(), v.clone()), f64t(&[3], &[2.0, 1.0, 2.0 / 3.0]));
    assert_eq!(bin(BinaryKind::Pow, v.clone(), s.clone()), f64t(&[3], &[1.0, 4.0, 9.0]));
    assert_eq!(bin(BinaryKind::Pow, s.clone(), v), f64t(&[3], &[2.0, 4.0, 8.0]));
    let r = bin(BinaryKind::Add, s.clone(), Tensor::scalar(0.5f64));
    assert_eq!(r, Tensor::scalar(2.5f64));
    assert_eq!(r.shape(), &[] as &[usize]);
    assert_eq!(
        bin(BinaryKind::Equal, Tensor::scalar(3i64), i64t(&[3], &[1, 3, 5])),
        boolt(&[3], &[false, true, false])
    );
}

#[test]
fn empty_tensors() {
    let a = f32t(&[0, 3], &[]);
    let b = f32t(&[3], &[1.0, 2.0, 3.0]);
    let got = bin(BinaryKind::Add, a, b);
    assert_eq!(got.shape(), &[0, 3]);
    assert_eq!(got.dtype(), DType::F32);
    // No element is divided, so a zero divisor is not an error.
    let got = bin(BinaryKind::Div, i64t(&[0, 2], &[]), i64t(&[2], &[0, 1]));
    assert_eq!(got.shape(), &[0, 2]);
}

#[test]
fn i64_division_semantics() {
    let a = i64t(&[6], &[7, -7, 7, -7, 6, 0]);
    let b = i64t(&[6], &[3, 3, -3, -3, 3, -3]);
    // Truncating division (like Rust).
    assert_eq!(bin(BinaryKind::Div, a.clone(), b.clone()), i64t(&[6], &[2, -2, -2, 2, 2, 0]));
    // Floor division.
    assert_eq!(bin(BinaryKind::FloorDiv, a.clone(), b.clone()), i64t(&[6], &[2, -3, -3, 2, 2, 0]));
    // Python %: sign of the divisor.
    assert_eq!(bin(BinaryKind::FloorMod, a, b), i64t(&[6], &[1, 2, -2, -1, 0, 0]));
}

#[test]
fn i64_arithmetic_and_wrapping() {
    use BinaryKind::*;
    let a = i64t(&[5], &[2, 3, -2, 5, 0]);
    let b = i64t(&[5], &[10, 3, 3, 0, 0]);
    assert_eq!(bin(Pow, a.clone(), b.clone()), i64t(&[5], &[1024, 27, -8, 1, 1]));
    assert_eq!(bin(Add, a.clone(), b.clone()), i64t(&[5], &[12, 6, 1, 5, 0]));
    assert_eq!(bin(Sub, a.clone(), b.clone()), i64t(&[5], &[-8, 0, -5, 5, 0]));
    assert_eq!(bin(Mul, a.clone(), b.clone()), i64t(&[5], &[20, 9, -6, 0, 0]));
    assert_eq!(bin(Maximum, a.clone(), b.clone()), i64t(&[5], &[10, 3, 3, 5, 0]));
    assert_eq!(bin(Minimum, a.clone(), b.clone()), i64t(&[5], &[2, 3, -2, 0, 0]));
    assert_eq!(bin(SquaredDifference, a, b), i64t(&[5], &[64, 0, 25, 25, 0]));
    // Overflow wraps.
    let m = i64t(&[2], &[i64::MAX, i64::MIN]);
    assert_eq!(bin(Add, m.clone(), i64t(&[2], &[1, -1])), i64t(&[2], &[i64::MIN, i64::MAX]));
    assert_eq!(bin(Mul, m.clone(), Tensor::scalar(2i64)), i64t(&[2], &[-2, 0]));
    assert_eq!(bin(Div, m.clone(), Tensor::scalar(-1i64)), i64t(&[2], &[-i64::MAX, i64::MIN]));
    assert_eq!(bin(FloorDiv, m.clone(), Tensor::scalar(-1i64)), i64t(&[2], &[-i64::MAX, i64::MIN]));
    assert_eq!(bin(FloorMod, m, Tensor::scalar(-1i64)), i64t(&[2], &[0, 0]));
    assert_eq!(bin(Pow, Tensor::scalar(2i64), Tensor::scalar(64i64)), Tensor::scalar(0i64));
}

#[test]
fn comparisons_f32_and_i64() {
    use BinaryKind::*;
    let a = f32t(&[4], &[1.0, 2.0, 3.0, f32::NAN]);
    let b = f32t(&[4], &[2.0, 2.0, 2.0, f32::NAN]);
    let cases = [
        (Equal, [false, true, false, false]),
        (NotEqual, [true, false, true, true]),
        (Less, [true, false, false, false]),
        (LessEqual, [true, true, false, false]),
        (Greater, [false, false, true, false]),
        (GreaterEqual, [false, true, true, false]),
    ];
    for (k, want) in cases {
        assert_eq!(bin(k, a.clone(), b.clone()), boolt(&[4], &want), "{k:?} f32");
    }
    let a = i64t(&[3], &[-1, 0, 5]);
    let b = i64t(&[3], &[0, 0, -5]);
    let cases = [
        (Equal, [false, true, false]),
        (NotEqual, [true, false, true]),
        (Less, [true, false, false]),
        (LessEqual, [true, true, false]),
        (Greater, [false, false, true]),
        (GreaterEqual, [false, true, true]),
    ];
    for (k, want) in cases {
        assert_eq!(bin(k, a.clone(), b.clone()), boolt(&[3], &want), "{k:?} i64");
    }
}

#[test]
fn logical_ops_and_bool_equality() {
    use BinaryKind::*;
    // a[4] vs b[2,1]: each row of the output compares a with one b value.
    let a = boolt(&[4], &[false, false, true, true]);
    let b = boolt(&[2, 1], &[false, true]);
    let cases = [
        (LogicalAnd, [false, false, false, false, false, false, true, true]),
        (LogicalOr, [false, false, true, true, true, true, true, true]),
        (LogicalXor, [false, false, true, true, true, true, false, false]),
        (Equal, [true, true, false, false, false, false, true, true]),
        (NotEqual, [false, false, true, true, true, true, false, false]),
    ];
    for (k, want) in cases {
        assert_eq!(bin(k, a.clone(), b.clone()), boolt(&[2, 4], &want), "{k:?}");
    }
}

#[test]
fn dtype_mismatch_is_an_error_naming_both_dtypes() {
    let mut g = Graph::new();
    let x = g.constant(f32t(&[2], &[1.0, 2.0]));
    let y = g.constant(i64t(&[2], &[1, 2]));
    let e = err_of(g.add(x, y));
    assert!(matches!(e.root(), Error::DType { op, got: DType::I64, .. } if op == "add"), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("add") && msg.contains("f32") && msg.contains("i64"), "{msg}");
    let e = err_of(g.less(y, x));
    assert!(matches!(e.root(), Error::DType { op, got: DType::F32, .. } if op == "less"), "{e}");
}

#[test]
fn wrong_dtype_for_kind_is_an_error() {
    let mut g = Graph::new();
    let i = g.constant(i64t(&[2], &[1, 2]));
    let f = g.constant(f32t(&[2], &[1.0, 2.0]));
    let b = g.constant(boolt(&[2], &[true, false]));
    let cases: [(Result<ValueId>, &str, DType); 5] = [
        (g.atan2(i, i), "atan2", DType::I64),
        (g.logical_and(f, f), "logical_and", DType::F32),
        (g.logical_xor(i, i), "logical_xor", DType::I64),
        (g.add(b, b), "add", DType::Bool),
        (g.less(b, b), "less", DType::Bool),
    ];
    for (r, name, dt) in cases {
        let e = err_of(r);
        assert!(matches!(e.root(), Error::DType { op, got, .. } if op == name && *got == dt), "{e}");
        assert!(e.to_string().contains(name), "{e}");
    }
    // equal/not_equal accept bool.
    assert!(g.equal(b, b).is_ok() && g.not_equal(b, b).is_ok());
}

#[test]
fn broadcast_mismatch_is_a_shape_error() {
    let mut g = Graph::new();
    let x = g.constant(f32t(&[2, 3], &[0.0; 6]));
    let y = g.constant(f32t(&[2], &[0.0; 2]));
    let e = err_of(g.mul(x, y));
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "mul"), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("mul") && msg.contains("[2,3]") && msg.contains("[2]"), "{msg}");
    let z = g.constant(f32t(&[3, 1], &[0.0; 3]));
    assert!(matches!(err_of(g.greater(x, z)).root(), Error::Shape { .. }));
}

#[test]
fn arity_error() {
    let mut g = Graph::new();
    let x = g.constant(f32t(&[1], &[0.0]));
    let e = g.add_op(Op::Binary(BinaryKind::Add), &[x]).unwrap_err();
    assert!(matches!(e.root(), Error::Arity { op, got: 1, .. } if op == "add"), "{e}");
}

fn run_err(a: Tensor, b: Tensor, k: BinaryKind) -> Error {
    let mut g = Graph::new();
    let x = g.constant(a);
    let y = g.constant(b);
    let z = g.binary(k, x, y).unwrap();
    run_recorded(&g, &[z], &[]).unwrap_err()
}

#[test]
fn integer_division_by_zero_fails_at_run_time() {
    for k in [BinaryKind::Div, BinaryKind::FloorDiv, BinaryKind::FloorMod] {
        let e = run_err(i64t(&[3], &[1, 2, 3]), i64t(&[3], &[1, 0, 1]), k);
        assert!(matches!(e.root(), Error::Numerical { op, .. } if op == k.name()), "{e}");
        assert!(e.to_string().contains(k.name()), "{e}");
        // Broadcast scalar zero.
        let e = run_err(i64t(&[2, 2], &[1, 2, 3, 4]), Tensor::scalar(0i64), k);
        assert!(matches!(e.root(), Error::Numerical { .. }), "{e}");
    }
}

#[test]
fn integer_pow_negative_exponent_fails() {
    let e = run_err(i64t(&[2], &[2, 2]), i64t(&[2], &[1, -1]), BinaryKind::Pow);
    assert!(matches!(e.root(), Error::Numerical { op, .. } if op == "pow"), "{e}");
    assert!(e.to_string().contains("-1"), "{e}");
}

#[test]
fn dynamic_dims_propagate_and_are_checked_at_run_time() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::unknown(), Dim::fixed(3)]);
    let y = g.input("y", DType::F32, [Dim::unknown()]);
    let z = g.add(x, y).unwrap();
    let ty = g.value_type(z).unwrap().clone();
    assert_eq!(ty.dtype, DType::F32);
    assert_eq!(ty.shape, Shape::from([Dim::unknown(), Dim::fixed(3)]));
    let xs = f32t(&[1, 3], &[1.0, 2.0, 3.0]);
    let ok = run_recorded(&g, &[z], &[(x, xs.clone()), (y, f32t(&[1], &[10.0]))]).unwrap();
    assert_eq!(ok[0], f32t(&[1, 3], &[11.0, 12.0, 13.0]));
    let e = run_recorded(&g, &[z], &[(x, xs), (y, f32t(&[2], &[1.0, 2.0]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "add"), "{e}");
}

#[test]
fn in_place_paths_keep_operand_order_and_constants_intact() {
    // mul's result is owned by add/sub, so the kernels may write into it: both on the left
    // and on the right of a non-commutative op.
    let mut g = Graph::new();
    let x = g.constant(f64t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    let two = g.constant(Tensor::scalar(2.0f64));
    let r = g.constant(f64t(&[3], &[1.0, 1.0, 1.0]));
    let m1 = g.mul(x, two).unwrap();
    let left = g.sub(m1, r).unwrap();
    let m2 = g.mul(x, two).unwrap();
    let right = g.sub(r, m2).unwrap();
    let mut s = session(&g, &[left, right, x]).unwrap();
    for _ in 0..2 {
        let out = s.run(&[]).unwrap();
        assert_eq!(out[0], f64t(&[2, 3], &[1.0, 3.0, 5.0, 7.0, 9.0, 11.0]));
        assert_eq!(out[1], f64t(&[2, 3], &[-1.0, -3.0, -5.0, -7.0, -9.0, -11.0]));
        assert_eq!(out[2], f64t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]));
    }
}

#[test]
fn large_tensors_parallel_path() {
    let n = pfor::ops::unary::PAR_THRESHOLD + 3;
    let a = Tensor::vec1(&(0..n as i64).collect::<Vec<_>>());
    let b = Tensor::vec1(&(0..n as i64).map(|i| 2 * i - 5).collect::<Vec<_>>());
    let sum = bin(BinaryKind::Add, a.clone(), b.clone()).to_vec::<i64>().unwrap();
    assert!(sum.iter().enumerate().all(|(i, &v)| v == 3 * i as i64 - 5));
    let lt = bin(BinaryKind::Less, a.clone(), b).to_vec::<bool>().unwrap();
    assert!(lt.iter().enumerate().all(|(i, &v)| v == (i > 5)));
    let m = bin(BinaryKind::FloorMod, a, Tensor::scalar(7i64)).to_vec::<i64>().unwrap();
    assert!(m.iter().enumerate().all(|(i, &v)| v == (i % 7) as i64));
}

/// The contiguous fast paths (an operand repeating with a period: same shape, or a row
/// broadcast such as `[1, 4]` against `[3, 1, 4]`) give the values of the generic broadcast,
/// for either operand order, owned or shared operands, and sizes on both sides of the
/// parallel threshold.
#[test]
fn periodic_broadcast_fast_paths_match_elementwise_values() -> pfor::Result<()> {
    for (big, small) in [(vec![3usize, 1, 4], vec![1usize, 4]), (vec![2, 3], vec![2, 3]), (vec![600, 256], vec![256])] {
        let a = Tensor::randn(&big, 1).unwrap().cast(DType::F64);
        let b = Tensor::randn(&small, 2).unwrap().cast(DType::F64).to_vec::<f64>()?;
        let av = a.to_vec::<f64>()?;
        let bt = f64t(&small, &b);
        for k in [BinaryKind::Sub, BinaryKind::Div, BinaryKind::Maximum] {
            let f = |x: f64, y: f64| match k {
                BinaryKind::Sub => x - y,
                BinaryKind::Div => x / y,
                _ => x.max(y),
            };
            let want_ab: Vec<f64> = av.iter().enumerate().map(|(i, &x)| f(x, b[i % b.len()])).collect();
            let want_ba: Vec<f64> = av.iter().enumerate().map(|(i, &x)| f(b[i % b.len()], x)).collect();
            // owned big operand (in place) and a shared one (the graph keeps a second reader)
            assert_eq!(bin(k, a.clone(), bt.clone()).to_vec::<f64>()?, want_ab, "{k:?} {big:?} {small:?}");
            assert_eq!(bin(k, bt.clone(), a.clone()).to_vec::<f64>()?, want_ba, "{k:?} {small:?} {big:?}");
            let mut g = Graph::new();
            let x = g.input("x", DType::F64, big.as_slice());
            let y = g.constant(bt.clone());
            let z = g.binary(k, x, y)?;
            let w = g.binary(k, y, x)?;
            let got = run_recorded(&g, &[z, w, x], &[(x, a.clone())])?;
            assert_eq!(got[0].to_vec::<f64>()?, want_ab);
            assert_eq!(got[1].to_vec::<f64>()?, want_ba);
            assert_eq!(got[2].to_vec::<f64>()?, av);
        }
    }
    Ok(())
}

#[test]
fn bitwise_and_shift_values_on_i64() {
    use BinaryKind::*;
    let a = i64t(&[4], &[0b1100, -1, 5, i64::MIN]);
    let b = i64t(&[4], &[0b1010, 7, -2, -1]);
    assert_eq!(bin(BitwiseAnd, a.clone(), b.clone()), i64t(&[4], &[0b1000, 7, 4, i64::MIN]));
    assert_eq!(bin(BitwiseOr, a.clone(), b.clone()), i64t(&[4], &[0b1110, -1, -1, -1]));
    assert_eq!(bin(BitwiseXor, a, b), i64t(&[4], &[0b0110, -8, -5, i64::MAX]));
    // shift counts outside [0, 64): 0, or the sign fill for the arithmetic right shift
    let x = i64t(&[5], &[3, -8, -8, 1, -1]);
    let s = i64t(&[5], &[2, 1, 64, -1, 63]);
    assert_eq!(bin(ShiftLeft, x.clone(), s.clone()), i64t(&[5], &[12, -16, 0, 0, i64::MIN]));
    assert_eq!(bin(ShiftRight, x.clone(), s.clone()), i64t(&[5], &[0, -4, -1, 0, -1]));
    assert_eq!(bin(ShiftRightLogical, x, s), i64t(&[5], &[0, (u64::MAX >> 1) as i64 - 3, 0, 0, 1]));
    // broadcasting a scalar count
    assert_eq!(bin(ShiftLeft, i64t(&[2], &[1, 2]), Tensor::scalar(3i64)), i64t(&[2], &[8, 16]));
}

#[test]
fn bitwise_kinds_take_i64_only_and_pass_no_derivative() {
    let mut g = Graph::new();
    let f = g.constant(Tensor::vec1(&[1.0f64]));
    let e = err_of(g.binary(BinaryKind::BitwiseAnd, f, f)).to_string();
    assert!(e.contains("bitwise_and") && e.contains("i64"), "{e}");
    for k in [BinaryKind::BitwiseOr, BinaryKind::ShiftLeft, BinaryKind::ShiftRightLogical] {
        assert!(!pfor::autodiff::rules::binary::differentiable(k), "{}", k.name());
    }
}
