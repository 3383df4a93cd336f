//! STUB: the elementwise family (to be implemented).

use std::fmt;

use crate::error::Result;
use crate::tensor::{Tensor, TensorType};

/// Ops of the elementwise family.
#[derive(Clone, Debug, PartialEq)]
pub enum ElementwiseOp {}

/// Kinds of the elementwise family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementwiseKind {}

impl ElementwiseKind {
    /// Every kind.
    pub const ALL: &'static [ElementwiseKind] = &[];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {}
    }
}

impl ElementwiseOp {
    /// The kind.
    pub fn kind(&self) -> ElementwiseKind {
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

impl fmt::Display for ElementwiseOp {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}
