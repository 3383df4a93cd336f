//! Value tests for the nn family (expected values written literally or from closed forms).

use crate::common::*;
use pfor::prelude::*;

/// softmax([1, 2, 3]) and its log.
const SM123: [f64; 3] = [0.09003057317038046, 0.24472847105479764, 0.6652409557748218];
const LSM123: [f64; 3] = [-2.40760596444438, -1.4076059644443804, -0.40760596444438046];

fn both_dtypes(f: impl Fn(DType, f64)) {
    f(DType::F64, 1e-12);
    f(DType::F32, 1e-5);
}

/// Build a graph of constants, apply `f`, evaluate, returning the error if any.
fn try_apply(ins: Vec<Tensor>, f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<ValueId>) -> Result<Tensor> {
    let mut g = Graph::new();
    let vs: Vec<ValueId> = ins.into_iter().map(|t| g.constant(t)).collect();
    let y = f(&mut g, &vs)?;
    Ok(run_recorded(&g, &[y], &[])?.remove(0))
}

fn apply(ins: Vec<Tensor>, f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<ValueId>) -> Tensor {
    try_apply(ins, f).unwrap()
}

#[test]
fn softmax_and_log_softmax_values() {
    both_dtypes(|dt, tol| {
        let x = f64t(&[3], &[1.0, 2.0, 3.0]).cast(dt);
        assert_close(&apply1(x.clone(), |g, x| g.softmax(x, -1)), &f64t(&[3], &SM123).cast(dt), tol);
        assert_close(&apply1(x, |g, x| g.log_softmax(x, 0)), &f64t(&[3], &LSM123).cast(dt), tol);
        // Two rows: shift invariance and a uniform row.
        let x = f64t(&[2, 3], &[11.0, 12.0, 13.0, 5.0, 5.0, 5.0]).cast(dt);
        let third = 1.0 / 3.0;
        let want = f64t(&[2, 3], &[SM123[0], SM123[1], SM123[2], third, third, third]).cast(dt);
        assert_close(&apply1(x, |g, x| g.softmax(x, 1)), &want, tol);
    });
}

#[test]
fn softmax_large_logits_are_stable() {
    both_dtypes(|dt, tol| {
        let x = f64t(&[3], &[1000.0, 1001.0, 1002.0]).cast(dt);
        assert_close(&apply1(x.clone(), |g, x| g.softmax(x, -1)), &f64t(&[3], &SM123).cast(dt), tol);
        assert_close(&apply1(x, |g, x| g.log_softmax(x, -1)), &f64t(&[3], &LSM123).cast(dt), 1e-4);
        let x = f64t(&[2], &[-1000.0, 1000.0]).cast(dt);
        assert_close(&apply1(x.clone(), |g, x| g.softmax(x, 0)), &f64t(&[2], &[0.0, 1.0]).cast(dt), tol);
        assert_close(&apply1(x, |g, x| g.log_softmax(x, 0)), &f64t(&[2], &[-2000.0, 0.0]).cast(dt), tol);
        // Cross-entropies with huge logits stay finite.
        let logits = f64t(&[1, 3], &[1000.0, 1001.0, 1002.0]).cast(dt);
        let onehot = f64t(&[1, 3], &[1.0, 0.0, 0.0]).cast(dt);
        let got = apply(vec![logits.clone(), onehot], |g, v| g.softmax_cross_entropy(v[1], v[0]));
        assert_close(&got, &f64t(&[1], &[-LSM123[0]]).cast(dt), 1e-4);
        let got = apply(vec![logits, i64t(&[1], &[1])], |g, v| g.sparse_softmax_cross_entropy(v[1], v[0]));
        assert_close(&got, &f64t(&[1], &[-LSM123[1]]).cast(dt), 1e-4);
    });
}

