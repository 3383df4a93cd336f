//! ONNX `Pad` in modes `edge` and `wrap` (composed from slices and concats): values against
//! numpy's `np.pad`, strict `pfor` against the loop and finite-difference gradients.

use super::coverage::check_pfor_and_gradient;
use super::encode::{Attr, DOUBLE, model, node, tensor_i64, value_info};
use pfor::onnx;
use pfor::prelude::*;

fn pad_model(mode: &str, pads: &[i64]) -> Vec<u8> {
    let x = value_info("x0", DOUBLE, &[Ok(2), Ok(3)]);
    let nodes = [node("Pad", "pad", &["x0", "p"], &["y0"], &[Attr::Str("mode", mode)])];
    model(19, &nodes, &[x], &[value_info("y0", DOUBLE, &[])], &[tensor_i64("p", &[4], pads)])
}

#[test]
fn edge_and_wrap_pads_match_numpy_and_pfor() {
    let x = Tensor::from_vec(&[2, 3], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    // pads: (axis 0 before, axis 1 before, axis 0 after, axis 1 after)
    for (mode, pads, shape, want) in [
        // np.pad(x, ((1, 0), (2, 1)), mode="edge")
        ("edge", [1, 2, 0, 1], [3, 6], vec![1., 1., 1., 2., 3., 3., 1., 1., 1., 2., 3., 3., 4., 4., 4., 5., 6., 6.]),
        // np.pad(x, ((0, 1), (2, 1)), mode="wrap")
        ("wrap", [0, 2, 1, 1], [3, 6], vec![2., 3., 1., 2., 3., 1., 5., 6., 4., 5., 6., 4., 2., 3., 1., 2., 3., 1.]),
    ] {
        let bytes = pad_model(mode, &pads);
        let (g, ins, outs) = onnx::load_bytes(&bytes).unwrap().to_graph().unwrap();
        let r = run_once(&g, &outs, &[(ins[0], x.clone())]).unwrap();
        assert_eq!(r[0], Tensor::from_vec(&shape, want).unwrap(), "{mode}");
        check_pfor_and_gradient(&bytes, std::slice::from_ref(&x));
    }
}

#[test]
fn wrap_pads_larger_than_the_axis_are_refused_by_name() {
    let e = onnx::load_bytes(&pad_model("wrap", &[0, 4, 0, 0])).unwrap().to_graph().unwrap_err().to_string();
    for want in ["Pad", "node 'pad'", "wrap", "axis 1"] {
        assert!(e.contains(want), "{want}: {e}");
    }
}
