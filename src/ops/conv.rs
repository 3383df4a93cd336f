//! STUB: the conv family (to be implemented).

use std::fmt;

use crate::error::Result;
use crate::tensor::{Tensor, TensorType};

/// Convolution / pooling padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Padding {
    /// No padding.
    Valid,
    /// Output spatial size = ceil(input / stride).
    Same,
}

/// Ops of the conv family.
#[derive(Clone, Debug, PartialEq)]
pub enum ConvOp {}

/// Kinds of the conv family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvKind {}

impl ConvKind {
    /// Every kind.
    pub const ALL: &'static [ConvKind] = &[];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {}
    }
}

impl ConvOp {
    /// The kind.
    pub fn kind(&self) -> ConvKind {
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

impl fmt::Display for ConvOp {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}
