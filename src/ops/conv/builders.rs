//! Graph builders of the conv family (one per [`ConvOp`] variant).

use super::{Conv2dParams, ConvOp, Padding};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::Op;

impl Graph {
    /// 2-D convolution (cross-correlation, as in TF): `x [N,H,W,C]`, `filter [KH,KW,C,O]`
    /// → `[N,OH,OW,O]`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::ones(DType::F32, &[1, 3, 3, 1])?); // NHWC
    /// let w = g.constant(Tensor::ones(DType::F32, &[2, 2, 1, 1])?); // [KH, KW, C, O]
    /// let valid = g.conv2d(x, w, Conv2dParams::default())?;
    /// let same = g.conv2d(x, w, Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() })?;
    /// assert_eq!(g.shape(same)?.as_fixed(), Some(vec![1, 3, 3, 1]));
    /// assert_eq!(run_once(&g, &[valid], &[])?[0].to_vec::<f32>()?, [4.0; 4]); // [1, 2, 2, 1]
    /// # Ok(())
    /// # }
    /// ```
    pub fn conv2d(&mut self, x: ValueId, filter: ValueId, params: Conv2dParams) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::Conv2D { params }), &[x, filter])
    }
    /// Gradient of [`Graph::conv2d`] w.r.t. its input: `filter [KH,KW,C,O]`,
    /// `dy [N,OH,OW,O]` → `[N,H,W,C]` with `[H,W] = input_hw`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let w = g.constant(Tensor::ones(DType::F32, &[2, 2, 1, 1])?);
    /// let dy = g.constant(Tensor::ones(DType::F32, &[1, 2, 2, 1])?);
    /// let dx = g.conv2d_backprop_input(w, dy, Conv2dParams::default(), [3, 3])?;
    /// // how many 2x2 windows cover each input pixel
    /// let want = [1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0];
    /// assert_eq!(run_once(&g, &[dx], &[])?[0].to_vec::<f32>()?, want);
    /// # Ok(())
    /// # }
    /// ```
    pub fn conv2d_backprop_input(
        &mut self,
        filter: ValueId,
        dy: ValueId,
        params: Conv2dParams,
        input_hw: [usize; 2],
    ) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::Conv2DBackpropInput { params, input_hw }), &[filter, dy])
    }
    /// Gradient of [`Graph::conv2d`] w.r.t. its filter: `x [N,H,W,C]`, `dy [N,OH,OW,O]`
    /// → `[KH,KW,C,O]` with `[KH,KW] = filter_hw`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::ones(DType::F32, &[1, 3, 3, 1])?);
    /// let dy = g.constant(Tensor::ones(DType::F32, &[1, 2, 2, 1])?);
    /// let dw = g.conv2d_backprop_filter(x, dy, Conv2dParams::default(), [2, 2])?;
    /// assert_eq!(run_once(&g, &[dw], &[])?[0].to_vec::<f32>()?, [4.0; 4]); // [2, 2, 1, 1]
    /// # Ok(())
    /// # }
    /// ```
    pub fn conv2d_backprop_filter(
        &mut self,
        x: ValueId,
        dy: ValueId,
        params: Conv2dParams,
        filter_hw: [usize; 2],
    ) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::Conv2DBackpropFilter { params, filter_hw }), &[x, dy])
    }
    /// Depthwise 2-D convolution: `x [N,H,W,C]`, `filter [KH,KW,C,M]` → `[N,OH,OW,C*M]`
    /// (output channel `c*M + m`).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::ones(DType::F32, &[1, 2, 2, 2])?);
    /// // a 1x1 filter per channel, multiplier 1: channel 0 times 2, channel 1 times 3
    /// let w = g.constant(Tensor::from_vec(&[1, 1, 2, 1], vec![2.0f32, 3.0])?);
    /// let y = g.depthwise_conv2d(x, w, Conv2dParams::default())?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn depthwise_conv2d(&mut self, x: ValueId, filter: ValueId, params: Conv2dParams) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::DepthwiseConv2D { params }), &[x, filter])
    }
    /// Gradient of [`Graph::depthwise_conv2d`] w.r.t. its input: `filter [KH,KW,C,M]`,
    /// `dy [N,OH,OW,C*M]` → `[N,H,W,C]` with `[H,W] = input_hw`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let w = g.input("w", DType::F32, [3, 3, 4, 2]); // 4 channels, multiplier 2
    /// let dy = g.input("dy", DType::F32, [1, 6, 6, 8]);
    /// let dx = g.depthwise_conv2d_backprop_input(w, dy, Conv2dParams::default(), [8, 8])?;
    /// assert_eq!(g.shape(dx)?.as_fixed(), Some(vec![1, 8, 8, 4]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn depthwise_conv2d_backprop_input(
        &mut self,
        filter: ValueId,
        dy: ValueId,
        params: Conv2dParams,
        input_hw: [usize; 2],
    ) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::DepthwiseConv2DBackpropInput { params, input_hw }), &[filter, dy])
    }
    /// Gradient of [`Graph::depthwise_conv2d`] w.r.t. its filter: `x [N,H,W,C]`,
    /// `dy [N,OH,OW,C*M]` → `[KH,KW,C,M]` with `[KH,KW] = filter_hw`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [1, 8, 8, 4]);
    /// let dy = g.input("dy", DType::F32, [1, 6, 6, 8]);
    /// let dw = g.depthwise_conv2d_backprop_filter(x, dy, Conv2dParams::default(), [3, 3])?;
    /// assert_eq!(g.shape(dw)?.as_fixed(), Some(vec![3, 3, 4, 2]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn depthwise_conv2d_backprop_filter(
        &mut self,
        x: ValueId,
        dy: ValueId,
        params: Conv2dParams,
        filter_hw: [usize; 2],
    ) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::DepthwiseConv2DBackpropFilter { params, filter_hw }), &[x, dy])
    }
    /// Max pooling over `[kh, kw]` windows of `x [N,H,W,C]`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[1, 2, 2, 1], vec![1.0f32, 4.0, 2.0, 3.0])?);
    /// let y = g.max_pool(x, [2, 2], [2, 2], Padding::Valid)?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [4.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_pool(
        &mut self,
        x: ValueId,
        ksize: [usize; 2],
        strides: [usize; 2],
        padding: Padding,
    ) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::MaxPool { ksize, strides, padding }), &[x])
    }
    /// Average pooling over `[kh, kw]` windows of `x [N,H,W,C]` (padding not counted).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[1, 2, 2, 1], vec![1.0f32, 4.0, 2.0, 3.0])?);
    /// let y = g.avg_pool(x, [2, 2], [2, 2], Padding::Valid)?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [2.5]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn avg_pool(
        &mut self,
        x: ValueId,
        ksize: [usize; 2],
        strides: [usize; 2],
        padding: Padding,
    ) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::AvgPool { ksize, strides, padding }), &[x])
    }
    /// Gradient of [`Graph::max_pool`]: `x` is the forward input, `dy` the output gradient.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[1, 2, 2, 1], vec![1.0f32, 4.0, 2.0, 3.0])?);
    /// let dy = g.constant(Tensor::from_vec(&[1, 1, 1, 1], vec![1.0f32])?);
    /// let dx = g.max_pool_grad(x, dy, [2, 2], [2, 2], Padding::Valid)?;
    /// // the gradient goes to the window's maximum
    /// assert_eq!(run_once(&g, &[dx], &[])?[0].to_vec::<f32>()?, [0.0, 1.0, 0.0, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_pool_grad(
        &mut self,
        x: ValueId,
        dy: ValueId,
        ksize: [usize; 2],
        strides: [usize; 2],
        padding: Padding,
    ) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::MaxPoolGrad { ksize, strides, padding }), &[x, dy])
    }
    /// Gradient of [`Graph::avg_pool`]: `dy [N,OH,OW,C]` → `[N,H,W,C]` with `[H,W] = input_hw`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let dy = g.constant(Tensor::from_vec(&[1, 1, 1, 1], vec![4.0f32])?);
    /// let dx = g.avg_pool_grad(dy, [2, 2], [2, 2], Padding::Valid, [2, 2])?;
    /// assert_eq!(run_once(&g, &[dx], &[])?[0].to_vec::<f32>()?, [1.0; 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn avg_pool_grad(
        &mut self,
        dy: ValueId,
        ksize: [usize; 2],
        strides: [usize; 2],
        padding: Padding,
        input_hw: [usize; 2],
    ) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::AvgPoolGrad { ksize, strides, padding, input_hw }), &[dy])
    }
    /// Window patches (TF `ExtractImagePatches`, JAX `conv_general_dilated_patches`):
    /// `x [N,H,W,C]` → `[N,OH,OW,KH*KW*C]` with `[KH,KW] = ksize`. Element
    /// `(ky*KW + kx)*C + c` of output pixel `(oy, ox)` is the input at the filter tap
    /// `(ky, kx)` of a `conv2d` with `params` (zero where that tap is padding), so
    /// `conv2d(x, w) = extract_patches(x) · w` reshaped to `[KH*KW*C, O]`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[1, 2, 3, 1], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?);
    /// let p = g.extract_patches(x, [2, 2], Conv2dParams::default())?; // [1, 1, 2, 4]
    /// let r = run_once(&g, &[p], &[])?;
    /// assert_eq!(r[0].to_vec::<f32>()?, [1.0, 2.0, 4.0, 5.0, 2.0, 3.0, 5.0, 6.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn extract_patches(&mut self, x: ValueId, ksize: [usize; 2], params: Conv2dParams) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::ExtractPatches { ksize, params }), &[x])
    }
    /// The adjoint of [`Graph::extract_patches`]: `dcol [N,OH,OW,KH*KW*C]` → `[N,H,W,C]` with
    /// `[H,W] = input_hw` and `C` = last dim / `(KH*KW)`; every tap is added back at its input
    /// position (taps in the padding are dropped).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let dcol = g.constant(Tensor::ones(DType::F32, &[1, 1, 2, 4])?);
    /// let dx = g.extract_patches_grad(dcol, [2, 2], Conv2dParams::default(), [2, 3])?;
    /// // the middle column is in both patches
    /// assert_eq!(run_once(&g, &[dx], &[])?[0].to_vec::<f32>()?, [1.0, 2.0, 1.0, 1.0, 2.0, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn extract_patches_grad(
        &mut self,
        dcol: ValueId,
        ksize: [usize; 2],
        params: Conv2dParams,
        input_hw: [usize; 2],
    ) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::ExtractPatchesGrad { ksize, params, input_hw }), &[dcol])
    }
}