#[test]
fn softmax_axis_variants() {
    // Columns [1, 3] and [2, 2] along axis 0.
    let (a, b) = (0.11920292202211755, 0.8807970779778823);
    let x = f64t(&[2, 2], &[1.0, 2.0, 3.0, 2.0]);
    let want = f64t(&[2, 2], &[a, 0.5, b, 0.5]);
    assert_close(&apply1(x.clone(), |g, x| g.softmax(x, 0)), &want, 1e-12);
    assert_close(&apply1(x.clone(), |g, x| g.softmax(x, -2)), &want, 1e-12);
    let want_log = f64t(&[2, 2], &[a.ln(), 0.5f64.ln(), b.ln(), 0.5f64.ln()]);
    assert_close(&apply1(x.clone(), |g, x| g.log_softmax(x, -2)), &want_log, 1e-12);
    // Rows [1, 2] and [3, 2] along axis 1 / -1: sigmoid(-1), sigmoid(1).
    let (c, d) = (0.2689414213699951, 0.7310585786300049);
    let want = f64t(&[2, 2], &[c, d, d, c]);
    assert_close(&apply1(x.clone(), |g, x| g.softmax(x, 1)), &want, 1e-12);
    assert_close(&apply1(x, |g, x| g.softmax(x, -1)), &want, 1e-12);
    // Middle axis of a [2, 2, 2] tensor: pairs (x[i,0,k], x[i,1,k]).
    let x = f64t(&[2, 2, 2], &[1.0, 0.0, 3.0, 0.0, 5.0, 7.0, 5.0, 5.0]);
    let want = f64t(&[2, 2, 2], &[1.0 - b, 0.5, b, 0.5, 0.5, b, 0.5, 1.0 - b]);
    assert_close(&apply1(x, |g, x| g.softmax(x, 1)), &want, 1e-12);
    // A non-standard-layout input (transposed): softmax over its last axis.
    let t = ndarray::Array2::from_shape_vec((2, 2), vec![1.0, 2.0, 3.0, 2.0]).unwrap().reversed_axes();
    let want = f64t(&[2, 2], &[1.0 - b, b, 0.5, 0.5]);
    assert_close(&apply1(Tensor::from_array(t), |g, x| g.softmax(x, -1)), &want, 1e-12);
}

