//! ONNX control flow (`If`, `Loop`, `Scan`) on models built in memory: values against hand
//! computations, subgraphs reading outer values by name, `pfor` (strict) against the loop with
//! per-example branches and trip counts, gradients against central differences, and the
//! errors for what is not supported.

use super::coverage::check_pfor_and_gradient;
use super::encode::{Attr, BOOL, DOUBLE, INT64, Msg, graph, model, node, tensor_f64, tensor_i64, value_info};
use pfor::onnx;
use pfor::ops::Op;
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

fn vi(name: &str, elem: i64, dims: &[i64]) -> Msg {
    value_info(name, elem, &dims.iter().map(|&d| Ok(d)).collect::<Vec<_>>())
}

fn f64s(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec()).unwrap()
}

fn has_control_op(g: &Graph) -> bool {
    g.node_ids().into_iter().any(|id| matches!(g.node(id).unwrap().op, Op::Control(_)))
}

/// `y = sum(x) > thr ? x * x : sin(x)`, the branches reading `x` from the enclosing graph.
fn if_model(cond_const: Option<bool>) -> Vec<u8> {
    let then = graph("then", &[node("Mul", "sq", &["x0", "x0"], &["yt"], &[])], &[], &[vi("yt", DOUBLE, &[3])], &[]);
    let else_ = graph("else", &[node("Sin", "sin", &["x0"], &["ye"], &[])], &[], &[vi("ye", DOUBLE, &[3])], &[]);
    let mut nodes = vec![
        node("ReduceSum", "sum", &["x0"], &["s"], &[Attr::Int("keepdims", 0)]),
        node("Greater", "gt", &["s", "thr"], &["c"], &[]),
    ];
    let c = match cond_const {
        None => "c",
        Some(b) => {
            let t = Msg::new().int(2, BOOL).str(8, "k").int(5, i64::from(b));
            nodes.push(node("Constant", "k", &[], &["k"], &[Attr::Tensor("value", t)]));
            "k"
        }
    };
    nodes.push(node(
        "If",
        "branch",
        &[c],
        &["y0"],
        &[Attr::Graph("then_branch", then), Attr::Graph("else_branch", else_)],
    ));
    model(13, &nodes, &[vi("x0", DOUBLE, &[3])], &[vi("y0", DOUBLE, &[3])], &[tensor_f64("thr", &[], &[1.05])])
}

#[test]
fn if_with_a_run_time_condition_is_a_cond_per_example_under_pfor_with_fd_gradients() {
    let m = onnx::load_bytes(&if_model(None)).unwrap();
    let (g, ins, outs) = m.to_graph().unwrap();
    assert!(has_control_op(&g), "a run-time condition is a cond");
    for (x, taken) in [([0.5, 0.3, 0.2], false), ([0.5, 0.4, 0.2], true)] {
        let r = run_once(&g, &outs, &[(ins[0], f64s(&[3], &x))]).unwrap();
        let want: Vec<f64> = x.iter().map(|v| if taken { v * v } else { v.sin() }).collect();
        assert_eq!(r[0].to_f64_vec(), want);
    }
    // copies scaled by 1.0, 1.1, 1.2: sums 1.0, 1.1, 1.2 around the threshold 1.05, so the
    // examples take different branches
    check_pfor_and_gradient(&if_model(None), &[f64s(&[3], &[0.5, 0.3, 0.2])]);
}

#[test]
fn if_with_a_constant_condition_inlines_the_taken_branch() {
    for b in [true, false] {
        let m = onnx::load_bytes(&if_model(Some(b))).unwrap();
        let (g, ins, outs) = m.to_graph().unwrap();
        assert!(!has_control_op(&g), "a constant condition leaves no cond");
        let x = [0.5, -0.25, 2.0];
        let r = run_once(&g, &outs, &[(ins[0], f64s(&[3], &x))]).unwrap();
        let want: Vec<f64> = x.iter().map(|v| if b { v * v } else { v.sin() }).collect();
        assert_eq!(r[0].to_f64_vec(), want);
    }
}

