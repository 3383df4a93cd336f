//! Robustness: bad input through the public API is an `Err`, never a panic, an abort or a
//! silently wrong answer (issue 16): shapes at API edges, memory exhaustion and budgets,
//! size overflows, and the crash-class harness that runs abort-prone cases in a child
//! process.

mod crash;
mod memory;
mod panics;
mod shapes;
