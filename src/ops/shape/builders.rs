//! Graph builders of the shape ops (`Graph::…` methods that check their operands and add
//! one node), kept apart from the op definitions and kernels in the parent module.

use super::*;

impl Graph {
    fn shape_op(&mut self, o: ShapeOp, inputs: &[ValueId]) -> Result<ValueId> {
        self.add_op(Op::Shape(o), inputs)
    }
    /// Row-major reshape; one `-1` entry is inferred.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?);
    /// let y = g.reshape(x, &[3, -1])?; // the -1 is inferred: [3, 2]
    /// assert_eq!(g.shape(y)?.as_fixed(), Some(vec![3, 2]));
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn reshape(&mut self, x: ValueId, shape: &[i64]) -> Result<ValueId> {
        self.shape_op(ShapeOp::Reshape { shape: shape.to_vec() }, &[x])
    }
    /// Reshape to the values of `shape` (i64 1-D of fixed length); all output dims dynamic.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?);
    /// let shape = g.input("shape", DType::I64, [2]);
    /// let y = g.reshape_dyn(x, shape)?;
    /// let r = run_once(&g, &[y], &[(shape, Tensor::vec1(&[3i64, 2]))])?;
    /// assert_eq!(r[0].shape(), &[3, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn reshape_dyn(&mut self, x: ValueId, shape: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::ReshapeDyn, &[x, shape])
    }
    /// Permute axes (output axis `i` = input axis `perm[i]`); a strided view, no copy.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?);
    /// let y = g.transpose(x, &[1, 0])?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn transpose(&mut self, x: ValueId, perm: &[usize]) -> Result<ValueId> {
        self.shape_op(ShapeOp::Transpose { perm: perm.to_vec() }, &[x])
    }
    /// Insert a size-1 axis at `axis` (`[-rank-1, rank]`).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [3]);
    /// let (front, back) = (g.expand_dims(x, 0)?, g.expand_dims(x, -1)?);
    /// assert_eq!(g.shape(front)?.as_fixed(), Some(vec![1, 3]));
    /// assert_eq!(g.shape(back)?.as_fixed(), Some(vec![3, 1]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn expand_dims(&mut self, x: ValueId, axis: i64) -> Result<ValueId> {
        self.shape_op(ShapeOp::ExpandDims { axis }, &[x])
    }
    /// Remove size-1 axes: `Some(axes)` removes those (each must be size 1; `Some(&[])`
    /// removes none), `None` removes every FIXED size-1 dim (resolved here to an explicit
    /// list). Returns an `identity` node when there is nothing to remove.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [1, 3, 1]);
    /// let all = g.squeeze(x, None)?; // every size-1 dim
    /// let first = g.squeeze(x, Some(&[0]))?; // only axis 0
    /// assert_eq!(g.shape(all)?.as_fixed(), Some(vec![3]));
    /// assert_eq!(g.shape(first)?.as_fixed(), Some(vec![3, 1]));
    /// assert!(g.squeeze(x, Some(&[1])).is_err()); // axis 1 has size 3
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1.0f32, 2.0, 3.0]));
    /// let y = g.broadcast_to(x, &[2, 3])?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn broadcast_to(&mut self, x: ValueId, shape: &[usize]) -> Result<ValueId> {
        self.shape_op(ShapeOp::BroadcastTo { shape: shape.to_vec() }, &[x])
    }
    /// Numpy broadcast to the shape held by `shape` (i64 1-D of fixed length).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1.0f32, 2.0]));
    /// let shape = g.input("shape", DType::I64, [2]);
    /// let y = g.broadcast_to_dyn(x, shape)?;
    /// let r = run_once(&g, &[y], &[(shape, Tensor::vec1(&[3i64, 2]))])?;
    /// assert_eq!(r[0].shape(), &[3, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn broadcast_to_dyn(&mut self, x: ValueId, shape: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::BroadcastToDyn, &[x, shape])
    }
    /// Repeat `multiples[i]` times along axis `i` (one multiple per axis).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1i64, 2]));
    /// let y = g.tile(x, &[3])?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<i64>()?, [1, 2, 1, 2, 1, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn tile(&mut self, x: ValueId, multiples: &[usize]) -> Result<ValueId> {
        self.shape_op(ShapeOp::Tile { multiples: multiples.to_vec() }, &[x])
    }
    /// A tensor of `shape` filled with the scalar `value`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let v = g.constant(Tensor::scalar(7.0f32));
    /// let y = g.fill(&[2, 2], v)?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [7.0; 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn fill(&mut self, shape: &[usize], value: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Fill { shape: shape.to_vec() }, &[value])
    }
    /// A tensor of the shape held by `shape` (i64 1-D of fixed length) filled with `value`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let shape = g.input("shape", DType::I64, [1]);
    /// let v = g.constant(Tensor::scalar(true));
    /// let y = g.fill_dyn(shape, v)?;
    /// let r = run_once(&g, &[y], &[(shape, Tensor::vec1(&[3i64]))])?;
    /// assert_eq!(r[0].to_vec::<bool>()?, [true; 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn fill_dyn(&mut self, shape: ValueId, value: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::FillDyn, &[shape, value])
    }
    /// Zeros of `x`'s type.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1.5f64, -2.0]));
    /// let z = g.zeros_like(x)?;
    /// assert_eq!(run_once(&g, &[z], &[])?[0].to_vec::<f64>()?, [0.0, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn zeros_like(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::ZerosLike, &[x])
    }
    /// Ones (`true` for bool) of `x`'s type.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[4i64, 5, 6]));
    /// let o = g.ones_like(x)?;
    /// assert_eq!(run_once(&g, &[o], &[])?[0].to_vec::<i64>()?, [1, 1, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn ones_like(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::OnesLike, &[x])
    }
    /// The shape of `x` as i64 `[rank]`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::fixed(3)]);
    /// let s = g.shape_of(x)?; // known when it runs
    /// let r = run_once(&g, &[s], &[(x, Tensor::zeros(DType::F32, &[5, 3])?)])?;
    /// assert_eq!(r[0].to_vec::<i64>()?, [5, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn shape_of(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::ShapeOf, &[x])
    }
    /// The element count of `x` as an i64 scalar.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 3]);
    /// let n = g.size_of(x)?;
    /// let r = run_once(&g, &[n], &[(x, Tensor::zeros(DType::F32, &[2, 3])?)])?;
    /// assert_eq!(r[0].scalar_i64()?, 6);
    /// # Ok(())
    /// # }
    /// ```
    pub fn size_of(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Size, &[x])
    }
    /// The rank of `x` as an i64 scalar.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 3]);
    /// let r = g.rank_of(x)?;
    /// assert_eq!(run_once(&g, &[r], &[(x, Tensor::zeros(DType::F32, &[2, 3])?)])?[0].scalar_i64()?, 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn rank_of(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Rank, &[x])
    }
    /// `x` unchanged.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2]);
    /// let y = g.identity(x)?; // a new value, equal to x
    /// let r = run_once(&g, &[y], &[(x, Tensor::vec1(&[1.0f32, 2.0]))])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [1.0, 2.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn identity(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Identity, &[x])
    }
    /// A size bound over pfor iterations: `x` (i64, values `>= 0`) itself outside pfor; inside
    /// pfor, its element-wise maximum over the iterations (loop-invariant; 0 for none).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let lens = g.constant(Tensor::vec1(&[2i64, 5, 3]));
    /// // inside pfor: the longest length over the iterations, the same in each of them
    /// let out = pfor(&mut g, 3, |g, i| {
    ///     let len = g.gather(lens, i, 0)?;
    ///     Ok(vec![g.loop_max(len)?])
    /// })?;
    /// assert_eq!(run_once(&g, &out, &[])?[0].to_vec::<i64>()?, [5, 5, 5]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn loop_max(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::LoopMax, &[x])
    }
    /// `x` unchanged, checked to have `like`'s shape: at build time where both dims are
    /// fixed, at run time otherwise (`Error::Shape`).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 3]);
    /// let like = g.input("like", DType::F32, [2, 3]);
    /// let other = g.input("other", DType::F32, [3, 2]);
    /// assert!(g.match_shape(x, like).is_ok());
    /// assert!(g.match_shape(x, other).is_err()); // fixed dims that differ: caught when built
    /// # Ok(())
    /// # }
    /// ```
    pub fn match_shape(&mut self, x: ValueId, like: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::MatchShape { x_lead: 0, like_lead: 0 }, &[x, like])
    }
    /// `x` unchanged; gradients do not flow through it.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F64, Shape::scalar());
    /// let c = g.stop_gradient(x)?;
    /// let y = g.mul(x, c)?; // d/dx (x · const) = const, not 2x
    /// let dx = gradients(&mut g, &[y], &[x], None)?;
    /// assert_eq!(run_once(&g, &dx, &[(x, Tensor::scalar(3.0f64))])?[0].scalar_f64()?, 3.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn stop_gradient(&mut self, x: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::StopGradient, &[x])
    }
    /// One-hot encoding of i64 `indices` along a new axis `axis` (`-1` = last) of size
    /// `depth`; out-of-range indices give all-`off` rows.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let labels = g.constant(Tensor::vec1(&[0i64, 2]));
    /// let y = g.one_hot(labels, 3, -1, 1.0, 0.0, DType::F32)?;
    /// let r = run_once(&g, &[y], &[])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let start = g.constant(Tensor::scalar(0i64));
    /// let limit = g.constant(Tensor::scalar(7i64));
    /// let delta = g.constant(Tensor::scalar(2i64));
    /// let r = g.range(start, limit, delta)?;
    /// assert_eq!(run_once(&g, &[r], &[])?[0].to_vec::<i64>()?, [0, 2, 4, 6]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn range(&mut self, start: ValueId, limit: ValueId, delta: ValueId) -> Result<ValueId> {
        self.shape_op(ShapeOp::Range, &[start, limit, delta])
    }
    /// Stack values of one type along a new axis.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::vec1(&[1.0f32, 2.0]));
    /// let b = g.constant(Tensor::vec1(&[3.0f32, 4.0]));
    /// let rows = g.stack(&[a, b], 0)?; // [2, 2]
    /// let cols = g.stack(&[a, b], 1)?;
    /// let r = run_once(&g, &[rows, cols], &[])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0]);
    /// assert_eq!(r[1].to_vec::<f32>()?, [1.0, 3.0, 2.0, 4.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn stack(&mut self, xs: &[ValueId], axis: i64) -> Result<ValueId> {
        self.shape_op(ShapeOp::Stack { axis }, xs)
    }
    /// Split `x` along `axis` (which must have a fixed size) into that many values.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?);
    /// let rows = g.unstack(x, 0)?; // two values of shape [3]
    /// let r = run_once(&g, &rows, &[])?;
    /// assert_eq!(r[1].to_vec::<f32>()?, [4.0, 5.0, 6.0]);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let z = g.zeros(DType::F32, &[2, 3])?;
    /// assert_eq!(run_once(&g, &[z], &[])?[0], Tensor::zeros(DType::F32, &[2, 3])?);
    /// assert!(g.zeros(DType::F32, &[usize::MAX, 2]).is_err()); // too many elements
    /// # Ok(())
    /// # }
    /// ```
    pub fn zeros(&mut self, dtype: DType, shape: &[usize]) -> Result<ValueId> {
        Ok(self.constant(Tensor::zeros(dtype, shape)?))
    }
    /// A constant of ones (`true` for bool); errors as [`Graph::zeros`].
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let o = g.ones(DType::Bool, &[2])?;
    /// assert_eq!(run_once(&g, &[o], &[])?[0].to_vec::<bool>()?, [true, true]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn ones(&mut self, dtype: DType, shape: &[usize]) -> Result<ValueId> {
        Ok(self.constant(Tensor::ones(dtype, shape)?))
    }
}
