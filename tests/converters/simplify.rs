//! The post-vectorization simplification pass: golden tests per rewrite (op kinds and node
//! counts after the pass, and bit-equal values before/after on random inputs), what it must
//! never touch (inputs, random and stateful ops, older nodes), and its effect inside pfor.

use crate::common::coverage::pfor_recorded;
use pfor::ops::{ElementwiseKind, RandomKind, ShapeKind, StateKind, UnaryKind};
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, SimplifyReport, pfor_with_report, simplify, simplify_since};

/// Kinds of the nodes computing `outs` (sorted by node, so stable).
fn kinds(g: &Graph, outs: &[ValueId]) -> Vec<OpKind> {
    g.ancestors(outs).unwrap().into_iter().map(|n| g.node(n).unwrap().op.kind()).collect()
}

fn count(ks: &[OpKind], k: OpKind) -> usize {
    ks.iter().filter(|x| **x == k).count()
}

/// Build a graph, evaluate it, simplify it (whole graph), check `verify`, re-evaluate and
/// assert the values are bit-equal. Returns the graph, the report and the kinds after.
fn golden(
    inputs: &[(&str, DType, &[usize])],
    build: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
) -> (Graph, SimplifyReport, Vec<OpKind>) {
    let mut g = Graph::new();
    let xs: Vec<ValueId> = inputs.iter().map(|(name, dt, shape)| g.input(name, *dt, *shape)).collect();
    let feeds: Vec<(ValueId, Tensor)> = xs
        .iter()
        .zip(inputs)
        .enumerate()
        .map(|(k, (&x, (_, dt, shape)))| (x, Tensor::randn_f64(shape, 100 + k as u64).unwrap().cast(*dt)))
        .collect();
    let outs = build(&mut g, &xs).unwrap();
    let before = run_once(&g, &outs, &feeds).unwrap();
    let rep = simplify(&mut g, &outs).unwrap();
    g.verify().unwrap();
    assert_eq!(rep.outputs.len(), outs.len());
    let after = run_once(&g, &rep.outputs, &feeds).unwrap();
    assert_eq!(before, after, "values changed by simplify\n{g}");
    let ks = kinds(&g, &rep.outputs);
    (g, rep, ks)
}

const RESHAPE: OpKind = OpKind::Shape(ShapeKind::Reshape);
const TRANSPOSE: OpKind = OpKind::Shape(ShapeKind::Transpose);

#[test]
fn reshape_chain_becomes_one_reshape() {
    let (g, rep, ks) = golden(&[("x", DType::F32, &[2, 3, 4])], |g, x| {
        let a = g.reshape(x[0], &[6, 4])?;
        let b = g.reshape(a, &[4, -1])?;
        let c = g.reshape(b, &[24])?;
        Ok(vec![g.tanh(c)?])
    });
    assert_eq!(ks, vec![OpKind::Input, RESHAPE, OpKind::Unary(UnaryKind::Tanh)], "{g}");
    assert_eq!((rep.folded, rep.removed), (2, 2), "{rep:?}");
    assert_eq!(g.num_nodes(), 3);
}

#[test]
fn reshape_to_the_same_static_shape_vanishes() {
    let (g, rep, ks) = golden(&[("x", DType::F64, &[2, 3, 4])], |g, x| {
        let same = g.reshape(x[0], &[2, 3, 4])?;
        let a = g.reshape(same, &[6, 4])?;
        let back = g.reshape(a, &[2, -1, 4])?;
        Ok(vec![g.neg(back)?])
    });
    assert_eq!(ks, vec![OpKind::Input, OpKind::Unary(UnaryKind::Neg)], "{g}");
    assert_eq!(rep.removed, 3);
}

#[test]
fn an_output_that_is_a_cancelling_chain_becomes_the_source() {
    let (_, rep, ks) = golden(&[("x", DType::F32, &[3, 4])], |g, x| {
        let a = g.reshape(x[0], &[12])?;
        Ok(vec![g.reshape(a, &[3, 4])?])
    });
    assert_eq!(ks, vec![OpKind::Input]);
    assert_eq!(rep.outputs[0].node.index(), 0);
}

