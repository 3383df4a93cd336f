//! Stale and foreign handles: a handle of another graph, of a node a pass removed (its slot
//! reused), or of the graph enclosing a branch builder is an error naming the handle — or,
//! in cond/while builders, a captured value — never another node's value.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::common::*;
use pfor::autodiff::gradients;
use pfor::ir::Function;
use pfor::prelude::*;
use pfor::vectorize::{ControlFlowMode, PforOptions, pfor, pfor_with};

/// The error is an unknown-value error naming `v` whose message contains each of `words`.
#[track_caller]
fn assert_unknown<T>(r: Result<T>, v: ValueId, words: &[&str]) {
    let Err(e) = r else { panic!("{v}: a stale or foreign handle must be an error") };
    assert!(matches!(e.root(), Error::UnknownValue { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(&v.to_string()), "{msg} does not name {v}");
    for w in words {
        assert!(msg.contains(w), "{msg} does not say '{w}'");
    }
}

/// Add scalar constants to `g` until one lands in `v`'s slot (petgraph reuses the slots of
/// removed nodes); returns it.
fn reuse_slot(g: &mut Graph, v: ValueId) -> ValueId {
    for _ in 0..100_000 {
        let c = g.scalar(DType::F64, 7.0);
        if c.node.index() == v.node.index() {
            return c;
        }
    }
    panic!("slot of {v} never reused");
}

#[test]
fn handles_stay_small() {
    assert_eq!(std::mem::size_of::<ValueId>(), 16);
    assert_eq!(std::mem::size_of::<NodeId>(), 12);
}

#[test]
fn foreign_graph_handle_is_an_error_not_the_node_in_its_slot() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F64, [2]);
    let _b = g.exp(a).unwrap();
    let mut other = Graph::new();
    let x = other.input("x", DType::F64, [2]);
    let y = other.neg(x).unwrap(); // same slot (%1) as `_b`, same type
    assert_eq!(y.node.index(), _b.node.index());
    assert_unknown(g.exp(y), y, &["another graph"]);
    assert_unknown(Session::new(&g, &[y]), y, &["another graph"]);
    assert_unknown(g.check_value(y), y, &["another graph"]);
    assert!(g.node(y.node).is_err() && g.value_type(y).is_err());
    g.verify().unwrap();
}

#[test]
fn a_clone_keeps_earlier_handles_and_rejects_the_other_clones_later_ones() {
    let mut a = Graph::new();
    let x = a.input("x", DType::F64, [2]);
    let mut b = a.clone();
    let ya = a.exp(x).unwrap();
    let yb = b.neg(x).unwrap();
    assert_eq!(ya.node.index(), yb.node.index());
    assert_unknown(b.sin(ya), ya, &["another graph", "clone"]);
    assert_unknown(a.sin(yb), yb, &["another graph"]);
    let feed = [(x, f64t(&[2], &[1.0, 2.0]))];
    assert_eq!(run_once(&b, &[yb], &feed).unwrap()[0], f64t(&[2], &[-1.0, -2.0]));
}

#[test]
fn handle_removed_by_pfor_simplification_is_an_error_after_its_slot_is_reused() {
    let mut g = Graph::new();
    let xs = g.input("xs", DType::F64, [4, 3]);
    let mut inner = None;
    let out = pfor(&mut g, 4, |g, i| {
        let row = g.gather(xs, i, 0)?;
        let t = g.exp(row)?;
        inner = Some(t);
        Ok(vec![g.neg(t)?])
    })
    .unwrap();
    let t = inner.unwrap();
    let c = reuse_slot(&mut g, t);
    assert!(g.contains(c.node) && !g.contains(t.node));
    let words = ["removed", "now holds another node"];
    assert_unknown(g.exp(t), t, &words);
    assert_unknown(Session::new(&g, &[t]), t, &words);
    assert_unknown(gradients(&mut g, &[out[0]], &[t], None), t, &words);
    assert_unknown(pfor(&mut g, 2, |_, _| Ok(vec![t])), t, &words);
    assert_unknown(for_loop(&mut g, 2, |_, _| Ok(vec![t])), t, &words);
    // the result itself is fine
    let r = run_once(&g, &out, &[(xs, Tensor::zeros(DType::F64, &[4, 3]).unwrap())]).unwrap();
    assert_eq!(r[0], Tensor::full(DType::F64, &[4, 3], -1.0).unwrap());
    g.verify().unwrap();
}

