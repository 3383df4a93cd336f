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
    /// Split `x` along `axis` into `count` equal pieces (TF `split` with a number of splits).
    /// The axis must have a fixed size that `count` divides; otherwise an `Err` names the
    /// axis, its size and the shape.
    pub fn split_count(&mut self, x: ValueId, axis: i64, count: usize) -> Result<Vec<ValueId>> {
        let op = "split";
        let shape = self.shape(x)?;
        let ax = norm_axis(op, axis, shape.rank())?;
        let Some(d) = shape.dim(ax).value() else {
            return Err(Error::shape(
                op,
                format!("splitting into {count} parts needs a fixed size along axis {axis}, got {shape}"),
            ));
        };
        if count == 0 || d % count != 0 {
            return Err(Error::shape(
                op,
                format!("axis {axis} of size {d} in {shape} does not split into {count} equal parts"),
            ));
        }
        self.split(x, axis, &vec![d / count; count])
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
