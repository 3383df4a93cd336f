//! The decisions the one cost estimate (`pfor::passes::cost`) drives stay what they were on
//! the benchmark workloads W1–W5: the number of plan steps after fusion and whether a run
//! is handed to the worker pool. The expected values were recorded with the code before the
//! cost estimate was shared (commit e45f3a9), so a change of model that moves a decision
//! fails here.

#[allow(dead_code, unused_imports)]
#[path = "../../benches/workloads/mod.rs"]
mod workloads;

use pfor::prelude::*;
use workloads::{Mode, W3Mode, Workload};

/// `(name, steps, several parallel kernels)` per workload.
fn decisions() -> Vec<(String, usize, bool)> {
    let mut out = Vec::new();
    let mut add = |name: String, w: Result<Workload>| {
        let w = w.unwrap();
        let several = w.session.hands_off();
        out.push((name, w.session.num_steps(), several));
    };
    for n in [1, 128] {
        add(format!("w1 pfor {n}"), workloads::w1(n, Mode::Pfor));
        add(format!("w1 hand {n}"), workloads::w1(n, Mode::Hand));
    }
    for n in [1, 64] {
        add(format!("w2 pfor {n}"), workloads::w2(n, Mode::Pfor));
        add(format!("w2 hand {n}"), workloads::w2(n, Mode::Hand));
        add(format!("w4 pfor {n}"), workloads::w4(n, Mode::Pfor));
        add(format!("w4 hand {n}"), workloads::w4(n, Mode::Hand));
    }
    for n in [1, 32] {
        add(format!("w3 subset {n}"), workloads::w3(n, W3Mode::PforSubset));
        add(format!("w3 mask {n}"), workloads::w3(n, W3Mode::PforMask));
        add(format!("w3 padded {n}"), workloads::w3(n, W3Mode::Padded));
    }
    for out in [1, 64] {
        add(format!("w5 pfor {out}"), workloads::w5(out, Mode::Pfor));
        add(format!("w5 hand {out}"), workloads::w5(out, Mode::Hand));
    }
    out
}

#[test]
fn fusion_and_hand_off_decisions_on_w1_to_w5_are_unchanged() {
    let got = decisions();
    for (name, steps, several) in &got {
        println!("(\"{name}\", {steps}, {several}),");
    }
    // Recorded as `hands_off()` on a multi-threaded machine; on one thread nothing hands off.
    let expected: &[(&str, usize, bool)] = &[];
    let multi = rayon::current_num_threads() > 1;
    assert_eq!(got.len(), expected.len());
    for ((name, steps, several), (ename, esteps, eseveral)) in got.iter().zip(expected) {
        assert_eq!((name.as_str(), *steps, *several), (*ename, *esteps, *eseveral && multi));
    }
}
