//! ONNX bitwise operators on encoded models: results wrapped to the narrow ONNX type
//! (uint8 / int8 overflow, out-of-range shift counts), `pfor` (strict) against the loop, and
//! the refusals (a float bit cast, an element type the model does not state).

use super::encode::{Attr, INT64, Msg, model, node, value_info};
use pfor::onnx;
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

const UINT8: i64 = 2;
const INT8: i64 = 3;

fn vi(name: &str, elem: i64, dims: &[i64]) -> Msg {
    value_info(name, elem, &dims.iter().map(|&d| Ok(d)).collect::<Vec<_>>())
}

/// One node over two inputs of ONNX type `elem` ([4]), or one for `BitwiseNot`.
fn one(op: &str, elem: i64, attrs: &[Attr]) -> onnx::Model {
    let ins: &[&str] = if op == "BitwiseNot" { &["a"] } else { &["a", "b"] };
    let inputs: Vec<Msg> = ins.iter().map(|n| vi(n, elem, &[4])).collect();
    let bytes = model(18, &[node(op, "bits", ins, &["y"], attrs)], &inputs, &[vi("y", elem, &[4])], &[]);
    onnx::load_bytes(&bytes).unwrap()
}

fn run(m: &onnx::Model, xs: &[&[i64]]) -> Vec<i64> {
    let (g, ins, outs) = m.to_graph().unwrap();
    let feeds: Vec<(ValueId, Tensor)> = ins.iter().zip(xs).map(|(&v, x)| (v, Tensor::vec1(x))).collect();
    run_once(&g, &outs, &feeds).unwrap()[0].to_vec::<i64>().unwrap()
}

#[test]
fn shifts_and_not_wrap_to_the_narrow_type() {
    let left = [Attr::Str("direction", "LEFT")];
    let right = [Attr::Str("direction", "RIGHT")];
    // uint8: 200 << 1 = 144 (mod 256); counts >= 8 give 0
    assert_eq!(run(&one("BitShift", UINT8, &left), &[&[200, 1, 3, 255], &[1, 7, 8, 200]]), [144, 128, 0, 0]);
    assert_eq!(run(&one("BitShift", UINT8, &right), &[&[200, 128, 3, 255], &[1, 7, 8, 0]]), [100, 1, 0, 255]);
    // int8: 64 << 1 = -128; a negative count gives 0 (left) or the sign fill (right)
    assert_eq!(run(&one("BitShift", INT8, &left), &[&[64, 1, -64, 5], &[1, 7, 1, -1]]), [-128, -128, -128, 0]);
    assert_eq!(run(&one("BitShift", INT8, &right), &[&[-8, -1, -128, -8], &[1, 1, 1, -1]]), [-4, -1, -64, -1]);
    assert_eq!(run(&one("BitwiseNot", UINT8, &[]), &[&[0, 1, 254, 255]]), [255, 254, 1, 0]);
    assert_eq!(run(&one("BitwiseNot", INT8, &[]), &[&[0, 1, -128, 127]]), [-1, -2, 127, -128]);
    assert_eq!(run(&one("BitwiseXor", UINT8, &[]), &[&[0, 1, 254, 255], &[255, 3, 2, 15]]), [255, 2, 252, 240]);
}

#[test]
fn bitwise_ops_agree_under_pfor() {
    let m = one("BitShift", UINT8, &[Attr::Str("direction", "LEFT")]);
    let mut g = Graph::new();
    let a = g.constant(Tensor::from_vec(&[3, 4], vec![200i64, 1, 3, 255, 7, 8, 9, 10, 128, 64, 32, 16]).unwrap());
    let b = g.constant(Tensor::from_vec(&[3, 4], vec![1i64, 7, 8, 0, 1, 2, 3, 4, 1, 2, 9, 3]).unwrap());
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let (x, s) = (g.gather(a, i, 0)?, g.gather(b, i, 0)?);
        m.call(g, &[x, s])
    };
    let v = pfor_with(&mut g, 3, &PforOptions::strict(), body).unwrap();
    let l = for_loop(&mut g, 3, body).unwrap();
    let r = run_once(&g, &[v[0], l[0]], &[]).unwrap();
    assert_eq!(r[0], r[1]);
    assert_eq!(r[0].to_vec::<i64>().unwrap(), [144, 128, 0, 255, 14, 32, 72, 160, 0, 0, 0, 128]);
}

#[test]
fn float_bit_casts_and_unstated_widths_are_refused_by_name() {
    let bytes = model(
        26,
        &[node("BitCast", "bc", &["a"], &["y"], &[Attr::Int("to", 6)])],
        &[vi("a", 1, &[4])],
        &[vi("y", 6, &[4])],
        &[],
    );
    let e = onnx::load_bytes(&bytes).unwrap().to_graph().unwrap_err().to_string();
    for want in ["BitCast", "node 'bc'", "opset 26", "float", "int32"] {
        assert!(e.contains(want), "{want}: {e}");
    }
    // the width of a computed value is not stated: a left shift would depend on it
    let bytes = model(
        18,
        &[
            node("Add", "add", &["a", "a"], &["s"], &[]),
            node("BitShift", "sh", &["s", "a"], &["y"], &[Attr::Str("direction", "LEFT")]),
        ],
        &[vi("a", INT64, &[4])],
        &[vi("y", INT64, &[4])],
        &[],
    );
    let e = onnx::load_bytes(&bytes).unwrap().to_graph().unwrap_err().to_string();
    for want in ["BitShift", "node 'sh'", "'s'", "does not state"] {
        assert!(e.contains(want), "{want}: {e}");
    }
}
