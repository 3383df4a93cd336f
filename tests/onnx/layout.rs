//! The importer's NCHW → NHWC handling of conv nets: between convs and pools, layout-free ops
//! (Relu, residual Add, a per-channel Mul, channel Concat) are rebuilt on the NHWC results
//! instead of transposing every activation to NCHW and back, and pads that SAME would choose
//! need no padded copy. Checked on a small residual net: the values equal those of the same
//! net with the forms blocked (a same-shape Reshape after each conv, which the layout walk does
//! not look through), and the graph the output needs holds two transposes (the image in, the
//! result out) and no pad. A batch norm after a conv is folded into the conv's filter and bias
//! (no elementwise pass left but the relu), with the same values and the same derivatives
//! w.r.t. the weights as the unfolded model.

use super::encode::{Attr, FLOAT, model, node, tensor_f32, tensor_i64, value_info};
use pfor::autodiff::gradients;
use pfor::onnx;
use pfor::ops::{ShapeOp, SlicingOp};
use pfor::prelude::*;

fn values(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|v| (v as f32 * k).sin()).collect()
}

/// x [1,2,6,6] → Conv 3x3 pads 1 (+bias) → Relu = r; Conv(r) 3x3 pads 1 = c2; s = c2 + r;
/// m = s * scale[3,1,1]; Concat(m, r, axis 1) → MaxPool 2x2 → [1,6,3,3]. `anchored`: each
/// conv's output goes through a same-shape Reshape first.
fn residual_net(anchored: bool) -> Vec<u8> {
    let pads = Attr::Ints("pads", &[1, 1, 1, 1]);
    let (c1, c2) = if anchored { ("c1raw", "c2raw") } else { ("c1", "c2") };
    let mut nodes = vec![
        node("Conv", "conv1", &["x", "w1", "b1"], &[c1], &[pads]),
        node("Relu", "relu1", &["c1"], &["r"], &[]),
        node("Conv", "conv2", &["r", "w2", "b2"], &[c2], &[Attr::Ints("pads", &[1, 1, 1, 1])]),
        node("Add", "add", &["c2", "r"], &["s"], &[]),
        node("Mul", "mul", &["s", "scale"], &["m"], &[]),
        node("Concat", "cat", &["m", "r"], &["cat"], &[Attr::Int("axis", 1)]),
        node(
            "MaxPool",
            "pool",
            &["cat"],
            &["y"],
            &[Attr::Ints("kernel_shape", &[2, 2]), Attr::Ints("strides", &[2, 2])],
        ),
    ];
    if anchored {
        nodes.insert(1, node("Reshape", "anchor1", &["c1raw", "shape"], &["c1"], &[]));
        nodes.insert(4, node("Reshape", "anchor2", &["c2raw", "shape"], &["c2"], &[]));
    }
    model(
        13,
        &nodes,
        &[value_info("x", FLOAT, &[Ok(1), Ok(2), Ok(6), Ok(6)])],
        &[value_info("y", FLOAT, &[])],
        &[
            tensor_f32("w1", &[3, 2, 3, 3], &values(54, 0.37)),
            tensor_f32("b1", &[3], &[0.1, -0.2, 0.3]),
            tensor_f32("w2", &[3, 3, 3, 3], &values(81, 0.53)),
            tensor_f32("b2", &[3], &[-0.05, 0.15, 0.02]),
            tensor_f32("scale", &[3, 1, 1], &[0.5, 2.0, -1.5]),
            tensor_i64("shape", &[4], &[1, 3, 6, 6]),
        ],
    )
}

/// The ops the output needs (with their first output's dims), and the result on a fixed
/// image.
fn import(bytes: &[u8]) -> (Vec<(Op, Vec<usize>)>, Tensor) {
    import_with(bytes, Tensor::from_vec(&[1, 2, 6, 6], values(72, 0.91)).unwrap())
}

fn import_with(bytes: &[u8], x: Tensor) -> (Vec<(Op, Vec<usize>)>, Tensor) {
    let m = onnx::load_bytes(bytes).unwrap();
    let (g, ins, outs) = m.to_graph().unwrap();
    let ops = g
        .ancestors(&outs)
        .unwrap()
        .into_iter()
        .map(|id| {
            let node = g.node(id).unwrap();
            (node.op.clone(), node.outputs.first().and_then(|t| t.shape.as_fixed()).unwrap_or_default())
        })
        .collect();
    (ops, run_once(&g, &outs, &[(ins[0], x)]).unwrap().remove(0))
}

/// An activation's dims (batch 1, rank 4), not a filter's, nor a per-channel vector permuted
/// to `[1, 1, 1, C]`.
fn activation(dims: &[usize]) -> bool {
    dims.len() == 4 && dims[0] == 1 && dims.iter().product::<usize>() > 3
}

#[test]
fn conv_net_activations_stay_nhwc_between_layers() {
    let (ops, y) = import(&residual_net(false));
    let (_, want) = import(&residual_net(true));
    assert_eq!(y.shape(), &[1, 6, 3, 3]);
    pfor::tensor::assert_close(&y, &want, 1e-5, 1e-6).unwrap();
    // activation transposes (not the filters', nor the scale's permuted to [1, 1, 1, 3]:
    // constants, which plans fold)
    let layout = |(op, dims): &&(Op, Vec<usize>)| {
        activation(dims)
            && matches!(op, Op::Shape(ShapeOp::Transpose { perm }) if perm[..] == [0, 2, 3, 1] || perm[..] == [0, 3, 1, 2])
    };
    let transposes = ops.iter().filter(layout).count();
    assert_eq!(transposes, 2, "the image to NHWC and the result to NCHW only: {ops:?}");
    let pads = ops.iter().filter(|(op, _)| matches!(op, Op::Slicing(SlicingOp::Pad { .. }))).count();
    assert_eq!(pads, 0, "SAME pads need no padded copy: {ops:?}");
}