/// `Loop(M, cond, x)`: `v ← 0.5 v + i + x` (x read from the enclosing graph), `M` trips; with
/// `scan`, the scan output `v²` per trip too. `v` starts at `x0`, or at the constant 0 with
/// `from_zero` (every input of the node a constant: only the body reads `x0`).
fn loop_model_from(m_const: Option<i64>, scan: bool, body_cond: &str, from_zero: bool) -> Vec<u8> {
    let mut body_nodes = vec![
        node("Mul", "half", &["v", "h"], &["hv"], &[]),
        node("Cast", "fi", &["i"], &["fi"], &[Attr::Int("to", DOUBLE)]),
        node("Add", "a", &["hv", "fi"], &["a"], &[]),
        node("Add", "vo", &["a", "x0"], &["vo"], &[]),
    ];
    let co = match body_cond {
        "pass" => {
            body_nodes.push(node("Identity", "co", &["cin"], &["co"], &[]));
            "co"
        }
        // stop once v's first element exceeds 1: a condition computed at run time
        _ => {
            body_nodes.push(node("ReduceMax", "mx", &["vo"], &["mx"], &[Attr::Int("keepdims", 0)]));
            body_nodes.push(node("Less", "co", &["mx", "one"], &["co"], &[]));
            "co"
        }
    };
    let mut outs = vec![vi(co, BOOL, &[]), vi("vo", DOUBLE, &[2])];
    if scan {
        body_nodes.push(node("Mul", "sq", &["vo", "vo"], &["so"], &[]));
        outs.push(vi("so", DOUBLE, &[2]));
    }
    let body = graph(
        "body",
        &body_nodes,
        &[vi("i", INT64, &[]), vi("cin", BOOL, &[]), vi("v", DOUBLE, &[2])],
        &outs,
        &[tensor_f64("h", &[], &[0.5]), tensor_f64("one", &[], &[1.0])],
    );
    let mut inputs = vec![vi("x0", DOUBLE, &[2])];
    let mut inits = vec![tensor_f64("zero", &[2], &[0.0, 0.0])];
    match m_const {
        Some(m) => inits.push(tensor_i64("m", &[], &[m])),
        None => inputs.push(vi("m", INT64, &[])),
    }
    let loop_outs: &[&str] = if scan { &["y0", "y1"] } else { &["y0"] };
    let mut model_outs = vec![vi("y0", DOUBLE, &[2])];
    if scan {
        model_outs.push(vi("y1", DOUBLE, &[]));
    }
    let init = if from_zero { "zero" } else { "x0" };
    model(
        16,
        &[node("Loop", "loop", &["m", "", init], loop_outs, &[Attr::Graph("body", body)])],
        &inputs,
        &model_outs,
        &inits,
    )
}

fn loop_model(m_const: Option<i64>, scan: bool, body_cond: &str) -> Vec<u8> {
    loop_model_from(m_const, scan, body_cond, false)
}

/// The loop by hand: `M` trips of `v ← 0.5 v + i + x` from `v = x`.
fn loop_by_hand(x: &[f64], m: i64) -> Vec<Vec<f64>> {
    loop_by_hand_from(x, x, m)
}

/// [`loop_by_hand`] from `v = v0`.
fn loop_by_hand_from(x: &[f64], v0: &[f64], m: i64) -> Vec<Vec<f64>> {
    let mut v = v0.to_vec();
    let mut trips = vec![];
    for i in 0..m {
        v = v.iter().zip(x).map(|(a, b)| 0.5 * a + i as f64 + b).collect();
        trips.push(v.clone());
    }
    trips.insert(0, v);
    trips
}

#[test]
fn loop_with_a_per_example_trip_count_is_a_while_loop_under_pfor() {
    let m = onnx::load_bytes(&loop_model(None, false, "pass")).unwrap();
    assert_eq!(m.inputs().iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["x0", "m"]);
    let (g, _, _) = m.to_graph().unwrap();
    assert!(has_control_op(&g), "a Loop without scan outputs is a while loop");
    let trips = [0i64, 1, 3, 5];
    let xs_v: Vec<f64> = (0..8).map(|k| 0.1 * k as f64 - 0.3).collect();
    let mut g = Graph::new();
    let xs = g.constant(f64s(&[4, 2], &xs_v));
    let ms = g.constant(Tensor::vec1(&trips));
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let x = g.gather(xs, i, 0)?;
        let mi = g.gather(ms, i, 0)?;
        m.call(g, &[x, mi])
    };
    let v = pfor_with(&mut g, 4, &PforOptions::strict(), body).unwrap();
    let l = for_loop(&mut g, 4, body).unwrap();
    let r = run_once(&g, &[v[0], l[0]], &[]).unwrap();
    pfor::tensor::assert_close(&r[0], &r[1], 1e-12, 1e-12).unwrap();
    let want: Vec<f64> = (0..4).flat_map(|k| loop_by_hand(&xs_v[2 * k..2 * k + 2], trips[k])[0].clone()).collect();
    pfor::tensor::assert_close(&r[0], &f64s(&[4, 2], &want), 1e-12, 1e-12).unwrap();
    // the gradient w.r.t. x through the while loop (trip counts 5, 5 and 6 in the copies)
    check_pfor_and_gradient(&loop_model(None, false, "pass"), &[f64s(&[2], &[0.3, -0.2]), Tensor::scalar(5i64)]);
}