#[test]
fn expand_dims_and_squeeze_cancel() {
    let (g, _, ks) = golden(&[("x", DType::F32, &[3, 4]), ("y", DType::F32, &[1, 5])], |g, x| {
        let e = g.expand_dims(x[0], 1)?;
        let s = g.squeeze(e, Some(&[1]))?;
        let q = g.squeeze(x[1], Some(&[0]))?;
        let back = g.expand_dims(q, 0)?;
        Ok(vec![g.exp(s)?, g.exp(back)?])
    });
    assert_eq!(
        ks,
        vec![OpKind::Input, OpKind::Input, OpKind::Unary(UnaryKind::Exp), OpKind::Unary(UnaryKind::Exp)],
        "{g}"
    );
}

#[test]
fn two_views_without_a_reshape_are_left_alone_and_mixed_views_fold() {
    // expand_dims∘expand_dims is two zero-copy views; folding it into a reshape could add a
    // copy for a non-contiguous input, so it stays.
    let (g, rep, ks) = golden(&[("x", DType::F32, &[3, 4])], |g, x| {
        let a = g.expand_dims(x[0], 0)?;
        let b = g.expand_dims(a, 0)?;
        let r = g.reshape(x[0], &[12])?;
        let e = g.expand_dims(r, 1)?;
        Ok(vec![g.abs(b)?, g.abs(e)?])
    });
    assert_eq!(count(&ks, OpKind::Shape(ShapeKind::ExpandDims)), 2, "{g}");
    assert_eq!(count(&ks, RESHAPE), 1, "{g}");
    assert_eq!(rep.folded, 1);
}

#[test]
fn transpose_chains_compose_or_cancel() {
    let (g, rep, ks) = golden(&[("x", DType::F32, &[2, 3, 4])], |g, x| {
        let t1 = g.transpose(x[0], &[1, 2, 0])?; // [3,4,2]
        let id = g.transpose(t1, &[2, 0, 1])?; // back to x
        let t2 = g.transpose(t1, &[1, 0, 2])?; // [4,3,2] = x.transpose([2,1,0])
        let t3 = g.transpose(t2, &[0, 1, 2])?; // identity
        Ok(vec![g.abs(id)?, g.abs(t3)?])
    });
    assert_eq!(count(&ks, TRANSPOSE), 1, "{g}");
    let t = g.ancestors(&rep.outputs).unwrap().into_iter().find(|n| g.node(*n).unwrap().op.kind() == TRANSPOSE);
    let t = g.node(t.unwrap()).unwrap();
    assert_eq!(t.op.to_string(), "transpose{perm=[2, 1, 0]}", "{g}");
    assert_eq!(t.inputs[0].node.index(), 0, "reads x directly");
}

#[test]
fn broadcasts_feeding_broadcasting_ops_are_bypassed() {
    let (g, rep, ks) =
        golden(&[("a", DType::F32, &[3, 1]), ("b", DType::F32, &[3, 4]), ("c", DType::F32, &[1, 4])], |g, x| {
            let (a, b, c) = (x[0], x[1], x[2]);
            let bt = g.broadcast_to(a, &[3, 4])?;
            let s = g.add(bt, b)?;
            let tl = g.tile(c, &[3, 1])?;
            let m = g.mul(b, tl)?;
            let cond = g.greater(b, bt)?;
            let sel = g.select(cond, tl, bt)?;
            Ok(vec![s, m, sel])
        });
    assert_eq!(count(&ks, OpKind::Shape(ShapeKind::BroadcastTo)), 0, "{g}");
    assert_eq!(count(&ks, OpKind::Shape(ShapeKind::Tile)), 0, "{g}");
    assert_eq!(rep.broadcasts_dropped, 4, "{rep:?}");
}

