//! Value tests per op family (hand-computed expected values), one file per family.
//! Each file exports `tested_kinds()`, the kinds it checks; the coverage test below
//! requires every built-in `OpKind` to appear.

pub mod binary;
pub mod control;
pub mod conv;
pub mod conv_winograd;
pub mod custom_op_public;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod linear;
pub mod nn;
pub mod random;
pub mod reduce;
pub mod shape;
pub mod signature;
pub mod slicing;
pub mod state;
pub mod unary;

use pfor::OpKind;

#[test]
fn every_op_kind_has_a_value_test() {
    let mut v: Vec<OpKind> = vec![OpKind::Input, OpKind::Const];
    v.extend(unary::tested_kinds());
    v.extend(binary::tested_kinds());
    v.extend(elementwise::tested_kinds());
    v.extend(reduce::tested_kinds());
    v.extend(shape::tested_kinds());
    v.extend(slicing::tested_kinds());
    v.extend(indexing::tested_kinds());
    v.extend(linear::tested_kinds());
    v.extend(conv::tested_kinds());
    v.extend(nn::tested_kinds());
    v.extend(linalg::tested_kinds());
    v.extend(random::tested_kinds());
    v.extend(state::tested_kinds());
    v.extend(control::tested_kinds());
    let missing: Vec<String> =
        OpKind::all().into_iter().filter(|k| !v.contains(k)).map(|k| format!("{}/{}", k.family(), k)).collect();
    assert!(missing.is_empty(), "op kinds without a value test: {missing:?}");
    assert!(OpKind::all().len() >= 120, "only {} op kinds", OpKind::all().len());
}
