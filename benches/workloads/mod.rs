//! Benchmark workloads W1–W5 (the paper's evaluation), each buildable in three modes in one process:
//! `Pfor` (vectorized), `Loop` (reference per-iteration loop) and `Hand` (hand-batched).
//! Shared by the criterion benches and `examples/bench_report.rs` via `#[path]`.
#![allow(dead_code)]

use pfor::ops::conv::Conv2dParams;
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

mod dp;
mod grad;
mod overhead;
pub mod peerlib;
#[allow(unused_imports)]
pub use dp::{W8_CLIP, W8Mode, w8, w8_graph, w8_with};
#[allow(unused_imports)]
pub use grad::{w4, w5, w5_forward, w5_input};
#[allow(unused_imports)]
pub use overhead::{convert_body, tiny_chain};

/// How a workload is batched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// pfor-vectorized per-example body.
    Pfor,
    /// Reference loop over the per-example body.
    Loop,
    /// Hand-batched graph.
    Hand,
}

impl Mode {
    /// All modes.
    pub const ALL: [Mode; 3] = [Mode::Pfor, Mode::Loop, Mode::Hand];
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Pfor => "pfor",
            Mode::Loop => "loop",
            Mode::Hand => "hand",
        }
    }
}

/// A built workload: a compiled session and its feeds.
pub struct Workload {
    /// The session.
    pub session: Session,
    /// Feeds.
    pub feeds: Vec<(ValueId, Tensor)>,
    /// Work units per run (FLOPs, images, tokens...).
    pub units: f64,
}

impl Workload {
    /// Run once.
    pub fn run(&mut self) -> Vec<Tensor> {
        self.session.run(&self.feeds).expect("workload runs")
    }
    /// Run once to warm up (its profile discarded), then `reps` times: the wall times in
    /// seconds, sorted (the probes' timing loop).
    pub fn sorted_times(&mut self, reps: usize) -> Vec<f64> {
        self.run();
        self.session.clear_profile();
        let mut times: Vec<f64> = (0..reps)
            .map(|_| {
                let t = std::time::Instant::now();
                self.run();
                t.elapsed().as_secs_f64()
            })
            .collect();
        times.sort_by(f64::total_cmp);
        times
    }
}

/// The workloads' pfor options: strict; `PFOR_ONE_ROW=0` turns the static one-row form off
/// (`PforOptions::one_row`), for A/B measurements of n = 1 against the converted form.
pub fn pfor_options() -> PforOptions {
    PforOptions::strict().with_one_row(std::env::var("PFOR_ONE_ROW").as_deref() != Ok("0"))
}

fn per_example<F>(g: &mut Graph, n: usize, mode: Mode, body: F) -> Result<Vec<ValueId>>
where
    F: Fn(&mut Graph, ValueId) -> Result<Vec<ValueId>>,
{
    match mode {
        Mode::Pfor => pfor_with(g, n, &pfor_options(), body),
        Mode::Loop => for_loop(g, n, body),
        Mode::Hand => unreachable!("hand mode builds its own graph"),
    }
}

/// W1: linear projection `x_i[1,768] @ W[768,768]`; units = FLOPs.
pub fn w1(n: usize, mode: Mode) -> Result<Workload> {
    let d = 768;
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, d]);
    let w = g.constant(Tensor::randn(&[d, d], 1)?);
    let out = match mode {
        Mode::Hand => vec![g.matmul(x, w)?],
        m => per_example(&mut g, n, m, |g, i| {
            let xi = g.gather(x, i, 0)?;
            let xi = g.reshape(xi, &[1, d as i64])?;
            Ok(vec![g.matmul(xi, w)?])
        })?,
    };
    Ok(Workload {
        session: Session::new(&g, &out)?,
        feeds: vec![(x, Tensor::randn(&[n, d], 2)?)],
        units: 2.0 * (n * d * d) as f64,
    })
}

/// MNIST CNN weights.
pub struct MnistParams {
    /// conv1 [5,5,1,32], b [32], conv2 [5,5,32,64], b [64], fc1 [3136,1024], b, fc2 [1024,10], b.
    pub values: Vec<ValueId>,
}

