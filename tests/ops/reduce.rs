//! Value tests for the reduce family.

use pfor::OpKind;

/// Kinds checked by this file.
pub fn tested_kinds() -> Vec<OpKind> {
    vec![]
}