#[test]
fn broadcasts_that_change_the_result_are_kept() {
    let (g, _, ks) =
        golden(&[("a", DType::F32, &[3, 1]), ("c", DType::F32, &[3, 2]), ("b", DType::F32, &[3, 4])], |g, x| {
            // tile repeating a size-2 axis is not a broadcast;
            let tl = g.tile(x[1], &[1, 2])?;
            let p = g.add(tl, x[2])?;
            // without the broadcast the sum with a [1] value would be [3,1], not [3,4].
            let bt = g.broadcast_to(x[0], &[3, 4])?;
            let one = g.constant(Tensor::from_vec(&[1], vec![1.0f32])?);
            let q = g.add(bt, one)?;
            Ok(vec![p, q])
        });
    assert_eq!(count(&ks, OpKind::Shape(ShapeKind::Tile)), 1, "{g}");
    assert_eq!(count(&ks, OpKind::Shape(ShapeKind::BroadcastTo)), 1, "{g}");
}

#[test]
fn identities_and_no_op_casts_vanish_but_stop_gradient_and_real_casts_stay() {
    let (g, rep, ks) = golden(&[("x", DType::F32, &[4])], |g, x| {
        let i = g.identity(x[0])?;
        let c = g.cast(i, DType::F32)?;
        let d = g.cast(c, DType::F64)?;
        let s = g.stop_gradient(c)?;
        Ok(vec![g.square(d)?, g.square(s)?])
    });
    assert_eq!(count(&ks, OpKind::Shape(ShapeKind::Identity)), 0, "{g}");
    assert_eq!(count(&ks, OpKind::Elementwise(ElementwiseKind::Cast)), 1, "{g}");
    assert_eq!(count(&ks, OpKind::Shape(ShapeKind::StopGradient)), 1, "{g}");
    assert_eq!(rep.forwarded, 2);
}

#[test]
fn dynamic_shapes_are_skipped() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(4)]);
    let a = g.reshape(x, &[-1, 2, 2]).unwrap();
    let b = g.reshape(a, &[-1, 4]).unwrap();
    let t = g.transpose(b, &[1, 0]).unwrap();
    let t2 = g.transpose(t, &[1, 0]).unwrap();
    let n0 = g.num_nodes();
    let rep = simplify(&mut g, &[t2]).unwrap();
    assert_eq!(g.num_nodes(), n0, "{g}");
    assert_eq!(rep.outputs, vec![t2]);
    assert_eq!((rep.forwarded, rep.folded), (0, 0));
}

#[test]
fn pure_ops_of_constants_fold_into_one_constant() {
    // a jacobian seed: one_hot(constant rows) reshaped, times a constant weight; x is live
    let (g, rep, ks) = golden(&[("x", DType::F32, &[4, 6])], |g, x| {
        let rows = g.constant(Tensor::from_vec(&[4], vec![2i64, 0, 3, 1]).unwrap());
        let e = g.one_hot(rows, 4, -1, 1.0, 0.0, DType::F32)?;
        let e = g.reshape(e, &[4, 1, 4])?;
        let e = g.reshape(e, &[4, 4])?;
        let w = g.constant(Tensor::randn(&[4, 6], 5).unwrap());
        let seed = g.matmul(e, w)?;
        Ok(vec![g.mul(seed, x[0])?, seed])
    });
    // simplify never folds (a later derivative w.r.t. w must still see it)...
    assert!(ks.iter().any(|k| k.name() == "matmul"), "{ks:?}\n{g}");
    assert_eq!(rep.constants_folded, 0, "{rep:?}");
    // ...fold_constants (what a plan does to its own copy) does
    let (mut g, outs) = (g, rep.outputs.clone());
    let x = ValueId { node: g.node_ids()[0], slot: 0 }; // golden's first node: the input
    let feeds = [(x, Tensor::randn(&[4, 6], 1).unwrap())];
    let before = run_once(&g, &outs, &feeds);
    let rep = pfor::passes::fold_constants(&mut g, &outs).unwrap();
    g.verify().unwrap();
    let ks = kinds(&g, &rep.outputs);
    assert_eq!(ks, vec![OpKind::Input, OpKind::Const, OpKind::Binary(pfor::ops::BinaryKind::Mul)], "{g}");
    assert!(rep.constants_folded >= 2, "{rep:?}");
    let after = run_once(&g, &rep.outputs, &feeds);
    assert_eq!(before.unwrap(), after.unwrap());
    // the folded seed holds the rows of w picked by the one-hot rows
    let w = Tensor::randn(&[4, 6], 5).unwrap().to_vec::<f32>().unwrap();
    let Op::Const { value } = &g.node(rep.outputs[1].node).unwrap().op else { panic!("not folded\n{g}") };
    let got = value.to_vec::<f32>().unwrap();
    for (r, &src) in [2usize, 0, 3, 1].iter().enumerate() {
        assert_eq!(got[r * 6..(r + 1) * 6], w[src * 6..(src + 1) * 6], "row {r}");
    }
}