#[test]
fn stale_and_foreign_feeds_are_errors_not_another_input() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, Shape::scalar());
    let y = g.neg(x).unwrap();
    let mut sess = Session::new(&g, &[y]).unwrap();
    // a foreign input in x's slot
    let mut other = Graph::new();
    let z = other.input("z", DType::F64, Shape::scalar());
    assert_eq!(z.node.index(), x.node.index());
    assert_unknown(sess.run(&[(z, Tensor::scalar(1.0))]), z, &["another graph"]);
    // an input removed and its slot reused by a new input
    let mut h = Graph::new();
    let old = h.input("old", DType::F64, Shape::scalar());
    h.remove_nodes(&[old.node].into_iter().collect()).unwrap();
    let new = h.input("new", DType::F64, Shape::scalar());
    assert_eq!(new.node.index(), old.node.index());
    let w = h.neg(new).unwrap();
    let mut sess = Session::new(&h, &[w]).unwrap();
    assert_unknown(sess.run(&[(old, Tensor::scalar(1.0))]), old, &["removed"]);
    assert_unknown(h.neg(old), old, &["removed"]);
    assert_eq!(sess.run(&[(new, Tensor::scalar(1.0))]).unwrap()[0], Tensor::scalar(-1.0));
}

#[test]
fn handle_pruned_away_is_an_error_after_its_slot_is_reused() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, Shape::scalar());
    let dead = g.exp(x).unwrap();
    let keep = g.neg(x).unwrap();
    assert_eq!(g.prune(&[keep]).unwrap(), 1);
    let c = reuse_slot(&mut g, dead);
    assert_eq!(eval1(&g, c), Tensor::scalar(7.0));
    assert_unknown(g.sin(dead), dead, &["removed"]);
    assert_unknown(g.replace_input(keep.node, 0, dead), dead, &["removed"]);
}

/// `%0` is the constant 100 and `%1` the input x: in a branch graph `%0` is the branch's
/// first parameter, so a raw index would compute `x + x` instead of `x + 100`.
fn x_plus_100(g: &mut Graph) -> (ValueId, ValueId, ValueId) {
    let hundred = g.scalar(DType::F64, 100.0);
    let x = g.input("x", DType::F64, Shape::scalar());
    let p = g.input("p", DType::Bool, Shape::scalar());
    (hundred, x, p)
}

#[test]
fn outer_value_in_a_cond_branch_is_captured() {
    let mut g = Graph::new();
    let (hundred, x, p) = x_plus_100(&mut g);
    let out = g.cond(p, &[x], |g, a| Ok(vec![g.add(a[0], hundred)?]), |g, a| Ok(vec![g.sub(a[0], hundred)?])).unwrap();
    g.verify().unwrap();
    // the captured value is an extra input of the cond, after its arguments
    assert_eq!(g.node(out[0].node).unwrap().inputs, vec![p, x, hundred]);
    let mut s = Session::new(&g, &out).unwrap();
    for (pv, want) in [(true, 101.0), (false, -99.0)] {
        let r = s.run(&[(x, Tensor::scalar(1.0)), (p, Tensor::scalar(pv))]).unwrap();
        assert_eq!(r[0], Tensor::scalar(want));
    }
}

#[test]
fn a_branch_may_return_an_outer_value_and_only_one_branch_may_use_it() {
    let mut g = Graph::new();
    let (hundred, x, p) = x_plus_100(&mut g);
    let out = g.cond(p, &[x], |_, _| Ok(vec![hundred]), |_, a| Ok(vec![a[0]])).unwrap();
    g.verify().unwrap();
    let mut s = Session::new(&g, &out).unwrap();
    for (pv, want) in [(true, 100.0), (false, 1.0)] {
        let r = s.run(&[(x, Tensor::scalar(1.0)), (p, Tensor::scalar(pv))]).unwrap();
        assert_eq!(r[0], Tensor::scalar(want));
    }
}

