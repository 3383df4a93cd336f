//! Value tests per op family (hand-computed expected values), one file per family.
//! The coverage test below requires every built-in `OpKind` to appear in a graph that a value
//! test ran (recorded by the run helpers, see `tests/common/coverage.rs`).

pub mod binary;
pub mod control;
pub mod conv;
pub mod conv_chunks;
pub mod conv_explicit_padding;
pub mod conv_implicit;
pub mod conv_winograd;
pub mod conv_winograd3;
pub mod conv_winograd_points;
pub mod custom_op_public;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod linear;
pub mod nn;
pub mod pool_kernels;
pub mod random;
pub mod reduce;
pub mod shape;
pub mod signature;
pub mod slicing;
pub mod state;
pub mod unary;

use crate::common::coverage::{self, Area};
use pfor::OpKind;

#[test]
fn every_op_kind_has_a_value_test() {
    if coverage::recording() {
        return;
    }
    let missing = coverage::missing(coverage::covered(), Area::Value, OpKind::all());
    assert!(missing.is_empty(), "op kinds that no value test runs: {missing:?}");
    assert!(OpKind::all().len() >= 120, "only {} op kinds", OpKind::all().len());
}
