//! The one test binary: modules mirror `src/` (ops families, ir, exec, control flow...).

mod api;
mod autobatch;
mod autodiff;
mod benches;
mod common;
mod converters;
mod core;
mod onnx;
mod ops;
mod robustness;
