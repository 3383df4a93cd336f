//! `Model::lift_constants` (computed weights become parameters) and opset 6's legacy
//! attributes, on models built in memory.

use super::encode::*;
use pfor::onnx;
use pfor::prelude::*;

/// y = Reshape(MatMul(x, w) + b, shape) with w = ConstantOfShape([3, 2], 0.5) * scale
/// (scale an initializer), b a `Constant` node, shape an int64 initializer.
fn computed_weights_model() -> Vec<u8> {
    model(
        13,
        &[
            node(
                "ConstantOfShape",
                "cos",
                &["wshape"],
                &["ones"],
                &[Attr::Tensor("value", tensor_f32("", &[1], &[0.5]))],
            ),
            node("Mul", "scale_w", &["ones", "scale"], &["w"], &[]),
            node("Constant", "bias", &[], &["b"], &[Attr::Tensor("value", tensor_f32("", &[2], &[1.0, -1.0]))]),
            node("MatMul", "mm", &["x", "w"], &["xw"], &[]),
            node("Add", "add", &["xw", "b"], &["z"], &[]),
            node("Reshape", "r", &["z", "shape"], &["y"], &[]),
        ],
        &[value_info("x", FLOAT, &[Ok(1), Ok(3)])],
        &[value_info("y", FLOAT, &[])],
        &[
            tensor_i64("wshape", &[2], &[3, 2]),
            tensor_f32("scale", &[2], &[2.0, 4.0]),
            tensor_i64("shape", &[2], &[2, 1]),
        ],
    )
}

#[test]
fn lifting_makes_computed_weights_parameters_and_keeps_shapes_constant() {
    let plain = onnx::load_bytes(&computed_weights_model()).unwrap();
    let names = |m: &onnx::Model| m.parameters().iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&plain), ["wshape", "scale", "shape"]);
    let lifted = plain.clone().lift_constants().unwrap();
    // w and b, in order of first use; the shape operand and the inputs of w are gone
    assert_eq!(names(&lifted), ["w", "b"]);
    assert_eq!(lifted.parameters()[0].1.to_f64_vec(), [1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
    assert_eq!(lifted.parameters()[1].1.to_f64_vec(), [1.0, -1.0]);
    // idempotent
    assert_eq!(names(&lifted.clone().lift_constants().unwrap()), ["w", "b"]);

    // weights fed as values: the output and d y[0] / d w
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [1, 3]);
    let w = g.input("w", DType::F32, [3, 2]);
    let b = g.input("b", DType::F32, [2]);
    let y = lifted.call_with_params(&mut g, &[x], &[w, b]).unwrap()[0];
    assert_eq!(g.shape(y).unwrap().as_fixed(), Some(vec![2, 1]));
    let y0 = g.slice(y, &[0, 0], &[1, 1]).unwrap();
    let l = g.sum_all(y0).unwrap();
    let dw = gradients(&mut g, &[l], &[w], None).unwrap()[0];
    let xv = Tensor::from_vec(&[1, 3], vec![1.0f32, 2.0, 3.0]).unwrap();
    let wv = Tensor::from_vec(&[3, 2], vec![1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0]).unwrap();
    let bv = Tensor::from_vec(&[2], vec![0.5f32, 0.25]).unwrap();
    let r = run_once(&g, &[y, dw], &[(x, xv.clone()), (w, wv), (b, bv)]).unwrap();
    assert_eq!(r[0].to_f64_vec(), [4.5, 5.25]);
    assert_eq!(r[1].to_f64_vec(), [1.0, 0.0, 2.0, 0.0, 3.0, 0.0]);

    // call() of the lifted model computes what the plain import does
    let run = |m: &onnx::Model| {
        let (g, ins, outs) = m.to_graph().unwrap();
        run_once(&g, &outs, &[(ins[0], xv.clone())]).unwrap()[0].to_f64_vec()
    };
    assert_eq!(run(&lifted), run(&plain));
    assert_eq!(run(&plain), [7.0, 11.0]);
}

#[test]
fn a_float_constant_a_node_takes_statically_stays_a_constant() {
    // y = Pad(x * w, pads, value): w is a weight, value is Pad's static fill
    let bytes = model(
        13,
        &[
            node("Constant", "w", &[], &["w"], &[Attr::Tensor("value", tensor_f32("", &[2], &[2.0, 3.0]))]),
            node("Constant", "v", &[], &["value"], &[Attr::Tensor("value", tensor_f32("", &[], &[9.0]))]),
            node("Mul", "m", &["x", "w"], &["xw"], &[]),
            node("Pad", "p", &["xw", "pads", "value"], &["y"], &[]),
        ],
        &[value_info("x", FLOAT, &[Ok(2)])],
        &[value_info("y", FLOAT, &[])],
        &[tensor_i64("pads", &[2], &[1, 0])],
    );
    let m = onnx::load_bytes(&bytes).unwrap().lift_constants().unwrap();
    let names: Vec<&str> = m.parameters().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["w"]);
    let (g, ins, outs) = m.to_graph().unwrap();
    let r = run_once(&g, &outs, &[(ins[0], Tensor::from_vec(&[2], vec![1.0f32, 1.0]).unwrap())]).unwrap();
    assert_eq!(r[0].to_f64_vec(), [9.0, 2.0, 3.0]);
}