#[test]
fn softmax_cross_entropy_values() {
    both_dtypes(|dt, tol| {
        let logits = f64t(&[3, 3], &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 3.0, 1.0, 2.0]).cast(dt);
        // One-hot labels give -log p; soft labels a weighted sum.
        let labels = f64t(&[3, 3], &[0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.5, 0.0, 0.5]).cast(dt);
        let want = f64t(&[3], &[-LSM123[2], -LSM123[0], -0.5 * (LSM123[2] + LSM123[1])]).cast(dt);
        assert_close(&apply(vec![logits, labels], |g, v| g.softmax_cross_entropy(v[1], v[0])), &want, tol);
    });
    // Rank 1 logits give a scalar loss; a -inf logit with zero label is harmless.
    let logits = f64t(&[4], &[1.0, 2.0, 3.0, f64::NEG_INFINITY]);
    let labels = f64t(&[4], &[0.0, 1.0, 0.0, 0.0]);
    let got = apply(vec![logits, labels], |g, v| g.softmax_cross_entropy(v[1], v[0]));
    assert_close(&got, &f64t(&[], &[-LSM123[1]]), 1e-12);
    // Batch [2, 1] of 3 classes.
    let logits = f64t(&[2, 1, 3], &[1.0, 2.0, 3.0, 2.0, 3.0, 1.0]);
    let labels = f64t(&[2, 1, 3], &[1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
    let got = apply(vec![logits, labels], |g, v| g.softmax_cross_entropy(v[1], v[0]));
    assert_close(&got, &f64t(&[2, 1], &[-LSM123[0], -LSM123[1]]), 1e-12);
}

#[test]
fn sparse_softmax_cross_entropy_values() {
    both_dtypes(|dt, tol| {
        let logits = f64t(&[3, 3], &[1.0, 2.0, 3.0, 3.0, 2.0, 1.0, 2.0, 3.0, 1.0]).cast(dt);
        let labels = i64t(&[3], &[2, 1, 2]);
        let want = f64t(&[3], &[-LSM123[2], -LSM123[1], -LSM123[0]]).cast(dt);
        assert_close(&apply(vec![logits, labels], |g, v| g.sparse_softmax_cross_entropy(v[1], v[0])), &want, tol);
    });
    let got =
        apply(vec![f64t(&[3], &[1.0, 2.0, 3.0]), i64t(&[], &[0])], |g, v| g.sparse_softmax_cross_entropy(v[1], v[0]));
    assert_close(&got, &f64t(&[], &[-LSM123[0]]), 1e-12);
    // Empty batch.
    let got = apply(vec![f64t(&[0, 3], &[]), i64t(&[0], &[])], |g, v| g.sparse_softmax_cross_entropy(v[1], v[0]));
    assert_eq!(got, f64t(&[0], &[]));
}

#[test]
fn sparse_label_out_of_range_is_a_runtime_error() {
    for bad in [3i64, -1] {
        let e = try_apply(vec![f64t(&[2, 3], &[0.0; 6]), i64t(&[2], &[0, bad])], |g, v| {
            g.sparse_softmax_cross_entropy(v[1], v[0])
        })
        .unwrap_err();
        assert!(
            matches!(e.root(), Error::IndexOutOfRange { op, index, bound: 3 } if op == "sparse_softmax_cross_entropy" && *index == bad),
            "{e}"
        );
        assert!(e.to_string().contains("sparse_softmax_cross_entropy"), "{e}");
    }
}

#[test]
fn sigmoid_cross_entropy_values() {
    let l = |x: f64| (1.0 + (-x).exp()).ln(); // -log sigmoid(x)
    both_dtypes(|dt, tol| {
        let x = f64t(&[2, 2], &[0.0, 2.0, -3.0, 1.0]).cast(dt);
        let z = f64t(&[2, 2], &[0.5, 1.0, 0.0, 0.25]).cast(dt);
        // z * -log(s(x)) + (1 - z) * -log(1 - s(x)), with 1 - s(x) = s(-x).
        let want = f64t(&[2, 2], &[2f64.ln(), l(2.0), l(3.0), 0.25 * l(1.0) + 0.75 * l(-1.0)]).cast(dt);
        assert_close(&apply(vec![x, z], |g, v| g.sigmoid_cross_entropy(v[1], v[0])), &want, tol);
        // Large logits: no overflow.
        let x = f64t(&[3], &[1000.0, -1000.0, 1000.0]).cast(dt);
        let z = f64t(&[3], &[0.0, 1.0, 1.0]).cast(dt);
        let want = f64t(&[3], &[1000.0, 1000.0, 0.0]).cast(dt);
        assert_close(&apply(vec![x, z], |g, v| g.sigmoid_cross_entropy(v[1], v[0])), &want, tol);
    });
}

#[test]
fn l2_loss_values() {
    both_dtypes(|dt, tol| {
        assert_close(
            &apply1(f64t(&[3], &[1.0, 2.0, 3.0]).cast(dt), |g, x| g.l2_loss(x)),
            &f64t(&[], &[7.0]).cast(dt),
            tol,
        );
        let x = f64t(&[2, 2], &[1.0, -2.0, 3.0, 4.0]).cast(dt);
        assert_close(&apply1(x, |g, x| g.l2_loss(x)), &f64t(&[], &[15.0]).cast(dt), tol);
    });
    assert_eq!(apply1(f64t(&[0], &[]), |g, x| g.l2_loss(x)), f64t(&[], &[0.0]));
    assert_eq!(apply1(f64t(&[], &[-4.0]), |g, x| g.l2_loss(x)), f64t(&[], &[8.0]));
}

#[test]
fn layer_norm_values() {
    let r = 1.2247448713915892; // 1 / sqrt(2/3)
    both_dtypes(|dt, tol| {
        let x = f64t(&[3], &[1.0, 2.0, 3.0]).cast(dt);
        let gamma = f64t(&[3], &[1.0, 2.0, 3.0]).cast(dt);
        let beta = f64t(&[3], &[0.5, 0.0, -1.0]).cast(dt);
        let got = apply(vec![x, gamma, beta], |g, v| g.layer_norm(v[0], v[1], v[2], 0.0));
        assert_close(&got, &f64t(&[3], &[-r + 0.5, 0.0, 3.0 * r - 1.0]).cast(dt), tol);
    });
    // epsilon = 1: var + eps = 5/3; two rows (the second constant: normalizes to 0).
    let s = 0.7745966692414834; // sqrt(3/5)
    let x = f64t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 4.0, 4.0]);
    let got =
        apply(vec![x, f64t(&[3], &[1.0; 3]), f64t(&[3], &[0.0, 1.0, 0.0])], |g, v| g.layer_norm(v[0], v[1], v[2], 1.0));
    assert_close(&got, &f64t(&[2, 3], &[-s, 1.0, s, 0.0, 1.0, 0.0]), 1e-12);
    // Transposed (non-standard layout) input: rows [1, 2, 3] and [9, 7, 8].
    let t = ndarray::Array2::from_shape_vec((3, 2), vec![1.0, 9.0, 2.0, 7.0, 3.0, 8.0]).unwrap().reversed_axes();
    let got = apply(vec![Tensor::from_array(t), f64t(&[3], &[1.0; 3]), f64t(&[3], &[0.0; 3])], |g, v| {
        g.layer_norm(v[0], v[1], v[2], 0.0)
    });
    assert_close(&got, &f64t(&[2, 3], &[-r, 0.0, r, r, -r, 0.0]), 1e-12);
}

