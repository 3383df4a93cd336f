//! The decisions the one cost estimate (`pfor::passes::cost`) drives stay what they were on
//! the benchmark workloads W1–W5: the number of plan steps after fusion and whether a run
//! is handed to the worker pool (on a multi-threaded machine). The expected values were
//! recorded when the estimate became one (issue 17C), whose callers keep their thresholds
//! and the old formulas term by term, so a later change of the model that moves a decision
//! on these workloads fails here.

#[allow(unused_imports, clippy::duplicate_mod)]
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
    }
    out
}

#[test]
fn fusion_and_hand_off_decisions_on_w1_to_w5_are_unchanged() {
    let got = decisions();
    // Recorded as `hands_off()` on a multi-threaded machine; on one thread nothing hands off.
    let expected: &[(&str, usize, bool)] = &[
        ("w1 pfor 1", 4, false),
        ("w1 hand 1", 3, false),
        ("w1 pfor 128", 4, true),
        ("w1 hand 128", 3, true),
        // n = 1: the static one-row form, the network on the batch of one (issue 22; was 20)
        ("w2 pfor 1", 16, true),
        ("w2 hand 1", 16, true),
        // n = 1: the examples are a batch of one since the map axes (issue 20.1; was 65 when a
        // leading dim of 1 was taken as broadcast)
        // the one-row form (issue 22): was 59
        ("w4 pfor 1", 52, true),
        ("w4 hand 1", 44, true),
        ("w2 pfor 64", 20, true),
        ("w2 hand 64", 16, true),
        ("w4 pfor 64", 61, true),
        ("w4 hand 64", 47, true),
        // n = 1: the while takes the one-row form in every mode (issue 22; was 17 and 11)
        ("w3 subset 1", 10, false),
        ("w3 mask 1", 10, false),
        ("w3 padded 1", 9, false),
        ("w3 subset 32", 17, true),
        ("w3 mask 32", 11, true),
        ("w3 padded 32", 9, true),
        // n = 1: the one-row form, one VJP (issue 22; was 224)
        ("w5 pfor 1", 158, false),
        ("w5 pfor 64", 225, true),
    ];
    let multi = rayon::current_num_threads() > 1;
    let want: Vec<(String, usize, bool)> = expected.iter().map(|(n, s, h)| (n.to_string(), *s, *h && multi)).collect();
    assert_eq!(got, want);
}