#[test]
fn loop_with_a_run_time_condition_stops_each_example_on_its_own() {
    // no scan outputs: the body's condition (max(v) < 1) is a while condition per example
    let bytes = loop_model(Some(10), false, "stop");
    let m = onnx::load_bytes(&bytes).unwrap();
    let (g, ins, outs) = m.to_graph().unwrap();
    let x = [0.1, -0.2];
    let r = run_once(&g, &outs, &[(ins[0], f64s(&[2], &x))]).unwrap();
    // by hand: trip 0 gives [0.15, -0.3] (max < 1, go on), trip 1 gives [1.175, 0.65] (stop)
    let want = loop_by_hand(&x, 2)[0].clone();
    pfor::tensor::assert_close(&r[0], &f64s(&[2], &want), 1e-12, 1e-12).unwrap();
    check_pfor_and_gradient(&bytes, &[f64s(&[2], &[0.1, -0.2])]);
}

#[test]
fn loop_with_scan_outputs_stacks_one_row_per_trip() {
    let bytes = loop_model(Some(3), true, "pass");
    let m = onnx::load_bytes(&bytes).unwrap();
    let (g, ins, outs) = m.to_graph().unwrap();
    let x = [0.25, -0.5];
    let r = run_once(&g, &outs, &[(ins[0], f64s(&[2], &x))]).unwrap();
    let hand = loop_by_hand(&x, 3);
    pfor::tensor::assert_close(&r[0], &f64s(&[2], &hand[0]), 1e-12, 1e-12).unwrap();
    let rows: Vec<f64> = hand[1..].iter().flat_map(|v| v.iter().map(|a| a * a)).collect();
    pfor::tensor::assert_close(&r[1], &f64s(&[3, 2], &rows), 1e-12, 1e-12).unwrap();
    check_pfor_and_gradient(&bytes, &[f64s(&[2], &x)]);
}

#[test]
fn loop_scan_outputs_with_a_run_time_trip_count_or_condition_are_refused_by_name() {
    // M from a model input: the error names the op, node, input and how to bind it
    let m = onnx::load_bytes(&loop_model(None, true, "pass")).unwrap();
    let e = m.to_graph().unwrap_err().to_string();
    for want in ["Loop", "node 'loop'", "opset 16", "'m'", "bind_input"] {
        assert!(e.contains(want), "{want}: {e}");
    }
    // with M bound, it converts
    let m = m.bind_input("m", Tensor::scalar(2i64)).unwrap();
    assert!(m.to_graph().is_ok());
    // a condition computed at run time would make the number of scan rows data-dependent
    let e = onnx::load_bytes(&loop_model(Some(3), true, "stop")).unwrap().to_graph().unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { .. }), "{e}");
    let e = e.to_string();
    for want in ["Loop", "node 'loop'", "scan outputs", "condition computed at run time"] {
        assert!(e.contains(want), "{want}: {e}");
    }
}

#[test]
fn a_subgraph_reading_an_undefined_name_is_an_error_naming_it() {
    let then = graph("then", &[node("Neg", "n", &["nowhere"], &["yt"], &[])], &[], &[vi("yt", DOUBLE, &[3])], &[]);
    let else_ = graph("else", &[node("Sin", "sin", &["x0"], &["ye"], &[])], &[], &[vi("ye", DOUBLE, &[3])], &[]);
    let nodes = [
        node("ReduceSum", "sum", &["x0"], &["s"], &[Attr::Int("keepdims", 0)]),
        node("Greater", "gt", &["s", "thr"], &["c"], &[]),
        node("If", "branch", &["c"], &["y0"], &[Attr::Graph("then_branch", then), Attr::Graph("else_branch", else_)]),
    ];
    let bytes =
        model(13, &nodes, &[vi("x0", DOUBLE, &[3])], &[vi("y0", DOUBLE, &[3])], &[tensor_f64("thr", &[], &[1.0])]);
    let e = onnx::load_bytes(&bytes).unwrap().to_graph().unwrap_err().to_string();
    for want in ["If", "node 'branch'", "'nowhere'"] {
        assert!(e.contains(want), "{want}: {e}");
    }
}

