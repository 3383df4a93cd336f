//! Profiling driver for an imported ONNX image model (issue 18's ORT comparison).
//!
//! `cargo run --release --example onnx_profile -- MODEL.onnx [pfor|loop|hand] [n] [reps]`
//! imports the model at batch 1 (input `[1, 3, 224, 224]`, or `PFOR_EXAMPLE=1,1,28,28`),
//! builds one mode at batch `n` as `bench_report --only ONNX` does, and prints images/s (best
//! of `reps` runs, wall time) and the least process CPU time of a run (robust to a loaded
//! machine). With `PFOR_PROFILE=30` the executor prints its top nodes.

mod cpu_clock;

use std::time::Instant;

use pfor::onnx::{self, Model};
use pfor::prelude::*;

/// pfor's caching, 64-byte-aligned allocator for tensor buffers (`PFOR_NO_BUFFER_CACHE`: glibc's).
#[global_allocator]
static ALLOC: pfor::TensorAllocator = pfor::TensorAllocator;

fn main() -> Result<()> {
    pfor::tune_system_allocator()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().ok_or_else(|| Error::InvalidArgument("onnx_profile: MODEL.onnx".into()))?;
    let mode = args.get(1).map(String::as_str).unwrap_or("pfor");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(8);
    let reps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(5);
    let example: Vec<usize> = std::env::var("PFOR_EXAMPLE")
        .ok()
        .map(|s| s.split(',').filter_map(|d| d.parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 3, 224, 224]);
    let model = onnx::load(path)?;
    let name = model.inputs().first().map(|(n, _)| n.clone()).unwrap_or_default();
    let at = |m: &Model, dims: &[usize]| m.clone().with_input_shape(&name, dims);
    let one = at(&model, &example)?;
    let mut g = Graph::new();
    let mut dims = vec![n];
    dims.extend(&example);
    let x = g.input("x", DType::F32, Shape::fixed(&dims));
    let out = match mode {
        "pfor" => pfor::api::vectorized_map_with(&mut g, &PforOptions::strict(), |g, xs| one.call(g, &[xs[0]]), &[x])?,
        "loop" => for_loop(&mut g, n, |g, i| {
            let xi = g.gather(x, i, 0)?;
            one.call(g, &[xi])
        })?,
        _ => {
            let mut bd = vec![n];
            bd.extend(&example[1..]);
            let batch = at(&model, &bd)?;
            let shape: Vec<i64> = bd.iter().map(|&d| d as i64).collect();
            let xb = g.reshape(x, &shape)?;
            batch.call(&mut g, &[xb])?
        }
    };
    let mut session = Session::new(&g, &out)?;
    let feed = Tensor::rand_uniform(DType::F32, &dims, 0.0, 1.0, 300 + n as u64)?;
    session.run(&[(x, feed.clone())])?;
    let (mut best, mut cpu) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..reps {
        let (t, c) = (Instant::now(), cpu_clock::process_cpu_seconds());
        session.run(&[(x, feed.clone())])?;
        best = best.min(t.elapsed().as_secs_f64());
        cpu = cpu.min(cpu_clock::process_cpu_seconds() - c);
    }
    println!(
        "{mode} n={n}: {:.1} images/s (best of {reps}: {:.2} ms; least CPU time of a run: {:.2} ms)",
        n as f64 / best,
        best * 1e3,
        cpu * 1e3
    );
    Ok(())
}
