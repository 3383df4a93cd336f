//! ONNX's `light` real architectures (`onnx/backend/test/data/light`, copied into the cache by
//! `tools/onnx_testdata.sh`): AlexNet, DenseNet-121, Inception v1 / v2, ResNet-50, ShuffleNet,
//! SqueezeNet, VGG-19, ZFNet-512 at opset 9 and 224×224, their weights made by
//! `ConstantOfShape` nodes.
//!
//! - `onnx_light_models`: every model is imported, its weights lifted to parameters
//!   ([`Model::lift_constants`]) and fed at run time, and run on ONNX's own dummy input
//!   (`arange(n) / n`, as its backend runner makes it) against the shipped expected output at
//!   ONNX's tolerances; the plain import (weights folded into constants) is run too. Each
//!   model's time is printed. Under pfor they are checked by `onnx_light_per_example_grads`
//!   (below) and `examples/onnx_per_example_grads.rs`, not here (a debug build runs each
//!   224×224 model once per path in seconds; n = 3 more copies of each would not fit CI).
//! - `onnx_light_per_example_grads`: per-example gradients w.r.t. all lifted weights, strict
//!   `pfor` vs the loop of gradients, for the architectures whose graph runs at a smaller image
//!   (SqueezeNet and DenseNet-121 end in a global average pool; the others have a 7×7 average
//!   pool or fixed reshapes that pin 224×224), and ResNet-50 at 224×224 with n = 2.

use super::node_suite::{Outcome, Tally, is_unsupported, read_tensor, suite_cases, suite_dir};
use pfor::api::{per_example_gradients_loop, per_example_gradients_with};
use pfor::onnx::{self, Model};
use pfor::prelude::*;
use pfor::vectorize::PforOptions;
use std::path::Path;
use std::time::Instant;

/// ONNX's tolerances for the light models (`onnx.backend.test.case.model`).
fn tolerances(model: &str) -> (f64, f64) {
    if model == "densenet121" { (2e-3, 1e-7) } else { (1e-3, 1e-7) }
}

/// ONNX's backend-runner dummy input for a model input: `arange(n) / n` in f32.
fn dummy_input(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(shape, (0..n).map(|i| i as f32 / n as f32).collect::<Vec<f32>>()).expect("dummy input")
}

/// The model's single image input and its fixed shape.
fn image_shape(m: &Model) -> Result<Vec<usize>, String> {
    let [(name, ty)] = m.inputs() else { return Err(format!("{} inputs, one expected", m.inputs().len())) };
    ty.shape.as_fixed().ok_or_else(|| format!("input '{name}' has no fixed shape: {:?}", ty.shape))
}

/// Runs the lifted model with its weights as run-time inputs, and the plain import.
fn run_light(path: &Path) -> Outcome {
    let file = path.file_name().unwrap().to_string_lossy().to_string();
    let name = file.trim_start_matches("light_").trim_end_matches(".onnx");
    let expected = match read_tensor(&path.with_file_name(format!("light_{name}_output_0.pb"))) {
        Ok((t, _)) => t,
        Err(e) => return Outcome::Fail(format!("expected output: {e}")),
    };
    let (rtol, atol) = tolerances(name);
    let run = || -> Result<(), Error> {
        let plain = onnx::load(path)?;
        let x = dummy_input(&image_shape(&plain).map_err(Error::InvalidArgument)?);
        let lifted = plain.clone().lift_constants()?;
        // weights as parameters, fed at run time
        let mut g = Graph::new();
        let xi = g.input("x", DType::F32, Shape::fixed(x.shape()));
        let mut feeds = vec![(xi, x.clone())];
        let params: Vec<ValueId> = lifted
            .parameters()
            .iter()
            .map(|(n, t)| {
                let v = g.input(n, t.dtype(), Shape::fixed(t.shape()));
                feeds.push((v, t.clone()));
                v
            })
            .collect();
        let out = lifted.call_with_params(&mut g, &[xi], &params)?;
        let got = run_once(&g, &out, &feeds)?;
        pfor::tensor::assert_close(&got[0], &expected, rtol, atol)
            .map_err(|e| Error::InvalidArgument(format!("lifted ({} parameters): {e}", params.len())))?;
        // the plain import: weights folded into constants
        let mut g = Graph::new();
        let xi = g.input("x", DType::F32, Shape::fixed(x.shape()));
        let out = plain.call(&mut g, &[xi])?;
        let got = run_once(&g, &out, &[(xi, x)])?;
        pfor::tensor::assert_close(&got[0], &expected, rtol, atol)
            .map_err(|e| Error::InvalidArgument(format!("plain import: {e}")))
    };
    match run() {
        Ok(()) => Outcome::Pass,
        Err(e) if is_unsupported(&e) => Outcome::Unsupported(e.to_string()),
        Err(e) => Outcome::Fail(e.to_string()),
    }
}

#[test]
fn onnx_light_models() {
    let Some(root) = suite_dir("light") else { return };
    let mut tally = Tally::default();
    for path in suite_cases(&root).into_iter().filter(|p| p.extension().is_some_and(|e| e == "onnx")) {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let t = Instant::now();
        let outcome = run_light(&path);
        eprintln!("  {name}: {outcome:?} in {:.1} s", t.elapsed().as_secs_f64());
        tally.add(&name, (outcome, None), false);
    }
    tally.report("light", &root);
}

