//! Per-run work that an imported conv net must not do (issue 18's ORT comparison): weight
//! preprocessing whose inputs are all constants (the filter transposed to our layout and
//! scaled by a folded batch norm) runs once when the plan is built, whatever its size; global
//! pooling reduces the NHWC activations the conv left (no transpose to NCHW first); explicit
//! pads of convs and pools are the windows' own padding (no padded copy). Each checked on the
//! graph or plan AND on the values: equal to the same model with the rewrite blocked (a
//! same-shape Reshape after the conv, or explicit `Pad` nodes).

use super::encode::{Attr, FLOAT, Msg, model, node, tensor_f32, tensor_i64, value_info};
use pfor::onnx;
use pfor::ops::{ShapeOp, SlicingOp};
use pfor::prelude::*;

fn values(n: usize, k: f32) -> Vec<f32> {
    (0..n).map(|v| (v as f32 * k).sin()).collect()
}

/// The graph of `bytes` (one input) and its outputs.
fn graph(bytes: &[u8]) -> (Graph, ValueId, Vec<ValueId>) {
    let m = onnx::load_bytes(bytes).unwrap();
    let (g, ins, outs) = m.to_graph().unwrap();
    (g, ins[0], outs)
}

/// An opset-13 model of `nodes` from the image `x` (`dims`) to `y`.
fn image_model(nodes: &[Msg], dims: [i64; 4], initializers: &[Msg]) -> Vec<u8> {
    let x = value_info("x", FLOAT, &dims.map(Ok));
    model(13, nodes, &[x], &[value_info("y", FLOAT, &[])], initializers)
}

fn run(bytes: &[u8], x: &Tensor) -> Tensor {
    let (g, i, outs) = graph(bytes);
    run_once(&g, &outs, &[(i, x.clone())]).unwrap().remove(0)
}

/// x [1, C, 2, 2] → 1x1 Conv to O channels (no bias) → BatchNormalization → [1, O, 2, 2],
/// with a filter of `O * C` > 2^20 elements (larger than what plans used to fold).
fn wide_conv_bn(anchored: bool) -> Vec<u8> {
    const C: usize = 1025;
    const O: usize = 1024;
    let conv_out = if anchored { "craw" } else { "c" };
    let mut nodes = vec![
        node("Conv", "conv", &["x", "w"], &[conv_out], &[]),
        node("BatchNormalization", "bn", &["c", "scale", "shift", "mean", "var"], &["y"], &[]),
    ];
    if anchored {
        nodes.insert(1, node("Reshape", "anchor", &["craw", "shape"], &["c"], &[]));
    }
    let chan = |k: f32| values(O, k).iter().map(|v| v * 0.5 + 1.0).collect::<Vec<f32>>();
    image_model(
        &nodes,
        [1, C as i64, 2, 2],
        &[
            tensor_f32("w", &[O as i64, C as i64, 1, 1], &values(O * C, 0.0137)),
            tensor_f32("scale", &[O as i64], &chan(0.3)),
            tensor_f32("shift", &[O as i64], &values(O, 0.7)),
            tensor_f32("mean", &[O as i64], &values(O, 1.1)),
            tensor_f32("var", &[O as i64], &chan(0.9)),
            tensor_i64("shape", &[4], &[1, O as i64, 2, 2]),
        ],
    )
}

#[test]
fn a_large_batch_norm_folded_filter_is_computed_once_per_plan() {
    let bytes = wide_conv_bn(false);
    let x = Tensor::from_vec(&[1, 1025, 2, 2], values(4100, 0.31)).unwrap();
    let (g, i, outs) = graph(&bytes);
    let options = ExecOptions { profile: true, ..ExecOptions::builtin() };
    let mut s = Session::with_options(&g, &outs, options).unwrap();
    let y = s.run(&[(i, x.clone())]).unwrap().remove(0);
    // no step of the run computes a filter-sized value: the transposed, scaled filter is a
    // constant of the plan
    let filter_sized: Vec<String> = s
        .profile()
        .entries()
        .iter()
        .filter(|e| e.kind != "const" && e.output_shapes.iter().any(|d| d.iter().product::<usize>() >= 1024 * 1025))
        .map(|e| format!("{} {:?}", e.op, e.output_shapes))
        .collect();
    assert!(filter_sized.is_empty(), "per-run weight preprocessing: {filter_sized:?}");
    let want = run(&wide_conv_bn(true), &x);
    pfor::tensor::assert_close(&y, &want, 1e-4, 1e-4).unwrap();
}

/// x [1,2,5,5] → Conv 3x3 to 6 channels → Relu → `pool` → Flatten-like Reshape [1, 6];
/// `pool` is GlobalAveragePool, GlobalMaxPool, or ReduceMean over H, W (keepdims 0);
/// `anchored`: a same-shape Reshape between the conv and the relu.
fn conv_then_pool(pool: &str, anchored: bool) -> Vec<u8> {
    let conv_out = if anchored { "craw" } else { "c" };
    let mut nodes = vec![
        node("Conv", "conv", &["x", "w", "b"], &[conv_out], &[]),
        node("Relu", "relu", &["c"], &["r"], &[]),
        match pool {
            "ReduceMean" => {
                node(pool, "pool", &["r"], &["p"], &[Attr::Ints("axes", &[2, 3]), Attr::Int("keepdims", 0)])
            }
            _ => node(pool, "pool", &["r"], &["p"], &[]),
        },
        node("Reshape", "flat", &["p", "flat_shape"], &["y"], &[]),
    ];
    if anchored {
        nodes.insert(1, node("Reshape", "anchor", &["craw", "shape"], &["c"], &[]));
    }
    image_model(
        &nodes,
        [1, 2, 5, 5],
        &[
            tensor_f32("w", &[6, 2, 3, 3], &values(108, 0.41)),
            tensor_f32("b", &[6], &[0.1, -0.2, 0.3, 0.0, 0.2, -0.1]),
            tensor_i64("shape", &[4], &[1, 6, 3, 3]),
            tensor_i64("flat_shape", &[2], &[1, 6]),
        ],
    )
}

