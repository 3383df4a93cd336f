//! Value tests for the random family: reproducibility, the key rule (a key array of shape K
//! gives rows equal to the scalar-key runs), statistics, ranges and errors.

use crate::common::*;
use pfor::ops::RandomOp;
use pfor::prelude::*;
use pfor::tensor::{counter_uniform, mix_key};

const N: usize = 20_000;

/// Build a graph of constants, apply `f`, evaluate.
fn try_apply(ins: Vec<Tensor>, f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<ValueId>) -> Result<Tensor> {
    let mut g = Graph::new();
    let vs: Vec<ValueId> = ins.into_iter().map(|t| g.constant(t)).collect();
    let y = f(&mut g, &vs)?;
    Ok(run_recorded(&g, &[y], &[])?.remove(0))
}

fn apply(ins: Vec<Tensor>, f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<ValueId>) -> Tensor {
    try_apply(ins, f).unwrap()
}

fn key(k: i64) -> Tensor {
    i64t(&[], &[k])
}

fn uniform(k: Tensor, shape: &[usize], dt: DType, low: f64, high: f64) -> Tensor {
    apply(vec![k], |g, v| g.random_uniform(v[0], shape, dt, low, high))
}

fn normal(k: Tensor, shape: &[usize], dt: DType, mean: f64, std: f64) -> Tensor {
    apply(vec![k], |g, v| g.random_normal(v[0], shape, dt, mean, std))
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (m, (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n).sqrt())
}

#[test]
fn same_key_same_values_different_key_different_values() {
    for dt in [DType::F32, DType::F64] {
        let a = uniform(key(42), &[2, 3], dt, 0.0, 1.0);
        assert_eq!(a, uniform(key(42), &[2, 3], dt, 0.0, 1.0));
        assert_eq!(a.shape(), &[2, 3]);
        assert_eq!(a.dtype(), dt);
        let b = uniform(key(43), &[2, 3], dt, 0.0, 1.0);
        assert!(a.to_f64_vec().iter().zip(b.to_f64_vec()).all(|(x, y)| *x != y), "{a} {b}");
        let a = normal(key(7), &[5], dt, 0.0, 1.0);
        assert_eq!(a, normal(key(7), &[5], dt, 0.0, 1.0));
        assert_ne!(a, normal(key(8), &[5], dt, 0.0, 1.0));
    }
    // Element (k, c) is counter c of stream k, mapped to [low, high).
    let got = uniform(i64t(&[2], &[3, -1]), &[2], DType::F64, 2.0, 4.0);
    let want: Vec<f64> = [(3u64, 0u64), (3, 1), (u64::MAX, 0), (u64::MAX, 1)]
        .iter()
        .map(|&(k, c)| 2.0 + 2.0 * counter_uniform(k, c))
        .collect();
    assert_eq!(got, f64t(&[2, 2], &want));
}

