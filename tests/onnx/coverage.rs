//! Op coverage of the importer on one-node models built in memory: per-op version awareness
//! (opsets 1 to 28, refusals naming op, version and opset), uint64 tensors, and the ops added
//! for the node suite (losses, normalizations, indexing, `Resize`, `Attention`, `DFT`,
//! `AffineGrid`, `GridSample`) against hand-computed values, under `pfor` against the loop,
//! and their gradients against finite differences.

use super::encode::{Attr, FLOAT, Msg, model, node, tensor_f32, tensor_i64, value_info};
use pfor::autodiff::gradients;
use pfor::onnx;
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

/// A one-node model at `opset`: float inputs `x0, x1, ...` of the given shapes, constant
/// initializers, outputs `y0, y1, ...`.
fn one(
    op: &str,
    opset: i64,
    ins: &[&[i64]],
    consts: &[(&str, Msg)],
    node_inputs: &[&str],
    outs: usize,
    attrs: &[Attr],
) -> Vec<u8> {
    let names: Vec<String> = (0..outs).map(|k| format!("y{k}")).collect();
    let out_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let inputs: Vec<Msg> = ins
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let dims: Vec<Result<i64, &str>> = s.iter().map(|&d| Ok(d)).collect();
            value_info(&format!("x{k}"), FLOAT, &dims)
        })
        .collect();
    let outputs: Vec<Msg> = names.iter().map(|nm| value_info(nm, FLOAT, &[])).collect();
    let inits: Vec<Msg> = consts.iter().map(|(_, t)| t.clone()).collect();
    model(opset, &[node(op, "n0", node_inputs, &out_refs, attrs)], &inputs, &outputs, &inits)
}

/// Imports and runs `bytes` on `xs` (fed at run time).
fn run(bytes: &[u8], xs: &[Tensor]) -> Result<Vec<Tensor>> {
    let m = onnx::load_bytes(bytes)?;
    let mut g = Graph::new();
    let ins: Vec<ValueId> =
        xs.iter().enumerate().map(|(k, t)| g.input(&format!("x{k}"), t.dtype(), t.shape().to_vec())).collect();
    let outs = m.call(&mut g, &ins)?;
    let feeds: Vec<(ValueId, Tensor)> = ins.iter().copied().zip(xs.iter().cloned()).collect();
    run_once(&g, &outs, &feeds)
}

fn t(shape: &[usize], v: &[f32]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec()).unwrap()
}

fn close(a: &Tensor, b: &Tensor) {
    pfor::tensor::assert_close(a, b, 1e-5, 1e-6).unwrap();
}

fn unsupported(bytes: &[u8], xs: &[Tensor]) -> String {
    let e = run(bytes, xs).unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { .. }), "{e:?}");
    e.to_string()
}

#[test]
fn opsets_up_to_28_are_accepted_and_29_is_refused() {
    let x = t(&[2], &[-1.0, 2.0]);
    for opset in [7, 13, 24, 25, 26, 27, 28] {
        let r = run(&one("Relu", opset, &[&[2]], &[], &["x0"], 1, &[]), std::slice::from_ref(&x)).unwrap();
        close(&r[0], &t(&[2], &[0.0, 2.0]));
    }
    let e = onnx::load_bytes(&one("Relu", 29, &[&[2]], &[], &["x0"], 1, &[])).unwrap_err().to_string();
    assert!(e.contains("opset 29"), "{e}");
    assert_eq!(onnx::op_version("Cast", 28), Some(28));
    assert_eq!(onnx::op_version("Relu", 28), Some(14));
    assert_eq!(onnx::op_version("Gelu", 19), None);
}

