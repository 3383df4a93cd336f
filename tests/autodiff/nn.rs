//! Derivative tests of the `nn` family: every kind, first order, and second order for the
//! softmax family, the cross-entropies and the normalizations.

use super::fd::{FdCase, case, check, randn, unif};
use pfor::prelude::*;

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    let labels = Tensor::from_vec(&[2, 3], vec![0i64, 3, 2, 1, 3, 0]).unwrap();
    vec![
        case("bias_add", vec![randn(&[2, 3, 4], 1), randn(&[4], 2)], |g, x| Ok(vec![g.bias_add(x[0], x[1])?])).second(),
        case("softmax axis -1", vec![randn(&[2, 3, 4], 3)], |g, x| Ok(vec![g.softmax(x[0], -1)?])).second(),
        case("softmax axis 1", vec![randn(&[2, 3, 4], 4)], |g, x| Ok(vec![g.softmax(x[0], 1)?])).second(),
        case("log_softmax axis -1", vec![randn(&[2, 3, 4], 5)], |g, x| Ok(vec![g.log_softmax(x[0], -1)?])).second(),
        case("log_softmax axis 0", vec![randn(&[2, 3, 4], 6)], |g, x| Ok(vec![g.log_softmax(x[0], 0)?])).second(),
        // labels that do not sum to one: the rule must not assume they do
        case("softmax_cross_entropy", vec![randn(&[2, 3, 4], 7), unif(&[2, 3, 4], 0.0, 1.0, 8)], |g, x| {
            Ok(vec![g.softmax_cross_entropy(x[1], x[0])?])
        })
        .second(),
        case(
            "sparse_softmax_cross_entropy, class count known at run time",
            vec![randn(&[2, 3, 4], 31), labels.clone()],
            |g, x| {
                let l = super::fd::dyn_dims(g, x[0])?;
                Ok(vec![g.sparse_softmax_cross_entropy(x[1], l)?])
            },
        )
        .second(),
        case("sparse_softmax_cross_entropy", vec![randn(&[2, 3, 4], 9), labels], |g, x| {
            Ok(vec![g.sparse_softmax_cross_entropy(x[1], x[0])?])
        })
        .second(),
        case("sigmoid_cross_entropy", vec![randn(&[2, 5], 10), unif(&[2, 5], 0.0, 1.0, 11)], |g, x| {
            Ok(vec![g.sigmoid_cross_entropy(x[1], x[0])?])
        })
        .second(),
        case("l2_loss", vec![randn(&[3, 4], 12)], |g, x| Ok(vec![g.l2_loss(x[0])?])).second(),
        case("layer_norm", vec![randn(&[2, 3, 5], 13), randn(&[5], 14), randn(&[5], 15)], |g, x| {
            Ok(vec![g.layer_norm(x[0], x[1], x[2], 1e-3)?])
        })
        .second(),
        case(
            "layer_norm broadcast gamma/beta",
            vec![randn(&[2, 3, 5], 26), randn(&[3, 5], 27), randn(&[1], 28)],
            |g, x| Ok(vec![g.layer_norm(x[0], x[1], x[2], 1e-3)?]),
        )
        .second(),
        case(
            "batch_norm",
            vec![randn(&[2, 3, 4], 16), randn(&[4], 17), unif(&[4], 0.5, 2.0, 18), randn(&[4], 19), randn(&[4], 20)],
            |g, x| Ok(vec![g.batch_norm(x[0], x[1], x[2], x[3], x[4], 1e-3)?]),
        )
        .second(),
    ]
}

#[test]
fn nn_derivatives_match_finite_differences() {
    for c in cases() {
        check(&c);
    }
}

/// Forward mode with tangents only for the per-channel parameters (the output tangent must
/// still have the output's full shape).
#[test]
fn nn_jvp_wrt_parameters_only_has_output_shape() {
    for c in [
        case("bias_add wrt b", vec![randn(&[2, 4], 21), randn(&[4], 22)], |g, x| Ok(vec![g.bias_add(x[0], x[1])?]))
            .wrt(&[1]),
        case("layer_norm wrt beta", vec![randn(&[2, 4], 23), randn(&[4], 24), randn(&[4], 25)], |g, x| {
            Ok(vec![g.layer_norm(x[0], x[1], x[2], 1e-3)?])
        })
        .wrt(&[2]),
        case(
            "batch_norm wrt offset",
            vec![randn(&[2, 4], 26), randn(&[4], 27), unif(&[4], 0.5, 2.0, 28), randn(&[4], 29), randn(&[4], 30)],
            |g, x| Ok(vec![g.batch_norm(x[0], x[1], x[2], x[3], x[4], 1e-3)?]),
        )
        .wrt(&[3]),
    ] {
        check(&c);
    }
}

#[test]
fn sparse_labels_get_no_gradient() {
    let mut g = Graph::new();
    let l = g.input("l", DType::F64, [2, 3]);
    let y = g.input("y", DType::I64, [2]);
    let loss = g.sparse_softmax_cross_entropy(y, l).unwrap();
    let s = g.sum_all(loss).unwrap();
    let d = pfor::autodiff::gradients_with(&mut g, &[s], &[l], None).unwrap();
    let lv = Tensor::from_vec(&[2, 3], vec![0.0f64, 0.0, 0.0, 1.0, 2.0, 3.0]).unwrap();
    let out = run_once(&g, &[d[0].unwrap()], &[(l, lv), (y, Tensor::vec1(&[1i64, 2]))]).unwrap();
    let got = out[0].to_f64_vec();
    let e: Vec<f64> = [1.0f64, 2.0, 3.0].iter().map(|v| v.exp()).collect();
    let z: f64 = e.iter().sum();
    let want = [1.0 / 3.0, 1.0 / 3.0 - 1.0, 1.0 / 3.0, e[0] / z, e[1] / z, e[2] / z - 1.0];
    for (a, b) in got.iter().zip(want) {
        assert!((a - b).abs() < 1e-12, "{got:?} vs {want:?}");
    }
    // asking for the labels' gradient is a clear error, not a silent zero
    assert!(pfor::autodiff::gradients(&mut g, &[s], &[y], None).is_err());
}
