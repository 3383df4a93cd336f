//! Autodiff tests: per-family derivative rules against finite differences (`fd.rs`), the
//! reverse/forward drivers, and the jacobian / hessian / per-example-gradient API.

pub(crate) mod fd;

mod api;
pub(crate) mod dp;

mod binary;
mod control;
mod control_pfor;
mod conv;
mod core;
mod elementwise;
mod indexing;
mod linalg;
mod linear;
mod nn;
mod random;
mod reduce;
mod second_order;
mod shape;
mod slicing;
mod state;
mod unary;

use pfor::autodiff::is_differentiable;
use pfor::prelude::*;

/// Families whose rules are complete; the coverage test checks every differentiable kind of
/// these families is exercised by some finite-difference case.
const FAMILIES: &[&str] = &[
    "unary",
    "binary",
    "elementwise",
    "slicing",
    "indexing",
    "random",
    "state",
    "linear",
    "linalg",
    "reduce",
    "shape",
    "control",
    "conv",
    "nn",
];

fn all_cases() -> Vec<fd::FdCase> {
    let mut v = Vec::new();
    v.extend(unary::cases());
    v.extend(binary::cases());
    v.extend(elementwise::cases());
    v.extend(reduce::cases());
    v.extend(shape::cases());
    v.extend(slicing::cases());
    v.extend(indexing::cases());
    v.extend(linear::cases());
    v.extend(conv::cases());
    v.extend(nn::cases());
    v.extend(linalg::cases());
    v.extend(random::cases());
    v.extend(state::cases());
    v.extend(control::cases());
    v
}

#[test]
fn every_differentiable_kind_has_a_finite_difference_case() {
    let mut covered = hashbrown::HashSet::new();
    for c in all_cases() {
        covered.extend(fd::kinds(&c));
    }
    let missing: Vec<String> = OpKind::all()
        .into_iter()
        .filter(|k| FAMILIES.contains(&k.family()) && is_differentiable(*k) && !covered.contains(k))
        .map(|k| format!("{}/{}", k.family(), k.name()))
        .collect();
    assert!(missing.is_empty(), "differentiable kinds without a finite-difference case: {missing:?}");
}
