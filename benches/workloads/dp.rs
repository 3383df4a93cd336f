//! W8: one DP-SGD gradient step on W4's MNIST CNN (`pfor::api::dp_gradients`): per-example
//! gradients of the softmax cross-entropy, global norms, Opacus clip factors (C = 1), the
//! clipped sum, Gaussian noise (σ = 1, a fresh key every run) and the average over n.
//! Modes: `Pfor` (vectorized, product rewrites on: ghost norms and one contraction per
//! dense layer), `Materialized` (vectorized, rewrites off: every per-example gradient is
//! written), `Loop` (one example at a time, the reference); units = examples.

use pfor::api::{DpOptions, dp_gradients, dp_gradients_loop};
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

use super::{Workload, mnist_example_loss, mnist_params};

/// How W8 is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum W8Mode {
    /// pfor with the product rewrites.
    Pfor,
    /// pfor with the rewrites off (per-example gradients materialized).
    Materialized,
    /// The reference loop.
    Loop,
}

impl W8Mode {
    /// All modes.
    pub const ALL: [W8Mode; 3] = [W8Mode::Pfor, W8Mode::Materialized, W8Mode::Loop];
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            W8Mode::Pfor => "pfor",
            W8Mode::Materialized => "materialized",
            W8Mode::Loop => "loop",
        }
    }
}

/// The W8 clip norm C and noise multiplier σ (the peers' settings).
pub const W8_CLIP: f64 = 1.0;
/// See [`W8_CLIP`].
pub const W8_SIGMA: f64 = 1.0;

/// A W8 graph: the graph, its outputs (one gradient per parameter) and its feeds.
pub type W8Graph = (Graph, Vec<ValueId>, Vec<(ValueId, Tensor)>);

/// W8 at batch size `n` in `mode`, with noise multiplier `sigma` (the benchmark uses
/// [`W8_SIGMA`]; 0 gives the deterministic clipped average the tests compare).
pub fn w8_with(n: usize, mode: W8Mode, sigma: f64) -> Result<Workload> {
    let (g, outs, feeds) = w8_graph(n, mode, sigma)?;
    Ok(Workload { session: Session::new(&g, &outs)?, feeds, units: n as f64 })
}

/// The graph [`w8_with`] compiles.
pub fn w8_graph(n: usize, mode: W8Mode, sigma: f64) -> Result<W8Graph> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, 28, 28, 1]);
    let y = g.input("y", DType::I64, [n]);
    let key = g.input("key", DType::I64, Shape::scalar());
    let p = mnist_params(&mut g);
    let params = p.values.clone();
    let loss = |g: &mut Graph, rows: &[ValueId], _: &[ValueId]| mnist_example_loss(g, &p, rows);
    let o = DpOptions {
        clip_norm: W8_CLIP,
        noise_multiplier: sigma,
        key: Some(key),
        rewrites: mode == W8Mode::Pfor,
        pfor: PforOptions::strict(),
    };
    let r = match mode {
        W8Mode::Loop => dp_gradients_loop(&mut g, loss, &[x, y], &params, &o)?,
        _ => dp_gradients(&mut g, loss, &[x, y], &params, &o)?,
    };
    let feeds = vec![
        (x, Tensor::rand_uniform(DType::F32, &[n, 28, 28, 1], 0.0, 1.0, 80)?),
        (y, Tensor::rand_uniform(DType::I64, &[n], 0.0, 10.0, 81)?),
        (key, Tensor::scalar(82i64)),
    ];
    Ok((g, r.grads, feeds))
}

/// W8 with the benchmark's noise ([`W8_SIGMA`]).
pub fn w8(n: usize, mode: W8Mode) -> Result<Workload> {
    w8_with(n, mode, W8_SIGMA)
}
