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
