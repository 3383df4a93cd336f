//! Per-example gradients of an MNIST CNN (conv5x5x32-relu-pool, conv5x5x64-relu-pool,
//! dense 3136→1024-relu, dense→10, softmax cross-entropy): the gradient of EACH example's
//! loss w.r.t. all weights (what differential privacy and gradient-norm diagnostics need),
//! with `pfor` vs a loop of gradients, checking they agree (the last line is the verdict;
//! the process exits non-zero on a mismatch).
//!
//! Run with `cargo run --release --example per_example_grads`.

use std::time::Instant;

use pfor::api::{per_example_gradients_loop, per_example_gradients_with};
use pfor::prelude::*;
use pfor::tensor::Verdict;
use pfor::vectorize::PforOptions;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

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

fn main() -> Result<()> {
    // keep freed tensor buffers mapped (see pfor::kernels::alloc); every mode alike
    pfor::tune_system_allocator()?;
    let n = 32;
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, 28, 28, 1]);
    let y = g.input("y", DType::I64, [n]);
    let shapes: [&[usize]; 8] =
        [&[5, 5, 1, 32], &[32], &[5, 5, 32, 64], &[64], &[3136, 1024], &[1024], &[1024, 10], &[10]];
    let mut params = Vec::new();
    for (k, s) in shapes.iter().enumerate() {
        let fan_in: usize = if s.len() > 1 { s[..s.len() - 1].iter().product() } else { 100 };
        let t = Tensor::randn(s, 10 + k as u64)?.to_array::<f32>()? * (1.0 / (fan_in as f32).sqrt());
        params.push(g.constant(Tensor::from_array(t)));
    }
    let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| -> Result<ValueId> {
        let xi = g.expand_dims(rows[0], 0)?; // one image [1,28,28,1]
        let yi = g.reshape(rows[1], &[1])?;
        let l = logits(g, p, xi)?;
        let l = g.sparse_softmax_cross_entropy(yi, l)?;
        g.sum_all(l)
    };
    let before = g.num_nodes();
    let fast = per_example_gradients_with(&mut g, &PforOptions::strict(), loss, &[x, y], &params)?;
    println!("vectorized per-example gradient graph: {} nodes (no loop, no fallback)", g.num_nodes() - before);
    let slow = per_example_gradients_loop(&mut g, loss, &[x, y], &params)?;
    let feeds = [(x, Tensor::randn(&[n, 28, 28, 1], 1)?), (y, Tensor::rand_uniform(DType::I64, &[n], 0.0, 10.0, 2)?)];

    let time = |outs: &[ValueId]| -> Result<(Vec<Tensor>, f64)> {
        let mut s = Session::new(&g, outs)?;
        let mut r = s.run(&feeds)?;
        let t = Instant::now();
        for _ in 0..3 {
            // Drop the previous result first: the session then recycles its (large) buffers
            // instead of page-faulting fresh memory (see `ExecOptions::recycle_buffers`).
            drop(std::mem::take(&mut r));
            r = s.run(&feeds)?;
        }
        Ok((r, t.elapsed().as_secs_f64() / 3.0))
    };
    let (a, ta) = time(&fast)?;
    let (b, tb) = time(&slow)?;
    for (k, (ga, gb)) in a.iter().zip(&b).enumerate() {
        let d = Verdict::compare(std::slice::from_ref(ga), std::slice::from_ref(gb), 0.0).max_diff;
        println!("param {k}: per-example gradient {:?}, max |pfor - loop| = {d:.2e}", ga.shape());
    }
    // Per-example gradient norms (e.g. for DP-SGD clipping).
    let norms: Vec<f64> = (0..n)
        .map(|i| {
            a.iter()
                .map(|t| t.to_f64_vec().chunks(t.len() / n).nth(i).unwrap().iter().map(|v| v * v).sum::<f64>())
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    println!("gradient norms of the first 4 examples: {:?}", &norms[..4]);
    println!("pfor: {:.1} examples/s   loop: {:.1} examples/s   speedup {:.1}x", n as f64 / ta, n as f64 / tb, tb / ta);
    // f32 gradients: the batched kernels may sum in another order than the loop's
    let verdict = Verdict::compare(&a, &b, 1e-4);
    println!("{verdict}");
    verdict.into_result()
}
