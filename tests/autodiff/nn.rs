//! Derivative tests of the `nn` family.

use super::fd::FdCase;

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    vec![]
}
