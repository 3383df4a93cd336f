//! `out_axes = None` (JAX): an output that is the same in every iteration comes back
//! unbatched from `vectorized_map` / `map_fn` / `pipeline`; one that is not is an error
//! naming the output. Written as a user would, against the direct formula.

use crate::common::*;
use pfor::api::{MapAxes, map_fn_axes, pipeline_axes, vectorized_map_axes, vectorized_map_axes_with};
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

/// One example's prediction `x·w` and the weights' penalty `Σ w²` (the same for all).
fn predict_and_penalty(g: &mut Graph, a: &[ValueId]) -> Result<Vec<ValueId>> {
    let xw = g.mul(a[0], a[1])?;
    let ww = g.mul(a[1], a[1])?;
    Ok(vec![g.sum_all(xw)?, g.sum_all(ww)?])
}

#[test]
fn out_axes_none_returns_a_loop_invariant_output_once() {
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn_f64(&[5, 3], 1).unwrap());
    let w = g.constant(Tensor::randn_f64(&[3], 2).unwrap());
    // jax.vmap(f, in_axes=(0, None), out_axes=(0, None))
    let axes = MapAxes::new().in_axes(&[Some(0), None]).out_axes(&[Some(0), None]);
    let v = vectorized_map_axes(&mut g, predict_and_penalty, &[xs, w], &axes).unwrap();
    let l = map_fn_axes(&mut g, predict_and_penalty, &[xs, w], &axes).unwrap();
    // chunked: 5 iterations in chunks of 2 (two chunks and a remainder of one)
    let chunked = PforOptions::strict().with_chunk_size(2);
    let c = vectorized_map_axes_with(&mut g, predict_and_penalty, &[xs, w], &axes, &chunked).unwrap();
    let w1 = g.reshape(w, &[3, 1]).unwrap();
    let pred = g.matmul(xs, w1).unwrap();
    let pred = g.reshape(pred, &[5]).unwrap();
    let ww = g.mul(w, w).unwrap();
    let pen = g.sum_all(ww).unwrap();
    for out in [&v, &l, &c] {
        assert_eq!(g.shape(out[1]).unwrap().as_fixed(), Some(vec![]), "unbatched: a scalar");
        let r = eval(&g, &[out[0], out[1], pred, pen]);
        assert_eq!(r[0].shape(), &[5]);
        assert_close(&r[0], &r[2], 1e-12);
        assert_close(&r[1], &r[3], 1e-12);
    }
}

/// An output that reads a mapped input differs between iterations: asking it unbatched is
/// an error naming the function, the output and its per-iteration type, in both forms.
#[test]
fn out_axes_none_on_a_loop_variant_output_is_an_error_naming_it() {
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn_f64(&[5, 3], 1).unwrap());
    let w = g.constant(Tensor::randn_f64(&[3], 2).unwrap());
    let axes = MapAxes::new().in_axes(&[Some(0), None]).out_axes(&[None, None]);
    let e = vectorized_map_axes(&mut g, predict_and_penalty, &[xs, w], &axes).unwrap_err().to_string();
    assert!(e.contains("vectorized_map") && e.contains("out_axes[0] is None") && e.contains("output 0"), "{e}");
    assert!(e.contains("f64[]") && e.contains("not loop-invariant"), "{e}");
    let e = map_fn_axes(&mut g, predict_and_penalty, &[xs, w], &axes).unwrap_err().to_string();
    assert!(e.contains("map_fn") && e.contains("out_axes[0] is None"), "{e}");
    // too few out_axes entries: an error before anything is converted
    let axes = MapAxes::new().in_axes(&[Some(0), None]).out_axes(&[None]);
    let e = vectorized_map_axes(&mut g, predict_and_penalty, &[xs, w], &axes).unwrap_err().to_string();
    assert!(e.contains("out_axes has 1 entries for 2 outputs"), "{e}");
}

/// Nested: the inner map's unbatched output is invariant in the inner loop but reads the
/// outer loop's row, so the outer map stacks it (`[4]`); the same as the double loop.
#[test]
fn an_inner_unbatched_output_is_stacked_by_the_outer_map() {
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn_f64(&[4, 5, 3], 1).unwrap());
    let ws = g.constant(Tensor::randn_f64(&[4, 3], 2).unwrap());
    let inner = MapAxes::new().in_axes(&[Some(0), None]).out_axes(&[Some(0), None]);
    let v = vectorized_map_axes(
        &mut g,
        |g, a| vectorized_map_axes(g, predict_and_penalty, a, &inner),
        &[xs, ws],
        &MapAxes::new(),
    )
    .unwrap();
    let l =
        map_fn_axes(&mut g, |g, a| map_fn_axes(g, predict_and_penalty, a, &inner), &[xs, ws], &MapAxes::new()).unwrap();
    let ww = g.mul(ws, ws).unwrap();
    let pen = g.reduce_sum(ww, Some(&[1]), false).unwrap();
    let r = eval(&g, &[v[0], v[1], l[0], l[1], pen]);
    assert_eq!(r[0].shape(), &[4, 5]);
    assert_close(&r[0], &r[2], 1e-12);
    assert_close(&r[1], &r[4], 1e-12);
    assert_close(&r[3], &r[4], 1e-12);
}

/// `pipeline` yields an unbatched output once per batch, unstacked, the last (partial)
/// batch included.
#[test]
fn pipeline_yields_an_unbatched_output_per_batch() {
    let w = f64t(&[2], &[1.0, 10.0]);
    let examples: Vec<Vec<Tensor>> = (0..5).map(|k| vec![f64t(&[2], &[k as f64, 1.0]), w.clone()]).collect();
    let types = [TensorType::new(DType::F64, [2]), TensorType::new(DType::F64, [2])];
    let axes = MapAxes::new().in_axes(&[Some(0), None]).out_axes(&[Some(0), None]);
    let batches: Vec<Vec<Tensor>> =
        pipeline_axes(examples, 2, &types, &PforOptions::strict(), predict_and_penalty, &axes)
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
    assert_eq!(batches.len(), 3);
    assert_eq!(batches[0][0], f64t(&[2], &[10.0, 11.0]));
    assert_eq!(batches[2][0], f64t(&[1], &[14.0]));
    for b in &batches {
        assert_eq!(b[1], Tensor::scalar(101.0f64));
    }
}
