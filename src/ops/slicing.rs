//! STUB: the slicing family (to be implemented).

use std::fmt;

use crate::error::Result;
use crate::tensor::{Tensor, TensorType};

/// Ops of the slicing family.
#[derive(Clone, Debug, PartialEq)]
pub enum SlicingOp {}

/// Kinds of the slicing family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlicingKind {}

impl SlicingKind {
    /// Every kind.
    pub const ALL: &'static [SlicingKind] = &[];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {}
    }
}

impl SlicingOp {
    /// The kind.
    pub fn kind(&self) -> SlicingKind {
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

impl fmt::Display for SlicingOp {
    fn fmt(&self, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {}
    }
}