/// Row `r` of a generator fed keys `[n]` equals the generator fed the scalar `keys[r]`.
#[test]
fn key_rule_rows_equal_scalar_key_runs() {
    let ks = [5i64, -7, 11];
    let keys = i64t(&[3], &ks);
    let check = |batched: Tensor, single: &dyn Fn(i64, usize) -> Tensor| {
        assert_eq!(batched.shape()[0], 3);
        for (r, &k) in ks.iter().enumerate() {
            assert_eq!(batched.index_axis0(r).unwrap(), single(k, r), "row {r}");
        }
    };
    check(uniform(keys.clone(), &[2, 2], DType::F32, -1.0, 1.0), &|k, _| {
        uniform(key(k), &[2, 2], DType::F32, -1.0, 1.0)
    });
    check(normal(keys.clone(), &[4], DType::F64, 1.0, 3.0), &|k, _| normal(key(k), &[4], DType::F64, 1.0, 3.0));
    let bern = |k: Tensor| apply(vec![k, f64t(&[], &[0.5])], |g, v| g.random_bernoulli(v[0], v[1], &[6]));
    check(bern(keys.clone()), &|k, _| bern(key(k)));
    let logits = f64t(&[3, 4], &[0.0, 1.0, 2.0, 3.0, 1.0, 1.0, 1.0, 1.0, -1.0, 0.0, 5.0, 0.5]);
    let got = apply(vec![keys.clone(), logits.clone()], |g, v| g.random_categorical(v[0], v[1], 8));
    check(got, &|k, r| apply(vec![key(k), logits.index_axis0(r).unwrap()], |g, v| g.random_categorical(v[0], v[1], 8)));
    let x = Tensor::randn_f64(&[3, 10], 9).unwrap();
    let got = apply(vec![x.clone(), keys.clone()], |g, v| g.dropout(v[0], v[1], 0.5));
    check(got, &|k, r| apply(vec![x.index_axis0(r).unwrap(), key(k)], |g, v| g.dropout(v[0], v[1], 0.5)));
    // Keys of shape [3, 1] give output [3, 1, ...] with the same rows.
    let got = uniform(i64t(&[3, 1], &ks), &[2], DType::F64, 0.0, 1.0);
    assert_eq!(got.shape(), &[3, 1, 2]);
    assert_eq!(got.reshape(&[3, 2]).unwrap(), uniform(keys.clone(), &[2], DType::F64, 0.0, 1.0));
    // Dropout with a key per prefix row of a rank-3 x: row-major counters over the rest.
    let x = Tensor::ones(DType::F64, &[2, 3, 4]).unwrap();
    let k2 = i64t(&[2], &[1, 2]);
    let got = apply(vec![x.clone(), k2], |g, v| g.dropout(v[0], v[1], 0.5));
    let one = Tensor::ones(DType::F64, &[3, 4]).unwrap();
    for (r, k) in [1, 2].into_iter().enumerate() {
        let want = apply(vec![one.clone(), key(k)], |g, v| g.dropout(v[0], v[1], 0.5));
        assert_eq!(got.index_axis0(r).unwrap(), want);
    }
}

#[test]
fn large_outputs_use_the_same_streams() {
    // 3 * n is above the parallel threshold, each row alone is not.
    let n = pfor::ops::unary::PAR_THRESHOLD / 2 + 3;
    let got = uniform(i64t(&[3], &[1, 2, 3]), &[n], DType::F32, 0.0, 1.0);
    for r in 0..3 {
        assert_eq!(got.index_axis0(r).unwrap(), uniform(key(r as i64 + 1), &[n], DType::F32, 0.0, 1.0));
    }
    let x = Tensor::ones(DType::F32, &[3, n]).unwrap();
    let got = apply(vec![x, i64t(&[3], &[1, 2, 3])], |g, v| g.dropout(v[0], v[1], 0.3));
    let row = Tensor::ones(DType::F32, &[n]).unwrap();
    for r in 0..3 {
        let want = apply(vec![row.clone(), key(r as i64 + 1)], |g, v| g.dropout(v[0], v[1], 0.3));
        assert_eq!(got.index_axis0(r).unwrap(), want);
    }
}

#[test]
fn uniform_range_and_mean() {
    for dt in [DType::F32, DType::F64] {
        let v = uniform(key(1), &[N], dt, 2.0, 4.0).to_f64_vec();
        assert!(v.iter().all(|&x| (2.0..4.0).contains(&x)));
        let (m, s) = mean_std(&v);
        assert!((m - 3.0).abs() < 0.02, "mean {m}");
        assert!((s - 2.0 / 12f64.sqrt()).abs() < 0.02, "std {s}");
        let v = uniform(key(2), &[N], dt, -1.0, 0.0).to_f64_vec();
        assert!(v.iter().all(|&x| (-1.0..0.0).contains(&x)));
    }
    // A range one ulp wide: rounding up to `high` is excluded, so every value is `low`.
    let v = uniform(key(3), &[1000], DType::F64, 1.0, 1.0 + f64::EPSILON);
    assert!(v.to_f64_vec().iter().all(|&x| x == 1.0));
    let v = uniform(key(3), &[1000], DType::F32, 1.0, 1.0 + f32::EPSILON as f64);
    assert!(v.to_vec::<f32>().unwrap().iter().all(|&x| x == 1.0));
    // Scalar shape and empty shape.
    assert_eq!(uniform(key(3), &[], DType::F64, 0.0, 1.0).shape(), &[] as &[usize]);
    assert_eq!(uniform(i64t(&[2], &[1, 2]), &[0], DType::F64, 0.0, 1.0), f64t(&[2, 0], &[]));
}