#[test]
fn with_input_shape_resizes_an_input_and_is_refused_after_lifting() {
    let m = onnx::load_bytes(&computed_weights_model()).unwrap();
    let e = m.clone().with_input_shape("nope", &[1, 3]).unwrap_err().to_string();
    assert!(e.contains("no input 'nope'"), "{e}");
    let lifted = m.clone().lift_constants().unwrap();
    let e = lifted.with_input_shape("x", &[1, 3]).unwrap_err().to_string();
    assert!(e.contains("before lift_constants"), "{e}");
    // a shape the graph does not fit fails when the model is called: [2, 2] into [2, 1]
    let wide = m.with_input_shape("x", &[2, 3]).unwrap();
    assert_eq!(wide.inputs()[0].1.shape.as_fixed(), Some(vec![2, 3]));
    assert!(wide.to_graph().is_err());
}

fn opset6_binary(attrs: &[Attr], b_dims: &[i64]) -> onnx::Model {
    let n: usize = b_dims.iter().product::<i64>() as usize;
    let bytes = model(
        6,
        &[node("Add", "add", &["x", "b"], &["y"], attrs)],
        &[value_info("x", FLOAT, &[Ok(2), Ok(3), Ok(4)])],
        &[value_info("y", FLOAT, &[])],
        &[tensor_f32("b", b_dims, &(0..n).map(|v| v as f32 * 10.0).collect::<Vec<_>>())],
    );
    onnx::load_bytes(&bytes).unwrap()
}

fn run_on_zeros(m: &onnx::Model) -> Result<Vec<f64>> {
    let (g, ins, outs) = m.to_graph()?;
    Ok(run_once(&g, &outs, &[(ins[0], Tensor::zeros(DType::F32, &[2, 3, 4])?)])?[0].to_f64_vec())
}

#[test]
fn opset6_legacy_broadcast_lines_b_up_at_axis() {
    // b [3] at axis 1 of x [2, 3, 4]: y[i, j, k] = b[j]
    let y = run_on_zeros(&opset6_binary(&[Attr::Int("broadcast", 1), Attr::Int("axis", 1)], &[3])).unwrap();
    let want: Vec<f64> = (0..24).map(|c| ((c / 4) % 3) as f64 * 10.0).collect();
    assert_eq!(y, want);
    // without axis: the trailing dims, as numpy
    let y = run_on_zeros(&opset6_binary(&[Attr::Int("broadcast", 1)], &[4])).unwrap();
    let want: Vec<f64> = (0..24).map(|c| (c % 4) as f64 * 10.0).collect();
    assert_eq!(y, want);
    // B that does not fit at the axis is an error naming the op
    let e = run_on_zeros(&opset6_binary(&[Attr::Int("broadcast", 1), Attr::Int("axis", 2)], &[3, 4])).unwrap_err();
    assert!(e.to_string().contains("Add") && e.to_string().contains("axis 2"), "{e}");
}

#[test]
fn opset6_prelu_slope_is_per_channel_and_training_batch_norm_is_refused() {
    let bytes = model(
        6,
        &[node("PRelu", "p", &["x", "slope"], &["y"], &[])],
        &[value_info("x", FLOAT, &[Ok(1), Ok(2), Ok(2)])],
        &[value_info("y", FLOAT, &[])],
        &[tensor_f32("slope", &[2], &[0.5, 2.0])],
    );
    let (g, ins, outs) = onnx::load_bytes(&bytes).unwrap().to_graph().unwrap();
    let x = Tensor::from_vec(&[1, 2, 2], vec![-1.0f32, 1.0, -1.0, 1.0]).unwrap();
    assert_eq!(run_once(&g, &outs, &[(ins[0], x)]).unwrap()[0].to_f64_vec(), [-0.5, 1.0, -2.0, 1.0]);

    let bytes = model(
        6,
        &[node("BatchNormalization", "bn", &["x", "s", "s", "s", "s"], &["y"], &[Attr::Int("is_test", 0)])],
        &[value_info("x", FLOAT, &[Ok(1), Ok(2), Ok(2)])],
        &[value_info("y", FLOAT, &[])],
        &[tensor_f32("s", &[2], &[1.0, 1.0])],
    );
    let e = onnx::load_bytes(&bytes).unwrap().to_graph().unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { .. }) && e.to_string().contains("is_test"), "{e}");
}