#[test]
fn opsets_below_7_accept_only_op_versions_unchanged_since() {
    // Not has one version (1): opset 1 runs it
    let m = model(
        1,
        &[node("Not", "n0", &["x0"], &["y0"], &[])],
        &[value_info("x0", 9, &[Ok(2)])],
        &[value_info("y0", 9, &[])],
        &[],
    );
    let x = Tensor::from_vec(&[2], vec![true, false]).unwrap();
    let r = run(&m, &[x]).unwrap();
    assert_eq!(r[0], Tensor::from_vec(&[2], vec![false, true]).unwrap());
    // Add-1 (broadcast attributes) differs from Add-7: refused naming op, version, opset
    let e = unsupported(
        &one("Add", 3, &[&[2], &[2]], &[], &["x0", "x1"], 1, &[]),
        &[t(&[2], &[1.0, 2.0]), t(&[2], &[1.0, 2.0])],
    );
    for part in ["Add", "n0", "opset 3", "version 1", "from version 7"] {
        assert!(e.contains(part), "{part} missing in: {e}");
    }
    // an op that does not exist yet at the model's opset is an invalid model
    let e = run(&one("Gelu", 13, &[&[2]], &[], &["x0"], 1, &[]), &[t(&[2], &[1.0, 2.0])]).unwrap_err().to_string();
    assert!(e.contains("Gelu") && e.contains("does not exist before opset 20"), "{e}");
}

#[test]
fn range_27_stash_type_0_is_refused_on_floats() {
    let consts =
        [("s", tensor_f32("s", &[], &[0.0])), ("l", tensor_f32("l", &[], &[3.0])), ("d", tensor_f32("d", &[], &[1.0]))];
    let ok = one("Range", 27, &[], &consts, &["s", "l", "d"], 1, &[]);
    close(&run(&ok, &[]).unwrap()[0], &t(&[3], &[0.0, 1.0, 2.0]));
    let bad = one("Range", 27, &[], &consts, &["s", "l", "d"], 1, &[Attr::Int("stash_type", 0)]);
    let e = unsupported(&bad, &[]);
    assert!(e.contains("stash_type") && e.contains("opset 27"), "{e}");
}

/// A uint64 tensor (uint64_data, unpacked varints).
fn tensor_u64(name: &str, data: &[u64]) -> Msg {
    let mut m = Msg::new().int(1, data.len() as i64).int(2, 13).str(8, name);
    for &v in data {
        m = m.int(11, v as i64);
    }
    m
}

#[test]
fn uint64_is_held_in_i64_where_exact_and_refused_by_value_otherwise() {
    let p = onnx::proto::TensorProto::decode(&tensor_u64("u", &[1, 1 << 40]).0).unwrap();
    let v = onnx::tensor::to_tensor(&p).unwrap();
    assert_eq!(v, Tensor::from_vec(&[2], vec![1i64, 1 << 40]).unwrap());
    let p = onnx::proto::TensorProto::decode(&tensor_u64("big", &[1, u64::MAX]).0).unwrap();
    let e = onnx::tensor::to_tensor(&p).unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { .. }), "{e:?}");
    assert!(e.to_string().contains("big") && e.to_string().contains(&u64::MAX.to_string()), "{e}");
}

#[test]
fn nll_loss_with_weights_and_ignore_index_means_over_kept_weights() {
    // input [N=3, C=2], targets [1, 0, 1], class 0 ignored
    let x = t(&[3, 2], &[-0.1, -2.0, -0.5, -1.0, -3.0, -0.2]);
    let consts = [("tg", tensor_i64("tg", &[3], &[1, 0, 1])), ("w", tensor_f32("w", &[2], &[2.0, 0.5]))];
    let attrs = [Attr::Int("ignore_index", 0)];
    let m = one("NegativeLogLikelihoodLoss", 13, &[&[3, 2]], &consts, &["x0", "tg", "w"], 1, &attrs);
    let r = run(&m, std::slice::from_ref(&x)).unwrap();
    // kept: rows 0 and 2 (class 1, weight 0.5): (2.0 * 0.5 + 0.2 * 0.5) / (0.5 + 0.5)
    close(&r[0], &Tensor::scalar(1.1f32));
    let m = one(
        "NegativeLogLikelihoodLoss",
        13,
        &[&[3, 2]],
        &consts[..1],
        &["x0", "tg"],
        1,
        &[Attr::Str("reduction", "none")],
    );
    close(&run(&m, &[x]).unwrap()[0], &t(&[3], &[2.0, 0.5, 0.2]));
}

