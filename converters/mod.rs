//! pfor converters, one file per op family (mirroring `src/ops/`). See README.md for the
//! rules of writing one.
//!
//! Kinds that declare a batching class other than `Batching::Custom` (`src/ops/signature.rs`)
//! all get the ONE derived converter ([`derived_convert`]); the files here hold only the
//! hand-written ones. The unary, binary and reduce families are derived throughout, so they
//! have no file here.
//!
//! Op kinds without a converter, and why (checked by the coverage test):
//! - `input`, `const`: no inputs, so never loop-variant;
//! - `read_variable`: no inputs, so never loop-variant (reads are loop-invariant);
//! - control flow: converted by `control.rs` (a `for` with a per-iteration trip count is
//!   declined there and runs through the per-op fallback; recursive `call`s are handed off
//!   to the auto-batching VM).

pub mod control;
pub mod conv;
pub mod elementwise;
pub mod indexing;
pub mod linalg;
pub mod linear;
pub mod nn;
pub mod random;
pub mod shape;
pub mod slicing;
pub mod state;

use crate::ops::{Batching, OpKind, ShapeKind, StateKind};
use crate::vectorize::{OpKey, Registry, derived_convert};

/// Register every built-in converter: the derived one for each kind with a declared
/// batching class, then the families' hand-written ones.
pub fn register_all(r: &mut Registry) {
    for k in OpKind::all() {
        if k.batching() != Batching::Custom {
            r.register(OpKey::Builtin(k), derived_convert);
        }
    }
    elementwise::register(r);
    shape::register(r);
    slicing::register(r);
    indexing::register(r);
    linear::register(r);
    linalg::register(r);
    conv::register(r);
    control::register(r);
    state::register(r);
    random::register(r);
    nn::register(r);
}

/// Op kinds deliberately without a converter, with the reason (a kind here may still be
/// registered with a converter that always declines, so the fallback names the reason).
pub fn unconverted_kinds() -> Vec<(OpKind, &'static str)> {
    let v = vec![
        (OpKind::Input, "no inputs: never loop-variant"),
        (OpKind::Const, "no inputs: never loop-variant"),
        (OpKind::State(StateKind::Read), "no inputs: variable reads are loop-invariant"),
        // registered only to name the reason in the fallback message:
        (OpKind::Shape(ShapeKind::Range), "range with loop-variant bounds has a per-iteration length"),
    ];
    v
}
