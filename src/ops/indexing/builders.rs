//! Graph builders of the indexing ops (`Graph::…` methods that check their operands and add
//! one node), kept apart from the op definitions and kernels in the parent module.

use super::*;

impl Graph {
    /// `params` gathered along `axis` (negative counts from the end) at i64 `indices` (any
    /// rank): output `params[:axis] + indices.shape + params[axis+1:]`. Out-of-range or
    /// negative indices are a run-time `IndexOutOfRange`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let p = g.constant(Tensor::from_vec(&[3, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?);
    /// let idx = g.constant(Tensor::vec1(&[2i64, 0]));
    /// let rows = g.gather(p, idx, 0)?;  // rows 2 and 0
    /// let cols = g.gather(p, idx, -1)?; // out of range on the last axis (size 2): a run-time error
    /// assert_eq!(run_once(&g, &[rows], &[])?[0].to_vec::<f32>()?, [5.0, 6.0, 1.0, 2.0]);
    /// assert!(run_once(&g, &[cols], &[]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn gather(&mut self, params: ValueId, indices: ValueId, axis: i64) -> Result<ValueId> {
        self.gather_batched(params, indices, axis, 0)
    }

    /// Batched gather: the first `batch_dims` dims of params and indices are equal and
    /// each batch gathers from its own params (`batch_dims <= axis`).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// // two batches, each gathering from its own row
    /// let params = g.constant(Tensor::from_vec(&[2, 3], vec![10i64, 11, 12, 20, 21, 22])?);
    /// let idx = g.constant(Tensor::from_vec(&[2, 1], vec![2i64, 0])?);
    /// let y = g.gather_batched(params, idx, 1, 1)?; // [2, 1]
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<i64>()?, [12, 20]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let p = g.constant(Tensor::from_vec(&[2, 2], vec![1i64, 2, 3, 4])?);
    /// let idx = g.constant(Tensor::from_vec(&[2, 2], vec![0i64, 1, 1, 0])?); // (0,1) and (1,0)
    /// let v = g.gather_nd(p, idx, 0)?;
    /// assert_eq!(run_once(&g, &[v], &[])?[0].to_vec::<i64>()?, [2, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn gather_nd(&mut self, params: ValueId, indices: ValueId, batch_dims: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::GatherNd { batch_dims }), &[params, indices])
    }

    /// `scatter_nd(indices[..., K], updates)` into zeros of `shape`; duplicate indices add.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let idx = g.constant(Tensor::from_vec(&[3, 1], vec![0i64, 2, 0])?);
    /// let up = g.constant(Tensor::vec1(&[1.0f64, 2.0, 3.0]));
    /// let s = g.scatter_nd(idx, up, &[4])?; // index 0 twice: 1 + 3
    /// assert_eq!(run_once(&g, &[s], &[])?[0].to_f64_vec(), [4.0, 0.0, 2.0, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn scatter_nd(&mut self, indices: ValueId, updates: ValueId, shape: &[usize]) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::ScatterNd { shape: shape.to_vec() }), &[indices, updates])
    }

    /// A copy of `tensor` with the slices at `indices[..., K]` replaced by `updates`
    /// (duplicate indices: the last update wins).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = g.constant(Tensor::vec1(&[1i64, 1, 1]));
    /// let idx = g.constant(Tensor::from_vec(&[1, 1], vec![1i64])?);
    /// let up = g.constant(Tensor::vec1(&[9i64]));
    /// let s = g.tensor_scatter_update(t, idx, up)?;
    /// assert_eq!(run_once(&g, &[s], &[])?[0].to_vec::<i64>()?, [1, 9, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn tensor_scatter_update(&mut self, tensor: ValueId, indices: ValueId, updates: ValueId) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::TensorScatterUpdate), &[tensor, indices, updates])
    }

    /// A copy of `tensor` with `updates` added at `indices[..., K]` (duplicates add).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let t = g.constant(Tensor::vec1(&[1i64, 1, 1]));
    /// let idx = g.constant(Tensor::from_vec(&[2, 1], vec![1i64, 1])?);
    /// let up = g.constant(Tensor::vec1(&[5i64, 5]));
    /// let s = g.tensor_scatter_add(t, idx, up)?;
    /// assert_eq!(run_once(&g, &[s], &[])?[0].to_vec::<i64>()?, [1, 11, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn tensor_scatter_add(&mut self, tensor: ValueId, indices: ValueId, updates: ValueId) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::TensorScatterAdd), &[tensor, indices, updates])
    }

    /// Segment sum: rows of `data` summed by `ids` (shape a prefix of data's); output
    /// `[num_segments] + data[ids.rank:]`; negative ids are dropped, ids >= num_segments error.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let d = g.constant(Tensor::vec1(&[1.0f64, 2.0, 3.0, 4.0]));
    /// let ids = g.constant(Tensor::vec1(&[0i64, 1, 0, -1])); // -1: dropped
    /// let s = g.unsorted_segment_sum(d, ids, 2)?;
    /// assert_eq!(run_once(&g, &[s], &[])?[0].to_f64_vec(), [4.0, 2.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn unsorted_segment_sum(&mut self, data: ValueId, ids: ValueId, num_segments: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::UnsortedSegmentSum { num_segments }), &[data, ids])
    }

    /// Segment max (empty segments: `-inf` / `i64::MIN`); see [`Graph::unsorted_segment_sum`].
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let d = g.constant(Tensor::vec1(&[1.0f64, 5.0, 3.0]));
    /// let ids = g.constant(Tensor::vec1(&[0i64, 0, 2]));
    /// let s = g.unsorted_segment_max(d, ids, 3)?;
    /// assert_eq!(run_once(&g, &[s], &[])?[0].to_f64_vec(), [5.0, f64::NEG_INFINITY, 3.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn unsorted_segment_max(&mut self, data: ValueId, ids: ValueId, num_segments: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::UnsortedSegmentMax { num_segments }), &[data, ids])
    }

    /// Segment min (empty segments: `+inf` / `i64::MAX`); see [`Graph::unsorted_segment_sum`].
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let d = g.constant(Tensor::vec1(&[4i64, 2, 3]));
    /// let ids = g.constant(Tensor::vec1(&[0i64, 0, 1]));
    /// let s = g.unsorted_segment_min(d, ids, 2)?;
    /// assert_eq!(run_once(&g, &[s], &[])?[0].to_vec::<i64>()?, [2, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn unsorted_segment_min(&mut self, data: ValueId, ids: ValueId, num_segments: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::UnsortedSegmentMin { num_segments }), &[data, ids])
    }

    /// Segment product (empty segments: 1); see [`Graph::unsorted_segment_sum`].
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let d = g.constant(Tensor::vec1(&[2.0f64, 3.0, 4.0]));
    /// let ids = g.constant(Tensor::vec1(&[0i64, 0, 1]));
    /// let s = g.unsorted_segment_prod(d, ids, 3)?;
    /// assert_eq!(run_once(&g, &[s], &[])?[0].to_f64_vec(), [6.0, 4.0, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn unsorted_segment_prod(&mut self, data: ValueId, ids: ValueId, num_segments: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::UnsortedSegmentProd { num_segments }), &[data, ids])
    }

    /// `operand` with `update` (same rank) written at the i64 offsets `start[rank]`; a start
    /// where the update does not fit is a run-time `IndexOutOfRange` (no clamping).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[0i64; 5]));
    /// let u = g.constant(Tensor::vec1(&[7i64, 8]));
    /// let at = g.input("at", DType::I64, [1]);
    /// let y = g.dynamic_update_slice(x, u, at)?;
    /// assert_eq!(run_once(&g, &[y], &[(at, Tensor::vec1(&[2i64]))])?[0].to_vec::<i64>()?, [0, 0, 7, 8, 0]);
    /// assert!(run_once(&g, &[y], &[(at, Tensor::vec1(&[4i64]))]).is_err()); // does not fit
    /// # Ok(())
    /// # }
    /// ```
    pub fn dynamic_update_slice(&mut self, operand: ValueId, update: ValueId, start: ValueId) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::DynamicUpdateSlice), &[operand, update, start])
    }

    /// The `k` largest elements along the last axis, sorted descending (ties: lower index
    /// first), and their i64 indices; `k` larger than the last dim is a shape error.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[3.0f32, 9.0, 1.0, 9.0]));
    /// let (v, i) = g.top_k(x, 2)?;
    /// let r = run_once(&g, &[v, i], &[])?;
    /// assert_eq!((r[0].to_vec::<f32>()?, r[1].to_vec::<i64>()?), (vec![9.0, 9.0], vec![1, 3]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn top_k(&mut self, x: ValueId, k: usize) -> Result<(ValueId, ValueId)> {
        let outs = self.add_op_multi(Op::Index(IndexOp::TopK { k, sorted: true }), &[x])?;
        match outs.as_slice() {
            [v, i] => Ok((*v, *i)),
            _ => Err(Error::arity("top_k", "2 outputs", outs.len())),
        }
    }

    /// i64 `[num_true, rank]` row-major coordinates of the nonzero (true) elements of `x`
    /// (numpy's `nonzero`, TensorFlow's one-argument `where`).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 2], vec![0i64, 5, 7, 0])?);
    /// let nz = g.nonzero(x)?;
    /// assert_eq!(run_once(&g, &[nz], &[])?[0].to_vec::<i64>()?, [0, 1, 1, 0]); // (0,1), (1,0)
    /// # Ok(())
    /// # }
    /// ```
    pub fn nonzero(&mut self, x: ValueId) -> Result<ValueId> {
        self.nonzero_batched(x, 0)
    }

    /// `nonzero` of each element `x[b..]` of the first `batch_dims` dims: i64
    /// `[B.., num_true, rank - batch_dims]`. Every element must have the same number of
    /// nonzero elements (a run-time shape error otherwise: the result would be ragged).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 3], vec![true, false, false, false, false, true])?);
    /// let nz = g.nonzero_batched(x, 1)?; // one true per row: [2, 1, 1]
    /// assert_eq!(run_once(&g, &[nz], &[])?[0].to_vec::<i64>()?, [0, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn nonzero_batched(&mut self, x: ValueId, batch_dims: usize) -> Result<ValueId> {
        self.add_op(Op::Index(IndexOp::NonZero { batch_dims }), &[x])
    }
}
