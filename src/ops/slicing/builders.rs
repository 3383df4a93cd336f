//! Graph builders of the slicing ops (`Graph::…` methods that check their operands and add
//! one node), kept apart from the op definitions and kernels in the parent module.

use super::*;

impl Graph {
    /// Join `xs` (one dtype and rank, other dims equal) along `axis`.
    pub fn concat(&mut self, xs: &[ValueId], axis: i64) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Concat { axis }), xs)
    }
    /// Split `x` along `axis` into pieces of `sizes` (summing to the axis size).
    pub fn split(&mut self, x: ValueId, axis: i64, sizes: &[usize]) -> Result<Vec<ValueId>> {
        self.add_op_multi(Op::Slicing(SlicingOp::Split { axis, sizes: sizes.to_vec() }), &[x])
    }
    /// `x[begin_i .. begin_i + size_i]` per axis (`size_i == -1`: to the end).
    pub fn slice(&mut self, x: ValueId, begin: &[i64], size: &[i64]) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Slice { begin: begin.to_vec(), size: size.to_vec() }), &[x])
    }
    /// Slice of `sizes` at the run-time i64 vector `begin` (out of range is an error, no clamping).
    pub fn dynamic_slice(&mut self, x: ValueId, begin: ValueId, sizes: &[usize]) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::DynamicSlice { sizes: sizes.to_vec() }), &[x, begin])
    }
    /// TF/numpy strided slice (see [`StridedSliceSpec`]).
    pub fn strided_slice(&mut self, x: ValueId, spec: &StridedSliceSpec) -> Result<ValueId> {
        self.add_op(Op::Slicing(spec.to_op()), &[x])
    }
    /// Pad each axis by `(before, after)` elements filled per `mode`.
    pub fn pad(&mut self, x: ValueId, paddings: &[(usize, usize)], mode: PadMode) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Pad { paddings: paddings.to_vec(), mode }), &[x])
    }
    /// Reverse `x` along `axes`.
    pub fn reverse(&mut self, x: ValueId, axes: &[i64]) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Reverse { axes: axes.to_vec() }), &[x])
    }
    /// Rotate `x` along `axes` by the i64 `shift` (vector, or scalar for one axis).
    pub fn roll(&mut self, x: ValueId, shift: ValueId, axes: &[i64]) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Roll { axes: axes.to_vec() }), &[x, shift])
    }
}
