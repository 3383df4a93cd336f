//! STUB: the random family (to be implemented).

use std::fmt;

use crate::error::Result;
use crate::tensor::{Tensor, TensorType};

/// Ops of the random family.
#[derive(Clone, Debug, PartialEq)]
pub enum RandomOp {}

/// Kinds of the random family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RandomKind {}

impl RandomKind {
    /// Every kind.
    pub const ALL: &'static [RandomKind] = &[];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {}
    }
}

impl RandomOp {
    /// The kind.
    pub fn kind(&self) -> RandomKind {
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
    /// Whether pfor must treat the op as stateful.
    pub fn is_stateful(&self) -> bool {
        match *self {}
    }
}

impl fmt::Display for RandomOp {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}
