//! The importer on models built in memory (`encode`) and on `tests/data/mlp.onnx`: loading,
//! inputs and symbolic dims, constants vs parameters, inlining under `pfor` and in
//! gradients, constant folding of shape arithmetic, and the errors for unsupported ops,
//! attributes and malformed bytes.

use super::encode::{Attr, FLOAT, INT64, model, node, tensor_f32, tensor_i64, value_info};
use pfor::api::{per_example_gradients, vectorized_map};
use pfor::autodiff::gradients;
use pfor::onnx;
use pfor::prelude::*;

fn mlp() -> onnx::Model {
    onnx::load(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mlp.onnx")).expect("load mlp.onnx")
}

#[test]
fn mlp_file_matches_numpy() {
    let m = mlp();
    assert_eq!(m.opset(), 13);
    assert_eq!(m.inputs().len(), 1);
    let (name, ty) = &m.inputs()[0];
    assert_eq!(name, "x");
    assert_eq!(ty.shape.dims()[0], Dim::dynamic("N"), "the symbolic dim is a named dynamic dim");
    let names: Vec<&str> = m.parameters().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["w1", "b1", "w2", "b2"]);
    let (g, ins, outs) = m.to_graph().unwrap();
    let x = Tensor::from_vec(&[1, 4], vec![0.5f32, -1.0, 2.0, 0.25]).unwrap();
    let r = run_once(&g, &outs, &[(ins[0], x)]).unwrap();
    // numpy's result (tools/make_onnx_models.py)
    let want = Tensor::from_vec(&[1, 3], vec![0.000_164_823_5f32, 0.999_818_6, 1.656_714e-5]).unwrap();
    pfor::tensor::assert_close(&r[0], &want, 1e-4, 1e-6).unwrap();
}

#[test]
fn model_as_the_body_of_vectorized_map_equals_the_loop() {
    let m = mlp();
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn(&[5, 4], 3).unwrap());
    let body = |g: &mut Graph, row: &[ValueId]| -> Result<Vec<ValueId>> {
        let x = g.expand_dims(row[0], 0)?;
        m.call(g, &[x])
    };
    let v = vectorized_map(&mut g, body, &[xs]).unwrap();
    let l = for_loop(&mut g, 5, |g, i| {
        let row = g.gather(xs, i, 0)?;
        body(g, &[row])
    })
    .unwrap();
    let r = run_once(&g, &[v[0], l[0]], &[]).unwrap();
    assert_eq!(r[0].shape(), &[5, 1, 3]);
    pfor::tensor::assert_close(&r[0], &r[1], 1e-5, 1e-6).unwrap();
}

#[test]
fn weights_as_parameters_give_per_example_gradients_equal_to_the_loop() {
    let m = mlp();
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn(&[4, 4], 5).unwrap());
    let params: Vec<ValueId> = m.parameters().iter().map(|(_, t)| g.constant(t.clone())).collect();
    let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| -> Result<ValueId> {
        let x = g.expand_dims(rows[0], 0)?;
        let probs = m.call_with_params(g, &[x], p)?;
        let l = g.log(probs[0])?;
        g.sum_all(l)
    };
    let per_ex = per_example_gradients(&mut g, loss, &[xs], &params).unwrap();
    // the loop of gradients, one example at a time
    let looped = for_loop(&mut g, 4, |g, i| {
        let row = g.gather(xs, i, 0)?;
        let l = loss(g, &[row], &params)?;
        gradients(g, &[l], &params, None)
    })
    .unwrap();
    let mut fetch = per_ex.clone();
    fetch.extend(&looped);
    let r = run_once(&g, &fetch, &[]).unwrap();
    for k in 0..params.len() {
        assert_eq!(r[k].shape()[0], 4);
        pfor::tensor::assert_close(&r[k], &r[params.len() + k], 1e-4, 1e-5).unwrap();
    }
}

#[test]
fn call_checks_input_and_parameter_counts_and_types() {
    let m = mlp();
    let mut g = Graph::new();
    let wrong = g.input("x", DType::F64, [1, 4]);
    let e = m.call(&mut g, &[wrong]).unwrap_err().to_string();
    assert!(e.contains("input 'x'"), "{e}");
    let x = g.input("x32", DType::F32, [1, 4]);
    let e = m.call(&mut g, &[x, x]).unwrap_err().to_string();
    assert!(e.contains("2 inputs given"), "{e}");
    let e = m.call_with_params(&mut g, &[x], &[x]).unwrap_err().to_string();
    assert!(e.contains("1 parameters given"), "{e}");
}

fn one_node(op: &str, attrs: &[Attr]) -> Vec<u8> {
    model(
        13,
        &[node(op, "the_node", &["x"], &["y"], attrs)],
        &[value_info("x", FLOAT, &[Ok(2), Ok(3)])],
        &[value_info("y", FLOAT, &[])],
        &[],
    )
}

fn import_error(bytes: &[u8]) -> String {
    match onnx::load_bytes(bytes).and_then(|m| m.to_graph()) {
        Ok(_) => panic!("imported"),
        Err(e) => {
            assert!(matches!(e.root(), Error::Unsupported { .. }), "{e:?}");
            e.to_string()
        }
    }
}

#[test]
fn an_unsupported_op_is_named_with_its_node_and_opset() {
    let e = import_error(&one_node("FancyNewOp", &[]));
    for part in ["FancyNewOp", "the_node", "opset 13", "op type"] {
        assert!(e.contains(part), "{part} missing in: {e}");
    }
}

