//! The input jacobian of an imported ONNX model: `tests/data/mlp.onnx` (Gemm → Relu → MatMul
//! with bias → Softmax, its batch dim symbolic) or any single-input model given with `--model`,
//! run on a batch of `--n` random rows; `d probs / d x` (`[n, 3, n, 4]` for the MLP) once with
//! strict `pfor` over the rows of reverse-mode gradients and once with the loop of VJPs (one
//! backward pass per output element), checking they agree (the last line is the verdict; the
//! process exits non-zero on a mismatch).
//!
//! Run with `cargo run --release --example onnx_jacobian -- [--model PATH] [--n 16]`.

use std::time::Instant;

use pfor::api::{jacobian_loop, jacobian_with};
use pfor::onnx;
use pfor::prelude::*;
use pfor::tensor::Verdict;
use pfor::vectorize::PforOptions;

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned()).unwrap_or_else(|| default.to_string())
}

fn main() -> Result<()> {
    let path = arg("--model", concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mlp.onnx"));
    let n: usize = arg("--n", "16").parse().map_err(|e| Error::InvalidArgument(format!("--n: {e}")))?;
    let model = onnx::load(&path)?;
    let [(name, ty)] = model.inputs() else {
        return Err(Error::InvalidArgument(format!("{path}: {} inputs, this example takes one", model.inputs().len())));
    };
    // symbolic (and unknown) dims take the batch size
    let dims: Vec<usize> = ty.shape.dims().iter().map(|d| d.value().unwrap_or(n)).collect();
    println!("{path}: input '{name}' {:?} -> {} output(s), opset {}", dims, model.outputs().len(), model.opset());

    let mut g = Graph::new();
    let x = g.input(name, ty.dtype, Shape::fixed(&dims));
    let y = model.call(&mut g, &[x])?[0];
    let fast = jacobian_with(&mut g, y, x, &PforOptions::strict())?;
    let slow = jacobian_loop(&mut g, y, x)?;
    let feeds = [(x, Tensor::randn(&dims, 1)?.cast(ty.dtype))];
    let time = |v: ValueId| -> Result<(Tensor, f64)> {
        let mut s = Session::new(&g, &[v])?;
        let mut r = s.run(&feeds)?;
        let t = Instant::now();
        for _ in 0..5 {
            r = s.run(&feeds)?;
        }
        Ok((r.remove(0), t.elapsed().as_secs_f64() / 5.0))
    };
    let (a, ta) = time(fast)?;
    let (b, tb) = time(slow)?;
    println!("jacobian d y / d x: {:?}", a.shape());
    println!("pfor: {:.3} ms   loop of VJPs: {:.3} ms   speedup {:.1}x", ta * 1e3, tb * 1e3, tb / ta);
    let verdict = Verdict::compare(&[a], &[b], 1e-5);
    println!("{verdict}");
    verdict.into_result()
}
