//! The "map then batch" swap (paper §5.4): instead of running a per-example graph once per
//! example and batching the results, group examples into batches and run ONE compiled
//! vectorized map per batch.
//!
//! The map is compiled once with a dynamic batch dim, so every batch size — including the
//! last, partial batch — reuses the same session (no re-tracing per batch size).

use crate::api::vectorized_map_with;
use crate::error::{Error, Result};
use crate::exec::Session;
use crate::ir::{Graph, ValueId};
use crate::tensor::{Dim, Tensor, TensorType};
use crate::vectorize::PforOptions;

/// Iterator adaptor returned by [`pipeline`]: yields the stacked outputs of each batch.
pub struct BatchedMap<I> {
    examples: I,
    batch_size: usize,
    session: Session,
    inputs: Vec<ValueId>,
    elem_types: Vec<TensorType>,
    done: bool,
}

/// Batch `examples` (each a list of tensors matching `elem_types`) into groups of
/// `batch_size` and apply the per-example function `f` to each group with one vectorized
/// run. Yields, per batch, one tensor per output of `f` with a leading batch axis.
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
    if batch_size == 0 {
        return Err(Error::InvalidArgument("pipeline: batch_size must be > 0".into()));
    }
    let mut g = Graph::new();
    let inputs: Vec<ValueId> = elem_types
        .iter()
        .enumerate()
        .map(|(k, t)| g.input(&format!("elem{k}"), t.dtype, t.shape.prepend(Dim::dynamic("batch"))))
        .collect();
    let outs = vectorized_map_with(&mut g, options, f, &inputs)?;
    let session = Session::new(&g, &outs)?;
    Ok(BatchedMap {
        examples: examples.into_iter(),
        batch_size,
        session,
        inputs,
        elem_types: elem_types.to_vec(),
        done: false,
    })
}

impl<I: Iterator<Item = Vec<Tensor>>> BatchedMap<I> {
    fn next_batch(&mut self) -> Result<Option<Vec<Tensor>>> {
        let mut batch: Vec<Vec<Tensor>> = Vec::with_capacity(self.batch_size);
        for ex in self.examples.by_ref() {
            if ex.len() != self.elem_types.len() {
                return Err(Error::InvalidArgument(format!(
                    "pipeline: example has {} tensors, expected {}",
                    ex.len(),
                    self.elem_types.len()
                )));
            }
            batch.push(ex);
            if batch.len() == self.batch_size {
                break;
            }
        }
        if batch.is_empty() {
            return Ok(None);
        }
        let mut feeds = Vec::with_capacity(self.inputs.len());
        for (k, (v, t)) in self.inputs.iter().zip(&self.elem_types).enumerate() {
            let parts: Vec<Tensor> = batch.iter().map(|ex| ex[k].clone()).collect();
            let elem: Vec<usize> = parts[0].shape().to_vec();
            if !t.shape.matches(&elem) {
                return Err(Error::InvalidArgument(format!(
                    "pipeline: example component {k} is {elem:?}, expected {t}"
                )));
            }
            feeds.push((*v, Tensor::stack(&parts, t.dtype, &elem)?));
        }
        self.session.run(&feeds).map(Some)
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
