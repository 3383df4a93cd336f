//! Inputs bound to known values (`Model::bind_input`, `Model::bind_needed_inputs`): an operand
//! our ops take statically (a `Reshape` shape, `Pad` pads, `Resize` scales) that a model
//! computes from a graph input is an import error naming the op, node, operand and the model
//! input to bind; bound, the input is a constant and the model runs, also under `pfor`. An
//! operand computed from constants only (through a node that reads an input's type) folds.

use super::encode::{FLOAT, INT64, model, node, value_info};
use pfor::api::vectorized_map;
use pfor::onnx;
use pfor::prelude::*;

/// y = Pad(x, pads) at opset 13, `pads` a graph input.
fn pad_model() -> onnx::Model {
    let bytes = model(
        13,
        &[node("Pad", "pad_node", &["x", "pads"], &["y"], &[])],
        &[value_info("x", FLOAT, &[Ok(2), Ok(3)]), value_info("pads", INT64, &[Ok(4)])],
        &[value_info("y", FLOAT, &[])],
        &[],
    );
    onnx::load_bytes(&bytes).unwrap()
}

/// y = Reshape(x, Abs(shape)): the operand is computed from the input `shape`.
fn reshape_model() -> onnx::Model {
    let bytes = model(
        13,
        &[node("Abs", "abs", &["shape"], &["s"], &[]), node("Reshape", "reshape_node", &["x", "s"], &["y"], &[])],
        &[value_info("x", FLOAT, &[Ok(2), Ok(6)]), value_info("shape", INT64, &[Ok(2)])],
        &[value_info("y", FLOAT, &[])],
        &[],
    );
    onnx::load_bytes(&bytes).unwrap()
}

#[test]
fn a_runtime_operand_needed_as_a_constant_names_op_node_input_and_how_to_bind() {
    let e = pad_model().to_graph().unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { .. }), "{e:?}");
    let e = e.to_string();
    for part in ["Pad", "pad_node", "opset 13", "input 1 ('pads')", "model input(s) 'pads'", "bind_input(\"pads\""] {
        assert!(e.contains(part), "{part} missing in: {e}");
    }
    // through another node: the model input it comes from is named, not the intermediate
    let e = reshape_model().to_graph().unwrap_err().to_string();
    for part in ["Reshape", "reshape_node", "input 1 ('s')", "model input(s) 'shape'"] {
        assert!(e.contains(part), "{part} missing in: {e}");
    }
}

#[test]
fn bind_input_makes_the_input_a_constant_and_checks_name_and_type() {
    let m = pad_model().bind_input("pads", Tensor::vec1(&[0i64, 1, 1, 0])).unwrap();
    assert_eq!(m.inputs().len(), 1);
    assert_eq!(m.bound_inputs()[0].0, "pads");
    let (g, ins, outs) = m.to_graph().unwrap();
    let x = Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let r = run_once(&g, &outs, &[(ins[0], x)]).unwrap();
    // one leading column of zeros, one trailing row
    let want = Tensor::from_vec(&[3, 4], vec![0.0f32, 1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0, 0.0, 0.0, 0.0]).unwrap();
    pfor::tensor::assert_close(&r[0], &want, 0.0, 0.0).unwrap();

    let e = pad_model().bind_input("nope", Tensor::vec1(&[0i64; 4])).unwrap_err().to_string();
    assert!(e.contains("no input 'nope'"), "{e}");
    let e = pad_model().bind_input("pads", Tensor::vec1(&[0.0f32; 4])).unwrap_err().to_string();
    assert!(e.contains("'pads'") && e.contains("declared"), "{e}");
    let e = pad_model().bind_input("pads", Tensor::vec1(&[0i64; 3])).unwrap_err().to_string();
    assert!(e.contains("'pads'"), "{e}");
}

#[test]
fn bind_needed_inputs_binds_only_what_an_operand_needs_and_the_model_runs_under_pfor() {
    let x = Tensor::randn(&[2, 6], 1).unwrap();
    let m = reshape_model().bind_needed_inputs(&[x.clone(), Tensor::vec1(&[-3i64, 4])]).unwrap();
    let names: Vec<&str> = m.inputs().iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["x"], "x stays an input");
    assert_eq!(m.bound_inputs().len(), 1);
    let (g, ins, outs) = m.to_graph().unwrap();
    let r = run_once(&g, &outs, &[(ins[0], x.clone())]).unwrap();
    assert_eq!(r[0].shape(), &[3, 4]);
    assert_eq!(r[0].to_f64_vec(), x.to_f64_vec());
    // the bound model as the per-example body of vectorized_map, against the loop
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn(&[5, 2, 6], 2).unwrap());
    let v = vectorized_map(&mut g, |g, row| m.call(g, &[row[0]]), &[xs]).unwrap();
    let l = for_loop(&mut g, 5, |g, i| {
        let row = g.gather(xs, i, 0)?;
        m.call(g, &[row])
    })
    .unwrap();
    let r = run_once(&g, &[v[0], l[0]], &[]).unwrap();
    assert_eq!(r[0].shape(), &[5, 3, 4]);
    pfor::tensor::assert_close(&r[0], &r[1], 0.0, 0.0).unwrap();
    // the wrong number of values, and an error that binding cannot fix, are returned
    let e = reshape_model().bind_needed_inputs(std::slice::from_ref(&x)).unwrap_err().to_string();
    assert!(e.contains("1 values given"), "{e}");
    let bad = model(
        13,
        &[node("FancyNewOp", "n", &["x"], &["y"], &[])],
        &[value_info("x", FLOAT, &[Ok(2)])],
        &[value_info("y", FLOAT, &[])],
        &[],
    );
    let e = onnx::load_bytes(&bad).unwrap().bind_needed_inputs(&[Tensor::vec1(&[1.0f32, 2.0])]).unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { .. }) && e.to_string().contains("FancyNewOp"), "{e}");
}

#[test]
fn an_operand_computed_from_constants_only_is_folded_even_through_a_node_reading_an_input() {
    // Pad's value = CastLike(2.5, x): CastLike reads only x's type, so the value is a constant
    let c = super::encode::tensor_f32("c", &[], &[2.5]);
    let bytes = model(
        15,
        &[
            node("CastLike", "like", &["c", "x"], &["v"], &[]),
            node("Pad", "pad_node", &["x", "pads", "v"], &["y"], &[]),
        ],
        &[value_info("x", FLOAT, &[Ok(1), Ok(2)])],
        &[value_info("y", FLOAT, &[])],
        &[c, super::encode::tensor_i64("pads", &[4], &[0, 1, 0, 0])],
    );
    let (g, ins, outs) = onnx::load_bytes(&bytes).unwrap().to_graph().unwrap();
    let x = Tensor::from_vec(&[1, 2], vec![1.0f32, 2.0]).unwrap();
    let r = run_once(&g, &outs, &[(ins[0], x)]).unwrap();
    assert_eq!(r[0].to_f64_vec(), [2.5, 1.0, 2.0]);
}