#[test]
fn batch_norm_values() {
    both_dtypes(|dt, tol| {
        let x = f64t(&[2, 2], &[1.0, 2.0, 3.0, 4.0]).cast(dt);
        let mean = f64t(&[2], &[2.0, 3.0]).cast(dt);
        let var = f64t(&[2], &[4.0, 0.25]).cast(dt);
        let offset = f64t(&[2], &[1.0, -1.0]).cast(dt);
        let scale = f64t(&[2], &[2.0, 1.0]).cast(dt);
        let got = apply(vec![x, mean, var, offset, scale], |g, v| g.batch_norm(v[0], v[1], v[2], v[3], v[4], 0.0));
        assert_close(&got, &f64t(&[2, 2], &[0.0, -3.0, 2.0, 1.0]).cast(dt), tol);
    });
    // epsilon: (5 - 1) / sqrt(3 + 1) = 2; rank-3 input with one channel.
    let got = apply(
        vec![
            f64t(&[1, 2, 1], &[5.0, 1.0]),
            f64t(&[1], &[1.0]),
            f64t(&[1], &[3.0]),
            f64t(&[1], &[0.0]),
            f64t(&[1], &[1.0]),
        ],
        |g, v| g.batch_norm(v[0], v[1], v[2], v[3], v[4], 1.0),
    );
    assert_close(&got, &f64t(&[1, 2, 1], &[2.0, 0.0]), 1e-12);
}

#[test]
fn bias_add_values() {
    both_dtypes(|dt, tol| {
        let x = f64t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).cast(dt);
        let b = f64t(&[3], &[10.0, 20.0, -1.0]).cast(dt);
        let want = f64t(&[2, 3], &[11.0, 22.0, 2.0, 14.0, 25.0, 5.0]).cast(dt);
        assert_close(&apply(vec![x, b], |g, v| g.bias_add(v[0], v[1])), &want, tol);
    });
    let got = apply(vec![f64t(&[2], &[1.0, 2.0]), f64t(&[2], &[0.5, 0.5])], |g, v| g.bias_add(v[0], v[1]));
    assert_eq!(got, f64t(&[2], &[1.5, 2.5]));
    let got = apply(vec![f64t(&[0, 2], &[]), f64t(&[2], &[0.5, 0.5])], |g, v| g.bias_add(v[0], v[1]));
    assert_eq!(got, f64t(&[0, 2], &[]));
}

#[test]
fn empty_rows_and_large_parallel_rows() {
    assert_eq!(apply1(f64t(&[0, 3], &[]), |g, x| g.softmax(x, -1)), f64t(&[0, 3], &[]));
    assert_eq!(apply1(f64t(&[2, 0], &[]), |g, x| g.log_softmax(x, 1)), f64t(&[2, 0], &[]));
    let got = apply(vec![f64t(&[2, 0], &[]), f64t(&[2, 0], &[])], |g, v| g.softmax_cross_entropy(v[1], v[0]));
    assert_eq!(got, f64t(&[2], &[0.0, 0.0]));
    // Above the parallel threshold: every row of a constant-row tensor has the uniform softmax.
    let rows = pfor::ops::unary::PAR_THRESHOLD / 4 + 1;
    let got = apply1(Tensor::zeros(DType::F32, &[rows, 4]).unwrap(), |g, x| g.softmax(x, -1));
    assert!(got.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.25));
}

