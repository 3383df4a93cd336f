//! The "map then batch" swap (paper §5.4): instead of running a per-example graph once per
//! example and batching the results, group examples into batches and run ONE compiled
//! vectorized map per batch.
//!
//! The map is compiled once with a dynamic batch dim, so every batch size — including the
//! last, partial batch — reuses the same session (no re-tracing per batch size).
//!
//! Two front ends share that model stage (`model.rs`):
//! - [`pipeline`] / [`pipeline_axes`]: an iterator adaptor ([`BatchedMap`]) that batches
//!   already-decoded examples on the calling thread;
//! - [`Pipeline`] (`engine.rs`): the engine — source → parallel decode → batch → model →
//!   sink, with bounded queues, a byte budget, a per-record error policy, cancellation and
//!   [`PipelineStats`].
//!
//! With the `parquet` feature, `arrow` converts Arrow arrays and record batches to and from
//! tensors and `parquet` reads and writes Parquet files for the engine. With the
//! `datafusion` feature, `sql` makes a serialized per-example function a DataFusion scalar
//! UDF that runs the model stage on each record batch (SQL over Parquet, and Ballista).
//!
//! With [`pipeline_axes`], an example component whose in-axis is `None` is broadcast: it
//! must be the same tensor in every example of a batch (checked), and is fed once per
//! batch, unstacked; the out-axes place the batch axis in each yielded output.

#[cfg(feature = "parquet")]
pub mod arrow;
mod engine;
mod model;
#[cfg(feature = "parquet")]
pub mod parquet;
#[cfg(feature = "datafusion")]
pub mod sql;

pub use engine::{BatchOutput, ErrorPolicy, Pipeline, PipelineConfig, PipelineStats};

use crate::api::MapAxes;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::{Tensor, TensorType};
use crate::vectorize::PforOptions;
use model::BatchModel;

/// Iterator adaptor returned by [`pipeline`]: yields the stacked outputs of each batch.
pub struct BatchedMap<I> {
    examples: I,
    batch_size: usize,
    model: BatchModel,
    done: bool,
}

/// Batch `examples` (each a list of tensors matching `elem_types`) into groups of
/// `batch_size` and apply the per-example function `f` to each group with one vectorized
/// run. Yields, per batch, one tensor per output of `f` with a leading batch axis.
///
/// ```
/// use pfor::api::pipeline;
/// use pfor::prelude::*;
/// use pfor::vectorize::PforOptions;
///
/// # fn main() -> Result<()> {
/// let examples = (0..5).map(|k| vec![Tensor::from_vec(&[2], vec![k as f64, 1.0]).unwrap()]);
/// let types = [TensorType::new(DType::F64, [2])];
/// let f = |g: &mut Graph, x: &[ValueId]| Ok(vec![g.reduce_sum(x[0], Some(&[0]), false)?]);
/// let sizes: Vec<usize> =
///     pipeline(examples, 2, &types, &PforOptions::default(), f)?.map(|b| Ok(b?[0].shape()[0])).collect::<Result<_>>()?;
/// assert_eq!(sizes, [2, 2, 1]);
/// # Ok(())
/// # }
/// ```
pub fn pipeline<I>(
    examples: I,
    batch_size: usize,
    elem_types: &[TensorType],
    options: &PforOptions,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
) -> Result<BatchedMap<I::IntoIter>>
where
    I: IntoIterator<Item = Vec<Tensor>>,
{
    pipeline_axes(examples, batch_size, elem_types, options, f, &MapAxes::new())
}

/// [`pipeline`] with axes (see [`MapAxes`]): an in-axis `None` broadcasts that component
/// (the same tensor in every example of a batch, fed once), `Some(0)` (the default) stacks
/// the examples' components on a new axis 0; the out-axes place the batch axis in each
/// output.
///
/// ```
/// use pfor::api::{MapAxes, pipeline_axes};
/// use pfor::prelude::*;
/// use pfor::vectorize::PforOptions;
///
/// # fn main() -> Result<()> {
/// let w = Tensor::from_vec(&[2], vec![1.0f64, 10.0])?; // the same in every example
/// let examples = (0..3).map(move |k| vec![Tensor::from_vec(&[2], vec![k as f64, 1.0]).unwrap(), w.clone()]);
/// let types = [TensorType::new(DType::F64, [2]), TensorType::new(DType::F64, [2])];
/// let axes = MapAxes::new().in_axes(&[Some(0), None]).out_axis(1);
/// let f = |g: &mut Graph, a: &[ValueId]| Ok(vec![g.mul(a[0], a[1])?]);
/// let batches = pipeline_axes(examples, 3, &types, &PforOptions::default(), f, &axes)?.collect::<Result<Vec<_>>>()?;
/// assert_eq!(batches[0][0], Tensor::from_vec(&[2, 3], vec![0.0f64, 1.0, 2.0, 10.0, 10.0, 10.0])?);
/// # Ok(())
/// # }
/// ```
pub fn pipeline_axes<I>(
    examples: I,
    batch_size: usize,
    elem_types: &[TensorType],
    options: &PforOptions,
    f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
    axes: &MapAxes,
) -> Result<BatchedMap<I::IntoIter>>
where
    I: IntoIterator<Item = Vec<Tensor>>,
{
    if batch_size == 0 {
        return Err(crate::error::Error::InvalidArgument("pipeline: batch_size must be > 0".into()));
    }
    let model = BatchModel::new(elem_types, options, f, axes)?;
    Ok(BatchedMap { examples: examples.into_iter(), batch_size, model, done: false })
}

impl<I: Iterator<Item = Vec<Tensor>>> BatchedMap<I> {
    fn next_batch(&mut self) -> Result<Option<Vec<Tensor>>> {
        let mut batch: Vec<Vec<Tensor>> = Vec::with_capacity(self.batch_size);
        for ex in self.examples.by_ref() {
            self.model.assembler.check(&ex)?;
            batch.push(ex);
            if batch.len() == self.batch_size {
                break;
            }
        }
        if batch.is_empty() {
            return Ok(None);
        }
        self.model.assembler.check_broadcast(&batch).map_err(|(_, e)| e)?;
        let feeds = self.model.assembler.stack(&batch)?;
        self.model.session.run(&feeds).map(Some)
    }
}

impl<I: Iterator<Item = Vec<Tensor>>> Iterator for BatchedMap<I> {
    type Item = Result<Vec<Tensor>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_batch() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