#[test]
fn conv_net_in_nhwc_under_pfor_equals_the_loop() {
    let m = onnx::load_bytes(&residual_net(false)).unwrap();
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn(&[3, 1, 2, 6, 6], 5).unwrap());
    let opts = PforOptions::strict();
    let fast = pfor::api::vectorized_map_with(&mut g, &opts, |g, x| m.call(g, &[x[0]]), &[xs]).unwrap();
    let slow = for_loop(&mut g, 3, |g, i| {
        let xi = g.gather(xs, i, 0)?;
        m.call(g, &[xi])
    })
    .unwrap();
    let r = run_once(&g, &[fast[0], slow[0]], &[]).unwrap();
    pfor::tensor::assert_close(&r[0], &r[1], 1e-5, 1e-6).unwrap();
}

/// x [1,2,5,5] → Conv 3x3 (+bias when `bias`) → BatchNormalization → Relu → [1,3,3,3];
/// `anchored`: a same-shape Reshape between the conv and the norm.
fn conv_bn(bias: bool, anchored: bool) -> Vec<u8> {
    let conv_out = if anchored { "craw" } else { "c" };
    let conv_in: &[&str] = if bias { &["x", "w", "b"] } else { &["x", "w"] };
    let mut nodes = vec![
        node("Conv", "conv", conv_in, &[conv_out], &[]),
        node(
            "BatchNormalization",
            "bn",
            &["c", "scale", "shift", "mean", "var"],
            &["n"],
            &[Attr::Float("epsilon", 1e-3)],
        ),
        node("Relu", "relu", &["n"], &["y"], &[]),
    ];
    if anchored {
        nodes.insert(1, node("Reshape", "anchor", &["craw", "shape"], &["c"], &[]));
    }
    model(
        13,
        &nodes,
        &[value_info("x", FLOAT, &[Ok(1), Ok(2), Ok(5), Ok(5)])],
        &[value_info("y", FLOAT, &[])],
        &[
            tensor_f32("w", &[3, 2, 3, 3], &values(54, 0.29)),
            tensor_f32("b", &[3], &[0.2, -0.1, 0.05]),
            tensor_f32("scale", &[3], &[1.5, 0.5, -2.0]),
            tensor_f32("shift", &[3], &[0.1, 0.2, -0.3]),
            tensor_f32("mean", &[3], &[0.3, -0.2, 0.1]),
            tensor_f32("var", &[3], &[0.9, 1.7, 0.4]),
            tensor_i64("shape", &[4], &[1, 3, 3, 3]),
        ],
    )
}

#[test]
fn batch_norm_after_a_conv_is_folded_into_its_filter() {
    for bias in [true, false] {
        let (ops, y) = import_conv_bn(&conv_bn(bias, false));
        let (_, want) = import_conv_bn(&conv_bn(bias, true));
        pfor::tensor::assert_close(&y, &want, 1e-5, 1e-6).unwrap();
        // no elementwise pass over the conv's result: the norm is in the filter and bias
        let passes = ops.iter().filter(|(op, d)| activation(d) && matches!(op, Op::Binary(_) | Op::Unary(_)));
        assert_eq!(passes.count(), 1, "bias {bias}: only the relu (fused into the conv step): {ops:?}");
    }
}

fn import_conv_bn(bytes: &[u8]) -> (Vec<(Op, Vec<usize>)>, Tensor) {
    let x = Tensor::from_vec(&[1, 2, 5, 5], values(50, 0.77)).unwrap();
    import_with(bytes, x)
}

#[test]
fn folded_batch_norm_keeps_derivatives_wrt_its_weights() {
    // the weights given as constants, then differentiated: the folded filter is built from
    // them in the graph, so the gradient w.r.t. each equals the unfolded model's
    let grads = |bytes: &[u8]| -> Vec<Tensor> {
        let m = onnx::load_bytes(bytes).unwrap();
        let mut g = Graph::new();
        let x = g.constant(Tensor::from_vec(&[1, 2, 5, 5], values(50, 0.77)).unwrap());
        let ps: Vec<ValueId> = m.parameters().iter().map(|(_, t)| g.constant(t.clone())).collect();
        let y = m.call_with_params(&mut g, &[x], &ps).unwrap();
        let l = g.sum_all(y[0]).unwrap();
        let weights: Vec<ValueId> =
            m.parameters().iter().zip(&ps).filter(|((n, _), _)| n != "shape").map(|(_, &p)| p).collect();
        let gs = gradients(&mut g, &[l], &weights, None).unwrap();
        run_once(&g, &gs, &[]).unwrap()
    };
    let (folded, plain) = (grads(&conv_bn(true, false)), grads(&conv_bn(true, true)));
    assert_eq!(folded.len(), 6);
    for (a, b) in folded.iter().zip(&plain) {
        pfor::tensor::assert_close(a, b, 1e-4, 1e-5).unwrap();
    }
}