#[test]
fn normal_statistics() {
    for dt in [DType::F32, DType::F64] {
        let v = normal(key(11), &[N], dt, 0.0, 1.0).to_f64_vec();
        let (m, s) = mean_std(&v);
        assert!(m.abs() < 0.03, "mean {m}");
        assert!((s - 1.0).abs() < 0.03, "std {s}");
        let v = normal(key(12), &[N / 2, 2], dt, 5.0, 2.0).to_f64_vec();
        let (m, s) = mean_std(&v);
        assert!((m - 5.0).abs() < 0.06, "mean {m}");
        assert!((s - 2.0).abs() < 0.06, "std {s}");
    }
    // stddev 0 gives the mean exactly.
    assert_eq!(normal(key(1), &[3], DType::F64, 1.5, 0.0), f64t(&[3], &[1.5; 3]));
}

/// The whole distribution, not just two moments: the Kolmogorov–Smirnov distance to the
/// normal CDF over 200,000 draws (below the 0.1 % critical value 1.95/√N), and the mass of
/// the tail beyond the ziggurat's base layer (|z| > 3.4426: expected 0.0576 %, drawn by its
/// own rejection path) and beyond 4 (0.0063 %).
#[test]
fn normal_distribution_matches_the_cdf_and_its_tail() {
    const M: usize = 200_000;
    let mut v = normal(key(21), &[M], DType::F64, 0.0, 1.0).to_f64_vec();
    v.sort_by(f64::total_cmp);
    let cdf = |x: f64| 0.5 * (1.0 + libm::erf(x / std::f64::consts::SQRT_2));
    let d = v.iter().enumerate().fold(0.0f64, |d, (i, &x)| {
        let p = cdf(x);
        d.max((p - i as f64 / M as f64).abs()).max(((i + 1) as f64 / M as f64 - p).abs())
    });
    assert!(d < 1.95 / (M as f64).sqrt(), "KS distance {d}");
    let beyond = |t: f64| v.iter().filter(|x| x.abs() > t).count();
    let (tail, far) = (beyond(3.442_619_855_899), beyond(4.0));
    assert!((80..=150).contains(&tail), "{tail} of {M} beyond the base layer (expected ~115)");
    assert!((3..=30).contains(&far), "{far} of {M} beyond 4 (expected ~13)");
    // Both signs in the tail.
    assert!(v[0] < -3.44 && v[M - 1] > 3.44, "extremes {} {}", v[0], v[M - 1]);
}

#[test]
fn bernoulli_rate() {
    let b = apply(vec![key(5), f32t(&[], &[0.3])], |g, v| g.random_bernoulli(v[0], v[1], &[N]));
    assert_eq!(b.dtype(), DType::Bool);
    let rate = b.to_vec::<bool>().unwrap().iter().filter(|&&x| x).count() as f64 / N as f64;
    assert!((rate - 0.3).abs() < 0.02, "rate {rate}");
    // p = 0 and p = 1 are exact; the output shape is K ++ shape.
    let b = apply(vec![i64t(&[2], &[1, 2]), f64t(&[], &[0.0])], |g, v| g.random_bernoulli(v[0], v[1], &[3]));
    assert_eq!(b, boolt(&[2, 3], &[false; 6]));
    let b = apply(vec![key(1), f64t(&[], &[1.0])], |g, v| g.random_bernoulli(v[0], v[1], &[2, 2]));
    assert_eq!(b, boolt(&[2, 2], &[true; 4]));
}

