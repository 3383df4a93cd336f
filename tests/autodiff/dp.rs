//! dp_gradients / per_example_gradient_norms against the loop of (gradient, clip, sum)
//! computed here from `per_example_gradients_loop` (Opacus's clip factor
//! `min(1, C / (‖g_i‖ + 1e-6))`, average by n), with the product rewrites on and off, on a
//! dense model, an LSTM (a weight used at every time step: ghost norms over time steps) and
//! a model using one weight twice (where the rank-1 shortcut must not apply). W4's MNIST CNN
//! is checked against the same hand-written reference in `tests/benches/w8.rs`.

use super::fd::randn;
use pfor::api::{
    CLIP_EPS, DpOptions, dp_gradients, dp_gradients_loop, lstm_cell, per_example_gradient_norms,
    per_example_gradients_loop,
};
use pfor::prelude::*;

type Loss = fn(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>;

/// A dense model: sum((tanh(x W1 + b1) W2)²).
fn mlp_loss(g: &mut Graph, rows: &[ValueId], p: &[ValueId]) -> Result<ValueId> {
    let x = g.expand_dims(rows[0], 0)?;
    let h = g.matmul(x, p[0])?;
    let h = g.bias_add(h, p[1])?;
    let h = g.tanh(h)?;
    let y = g.matmul(h, p[2])?;
    let sq = g.square(y)?;
    g.sum_all(sq)
}

/// One weight used twice: sum(tanh(tanh(x W) W) v).
fn shared_loss(g: &mut Graph, rows: &[ValueId], p: &[ValueId]) -> Result<ValueId> {
    let x = g.expand_dims(rows[0], 0)?;
    let h = g.matmul(x, p[0])?;
    let h = g.tanh(h)?;
    let h = g.matmul(h, p[0])?;
    let h = g.tanh(h)?;
    let y = g.matmul(h, p[1])?;
    g.sum_all(y)
}

/// A 4-step LSTM over rows `[4, 3]` (state 5), loss sum(h_4 · v).
fn lstm_loss(g: &mut Graph, rows: &[ValueId], p: &[ValueId]) -> Result<ValueId> {
    let mut h = g.constant(Tensor::zeros(DType::F64, &[1, 5])?);
    let mut c = h;
    for xt in g.unstack(rows[0], 0)? {
        let xt = g.reshape(xt, &[1, 3])?;
        (h, c) = lstm_cell(g, xt, h, c, p[0], p[1])?;
    }
    let y = g.matmul(h, p[2])?;
    g.sum_all(y)
}

struct Case {
    loss: Loss,
    x: Vec<usize>,
    params: Vec<Vec<usize>>,
}

fn cases() -> Vec<(&'static str, Case)> {
    vec![
        ("mlp", Case { loss: mlp_loss, x: vec![6, 5], params: vec![vec![5, 7], vec![7], vec![7, 3]] }),
        ("shared", Case { loss: shared_loss, x: vec![5, 6], params: vec![vec![6, 6], vec![6, 2]] }),
        ("lstm", Case { loss: lstm_loss, x: vec![4, 4, 3], params: vec![vec![8, 20], vec![20], vec![5, 1]] }),
    ]
}

/// The graph's inputs: the examples and the params (constants), plus the feeds.
fn setup(g: &mut Graph, c: &Case, scale: f64) -> (ValueId, Vec<ValueId>, Vec<(ValueId, Tensor)>) {
    let x = g.input("x", DType::F64, c.x.as_slice());
    let params = c
        .params
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let t = randn(s, 10 + k as u64).to_array::<f64>().unwrap() * scale;
            g.constant(Tensor::from_array(t))
        })
        .collect();
    (x, params, vec![(x, randn(&c.x, 3))])
}

/// The loop of (gradient, clip, sum) / n and the norms, from per-example gradients.
fn reference(c: &Case, clip: f64, scale: f64) -> (Vec<Vec<f64>>, Vec<f64>) {
    let mut g = Graph::new();
    let (x, params, feeds) = setup(&mut g, c, scale);
    let pe = per_example_gradients_loop(&mut g, c.loss, &[x], &params).unwrap();
    let vals = run_once(&g, &pe, &feeds).unwrap();
    clipped_average(&vals, c.x[0], clip)
}