#[test]
fn softmax_cross_entropy_loss_returns_the_log_probabilities_too() {
    let x = t(&[1, 2], &[0.0, 0.0]);
    let consts = [("tg", tensor_i64("tg", &[1], &[1]))];
    let m = one("SoftmaxCrossEntropyLoss", 13, &[&[1, 2]], &consts, &["x0", "tg"], 2, &[]);
    let r = run(&m, &[x]).unwrap();
    let l2 = std::f32::consts::LN_2;
    close(&r[0], &Tensor::scalar(l2));
    close(&r[1], &t(&[1, 2], &[-l2, -l2]));
}

#[test]
fn gather_elements_trilu_cumsum_topk_and_layer_norm_match_hand_values() {
    let x = t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let idx = [("i", tensor_i64("i", &[2, 2], &[2, -3, 1, 1]))];
    let m = one("GatherElements", 13, &[&[2, 3]], &idx, &["x0", "i"], 1, &[Attr::Int("axis", 1)]);
    close(&run(&m, std::slice::from_ref(&x)).unwrap()[0], &t(&[2, 2], &[3.0, 1.0, 5.0, 5.0]));
    let k = [("k", tensor_i64("k", &[], &[1]))];
    let m = one("Trilu", 14, &[&[2, 3]], &k, &["x0", "k"], 1, &[Attr::Int("upper", 0)]);
    close(&run(&m, std::slice::from_ref(&x)).unwrap()[0], &t(&[2, 3], &[1.0, 2.0, 0.0, 4.0, 5.0, 6.0]));
    let ax = [("a", tensor_i64("a", &[], &[1]))];
    let m = one("CumSum", 14, &[&[2, 3]], &ax, &["x0", "a"], 1, &[Attr::Int("exclusive", 1), Attr::Int("reverse", 1)]);
    close(&run(&m, std::slice::from_ref(&x)).unwrap()[0], &t(&[2, 3], &[5.0, 3.0, 0.0, 11.0, 6.0, 0.0]));
    let m = one("TopK", 11, &[&[2, 3]], &k, &["x0", "k"], 2, &[Attr::Int("axis", 0), Attr::Int("largest", 0)]);
    let r = run(&m, std::slice::from_ref(&x)).unwrap();
    close(&r[0], &t(&[1, 3], &[1.0, 2.0, 3.0]));
    assert_eq!(r[1], Tensor::from_vec(&[1, 3], vec![0i64, 0, 0]).unwrap());
    let m = one("LayerNormalization", 17, &[&[2, 3], &[3]], &[], &["x0", "x1"], 3, &[Attr::Float("epsilon", 0.0)]);
    let r = run(&m, &[x, t(&[3], &[1.0, 1.0, 2.0])]).unwrap();
    let s = 1.5f32.sqrt();
    close(&r[0], &t(&[2, 3], &[-s, 0.0, 2.0 * s, -s, 0.0, 2.0 * s]));
    close(&r[1], &t(&[2, 1], &[2.0, 5.0]));
}

#[test]
fn resize_linear_and_nearest_match_onnx_formulas() {
    let x = t(&[1, 1, 1, 2], &[1.0, 3.0]);
    let sc = [("roi", tensor_f32("roi", &[0], &[])), ("sc", tensor_f32("sc", &[4], &[1.0, 1.0, 1.0, 2.0]))];
    // half_pixel linear: sources -0.25, 0.25, 0.75, 1.25 (clamped at the edges)
    let m = one("Resize", 19, &[&[1, 1, 1, 2]], &sc, &["x0", "roi", "sc"], 1, &[Attr::Str("mode", "linear")]);
    close(&run(&m, std::slice::from_ref(&x)).unwrap()[0], &t(&[1, 1, 1, 4], &[1.0, 1.5, 2.5, 3.0]));
    let m = one("Resize", 19, &[&[1, 1, 1, 2]], &sc, &["x0", "roi", "sc"], 1, &[]);
    close(&run(&m, &[x]).unwrap()[0], &t(&[1, 1, 1, 4], &[1.0, 1.0, 3.0, 3.0]));
}