#[test]
fn constants_do_not_fold_through_random_ops_errors_or_big_broadcasts() {
    let mut g = Graph::new();
    let key = g.constant(Tensor::from_vec(&[], vec![7i64]).unwrap());
    let draw = g.random_normal(key, &[3], DType::F32, 0.0, 1.0).unwrap();
    let drawn = g.tanh(draw).unwrap();
    // a broadcast of a scalar to 2^17 elements: far larger than its input
    let one = g.constant(Tensor::scalar(1f32));
    let big = g.broadcast_to(one, &[512, 256]).unwrap();
    let big_sum = g.reduce_sum(big, Some(&[0, 1]), false).unwrap();
    // an out-of-range gather of constants: left for the run to report, at this node
    let p = g.constant(Tensor::from_vec(&[3], vec![1f32, 2., 3.]).unwrap());
    let bad = g.constant(Tensor::from_vec(&[1], vec![5i64]).unwrap());
    let gathered = g.gather(p, bad, 0).unwrap();
    let rep = simplify(&mut g, &[drawn, big_sum, gathered]).unwrap();
    let rep = pfor::passes::fold_constants(&mut g, &rep.outputs).unwrap();
    g.verify().unwrap();
    assert_eq!(g.node(draw.node).unwrap().op.kind(), OpKind::Random(RandomKind::RandomNormal));
    assert_eq!(g.node(rep.outputs[0].node).unwrap().op.kind(), OpKind::Unary(UnaryKind::Tanh));
    assert_eq!(g.node(big.node).unwrap().op.kind(), OpKind::Shape(ShapeKind::BroadcastTo));
    assert_eq!(rep.constants_folded, 0, "{rep:?}\n{g}");
    let e = run_once(&g, &[rep.outputs[2]], &[]).unwrap_err();
    assert!(e.to_string().contains("gather"), "{e}");
    let sum = run_once(&g, &[rep.outputs[1]], &[]).unwrap();
    assert_eq!(sum[0], Tensor::scalar(131072f32));
}

#[test]
fn dead_nodes_go_but_inputs_random_and_stateful_ops_stay() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [3]);
    let unused_in = g.input("unused", DType::F32, [3]);
    let dead = g.exp(x).unwrap();
    let dead2 = g.neg(dead).unwrap();
    let key = g.constant(Tensor::from_vec(&[], vec![7i64]).unwrap());
    let draw = g.random_normal(key, &[3], DType::F32, 0.0, 1.0).unwrap();
    let _ = g.variable("v", Tensor::zeros(DType::F32, &[3]).unwrap()).unwrap();
    let write = g.assign("v", x).unwrap();
    let out = g.tanh(x).unwrap();
    let rep = simplify(&mut g, &[out]).unwrap();
    g.verify().unwrap();
    assert_eq!(rep.removed, 2, "{g}");
    assert!(g.node(dead.node).is_err() && g.node(dead2.node).is_err());
    for kept in [x, unused_in, key, draw, write, out] {
        assert!(g.node(kept.node).is_ok(), "{kept} was removed\n{g}");
    }
    assert_eq!(g.node(draw.node).unwrap().op.kind(), OpKind::Random(RandomKind::RandomNormal));
    assert_eq!(g.node(write.node).unwrap().op.kind(), OpKind::State(StateKind::Assign));
}

