//! W8 (one DP-SGD step on W4's MNIST CNN): with noise off, pfor with the product rewrites,
//! pfor materialized and the loop of (gradient, clip, sum) agree to 1e-4 relative, and
//! match the clipped average written out by hand from the loop's per-example gradients
//! (`autodiff::dp::clipped_average`); the rewrites leave no per-example gradient of the
//! dense layer in the graph.

// The workloads include the W3 example, which `converters::lstm` includes too: on purpose.
#[path = "../../benches/workloads/mod.rs"]
#[allow(unused, clippy::duplicate_mod)]
mod workloads;

use pfor::api::per_example_gradients_loop;
use pfor::prelude::*;
use workloads::{W8_CLIP, W8Mode, mnist_example_loss, mnist_params, w8_graph, w8_with};

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
fn w8_matches_the_clipped_average_of_the_loops_per_example_gradients() {
    let n = 3;
    let (g, outs, feeds) = w8_graph(n, W8Mode::Pfor, 0.0).unwrap();
    let got = run_once(&g, &outs, &feeds).unwrap();
    // The reference: the same weights and examples, per-example gradients by the loop,
    // clipped and averaged by hand (C = 1, as in W8).
    let mut r = Graph::new();
    let x = r.input("x", DType::F32, [n, 28, 28, 1]);
    let y = r.input("y", DType::I64, [n]);
    let p = mnist_params(&mut r);
    let params = p.values.clone();
    let loss = |g: &mut Graph, rows: &[ValueId], _: &[ValueId]| mnist_example_loss(g, &p, rows);
    let pe = per_example_gradients_loop(&mut r, loss, &[x, y], &params).unwrap();
    let per = run_once(&r, &pe, &[(x, feeds[0].1.clone()), (y, feeds[1].1.clone())]).unwrap();
    let (want, norms) = crate::autodiff::dp::clipped_average(&per, n, W8_CLIP);
    assert!(norms.iter().any(|&v| v > W8_CLIP), "some example must be clipped: norms {norms:?}");
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        let a = a.to_f64_vec();
        let scale = b.iter().fold(0.0f64, |s, x| s.max(x.abs()));
        let d = a.iter().zip(b).fold(0.0f64, |s, (x, y)| s.max((x - y).abs()));
        assert!(d <= 1e-4 * scale, "param {k}: pfor vs the hand-clipped loop differ by {d:e} (scale {scale:e})");
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
