//! STUB: the reduce family (to be implemented).

use std::fmt;

use crate::error::Result;
use crate::tensor::{Tensor, TensorType};

/// Ops of the reduce family.
#[derive(Clone, Debug, PartialEq)]
pub enum ReduceOp {}

/// Kinds of the reduce family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceKind {}

impl ReduceKind {
    /// Every kind.
    pub const ALL: &'static [ReduceKind] = &[];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {}
    }
}

impl ReduceOp {
    /// The kind.
    pub fn kind(&self) -> ReduceKind {
        match *self {}
    }
    /// Shape and dtype inference.
    pub fn infer(&self, _inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        match *self {}
    }
    /// Evaluate.
    pub fn eval(&self, _inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        match *self {}
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}
