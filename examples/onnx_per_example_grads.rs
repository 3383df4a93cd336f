//! Per-example gradients of a real architecture imported from ONNX: one of ONNX's `light`
//! models (SqueezeNet by default; `--model resnet50`, `densenet121`, `inception_v2`,
//! `shufflenet`, ...), its `ConstantOfShape`-made weights lifted to parameters
//! (`Model::lift_constants`) and freshly initialized (`Model::random_parameters`; the shipped
//! ones are all 0.02), the gradient of EACH example's loss (a fixed random weighting of the
//! class probabilities) w.r.t. ALL weights — with strict `pfor` (no fallback) vs the loop of
//! gradients, checking they agree (the last line is the verdict; the process exits non-zero
//! on a mismatch).
//!
//! The models come from the cache `tools/onnx_testdata.sh` writes (`$PFOR_ONNX_TESTDATA`,
//! else `~/.cache/pfor/onnx-testdata`). Run with
//! `cargo run --release --example onnx_per_example_grads -- [--model NAME] [--n 8] [--image 224]`
//! (`--image` below 224 only for the models that end in a global average pool: SqueezeNet,
//! DenseNet-121).

use std::path::PathBuf;
use std::time::Instant;

use pfor::api::{per_example_gradients_loop, per_example_gradients_with};
use pfor::onnx;
use pfor::prelude::*;
use pfor::tensor::Verdict;
use pfor::vectorize::PforOptions;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned()).unwrap_or_else(|| default.to_string())
}

fn main() -> Result<()> {
    pfor::tune_system_allocator()?;
    let name = arg("--model", "squeezenet");
    let n: usize = arg("--n", "8").parse().map_err(|e| Error::InvalidArgument(format!("--n: {e}")))?;
    let image: usize = arg("--image", "224").parse().map_err(|e| Error::InvalidArgument(format!("--image: {e}")))?;
    let cache = std::env::var_os("PFOR_ONNX_TESTDATA").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/pfor/onnx-testdata")
    });
    let path = cache.join("light").join(format!("light_{name}.onnx"));
    if !path.exists() {
        return Err(Error::InvalidArgument(format!(
            "{} not found: run `bash tools/onnx_testdata.sh` first (it caches ONNX's light models)",
            path.display()
        )));
    }
    let t0 = Instant::now();
    let model = onnx::load(&path)?;
    let input = model.inputs()[0].0.clone();
    let model = model.with_input_shape(&input, &[1, 3, image, image])?.lift_constants()?;
    let weights = model.random_parameters(7)?;
    let count: usize = weights.iter().map(Tensor::len).sum();
    println!(
        "{name}: {} weight tensors ({count} weights) lifted to parameters, imported in {:.2} s",
        weights.len(),
        t0.elapsed().as_secs_f64()
    );

    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, 1, 3, image, image]);
    let params: Vec<ValueId> = weights.into_iter().map(|t| g.constant(t)).collect();
    let mut probe = Graph::new();
    let xi = probe.input("x", DType::F32, [1, 3, image, image]);
    let out = model.call(&mut probe, &[xi])?[0];
    let out_shape = probe.shape(out)?.as_fixed().ok_or_else(|| Error::InvalidArgument("dynamic output".into()))?;
    let w = g.constant(Tensor::randn(&out_shape, 3)?);
    let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| -> Result<ValueId> {
        let probs = model.call_with_params(g, &[rows[0]], p)?;
        let l = g.mul(probs[0], w)?;
        g.sum_all(l)
    };
    let before = g.num_nodes();
    let fast = per_example_gradients_with(&mut g, &PforOptions::strict(), loss, &[x], &params)?;
    println!("vectorized per-example gradient graph: {} nodes (strict: no loop, no fallback)", g.num_nodes() - before);
    let slow = per_example_gradients_loop(&mut g, loss, &[x], &params)?;
    let feeds = [(x, Tensor::randn(&[n, 1, 3, image, image], 1)?)];

    let time = |outs: &[ValueId]| -> Result<(Vec<Tensor>, f64)> {
        let mut s = Session::new(&g, outs)?;
        let t = Instant::now();
        let r = s.run(&feeds)?;
        Ok((r, t.elapsed().as_secs_f64()))
    };
    let (a, ta) = time(&fast)?;
    let (b, tb) = time(&slow)?;
    // relative to each parameter's largest gradient: f32, and the batched kernels sum in
    // another order than the loop's
    let mut worst = 0.0f64;
    for (ga, gb) in a.iter().zip(&b) {
        let scale = gb.to_f64_vec().iter().fold(0.0f64, |s, v| s.max(v.abs())).max(1e-30);
        let d = Verdict::compare(std::slice::from_ref(ga), std::slice::from_ref(gb), 0.0).max_diff;
        worst = worst.max(d / scale);
    }
    println!(
        "first weight's per-example gradient: {:?}; largest relative |pfor - loop| over all weights: {worst:.2e}",
        a[0].shape()
    );
    println!("pfor: {:.2} examples/s   loop: {:.2} examples/s   speedup {:.1}x", n as f64 / ta, n as f64 / tb, tb / ta);
    let verdict = Verdict { max_diff: worst, tol: 1e-4 };
    println!("{verdict}");
    verdict.into_result()
}
