//! Value tests for the random family.

use pfor::OpKind;

/// Kinds checked by this file.
pub fn tested_kinds() -> Vec<OpKind> {
    vec![]
}
