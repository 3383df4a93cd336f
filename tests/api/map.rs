//! `vectorized_map` / `map_fn` / `pipeline` with explicit axes (`MapAxes`), written as a
//! user would (one call each), against the loop or a direct formula; nested maps; errors.

use crate::common::*;
use pfor::api::{MapAxes, map_fn, map_fn_axes, pipeline_axes, vectorized_map, vectorized_map_axes};
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

/// `Σ_j x[j] · w[j]` for one example.
fn dot(g: &mut Graph, a: &[ValueId]) -> Result<Vec<ValueId>> {
    let p = g.mul(a[0], a[1])?;
    Ok(vec![g.reduce_sum(p, Some(&[0]), false)?])
}

#[test]
fn in_axes_none_broadcasts_an_input() {
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn_f64(&[5, 3], 1).unwrap());
    let w = g.constant(Tensor::randn_f64(&[3], 2).unwrap());
    let axes = MapAxes::new().in_axes(&[Some(0), None]);
    let v = vectorized_map_axes(&mut g, dot, &[xs, w], &axes).unwrap();
    let l = map_fn_axes(&mut g, dot, &[xs, w], &axes).unwrap();
    let w1 = g.reshape(w, &[3, 1]).unwrap();
    let want = g.matmul(xs, w1).unwrap();
    let want = g.reshape(want, &[5]).unwrap();
    let r = eval(&g, &[v[0], l[0], want]);
    assert_eq!(r[0].shape(), &[5]);
    assert_close(&r[0], &r[1], 1e-12);
    assert_close(&r[0], &r[2], 1e-12);
}

#[test]
fn a_negative_in_axis_maps_the_last_axis() {
    let mut g = Graph::new();
    let xt = g.constant(Tensor::randn_f64(&[3, 5], 1).unwrap()); // examples on the last axis
    let ws = g.constant(Tensor::randn_f64(&[5, 3], 2).unwrap()); // examples on axis 0
    let axes = MapAxes::new().in_axes(&[Some(-1), Some(0)]);
    let v = vectorized_map_axes(&mut g, dot, &[xt, ws], &axes).unwrap();
    let x = g.transpose(xt, &[1, 0]).unwrap();
    let l = map_fn(&mut g, dot, &[x, ws]).unwrap();
    let r = eval(&g, &[v[0], l[0]]);
    assert_eq!(r[0].shape(), &[5]);
    assert_close(&r[0], &r[1], 1e-12);
}

#[test]
fn out_axes_1_puts_the_mapped_axis_second() {
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn_f64(&[4, 3], 1).unwrap());
    let f = |g: &mut Graph, a: &[ValueId]| Ok(vec![g.tanh(a[0])?, g.reduce_sum(a[0], Some(&[0]), false)?]);
    let axes = MapAxes::new().out_axes(&[Some(1), Some(-1)]);
    let v = vectorized_map_axes(&mut g, f, &[xs], &axes).unwrap();
    let l = map_fn_axes(&mut g, f, &[xs], &axes).unwrap();
    let want = g.tanh(xs).unwrap();
    let want = g.transpose(want, &[1, 0]).unwrap();
    let r = eval(&g, &[v[0], l[0], want, v[1]]);
    assert_eq!(r[0].shape(), &[3, 4]);
    assert_close(&r[0], &r[2], 1e-12);
    assert_close(&r[1], &r[2], 1e-12);
    assert_eq!(r[3].shape(), &[4]);
}

/// An input whose mapped axis has size 1 is a batch of one, not a broadcast: against a
/// batch of four it is an error naming both inputs, their shapes and axes.
#[test]
fn a_batch_of_one_is_not_broadcast() {
    let mut g = Graph::new();
    let one = g.constant(Tensor::randn_f64(&[1, 3], 1).unwrap());
    let four = g.constant(Tensor::randn_f64(&[4, 3], 2).unwrap());
    let e = vectorized_map(&mut g, dot, &[one, four]).unwrap_err().to_string();
    assert!(e.contains("vectorized_map") && e.contains("input 0") && e.contains("[1,3]"), "{e}");
    assert!(e.contains("input 1") && e.contains("[4,3]") && e.contains("axis 0"), "{e}");
    // a batch of one alone maps once
    let v = vectorized_map(&mut g, dot, &[one, one]).unwrap();
    assert_eq!(eval1(&g, v[0]).shape(), &[1]);
}

