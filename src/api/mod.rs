//! User-facing entry points built on the vectorizer: `vectorized_map`, `map_fn` and the
//! `pipeline` batching adaptor.

mod map;
mod pipeline;

pub use map::{map_fn, vectorized_map, vectorized_map_with};
pub use pipeline::{BatchedMap, pipeline};
