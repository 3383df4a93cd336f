//! STUB: the linalg family (to be implemented).

use std::fmt;

use crate::error::Result;
use crate::tensor::{Tensor, TensorType};

/// Ops of the linalg family.
#[derive(Clone, Debug, PartialEq)]
pub enum LinalgOp {}

/// Kinds of the linalg family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinalgKind {}

impl LinalgKind {
    /// Every kind.
    pub const ALL: &'static [LinalgKind] = &[];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {}
    }
}

impl LinalgOp {
    /// The kind.
    pub fn kind(&self) -> LinalgKind {
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

impl fmt::Display for LinalgOp {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}