#[test]
fn equal_random_draws_are_never_merged_and_identities_around_them_are_forwarded() {
    let (g, _, ks) = golden(&[("x", DType::F32, &[3])], |g, x| {
        let key = g.constant(Tensor::from_vec(&[], vec![3i64])?);
        let d1 = g.random_uniform(key, &[3], DType::F32, 0.0, 1.0)?;
        let d2 = g.random_uniform(key, &[3], DType::F32, 0.0, 1.0)?;
        let i1 = g.identity(d1)?;
        let a = g.add(i1, x[0])?;
        Ok(vec![a, d2])
    });
    assert_eq!(count(&ks, OpKind::Random(RandomKind::RandomUniform)), 2, "{g}");
    assert_eq!(count(&ks, OpKind::Shape(ShapeKind::Identity)), 0, "{g}");
}

#[test]
fn simplify_since_touches_only_newer_nodes() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 6]);
    let old1 = g.reshape(x, &[12]).unwrap();
    let old2 = g.reshape(old1, &[3, 4]).unwrap();
    let old_dead = g.exp(x).unwrap();
    let mark = g.mark();
    let new1 = g.reshape(old2, &[4, 3]).unwrap();
    let new2 = g.reshape(new1, &[2, 6]).unwrap();
    let new_dead = g.exp(new2).unwrap();
    let out = g.tanh(new2).unwrap();
    let feeds = [(x, Tensor::randn(&[2, 6], 1).unwrap())];
    let before = run_once(&g, &[out, old2], &feeds).unwrap();
    let rep = simplify_since(&mut g, &[out], mark).unwrap();
    g.verify().unwrap();
    for kept in [old1, old2, old_dead] {
        assert!(g.node(kept.node).is_ok(), "older node {kept} removed");
    }
    assert_eq!(g.node(old2.node).unwrap().inputs, vec![old1], "older node rewritten");
    assert!(g.node(new_dead.node).is_err());
    // tanh now reads x: the new chain reshaped back to x's type.
    assert_eq!(g.node(out.node).unwrap().inputs, vec![x]);
    assert_eq!(run_once(&g, &[out, old2], &feeds).unwrap(), before);
    assert_eq!(rep.outputs, vec![out]);
}

#[test]
fn simplify_rejects_unknown_outputs() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2]);
    let mut other = Graph::new();
    let a = other.input("a", DType::F32, [2]);
    let b = other.exp(a).unwrap();
    let _ = x;
    assert!(simplify(&mut g, &[b]).is_err());
}

#[test]
fn program_order_of_effects_survives_id_reuse_after_removals() {
    let mut g = Graph::new();
    let _ = g.variable("v", Tensor::zeros(DType::F64, &[]).unwrap()).unwrap();
    let dead: Vec<ValueId> = (0..4).map(|k| g.scalar(DType::F64, k as f64)).collect();
    let one = g.scalar(DType::F64, 1.0);
    let w1 = g.assign("v", one).unwrap();
    let rep = simplify(&mut g, &[w1]).unwrap();
    assert_eq!(rep.removed, dead.len(), "the dead scalars go, the (stateful) read stays\n{g}");
    // New nodes reuse the freed (smaller) ids; they must still run after w1, in the order
    // they were created: the read sees w1's 1, not the initial 0, and w2 comes last.
    let r = g.read_variable("v").unwrap();
    let two = g.scalar(DType::F64, 2.0);
    let w2 = g.assign("v", two).unwrap();
    assert!(r.node < w1.node, "ids were not reused; the test proves nothing");
    let mut sess = Session::new(&g, &[w1, r, w2]).unwrap();
    let got = sess.run(&[]).unwrap();
    assert_eq!(got[1], Tensor::from_vec(&[], vec![1.0f64]).unwrap());
    assert_eq!(sess.variable("v").unwrap(), Tensor::from_vec(&[], vec![2.0f64]).unwrap());
}

