//! STUB: the linear family (to be implemented).

use std::fmt;

use crate::error::Result;
use crate::tensor::{Tensor, TensorType};

/// Ops of the linear family.
#[derive(Clone, Debug, PartialEq)]
pub enum LinearOp {}

/// Kinds of the linear family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinearKind {}

impl LinearKind {
    /// Every kind.
    pub const ALL: &'static [LinearKind] = &[];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {}
    }
}

impl LinearOp {
    /// The kind.
    pub fn kind(&self) -> LinearKind {
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

impl fmt::Display for LinearOp {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}
