//! Fast steps: small f32 `unary` / `binary` steps whose operand and result types are fixed
//! at compile time run straight on the plan's slots — no input or output vector, no
//! reference-count traffic for the operands they only read, no per-step type check, and the
//! result written in place into a dead operand's buffer (issue 22: the per-op cost of a
//! compiled plan; `benches/probes/dispatch_probe.rs` measures it).
//!
//! Invariants:
//! - a step is fast only when its static types make its result type certain: an op that
//!   maps f32 to f32 ([`unary::f32_to_f32`], [`binary::f32_fusable`]), not fused, whose
//!   operands are f32 of fixed shapes — each the result's fixed shape, or (binary) a single
//!   element broadcast as a scalar — and whose result has fewer than [`PAR_THRESHOLD`]
//!   elements (larger ones take the generic kernels, which run in parallel);
//! - at run time every operand is checked against those types (dtype and shape, a slice
//!   compare) and every full-size operand must be in standard layout; anything else takes
//!   the generic path, and so does a profiled run or one whose memory budget is below the
//!   result's size, so errors, profiles and budget checks are the generic ones;
//! - results are bit-identical to the generic kernels' (the same per-element functions,
//!   [`unary::f32_in_place`] and [`binary::f32_apply`]);
//! - the result is written in place into an operand whose slot this step releases (it is
//!   the operand's last reader and the value is not fetched) when it has the result's shape;
//!   if the buffer is shared after all (a feed the caller still holds), it is copied first
//!   (copy on write), so no live tensor is ever written;
//! - the result has the step's static type by construction: the generic path's check of
//!   each kernel output against its static type is, for these steps, done once here.

use ndarray::{ArcArray, IxDyn};

use super::Step;
use crate::error::{Error, Result};
use crate::kernels::PAR_THRESHOLD;
use crate::ops::binary::{self, F32Arg};
use crate::ops::{BinaryKind, Op, UnaryKind, unary};
use crate::tensor::{DType, Tensor, TensorType};

/// What a fast step computes.
#[derive(Clone, Copy, Debug)]
enum Kernel {
    Unary(UnaryKind),
    Binary(BinaryKind),
}

/// A step that runs on the fast path (see the module docs).
#[derive(Debug)]
pub(super) struct FastStep {
    kernel: Kernel,
    /// The result's shape.
    shape: Box<[usize]>,
    /// Each operand's fixed shape.
    in_shapes: Box<[Box<[usize]>]>,
    /// Each operand: a single element, broadcast as a scalar (else it has `shape`).
    scalar: [bool; 2],
    /// Bytes of the result.
    bytes: usize,
}

/// The fixed shape of an f32 type, `None` for another dtype or a dynamic dim.
fn f32_fixed(ty: &TensorType) -> Option<Vec<usize>> {
    (ty.dtype == DType::F32).then(|| ty.shape.as_fixed()).flatten()
}

impl FastStep {
    /// The fast form of `step` (its operands' types are `ins`, by slot), if it has one.
    pub(super) fn of(step: &Step, ins: &[Option<&TensorType>]) -> Option<FastStep> {
        if step.fused.is_some() || step.outputs.len() != 1 || step.out_types.len() != 1 {
            return None;
        }
        let kernel = match step.op {
            Op::Unary(k) if step.inputs.len() == 1 && unary::f32_to_f32(k) => Kernel::Unary(k),
            Op::Binary(k) if step.inputs.len() == 2 && binary::f32_fusable(k) => Kernel::Binary(k),
            _ => return None,
        };
        let shape = f32_fixed(&step.out_types[0])?;
        // `None` when the element count overflows (a malformed graph: the generic path errs)
        let len = step.out_types[0].shape.num_elements()?;
        if len == 0 || len >= PAR_THRESHOLD {
            return None;
        }
        let mut in_shapes = Vec::with_capacity(ins.len());
        let mut scalar = [false; 2];
        for (i, ty) in ins.iter().enumerate() {
            let ty = (*ty)?;
            let s = f32_fixed(ty)?;
            scalar[i] = s != shape;
            if scalar[i] && (matches!(kernel, Kernel::Unary(_)) || ty.shape.num_elements() != Some(1)) {
                return None;
            }
            in_shapes.push(s.into_boxed_slice());
        }
        Some(FastStep {
            kernel,
            bytes: len * DType::F32.size(),
            shape: shape.into_boxed_slice(),
            in_shapes: in_shapes.into_boxed_slice(),
            scalar,
        })
    }

