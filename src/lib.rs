// The README is the crate's front page; its Rust code blocks are doctests that run.
// Layers (docs/ARCHITECTURE.md): `tensor` (dtype-tagged ndarray tensors), `ir` (the graph IR
// on petgraph), `ops` (the op set, one file per family), `exec` (compile-once sessions),
// `reference` (the per-iteration loop, the correctness oracle).
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod api;
pub mod autobatch;
pub mod autodiff;
pub mod error;
pub mod exec;
pub mod ir;
pub mod kernels;
#[cfg(feature = "onnx")]
pub mod onnx;
pub mod ops;
pub mod passes;
pub mod reference;
pub mod tensor;
pub mod vectorize;

#[path = "../converters/mod.rs"]
pub mod converters;

pub use error::{Error, Result};
pub use exec::{CancelToken, ExecOptions, RunOptions, Session, Workers, run_function, run_once};
pub use ir::{Function, Graph, NodeId, ValueId};
pub use kernels::alloc::{TensorAllocator, tune_system_allocator};
pub use ops::{Op, OpKind};
pub use tensor::{DType, Dim, Shape, Tensor, TensorType};

/// Everything a typical user needs: the graph, tensors and sessions, and the transforms
/// (`pfor`, `vectorized_map`, `map_fn`, `gradients`, `jacobian`, `hessian`,
/// `per_example_gradients`) with their options.
///
/// Conventions of the public API:
/// - every fallible function returns [`Result`]; bad input is an [`Error`] naming the op, the
///   node and the shapes;
/// - a `*_with` variant takes the plain function's arguments plus its options, and the
///   options argument sits right before the first closure argument, or last when there is
///   no closure (`pfor_with(g, n, &options, body)`, `vectorized_map_with(g, &options, f,
///   elems)`, `jacobian_with(g, y, x, &options)`, `Session::run_with(feeds, &run)`): the
///   closure, usually many lines, stays last;
/// - axes are `i64` (negative counts from the end); reductions and `squeeze` take
///   `Option<&[i64]>`, `None` meaning every axis (every size-1 axis) and `Some(&[])` none;
/// - losses take `(labels, logits)`, in TensorFlow's order.
pub mod prelude {
    pub use crate::api::{hessian, jacobian, map_fn, per_example_gradients, vectorized_map, vectorized_map_with};
    pub use crate::autodiff::gradients;
    pub use crate::error::{Error, Result};
    pub use crate::exec::{CancelToken, ExecOptions, Fetched, RunOptions, Session, Workers, run_once};
    pub use crate::ir::{Function, Graph, NodeId, ValueId};
    pub use crate::ops::{Conv2dParams, IterationCap, Op, OpKind, Padding};
    pub use crate::reference::{LoopLen, for_loop};
    pub use crate::tensor::{DType, Dim, Shape, Tensor, TensorType};
    pub use crate::vectorize::{Fallback, PforOptions, pfor, pfor_with};
}
