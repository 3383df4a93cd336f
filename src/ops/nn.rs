//! STUB: the nn family (to be implemented).

use std::fmt;

use crate::error::Result;
use crate::tensor::{Tensor, TensorType};

/// Ops of the nn family.
#[derive(Clone, Debug, PartialEq)]
pub enum NnOp {}

/// Kinds of the nn family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NnKind {}

impl NnKind {
    /// Every kind.
    pub const ALL: &'static [NnKind] = &[];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {}
    }
}

impl NnOp {
    /// The kind.
    pub fn kind(&self) -> NnKind {
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

impl fmt::Display for NnOp {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}
