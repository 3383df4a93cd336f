//! The vectorizer driver: fallback policies, custom-op converters through the public API,
//! chunking, nested pfor, dynamic n, the paper's §4 example, the map APIs, bad input.

use crate::common::coverage::pfor_recorded;
use std::sync::Arc;

use crate::common::*;
use pfor::api::{MapAxes, map_fn, map_fn_axes, pipeline, vectorized_map, vectorized_map_axes};
use pfor::ops::{ControlKind, CustomOp, IndexKind};
use pfor::prelude::*;
use pfor::vectorize::{ConvertCtx, Fallback, OpKey, PforOptions, Registry, Wrapped, pfor_with, pfor_with_report};

/// Kinds of the nodes that computing `outs` runs.
fn kinds_in(g: &Graph, outs: &[ValueId]) -> Vec<OpKind> {
    g.ancestors(outs).unwrap().into_iter().map(|n| g.node(n).unwrap().op.kind()).collect()
}

#[test]
fn paper_section4_example_has_no_loop_and_no_gather() {
    let mut g = Graph::new();
    let a = g.constant(Tensor::randn(&[10, 20], 0).unwrap());
    let b = g.input("b", DType::F32, [Dim::fixed(10), Dim::fixed(20)]);
    let out = pfor_recorded(&mut g, 10, &PforOptions::strict(), |g, i| {
        let ai = g.gather(a, i, 0)?;
        let bi = g.gather(b, i, 0)?;
        Ok(vec![g.add(ai, bi)?, g.sub(ai, bi)?])
    })
    .unwrap();
    let kinds = kinds_in(&g, &out);
    assert!(!kinds.contains(&OpKind::Index(IndexKind::Gather)), "{g}");
    assert!(!kinds.iter().any(|k| matches!(k, OpKind::Control(_))), "{g}");
    let bv = Tensor::randn(&[10, 20], 1).unwrap();
    let r = run_once(&g, &out, &[(b, bv.clone())]).unwrap();
    let (av, bv) = (Tensor::randn(&[10, 20], 0).unwrap().to_array::<f32>().unwrap(), bv.to_array::<f32>().unwrap());
    assert_eq!(r[0], Tensor::from_array(&av + &bv));
    assert_eq!(r[1], Tensor::from_array(&av - &bv));
}

#[derive(Debug)]
pub(crate) struct Scale2;
impl CustomOp for Scale2 {
    fn name(&self) -> &str {
        "scale2"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(vec![inputs[0].clone()])
    }
    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![Tensor::from_array(inputs[0].to_array::<f64>()? * 2.0)])
    }
}

pub(crate) fn custom_body(g: &mut Graph, x: ValueId, i: ValueId) -> Result<Vec<ValueId>> {
    let xi = g.gather(x, i, 0)?;
    let y = g.add_op(Op::Custom(Arc::new(Scale2)), &[xi])?;
    Ok(vec![g.exp(y)?])
}