/// A per-example body full of cancelling reshapes/transposes, the kind converters emit.
fn chain_body(g: &mut Graph, x: ValueId, i: ValueId) -> Result<Vec<ValueId>> {
    let xi = g.gather(x, i, 0)?; // [4, 6]
    let a = g.reshape(xi, &[24])?;
    let b = g.reshape(a, &[2, 12])?;
    let c = g.reshape(b, &[6, 4])?;
    let t = g.transpose(c, &[1, 0])?;
    let t = g.transpose(t, &[1, 0])?;
    let e = g.expand_dims(t, 0)?;
    let s = g.squeeze(e, Some(&[0]))?;
    let y = g.tanh(s)?;
    Ok(vec![g.reshape(y, &[4, 6])?])
}

#[test]
fn pfor_output_with_a_reshape_chain_has_fewer_nodes_and_the_same_values() {
    let n = 5;
    let xv = Tensor::randn(&[n, 4, 6], 9).unwrap();
    let build = |simplify: bool| {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [n, 4, 6]);
        let opts = PforOptions::strict().with_simplify(simplify);
        let (out, rep) = pfor_with_report(&mut g, n, &opts, |g, i| chain_body(g, x, i)).unwrap();
        g.verify().unwrap();
        let vals = run_once(&g, &out, &[(x, xv.clone())]).unwrap();
        (g.ancestors(&out).unwrap().len(), g.num_nodes(), vals, rep)
    };
    let (live_off, total_off, vals_off, rep_off) = build(false);
    let (live_on, total_on, vals_on, rep_on) = build(true);
    assert!(rep_off.simplified.is_none());
    let s = rep_on.simplified.expect("simplify ran");
    assert!(live_on < live_off, "live nodes {live_on} !< {live_off}");
    assert!(total_on < total_off, "graph nodes {total_on} !< {total_off}");
    assert!(s.removed > 0 && s.forwarded + s.folded > 0, "{s:?}");
    assert_eq!(vals_on, vals_off);
    // tanh over the whole stacked input and one reshape at most: nothing else is needed.
    assert!(live_on <= 4, "{live_on} live nodes after simplify");
    // And both equal the reference loop.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, 4, 6]);
    let l = for_loop(&mut g, n, |g, i| chain_body(g, x, i)).unwrap();
    assert_eq!(run_once(&g, &l, &[(x, xv.clone())]).unwrap(), vals_on);
}

#[test]
fn pfor_keeps_random_draws_and_their_values_with_simplify_on() {
    let n = 4;
    let build = |simplify: bool| {
        let mut g = Graph::new();
        let key = g.constant(Tensor::from_vec(&[], vec![11i64]).unwrap());
        let opts = PforOptions::strict().with_simplify(simplify);
        let out = pfor_recorded(&mut g, n, &opts, |g, i| {
            let k = g.fold_in(key, i)?;
            let a = g.random_normal(k, &[2, 3], DType::F64, 0.0, 1.0)?;
            let b = g.random_normal(k, &[2, 3], DType::F64, 0.0, 1.0)?;
            let a = g.reshape(a, &[6])?;
            let a = g.reshape(a, &[3, 2])?;
            let a = g.identity(a)?;
            Ok(vec![a, b])
        })
        .unwrap();
        let draws = count(&kinds(&g, &out), OpKind::Random(RandomKind::RandomNormal));
        (run_once(&g, &out, &[]).unwrap(), draws)
    };
    let (on, draws_on) = build(true);
    let (off, draws_off) = build(false);
    assert_eq!(on, off);
    assert_eq!((draws_on, draws_off), (2, 2));
}

#[test]
fn nested_pfor_and_chunked_pfor_stay_correct_with_simplify() {
    let (n, m) = (3, 4);
    let xv = Tensor::randn(&[n, m, 4, 6], 3).unwrap();
    let run = |simplify: bool, chunk: Option<usize>| {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [n, m, 4, 6]);
        let inner = PforOptions::strict().with_simplify(simplify);
        let mut outer = inner.clone();
        outer.chunk_size = chunk;
        let out = pfor_recorded(&mut g, n, &outer, |g, i| {
            let xi = g.gather(x, i, 0)?;
            pfor_recorded(g, m, &inner, |g, j| chain_body(g, xi, j))
        })
        .unwrap();
        g.verify().unwrap();
        run_once(&g, &out, &[(x, xv.clone())]).unwrap()
    };
    let want = run(false, None);
    assert_eq!(run(true, None), want);
    assert_eq!(run(true, Some(2)), want);
}

