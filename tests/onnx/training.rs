//! The optimizers of `ai.onnx.preview.training` (`Adagrad`, `Adam`, `Momentum`) on one-node
//! models built in memory: against the formulas evaluated here in f64, at the first update
//! (`T = 0`) and a later one, with two tensors updated at once; the derivative w.r.t. the
//! learning rate at `T = 0` against a finite difference (finite: Adam's unselected bias
//! correction must not leak a NaN).

use super::encode::{Attr, DOUBLE, INT64, model, node, value_info};
use pfor::onnx;
use pfor::prelude::*;

const DOMAIN: &str = "ai.onnx.preview.training";

/// A one-node model: inputs R, T and `tensors` groups of two [2]-tensors each
/// (X1, X2, G1, G2, ...), outputs the new X1, X2 and the new states.
fn optimizer(op: &str, groups: usize, attrs: &[Attr]) -> onnx::Model {
    let mut names = vec!["R".to_string(), "T".to_string()];
    for gname in ["X", "G", "S", "U"].iter().take(groups) {
        names.extend((1..=2).map(|i| format!("{gname}{i}")));
    }
    let outs: Vec<String> = (0..2 * (groups - 1)).map(|k| format!("y{k}")).collect();
    let ins: Vec<&str> = names.iter().map(String::as_str).collect();
    let out_refs: Vec<&str> = outs.iter().map(String::as_str).collect();
    let mut infos = vec![value_info("R", DOUBLE, &[]), value_info("T", INT64, &[])];
    infos.extend(names[2..].iter().map(|n| value_info(n, DOUBLE, &[Ok(2)])));
    let outputs: Vec<_> = outs.iter().map(|n| value_info(n, DOUBLE, &[])).collect();
    let n = node(op, "opt", &ins, &out_refs, attrs).str(7, DOMAIN);
    onnx::load_bytes(&model(13, &[n], &infos, &outputs, &[])).unwrap()
}

/// The tensors the models update: X, G and the states, each two [2]-tensors.
fn data(groups: usize) -> Vec<Vec<f64>> {
    (0..2 * groups).map(|k| vec![0.3 + 0.1 * k as f64, -0.2 + 0.05 * k as f64]).collect()
}

/// Runs `m` on R, T and `data`; returns the outputs as f64 vectors.
fn run(m: &onnx::Model, r: f64, t: i64, data: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let mut vals = vec![Tensor::scalar(r), Tensor::scalar(t)];
    vals.extend(data.iter().map(|v| Tensor::vec1(v)));
    let (g, ins, outs) = m.to_graph().unwrap();
    let feeds: Vec<(ValueId, Tensor)> = ins.into_iter().zip(vals).collect();
    run_once(&g, &outs, &feeds).unwrap().iter().map(Tensor::to_f64_vec).collect()
}

fn close(a: &[Vec<f64>], b: &[Vec<f64>]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        for (p, q) in x.iter().zip(y) {
            assert!((p - q).abs() <= 1e-12 + 1e-9 * q.abs(), "{a:?} vs {b:?}");
        }
    }
}

#[test]
fn adam_momentum_and_adagrad_follow_the_onnx_formulas() {
    let (lambda, alpha, beta, eps) = (0.01, 0.9, 0.99, 1e-3);
    let f = |v: f32| f64::from(v); // attributes are float32
    let (lambda, alpha, beta, eps) = (f(lambda), f(alpha), f(beta), f(eps));
    let adam = optimizer(
        "Adam",
        4,
        &[
            Attr::Float("alpha", alpha as f32),
            Attr::Float("beta", beta as f32),
            Attr::Float("epsilon", eps as f32),
            Attr::Float("norm_coefficient", lambda as f32),
        ],
    );
    let d = data(4);
    for t in [0i64, 3] {
        let r = 0.5;
        let mut want = vec![Vec::new(); 6];
        for i in 0..2 {
            let (x, g, v, h) = (&d[i], &d[2 + i], &d[4 + i], &d[6 + i]);
            for j in 0..2 {
                let gr = lambda * x[j] + g[j];
                let vn = alpha * v[j] + (1.0 - alpha) * gr;
                let hn = beta * h[j] + (1.0 - beta) * gr * gr;
                let ra = if t > 0 { r * (1.0 - beta.powi(t as i32)).sqrt() / (1.0 - alpha.powi(t as i32)) } else { r };
                want[i].push(x[j] - ra * vn / (hn.sqrt() + eps));
                want[2 + i].push(vn);
                want[4 + i].push(hn);
            }
        }
        close(&run(&adam, r, t, &d), &want);
    }
    let nesterov = optimizer(
        "Momentum",
        3,
        &[
            Attr::Float("alpha", alpha as f32),
            Attr::Float("beta", beta as f32),
            Attr::Str("mode", "nesterov"),
            Attr::Float("norm_coefficient", lambda as f32),
        ],
    );
    let d = data(3);
    for t in [0i64, 1] {
        let mut want = vec![Vec::new(); 4];
        for i in 0..2 {
            let (x, g, v) = (&d[i], &d[2 + i], &d[4 + i]);
            for j in 0..2 {
                let gr = lambda * x[j] + g[j];
                let vn = alpha * v[j] + if t > 0 { beta } else { 1.0 } * gr;
                want[i].push(x[j] - 0.5 * (gr + alpha * vn));
                want[2 + i].push(vn);
            }
        }
        close(&run(&nesterov, 0.5, t, &d), &want);
    }
    let adagrad = optimizer("Adagrad", 3, &[Attr::Float("decay_factor", 0.5), Attr::Float("epsilon", eps as f32)]);
    let mut want = vec![Vec::new(); 4];
    for i in 0..2 {
        let (x, g, h) = (&d[i], &d[2 + i], &d[4 + i]);
        for j in 0..2 {
            let hn = h[j] + g[j] * g[j];
            want[i].push(x[j] - 0.5 / (1.0 + 2.0 * 0.5) * g[j] / (hn.sqrt() + eps));
            want[2 + i].push(hn);
        }
    }
    close(&run(&adagrad, 0.5, 2, &d), &want);
    // Momentum's attributes are required
    let e = optimizer("Momentum", 3, &[Attr::Float("alpha", 0.9)]).to_graph().unwrap_err().to_string();
    assert!(e.contains("Momentum") && e.contains("missing"), "{e}");
}

#[test]
fn adam_derivative_at_the_first_update_is_finite_and_matches_a_finite_difference() {
    let adam = optimizer("Adam", 4, &[]);
    let d = data(4);
    let mut g = Graph::new();
    let r = g.input("R", DType::F64, Shape::fixed(&[]));
    let mut ins = vec![r, g.constant(Tensor::scalar(0i64))];
    ins.extend(d.iter().map(|v| g.constant(Tensor::vec1(v))));
    let outs = adam.call(&mut g, &ins).unwrap();
    let s = g.sum_all(outs[0]).unwrap();
    let dr = gradients(&mut g, &[s], &[r], None).unwrap()[0];
    let at = |v: f64| run_once(&g, &[s, dr], &[(r, Tensor::scalar(v))]).unwrap();
    let grad = at(0.5)[1].to_f64_vec()[0];
    let h = 1e-6;
    let fd = (at(0.5 + h)[0].to_f64_vec()[0] - at(0.5 - h)[0].to_f64_vec()[0]) / (2.0 * h);
    assert!(grad.is_finite() && (grad - fd).abs() < 1e-6, "{grad} vs {fd}");
}
