//! DP-SGD (differentially private SGD, Abadi et al. 2016) training the MNIST CNN of
//! `per_example_grads` on synthetic MNIST-shaped data: every step clips each example's
//! gradient to norm C, sums, adds Gaussian noise of std σ·C and averages
//! (`pfor::api::dp_gradients`, Opacus semantics). The step is ONE compiled graph, run for
//! every batch; the product rewrites keep the dense layers' per-example gradients (12.8 MB
//! each for the 3136×1024 layer) from ever being written.
//!
//! Prints the loss as training goes, the privacy parameters (σ, C, batch, steps, sampling
//! rate) and the ε spent for δ = 1e-5 by the RDP accountant of the sampled Gaussian
//! mechanism (Mironov et al. 2019, integer orders, as Opacus/TF Privacy report it for
//! Poisson sampling at rate n/N). The verdict checks the step's clipped average (noise off)
//! against the loop of (gradient, clip, sum) on a batch; the process exits non-zero on a
//! mismatch.
//!
//! Self-contained (as every example): the CNN is written out here as in `per_example_grads`.
//!
//! Run with `cargo run --release --example dp_sgd [-- --steps 300]`.

use std::io::Write;
use std::time::Instant;

use pfor::api::{DpOptions, dp_gradients, dp_gradients_loop};
use pfor::prelude::*;
use pfor::tensor::Verdict;
use pfor::vectorize::PforOptions;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

const SHAPES: [&[usize]; 8] =
    [&[5, 5, 1, 32], &[32], &[5, 5, 32, 64], &[64], &[3136, 1024], &[1024], &[1024, 10], &[10]];

fn logits(g: &mut Graph, p: &[ValueId], x: ValueId) -> Result<ValueId> {
    let same = Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() };
    let mut h = x;
    for k in 0..2 {
        h = g.conv2d(h, p[2 * k], same)?;
        h = g.bias_add(h, p[2 * k + 1])?;
        h = g.relu(h)?;
        h = g.max_pool(h, [2, 2], [2, 2], Padding::Valid)?;
    }
    let h = g.reshape(h, &[-1, 3136])?;
    let h = g.matmul(h, p[4])?;
    let h = g.bias_add(h, p[5])?;
    let h = g.relu(h)?;
    let h = g.matmul(h, p[6])?;
    g.bias_add(h, p[7])
}

fn loss(g: &mut Graph, rows: &[ValueId], p: &[ValueId]) -> Result<ValueId> {
    let xi = g.expand_dims(rows[0], 0)?;
    let yi = g.reshape(rows[1], &[1])?;
    let l = logits(g, p, xi)?;
    let l = g.sparse_softmax_cross_entropy(yi, l)?;
    g.sum_all(l)
}

/// The DP step graph: params and the batch are inputs (fed every step).
struct Step {
    graph: Graph,
    x: ValueId,
    y: ValueId,
    key: ValueId,
    params: Vec<ValueId>,
    grads: Vec<ValueId>,
    losses: ValueId,
}

fn step_graph(n: usize, clip: f64, sigma: f64, loop_ref: bool) -> Result<Step> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, 28, 28, 1]);
    let y = g.input("y", DType::I64, [n]);
    let key = g.input("key", DType::I64, Shape::scalar());
    let params: Vec<ValueId> =
        SHAPES.iter().enumerate().map(|(k, s)| g.input(&format!("p{k}"), DType::F32, *s)).collect();
    let o = DpOptions {
        clip_norm: clip,
        noise_multiplier: sigma,
        key: Some(key),
        pfor: PforOptions::strict(),
        ..DpOptions::default()
    };
    let r = if loop_ref {
        dp_gradients_loop(&mut g, loss, &[x, y], &params, &o)?
    } else {
        dp_gradients(&mut g, loss, &[x, y], &params, &o)?
    };
    Ok(Step { graph: g, x, y, key, params, grads: r.grads, losses: r.losses })
}

/// Synthetic data: image = 0.5 · template[label] + noise, so the labels are learnable.
fn batch(templates: &[ndarray::ArrayD<f32>], n: usize, seed: u64) -> Result<(Tensor, Tensor)> {
    let y = Tensor::rand_uniform(DType::I64, &[n], 0.0, 10.0, seed)?;
    let mut x = Tensor::randn(&[n, 28, 28, 1], seed + 1)?.to_array::<f32>()?;
    for (i, &label) in y.to_array::<i64>()?.iter().enumerate() {
        let mut row = x.index_axis_mut(ndarray::Axis(0), i);
        row.zip_mut_with(&templates[label as usize], |a, &t| *a = 0.5 * *a + t);
    }
    Ok((Tensor::from_array(x), y))
}

/// log(exp(a) + exp(b)) without overflow.
fn log_add(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    if lo == f64::NEG_INFINITY { hi } else { hi + (lo - hi).exp().ln_1p() }
}

