//! The pass pipeline (`pfor::passes`): its declared order, the verifier run after each pass
//! naming the pass that broke the graph, and the one cost estimate per op.

use pfor::ops::LinearOp;
use pfor::passes::cost::{Work, graph_cost, op_cost};
use pfor::passes::{Pass, PassCtx, Pipeline};
use pfor::prelude::*;

/// A deliberately broken pass: feeds the region's last node back into its first non-input
/// node's input 0, making a cycle (types agree, so `replace_input` accepts it).
struct MakeCycle;

impl Pass for MakeCycle {
    fn name(&self) -> &str {
        "make-cycle"
    }
    fn run(&self, g: &mut Graph, cx: &mut PassCtx) -> Result<()> {
        let region = cx.region(g);
        let first = *region.iter().find(|&&n| !g.node(n).unwrap().inputs.is_empty()).unwrap();
        let last = *region.last().unwrap();
        g.replace_input(first, 0, ValueId { node: last, slot: 0 })
    }
}

/// A pass that does nothing (so the blame falls on the right one of several).
struct Nothing;

impl Pass for Nothing {
    fn name(&self) -> &str {
        "nothing"
    }
    fn run(&self, _: &mut Graph, _: &mut PassCtx) -> Result<()> {
        Ok(())
    }
}

/// `x -> neg -> neg -> neg`, returning the graph and the last value.
fn chain() -> (Graph, ValueId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [4]);
    let a = g.neg(x).unwrap();
    let b = g.neg(a).unwrap();
    let c = g.neg(b).unwrap();
    (g, c)
}

#[test]
fn simplify_pipeline_declares_its_passes_in_order() {
    assert_eq!(Pipeline::simplify().names(), ["dead", "rewrite", "narrow", "dead"]);
}

#[test]
fn a_pass_that_breaks_the_graph_is_named_by_the_verifier() {
    let (mut g, c) = chain();
    let pipeline = Pipeline::new().then(Nothing).then(MakeCycle).then(Nothing).with_verify(true);
    let err = pipeline.run(&mut g, &[c], None).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Verify(_)), "{msg}");
    assert!(msg.contains("pass `make-cycle`"), "{msg}");
    assert!(!msg.contains("`nothing`"), "{msg}");
}

#[test]
fn verification_is_on_by_default_in_debug_builds() {
    let (mut g, c) = chain();
    let res = Pipeline::new().then(MakeCycle).run(&mut g, &[c], None);
    assert_eq!(res.is_err(), cfg!(debug_assertions), "{res:?}");
}

#[test]
fn a_graph_broken_before_the_pipeline_is_not_blamed_on_a_pass() {
    let (mut g, c) = chain();
    MakeCycle.run(&mut g, &mut PassCtx::default()).unwrap();
    let msg = Pipeline::new().then(Nothing).with_verify(true).run(&mut g, &[c], None).unwrap_err().to_string();
    assert!(msg.contains("before the pass pipeline"), "{msg}");
    assert!(!msg.contains("`nothing`"), "{msg}");
}

#[test]
fn the_simplify_pipeline_verifies_clean_on_a_real_graph() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 3]);
    let t = g.transpose(x, &[1, 0]).unwrap();
    let back = g.transpose(t, &[1, 0]).unwrap();
    let y = g.neg(back).unwrap();
    let rep = Pipeline::simplify().with_verify(true).run(&mut g, &[y], None).unwrap();
    assert_eq!(rep.forwarded, 1);
    g.verify().unwrap();
}

#[test]
fn op_cost_counts_contractions_elementwise_and_free_ops() {
    let a = TensorType::new(DType::F32, Shape::fixed(&[8, 16]));
    let b = TensorType::new(DType::F32, Shape::fixed(&[16, 4]));
    let out = TensorType::new(DType::F32, Shape::fixed(&[8, 4]));
    let mm = Op::Linear(LinearOp::MatMul { transpose_a: false, transpose_b: false });
    let c = op_cost(&mm, &[&a, &b], std::slice::from_ref(&out));
    assert_eq!((c.work, c.flops, c.multiply_adds()), (Work::Contraction, 2 * 8 * 16 * 4, 8 * 16 * 4));
    assert_eq!(c.bytes, 4 * (8 * 16 + 16 * 4 + 8 * 4));
    assert_eq!((c.largest, c.dynamic), (128, false));

    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [8, 16]);
    let e = g.exp(x).unwrap();
    let n = g.neg(e).unwrap();
    let (ne, nn) = (g.node(e.node).unwrap(), g.node(n.node).unwrap());
    let xt = g.value_type(x).unwrap();
    assert_eq!(op_cost(&ne.op, &[xt], &ne.outputs).flops, 8 * 128, "exp: transcendental");
    assert_eq!(op_cost(&nn.op, &[xt], &nn.outputs).flops, 128, "neg: one per element");
    let xn = g.node(x.node).unwrap();
    assert_eq!(op_cost(&xn.op, &[], &xn.outputs).work, Work::Free);
    let gc = graph_cost(&g);
    assert_eq!((gc.nodes, gc.control, gc.flops), (3, 0, 9 * 128));

    let dynamic = TensorType::new(DType::F32, Shape::from(vec![Dim::unknown(), Dim::Fixed(16)]));
    let c = op_cost(&ne.op, &[&dynamic], std::slice::from_ref(&dynamic));
    assert!(c.dynamic);
    assert_eq!(c.flops, 0);
}