#[test]
fn categorical_frequencies_match_softmax() {
    let logits = [1.0f64, 2.0, 3.0, f64::NEG_INFINITY];
    let p = [0.09003057317038046, 0.24472847105479764, 0.6652409557748218, 0.0];
    for dt in [DType::F32, DType::F64] {
        let l = f64t(&[4], &logits).cast(dt);
        let s = apply(vec![key(9), l], |g, v| g.random_categorical(v[0], v[1], N));
        assert_eq!(s.shape(), &[N]);
        let s = s.to_vec::<i64>().unwrap();
        for (c, &pc) in p.iter().enumerate() {
            let f = s.iter().filter(|&&x| x == c as i64).count() as f64 / N as f64;
            assert!((f - pc).abs() < 0.02, "class {c}: {f} vs {pc}");
        }
        assert_eq!(s.iter().filter(|&&x| x == 3).count(), 0, "zero-probability class sampled");
    }
    // Batched: row 1 always picks class 2 (the others have probability 0).
    let l = f64t(&[2, 3], &[0.0, 0.0, 0.0, f64::NEG_INFINITY, f64::NEG_INFINITY, 1.0]);
    let s = apply(vec![i64t(&[2], &[1, 2]), l], |g, v| g.random_categorical(v[0], v[1], 1000)).to_vec::<i64>().unwrap();
    assert!(s[..1000].iter().all(|&x| (0..3).contains(&x)));
    assert!(s[1000..].iter().all(|&x| x == 2));
    let f0 = s[..1000].iter().filter(|&&x| x == 0).count() as f64 / 1000.0;
    assert!((f0 - 1.0 / 3.0).abs() < 0.06, "{f0}");
    // Zero samples.
    let s = apply(vec![key(1), f64t(&[2], &[0.0, 1.0])], |g, v| g.random_categorical(v[0], v[1], 0));
    assert_eq!(s, i64t(&[0], &[]));
}

#[test]
fn dropout_keeps_and_scales() {
    for dt in [DType::F32, DType::F64] {
        let x = Tensor::full(dt, &[N], 2.0).unwrap();
        let y = apply(vec![x, key(4)], |g, v| g.dropout(v[0], v[1], 0.25)).to_f64_vec();
        let kept: Vec<f64> = y.iter().copied().filter(|&v| v != 0.0).collect();
        let frac = kept.len() as f64 / N as f64;
        assert!((frac - 0.75).abs() < 0.02, "kept {frac}");
        assert!(kept.iter().all(|&v| (v - 2.0 / 0.75).abs() < 1e-6), "kept values scale by 1/(1-rate)");
    }
    // rate 0 is the identity; values are kept at their position (x * keep / (1 - rate)).
    let x = f64t(&[2, 2], &[1.0, -2.0, 3.0, 4.0]);
    assert_eq!(apply(vec![x.clone(), key(1)], |g, v| g.dropout(v[0], v[1], 0.0)), x);
    let y = apply(vec![x.clone(), key(1)], |g, v| g.dropout(v[0], v[1], 0.5)).to_f64_vec();
    for (o, i) in y.iter().zip(x.to_f64_vec()) {
        assert!(*o == 0.0 || *o == 2.0 * i, "{o} from {i}");
    }
    // The mask of element i is `counter_uniform(key, i) >= rate`.
    let keep: Vec<f64> = (0..4).map(|c| if counter_uniform(1, c) >= 0.5 { 2.0 } else { 0.0 }).collect();
    assert_eq!(y, x.to_f64_vec().iter().zip(&keep).map(|(a, b)| a * b).collect::<Vec<_>>());
}