/// Create the MNIST CNN weights as constants.
pub fn mnist_params(g: &mut Graph) -> MnistParams {
    let shapes: [&[usize]; 8] =
        [&[5, 5, 1, 32], &[32], &[5, 5, 32, 64], &[64], &[3136, 1024], &[1024], &[1024, 10], &[10]];
    let values = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let fan_in: usize = if s.len() > 1 { s[..s.len() - 1].iter().product() } else { 100 };
            let t = Tensor::randn(s, 10 + k as u64).expect("a small fixed shape").to_array::<f32>().expect("f32")
                * (1.0 / (fan_in as f32).sqrt());
            g.constant(Tensor::from_array(t))
        })
        .collect();
    MnistParams { values }
}

/// The MNIST CNN on a batch `x [b,28,28,1]` → logits `[b,10]`.
pub fn mnist_logits(g: &mut Graph, p: &MnistParams, x: ValueId) -> Result<ValueId> {
    let v = &p.values;
    let same = Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() };
    let h = g.conv2d(x, v[0], same)?;
    let h = g.bias_add(h, v[1])?;
    let h = g.relu(h)?;
    let h = g.max_pool(h, [2, 2], [2, 2], Padding::Valid)?;
    let h = g.conv2d(h, v[2], same)?;
    let h = g.bias_add(h, v[3])?;
    let h = g.relu(h)?;
    let h = g.max_pool(h, [2, 2], [2, 2], Padding::Valid)?;
    let h = g.reshape(h, &[-1, 3136])?;
    let h = g.matmul(h, v[4])?;
    let h = g.bias_add(h, v[5])?;
    let h = g.relu(h)?;
    let h = g.matmul(h, v[6])?;
    g.bias_add(h, v[7])
}

/// One example's softmax cross-entropy under the MNIST CNN: `rows` = (image `[28,28,1]`,
/// label `[]`) — the per-example loss of W4 and W8.
pub fn mnist_example_loss(g: &mut Graph, p: &MnistParams, rows: &[ValueId]) -> Result<ValueId> {
    let xi = g.expand_dims(rows[0], 0)?;
    let yi = g.reshape(rows[1], &[1])?;
    let logits = mnist_logits(g, p, xi)?;
    let l = g.sparse_softmax_cross_entropy(yi, logits)?;
    g.sum_all(l)
}

/// The per-example W2 body: logits `[10]` of image `i` of `x [n,28,28,1]`.
pub fn mnist_example(g: &mut Graph, p: &MnistParams, x: ValueId, i: ValueId) -> Result<Vec<ValueId>> {
    let xi = g.gather(x, i, 0)?;
    Ok(vec![mnist_image_logits(g, p, xi)?])
}

/// The MNIST CNN on one image `x [28,28,1]` → logits `[10]` (W2's body after the gather;
/// W9's per-example map).
pub fn mnist_image_logits(g: &mut Graph, p: &MnistParams, x: ValueId) -> Result<ValueId> {
    let xi = g.expand_dims(x, 0)?;
    let l = mnist_logits(g, p, xi)?;
    g.reshape(l, &[10])
}

/// W2: MNIST CNN inference; units = images.
pub fn w2(n: usize, mode: Mode) -> Result<Workload> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, 28, 28, 1]);
    let p = mnist_params(&mut g);
    let out = match mode {
        Mode::Hand => vec![mnist_logits(&mut g, &p, x)?],
        m => per_example(&mut g, n, m, |g, i| mnist_example(g, &p, x, i))?,
    };
    Ok(Workload {
        session: Session::new(&g, &out)?,
        feeds: vec![(x, Tensor::randn(&[n, 28, 28, 1], 3)?)],
        units: n as f64,
    })
}

// W3's graph is the one `examples/lstm_variable_length.rs` shows (one definition).
#[path = "../../examples/lstm_variable_length.rs"]
mod lstm_example;
pub use lstm_example::{W3Mode, w3_graph};

/// W3: LSTM (input 128, state 256, f32) over sequences of per-example length U{1..100},
/// final state `[n,256]`; units = tokens (sum of lengths).
pub fn w3(n: usize, mode: W3Mode) -> Result<Workload> {
    let w = w3_graph(n, mode)?;
    Ok(Workload { session: Session::new(&w.graph, &[w.out])?, feeds: w.feeds, units: w.tokens })
}
