//! W8 (one DP-SGD step on W4's MNIST CNN): with noise off, pfor with the product rewrites,
//! pfor materialized and the loop of (gradient, clip, sum) agree to 1e-4 relative; the
//! rewrites leave no per-example gradient of the dense layer in the graph.

// The workloads include the W3 example, which `converters::lstm` includes too: on purpose.
#[path = "../../benches/workloads/mod.rs"]
#[allow(unused, clippy::duplicate_mod)]
mod workloads;

use pfor::prelude::*;
use workloads::{W8Mode, w8_graph, w8_with};

#[test]
fn w8_modes_agree_with_noise_off() {
    let n = 3;
    let runs: Vec<Vec<Tensor>> = W8Mode::ALL.iter().map(|m| w8_with(n, *m, 0.0).unwrap().run()).collect();
    for (m, r) in W8Mode::ALL.iter().zip(&runs).skip(1) {
        for (k, (a, b)) in runs[0].iter().zip(r).enumerate() {
            let (a, b) = (a.to_f64_vec(), b.to_f64_vec());
            let scale = b.iter().fold(0.0f64, |s, x| s.max(x.abs()));
            let d = a.iter().zip(&b).fold(0.0f64, |s, (x, y)| s.max((x - y).abs()));
            assert!(d <= 1e-4 * scale, "param {k}: pfor vs {} differ by {d:e} (scale {scale:e})", m.name());
        }
    }
}

#[test]
fn w8_with_rewrites_writes_no_dense_per_example_gradient() {
    let n = 3;
    let big = |m: W8Mode| -> bool {
        let (g, _, _) = w8_graph(n, m, 1.0).unwrap();
        g.node_ids().into_iter().any(|id| {
            g.node(id).unwrap().outputs.iter().any(|t| t.shape.as_fixed().as_deref() == Some(&[n, 3136, 1024][..]))
        })
    };
    assert!(!big(W8Mode::Pfor));
    assert!(big(W8Mode::Materialized));
}