/// Per-example gradients of light model `name` at `image`×`image`, n examples, w.r.t. all its
/// lifted weights: strict `pfor` vs the loop of gradients. Returns the parameter count and the
/// largest relative difference.
fn per_example_grads(root: &Path, name: &str, image: usize, n: usize) -> Result<(usize, f64)> {
    let m = onnx::load(root.join(format!("light_{name}.onnx")))?;
    let input = m.inputs()[0].0.clone();
    let m = m.with_input_shape(&input, &[1, 3, image, image])?.lift_constants()?;
    let mut g = Graph::new();
    // the shipped weights are all 0.02 (every channel alike): fresh ones, so channels differ
    let params: Vec<ValueId> = m.random_parameters(7)?.into_iter().map(|t| g.constant(t)).collect();
    let xs = g.constant(Tensor::randn(&[n, 1, 3, image, image], 1)?);
    // the loss: a fixed random weighting of the outputs
    let mut probe = Graph::new();
    let xi = probe.input("x", DType::F32, [1, 3, image, image]);
    let probe_out = m.call(&mut probe, &[xi])?[0];
    let out_shape = probe.shape(probe_out)?.as_fixed().expect("static output shape");
    let w = g.constant(Tensor::randn(&out_shape, 3)?);
    let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| -> Result<ValueId> {
        let out = m.call_with_params(g, &[rows[0]], p)?;
        let l = g.mul(out[0], w)?;
        g.sum_all(l)
    };
    let fast = per_example_gradients_with(&mut g, &PforOptions::strict(), loss, &[xs], &params)?;
    let slow = per_example_gradients_loop(&mut g, loss, &[xs], &params)?;
    let mut fetch = fast.clone();
    fetch.extend(&slow);
    let r = run_once(&g, &fetch, &[])?;
    let k = fast.len();
    let mut worst = 0.0f64;
    let mut nonzero = 0;
    for j in 0..k {
        let (a, b) = (r[j].to_f64_vec(), r[k + j].to_f64_vec());
        let scale = b.iter().fold(0.0f64, |s, x| s.max(x.abs())).max(1e-30);
        let d = a.iter().zip(&b).fold(0.0f64, |s, (x, y)| s.max((x - y).abs()));
        worst = worst.max(d / scale);
        nonzero += usize::from(b.iter().any(|x| *x != 0.0));
    }
    assert!(nonzero * 2 > k, "{name}: only {nonzero} of {k} weights have a nonzero gradient");
    Ok((k, worst))
}

#[test]
fn onnx_light_per_example_grads() {
    let Some(root) = suite_dir("light") else { return };
    // ResNet-50's final 7×7 average pool pins it to 224×224: n = 2 keeps it to seconds
    for (name, image, n) in [("squeezenet", 32, 3), ("densenet121", 32, 2), ("resnet50", 224, 2)] {
        let t = Instant::now();
        let (k, d) = per_example_grads(&root, name, image, n).unwrap_or_else(|e| panic!("{name}: {e}"));
        eprintln!(
            "  {name} at {image}x{image}, n = {n}: per-example gradients of {k} weights, strict pfor vs the loop: \
             max relative difference {d:.1e} ({:.1} s)",
            t.elapsed().as_secs_f64()
        );
        assert!(d < 1e-4, "{name}: per-example gradients differ from the loop by {d:.1e} (relative)");
    }
}

#[test]
fn squeezenet_fire_concats_write_their_slices() {
    // every fire module's `expand1x1 ‖ expand3x3` concat runs as one step whose two conv
    // chains write their channel slices, with results bit-identical to the unfused plan
    let Some(root) = suite_dir("light") else { return };
    let m = onnx::load(root.join("light_squeezenet.onnx")).unwrap();
    let input = m.inputs()[0].0.clone();
    let m = m.with_input_shape(&input, &[1, 3, 64, 64]).unwrap().lift_constants().unwrap();
    let profiled = |fuse: bool| ExecOptions { fuse, profile: true, ..ExecOptions::default() };
    for n in [1, 3] {
        let mut g = Graph::new();
        // fresh weights (the shipped ones are all 0.02: every channel alike)
        let params: Vec<ValueId> = m.random_parameters(7).unwrap().into_iter().map(|t| g.constant(t)).collect();
        let xs = g.input("xs", DType::F32, [n, 1, 3, 64, 64]);
        let ys = pfor::api::vectorized_map(&mut g, |g, x| m.call_with_params(g, &[x[0]], &params), &[xs]).unwrap();
        let feeds = [(xs, Tensor::rand_uniform(DType::F32, &[n, 1, 3, 64, 64], 0.0, 1.0, 5).unwrap())];
        let mut fused = Session::with_options(&g, &ys, profiled(true)).unwrap();
        let mut plain = Session::with_options(&g, &ys, profiled(false)).unwrap();
        let (got, want) = (fused.run(&feeds).unwrap(), plain.run(&feeds).unwrap());
        let bits = |t: &Tensor| t.to_array::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<u32>>();
        assert!(bits(&got[0]) == bits(&want[0]), "n = {n}: fused and unfused differ");
        let kinds: Vec<String> = fused.profile().entries().into_iter().map(|e| e.kind.clone()).collect();
        let count = |k: &str| kinds.iter().filter(|e| *e == k).count();
        assert_eq!(count("fused_concat"), 8, "n = {n}: the 8 fire modules' concats");
        assert_eq!(count("concat"), 0, "n = {n}: no concat copies left");
    }
}