#[test]
fn bad_axes_are_errors_naming_the_input_shape_and_axis() {
    let mut g = Graph::new();
    let x = g.constant(Tensor::randn_f64(&[4, 3], 1).unwrap());
    let w = g.constant(Tensor::randn_f64(&[3], 2).unwrap());
    let id = |_: &mut Graph, a: &[ValueId]| Ok(a.to_vec());
    let e = vectorized_map_axes(&mut g, id, &[x], &MapAxes::new().in_axes(&[Some(2)])).unwrap_err().to_string();
    assert!(e.contains("input 0") && e.contains("[4,3]") && e.contains("axis 2"), "{e}");
    let e = vectorized_map_axes(&mut g, id, &[x, w], &MapAxes::new().in_axes(&[None, None])).unwrap_err().to_string();
    assert!(e.contains("no input is mapped") && e.contains("axis_size"), "{e}");
    let e = vectorized_map_axes(&mut g, id, &[x, w], &MapAxes::new().in_axes(&[Some(0)])).unwrap_err().to_string();
    assert!(e.contains("in_axes has 1 entries for 2 inputs"), "{e}");
    let e = vectorized_map_axes(&mut g, id, &[x], &MapAxes::new().out_axes(&[Some(2)])).unwrap_err().to_string();
    assert!(e.contains("out_axes[0] = 2") && e.contains("[4,3]"), "{e}");
    let e = vectorized_map_axes(&mut g, id, &[x], &MapAxes::new().axis_size(5)).unwrap_err().to_string();
    assert!(e.contains("axis_size is 5") && e.contains("[4,3]"), "{e}");
    // no mapped input, with axis_size: every iteration sees the whole inputs
    let v = vectorized_map_axes(&mut g, dot, &[w, w], &MapAxes::new().in_axes(&[None, None]).axis_size(2)).unwrap();
    let r = eval1(&g, v[0]).to_f64_vec();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0], r[1]);
}

/// A vectorized_map inside the body of another equals the double loop.
#[test]
fn nested_vectorized_map_matches_the_double_loop() {
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn_f64(&[4, 5, 3], 1).unwrap());
    let w = g.constant(Tensor::randn_f64(&[3], 2).unwrap());
    let inner = |g: &mut Graph, a: &[ValueId]| {
        let d = dot(g, a)?;
        Ok(vec![g.sin(d[0])?])
    };
    let axes = MapAxes::new().in_axes(&[Some(0), None]);
    let v = vectorized_map_axes(
        &mut g,
        |g, a| {
            let r = vectorized_map_axes(g, inner, &[a[0], a[1]], &axes)?;
            Ok(vec![g.exp(r[0])?])
        },
        &[xs, w],
        &axes,
    )
    .unwrap();
    let l = map_fn_axes(
        &mut g,
        |g, a| {
            let r = map_fn_axes(g, inner, &[a[0], a[1]], &axes)?;
            Ok(vec![g.exp(r[0])?])
        },
        &[xs, w],
        &axes,
    )
    .unwrap();
    let r = eval(&g, &[v[0], l[0]]);
    assert_eq!(r[0].shape(), &[4, 5]);
    assert_close(&r[0], &r[1], 1e-12);
}

/// `pipeline` with axes: a component broadcast to the batch (the same in every example) and
/// the batch axis of the output last.
#[test]
fn pipeline_with_a_broadcast_component_and_out_axis() {
    let w = f64t(&[2], &[1.0, 10.0]);
    let examples: Vec<Vec<Tensor>> = (0..5).map(|k| vec![f64t(&[2], &[k as f64, 1.0]), w.clone()]).collect();
    let types = [TensorType::new(DType::F64, [2]), TensorType::new(DType::F64, [2])];
    let axes = MapAxes::new().in_axes(&[Some(0), None]).out_axis(-1);
    let f = |g: &mut Graph, a: &[ValueId]| Ok(vec![g.mul(a[0], a[1])?]);
    let batches: Vec<Vec<Tensor>> =
        pipeline_axes(examples, 2, &types, &PforOptions::strict(), f, &axes).unwrap().collect::<Result<_>>().unwrap();
    assert_eq!(batches.len(), 3);
    assert_eq!(batches[0][0], f64t(&[2, 2], &[0.0, 1.0, 10.0, 10.0]));
    assert_eq!(batches[2][0], f64t(&[2, 1], &[4.0, 10.0]));
    // a broadcast component that differs between the examples of a batch is an error
    let bad = vec![vec![f64t(&[2], &[0.0; 2]), w.clone()], vec![f64t(&[2], &[0.0; 2]), f64t(&[2], &[0.0; 2])]];
    let mut it = pipeline_axes(bad, 2, &types, &PforOptions::strict(), f, &axes).unwrap();
    let e = it.next().unwrap().unwrap_err().to_string();
    assert!(e.contains("component 1") && e.contains("example 1"), "{e}");
}
