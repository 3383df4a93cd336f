//! Derivative tests of the `conv` family.

use super::fd::FdCase;

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    vec![]
}