/// y = cond(x_i > 0, [x_i], then: x_i * w + b_i, else: x_i + w): `w` is a loop-invariant
/// input and `b_i` a loop-variant body value, both used directly in the branches.
fn captured_cond_body(g: &mut Graph, xs: ValueId, bs: ValueId, w: ValueId, i: ValueId) -> Result<Vec<ValueId>> {
    let xi = g.gather(xs, i, 0)?;
    let bi = g.gather(bs, i, 0)?;
    let zero = g.scalar(DType::F64, 0.0);
    let pi = g.greater(xi, zero)?;
    g.cond(
        pi,
        &[xi],
        |g, a| {
            let m = g.mul(a[0], w)?;
            Ok(vec![g.add(m, bi)?])
        },
        |g, a| Ok(vec![g.add(a[0], w)?]),
    )
}

/// `body(g, a, b, w, i)` over the rows of the constants `a` and `b` with an input `w`,
/// vectorized by pfor in `mode` and run by the reference loop: (graph, w, pfor result,
/// loop result).
fn pfor_and_loop(
    mode: ControlFlowMode,
    a: Tensor,
    b: Tensor,
    body: fn(&mut Graph, ValueId, ValueId, ValueId, ValueId) -> Result<Vec<ValueId>>,
) -> (Graph, ValueId, ValueId, ValueId) {
    let mut g = Graph::new();
    let w = g.input("w", DType::F64, Shape::scalar());
    let n = a.shape()[0];
    let (a, b) = (g.constant(a), g.constant(b));
    let opts = PforOptions::strict().with_control_flow(mode);
    let v = pfor_with(&mut g, n, &opts, |g, i| body(g, a, b, w, i)).unwrap();
    let l = for_loop(&mut g, n, |g, i| body(g, a, b, w, i)).unwrap();
    (g, w, v[0], l[0])
}

#[test]
fn captured_cond_values_through_pfor_and_the_reference_loop() {
    let xv = [1.5, -2.0, 3.0, -0.5];
    let bv = [10.0, 20.0, 30.0, 40.0];
    let wv = 3.0;
    let want: Vec<f64> = xv.iter().zip(&bv).map(|(&x, &b)| if x > 0.0 { x * wv + b } else { x + wv }).collect();
    for mode in [ControlFlowMode::Subset, ControlFlowMode::Mask] {
        let (g, w, v, l) = pfor_and_loop(mode, f64t(&[4], &xv), f64t(&[4], &bv), captured_cond_body);
        g.verify().unwrap();
        let r = run_once(&g, &[v, l], &[(w, Tensor::scalar(wv))]).unwrap();
        assert_eq!(r[0], f64t(&[4], &want), "{mode:?}");
        assert_eq!(r[1], f64t(&[4], &want));
    }
}

#[test]
fn gradients_flow_into_captured_cond_values() {
    // y = cond(p, [x], x * w, x + w): dy/dw = x or 1, dy/dx = w or 1
    for (pv, dx, dw) in [(true, 3.0, 2.0), (false, 1.0, 1.0)] {
        let mut g = Graph::new();
        let w = g.input("w", DType::F64, Shape::scalar());
        let x = g.input("x", DType::F64, Shape::scalar());
        let p = g.input("p", DType::Bool, Shape::scalar());
        let y = g.cond(p, &[x], |g, a| Ok(vec![g.mul(a[0], w)?]), |g, a| Ok(vec![g.add(a[0], w)?])).unwrap();
        let d = gradients(&mut g, &[y[0]], &[x, w], None).unwrap();
        g.verify().unwrap();
        let feeds = [(w, Tensor::scalar(3.0)), (x, Tensor::scalar(2.0)), (p, Tensor::scalar(pv))];
        let r = run_once(&g, &d, &feeds).unwrap();
        assert_eq!((r[0].clone(), r[1].clone()), (Tensor::scalar(dx), Tensor::scalar(dw)), "p = {pv}");
    }
}

#[test]
fn outer_values_in_while_cond_and_body_are_captured() {
    // i = 1; while i < n { i += step } with n and step used directly; step is %0 (in a body
    // graph the first carry's parameter) and n is %1.
    let mut g = Graph::new();
    let step = g.constant(Tensor::scalar(3i64));
    let n = g.input("n", DType::I64, Shape::scalar());
    let i0 = g.constant(Tensor::scalar(1i64));
    let out = g.while_loop(&[i0], &[], |g, a| g.less(a[0], n), |g, a| Ok(vec![g.add(a[0], step)?])).unwrap();
    g.verify().unwrap();
    assert_eq!(g.node(out[0].node).unwrap().inputs, vec![i0, n, step]);
    let mut s = Session::new(&g, &out).unwrap();
    for (nv, want) in [(0i64, 1i64), (2, 4), (10, 10), (11, 13)] {
        assert_eq!(s.run(&[(n, Tensor::scalar(nv))]).unwrap()[0], Tensor::scalar(want), "n = {nv}");
    }
}