#[test]
fn fold_in_is_deterministic_and_broadcasts() {
    let m = |k: i64, d: i64| mix_key(k as u64, d as u64) as i64;
    let got = apply(vec![key(7), i64t(&[3], &[0, 1, 2])], |g, v| g.fold_in(v[0], v[1]));
    assert_eq!(got, i64t(&[3], &[m(7, 0), m(7, 1), m(7, 2)]));
    assert_eq!(got, apply(vec![key(7), i64t(&[3], &[0, 1, 2])], |g, v| g.fold_in(v[0], v[1])));
    let v = got.to_vec::<i64>().unwrap();
    assert!(v[0] != v[1] && v[1] != v[2] && v[0] != v[2]);
    let got = apply(vec![i64t(&[2, 1], &[1, 2]), i64t(&[2], &[10, 20])], |g, v| g.fold_in(v[0], v[1]));
    assert_eq!(got, i64t(&[2, 2], &[m(1, 10), m(1, 20), m(2, 10), m(2, 20)]));
    // Derived keys feed generators.
    let u = apply(vec![key(7), key(1)], |g, v| {
        let k = g.fold_in(v[0], v[1])?;
        g.random_uniform(k, &[2], DType::F64, 0.0, 1.0)
    });
    assert_eq!(u, uniform(key(m(7, 1)), &[2], DType::F64, 0.0, 1.0));
}

#[test]
fn statefulness() {
    let ops = [
        RandomOp::RandomUniform { shape: vec![1], dtype: DType::F32, low: 0.0, high: 1.0 },
        RandomOp::RandomNormal { shape: vec![1], dtype: DType::F32, mean: 0.0, stddev: 1.0 },
        RandomOp::RandomCategorical { num_samples: 1 },
        RandomOp::RandomBernoulli { shape: vec![] },
        RandomOp::Dropout { rate: 0.5 },
    ];
    assert!(ops.iter().all(|o| o.is_stateful() && Op::Random(o.clone()).is_stateful()));
    assert!(!RandomOp::FoldIn.is_stateful());
    assert!(!Op::Random(RandomOp::FoldIn).is_stateful());
    assert_eq!(ops[4].to_string(), "dropout{rate=0.5}");
}

#[test]
fn random_errors_name_the_op() {
    let mut g = Graph::new();
    let k = g.constant(key(1));
    let fk = g.constant(f32t(&[], &[1.0]));
    let x = g.constant(f64t(&[2, 3], &[0.0; 6]));
    let p = g.constant(f64t(&[], &[0.5]));

    for rate in [1.0, -0.1, f64::NAN, 1.5] {
        let e = g.dropout(x, k, rate).unwrap_err();
        assert!(matches!(e.root(), Error::InvalidArgument(m) if m.contains("dropout")), "{e}");
    }
    let e = g.random_uniform(fk, &[2], DType::F32, 0.0, 1.0).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, got: DType::F32, .. } if op == "random_uniform"), "{e}");
    let e = g.random_normal(fk, &[2], DType::F32, 0.0, 1.0).unwrap_err();
    assert!(matches!(e.root(), Error::DType { op, .. } if op == "random_normal"), "{e}");
    assert!(matches!(g.dropout(x, fk, 0.5).unwrap_err().root(), Error::DType { op, .. } if op == "dropout"));
    assert!(matches!(g.fold_in(fk, k).unwrap_err().root(), Error::DType { op, .. } if op == "fold_in"));
    assert!(matches!(g.fold_in(k, fk).unwrap_err().root(), Error::DType { op, .. } if op == "fold_in"));

    // Categorical: key shape must equal the batch shape of logits.
    let k3 = g.constant(i64t(&[3], &[1, 2, 3]));
    let e = g.random_categorical(k3, x, 2).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "random_categorical"), "{e}");
    assert!(e.to_string().contains("[3]") && e.to_string().contains("[2,3]"), "{e}");
    assert!(matches!(g.random_categorical(k, x, 2).unwrap_err().root(), Error::Shape { .. }));
    let s = g.constant(f64t(&[], &[0.0]));
    assert!(matches!(g.random_categorical(k, s, 2).unwrap_err().root(), Error::Shape { .. }));
    let xi = g.constant(i64t(&[3], &[0; 3]));
    assert!(matches!(g.random_categorical(k, xi, 2).unwrap_err().root(), Error::DType { .. }));

    // Dropout key must be a prefix of x's shape.
    let e = g.dropout(x, k3, 0.5).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "dropout"), "{e}");

    // Attribute validation.
    let e = g.random_uniform(k, &[2], DType::I64, 0.0, 1.0).unwrap_err();
    assert!(matches!(e.root(), Error::DType { got: DType::I64, .. }), "{e}");
    for (lo, hi) in [(1.0, 1.0), (2.0, 1.0), (0.0, f64::INFINITY)] {
        let e = g.random_uniform(k, &[2], DType::F64, lo, hi).unwrap_err();
        assert!(matches!(e.root(), Error::InvalidArgument(m) if m.contains("random_uniform")), "{e}");
    }
    let e = g.random_normal(k, &[2], DType::F64, 0.0, -1.0).unwrap_err();
    assert!(matches!(e.root(), Error::InvalidArgument(m) if m.contains("random_normal")), "{e}");
    let e = g.random_bernoulli(k, x, &[2]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "random_bernoulli"), "{e}");
    assert!(g.random_bernoulli(k, p, &[2]).is_ok());
    assert!(matches!(g.random_bernoulli(k, k, &[2]).unwrap_err().root(), Error::DType { .. }));
}

