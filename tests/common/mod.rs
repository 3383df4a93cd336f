//! Shared test helpers.
#![allow(dead_code)]

use pfor::prelude::*;

pub mod alloc_count;
pub mod coverage;
pub use coverage::{run_recorded, session};

/// f32 tensor from a shape and data.
pub fn f32t(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::from_vec(shape, data.to_vec()).unwrap()
}
/// f64 tensor.
pub fn f64t(shape: &[usize], data: &[f64]) -> Tensor {
    Tensor::from_vec(shape, data.to_vec()).unwrap()
}
/// i64 tensor.
pub fn i64t(shape: &[usize], data: &[i64]) -> Tensor {
    Tensor::from_vec(shape, data.to_vec()).unwrap()
}
/// bool tensor.
pub fn boolt(shape: &[usize], data: &[bool]) -> Tensor {
    Tensor::from_vec(shape, data.to_vec()).unwrap()
}

/// Evaluate values of a graph with no feeds.
pub fn eval(g: &Graph, vs: &[ValueId]) -> Vec<Tensor> {
    run_recorded(g, vs, &[]).unwrap_or_else(|e| panic!("run failed: {e}\n{g}"))
}
/// Evaluate one value.
pub fn eval1(g: &Graph, v: ValueId) -> Tensor {
    eval(g, &[v]).remove(0)
}

/// Assert two tensors are close (same dtype and shape).
#[track_caller]
pub fn assert_close(got: &Tensor, want: &Tensor, tol: f64) {
    if let Err(e) = pfor::tensor::assert_close(got, want, tol, tol) {
        panic!("{e}\n got: {got}\nwant: {want}");
    }
}

/// Build a graph with one constant, apply `f`, evaluate.
pub fn apply1(x: Tensor, f: impl FnOnce(&mut Graph, ValueId) -> Result<ValueId>) -> Tensor {
    let mut g = Graph::new();
    let c = g.constant(x);
    let y = f(&mut g, c).unwrap();
    g.verify().unwrap();
    eval1(&g, y)
}

/// Build a graph with two constants, apply `f`, evaluate.
pub fn apply2(a: Tensor, b: Tensor, f: impl FnOnce(&mut Graph, ValueId, ValueId) -> Result<ValueId>) -> Tensor {
    let mut g = Graph::new();
    let x = g.constant(a);
    let y = g.constant(b);
    let z = f(&mut g, x, y).unwrap();
    g.verify().unwrap();
    eval1(&g, z)
}