/// ε for δ after `steps` steps of the sampled Gaussian mechanism (rate q, noise σ): RDP at
/// integer orders α, `log A_α = log Σ_k C(α,k) (1-q)^(α-k) q^k exp((k²-k)/(2σ²))`, then
/// `ε = min_α steps · log A_α / (α-1) + log(1/δ) / (α-1)`.
fn epsilon(q: f64, sigma: f64, steps: usize, delta: f64) -> f64 {
    let mut best = f64::INFINITY;
    for alpha in 2..=256u32 {
        let mut log_a = f64::NEG_INFINITY;
        let mut log_binom = 0.0f64;
        for k in 0..=alpha {
            if k > 0 {
                log_binom += ((alpha - k + 1) as f64).ln() - (k as f64).ln();
            }
            let kf = k as f64;
            let term =
                log_binom + (alpha - k) as f64 * (1.0 - q).ln() + kf * q.ln() + (kf * kf - kf) / (2.0 * sigma * sigma);
            log_a = log_add(log_a, term);
        }
        let a = (alpha - 1) as f64;
        best = best.min(steps as f64 * log_a / a + (1.0 / delta).ln() / a);
    }
    best
}

fn main() -> Result<()> {
    pfor::tune_system_allocator()?;
    let argv: Vec<String> = std::env::args().collect();
    let steps: usize =
        argv.iter().position(|a| a == "--steps").and_then(|i| argv.get(i + 1)?.parse().ok()).unwrap_or(200);
    let (n, dataset, clip, sigma, lr) = (64usize, 60_000usize, 1.0, 0.8, 0.1f32);
    let mut params: Vec<Tensor> = SHAPES
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let fan_in: usize = if s.len() > 1 { s[..s.len() - 1].iter().product() } else { 100 };
            Ok(Tensor::from_array(Tensor::randn(s, 10 + k as u64)?.to_array::<f32>()? * (1.0 / (fan_in as f32).sqrt())))
        })
        .collect::<Result<_>>()?;
    let templates: Vec<ndarray::ArrayD<f32>> = (0..10)
        .map(|c| Tensor::randn(&[28, 28, 1], 100 + c).and_then(|t| t.to_array::<f32>()))
        .collect::<Result<_>>()?;

    // The check: one batch, noise off, vectorized with rewrites vs the loop.
    let (xb, yb) = batch(&templates, 8, 7)?;
    let mut check = Vec::new();
    for loop_ref in [false, true] {
        let s = step_graph(8, clip, 0.0, loop_ref)?;
        let mut feeds = vec![(s.x, xb.clone()), (s.y, yb.clone()), (s.key, Tensor::scalar(0i64))];
        feeds.extend(s.params.iter().copied().zip(params.iter().cloned()));
        check.push(run_once(&s.graph, &s.grads, &feeds)?);
    }

    let s = step_graph(n, clip, sigma, false)?;
    let mut sess = Session::new(&s.graph, &[s.grads.as_slice(), &[s.losses]].concat())?;
    println!("DP-SGD on the MNIST CNN (3.27 M params), synthetic data: batch {n} of {dataset}, {steps} steps, lr {lr}");
    println!("privacy: clip norm C = {clip}, noise multiplier σ = {sigma} (noise std σ·C = {})", sigma * clip);
    let t0 = Instant::now();
    let (mut first, mut last) = (None, 0.0);
    for step in 0..steps {
        let (x, y) = batch(&templates, n, 1000 + 2 * step as u64)?;
        let mut feeds = vec![(s.x, x), (s.y, y), (s.key, Tensor::scalar(step as i64))];
        feeds.extend(s.params.iter().copied().zip(params.iter().cloned()));
        let out = sess.run(&feeds)?;
        let l = out[8].to_f64_vec().iter().sum::<f64>() / n as f64;
        first.get_or_insert(l);
        last = l;
        for (p, gr) in params.iter_mut().zip(&out[..8]) {
            let upd = p.to_array::<f32>()? - gr.to_array::<f32>()? * lr;
            *p = Tensor::from_array(upd);
        }
        let done = (step + 1) * 40 / steps;
        eprint!("\r[{}{}] step {}/{steps}  loss {l:.3}", "#".repeat(done), " ".repeat(40 - done), step + 1);
        std::io::stderr().flush().ok();
        if (step + 1) % 50 == 0 || step + 1 == steps {
            eprintln!();
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "loss: {:.3} (first batch) -> {last:.3} (last batch); {:.0} examples/s",
        first.unwrap_or(f64::NAN),
        (steps * n) as f64 / secs
    );
    let q = n as f64 / dataset as f64;
    println!(
        "privacy spent: ε = {:.2} at δ = 1e-5 (sampling rate q = {q:.5}, σ = {sigma}, {steps} steps; RDP accountant)",
        epsilon(q, sigma, steps, 1e-5)
    );
    let verdict = Verdict::compare(&check[0], &check[1], 1e-4);
    println!("{verdict}");
    verdict.into_result()
}