    /// Whether a run with memory budget `limit` may take the fast path (the generic one
    /// reports a result over the budget).
    #[inline]
    pub(super) fn fits(&self, limit: Option<usize>) -> bool {
        limit.is_none_or(|l| self.bytes <= l)
    }

    /// Run the step on `slots` (`inputs`: the step's `(slot, released here)` operands),
    /// writing its result into slot `output`: `Ok(true)`, or `Ok(false)` with the slots
    /// untouched when an operand's type or layout needs the generic path.
    #[inline]
    pub(super) fn run(&self, inputs: &[(usize, bool)], output: usize, slots: &mut [Option<Tensor>]) -> Result<bool> {
        for (i, &(s, _)) in inputs.iter().enumerate() {
            match &slots[s] {
                Some(Tensor::F32(a))
                    if a.shape().iter().eq(self.in_shapes[i].iter()) && (self.scalar[i] || a.is_standard_layout()) => {}
                _ => return Ok(false),
            }
        }
        let shared = inputs.len() == 2 && inputs[0].0 == inputs[1].0;
        // the operand written in place: released here, full size, not read twice
        match (0..inputs.len()).find(|&i| inputs[i].1 && !self.scalar[i] && !shared) {
            Some(i) => {
                let s = inputs[i].0;
                let (dst, other) = match inputs.get(1 - i) {
                    Some(&(o, _)) => {
                        let [dst, other] = slots.get_disjoint_mut([s, o]).map_err(|e| gone(&e))?;
                        (dst, Some(&*other))
                    }
                    None => (&mut slots[s], None),
                };
                // copies on write if the buffer is shared after all (a feed the caller holds)
                let Some(Tensor::F32(a)) = dst else { return Err(gone(&"not f32")) };
                let dst = a.as_slice_mut().ok_or_else(|| gone(&"not contiguous"))?;
                self.apply(dst, i, other, shared)?;
                slots[output] = slots[s].take();
            }
            None => {
                // a fresh buffer holding the first full-size operand's values
                let i = (0..inputs.len()).find(|&i| !self.scalar[i]).unwrap_or(0);
                let start = match &slots[inputs[i].0] {
                    Some(Tensor::F32(a)) => a.as_slice().map(<[f32]>::to_vec),
                    _ => None,
                };
                let mut dst = start.ok_or_else(|| gone(&"not contiguous"))?;
                let other = inputs.get(1 - i).map(|&(o, _)| &slots[o]);
                self.apply(&mut dst, i, other, shared)?;
                let t = ArcArray::from_shape_vec(IxDyn(&self.shape), dst)
                    .map_err(|e| Error::Verify(format!("fast step: result of shape {:?}: {e}", self.shape)))?;
                slots[output] = Some(Tensor::F32(t));
            }
        }
        Ok(true)
    }

    /// The kernel on `dst`, which holds operand `i`'s values; `other`: the other operand's
    /// slot (binary steps), `shared`: it is operand `i` itself.
    #[inline]
    fn apply(&self, dst: &mut [f32], i: usize, other: Option<&Option<Tensor>>, shared: bool) -> Result<()> {
        match self.kernel {
            Kernel::Unary(k) => {
                unary::f32_in_place(k, dst);
            }
            Kernel::Binary(k) => {
                let j = 1 - i;
                let other = match other {
                    _ if shared => F32Arg::Dst,
                    Some(Some(Tensor::F32(b))) if self.scalar[j] => F32Arg::Scalar(b.first().copied().unwrap_or(0.0)),
                    Some(Some(Tensor::F32(b))) => F32Arg::Slice(b.as_slice().ok_or_else(|| gone(&"not contiguous"))?),
                    _ => return Err(gone(&"missing")),
                };
                let (a, b) = if i == 0 { (F32Arg::Dst, other) } else { (other, F32Arg::Dst) };
                binary::f32_apply(k, dst, a, b);
            }
        }
        Ok(())
    }
}

/// An operand [`FastStep::run`] checked is not as checked (an executor bug).
#[cold]
fn gone(why: &dyn std::fmt::Debug) -> Error {
    Error::Verify(format!("fast step: an operand checked before the kernel is now {why:?}"))
}
