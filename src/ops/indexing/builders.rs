//! Graph builders of the indexing ops (`Graph::…` methods that check their operands and add
//! one node), kept apart from the op definitions and kernels in the parent module.

use super::*;

impl Graph {
    /// `params` gathered along `axis` (negative counts from the end) at i64 `indices` (any
    /// rank): output `params[:axis] + indices.shape + params[axis+1:]`. Out-of-range or
    /// negative indices are a run-time `IndexOutOfRange`.
    pub fn gather(&mut self, params: ValueId, indices: ValueId, axis: i64) -> Result<ValueId> {
        self.gather_batched(params, indices, axis, 0)
    }

    /// Batched gather: the first `batch_dims` dims of params and indices are equal and
    /// each batch gathers from its own params (`batch_dims <= axis`).
    pub fn gather_batched(
        &mut self,
        params: ValueId,
        indices: ValueId,
        axis: i64,
        batch_dims: usize,
    ) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::Gather { axis, batch_dims }), &[params, indices])
    }

    /// `gather_nd(params, indices[..., K])`: output `indices[:-1] + params[batch_dims+K:]`.
    pub fn gather_nd(&mut self, params: ValueId, indices: ValueId, batch_dims: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::GatherNd { batch_dims }), &[params, indices])
    }

    /// `scatter_nd(indices[..., K], updates)` into zeros of `shape`; duplicate indices add.
    pub fn scatter_nd(&mut self, indices: ValueId, updates: ValueId, shape: &[usize]) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::ScatterNd { shape: shape.to_vec() }), &[indices, updates])
    }

    /// A copy of `tensor` with the slices at `indices[..., K]` replaced by `updates`
    /// (duplicate indices: the last update wins).
    pub fn tensor_scatter_update(&mut self, tensor: ValueId, indices: ValueId, updates: ValueId) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::TensorScatterUpdate), &[tensor, indices, updates])
    }

    /// A copy of `tensor` with `updates` added at `indices[..., K]` (duplicates add).
    pub fn tensor_scatter_add(&mut self, tensor: ValueId, indices: ValueId, updates: ValueId) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::TensorScatterAdd), &[tensor, indices, updates])
    }

    /// Segment sum: rows of `data` summed by `ids` (shape a prefix of data's); output
    /// `[num_segments] + data[ids.rank:]`; negative ids are dropped, ids >= num_segments error.
    pub fn unsorted_segment_sum(&mut self, data: ValueId, ids: ValueId, num_segments: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::UnsortedSegmentSum { num_segments }), &[data, ids])
    }

    /// Segment max (empty segments: `-inf` / `i64::MIN`); see [`Graph::unsorted_segment_sum`].
    pub fn unsorted_segment_max(&mut self, data: ValueId, ids: ValueId, num_segments: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::UnsortedSegmentMax { num_segments }), &[data, ids])
    }

    /// Segment min (empty segments: `+inf` / `i64::MAX`); see [`Graph::unsorted_segment_sum`].
    pub fn unsorted_segment_min(&mut self, data: ValueId, ids: ValueId, num_segments: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::UnsortedSegmentMin { num_segments }), &[data, ids])
    }

    /// Segment product (empty segments: 1); see [`Graph::unsorted_segment_sum`].
    pub fn unsorted_segment_prod(&mut self, data: ValueId, ids: ValueId, num_segments: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::UnsortedSegmentProd { num_segments }), &[data, ids])
    }

    /// `operand` with `update` (same rank) written at the i64 offsets `start[rank]`; a start
    /// where the update does not fit is a run-time `IndexOutOfRange` (no clamping).
    pub fn dynamic_update_slice(&mut self, operand: ValueId, update: ValueId, start: ValueId) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::DynamicUpdateSlice), &[operand, update, start])
    }

    /// The `k` largest elements along the last axis, sorted descending (ties: lower index
    /// first), and their i64 indices; `k` larger than the last dim is a shape error.
    pub fn top_k(&mut self, x: ValueId, k: usize) -> Result<(ValueId, ValueId)> {
        let outs = self.add_op_multi(Op::Index(IndexOp::TopK { k, sorted: true }), &[x])?;
        match outs.as_slice() {
            [v, i] => Ok((*v, *i)),
            _ => Err(Error::arity("top_k", "2 outputs", outs.len())),
        }
    }

    /// i64 `[num_true, rank]` row-major coordinates of the nonzero (true) elements of `x`
    /// (numpy's `nonzero`, TensorFlow's one-argument `where`).
    pub fn nonzero(&mut self, x: ValueId) -> Result<ValueId> {
        self.nonzero_batched(x, 0)
    }

    /// `nonzero` of each element `x[b..]` of the first `batch_dims` dims: i64
    /// `[B.., num_true, rank - batch_dims]`. Every element must have the same number of
    /// nonzero elements (a run-time shape error otherwise: the result would be ragged).
    pub fn nonzero_batched(&mut self, x: ValueId, batch_dims: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::NonZero { batch_dims }), &[x])
    }
}