#[test]
fn fallback_policies_for_an_op_without_converter() {
    let xv = f64t(&[3, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let want = Tensor::from_array(xv.to_array::<f64>().unwrap().mapv(|v| (2.0 * v).exp()));
    // Error: names the op and the node
    let mut g = Graph::new();
    let x = g.constant(xv.clone());
    let e = pfor_recorded(&mut g, 3, &PforOptions::strict(), |g, i| custom_body(g, x, i)).unwrap_err();
    assert!(matches!(&e, Error::NoConverter { op, .. } if op == "scale2"), "{e}");
    assert!(e.to_string().contains("no converter for op scale2 at node %"), "{e}");
    // Silent: a loop for that op only, correct values, reported
    let opts = PforOptions::strict().with_fallback(Fallback::Silent);
    let (out, report) = pfor_with_report(&mut g, 3, &opts, |g, i| custom_body(g, x, i)).unwrap();
    assert_eq!(report.fallbacks.len(), 1);
    assert_eq!(report.fallbacks[0].op, "scale2");
    assert!(report.converted >= 1);
    assert_close(&eval1(&g, out[0]), &want, 1e-12);
    let kinds = kinds_in(&g, &out);
    assert_eq!(kinds.iter().filter(|k| **k == OpKind::Control(ControlKind::For)).count(), 1);
}

#[test]
fn custom_converter_registered_through_the_public_api() {
    let mut reg = Registry::builtin();
    reg.register(OpKey::Custom("scale2".into()), |ctx: &mut ConvertCtx<'_>| {
        // elementwise: the same op applies to the stacked value
        let x = ctx.stacked(0)?;
        let op = ctx.op().clone();
        let y = ctx.add(op, &[x])?;
        ConvertCtx::done(vec![Wrapped::stacked(y)])
    });
    assert!(
        reg.try_register(OpKey::Custom("scale2".into()), |_: &mut ConvertCtx<'_>| ConvertCtx::unhandled("x")).is_err()
    );
    let xv = f64t(&[3, 2], &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let mut g = Graph::new();
    let x = g.constant(xv.clone());
    let opts = PforOptions::strict().with_registry(reg);
    let (out, report) = pfor_with_report(&mut g, 3, &opts, |g, i| custom_body(g, x, i)).unwrap();
    assert!(report.fallbacks.is_empty());
    let want = Tensor::from_array(xv.to_array::<f64>().unwrap().mapv(|v| (2.0 * v).exp()));
    assert_close(&eval1(&g, out[0]), &want, 1e-12);
}

fn body_rows(g: &mut Graph, x: ValueId, i: ValueId) -> Result<Vec<ValueId>> {
    let xi = g.gather(x, i, 0)?;
    let s = g.reduce_sum(xi, Some(&[0]), false)?;
    let fi = g.cast(i, DType::F64)?;
    Ok(vec![g.mul(xi, s)?, g.add(s, fi)?])
}

#[test]
fn chunking_with_remainder_static_and_dynamic() {
    let xv = Tensor::randn_f64(&[7, 3], 5).unwrap();
    for chunk in [1, 2, 3, 7, 10] {
        let mut g = Graph::new();
        let x = g.constant(xv.clone());
        let n = g.input("n", DType::I64, Shape::scalar());
        let opts = PforOptions::strict().with_chunk_size(chunk);
        let a = pfor_recorded(&mut g, 7, &opts, |g, i| body_rows(g, x, i)).unwrap();
        let d = pfor_recorded(&mut g, n, &opts, |g, i| body_rows(g, x, i)).unwrap();
        let l = for_loop(&mut g, 7, |g, i| body_rows(g, x, i)).unwrap();
        g.verify().unwrap();
        let mut fetch = a.clone();
        fetch.extend(&d);
        fetch.extend(&l);
        let r = run_once(&g, &fetch, &[(n, Tensor::scalar(7i64))]).unwrap();
        for j in 0..2 {
            assert_close(&r[j], &r[4 + j], 1e-12);
            assert_close(&r[2 + j], &r[4 + j], 1e-12);
        }
    }
    let mut g = Graph::new();
    let x = g.constant(xv);
    assert!(pfor_recorded(&mut g, 7, &PforOptions::strict().with_chunk_size(0), |g, i| body_rows(g, x, i)).is_err());
}

#[test]
fn nested_pfor_matches_nested_loops() {
    let xv = Tensor::randn_f64(&[4, 3], 9).unwrap();
    let mut g = Graph::new();
    let x = g.constant(xv);
    let opts = PforOptions::strict();
    let outer = pfor_recorded(&mut g, 4, &opts, |g, i| {
        let xi = g.gather(x, i, 0)?;
        let inner = pfor_recorded(g, 3, &opts, |g, j| {
            let xij = g.gather(xi, j, 0)?;
            let fj = g.cast(j, DType::F64)?;
            Ok(vec![g.mul(xij, fj)?])
        })?;
        Ok(vec![g.exp(inner[0])?])
    })
    .unwrap();
    let looped = for_loop(&mut g, 4, |g, i| {
        let xi = g.gather(x, i, 0)?;
        let inner = for_loop(g, 3, |g, j| {
            let xij = g.gather(xi, j, 0)?;
            let fj = g.cast(j, DType::F64)?;
            Ok(vec![g.mul(xij, fj)?])
        })?;
        Ok(vec![g.exp(inner[0])?])
    })
    .unwrap();
    let r = eval(&g, &[outer[0], looped[0]]);
    assert_close(&r[0], &r[1], 1e-12);
    assert_eq!(r[0].shape(), &[4, 3]);
}

/// A chunked pfor (its chunks run by a `For`) and a `map_fn` nested in a strict pfor convert
/// (the loops are interchanged), with a remainder chunk, a result the inner body leaves
/// loop-invariant, and a dynamic outer length; the same against nested loops.
#[test]
fn chunked_pfor_and_map_fn_inside_strict_pfor_match_the_loops() {
    let xv = Tensor::randn_f64(&[4, 5, 3], 9).unwrap();
    let mut g = Graph::new();
    let x = g.constant(xv);
    let w = g.constant(Tensor::randn_f64(&[3], 2).unwrap());
    let n = g.input("n", DType::I64, Shape::scalar());
    let inner = |g: &mut Graph, xi: ValueId, j: ValueId| -> Result<Vec<ValueId>> {
        let xij = g.gather(xi, j, 0)?;
        let fj = g.cast(j, DType::F64)?;
        let y = g.mul(xij, fj)?;
        Ok(vec![g.sin(y)?, g.mul(w, w)?])
    };
    let chunked = PforOptions::strict().with_chunk_size(2);
    let outer = |g: &mut Graph, i: ValueId, vectorized: bool| -> Result<Vec<ValueId>> {
        let xi = g.gather(x, i, 0)?;
        let r = if vectorized {
            pfor_recorded(g, 5, &chunked, |g, j| inner(g, xi, j))?
        } else {
            for_loop(g, 5, |g, j| inner(g, xi, j))?
        };
        let m = map_fn(g, |g, a| Ok(vec![g.exp(a[0])?]), &[xi])?;
        Ok(vec![g.exp(r[0])?, r[1], m[0]])
    };
    let a = pfor_recorded(&mut g, 4, &PforOptions::strict(), |g, i| outer(g, i, true)).unwrap();
    let d = pfor_recorded(&mut g, n, &PforOptions::strict(), |g, i| outer(g, i, true)).unwrap();
    let l = for_loop(&mut g, 4, |g, i| outer(g, i, false)).unwrap();
    g.verify().unwrap();
    let mut fetch = a.clone();
    fetch.extend(&d);
    fetch.extend(&l);
    let r = run_once(&g, &fetch, &[(n, Tensor::scalar(4i64))]).unwrap();
    assert_eq!(r[0].shape(), &[4, 5, 3]);
    assert_eq!(r[1].shape(), &[4, 5, 3]);
    for k in 0..3 {
        assert_close(&r[k], &r[6 + k], 1e-12);
        assert_close(&r[3 + k], &r[6 + k], 1e-12);
    }
}

/// A reference loop whose trip count varies per iteration is declined, naming why.
#[test]
fn a_for_loop_with_a_per_iteration_trip_count_is_declined() {
    let mut g = Graph::new();
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let r = for_loop(g, i, |g, j| Ok(vec![g.cast(j, DType::F64)?]))?;
        Ok(vec![g.reduce_sum(r[0], Some(&[0]), false)?])
    };
    let e = pfor_with(&mut g, 4, &PforOptions::strict(), body).unwrap_err();
    assert!(e.to_string().contains("per-iteration trip count"), "{e}");
}

#[test]
fn zero_iterations_and_invariant_outputs() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::randn_f64(&[0, 3], 1).unwrap());
    let c = g.constant(f64t(&[2], &[1.0, 2.0]));
    let out = pfor_recorded(&mut g, 0, &PforOptions::strict(), |g, i| {
        let xi = g.gather(x, i, 0)?;
        Ok(vec![g.exp(xi)?, g.exp(c)?])
    })
    .unwrap();
    let r = eval(&g, &out);
    assert_eq!(r[0].shape(), &[0, 3]);
    assert_eq!(r[1].shape(), &[0, 2]);
    // an invariant output is tiled to [n] + shape
    let mut g = Graph::new();
    let c = g.constant(f64t(&[2], &[1.0, 2.0]));
    let out = pfor_recorded(&mut g, 3, &PforOptions::strict(), |g, _i| Ok(vec![g.neg(c)?])).unwrap();
    assert_eq!(eval1(&g, out[0]), f64t(&[3, 2], &[-1.0, -2.0, -1.0, -2.0, -1.0, -2.0]));
}