#[test]
fn random_runtime_errors() {
    // All logits -inf: no distribution to sample from.
    let l = f64t(&[2], &[f64::NEG_INFINITY; 2]);
    let e = try_apply(vec![key(1), l], |g, v| g.random_categorical(v[0], v[1], 3)).unwrap_err();
    assert!(matches!(e.root(), Error::Numerical { op, .. } if op == "random_categorical"), "{e}");
    // A dynamic batch dim that does not match the key at run time.
    let mut g = Graph::new();
    let k = g.input("k", DType::I64, [Dim::unknown()]);
    let l = g.input("l", DType::F64, [Dim::unknown(), Dim::fixed(2)]);
    let s = g.random_categorical(k, l, 1).unwrap();
    let e = run_recorded(&g, &[s], &[(k, i64t(&[2], &[1, 2])), (l, f64t(&[3, 2], &[0.0; 6]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "random_categorical"), "{e}");
    let x = g.input("x", DType::F64, [Dim::unknown()]);
    let d = g.dropout(x, k, 0.5).unwrap();
    let e = run_recorded(&g, &[d], &[(k, i64t(&[2], &[1, 2])), (x, f64t(&[3], &[0.0; 3]))]).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { op, .. } if op == "dropout"), "{e}");
}

/// The per-stream helpers give the per-counter functions' values (the base mixed once), and
/// `stream_normal` is a pure function of (key, counter).
#[test]
fn stream_helpers_equal_the_counter_functions() {
    use pfor::tensor::{stream_base, stream_normal, stream_uniform};
    for k in [0u64, 1, 7, u64::MAX] {
        let b = stream_base(k);
        for c in [0u64, 1, 2, 1000, u64::MAX] {
            assert_eq!(stream_uniform(b, c), counter_uniform(k, c));
            assert_eq!(stream_normal(b, c), stream_normal(stream_base(k), c));
            assert!(stream_normal(b, c).is_finite());
        }
    }
    // the op draws exactly stream_normal for its key and counters
    let v = normal(key(9), &[5], DType::F64, 0.0, 1.0).to_f64_vec();
    let want: Vec<f64> = (0..5).map(|c| stream_normal(stream_base(9), c)).collect();
    assert_eq!(v, want);
}