/// Opacus's clipped average written out by hand: from per-example gradients `per` (one
/// tensor `[n, ...]` per parameter), each example's global norm, its clip factor
/// `min(1, C / (‖g_i‖ + 1e-6))`, and the sum of the clipped gradients over n, divided by n.
/// Returns (averages per parameter, norms per example).
pub fn clipped_average(per: &[Tensor], n: usize, clip: f64) -> (Vec<Vec<f64>>, Vec<f64>) {
    let per: Vec<Vec<f64>> = per.iter().map(|t| t.to_f64_vec()).collect();
    let mut sums: Vec<Vec<f64>> = per.iter().map(|v| vec![0.0; v.len() / n]).collect();
    let mut norms = Vec::new();
    for i in 0..n {
        let sq: f64 = per
            .iter()
            .zip(&sums)
            .map(|(v, s)| v[i * s.len()..(i + 1) * s.len()].iter().map(|x| x * x).sum::<f64>())
            .sum();
        let norm = sq.sqrt();
        norms.push(norm);
        let f = (clip / (norm + CLIP_EPS)).min(1.0);
        for (v, s) in per.iter().zip(sums.iter_mut()) {
            let m = s.len();
            for (acc, x) in s.iter_mut().zip(&v[i * m..(i + 1) * m]) {
                *acc += f * x / n as f64;
            }
        }
    }
    (sums, norms)
}

#[track_caller]
fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (k, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= 1e-4 * scale.max(1e-12), "{what}[{k}]: {a} vs {b}");
    }
}

enum How {
    Rewrites,
    Materialized,
    Loop,
}

fn dp(c: &Case, clip: f64, scale: f64, how: How) -> (Vec<Vec<f64>>, Vec<f64>, Graph) {
    let mut g = Graph::new();
    let (x, params, feeds) = setup(&mut g, c, scale);
    let o = DpOptions {
        clip_norm: clip,
        rewrites: matches!(how, How::Rewrites),
        pfor: pfor::vectorize::PforOptions::strict(),
        ..DpOptions::default()
    };
    let r = match how {
        How::Loop => dp_gradients_loop(&mut g, c.loss, &[x], &params, &o).unwrap(),
        _ => dp_gradients(&mut g, c.loss, &[x], &params, &o).unwrap(),
    };
    let mut fetch = r.grads.clone();
    fetch.push(r.norms);
    let vals = run_once(&g, &fetch, &feeds).unwrap();
    let norms = vals.last().unwrap().to_f64_vec();
    (vals[..vals.len() - 1].iter().map(|t| t.to_f64_vec()).collect(), norms, g)
}

/// Whether any value of `g` has the static shape `dims`.
fn has(g: &Graph, dims: &[usize]) -> bool {
    g.node_ids()
        .into_iter()
        .any(|n| g.node(n).unwrap().outputs.iter().any(|t| t.shape.as_fixed().as_deref() == Some(dims)))
}

#[test]
fn dp_gradients_match_the_loop_of_gradient_clip_sum() {
    for (name, c) in cases() {
        // a small clip norm clips every example; a large one none (factor 1)
        for (clip, scale) in [(0.05, 1.0), (1e6, 0.3)] {
            let (want, want_norms) = reference(&c, clip, scale);
            for how in [How::Rewrites, How::Materialized, How::Loop] {
                let (got, norms, _) = dp(&c, clip, scale, how);
                for (p, (a, b)) in got.iter().zip(&want).enumerate() {
                    close(a, b, &format!("{name} clip {clip} param {p}"));
                }
                close(&norms, &want_norms, &format!("{name} norms"));
            }
        }
    }
}

