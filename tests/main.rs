//! The one test binary: modules mirror `src/` (ops families, ir, exec, control flow...).
#![allow(clippy::result_large_err)]

mod autobatch;
mod common;
mod core;
mod ops;