#[test]
fn an_attribute_the_converter_does_not_read_is_refused() {
    let e = import_error(&one_node("Relu", &[Attr::Int("mystery", 1)]));
    assert!(e.contains("attribute 'mystery'") && e.contains("Relu"), "{e}");
    let mut gelu = one_node("Gelu", &[Attr::Str("approximate", "cubic")]);
    // Gelu exists from opset 20: the model's opset (last byte of the opset import) is 20
    *gelu.last_mut().unwrap() = 20;
    let e = import_error(&gelu);
    assert!(e.contains("approximate") && e.contains("cubic"), "{e}");
}

#[test]
fn an_opset_outside_the_range_is_refused() {
    let bytes = model(29, &[], &[], &[], &[]);
    let e = onnx::load_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("opset 29"), "{e}");
}

#[test]
fn malformed_bytes_are_errors_not_panics() {
    let good = one_node("Relu", &[]);
    for cut in 1..good.len() {
        // every prefix either decodes to something or is an error; nothing panics
        let _ = onnx::load_bytes(&good[..cut]).and_then(|m| m.to_graph());
    }
    let e = onnx::load_bytes(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]).unwrap_err().to_string();
    assert!(e.contains("malformed ModelProto"), "{e}");
    let e = onnx::load_bytes(&[0x0b]).unwrap_err().to_string();
    assert!(e.contains("wire type 3"), "{e}");
}

#[test]
fn shape_arithmetic_folds_to_constants_and_reshape_uses_it() {
    // y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])) : [2, 3, 4] → [2, 12]
    let bytes = model(
        13,
        &[
            node("Shape", "s", &["x"], &["shape"], &[]),
            node("Gather", "g", &["shape", "zero"], &["n"], &[Attr::Int("axis", 0)]),
            node("Unsqueeze", "u", &["n", "axes"], &["n1"], &[]),
            node("Concat", "c", &["n1", "minus1"], &["target"], &[Attr::Int("axis", 0)]),
            node("Reshape", "r", &["x", "target"], &["y"], &[]),
        ],
        &[value_info("x", FLOAT, &[Ok(2), Ok(3), Ok(4)])],
        &[value_info("y", FLOAT, &[])],
        &[tensor_i64("zero", &[], &[0]), tensor_i64("axes", &[1], &[0]), tensor_i64("minus1", &[1], &[-1])],
    );
    let m = onnx::load_bytes(&bytes).unwrap();
    let (g, ins, outs) = m.to_graph().unwrap();
    assert_eq!(g.shape(outs[0]).unwrap().as_fixed(), Some(vec![2, 12]));
    let x = Tensor::randn(&[2, 3, 4], 1).unwrap();
    let r = run_once(&g, &outs, &[(ins[0], x.clone())]).unwrap();
    assert_eq!(r[0].to_f64_vec(), x.to_f64_vec());
}

#[test]
fn conv_with_pads_groups_and_bias_matches_a_direct_sum() {
    // x [1, 4, 3, 3], w [2, 2, 2, 2] (group 2), pads 1, stride 2, bias
    let xs: Vec<f32> = (0..36).map(|v| (v as f32 * 0.37).sin()).collect();
    let ws: Vec<f32> = (0..16).map(|v| (v as f32 * 0.71).cos()).collect();
    let bs = [0.5f32, -0.25];
    let bytes = model(
        11,
        &[node(
            "Conv",
            "conv",
            &["x", "w", "b"],
            &["y"],
            &[Attr::Int("group", 2), Attr::Ints("pads", &[1, 1, 1, 1]), Attr::Ints("strides", &[2, 2])],
        )],
        &[value_info("x", FLOAT, &[Ok(1), Ok(4), Ok(3), Ok(3)])],
        &[value_info("y", FLOAT, &[])],
        &[tensor_f32("w", &[2, 2, 2, 2], &ws), tensor_f32("b", &[2], &bs)],
    );
    let m = onnx::load_bytes(&bytes).unwrap();
    let (g, ins, outs) = m.to_graph().unwrap();
    let r = run_once(&g, &outs, &[(ins[0], Tensor::from_vec(&[1, 4, 3, 3], xs.clone()).unwrap())]).unwrap();
    assert_eq!(r[0].shape(), &[1, 2, 2, 2]);
    let got = r[0].to_f64_vec();
    for o in 0..2 {
        for (oy, ox) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
            let mut acc = f64::from(bs[o]);
            for ci in 0..2 {
                let c = o * 2 + ci; // group o reads channels 2o, 2o+1
                for ky in 0..2 {
                    for kx in 0..2 {
                        let (iy, ix) = (oy * 2 + ky, ox * 2 + kx);
                        if (1..=3).contains(&iy) && (1..=3).contains(&ix) {
                            let xv = xs[c * 9 + (iy - 1) * 3 + (ix - 1)];
                            acc += f64::from(xv) * f64::from(ws[((o * 2 + ci) * 2 + ky) * 2 + kx]);
                        }
                    }
                }
            }
            let v = got[o * 4 + oy * 2 + ox];
            assert!((v - acc).abs() < 1e-5, "o={o} ({oy},{ox}): {v} vs {acc}");
        }
    }
}

#[test]
fn supported_ops_lists_every_family() {
    let ops = onnx::supported_ops();
    for op in ["Add", "Conv", "Reshape", "ReduceMean", "Softmax", "Gemm", "Where", "Expand"] {
        assert!(ops.contains(&op), "{op}");
    }
    let _ = INT64;
}
