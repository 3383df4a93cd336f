//! The model stage shared by the engine and the [`BatchedMap`](super::BatchedMap) adaptor:
//! the per-example function vectorized ONCE over a dynamic batch dim and compiled into one
//! [`Session`] that runs every batch size (the last, partial batch too: no recompilation),
//! and the [`Assembler`] that checks examples and stacks them into that session's feeds.
//!
//! Invariants: an example that passes [`Assembler::check`] stacks without error; the feeds
//! [`Assembler::stack`] builds are in the session's input order; a broadcast component
//! (in-axis `None`) is fed once per batch and must be equal in every example of it.

use crate::api::{MapAxes, vectorized_map_axes_with};
use crate::error::{Error, Result};
use crate::exec::Session;
use crate::ir::{Graph, ValueId};
use crate::tensor::{Dim, Tensor, TensorType};
use crate::vectorize::PforOptions;

/// Checks examples against the element types and stacks a batch of them into feeds.
/// Shared by reference with the decode threads (it holds no session).
#[derive(Clone, Debug)]
pub(crate) struct Assembler {
    pub(crate) inputs: Vec<ValueId>,
    pub(crate) elem_types: Vec<TensorType>,
    /// Per component: stacked over the batch (`true`) or broadcast.
    pub(crate) mapped: Vec<bool>,
}

/// The compiled model: one session for every batch size, and its assembler.
pub(crate) struct BatchModel {
    pub(crate) session: Session,
    pub(crate) assembler: Assembler,
}

impl BatchModel {
    /// Vectorize `f` over a dynamic batch dim and compile it.
    pub(crate) fn new(
        elem_types: &[TensorType],
        options: &PforOptions,
        f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
        axes: &MapAxes,
    ) -> Result<BatchModel> {
        let (g, outs, assembler) = BatchModel::vectorize(&Graph::new(), elem_types, options, f, axes)?;
        let session = Session::new(&g, &outs)?;
        Ok(BatchModel { session, assembler })
    }

    /// The vectorized graph of `f` (built in a child of `parent`, sharing its function
    /// library), its outputs and its assembler, not yet compiled: for callers that compile
    /// several sessions of one model (one per worker thread).
    pub(crate) fn vectorize(
        parent: &Graph,
        elem_types: &[TensorType],
        options: &PforOptions,
        f: impl FnOnce(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>>,
        axes: &MapAxes,
    ) -> Result<(Graph, Vec<ValueId>, Assembler)> {
        let mapped: Vec<bool> = match axes.in_axes_of() {
            None => vec![true; elem_types.len()],
            Some(a) if a.len() != elem_types.len() => {
                return Err(Error::InvalidArgument(format!(
                    "pipeline: in_axes has {} entries for {} example components",
                    a.len(),
                    elem_types.len()
                )));
            }
            Some(a) => a
                .iter()
                .enumerate()
                .map(|(k, x)| match x {
                    None => Ok(false),
                    Some(0) => Ok(true),
                    Some(x) => Err(Error::InvalidArgument(format!(
                        "pipeline: in_axes entry {k} is {x}; examples are stacked on a new axis 0, so an entry \
                         is Some(0) (mapped) or None (broadcast)"
                    ))),
                })
                .collect::<Result<_>>()?,
        };
        let mut g = parent.new_child();
        let inputs: Vec<ValueId> = elem_types
            .iter()
            .zip(&mapped)
            .enumerate()
            .map(|(k, (t, m))| {
                let shape = if *m { t.shape.prepend(Dim::dynamic("batch")) } else { t.shape.clone() };
                g.input(&format!("elem{k}"), t.dtype, shape)
            })
            .collect();
        let outs = vectorized_map_axes_with(&mut g, f, &inputs, axes, options)?;
        Ok((g, outs, Assembler { inputs, elem_types: elem_types.to_vec(), mapped }))
    }
}

impl Assembler {
    /// Check one example against the element types: component count, dtypes, shapes.
    pub(crate) fn check(&self, ex: &[Tensor]) -> Result<()> {
        if ex.len() != self.elem_types.len() {
            return Err(Error::InvalidArgument(format!(
                "pipeline: example has {} tensors, expected {}",
                ex.len(),
                self.elem_types.len()
            )));
        }
        for (k, (x, t)) in ex.iter().zip(&self.elem_types).enumerate() {
            if x.dtype() != t.dtype || !t.shape.matches(x.shape()) {
                return Err(Error::InvalidArgument(format!(
                    "pipeline: example component {k} is {}{:?}, expected {t}",
                    x.dtype(),
                    x.shape()
                )));
            }
        }
        Ok(())
    }

    /// The position of the first example of `batch` whose broadcast component differs from
    /// example 0's, with an error naming both; `Ok` when every broadcast component agrees.
    pub(crate) fn check_broadcast(&self, batch: &[Vec<Tensor>]) -> std::result::Result<(), (usize, Error)> {
        for (k, _) in self.mapped.iter().enumerate().filter(|(_, m)| !**m) {
            if let Some(j) = batch.iter().position(|ex| ex[k] != batch[0][k]) {
                return Err((
                    j,
                    Error::InvalidArgument(format!(
                        "pipeline: component {k} is broadcast (in_axes None) but example {j} of the batch has a \
                         different value ({:?}) than example 0 ({:?})",
                        batch[j][k].shape(),
                        batch[0][k].shape()
                    )),
                ));
            }
        }
        Ok(())
    }

    /// Stack checked examples (at least one) into the session's feeds.
    pub(crate) fn stack(&self, batch: &[Vec<Tensor>]) -> Result<Vec<(ValueId, Tensor)>> {
        let Some(first) = batch.first() else {
            return Err(Error::InvalidArgument("pipeline: a batch has no example".into()));
        };
        let mut feeds = Vec::with_capacity(self.inputs.len());
        for (k, (v, m)) in self.inputs.iter().zip(&self.mapped).enumerate() {
            if *m {
                let parts: Vec<Tensor> = batch.iter().map(|ex| ex[k].clone()).collect();
                feeds.push((*v, Tensor::stack(&parts, self.elem_types[k].dtype, first[k].shape())?));
            } else {
                feeds.push((*v, first[k].clone()));
            }
        }
        Ok(feeds)
    }

    /// Bytes of a batch of `n` examples' feeds, if every element type is fully fixed (a
    /// broadcast component counts once).
    pub(crate) fn batch_bytes(&self, n: usize) -> Option<usize> {
        self.elem_types.iter().zip(&self.mapped).try_fold(0usize, |acc, (t, m)| {
            let one = t.shape.num_elements()?.checked_mul(t.dtype.size())?;
            acc.checked_add(if *m { one.checked_mul(n)? } else { one })
        })
    }
}