#[test]
fn per_example_gradient_norms_match_the_loop() {
    for (name, c) in cases() {
        let (_, want) = reference(&c, 1.0, 1.0);
        let mut g = Graph::new();
        let (x, params, feeds) = setup(&mut g, &c, 1.0);
        let nv = per_example_gradient_norms(&mut g, c.loss, &[x], &params).unwrap();
        let got = run_once(&g, &[nv], &feeds).unwrap();
        close(&got[0].to_f64_vec(), &want, name);
        // the first weight's per-example gradient is never written: rank 1 (mlp), a
        // weight used twice (shared, T = 2) or at 4 time steps (lstm): the Gram form
        let mut dims = vec![c.x[0]];
        dims.extend(&c.params[0]);
        assert!(!has(&g, &dims), "{name}: a {dims:?} value is left\n{g}");
    }
}

#[test]
fn dense_per_example_gradients_are_not_materialized_with_rewrites() {
    // mlp: W1 [5,7] per example would be a [6,5,7] value; W2 [7,3] [6,7,3]
    let c = &cases()[0].1;
    let has = |g: &Graph, dims: &[usize]| {
        g.node_ids()
            .into_iter()
            .any(|n| g.node(n).unwrap().outputs.iter().any(|t| t.shape.as_fixed().as_deref() == Some(dims)))
    };
    let (_, _, g) = dp(c, 1.0, 1.0, How::Rewrites);
    assert!(!has(&g, &[6, 5, 7]) && !has(&g, &[6, 7, 3]), "{g}");
    let (_, _, g) = dp(c, 1.0, 1.0, How::Materialized);
    assert!(has(&g, &[6, 5, 7]) && has(&g, &[6, 7, 3]), "{g}");
}

#[test]
fn noise_has_std_sigma_c_over_n_and_follows_the_key() {
    let c = &cases()[0].1;
    let run = |sigma: f64, key: i64| -> Vec<f64> {
        let mut g = Graph::new();
        let (x, params, mut feeds) = setup(&mut g, c, 1.0);
        let k = g.input("key", DType::I64, Shape::scalar());
        let o = DpOptions { clip_norm: 2.0, noise_multiplier: sigma, key: Some(k), ..DpOptions::default() };
        let r = dp_gradients(&mut g, c.loss, &[x], &params, &o).unwrap();
        feeds.push((k, Tensor::scalar(key)));
        run_once(&g, &r.grads, &feeds).unwrap().iter().flat_map(|t| t.to_f64_vec()).collect()
    };
    let clean = run(0.0, 1);
    let (a, b) = (run(3.0, 1), run(3.0, 2));
    assert_eq!(a, run(3.0, 1), "same key, same noise");
    assert_ne!(a, b, "another key, other noise");
    // n (a - clean) ~ N(0, (σ C)²) per element: σ C = 6
    let d: Vec<f64> = a.iter().zip(&clean).map(|(x, y)| 6.0 * (x - y)).collect();
    let var = d.iter().map(|x| x * x).sum::<f64>() / d.len() as f64;
    assert!((var.sqrt() - 6.0).abs() < 1.5, "noise std {} for {} elements", var.sqrt(), d.len());
}

#[test]
fn bad_options_and_losses_are_errors_naming_the_problem() {
    let c = &cases()[0].1;
    let err = |o: DpOptions, loss: Loss| -> String {
        let mut g = Graph::new();
        let (x, params, _) = setup(&mut g, c, 1.0);
        dp_gradients(&mut g, loss, &[x], &params, &o).unwrap_err().to_string()
    };
    let e = err(DpOptions { clip_norm: 0.0, ..DpOptions::default() }, mlp_loss);
    assert!(e.contains("dp_gradients") && e.contains("clip_norm"), "{e}");
    let e = err(DpOptions { noise_multiplier: 1.0, ..DpOptions::default() }, mlp_loss);
    assert!(e.contains("key"), "{e}");
    let e = err(DpOptions { noise_multiplier: f64::NAN, ..DpOptions::default() }, mlp_loss);
    assert!(e.contains("noise_multiplier"), "{e}");
    let vector_loss: Loss = |g, rows, p| {
        let x = g.expand_dims(rows[0], 0)?;
        g.matmul(x, p[0])
    };
    let e = err(DpOptions::default(), vector_loss);
    assert!(e.contains("scalar") && e.contains("shape"), "{e}");
}
