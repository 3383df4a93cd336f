//! Checks at a run's edges: the feeds (dtype, declared shape, named dims agreeing across
//! inputs, the memory budget) and each step's outputs against the budget before its kernel
//! allocates them.
//!
//! Invariants:
//! - a run starts only with feeds that match their inputs' declared types, and every named
//!   dynamic dim (`Dim::dynamic("n")`) has ONE size across all the feeds of the run;
//! - with a budget ([`ExecOptions::max_tensor_bytes`](super::ExecOptions)), no tensor of a
//!   run — feed, constant, variable or kernel output — is larger than it: a step's outputs
//!   are checked before its kernel runs wherever their sizes follow from the static types
//!   (or, for dynamic dims, from shape inference on the concrete input shapes), and after
//!   it runs in every case;
//! - without a budget, a step whose static output is at least
//!   [`PROBE_BYTES`](crate::kernels::alloc::PROBE_BYTES) and larger than each of its inputs
//!   is reserved once before the kernel (`alloc::probe`), so a size the system cannot serve
//!   is `Error::OutOfMemory`, not an abort; kernels that size their output from data
//!   allocate it fallibly themselves (`alloc::try_vec`).

use std::sync::Arc;

use super::{InputSlot, Step};
use crate::error::{Error, Result};
use crate::kernels::alloc::{PROBE_BYTES, probe};
use crate::ops::Op;
use crate::tensor::{Dim, Tensor, TensorType};

/// What the static types say about the size of a step's largest output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum OutSize {
    /// A dim is dynamic.
    Unknown,
    /// Every output type is fixed; the largest is this many bytes.
    Bytes(usize),
    /// A fixed output type whose byte count overflows `usize`.
    Overflow,
}

impl OutSize {
    /// The size of the largest of `types`.
    pub(super) fn of(types: &[TensorType]) -> OutSize {
        let mut max = 0;
        for t in types {
            if !t.shape.is_fixed() {
                return OutSize::Unknown;
            }
            match t.shape.num_elements().and_then(|n| n.checked_mul(t.dtype.size())) {
                Some(b) => max = max.max(b),
                None => return OutSize::Overflow,
            }
        }
        OutSize::Bytes(max)
    }
}

/// A named dynamic dim of an input: (position in the plan's inputs, axis, name).
pub(super) type NamedDim = (usize, usize, Arc<str>);

/// The named dynamic dims of `inputs`.
pub(super) fn named_dims(inputs: &[InputSlot]) -> Vec<NamedDim> {
    let mut out = Vec::new();
    for (i, is) in inputs.iter().enumerate() {
        for (ax, d) in is.ty.shape.dims().iter().enumerate() {
            if let Dim::Dynamic(Some(name)) = d {
                out.push((i, ax, name.clone()));
            }
        }
    }
    out
}

/// Check one feed against its input: dtype, declared shape, and the budget.
pub(super) fn check_feed(is: &InputSlot, t: &Tensor, limit: Option<usize>) -> Result<()> {
    if t.dtype() != is.ty.dtype || !is.ty.shape.matches(t.shape()) {
        return Err(Error::FeedType {
            name: is.name.clone(),
            expected: Box::new(is.ty.clone()),
            got_dtype: t.dtype(),
            got_shape: t.shape().to_vec(),
        });
    }
    match limit {
        Some(l) if t.nbytes() > l => {
            Err(Error::OutOfMemory { op: format!("feed for input '{}'", is.name), bytes: t.nbytes(), limit })
        }
        _ => Ok(()),
    }
}

/// Error unless every named dim has one size across the feeds (`fed[i]`: the feed of
/// `inputs[i]`, if any).
pub(super) fn check_named_dims(named: &[NamedDim], inputs: &[InputSlot], fed: &[Option<&Tensor>]) -> Result<()> {
    let mut seen: Vec<(&str, usize, usize)> = Vec::new(); // (name, size, input)
    for (i, ax, name) in named {
        let Some(t) = fed[*i] else { continue };
        let size = t.shape()[*ax];
        match seen.iter().find(|(n, _, _)| *n == &**name) {
            Some(&(_, s, j)) if s != size => {
                return Err(Error::shape(
                    "feed",
                    format!(
                        "dim '{name}' is {size} in input '{}' {:?} but {s} in input '{}' {:?}",
                        inputs[*i].name,
                        t.shape(),
                        inputs[j].name,
                        fed[j].map(Tensor::shape).unwrap_or_default()
                    ),
                ));
            }
            Some(_) => {}
            None => seen.push((name, size, *i)),
        }
    }
    Ok(())
}

fn oom(step: &Step, bytes: usize, limit: Option<usize>) -> Error {
    Error::OutOfMemory { op: step.op.name(), bytes, limit }.at_node(step.node, step.op.to_string())
}

/// Before `step`'s kernel runs on `ins`: its outputs against the budget, and the probe of a
/// large fresh output (see the module docs).
pub(super) fn before_step(step: &Step, size: OutSize, ins: &[Tensor], limit: Option<usize>) -> Result<()> {
    let bytes = match size {
        OutSize::Bytes(b) => b,
        OutSize::Overflow => {
            return Err(Error::shape(&step.op.name(), format!("output types {:?} overflow", step.out_types))
                .at_node(step.node, step.op.to_string()));
        }
        OutSize::Unknown => match limit {
            Some(_) if step.fused.is_none() => concrete_out_bytes(&step.op, ins).unwrap_or(0),
            _ => return Ok(()),
        },
    };
    if let Some(l) = limit
        && bytes > l
    {
        return Err(oom(step, bytes, limit));
    }
    // Constants, variables and control flow produce tensors that exist already (or whose
    // own steps are checked).
    if bytes >= PROBE_BYTES
        && !matches!(step.op, Op::Const { .. } | Op::State(_) | Op::Control(_))
        && ins.iter().all(|t| t.nbytes() < bytes)
    {
        probe(&step.op.name(), bytes).map_err(|e| e.at_node(step.node, step.op.to_string()))?;
    }
    Ok(())
}

/// The largest output of `op` on inputs of these concrete shapes, where shape inference
/// fixes it (`None` where it depends on data).
fn concrete_out_bytes(op: &Op, ins: &[Tensor]) -> Option<usize> {
    let types: Vec<TensorType> = ins.iter().map(Tensor::tensor_type).collect();
    match OutSize::of(&op.infer(&types).ok()?) {
        OutSize::Bytes(b) => Some(b),
        OutSize::Overflow => Some(usize::MAX),
        OutSize::Unknown => None,
    }
}

/// After `step` ran: every output within the budget.
pub(super) fn after_step(step: &Step, outs: &[Tensor], limit: usize) -> Result<()> {
    match outs.iter().map(Tensor::nbytes).find(|&b| b > limit) {
        Some(b) => Err(oom(step, b, Some(limit))),
        None => Ok(()),
    }
}