/// s = x_i; k = 0; while k < m_i { s = s * w; k += 1 } (m_i loop-variant, w invariant).
fn captured_while_body(g: &mut Graph, xs: ValueId, ms: ValueId, w: ValueId, i: ValueId) -> Result<Vec<ValueId>> {
    let xi = g.gather(xs, i, 0)?;
    let mi = g.gather(ms, i, 0)?;
    let k0 = g.constant(Tensor::scalar(0i64));
    let one = g.constant(Tensor::scalar(1i64));
    let r =
        g.while_loop(&[k0, xi], &[], |g, a| g.less(a[0], mi), |g, a| Ok(vec![g.add(a[0], one)?, g.mul(a[1], w)?]))?;
    Ok(vec![r[1]])
}

#[test]
fn captured_while_values_through_pfor_gradients_and_the_reference_loop() {
    let xv = [1.0, 2.0, -1.0];
    let mv = [0i64, 2, 3];
    let wv = 2.0f64;
    let want: Vec<f64> = xv.iter().zip(&mv).map(|(&x, &m)| x * wv.powi(m as i32)).collect();
    // d(sum of results)/dw = sum m x w^(m-1)
    let dwant: f64 = xv.iter().zip(&mv).map(|(&x, &m)| m as f64 * x * wv.powi(m as i32 - 1)).sum();
    for mode in [ControlFlowMode::Subset, ControlFlowMode::Mask] {
        let (mut g, w, v, l) = pfor_and_loop(mode, f64t(&[3], &xv), i64t(&[3], &mv), captured_while_body);
        // gradients through the reference loop (whose body holds the while), and through
        // the conversion in either mode
        let mut fetch = vec![v, l];
        for y in [l, v] {
            let total = g.reduce_sum(y, Some(&[0]), false).unwrap();
            fetch.push(gradients(&mut g, &[total], &[w], None).unwrap()[0]);
        }
        g.verify().unwrap();
        let r = run_once(&g, &fetch, &[(w, Tensor::scalar(wv))]).unwrap();
        assert_eq!(r[0], f64t(&[3], &want), "{mode:?}");
        assert_eq!(r[1], f64t(&[3], &want));
        for d in &r[2..] {
            assert_close(d, &Tensor::scalar(dwant), 1e-12);
        }
    }
}

#[test]
fn nested_builders_capture_through_every_level() {
    // i = 0; s = 0; while i < n { s += cond(i < half, [], a, b); i += 1 }: a, b and half
    // come from the top graph into a cond nested in the while body.
    let mut g = Graph::new();
    let a = g.scalar(DType::F64, 1.0);
    let b = g.scalar(DType::F64, 10.0);
    let half = g.constant(Tensor::scalar(2i64));
    let n = g.input("n", DType::I64, Shape::scalar());
    let i0 = g.constant(Tensor::scalar(0i64));
    let s0 = g.scalar(DType::F64, 0.0);
    let out = g
        .while_loop(
            &[i0, s0],
            &[],
            |g, c| g.less(c[0], n),
            |g, c| {
                let lo = g.less(c[0], half)?;
                let inc = g.cond(lo, &[], |_, _| Ok(vec![a]), |_, _| Ok(vec![b]))?;
                let one = g.constant(Tensor::scalar(1i64));
                Ok(vec![g.add(c[0], one)?, g.add(c[1], inc[0])?])
            },
        )
        .unwrap();
    g.verify().unwrap();
    let mut s = Session::new(&g, &out).unwrap();
    for (nv, want) in [(0i64, 0.0), (2, 2.0), (5, 32.0)] {
        assert_eq!(s.run(&[(n, Tensor::scalar(nv))]).unwrap()[1], Tensor::scalar(want), "n = {nv}");
    }
}

