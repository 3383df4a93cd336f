//! STUB: binary elementwise ops (to be implemented).

use crate::error::Result;
use crate::tensor::{Tensor, TensorType};

/// Binary elementwise op kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryKind {}

impl BinaryKind {
    /// Every kind.
    pub const ALL: &'static [BinaryKind] = &[];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {}
    }
}

/// Shape and dtype inference.
pub fn infer(k: BinaryKind, _inputs: &[TensorType]) -> Result<Vec<TensorType>> {
    match k {}
}

/// Evaluate.
pub fn eval(k: BinaryKind, _inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
    match k {}
}
