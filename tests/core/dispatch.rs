//! The per-op dispatch path of a compiled plan (issue 22): small f32 unary / binary steps
//! run on the plan's slots with no allocation per step, write into dead operands in place,
//! never into a live tensor, and compute bit for bit what the generic kernels compute.

use crate::common::alloc_count::allocations;
use crate::common::*;
use pfor::ops::{BinaryKind, UnaryKind};
use pfor::prelude::*;

/// `ops` alternating `add` / `mul` steps on f32[4] with a constant (the dispatch probe's
/// chain), run on the caller's thread (where the allocations are counted).
fn tiny_chain(ops: usize, fuse: bool) -> (Session, ValueId, Tensor) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [4]);
    let c = g.constant(f32t(&[4], &CHAIN_C));
    let mut h = x;
    for k in 0..ops {
        h = if k % 2 == 0 { g.add(h, c).unwrap() } else { g.mul(h, c).unwrap() };
    }
    let opts = ExecOptions { fuse, on_workers: false, ..ExecOptions::builtin() };
    let s = Session::with_options(&g, &[h], opts).unwrap();
    (s, x, f32t(&[4], &[1.0, -2.0, 3.0, 0.5]))
}

const CHAIN_C: [f32; 4] = [0.5, 0.25, 0.125, 1.0];

/// What the chain computes, element by element in Rust.
fn chain_result(feed: &Tensor, ops: usize) -> Vec<f32> {
    let mut want = feed.to_vec::<f32>().unwrap();
    for k in 0..ops {
        for (w, c) in want.iter_mut().zip(CHAIN_C) {
            *w = if k % 2 == 0 { *w + c } else { *w * c };
        }
    }
    want
}

/// Allocations of the second run of the chain (the first one warms up), after checking its
/// result and that the feed the caller holds was copied, not written.
fn chain_allocations(ops: usize, fuse: bool) -> u64 {
    let (mut s, x, feed) = tiny_chain(ops, fuse);
    let feeds = [(x, feed.clone())];
    s.run(&feeds).unwrap();
    let (out, n) = allocations(|| s.run(&feeds).unwrap());
    assert_eq!(out[0].to_vec::<f32>().unwrap(), chain_result(&feed, ops));
    assert_eq!(feeds[0].1, feed);
    n
}

#[test]
fn tiny_op_chain_allocates_nothing_per_step() {
    // a run allocates its slots and results, and copies the feed the caller still holds
    // once; no step allocates
    let n = chain_allocations(400, false);
    assert!(n < 32, "{n} allocations for one run of 400 steps");
}

#[test]
fn fused_group_allocates_per_group_not_per_member() {
    // 40 members make one fused group (at most 48): its scratch and shape checks allocate
    // per group, not per member
    let n = chain_allocations(40, true);
    assert!(n < 32, "{n} allocations for one run of a 40-member group");
}

const FAST_BINARY: [BinaryKind; 10] = [
    BinaryKind::Add,
    BinaryKind::Sub,
    BinaryKind::Mul,
    BinaryKind::Div,
    BinaryKind::FloorDiv,
    BinaryKind::FloorMod,
    BinaryKind::Pow,
    BinaryKind::Maximum,
    BinaryKind::Minimum,
    BinaryKind::SquaredDifference,
];

fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    let (a, b) = (a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[test]
fn fast_steps_match_the_generic_kernels_bit_for_bit() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [3, 5]);
    let vals: Vec<f32> = (0..15).map(|i| (i as f32 - 7.0) * 0.37).collect();
    let c = g.constant(f32t(&[3, 5], &vals.iter().rev().map(|v| v + 0.1).collect::<Vec<_>>()));
    let s0 = g.constant(f32t(&[], &[1.5]));
    let s11 = g.constant(f32t(&[1, 1], &[-0.75]));
    let mut fetches = Vec::new();
    for k in FAST_BINARY {
        // a dead intermediate on either side (written in place), a scalar on either side, an
        // operand read twice, a fetched operand (never written), the feed itself
        let t = g.add(x, c).unwrap();
        fetches.push(g.binary(k, t, c).unwrap());
        let t = g.sub(x, c).unwrap();
        fetches.push(g.binary(k, c, t).unwrap());
        let t = g.mul(x, c).unwrap();
        fetches.push(g.binary(k, t, s0).unwrap());
        let t = g.add(x, s11).unwrap();
        fetches.push(g.binary(k, s11, t).unwrap());
        let t = g.add(x, c).unwrap();
        fetches.push(g.binary(k, t, t).unwrap());
        let t = g.neg(x).unwrap();
        fetches.push(t);
        fetches.push(g.binary(k, t, x).unwrap());
    }
    for &k in UnaryKind::ALL {
        let t = g.mul(x, c).unwrap();
        if let Ok(u) = g.unary(k, t)
            && g.dtype(u).unwrap() == DType::F32
        {
            fetches.push(u);
        }
    }
    fetches.push(g.exp(x).unwrap()); // the feed's last reader
    let feed = f32t(&[3, 5], &vals);
    let run = |profile: bool| {
        let opts = ExecOptions { fuse: false, profile, ..ExecOptions::builtin() };
        let mut s = Session::with_options(&g, &fetches, opts).unwrap();
        let feeds = [(x, feed.clone())];
        let out = s.run(&feeds).unwrap();
        assert_eq!(feeds[0].1, feed, "the feed the caller holds was written");
        out
    };
    // a profiled run times every step through the generic kernels
    let (fast, generic) = (run(false), run(true));
    for (i, (a, b)) in fast.iter().zip(&generic).enumerate() {
        assert_eq!(a.shape(), b.shape(), "fetch {i}");
        assert!(same_bits(a, b), "fetch {i}: {a} vs {b}");
    }
}
