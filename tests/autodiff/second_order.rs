//! Second derivatives with respect to graph CONSTANTS, as a property test over every
//! differentiable op kind: derivative rules are symbolic (they build the derivative from
//! their inputs, never from an input's value or from whether it is a constant), so
//! differentiating w.r.t. a constant gives what differentiating w.r.t. an input fed the
//! same value gives, at every order.
//!
//! The graphs are the finite-difference cases of every family (`super::all_cases`, which
//! the coverage test in `super` keeps complete) with random parts drawn by proptest: which
//! differentiated inputs are constants, a chain of heads on the outputs (so linear ops get
//! curvature too), and the seeds of the loss weights and directions. Every case runs in
//! every proptest case, so each run covers every kind.

use proptest::prelude::*;

use super::fd::{FdCase, Head, Variant, check_second_variant};
use pfor::autodiff::is_differentiable;
use pfor::prelude::*;

/// The cases checked at second order: those whose second derivatives exist and are
/// checked against finite differences in their family file.
fn second_order_cases() -> Vec<FdCase> {
    super::all_cases().into_iter().filter(|c| c.second_order).collect()
}

#[test]
fn second_order_cases_cover_every_differentiable_kind() {
    let mut covered = hashbrown::HashSet::new();
    for c in second_order_cases() {
        covered.extend(super::fd::kinds(&c));
    }
    let missing: Vec<String> = OpKind::all()
        .into_iter()
        .filter(|k| is_differentiable(*k) && !covered.contains(k))
        .map(|k| format!("{}/{}", k.family(), k.name()))
        .collect();
    assert!(missing.is_empty(), "differentiable kinds without a second-order case: {missing:?}");
}

/// A 64-bit mix (splitmix64's finalizer): per-case choices from one drawn seed.
fn mix(x: u64) -> u64 {
    let x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Case `i`'s random parts, derived from the drawn seeds.
fn variant(i: usize, mask: u64, heads: u64, seed: u64) -> Variant {
    let h = mix(heads ^ i as u64);
    let n = (h % 3) as usize;
    Variant {
        const_mask: mix(mask ^ i as u64),
        heads: (0..n).map(|j| Head::ALL[(h >> (2 + 2 * j)) as usize % Head::ALL.len()]).collect(),
        seed: seed + i as u64,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2, ..ProptestConfig::default() })]

    #[test]
    fn second_derivatives_wrt_constants_equal_those_wrt_inputs_and_finite_differences(
        mask in any::<u64>(), heads in any::<u64>(), seed in 0u64..1000,
    ) {
        for (i, c) in second_order_cases().iter().enumerate() {
            check_second_variant(c, &variant(i, mask, heads, seed));
        }
    }
}