fn root_of(e: Error) -> Error {
    e.root().clone()
}

#[test]
fn nn_build_errors_name_the_op() {
    let mut g = Graph::new();
    let x = g.constant(f64t(&[2, 3], &[0.0; 6]));
    let xi = g.constant(i64t(&[2, 3], &[0; 6]));
    let x32 = g.constant(f32t(&[3], &[0.0; 3]));
    let b2 = g.constant(f64t(&[2], &[0.0; 2]));
    let b3 = g.constant(f64t(&[3], &[0.0; 3]));
    let s = g.constant(f64t(&[], &[0.0]));

    let e = g.softmax(x, 2).unwrap_err();
    assert!(matches!(e.root(), Error::Axis { op, axis: 2, rank: 2 } if op == "softmax"), "{e}");
    assert!(matches!(g.log_softmax(x, -3).unwrap_err().root(), Error::Axis { op, .. } if op == "log_softmax"));
    assert!(matches!(g.softmax(s, 0).unwrap_err().root(), Error::Axis { .. }));
    let e = g.softmax(xi, -1).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::I64, .. } if op == "softmax"), "{e}");

    let e = g.bias_add(x, b2).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "bias_add"), "{e}");
    assert!(e.to_string().contains("[2]") && e.to_string().contains("[2,3]"), "{e}");
    assert!(matches!(g.bias_add(x, x32).unwrap_err().root(), Error::DType { got: DType::F32, .. }));
    assert!(matches!(g.bias_add(s, b3).unwrap_err().root(), Error::Shape { .. }));

    let e = g.softmax_cross_entropy(b3, x).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "softmax_cross_entropy"), "{e}");
    let e = g.sparse_softmax_cross_entropy(b2, x).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::F64, .. } if op == "sparse_softmax_cross_entropy"));
    let l3 = g.constant(i64t(&[3], &[0; 3]));
    let e = g.sparse_softmax_cross_entropy(l3, x).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "sparse_softmax_cross_entropy"), "{e}");
    let e = g.sigmoid_cross_entropy(b3, x).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "sigmoid_cross_entropy"), "{e}");
    assert!(matches!(g.l2_loss(xi).unwrap_err().root(), Error::DType { op, .. } if op == "l2_loss"));

    let e = root_of(g.layer_norm(x, b3, b3, -1.0).unwrap_err());
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("layer_norm")), "{e}");
    let e = g.layer_norm(x, b3, b2, 1e-5).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "layer_norm"), "{e}");
    assert!(e.to_string().contains("beta"), "{e}");
    let e = root_of(g.batch_norm(x, b3, b3, b3, b3, f64::NAN).unwrap_err());
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("batch_norm")), "{e}");
    let e = g.batch_norm(x, b3, b3, b3, b2, 1e-3).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "batch_norm"), "{e}");
    assert!(matches!(g.batch_norm(x, b3, b3, b3, b3, 1e-3,).map(|_| ()), Ok(())));
    let m = g.constant(f64t(&[1, 3], &[0.0; 3]));
    assert!(matches!(g.batch_norm(x, m, b3, b3, b3, 1e-3).unwrap_err().root(), Error::Shape { .. }));
}

