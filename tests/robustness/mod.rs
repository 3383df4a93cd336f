//! Robustness: pfor against the reference loop where the loop succeeds only because
//! control flow keeps an iteration away from an op that would fail on its values.

pub mod pfor_vs_loop;
