//! User-facing entry points built on the vectorizer: `vectorized_map`, `map_fn`, the
//! `pipeline` batching adaptor (each with explicit axes, [`MapAxes`]), jacobians / hessians
//! / per-example gradients, the function-level derivative transforms (`grad`,
//! `value_and_grad`, `vjp`, `jvp`), and the small layers (`lstm_cell`) the examples and
//! benchmarks build on.

pub mod autodiff;
mod dp;
mod func;
mod layers;
mod map;
pub mod pipeline;

pub use autodiff::{
    batch_jacobian, batch_jacobian_with, hessian, hessian_with, jacobian, jacobian_fwd, jacobian_fwd_with,
    jacobian_loop, jacobian_with, per_example_gradients, per_example_gradients_loop, per_example_gradients_with,
};
pub use dp::{
    CLIP_EPS, DpGradients, DpOptions, dp_gradients, dp_gradients_loop, per_example_gradient_norms,
    per_example_gradient_norms_with,
};
pub use func::{Outputs, grad, jvp, value_and_grad, vjp};
pub use layers::{lstm_cell, lstm_gates};
pub use map::{
    MapAxes, map_fn, map_fn_axes, vectorized_map, vectorized_map_axes, vectorized_map_axes_with, vectorized_map_with,
};
pub use pipeline::{
    BatchOutput, BatchedMap, ErrorPolicy, Pipeline, PipelineConfig, PipelineStats, pipeline, pipeline_axes,
};