#[test]
fn dynamic_dims_are_checked_at_run_time() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [Dim::unknown(), Dim::unknown()]);
    let b = g.constant(f64t(&[3], &[1.0, 2.0, 3.0]));
    let y = g.bias_add(x, b).unwrap();
    assert_eq!(g.shape(y).unwrap(), Shape::from([Dim::unknown(), Dim::fixed(3)]));
    let ok = run_recorded(&g, &[y], &[(x, f64t(&[1, 3], &[0.0; 3]))]).unwrap();
    assert_eq!(ok[0], f64t(&[1, 3], &[1.0, 2.0, 3.0]));
    let e = run_recorded(&g, &[y], &[(x, f64t(&[1, 2], &[0.0; 2]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "bias_add"), "{e}");

    let mut g = Graph::new();
    let logits = g.input("l", DType::F32, [Dim::unknown(), Dim::fixed(2)]);
    let labels = g.input("z", DType::I64, [Dim::unknown()]);
    let y = g.sparse_softmax_cross_entropy(labels, logits).unwrap();
    let e = run_recorded(&g, &[y], &[(logits, f32t(&[2, 2], &[0.0; 4])), (labels, i64t(&[3], &[0; 3]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "sparse_softmax_cross_entropy"), "{e}");
}

#[test]
fn nn_display() {
    let mut g = Graph::new();
    let x = g.constant(f64t(&[3], &[0.0; 3]));
    let y = g.softmax(x, -1).unwrap();
    let z = g.layer_norm(x, x, x, 0.5).unwrap();
    assert_eq!(g.node(y.node).unwrap().op.to_string(), "softmax{axis=-1}");
    assert_eq!(g.node(z.node).unwrap().op.to_string(), "layer_norm{epsilon=0.5}");
}

#[test]
fn cross_entropies_take_labels_then_logits() {
    // labels one-hot on class 1, logits [1, 2, 3]: the loss is -log_softmax(logits)[1]
    // (the swapped call, -sum(logits * log_softmax(labels)), is a different number)
    let labels = f64t(&[3], &[0.0, 1.0, 0.0]);
    let logits = f64t(&[3], &[1.0, 2.0, 3.0]);
    let want = f64t(&[], &[-LSM123[1]]);
    let got = apply(vec![labels.clone(), logits.clone()], |g, v| g.softmax_cross_entropy(v[0], v[1]));
    assert_close(&got, &want, 1e-12);
    let got = apply(vec![i64t(&[], &[1]), logits.clone()], |g, v| g.sparse_softmax_cross_entropy(v[0], v[1]));
    assert_close(&got, &want, 1e-12);
    // sigmoid: labels z, logits x: max(x, 0) - x z + log1p(exp(-|x|)); at z = 1, x = 2: log1p(e^-2)
    let got = apply(vec![f64t(&[], &[1.0]), f64t(&[], &[2.0])], |g, v| g.sigmoid_cross_entropy(v[0], v[1]));
    assert_close(&got, &f64t(&[], &[(-2.0f64).exp().ln_1p()]), 1e-12);
}

#[test]
fn layer_norm_broadcasts_gamma_and_beta_like_keras() {
    // x [2, 3]; gamma / beta of shapes [], [1], [3], [1, 3], [2, 3] against the explicit formula
    let x = f64t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 6.0, 11.0]);
    let xhat = apply(vec![x.clone(), f64t(&[3], &[1.0; 3]), f64t(&[3], &[0.0; 3])], |g, v| {
        g.layer_norm(v[0], v[1], v[2], 1e-3)
    });
    let shapes: [&[usize]; 5] = [&[], &[1], &[3], &[1, 3], &[2, 3]];
    for (i, gs) in shapes.iter().enumerate() {
        let bs = shapes[(i + 2) % shapes.len()];
        let gamma = Tensor::randn_f64(gs, i as u64).unwrap();
        let beta = Tensor::randn_f64(bs, 10 + i as u64).unwrap();
        let got = apply(vec![x.clone(), gamma.clone(), beta.clone()], |g, v| g.layer_norm(v[0], v[1], v[2], 1e-3));
        let want = apply(vec![xhat.clone(), gamma, beta], |g, v| {
            let m = g.mul(v[0], v[1])?;
            g.add(m, v[2])
        });
        assert_close(&got, &want, 1e-12);
    }
    // a parameter that would grow x's shape is an error naming both shapes
    let mut g = Graph::new();
    let xv = g.constant(x);
    let big = g.constant(f64t(&[4, 1, 3], &[1.0; 12]));
    let b3 = g.constant(f64t(&[3], &[0.0; 3]));
    let e = g.layer_norm(xv, big, b3, 1e-3).unwrap_err().to_string();
    assert!(e.contains("layer_norm") && e.contains("gamma") && e.contains("[4,1,3]") && e.contains("[2,3]"), "{e}");
}
