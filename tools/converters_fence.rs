//! The converters' fence: `converters/` compiled a second time, OUTSIDE the `pfor` crate,
//! where `crate::…` resolves through the glob import below — `pfor`'s public API and nothing
//! else. A converter that reaches a `pub(crate)` (or private) item of the library compiles
//! inside the crate but fails to build here, so `cargo test`, `cargo build --examples` and
//! `cargo clippy --all-targets` (which build every example target) fail on it.
//!
//! Running it (`cargo run --example converters_fence`) also checks that the fenced copy
//! registers a converter for exactly the op kinds the library's built-in registry covers,
//! prints the verdict and exits non-zero on a difference.

use pfor::*;

// Not named `converters`, which would shadow `pfor::converters` in the glob import above.
#[path = "../converters/mod.rs"]
#[allow(dead_code)]
mod fenced;

use pfor::vectorize::{OpKey, Registry};

fn main() {
    let mut registry = Registry::empty();
    fenced::register_all(&mut registry);
    let builtin = Registry::builtin();
    let differ: Vec<String> = OpKind::all()
        .into_iter()
        .map(OpKey::Builtin)
        .filter(|k| registry.contains(k) != builtin.contains(k))
        .map(|k| k.to_string())
        .collect();
    println!(
        "converters compiled against the public API: {} converters (built-in registry: {})",
        registry.len(),
        builtin.len()
    );
    if differ.is_empty() && registry.len() == builtin.len() {
        println!("verdict: matches the reference (the built-in registry's op kinds, 0 differences)");
    } else {
        println!("verdict: MISMATCH with the built-in registry: {}", differ.join(", "));
        std::process::exit(1);
    }
}
