//! pfor converter tests: the oracle per op family (mirrors `converters/`), plus coverage
//! and structural tests of the vectorizer.

pub mod binary;
pub mod control;
pub mod control_nested;
pub mod control_one_row;
pub mod conv;
pub mod driver;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod linear;
pub mod lstm;
pub mod nn;
pub mod one_row;
pub mod oracle;
pub mod products;
pub mod props;
pub mod random;
pub mod reduce;
pub mod shape;
pub mod simplify;
pub mod slicing;
pub mod state;
pub mod unary;

use crate::common::coverage::{self, Area};
use pfor::OpKind;
use pfor::vectorize::{OpKey, Registry};

/// Every kind with a converter (not listed as deliberately unconverted) is converted by some
/// converter test (derived from the bodies those tests converted, see
/// `tests/common/coverage.rs`).
#[test]
fn every_op_kind_has_a_converter_test() {
    if coverage::recording() {
        return;
    }
    let r = Registry::builtin();
    let exempt = pfor::converters::unconverted_kinds();
    let with_converter =
        OpKind::all().into_iter().filter(|k| r.contains(&OpKey::Builtin(*k)) && !exempt.iter().any(|(e, _)| e == k));
    let missing = coverage::missing(coverage::covered(), Area::Converter, with_converter);
    assert!(missing.is_empty(), "op kinds with a converter that no converter test converts: {missing:?}");
}

#[test]
fn every_op_kind_has_a_converter_or_a_stated_reason() {
    let r = Registry::builtin();
    let exempt = pfor::converters::unconverted_kinds();
    let missing: Vec<String> = OpKind::all()
        .into_iter()
        .filter(|k| !r.contains(&OpKey::Builtin(*k)) && !exempt.iter().any(|(e, _)| e == k))
        .map(|k| format!("{}/{}", k.family(), k))
        .collect();
    assert!(missing.is_empty(), "op kinds without a converter or a reason: {missing:?}");
    for (k, why) in exempt {
        assert!(!why.is_empty(), "{k}");
    }
}