#[test]
fn named_functions_reject_outer_values_with_how_to_pass_them() {
    let mut g = Graph::new();
    let w = g.scalar(DType::F64, 2.0); // %0: the body's own first parameter is %0 too
    let t = TensorType::scalar(DType::F64);
    let e = g.function("scale", std::slice::from_ref(&t), |h, p| Ok(vec![h.mul(p[0], w)?]));
    assert_unknown(e, w, &["named function", "parameter"]);
    g.declare_function("scale2", std::slice::from_ref(&t), std::slice::from_ref(&t)).unwrap();
    let e = g.define_function("scale2", |h, p| Ok(vec![h.mul(p[0], w)?]));
    assert_unknown(e, w, &["named function", "parameter"]);
    // a cond inside a named function's body may not reach past the function either
    let e = g.function("branchy", std::slice::from_ref(&t), |h, p| {
        let yes = h.constant(Tensor::scalar(true));
        h.cond(yes, &[p[0]], |h, a| Ok(vec![h.mul(a[0], w)?]), |_, a| Ok(vec![a[0]]))
    });
    assert_unknown(e, w, &["named function"]);
    // passed in as a parameter it works, and the graph is intact
    let tt = [t.clone(), t.clone()];
    g.function("scale3", &tt, |h, p| Ok(vec![h.mul(p[0], p[1])?])).unwrap();
    let x = g.scalar(DType::F64, 5.0);
    let y = g.call("scale3", &[x, w]).unwrap();
    g.verify().unwrap();
    assert_eq!(eval1(&g, y[0]), Tensor::scalar(10.0));
}

#[test]
fn function_build_bodies_see_only_their_parameters() {
    let mut g = Graph::new();
    let w = g.scalar(DType::F64, 2.0);
    let t = TensorType::scalar(DType::F64);
    let e = Function::build(&g, &[t], |h, p| Ok(vec![h.mul(p[0], w)?]));
    assert_unknown(e, w, &["parameters"]);
}

#[test]
fn builder_reads_see_the_enclosing_graph_and_checks_name_capture() {
    let mut g = Graph::new();
    let (hundred, x, p) = x_plus_100(&mut g);
    g.cond(
        p,
        &[x],
        |h, a| {
            assert_eq!(h.value_type(hundred)?, &TensorType::scalar(DType::F64));
            assert!(!h.contains(hundred.node));
            assert_unknown(h.check_value(hundred), hundred, &["enclosing", "Graph::capture"]);
            let c = h.capture(hundred)?;
            assert!(h.contains(c.node) && c != hundred);
            let y = h.add(a[0], hundred)?;
            assert_eq!(h.node(y.node)?.inputs, vec![a[0], c]);
            assert_eq!(h.capture(hundred)?, c);
            Ok(vec![y])
        },
        |_, a| Ok(vec![a[0]]),
    )
    .unwrap();
    g.verify().unwrap();
}

#[test]
fn a_panicking_or_leaking_builder_leaves_the_graph_whole() {
    let mut g = Graph::new();
    let (hundred, x, p) = x_plus_100(&mut g);
    let before = g.num_nodes();
    let r = catch_unwind(AssertUnwindSafe(|| g.cond(p, &[x], |_, _| panic!("builder bug"), |_, a| Ok(vec![a[0]]))));
    assert!(r.is_err());
    assert_eq!(g.num_nodes(), before);
    let mut stash = None;
    let out = g
        .cond(
            p,
            &[x],
            |h, a| {
                stash = Some(h.clone());
                Ok(vec![h.add(a[0], hundred)?])
            },
            |_, a| Ok(vec![a[0]]),
        )
        .unwrap();
    assert!(stash.is_some());
    g.verify().unwrap();
    // a builder that swaps its graph away returns values the body does not have
    let mut elsewhere = Graph::new();
    let e = g.cond(
        p,
        &[x],
        |h, a| {
            std::mem::swap(h, &mut elsewhere);
            Ok(vec![a[0]])
        },
        |_, a| Ok(vec![a[0]]),
    );
    assert!(e.is_err());
    assert_eq!(g.num_nodes(), before + 1);
    let r = run_once(&g, &out, &[(x, Tensor::scalar(1.0)), (p, Tensor::scalar(true))]).unwrap();
    assert_eq!(r[0], Tensor::scalar(101.0));
}