/// `Scan` over the rows of `x1` [3, 2] in reverse, state `s ← s * e + e`, scan output
/// `sin(s)` stacked along axis 1 ([2, 3]).
fn scan_model() -> Vec<u8> {
    let body = graph(
        "body",
        &[
            node("Mul", "m", &["s", "e"], &["se"], &[]),
            node("Add", "a", &["se", "e"], &["so"], &[]),
            node("Sin", "o", &["so"], &["o"], &[]),
        ],
        &[vi("s", DOUBLE, &[2]), vi("e", DOUBLE, &[2])],
        &[vi("so", DOUBLE, &[2]), vi("o", DOUBLE, &[2])],
        &[],
    );
    let attrs = [
        Attr::Graph("body", body),
        Attr::Int("num_scan_inputs", 1),
        Attr::Ints("scan_input_directions", &[1]),
        Attr::Ints("scan_output_axes", &[1]),
    ];
    model(
        16,
        &[node("Scan", "scan", &["x0", "x1"], &["y0", "y1"], &attrs)],
        &[vi("x0", DOUBLE, &[2]), vi("x1", DOUBLE, &[3, 2])],
        &[vi("y0", DOUBLE, &[2]), vi("y1", DOUBLE, &[2, 3])],
        &[],
    )
}

#[test]
fn scan_in_reverse_with_an_output_axis_matches_a_hand_computation_and_pfor() {
    let bytes = scan_model();
    let m = onnx::load_bytes(&bytes).unwrap();
    let (g, ins, outs) = m.to_graph().unwrap();
    let s0 = [0.5, -1.0];
    let xs = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6];
    let r = run_once(&g, &outs, &[(ins[0], f64s(&[2], &s0)), (ins[1], f64s(&[3, 2], &xs))]).unwrap();
    let mut s = s0.to_vec();
    let mut cols = vec![];
    for t in (0..3).rev() {
        s = s.iter().zip(&xs[2 * t..2 * t + 2]).map(|(a, e)| a * e + e).collect();
        cols.push(s.iter().map(|a| a.sin()).collect::<Vec<_>>());
    }
    pfor::tensor::assert_close(&r[0], &f64s(&[2], &s), 1e-12, 1e-12).unwrap();
    let want: Vec<f64> = (0..2).flat_map(|j| cols.iter().map(move |c| c[j])).collect();
    pfor::tensor::assert_close(&r[1], &f64s(&[2, 3], &want), 1e-12, 1e-12).unwrap();
    check_pfor_and_gradient(&bytes, &[f64s(&[2], &s0), f64s(&[3, 2], &xs)]);
}

#[test]
fn a_loop_of_constant_inputs_whose_body_reads_a_model_input_is_not_folded() {
    // M and the initial value are constants, but the body reads x0: the loop runs per call
    for scan in [false, true] {
        let bytes = loop_model_from(Some(2), scan, "pass", true);
        let (g, ins, outs) = onnx::load_bytes(&bytes).unwrap().to_graph().unwrap();
        let x = [0.25, -0.5];
        let r = run_once(&g, &outs, &[(ins[0], f64s(&[2], &x))]).unwrap();
        let hand = loop_by_hand_from(&x, &[0.0, 0.0], 2);
        pfor::tensor::assert_close(&r[0], &f64s(&[2], &hand[0]), 1e-12, 1e-12).unwrap();
    }
}

#[test]
fn control_flow_and_bitwise_ops_are_listed_as_supported() {
    let ops = onnx::supported_ops();
    for op in ["If", "Loop", "Scan", "BitShift", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor", "BitCast"] {
        assert!(ops.contains(&op), "{op}");
    }
    assert_eq!(ops.len(), 167, "the count the README states");
}
