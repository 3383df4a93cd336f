//! The ONNX table (`--only ONNX`): batched inference of models imported from ONNX files, with
//! ONNX Runtime on the same files (`benches/peers/peer_ort.py`, peer `ort`).
//!
//! Models: W2's MNIST CNN exported from PyTorch with real initializers
//! (`benches/peers/export_models.py` writes `w2_cnn.onnx` into `$PFOR_MODELS`, else
//! `~/.cache/pfor/models`), and ONNX's light SqueezeNet and ResNet-50 (the cache of
//! `tools/onnx_testdata.sh`: `$PFOR_ONNX_TESTDATA`, else `~/.cache/pfor/onnx-testdata`). A model
//! whose file is missing is skipped with a line saying how to make it.
//!
//! Modes, all on x `[n, 1, C, H, W]` (n images, each the per-example model's batch-1 input):
//! - `pfor`: `vectorized_map` (strict: no fallback) of the imported per-example model, the
//!   batch-1 graph as the file has it;
//! - `loop`: the loop of that model over the n images;
//! - `batched import`: pfor's executor on the model imported at batch n (`–` where the graph
//!   pins its batch at 1, as ResNet-50 light's flatten does);
//! - ORT: `batched` (the batched model, symbolic batch dim) and `sequential` (n runs of one
//!   image), from the peers' CSVs.
//!
//! `ONNX_MODELS=w2,squeezenet,resnet50` picks models and `ONNX_BATCHES=8,32` batch sizes
//! (defaults: all three; 1, 16, 64 for W2 and 1, 8, 32 for the others, as the peer).
//!
//! Same data on both sides: the peer writes an input (n = 2) and ORT's output on it; the last
//! lines run pfor's `vectorized_map` on that input and print the largest difference.

use std::path::{Path, PathBuf};

use pfor::onnx::{self, Model};
use pfor::prelude::*;

use super::peers::{cell, ratio};
use super::workloads::{Mode, Workload};
use super::{Args, rates};

/// One model of the table.
struct Spec {
    /// The name `ONNX_MODELS` picks it by.
    key: &'static str,
    /// The peers' `workload` column.
    workload: &'static str,
    title: &'static str,
    /// The file, and how to make it when it is missing.
    path: PathBuf,
    how: &'static str,
    /// Per-example input `[1, C, H, W]`.
    example: [usize; 4],
    sizes: &'static [usize],
}

/// A light model of ONNX's test data (224x224 images, written by `tools/onnx_testdata.sh`).
fn light(key: &'static str, workload: &'static str, title: &'static str) -> Spec {
    Spec {
        key,
        workload,
        title,
        path: cache("PFOR_ONNX_TESTDATA", "onnx-testdata").join("light").join(format!("light_{key}.onnx")),
        how: "run `bash tools/onnx_testdata.sh`",
        example: [1, 3, 224, 224],
        sizes: &[1, 8, 32],
    }
}

fn cache(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/pfor").join(default)
    })
}

fn specs() -> Vec<Spec> {
    let models = cache("PFOR_MODELS", "models");
    let export = "run `benches/peers/run.sh ort` (or export_models.py with the peers' venv)";
    vec![
        Spec {
            key: "w2",
            workload: "W2_mnist_cnn_onnx",
            title: "W2 MNIST CNN exported from PyTorch",
            path: models.join("w2_cnn.onnx"),
            how: export,
            example: [1, 1, 28, 28],
            sizes: &[1, 16, 64],
        },
        light("squeezenet", "squeezenet_light", "SqueezeNet (ONNX light, 224x224)"),
        light("resnet50", "resnet50_light", "ResNet-50 (ONNX light, 224x224)"),
    ]
}

/// The model with its (single) input declared as `dims`.
fn at_shape(model: &Model, dims: &[usize]) -> Result<Model> {
    let name = model
        .inputs()
        .first()
        .map(|(n, _)| n.clone())
        .ok_or_else(|| Error::InvalidArgument("bench_report ONNX: the model has no input".into()))?;
    model.clone().with_input_shape(&name, dims)
}

/// The graph of one mode on x `[n, 1, C, H, W]`: (graph, x, outputs).
fn build(model: &Model, example: [usize; 4], n: usize, mode: Mode) -> Result<(Graph, ValueId, Vec<ValueId>)> {
    let one = at_shape(model, &example)?;
    let mut g = Graph::new();
    let mut dims = vec![n];
    dims.extend(example);
    let x = g.input("x", DType::F32, Shape::fixed(&dims));
    let out = match mode {
        Mode::Pfor => {
            pfor::api::vectorized_map_with(&mut g, &PforOptions::strict(), |g, xs| one.call(g, &[xs[0]]), &[x])?
        }
        Mode::Loop => for_loop(&mut g, n, |g, i| {
            let xi = g.gather(x, i, 0)?;
            one.call(g, &[xi])
        })?,
        Mode::Hand => {
            let batch = at_shape(model, &[n, example[1], example[2], example[3]])?;
            let xb = g.reshape(x, &[n as i64, example[1] as i64, example[2] as i64, example[3] as i64])?;
            batch.call(&mut g, &[xb])?
        }
    };
    Ok((g, x, out))
}