const MATMUL: OpKind = OpKind::Linear(pfor::ops::LinearKind::MatMul);
const SPLIT: OpKind = OpKind::Slicing(pfor::ops::SlicingKind::Split);

#[test]
fn a_matmul_read_through_one_split_piece_computes_only_those_columns() {
    // constant b: folded into a narrower constant
    let (g, rep, ks) = golden(&[("a", DType::F32, &[5, 7])], |g, x| {
        let b = g.constant(Tensor::randn(&[7, 9], 3).unwrap());
        let m = g.matmul(x[0], b)?;
        let m = g.reshape(m, &[5, 1, 9])?;
        let parts = g.split(m, 2, &[2, 3, 4])?;
        Ok(vec![g.tanh(parts[1])?])
    });
    assert_eq!(rep.narrowed, 1, "{rep:?}\n{g}");
    assert_eq!(count(&ks, SPLIT), 0, "{g}");
    assert_eq!(count(&ks, MATMUL), 1);
    let mm = g.ancestors(&rep.outputs).unwrap().into_iter().find(|&n| g.node(n).unwrap().op.kind() == MATMUL).unwrap();
    assert_eq!(g.node(mm).unwrap().outputs[0].shape.as_fixed(), Some(vec![5, 3]));
    // b an input stored transposed: a slice of its rows; the live piece is an output itself
    let (g, rep, ks) = golden(&[("a", DType::F32, &[4, 6]), ("bt", DType::F32, &[10, 6])], |g, x| {
        let m = g.matmul_t(x[0], x[1], false, true)?;
        let parts = g.split(m, -1, &[7, 3])?;
        Ok(vec![parts[1]])
    });
    assert_eq!(rep.narrowed, 1, "{rep:?}\n{g}");
    assert_eq!(count(&ks, OpKind::Slicing(pfor::ops::SlicingKind::Slice)), 1, "{g}");
    assert_eq!(count(&ks, SPLIT), 0, "{g}");
}

#[test]
fn matmuls_whose_columns_are_all_needed_are_left_alone() {
    let inputs: &[(&str, DType, &[usize])] = &[("a", DType::F32, &[3, 4]), ("b", DType::F32, &[4, 6])];
    // two pieces read
    let (_, rep, _) = golden(inputs, |g, x| {
        let m = g.matmul(x[0], x[1])?;
        let p = g.split(m, 1, &[2, 4])?;
        Ok(vec![g.exp(p[0])?, g.exp(p[1])?])
    });
    assert_eq!(rep.narrowed, 0);
    // a split of the rows
    let (_, rep, _) = golden(inputs, |g, x| {
        let m = g.matmul(x[0], x[1])?;
        let p = g.split(m, 0, &[1, 2])?;
        Ok(vec![g.exp(p[0])?])
    });
    assert_eq!(rep.narrowed, 0);
    // the matmul result is read elsewhere too, or is an output
    let (_, rep, _) = golden(inputs, |g, x| {
        let m = g.matmul(x[0], x[1])?;
        let p = g.split(m, 1, &[2, 4])?;
        Ok(vec![g.exp(p[0])?, g.tanh(m)?])
    });
    assert_eq!(rep.narrowed, 0);
    let (_, rep, _) = golden(inputs, |g, x| {
        let m = g.matmul(x[0], x[1])?;
        let p = g.split(m, 1, &[2, 4])?;
        Ok(vec![g.exp(p[0])?, m])
    });
    assert_eq!(rep.narrowed, 0);
    // a reshape that mixes the last axis with another
    let (_, rep, _) = golden(inputs, |g, x| {
        let m = g.matmul(x[0], x[1])?;
        let r = g.reshape(m, &[6, 3])?;
        let p = g.split(r, 1, &[1, 2])?;
        Ok(vec![g.exp(p[0])?])
    });
    assert_eq!(rep.narrowed, 0);
}
