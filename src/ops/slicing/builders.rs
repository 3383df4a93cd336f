//! Graph builders of the slicing ops (`Graph::…` methods that check their operands and add
//! one node), kept apart from the op definitions and kernels in the parent module.

use super::*;

impl Graph {
    /// Join `xs` (one dtype and rank, other dims equal) along `axis`.
    ///
    /// ```
    /// use pfor::ops::slicing::{PadMode, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::from_vec(&[1, 2], vec![1.0f32, 2.0])?);
    /// let b = g.constant(Tensor::from_vec(&[2, 2], vec![3.0f32, 4.0, 5.0, 6.0])?);
    /// let c = g.concat(&[a, b], 0)?; // [3, 2]
    /// assert_eq!(run_once(&g, &[c], &[])?[0].to_vec::<f32>()?, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn concat(&mut self, xs: &[ValueId], axis: i64) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Concat { axis }), xs)
    }
    /// Split `x` along `axis` into pieces of `sizes` (summing to the axis size).
    ///
    /// ```
    /// use pfor::ops::slicing::{PadMode, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1i64, 2, 3, 4, 5]));
    /// let parts = g.split(x, 0, &[2, 3])?;
    /// let r = run_once(&g, &parts, &[])?;
    /// assert_eq!((r[0].to_vec::<i64>()?, r[1].to_vec::<i64>()?), (vec![1, 2], vec![3, 4, 5]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn split(&mut self, x: ValueId, axis: i64, sizes: &[usize]) -> Result<Vec<ValueId>> {
        self.add_op_multi(Op::Slicing(SlicingOp::Split { axis, sizes: sizes.to_vec() }), &[x])
    }
    /// Split `x` along `axis` into `count` equal pieces (TF `split` with a number of splits).
    /// The axis must have a fixed size that `count` divides; otherwise an `Err` names the
    /// axis, its size and the shape.
    ///
    /// ```
    /// use pfor::ops::slicing::{PadMode, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 6]);
    /// let thirds = g.split_count(x, -1, 3)?; // three [2, 2] pieces
    /// assert_eq!(g.shape(thirds[2])?.as_fixed(), Some(vec![2, 2]));
    /// let e = g.split_count(x, 1, 4).unwrap_err();
    /// assert!(e.to_string().contains("does not split into 4 equal parts"));
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// ```
    /// use pfor::ops::slicing::{PadMode, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?);
    /// let y = g.slice(x, &[0, 1], &[-1, 2])?; // all rows, columns 1..3
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [2.0, 3.0, 5.0, 6.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn slice(&mut self, x: ValueId, begin: &[i64], size: &[i64]) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Slice { begin: begin.to_vec(), size: size.to_vec() }), &[x])
    }
    /// Slice of `sizes` at the run-time i64 vector `begin` (out of range is an error, no clamping).
    ///
    /// ```
    /// use pfor::ops::slicing::{PadMode, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[10i64, 11, 12, 13]));
    /// let begin = g.input("begin", DType::I64, [1]);
    /// let y = g.dynamic_slice(x, begin, &[2])?;
    /// let r = run_once(&g, &[y], &[(begin, Tensor::vec1(&[1i64]))])?;
    /// assert_eq!(r[0].to_vec::<i64>()?, [11, 12]);
    /// // out of range is an error, not a clamped slice
    /// assert!(run_once(&g, &[y], &[(begin, Tensor::vec1(&[3i64]))]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn dynamic_slice(&mut self, x: ValueId, begin: ValueId, sizes: &[usize]) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::DynamicSlice { sizes: sizes.to_vec() }), &[x, begin])
    }
    /// TF/numpy strided slice (see [`StridedSliceSpec`]).
    ///
    /// ```
    /// use pfor::ops::slicing::{PadMode, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[0i64, 1, 2, 3, 4, 5]));
    /// // x[::-2] (numpy): begin and end ignored through the masks
    /// let spec = StridedSliceSpec::new(&[0], &[0], &[-2]).with_begin_mask(1).with_end_mask(1);
    /// let y = g.strided_slice(x, &spec)?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<i64>()?, [5, 3, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn strided_slice(&mut self, x: ValueId, spec: &StridedSliceSpec) -> Result<ValueId> {
        self.add_op(Op::Slicing(spec.to_op()), &[x])
    }
    /// Pad each axis by `(before, after)` elements filled per `mode`.
    ///
    /// ```
    /// use pfor::ops::slicing::{PadMode, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1.0f32, 2.0, 3.0]));
    /// let zeros = g.pad(x, &[(1, 2)], PadMode::Constant(0.0))?;
    /// let mirror = g.pad(x, &[(2, 2)], PadMode::Reflect)?;
    /// let r = run_once(&g, &[zeros, mirror], &[])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [0.0, 1.0, 2.0, 3.0, 0.0, 0.0]);
    /// assert_eq!(r[1].to_vec::<f32>()?, [3.0, 2.0, 1.0, 2.0, 3.0, 2.0, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn pad(&mut self, x: ValueId, paddings: &[(usize, usize)], mode: PadMode) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Pad { paddings: paddings.to_vec(), mode }), &[x])
    }
    /// Reverse `x` along `axes`.
    ///
    /// ```
    /// use pfor::ops::slicing::{PadMode, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 2], vec![1i64, 2, 3, 4])?);
    /// let y = g.reverse(x, &[-1])?; // each row reversed
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<i64>()?, [2, 1, 4, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn reverse(&mut self, x: ValueId, axes: &[i64]) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Reverse { axes: axes.to_vec() }), &[x])
    }
    /// Rotate `x` along `axes` by the i64 `shift` (vector, or scalar for one axis).
    ///
    /// ```
    /// use pfor::ops::slicing::{PadMode, StridedSliceSpec};
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1i64, 2, 3, 4]));
    /// let shift = g.constant(Tensor::scalar(1i64));
    /// let y = g.roll(x, shift, &[0])?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<i64>()?, [4, 1, 2, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn roll(&mut self, x: ValueId, shift: ValueId, axes: &[i64]) -> Result<ValueId> {
        self.add_op(Op::Slicing(SlicingOp::Roll { axes: axes.to_vec() }), &[x, shift])
    }
}