#[test]
fn bad_loop_lengths_are_errors() {
    let mut g = Graph::new();
    let nf = g.constant(Tensor::scalar(3.0f64));
    let e = pfor_recorded(&mut g, nf, &PforOptions::strict(), |_, i| Ok(vec![i])).unwrap_err();
    assert!(e.to_string().contains("loop length must be an i64 scalar"), "{e}");
    let nv = g.constant(i64t(&[1], &[3]));
    assert!(pfor_recorded(&mut g, nv, &PforOptions::strict(), |_, i| Ok(vec![i])).is_err());
}

#[test]
fn vectorized_map_and_map_fn_agree_with_broadcast_elems() {
    let mut g = Graph::new();
    let a = g.constant(Tensor::randn_f64(&[5, 3], 1).unwrap());
    let b = g.constant(Tensor::randn_f64(&[3], 2).unwrap()); // in_axes None: broadcast
    let f = |g: &mut Graph, xs: &[ValueId]| -> Result<Vec<ValueId>> {
        let s = g.mul(xs[0], xs[1])?;
        Ok(vec![g.reduce_sum(s, Some(&[0]), false)?])
    };
    let axes = MapAxes::new().in_axes(&[Some(0), None]);
    let v = vectorized_map_axes(&mut g, f, &[a, b], &axes).unwrap();
    let m = map_fn_axes(&mut g, f, &[a, b], &axes).unwrap();
    let r = eval(&g, &[v[0], m[0]]);
    assert_eq!(r[0].shape(), &[5]);
    assert_close(&r[0], &r[1], 1e-12);
    let c = g.constant(Tensor::randn_f64(&[4, 3], 3).unwrap());
    assert!(vectorized_map(&mut g, f, &[a, c]).is_err());
}

#[test]
fn pipeline_batches_examples_with_one_session() {
    let examples: Vec<Vec<Tensor>> = (0..7).map(|k| vec![f64t(&[2], &[k as f64, 1.0])]).collect();
    let types = [TensorType::new(DType::F64, [2])];
    let batches: Vec<Vec<Tensor>> = pipeline(examples, 3, &types, &PforOptions::strict(), |g, xs| {
        Ok(vec![g.reduce_sum(xs[0], Some(&[0]), false)?])
    })
    .unwrap()
    .collect::<Result<_>>()
    .unwrap();
    assert_eq!(batches.len(), 3);
    assert_eq!(batches[0][0], f64t(&[3], &[1.0, 2.0, 3.0]));
    assert_eq!(batches[2][0], f64t(&[1], &[7.0]));
    let bad = vec![vec![f64t(&[3], &[0.0; 3])]];
    let mut it = pipeline(bad, 2, &types, &PforOptions::strict(), |_, xs| Ok(vec![xs[0]])).unwrap();
    assert!(it.next().unwrap().is_err());
}