#[test]
fn attention_4d_causal_matches_a_hand_computation() {
    // one head, two positions, head size 1: scores q_i * k_j; causal masks j > i
    let q = t(&[1, 1, 2, 1], &[1.0, 2.0]);
    let k = t(&[1, 1, 2, 1], &[0.5, -1.0]);
    let v = t(&[1, 1, 2, 1], &[3.0, 5.0]);
    let m = one(
        "Attention",
        23,
        &[&[1, 1, 2, 1], &[1, 1, 2, 1], &[1, 1, 2, 1]],
        &[],
        &["x0", "x1", "x2"],
        1,
        &[Attr::Int("is_causal", 1)],
    );
    let r = run(&m, &[q, k, v]).unwrap();
    // row 0: only key 0 → 3; row 1: softmax(1.0, -2.0) over (3, 5)
    let (a, b) = (1.0f32.exp(), (-2.0f32).exp());
    close(&r[0], &t(&[1, 1, 2, 1], &[3.0, (3.0 * a + 5.0 * b) / (a + b)]));
}

/// `pfor` over 3 copies of `xs` (scaled) vs the loop, strict mode, and the gradient of the
/// first output's sum w.r.t. the first input against central differences.
fn check_pfor_and_gradient(bytes: &[u8], xs: &[Tensor]) {
    let m = onnx::load_bytes(bytes).unwrap();
    let mut g = Graph::new();
    let stacked: Vec<ValueId> = xs
        .iter()
        .map(|x| {
            let copies: Vec<Tensor> = (0..3)
                .map(|i| {
                    let v: Vec<f64> = x.to_f64_vec().iter().map(|a| a * (1.0 + i as f64 / 10.0)).collect();
                    Tensor::from_vec(x.shape(), v).unwrap().cast(x.dtype())
                })
                .collect();
            g.constant(Tensor::stack(&copies, x.dtype(), x.shape()).unwrap())
        })
        .collect();
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let ins: Vec<ValueId> = stacked.iter().map(|&s| g.gather(s, i, 0)).collect::<Result<_>>()?;
        m.call(g, &ins)
    };
    let v = pfor_with(&mut g, 3, &PforOptions::strict(), body).unwrap();
    let l = for_loop(&mut g, 3, body).unwrap();
    let r = run_once(&g, &[v[0], l[0]], &[]).unwrap();
    pfor::tensor::assert_close(&r[0], &r[1], 1e-9, 1e-9).unwrap();
    // gradient vs central differences, in f64
    let mut g = Graph::new();
    let ins: Vec<ValueId> =
        xs.iter().enumerate().map(|(k, x)| g.input(&format!("x{k}"), x.dtype(), x.shape().to_vec())).collect();
    let out = m.call(&mut g, &ins).unwrap();
    let s = g.sum_all(out[0]).unwrap();
    let gr = gradients(&mut g, &[s], &ins[..1], None).unwrap();
    let feeds = |x0: Tensor| -> Vec<(ValueId, Tensor)> {
        let mut f = vec![(ins[0], x0)];
        f.extend(ins.iter().skip(1).copied().zip(xs.iter().skip(1).cloned()));
        f
    };
    let analytic = run_once(&g, &[gr[0]], &feeds(xs[0].clone())).unwrap().remove(0).to_f64_vec();
    let base = xs[0].to_f64_vec();
    let h = 1e-6;
    for p in 0..base.len() {
        let at = |d: f64| {
            let mut v = base.clone();
            v[p] += d;
            let x = Tensor::from_vec(xs[0].shape(), v).unwrap();
            run_once(&g, &[s], &feeds(x)).unwrap()[0].to_f64_vec()[0]
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        assert!((fd - analytic[p]).abs() < 1e-5 * (1.0 + fd.abs()), "element {p}: fd {fd} vs {}", analytic[p]);
    }
}

fn f64t(shape: &[usize], seed: u64) -> Tensor {
    Tensor::randn(shape, seed).unwrap().cast(DType::F64)
}

