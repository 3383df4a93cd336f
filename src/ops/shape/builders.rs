//! Graph builders of the shape ops (`Graph::…` methods that check their operands and add
//! one node), kept apart from the op definitions and kernels in the parent module.

use super::*;

impl Graph {
    fn shape_op(&mut self, o: ShapeOp, inputs: &[ValueId]) -> Result<ValueId> {
        self.add_op(Op::Shape(o), inputs)
    }
    /// Row-major reshape; one `-1` entry is inferred.
    pub fn reshape(&mut self, x: ValueId, shape: &[i64]) -> Result<ValueId> {
        self.shape_op(ShapeOp::Reshape { shape: shape.to_vec() }, &[x])
    }
    /// Reshape to the values of `shape` (i64 1-D of fixed length); all output dims dynamic.
    pub fn reshape_dyn(&mut self, x: ValueId, shape: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::ReshapeDyn, &[x, shape])
    }
    /// Permute axes (output axis `i` = input axis `perm[i]`); a strided view, no copy.
    pub fn transpose(&mut self, x: ValueId, perm: &[usize]) -> Result<ValueId> {
        self.shape_op(ShapeOp::Transpose { perm: perm.to_vec() }, &[x])
    }
    /// Insert a size-1 axis at `axis` (`[-rank-1, rank]`).
    pub fn expand_dims(&mut self, x: ValueId, axis: i64) -> Result<ValueId> {
        self.shape_op(ShapeOp::ExpandDims { axis }, &[x])
    }
    /// Remove size-1 axes: `Some(axes)` removes those (each must be size 1; `Some(&[])`
    /// removes none), `None` removes every FIXED size-1 dim (resolved here to an explicit
    /// list). Returns an `identity` node when there is nothing to remove.
    pub fn squeeze(&mut self, x: ValueId, axes: Option<&[i64]>) -> Result<ValueId> {
        let axes: Vec<i64> = match axes {
            Some(a) => a.to_vec(),
            None => {
                let s = self.shape(x)?;
                (0..s.rank()).filter(|&i| s.dim(i) == &Dim::Fixed(1)).map(|i| i as i64).collect()
            }
        };
        if axes.is_empty() {
            return self.identity(x);
        }
        self.shape_op(ShapeOp::Squeeze { axes }, &[x])
    }
    /// Numpy broadcast to a fixed shape.
    pub fn broadcast_to(&mut self, x: ValueId, shape: &[usize]) -> Result<ValueId> {
        self.shape_op(ShapeOp::BroadcastTo { shape: shape.to_vec() }, &[x])
    }
    /// Numpy broadcast to the shape held by `shape` (i64 1-D of fixed length).
    pub fn broadcast_to_dyn(&mut self, x: ValueId, shape: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::BroadcastToDyn, &[x, shape])
    }
    /// Repeat `multiples[i]` times along axis `i` (one multiple per axis).
    pub fn tile(&mut self, x: ValueId, multiples: &[usize]) -> Result<ValueId> {
        self.shape_op(ShapeOp::Tile { multiples: multiples.to_vec() }, &[x])
    }
    /// A tensor of `shape` filled with the scalar `value`.
    pub fn fill(&mut self, shape: &[usize], value: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Fill { shape: shape.to_vec() }, &[value])
    }
    /// A tensor of the shape held by `shape` (i64 1-D of fixed length) filled with `value`.
    pub fn fill_dyn(&mut self, shape: ValueId, value: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::FillDyn, &[shape, value])
    }
    /// Zeros of `x`'s type.
    pub fn zeros_like(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::ZerosLike, &[x])
    }
    /// Ones (`true` for bool) of `x`'s type.
    pub fn ones_like(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::OnesLike, &[x])
    }
    /// The shape of `x` as i64 `[rank]`.
    pub fn shape_of(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::ShapeOf, &[x])
    }
    /// The element count of `x` as an i64 scalar.
    pub fn size_of(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Size, &[x])
    }
    /// The rank of `x` as an i64 scalar.
    pub fn rank_of(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Rank, &[x])
    }
    /// `x` unchanged.
    pub fn identity(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Identity, &[x])
    }
    /// A size bound over pfor iterations: `x` (i64, values `>= 0`) itself outside pfor; inside
    /// pfor, its element-wise maximum over the iterations (loop-invariant; 0 for none).
    pub fn loop_max(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::LoopMax, &[x])
    }
    /// `x` unchanged, checked to have `like`'s shape: at build time where both dims are
    /// fixed, at run time otherwise (`Error::Shape`).
    pub fn match_shape(&mut self, x: ValueId, like: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::MatchShape { x_lead: 0, like_lead: 0 }, &[x, like])
    }
    /// `x` unchanged; gradients do not flow through it.
    pub fn stop_gradient(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::StopGradient, &[x])
    }
    /// One-hot encoding of i64 `indices` along a new axis `axis` (`-1` = last) of size
    /// `depth`; out-of-range indices give all-`off` rows.
    pub fn one_hot(
        &mut self,
        indices: ValueId,
        depth: usize,
        axis: i64,
        on: f64,
        off: f64,
        dtype: DType,
    ) -> Result<ValueId> {
        self.shape_op(ShapeOp::OneHot { depth, axis, on, off, dtype }, &[indices])
    }
    /// `[start, start+delta, ...)` up to `limit` (exclusive); scalars of one numeric dtype.
    pub fn range(&mut self, start: ValueId, limit: ValueId, delta: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Range, &[start, limit, delta])
    }
    /// Stack values of one type along a new axis.
    pub fn stack(&mut self, xs: &[ValueId], axis: i64) -> Result<ValueId> {
        self.shape_op(ShapeOp::Stack { axis }, xs)
    }
    /// Split `x` along `axis` (which must have a fixed size) into that many values.
    pub fn unstack(&mut self, x: ValueId, axis: i64) -> Result<Vec<ValueId>> {
        let s = self.shape(x)?;
        let ax = norm_axis("unstack", axis, s.rank())?;
        let num = s.dim(ax).value().ok_or_else(|| {
            Error::shape("unstack", format!("axis {axis} of {s} is dynamic; unstack needs a fixed size"))
        })?;
        self.add_op_multi(Op::Shape(ShapeOp::Unstack { axis, num }), &[x])
    }
    /// A constant of zeros (an `Err` when the shape's element count overflows or the
    /// memory cannot be allocated).
    pub fn zeros(&mut self, dtype: DType, shape: &[usize]) -> Result<ValueId> {
        Ok(self.constant(Tensor::zeros(dtype, shape)?))
    }
    /// A constant of ones (`true` for bool); errors as [`Graph::zeros`].
    pub fn ones(&mut self, dtype: DType, shape: &[usize]) -> Result<ValueId> {
        Ok(self.constant(Tensor::ones(dtype, shape)?))
    }
}
