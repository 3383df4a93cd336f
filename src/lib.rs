//! # pfor — static loop vectorization of dataflow graphs
//!
//! Write the body of a loop for ONE example; `pfor` rewrites it, before anything runs,
//! into one graph that computes all iterations at once with batched kernels (the
//! technique of Agarwal & Ganichev, "Auto-Vectorizing TensorFlow Graphs").
//!
//! Layers (see `docs/ARCHITECTURE.md`): [`tensor`] (dtype-tagged ndarray tensors), [`ir`] (the graph
//! IR on petgraph), [`ops`] (the op set, one file per family), [`exec`] (compile-once
//! sessions), [`reference`] (the per-iteration loop, the correctness oracle).
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
pub mod reference;
pub mod tensor;
pub mod vectorize;

#[path = "../converters/mod.rs"]
pub mod converters;

pub use error::{Error, Result};
pub use exec::{CancelToken, ExecOptions, RunOptions, Session, Workers, run_function, run_once};
pub use ir::{Function, Graph, NodeId, ValueId};
pub use kernels::alloc::tune_system_allocator;
pub use ops::{Op, OpKind};
pub use tensor::{DType, Dim, Shape, Tensor, TensorType};

/// Everything a typical user needs.
pub mod prelude {
    pub use crate::error::{Error, Result};
    pub use crate::exec::{CancelToken, ExecOptions, RunOptions, Session, Workers, run_once};
    pub use crate::ir::{Function, Graph, NodeId, ValueId};
    pub use crate::ops::{Conv2dParams, IterationCap, Op, OpKind, Padding};
    pub use crate::reference::{LoopLen, for_loop};
    pub use crate::tensor::{DType, Dim, Shape, Tensor, TensorType};
}

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
