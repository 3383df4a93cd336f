//! Graph builders of the conv family (one per [`ConvOp`] variant).

use super::{Conv2dParams, ConvOp, Padding};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::Op;

impl Graph {
    /// 2-D convolution (cross-correlation, as in TF): `x [N,H,W,C]`, `filter [KH,KW,C,O]`
    /// → `[N,OH,OW,O]`.
    pub fn conv2d(&mut self, x: ValueId, filter: ValueId, params: Conv2dParams) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::Conv2D { params }), &[x, filter])
    }
    /// Gradient of [`Graph::conv2d`] w.r.t. its input: `filter [KH,KW,C,O]`,
    /// `dy [N,OH,OW,O]` → `[N,H,W,C]` with `[H,W] = input_hw`.
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
    pub fn depthwise_conv2d(&mut self, x: ValueId, filter: ValueId, params: Conv2dParams) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::DepthwiseConv2D { params }), &[x, filter])
    }
    /// Gradient of [`Graph::depthwise_conv2d`] w.r.t. its input: `filter [KH,KW,C,M]`,
    /// `dy [N,OH,OW,C*M]` → `[N,H,W,C]` with `[H,W] = input_hw`.
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
    pub fn extract_patches(&mut self, x: ValueId, ksize: [usize; 2], params: Conv2dParams) -> Result<ValueId> {
        self.add_op(Op::Conv(ConvOp::ExtractPatches { ksize, params }), &[x])
    }
    /// The adjoint of [`Graph::extract_patches`]: `dcol [N,OH,OW,KH*KW*C]` → `[N,H,W,C]` with
    /// `[H,W] = input_hw` and `C` = last dim / `(KH*KW)`; every tap is added back at its input
    /// position (taps in the padding are dropped).
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
