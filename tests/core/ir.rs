//! Core tests: graph IR (inference at insertion, verify, printing, errors).

use pfor::prelude::*;

#[test]
fn inference_at_insertion_and_types() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(3)]);
    let y = g.tanh(x).unwrap();
    let t = g.value_type(y).unwrap();
    assert_eq!(t.dtype, DType::F32);
    assert_eq!(t.shape, Shape::from([Dim::dynamic("n"), Dim::fixed(3)]));
    assert_eq!(t.to_string(), "f32[n,3]");
    g.verify().unwrap();
}

#[test]
fn build_time_error_names_node_and_op() {
    let mut g = Graph::new();
    let x = g.input("x", DType::I64, [2]);
    let e = g.sqrt(x).unwrap_err();
    match &e {
        Error::AtNode { node, op, source } => {
            assert_eq!(node.index(), 1);
            assert_eq!(op, "sqrt");
            assert!(matches!(**source, Error::DType { .. }));
        }
        other => panic!("unexpected {other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.contains("%1") && msg.contains("sqrt") && msg.contains("i64"), "{msg}");
    // the failed node is not in the graph
    assert_eq!(g.num_nodes(), 1);
    g.verify().unwrap();
}

#[test]
fn unknown_value_is_an_error() {
    let mut g = Graph::new();
    let mut other = Graph::new();
    let a = other.input("a", DType::F32, [1]);
    let _b = other.exp(a).unwrap();
    let v = other.exp(a).unwrap();
    assert!(matches!(g.exp(v), Err(Error::UnknownValue { .. })));
    assert!(matches!(Session::new(&g, &[v]), Err(Error::UnknownValue { .. })));
}

#[test]
fn display_and_dot() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2]);
    let y = g.exp(x).unwrap();
    let _z = g.neg(y).unwrap();
    let text = g.to_string();
    assert!(text.contains("%1 = exp(%0) : f32[2]"), "{text}");
    assert!(text.contains("%2 = neg(%1) : f32[2]"), "{text}");
    let dot = g.to_dot();
    assert!(dot.starts_with("digraph") && dot.contains("n0 -> n1") && dot.contains("n1 -> n2"), "{dot}");
}

#[test]
fn topo_order_consumers_ancestors() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let a = g.exp(x).unwrap();
    let b = g.neg(x).unwrap();
    let c = g.sin(a).unwrap();
    assert_eq!(g.topo_order().unwrap(), g.node_ids());
    assert_eq!(g.consumers(x.node), vec![a.node, b.node]);
    assert_eq!(g.ancestors(&[c]).unwrap(), vec![x.node, a.node, c.node]);
    let removed = g.prune(&[c]).unwrap();
    assert_eq!(removed, 1);
    assert!(g.node(b.node).is_err());
    g.verify().unwrap();
}

#[test]
fn wrong_arity_is_an_error() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2]);
    let e = g.add_op(Op::Unary(pfor::ops::UnaryKind::Exp), &[x, x]).unwrap_err();
    assert!(matches!(e.root(), Error::Arity { op, got: 2, .. } if op == "exp"), "{e}");
    assert!(e.to_string().contains("expected 1 inputs, got 2"), "{e}");
}

#[test]
fn cycles_are_detected() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let a = g.exp(x).unwrap();
    let b = g.sin(a).unwrap();
    g.replace_input(a.node, 0, b).unwrap(); // a = exp(b), b = sin(a)
    let e = g.verify().unwrap_err();
    assert!(matches!(e, Error::Cycle { .. }), "{e}");
    assert!(e.to_string().starts_with("cycle through node %"), "{e}");
    assert!(matches!(Session::new(&g, &[b]), Err(Error::Cycle { .. })));
}

#[test]
fn error_stays_small() {
    // Returned by value from every fallible call: keep it under clippy's 128-byte limit.
    assert!(std::mem::size_of::<Error>() <= 72, "{}", std::mem::size_of::<Error>());
}