/// A one-node model over f64 inputs.
fn one64(
    op: &str,
    opset: i64,
    ins: &[&[i64]],
    consts: &[(&str, Msg)],
    node_inputs: &[&str],
    attrs: &[Attr],
) -> Vec<u8> {
    let inputs: Vec<Msg> = ins
        .iter()
        .enumerate()
        .map(|(k, s)| value_info(&format!("x{k}"), 11, &s.iter().map(|&d| Ok(d)).collect::<Vec<_>>()))
        .collect();
    let inits: Vec<Msg> = consts.iter().map(|(_, t)| t.clone()).collect();
    model(opset, &[node(op, "n0", node_inputs, &["y0"], attrs)], &inputs, &[value_info("y0", 11, &[])], &inits)
}

#[test]
fn new_ops_agree_under_pfor_and_have_finite_difference_gradients() {
    let tg = ("tg", tensor_i64("tg", &[3, 2], &[0, 3, 1, 2, 3, 0]));
    let m = one64("SoftmaxCrossEntropyLoss", 13, &[&[3, 4, 2]], &[tg], &["x0", "tg"], &[Attr::Int("ignore_index", 2)]);
    check_pfor_and_gradient(&m, &[f64t(&[3, 4, 2], 1)]);
    let m = one64("LayerNormalization", 17, &[&[2, 3, 4], &[3, 4]], &[], &["x0", "x1"], &[Attr::Int("axis", 1)]);
    check_pfor_and_gradient(&m, &[f64t(&[2, 3, 4], 2), f64t(&[3, 4], 3)]);
    let m = one64(
        "GroupNormalization",
        21,
        &[&[2, 4, 3], &[4], &[4]],
        &[],
        &["x0", "x1", "x2"],
        &[Attr::Int("num_groups", 2)],
    );
    check_pfor_and_gradient(&m, &[f64t(&[2, 4, 3], 4), f64t(&[4], 5), f64t(&[4], 6)]);
    let idx = ("i", tensor_i64("i", &[2, 3], &[1, 0, -1, 0, 2, 1]));
    let m = one64("GatherElements", 13, &[&[3, 3]], &[idx], &["x0", "i"], &[]);
    check_pfor_and_gradient(&m, &[f64t(&[3, 3], 7)]);
    let sc = [("roi", tensor_f32("roi", &[0], &[])), ("sc", tensor_f32("sc", &[4], &[1.0, 1.0, 1.5, 2.0]))];
    let m = one64("Resize", 19, &[&[1, 2, 2, 3]], &sc, &["x0", "roi", "sc"], &[Attr::Str("mode", "cubic")]);
    check_pfor_and_gradient(&m, &[f64t(&[1, 2, 2, 3], 8)]);
    let m = one64(
        "Attention",
        23,
        &[&[1, 3, 4], &[1, 2, 2], &[1, 2, 2]],
        &[],
        &["x0", "x1", "x2"],
        &[
            Attr::Int("q_num_heads", 2),
            Attr::Int("kv_num_heads", 1),
            Attr::Float("softcap", 2.0),
            Attr::Int("is_causal", 1),
        ],
    );
    check_pfor_and_gradient(&m, &[f64t(&[1, 3, 4], 9), f64t(&[1, 2, 2], 10), f64t(&[1, 2, 2], 11)]);
}

#[test]
fn supported_ops_count_at_least_130() {
    let ops = onnx::supported_ops();
    assert!(ops.len() >= 130, "{} ops", ops.len());
    for op in ["Attention", "Resize", "NegativeLogLikelihoodLoss", "LayerNormalization", "GatherElements", "Trilu"] {
        assert!(ops.contains(&op), "{op}");
    }
}