fn workload(model: &Model, example: [usize; 4], n: usize, mode: Mode) -> Result<Workload> {
    let (g, x, out) = build(model, example, n, mode)?;
    let mut dims = vec![n];
    dims.extend(example);
    Ok(Workload {
        session: Session::new(&g, &out)?,
        feeds: vec![(x, Tensor::rand_uniform(DType::F32, &dims, 0.0, 1.0, 300 + n as u64)?)],
        units: n as f64,
    })
}

pub(super) fn onnx_table(a: &Args) -> Result<()> {
    println!("\n### Batched inference of imported ONNX models: pfor vs ONNX Runtime (images/s)\n");
    println!(
        "pfor = `vectorized_map` of the per-example (batch-1) model; batched import = the model imported at \
         batch n, run by pfor; ORT = onnxruntime on the batched model (CPU, all cores)\n"
    );
    println!(
        "| model | n | pfor | loop | batched import | ORT batched | ORT sequential | pfor/loop | pfor/ORT batched | peak MB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut checks = Vec::new();
    // `ONNX_MODELS=w2,resnet50` picks models, `ONNX_BATCHES=8,32` batch sizes (as the peer's
    // runner: ORT_MODELS)
    let list =
        |var: &str| std::env::var(var).ok().map(|v| v.split(',').map(|x| x.trim().to_lowercase()).collect::<Vec<_>>());
    let (models, batches) = (list("ONNX_MODELS"), list("ONNX_BATCHES"));
    for spec in specs() {
        if models.as_ref().is_some_and(|m| !m.iter().any(|k| k == spec.key)) {
            continue;
        }
        let sizes: Vec<usize> =
            batches.as_ref().map_or_else(|| spec.sizes.to_vec(), |b| b.iter().filter_map(|x| x.parse().ok()).collect());
        if !spec.path.exists() {
            println!("| {} | – | {} not found: {} | | | | | | | |", spec.title, spec.path.display(), spec.how);
            a.progress.inc(sizes.len() as u64);
            continue;
        }
        let model = onnx::load(&spec.path)?;
        for &n in &sizes {
            let row = a.row(spec.workload, n);
            let mut ws = Vec::new();
            for mode in Mode::ALL {
                ws.push(match workload(&model, spec.example, n, mode) {
                    Ok(w) => Some(w),
                    // the batched import of a graph that pins batch 1: no number
                    Err(_) if mode == Mode::Hand => None,
                    Err(e) => return Err(e),
                });
            }
            let r = rates(a, &mut ws);
            drop(ws);
            let ort = ["batched", "sequential"].map(|m| a.peers.get("ort", spec.workload, m, n));
            println!(
                "| {} | {n} | {} | {} | {} | {} | {} | {} | {} | {} |",
                spec.title,
                cell(r[0], 1),
                cell(r[1], 1),
                cell(r[2], 1),
                cell(ort[0], 1),
                cell(ort[1], 1),
                ratio(r[0], r[1]),
                ratio(r[0], ort[0]),
                row.end(a)
            );
        }
        if let Some(dir) = &a.peers.source {
            checks.push(check(&model, &spec, dir));
        }
    }
    for c in checks {
        println!("{c}");
    }
    Ok(())
}

fn read_f32(path: &Path) -> Option<Vec<f32>> {
    let bytes = std::fs::read(path).ok()?;
    Some(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

/// pfor's `vectorized_map` on the input the ORT peer saved, against ORT's output on it.
fn check(model: &Model, spec: &Spec, dir: &Path) -> String {
    let file = |what: &str| dir.join(format!("ort_check_{}_{what}.f32", spec.workload));
    let (Some(input), Some(expected)) = (read_f32(&file("input")), read_f32(&file("output"))) else {
        return format!("\n{}: no ORT check files in {} (peer `ort` not run)", spec.title, dir.display());
    };
    let run = || -> Result<f64> {
        let per: usize = spec.example.iter().product();
        let n = input.len() / per.max(1);
        let (g, x, out) = build(model, spec.example, n, Mode::Pfor)?;
        let mut dims = vec![n];
        dims.extend(spec.example);
        let got = run_once(&g, &out, &[(x, Tensor::from_vec(&dims, input.clone())?)])?;
        let got = got[0].to_f64_vec();
        if got.len() != expected.len() {
            return Err(Error::InvalidArgument(format!("{} outputs, ORT wrote {}", got.len(), expected.len())));
        }
        Ok(got.iter().zip(&expected).map(|(a, &b)| (a - f64::from(b)).abs()).fold(0.0, f64::max))
    };
    let scale = expected.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    match run() {
        Ok(d) => format!(
            "\n{}: pfor vs ORT on the same input (n = {}): max |diff| = {d:.2e} (max |ORT output| = {scale:.3e})",
            spec.title,
            input.len() / spec.example.iter().product::<usize>().max(1)
        ),
        Err(e) => format!("\n{}: pfor vs ORT check failed: {e}", spec.title),
    }
}