#[test]
fn global_pooling_reduces_the_nhwc_activations() {
    let x = Tensor::from_vec(&[1, 2, 5, 5], values(50, 0.63)).unwrap();
    for pool in ["GlobalAveragePool", "GlobalMaxPool", "ReduceMean"] {
        let bytes = conv_then_pool(pool, false);
        let (g, _, outs) = graph(&bytes);
        // the reduction reads the relu of the NHWC conv result, not a transpose of it
        let reduce = g.ancestors(&outs).unwrap().into_iter().find(|&n| matches!(g.node(n).unwrap().op, Op::Reduce(_)));
        let reduce = reduce.unwrap_or_else(|| panic!("{pool}: no reduction"));
        let input = g.node(reduce).unwrap().inputs[0];
        assert!(
            !matches!(g.node(input.node).unwrap().op, Op::Shape(ShapeOp::Transpose { .. })),
            "{pool}: reduces a transposed activation"
        );
        assert_eq!(g.shape(input).unwrap().as_fixed().unwrap(), [1, 3, 3, 6], "{pool}");
        let (y, want) = (run(&bytes, &x), run(&conv_then_pool(pool, true), &x));
        assert_eq!(y.shape(), &[1, 6]);
        pfor::tensor::assert_close(&y, &want, 1e-5, 1e-6).unwrap();
    }
}

/// x [1,2,9,9] → Conv 5x5 stride 2 pads 2,1,2,1 (not SAME's split) → MaxPool 3x3 stride 2
/// pads 1 → AveragePool 2x2 pads 1 ceil_mode (count_include_pad 0) → [1,3,3,3]; `explicit`:
/// the conv and max pool pads as `Pad` nodes (zeros, -inf) before unpadded windows.
fn padded_windows(explicit: bool) -> Vec<u8> {
    let pool = |pads: bool| {
        let mut a = vec![Attr::Ints("kernel_shape", &[3, 3]), Attr::Ints("strides", &[2, 2])];
        if pads {
            a.push(Attr::Ints("pads", &[1, 1, 1, 1]));
        }
        a
    };
    let conv = |pads: bool| {
        let mut a = vec![Attr::Ints("strides", &[2, 2])];
        if pads {
            a.push(Attr::Ints("pads", &[2, 1, 1, 2]));
        }
        a
    };
    let avg = [Attr::Ints("kernel_shape", &[2, 2]), Attr::Ints("pads", &[1, 1, 1, 1]), Attr::Int("ceil_mode", 1)];
    let nodes = if explicit {
        vec![
            node("Pad", "conv_pad", &["x", "conv_pads"], &["xp"], &[]),
            node("Conv", "conv", &["xp", "w", "b"], &["c"], &conv(false)),
            node("Pad", "pool_pad", &["c", "pool_pads", "neg_inf"], &["cp"], &[]),
            node("MaxPool", "pool", &["cp"], &["m"], &pool(false)),
            node("AveragePool", "avg", &["m"], &["y"], &avg),
        ]
    } else {
        vec![
            node("Conv", "conv", &["x", "w", "b"], &["c"], &conv(true)),
            node("MaxPool", "pool", &["c"], &["m"], &pool(true)),
            node("AveragePool", "avg", &["m"], &["y"], &avg),
        ]
    };
    image_model(
        &nodes,
        [1, 2, 9, 9],
        &[
            tensor_f32("w", &[3, 2, 5, 5], &values(150, 0.23)),
            tensor_f32("b", &[3], &[0.1, -0.2, 0.3]),
            tensor_i64("conv_pads", &[8], &[0, 0, 2, 1, 0, 0, 1, 2]),
            tensor_i64("pool_pads", &[8], &[0, 0, 1, 1, 0, 0, 1, 1]),
            tensor_f32("neg_inf", &[], &[f32::NEG_INFINITY]),
        ],
    )
}

#[test]
fn explicit_pads_of_convs_and_pools_make_no_padded_copy() {
    let bytes = padded_windows(false);
    let (g, _, outs) = graph(&bytes);
    let pads = g
        .ancestors(&outs)
        .unwrap()
        .into_iter()
        .filter(|&n| matches!(g.node(n).unwrap().op, Op::Slicing(SlicingOp::Pad { .. })))
        .count();
    assert_eq!(pads, 0, "a padded copy before a window");
    let x = Tensor::from_vec(&[1, 2, 9, 9], values(162, 0.57)).unwrap();
    let (y, want) = (run(&bytes, &x), run(&padded_windows(true), &x));
    assert_eq!(y.shape(), want.shape());
    pfor::tensor::assert_close(&y, &want, 1e-5, 1e-6).unwrap();
}