#[test]
fn einsum_conv_transpose_recurrent_and_rotary_agree_under_pfor_with_fd_gradients() {
    let m =
        one64("Einsum", 12, &[&[2, 3, 4], &[2, 4, 5]], &[], &["x0", "x1"], &[Attr::Str("equation", "bij,bjk->bik")]);
    check_pfor_and_gradient(&m, &[f64t(&[2, 3, 4], 12), f64t(&[2, 4, 5], 13)]);
    let m = one64("Einsum", 12, &[&[3, 3], &[3]], &[], &["x0", "x1"], &[Attr::Str("equation", "ii,j")]);
    check_pfor_and_gradient(&m, &[f64t(&[3, 3], 14), f64t(&[3], 15)]);
    let m = one64(
        "ConvTranspose",
        11,
        &[&[1, 2, 3, 3], &[2, 3, 2, 2]],
        &[],
        &["x0", "x1"],
        &[Attr::Ints("strides", &[2, 2]), Attr::Ints("pads", &[1, 0, 0, 1]), Attr::Ints("output_padding", &[1, 1])],
    );
    check_pfor_and_gradient(&m, &[f64t(&[1, 2, 3, 3], 16), f64t(&[2, 3, 2, 2], 17)]);
    let m = one64(
        "GRU",
        14,
        &[&[3, 2, 2], &[2, 9, 2], &[2, 9, 3], &[2, 18]],
        &[],
        &["x0", "x1", "x2", "x3"],
        &[Attr::Int("hidden_size", 3), Attr::Str("direction", "bidirectional"), Attr::Int("linear_before_reset", 1)],
    );
    check_pfor_and_gradient(
        &m,
        &[f64t(&[3, 2, 2], 18), f64t(&[2, 9, 2], 19), f64t(&[2, 9, 3], 20), f64t(&[2, 18], 21)],
    );
    let m = one64(
        "LSTM",
        14,
        &[&[3, 1, 2], &[1, 8, 2], &[1, 8, 2]],
        &[],
        &["x0", "x1", "x2"],
        &[Attr::Int("hidden_size", 2)],
    );
    check_pfor_and_gradient(&m, &[f64t(&[3, 1, 2], 22), f64t(&[1, 8, 2], 23), f64t(&[1, 8, 2], 24)]);
    let m = one64(
        "RotaryEmbedding",
        23,
        &[&[1, 2, 3, 4], &[1, 3, 2], &[1, 3, 2]],
        &[],
        &["x0", "x1", "x2"],
        &[Attr::Int("interleaved", 1)],
    );
    check_pfor_and_gradient(&m, &[f64t(&[1, 2, 3, 4], 25), f64t(&[1, 3, 2], 26), f64t(&[1, 3, 2], 27)]);
}

#[test]
fn conv_transpose_of_ones_counts_the_overlapping_taps() {
    // 1-D, stride 1, kernel 2 of ones over [1, 1, 1]: overlaps 1, 2, 2, 1
    let w = [("w", tensor_f32("w", &[1, 1, 2], &[1.0, 1.0]))];
    let m = one("ConvTranspose", 11, &[&[1, 1, 3]], &w, &["x0", "w"], 1, &[]);
    let r = run(&m, &[t(&[1, 1, 3], &[1.0, 1.0, 1.0])]).unwrap();
    close(&r[0], &t(&[1, 1, 4], &[1.0, 2.0, 2.0, 1.0]));
}

#[test]
fn dft_affine_grid_and_grid_sample_agree_under_pfor_with_fd_gradients() {
    let m = one64("DFT", 17, &[&[2, 5, 2]], &[], &["x0"], &[Attr::Int("axis", 1), Attr::Int("inverse", 1)]);
    check_pfor_and_gradient(&m, &[f64t(&[2, 5, 2], 21)]);
    let size = ("size", tensor_i64("size", &[4], &[2, 1, 3, 4]));
    let m = one64("AffineGrid", 20, &[&[2, 2, 3]], &[size], &["x0", "size"], &[]);
    check_pfor_and_gradient(&m, &[f64t(&[2, 2, 3], 22)]);
    // the gradient w.r.t. the image (x0); grid points inside and outside [-1, 1]
    for (mode, padding) in [("linear", "zeros"), ("cubic", "border"), ("nearest", "reflection")] {
        let attrs = [Attr::Str("mode", mode), Attr::Str("padding_mode", padding)];
        let m = one64("GridSample", 20, &[&[1, 2, 3, 4], &[1, 2, 2, 2]], &[], &["x0", "x1"], &attrs);
        check_pfor_and_gradient(&m, &[f64t(&[1, 2, 3, 4], 23), f64t(&[1, 2, 2, 2], 24)]);
    }
}
