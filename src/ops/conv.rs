//! Convolutions and pooling over NHWC tensors, with their gradients (float only: f32, f64).
//!
//! Layouts: inputs are `[N, H, W, C]`; conv filters are `[KH, KW, C, O]`; depthwise filters
//! are `[KH, KW, C, M]` and produce `C*M` channels ordered `c*M + m` (TensorFlow order).
//!
//! Window geometry (per spatial axis, input size `i`, window `k`, stride `s`, dilation `d`,
//! effective window `ke = (k-1)*d + 1`), TensorFlow semantics:
//! - [`Padding::Valid`]: output `(i - ke)/s + 1`; an `Err` when `ke > i`;
//! - [`Padding::Same`]: output `ceil(i/s)`, total padding `max((out-1)*s + ke - i, 0)`, split
//!   with the extra element on the bottom/right;
//! - [`Padding::Explicit`]: `(before, after)` pads per axis (ONNX's `pads`), output
//!   `(i + before + after - ke)/s + 1`; an `Err` when `ke > i + before + after`.
//!
//! Padded positions contribute zero to convs, are skipped by max pooling, and are not counted
//! by average pooling.
//!
//! Gradients: `*_backprop_input` / `*_backprop_filter` are the exact adjoints of the forward
//! op in its input / filter argument. `max_pool_grad` routes each output gradient to the
//! FIRST maximal element of its window (row-major; a NaN counts as maximal).
//!
//! Shapes: the batch dim may be dynamic (it is propagated); spatial output dims are fixed
//! when the input spatial dims and window are, dynamic otherwise (then all checks happen at
//! run time). Zero strides, dilations or windows, channel mismatches, rank ≠ 4 and windows
//! larger than a VALID input are errors naming the op and the shapes.
//!
//! Kernels: `crate::kernels::conv` (im2col + GEMM, direct loops, the AVX-512 narrow and
//! Winograd kernels); the op picks one by shape and by the session's
//! [`KernelOptions`](crate::kernels::KernelOptions). Inside a run, outputs are written into
//! buffers recycled by the executor's pool and operands read for the last time go back to
//! it; otherwise outputs are allocated written (first touch in parallel).
//!
//! `extract_patches` is the im2col patch matrix as an op of its own (TF
//! `ExtractImagePatches`): `[N,H,W,C] -> [N,OH,OW,KH*KW*C]`, tap-major, zero at padded
//! positions, with `conv2d`'s geometry; `extract_patches_grad` is its exact adjoint
//! (scatter-add of every tap, padding dropped). They run the conv kernels' own im2col /
//! col2im, in parallel over row chunks / whole images above [`PAR_THRESHOLD`](crate::kernels::PAR_THRESHOLD) elements.
//! [`patches`] wraps them as `[M,OH,OW,KH*KW,C]` graph values for derivative rules and
//! converters (the batched per-example conv GEMMs).

mod builders;
mod fused;
mod geom;
mod patch_product;
pub mod patches;

use std::fmt;

use ndarray::{CowArray, IxDyn};

use crate::error::{Error, Result};
use crate::kernels::KernelOptions as Kernels;
use crate::kernels::conv::{Dst, Float, Geom, OutBuf, direct, im2col};
use crate::ops::EvalCtx;
use crate::ops::{Raises, expect_arity, expect_float};
use crate::tensor::layout::standard_cow;
use crate::tensor::{DType, Dim, Shape, Tensor, TensorType};
use geom::{num_taps, out_dim, positive, rank4, unify, window};

/// Convolution / pooling padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Padding {
    /// No padding.
    Valid,
    /// Output spatial size = ceil(input / stride).
    Same,
    /// `[(top, bottom), (left, right)]` pads (`padding=explicit` in the printed form).
    Explicit([(usize, usize); 2]),
}

impl fmt::Display for Padding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Padding::Valid => f.write_str("VALID"),
            Padding::Same => f.write_str("SAME"),
            Padding::Explicit(p) => write!(f, "EXPLICIT{p:?}"),
        }
    }
}

/// Attributes of a 2-D convolution: `[height, width]` strides and dilations, and padding.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conv2dParams {
    /// Window step along H and W (≥ 1).
    pub strides: [usize; 2],
    /// Padding mode.
    pub padding: Padding,
    /// Filter tap spacing along H and W (≥ 1; 1 = dense filter).
    pub dilations: [usize; 2],
}

impl Default for Conv2dParams {
    fn default() -> Self {
        Conv2dParams { strides: [1, 1], padding: Padding::Valid, dilations: [1, 1] }
    }
}

/// Ops of the conv family.
#[derive(Clone, Debug, PartialEq)]
pub enum ConvOp {
    /// `conv2d(input [N,H,W,C], filter [KH,KW,C,O]) -> [N,OH,OW,O]`.
    Conv2D {
        /// Strides, padding, dilations.
        params: Conv2dParams,
    },
    /// `(filter [KH,KW,C,O], out_backprop [N,OH,OW,O]) -> [N,H,W,C]`, H,W = `input_hw`.
    Conv2DBackpropInput {
        /// Params of the forward conv.
        params: Conv2dParams,
        /// Spatial size of the forward input.
        input_hw: [usize; 2],
    },
    /// `(input [N,H,W,C], out_backprop [N,OH,OW,O]) -> [KH,KW,C,O]`, KH,KW = `filter_hw`.
    Conv2DBackpropFilter {
        /// Params of the forward conv.
        params: Conv2dParams,
        /// Spatial size of the filter.
        filter_hw: [usize; 2],
    },
    /// `(input [N,H,W,C], filter [KH,KW,C,M]) -> [N,OH,OW,C*M]` (channel `c*M + m`).
    DepthwiseConv2D {
        /// Strides, padding, dilations.
        params: Conv2dParams,
    },
    /// `(filter [KH,KW,C,M], out_backprop [N,OH,OW,C*M]) -> [N,H,W,C]`, H,W = `input_hw`.
    DepthwiseConv2DBackpropInput {
        /// Params of the forward conv.
        params: Conv2dParams,
        /// Spatial size of the forward input.
        input_hw: [usize; 2],
    },
    /// `(input [N,H,W,C], out_backprop [N,OH,OW,C*M]) -> [KH,KW,C,M]`, KH,KW = `filter_hw`.
    DepthwiseConv2DBackpropFilter {
        /// Params of the forward conv.
        params: Conv2dParams,
        /// Spatial size of the filter.
        filter_hw: [usize; 2],
    },
    /// Max over each window: `[N,H,W,C] -> [N,OH,OW,C]` (padding ignored).
    MaxPool {
        /// Window `[height, width]`.
        ksize: [usize; 2],
        /// Window step.
        strides: [usize; 2],
        /// Padding mode.
        padding: Padding,
    },
    /// Mean over each window's non-padded elements: `[N,H,W,C] -> [N,OH,OW,C]`.
    AvgPool {
        /// Window `[height, width]`.
        ksize: [usize; 2],
        /// Window step.
        strides: [usize; 2],
        /// Padding mode.
        padding: Padding,
    },
    /// `(orig_input [N,H,W,C], out_backprop [N,OH,OW,C]) -> [N,H,W,C]`: each gradient goes to
    /// the first maximal element of its window.
    MaxPoolGrad {
        /// Window `[height, width]`.
        ksize: [usize; 2],
        /// Window step.
        strides: [usize; 2],
        /// Padding mode.
        padding: Padding,
    },
    /// `(out_backprop [N,OH,OW,C]) -> [N,H,W,C]`, H,W = `input_hw`.
    AvgPoolGrad {
        /// Window `[height, width]`.
        ksize: [usize; 2],
        /// Window step.
        strides: [usize; 2],
        /// Padding mode.
        padding: Padding,
        /// Spatial size of the forward input.
        input_hw: [usize; 2],
    },
    /// Window patches (TF `ExtractImagePatches`): `[N,H,W,C] -> [N,OH,OW,KH*KW*C]`, the last
    /// axis tap-major (`(ky*KW + kx)*C + c`), zero at padded positions; the geometry of a
    /// `conv2d` with a `[KH,KW]` filter.
    ExtractPatches {
        /// Window `[KH, KW]`.
        ksize: [usize; 2],
        /// Strides, padding, dilations.
        params: Conv2dParams,
    },
    /// The adjoint of [`ConvOp::ExtractPatches`]: `[N,OH,OW,KH*KW*C] -> [N,H,W,C]` with
    /// `[H,W] = input_hw`, every tap added back at its input position (padding dropped).
    ExtractPatchesGrad {
        /// Window `[KH, KW]`.
        ksize: [usize; 2],
        /// Strides, padding, dilations of the forward op.
        params: Conv2dParams,
        /// Spatial size of the forward input.
        input_hw: [usize; 2],
    },
}

/// Kinds of the conv family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvKind {
    /// [`ConvOp::Conv2D`].
    Conv2D,
    /// [`ConvOp::Conv2DBackpropInput`].
    Conv2DBackpropInput,
    /// [`ConvOp::Conv2DBackpropFilter`].
    Conv2DBackpropFilter,
    /// [`ConvOp::DepthwiseConv2D`].
    DepthwiseConv2D,
    /// [`ConvOp::DepthwiseConv2DBackpropInput`].
    DepthwiseConv2DBackpropInput,
    /// [`ConvOp::DepthwiseConv2DBackpropFilter`].
    DepthwiseConv2DBackpropFilter,
    /// [`ConvOp::MaxPool`].
    MaxPool,
    /// [`ConvOp::AvgPool`].
    AvgPool,
    /// [`ConvOp::MaxPoolGrad`].
    MaxPoolGrad,
    /// [`ConvOp::AvgPoolGrad`].
    AvgPoolGrad,
    /// [`ConvOp::ExtractPatches`].
    ExtractPatches,
    /// [`ConvOp::ExtractPatchesGrad`].
    ExtractPatchesGrad,
}

impl ConvKind {
    /// Every kind.
    pub const ALL: &'static [ConvKind] = &[
        ConvKind::Conv2D,
        ConvKind::Conv2DBackpropInput,
        ConvKind::Conv2DBackpropFilter,
        ConvKind::DepthwiseConv2D,
        ConvKind::DepthwiseConv2DBackpropInput,
        ConvKind::DepthwiseConv2DBackpropFilter,
        ConvKind::MaxPool,
        ConvKind::AvgPool,
        ConvKind::MaxPoolGrad,
        ConvKind::AvgPoolGrad,
        ConvKind::ExtractPatches,
        ConvKind::ExtractPatchesGrad,
    ];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {
            ConvKind::Conv2D => "conv2d",
            ConvKind::Conv2DBackpropInput => "conv2d_backprop_input",
            ConvKind::Conv2DBackpropFilter => "conv2d_backprop_filter",
            ConvKind::DepthwiseConv2D => "depthwise_conv2d",
            ConvKind::DepthwiseConv2DBackpropInput => "depthwise_conv2d_backprop_input",
            ConvKind::DepthwiseConv2DBackpropFilter => "depthwise_conv2d_backprop_filter",
            ConvKind::MaxPool => "max_pool",
            ConvKind::AvgPool => "avg_pool",
            ConvKind::MaxPoolGrad => "max_pool_grad",
            ConvKind::AvgPoolGrad => "avg_pool_grad",
            ConvKind::ExtractPatches => "extract_patches",
            ConvKind::ExtractPatchesGrad => "extract_patches_grad",
        }
    }
    /// Which inputs' values can make the op fail ([`Raises`]): none (geometry is checked
    /// on shapes and attributes).
    pub fn raises(self) -> Raises {
        Raises::Never
    }
}

/// Elementwise work fused into a `conv2d` output by the executor (`exec::fuse`): `+ bias`
/// per output channel, then `+ residual` elementwise, then `relu`, applied to each output
/// chunk right after its GEMM.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ConvEpilogue<'a> {
    /// Bias `[O]`, same dtype as the input.
    pub bias: Option<&'a Tensor>,
    /// Added elementwise: as many elements as the output (any shape: read in row-major
    /// order), same dtype as the input.
    pub residual: Option<&'a Tensor>,
    /// Apply relu after the bias.
    pub relu: bool,
    /// The filter in a kernel's form, made when the plan was compiled (not output work: the
    /// kernel's filter operand, ready; see `kernels::conv::PreparedFilter`).
    pub filter: Option<&'a crate::kernels::conv::PreparedFilter>,
}

impl ConvOp {
    /// The kind.
    pub fn kind(&self) -> ConvKind {
        match self {
            ConvOp::Conv2D { .. } => ConvKind::Conv2D,
            ConvOp::Conv2DBackpropInput { .. } => ConvKind::Conv2DBackpropInput,
            ConvOp::Conv2DBackpropFilter { .. } => ConvKind::Conv2DBackpropFilter,
            ConvOp::DepthwiseConv2D { .. } => ConvKind::DepthwiseConv2D,
            ConvOp::DepthwiseConv2DBackpropInput { .. } => ConvKind::DepthwiseConv2DBackpropInput,
            ConvOp::DepthwiseConv2DBackpropFilter { .. } => ConvKind::DepthwiseConv2DBackpropFilter,
            ConvOp::MaxPool { .. } => ConvKind::MaxPool,
            ConvOp::AvgPool { .. } => ConvKind::AvgPool,
            ConvOp::MaxPoolGrad { .. } => ConvKind::MaxPoolGrad,
            ConvOp::AvgPoolGrad { .. } => ConvKind::AvgPoolGrad,
            ConvOp::ExtractPatches { .. } => ConvKind::ExtractPatches,
            ConvOp::ExtractPatchesGrad { .. } => ConvKind::ExtractPatchesGrad,
        }
    }

    /// `(strides, dilations, padding)` of any variant (pools: dilation 1).
    fn window_attrs(&self) -> ([usize; 2], [usize; 2], Padding) {
        match *self {
            ConvOp::Conv2D { params }
            | ConvOp::Conv2DBackpropInput { params, .. }
            | ConvOp::Conv2DBackpropFilter { params, .. }
            | ConvOp::DepthwiseConv2D { params }
            | ConvOp::DepthwiseConv2DBackpropInput { params, .. }
            | ConvOp::DepthwiseConv2DBackpropFilter { params, .. }
            | ConvOp::ExtractPatches { params, .. }
            | ConvOp::ExtractPatchesGrad { params, .. } => (params.strides, params.dilations, params.padding),
            ConvOp::MaxPool { strides, padding, .. }
            | ConvOp::AvgPool { strides, padding, .. }
            | ConvOp::MaxPoolGrad { strides, padding, .. }
            | ConvOp::AvgPoolGrad { strides, padding, .. } => (strides, [1, 1], padding),
        }
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        let (s, d, p) = self.window_attrs();
        positive(op, "strides", s)?;
        positive(op, "dilations", d)?;
        let arity = match self {
            ConvOp::AvgPool { .. }
            | ConvOp::MaxPool { .. }
            | ConvOp::AvgPoolGrad { .. }
            | ConvOp::ExtractPatches { .. }
            | ConvOp::ExtractPatchesGrad { .. } => 1,
            _ => 2,
        };
        expect_arity(op, inputs, arity)?;
        expect_float(op, &inputs[0])?;
        let dtype = inputs[0].dtype;
        if let Some(b) = inputs.get(1)
            && b.dtype != dtype
        {
            return Err(Error::dtype(op, format!("{dtype} (same as input 0)"), b.dtype));
        }
        let ctx = || {
            let shapes: Vec<String> = inputs.iter().map(|t| t.shape.to_string()).collect();
            format!("inputs {}", shapes.join(", "))
        };
        let fixed = Dim::Fixed;
        let mul = |a: &Dim, b: &Dim| {
            a.mul(b).ok_or_else(|| Error::shape(op, format!("{}: channels {a} x {b} overflow", ctx())))
        };
        // Output [N, OH, OW] of a window over input dims `x` with window dims `k`.
        let spatial = |x: &[Dim], k: [&Dim; 2]| -> Result<[Dim; 2]> {
            Ok([out_dim(op, &ctx, 0, &x[1], k[0], s[0], d[0], p)?, out_dim(op, &ctx, 1, &x[2], k[1], s[1], d[1], p)?])
        };
        // Check out_backprop's spatial dims against the forward geometry.
        let check_dy = |dy: &[Dim], want: [Dim; 2]| -> Result<()> {
            for (axis, (got, want)) in ["height", "width"].iter().zip(dy[1..3].iter().zip(&want)) {
                unify(op, got, want, || {
                    format!("{}: out_backprop {axis} is {got} but the forward op produces {want}", ctx())
                })?;
            }
            Ok(())
        };
        let chan_mismatch =
            |a: &Dim, b: &Dim, what: &str| unify(op, a, b, || format!("{}: {what} mismatch ({a} vs {b})", ctx()));
        let out: Vec<Dim> = match *self {
            ConvOp::Conv2D { .. } | ConvOp::DepthwiseConv2D { .. } => {
                let x = rank4(op, "input", "N,H,W,C", &inputs[0])?;
                let w = rank4(op, "filter", "KH,KW,C,O", &inputs[1])?;
                chan_mismatch(&x[3], &w[2], "input channels vs filter in-channels")?;
                let [oh, ow] = spatial(x, [&w[0], &w[1]])?;
                let oc = if self.kind() == ConvKind::Conv2D { w[3].clone() } else { mul(&x[3], &w[3])? };
                vec![x[0].clone(), oh, ow, oc]
            }
            ConvOp::Conv2DBackpropInput { input_hw, .. } | ConvOp::DepthwiseConv2DBackpropInput { input_hw, .. } => {
                let w = rank4(op, "filter", "KH,KW,C,O", &inputs[0])?;
                let dy = rank4(op, "out_backprop", "N,OH,OW,O", &inputs[1])?;
                let oc = if self.kind() == ConvKind::Conv2DBackpropInput { w[3].clone() } else { mul(&w[2], &w[3])? };
                chan_mismatch(&dy[3], &oc, "out_backprop channels vs filter out-channels")?;
                let x = [dy[0].clone(), fixed(input_hw[0]), fixed(input_hw[1]), w[2].clone()];
                check_dy(dy, spatial(&x, [&w[0], &w[1]])?)?;
                x.to_vec()
            }
            ConvOp::Conv2DBackpropFilter { filter_hw, .. }
            | ConvOp::DepthwiseConv2DBackpropFilter { filter_hw, .. } => {
                let x = rank4(op, "input", "N,H,W,C", &inputs[0])?;
                let dy = rank4(op, "out_backprop", "N,OH,OW,O", &inputs[1])?;
                chan_mismatch(&x[0], &dy[0], "batch size")?;
                check_dy(dy, spatial(x, [&fixed(filter_hw[0]), &fixed(filter_hw[1])])?)?;
                let oc = if self.kind() == ConvKind::Conv2DBackpropFilter {
                    dy[3].clone()
                } else {
                    match (x[3].value(), dy[3].value()) {
                        (Some(c), Some(cm)) if c > 0 && cm % c == 0 => fixed(cm / c),
                        (Some(_), Some(_)) => {
                            return Err(Error::shape(
                                op,
                                format!(
                                    "{}: out_backprop channels {} are not a multiple of input channels {}",
                                    ctx(),
                                    dy[3],
                                    x[3]
                                ),
                            ));
                        }
                        _ => Dim::unknown(),
                    }
                };
                vec![fixed(filter_hw[0]), fixed(filter_hw[1]), x[3].clone(), oc]
            }
            ConvOp::MaxPool { ksize, .. } | ConvOp::AvgPool { ksize, .. } => {
                positive(op, "ksize", ksize)?;
                let x = rank4(op, "input", "N,H,W,C", &inputs[0])?;
                let [oh, ow] = spatial(x, [&fixed(ksize[0]), &fixed(ksize[1])])?;
                vec![x[0].clone(), oh, ow, x[3].clone()]
            }
            ConvOp::MaxPoolGrad { ksize, .. } => {
                positive(op, "ksize", ksize)?;
                let x = rank4(op, "orig_input", "N,H,W,C", &inputs[0])?;
                let dy = rank4(op, "out_backprop", "N,OH,OW,C", &inputs[1])?;
                let n = chan_mismatch(&x[0], &dy[0], "batch size")?;
                let c = chan_mismatch(&x[3], &dy[3], "channels")?;
                check_dy(dy, spatial(x, [&fixed(ksize[0]), &fixed(ksize[1])])?)?;
                vec![n, x[1].clone(), x[2].clone(), c]
            }
            ConvOp::AvgPoolGrad { ksize, input_hw, .. } => {
                positive(op, "ksize", ksize)?;
                let dy = rank4(op, "out_backprop", "N,OH,OW,C", &inputs[0])?;
                let x = [dy[0].clone(), fixed(input_hw[0]), fixed(input_hw[1]), dy[3].clone()];
                check_dy(dy, spatial(&x, [&fixed(ksize[0]), &fixed(ksize[1])])?)?;
                x.to_vec()
            }
            ConvOp::ExtractPatches { ksize, .. } => {
                let taps = num_taps(op, &ctx, ksize)?;
                let x = rank4(op, "input", "N,H,W,C", &inputs[0])?;
                let [oh, ow] = spatial(x, [&fixed(ksize[0]), &fixed(ksize[1])])?;
                let kc =
                    match x[3].value() {
                        Some(c) => fixed(c.checked_mul(taps).ok_or_else(|| {
                            Error::shape(op, format!("{}: {taps} taps x {c} channels overflow", ctx()))
                        })?),
                        None => mul(&x[3], &fixed(taps))?,
                    };
                vec![x[0].clone(), oh, ow, kc]
            }
            ConvOp::ExtractPatchesGrad { ksize, input_hw, .. } => {
                let taps = num_taps(op, &ctx, ksize)?;
                let dy = rank4(op, "patch gradient", "N,OH,OW,KH*KW*C", &inputs[0])?;
                let c = match dy[3].value() {
                    Some(kc) if kc % taps == 0 => fixed(kc / taps),
                    Some(kc) => {
                        return Err(Error::shape(
                            op,
                            format!(
                                "{}: last dim {kc} is not a multiple of the {taps} taps of window {ksize:?}",
                                ctx()
                            ),
                        ));
                    }
                    None if taps == 1 => dy[3].clone(),
                    None => Dim::unknown(),
                };
                let x = [dy[0].clone(), fixed(input_hw[0]), fixed(input_hw[1]), c];
                check_dy(dy, spatial(&x, [&fixed(ksize[0]), &fixed(ksize[1])])?)?;
                x.to_vec()
            }
        };
        Ok(vec![TensorType { dtype, shape: Shape::from_dims(out) }])
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        self.eval_fused(inputs, ConvEpilogue::default(), None)
    }

    /// Evaluate inside a run, writing the output into a recycled buffer when one fits.
    pub(crate) fn eval_in(&self, inputs: Vec<Tensor>, ctx: &mut dyn EvalCtx) -> Result<Vec<Tensor>> {
        self.eval_fused(inputs, ConvEpilogue::default(), Some(ctx))
    }

    /// Evaluate with `epi` applied to the output as the kernel writes it (`conv2d` only; an
    /// epilogue on another kind, or a bias that is not `[O]` of the input dtype, is an
    /// error); inside a run (`ctx`), the output goes into a recycled buffer when one fits.
    pub(crate) fn eval_fused(
        &self,
        inputs: Vec<Tensor>,
        epi: ConvEpilogue<'_>,
        mut ctx: Option<&mut (dyn EvalCtx + '_)>,
    ) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        let (out_shape, dtype) = self.checked_output(&inputs, &epi)?;
        let len: usize = out_shape.iter().product();
        let kernels = crate::ops::ctx::kernel_options(ctx.as_deref());
        let out = crate::dispatch_float!(dtype, T => {
            let buf = OutBuf(ctx.as_deref_mut().and_then(|c| c.recycled::<T>(len)));
            self.run::<T>(&inputs, &out_shape, epi, buf, kernels)?
        },
            _ => return Err(Error::dtype(op, "a float type (f32 or f64)", dtype)));
        if let Some(ctx) = ctx {
            // operands read for the last time (activations, patches) serve later kernels
            for t in inputs {
                ctx.recycle(t);
            }
        }
        Ok(vec![out])
    }

    /// The fixed output shape and dtype of an evaluation on `inputs` with `epi`: inference
    /// on the concrete types performs every check (incl. formerly dynamic dims); an
    /// epilogue on another kind than `conv2d` is an error.
    fn checked_output(&self, inputs: &[Tensor], epi: &ConvEpilogue<'_>) -> Result<(Vec<usize>, DType)> {
        let op = self.kind().name();
        if (epi.bias.is_some() || epi.residual.is_some() || epi.relu) && self.kind() != ConvKind::Conv2D {
            return Err(Error::Verify(format!("{op}: internal: only conv2d takes a fused epilogue")));
        }
        let types: Vec<TensorType> = inputs.iter().map(Tensor::tensor_type).collect();
        let out_ty = self.infer(&types)?.remove(0);
        let out_shape = out_ty
            .shape
            .as_fixed()
            .ok_or_else(|| Error::shape(op, format!("output shape {} not fixed", out_ty.shape)))?;
        if out_shape.iter().try_fold(1usize, |a, &b| a.checked_mul(b)).is_none() {
            return Err(Error::shape(op, format!("output shape {out_shape:?} too large")));
        }
        Ok((out_shape, out_ty.dtype))
    }

    /// `conv2d` with `epi` into the channels `dst` of `out`'s output pixel rows (a fused
    /// concat's slice, see `exec::fuse::concat`): the checks and kernels of
    /// [`ConvOp::eval_fused`], every element of the slice written, no other.
    pub(crate) fn eval_fused_into<T: Float>(
        &self,
        inputs: &[Tensor],
        epi: ConvEpilogue<'_>,
        out: &mut [T],
        dst: Dst,
        ctx: Option<&mut (dyn EvalCtx + '_)>,
    ) -> Result<()> {
        let op = self.kind().name();
        if self.kind() != ConvKind::Conv2D {
            return Err(Error::Verify(format!("{op}: internal: only conv2d writes into a slice")));
        }
        let (out_shape, dtype) = self.checked_output(inputs, &epi)?;
        if dtype != T::DTYPE {
            return Err(Error::dtype(op, format!("{} (the slice's dtype)", T::DTYPE), dtype));
        }
        let kernels = crate::ops::ctx::kernel_options(ctx.as_deref());
        let views = standard_views::<T>(inputs)?;
        let data = slices(op, &views)?;
        self.conv2d_with(inputs, &data, &out_shape, epi, |g, x, w, e| {
            im2col::conv2d_into(g, x, w, e, out, dst, kernels)
        })
    }

    /// `f(geometry, x, filter, kernel epilogue)` of a `conv2d` on `inputs` (their data
    /// `data`), the epilogue's bias and residual checked against the filter's channels and
    /// the output's size.
    fn conv2d_with<T: Float, R>(
        &self,
        inputs: &[Tensor],
        data: &[&[T]],
        out_shape: &[usize],
        epi: ConvEpilogue<'_>,
        f: impl FnOnce(&Geom, &[T], &[T], im2col::Epilogue<'_, T>) -> Result<R>,
    ) -> Result<R> {
        let op = self.kind().name();
        let (s, d, p) = self.window_attrs();
        let x = shape4(&inputs[0]);
        let w = shape4(&inputs[1]);
        let bias = match epi.bias {
            Some(b) if b.shape() != [w[3]] => {
                return Err(Error::shape(op, format!("fused bias has shape {:?}, expected [{}]", b.shape(), w[3])));
            }
            Some(b) => Some(b.array::<T>()?.as_standard_layout()),
            None => None,
        };
        let bias = bias.as_ref().map(|b| b.as_slice().ok_or_else(|| Error::shape(op, "internal: non-contiguous bias")));
        let len: usize = out_shape.iter().product();
        let residual = match epi.residual {
            Some(r) if r.len() != len => {
                return Err(Error::shape(
                    op,
                    format!("fused residual has shape {:?}, expected {len} elements ({out_shape:?})", r.shape()),
                ));
            }
            Some(r) => Some(r.array::<T>()?.as_standard_layout()),
            None => None,
        };
        let residual = residual
            .as_ref()
            .map(|r| r.as_slice().ok_or_else(|| Error::shape(op, "internal: non-contiguous residual")));
        let epi = im2col::Epilogue {
            bias: bias.transpose()?,
            residual: residual.transpose()?,
            relu: epi.relu,
            filter: epi.filter,
        };
        f(&Geom::new(op, x, [w[0], w[1]], w[3], s, d, p)?, data[0], data[1], epi)
    }

    fn run<T: Float>(
        &self,
        inputs: &[Tensor],
        out_shape: &[usize],
        epi: ConvEpilogue<'_>,
        buf: OutBuf<T>,
        kernels: Kernels,
    ) -> Result<Tensor> {
        let op = self.kind().name();
        let views = standard_views::<T>(inputs)?;
        let data = slices(op, &views)?;
        let shp = |i: usize| shape4(&inputs[i]);
        let (s, d, p) = self.window_attrs();
        let out = match *self {
            ConvOp::Conv2D { .. } => {
                self.conv2d_with(inputs, &data, out_shape, epi, |g, x, w, e| im2col::conv2d(g, x, w, e, buf, kernels))?
            }
            ConvOp::Conv2DBackpropInput { input_hw: [h, wd], .. } => {
                let (w, dy) = (shp(0), shp(1));
                let g = Geom::new(op, [dy[0], h, wd, w[2]], [w[0], w[1]], w[3], s, d, p)?;
                im2col::conv2d_backprop_input(&g, data[0], data[1], buf, kernels)?
            }
            ConvOp::Conv2DBackpropFilter { filter_hw, .. } => {
                let g = Geom::new(op, shp(0), filter_hw, shp(1)[3], s, d, p)?;
                im2col::conv2d_backprop_filter(&g, data[0], data[1])?
            }
            ConvOp::DepthwiseConv2D { .. } => {
                let (x, w) = (shp(0), shp(1));
                direct::depthwise(&Geom::new(op, x, [w[0], w[1]], w[3], s, d, p)?, data[0], data[1], buf)
            }
            ConvOp::DepthwiseConv2DBackpropInput { input_hw: [h, wd], .. } => {
                let (w, dy) = (shp(0), shp(1));
                let g = Geom::new(op, [dy[0], h, wd, w[2]], [w[0], w[1]], w[3], s, d, p)?;
                direct::depthwise_backprop_input(&g, data[0], data[1], buf)
            }
            ConvOp::DepthwiseConv2DBackpropFilter { filter_hw, .. } => {
                let g = Geom::new(op, shp(0), filter_hw, out_shape[3], s, d, p)?;
                direct::depthwise_backprop_filter(&g, data[0], data[1])
            }
            ConvOp::MaxPool { ksize, .. } | ConvOp::AvgPool { ksize, .. } => {
                let x = shp(0);
                let g = Geom::new(op, x, ksize, x[3], s, d, p)?;
                direct::pool(&g, data[0], self.kind() == ConvKind::MaxPool, buf)
            }
            ConvOp::MaxPoolGrad { ksize, .. } => {
                let x = shp(0);
                direct::max_pool_grad(&Geom::new(op, x, ksize, x[3], s, d, p)?, data[0], data[1], buf)
            }
            ConvOp::AvgPoolGrad { ksize, input_hw: [h, w], .. } => {
                let dy = shp(0);
                direct::avg_pool_grad(&Geom::new(op, [dy[0], h, w, dy[3]], ksize, dy[3], s, d, p)?, data[0], buf)
            }
            ConvOp::ExtractPatches { ksize, .. } => {
                let x = shp(0);
                im2col::extract_patches(&Geom::new(op, x, ksize, x[3], s, d, p)?, data[0], buf)
            }
            ConvOp::ExtractPatchesGrad { ksize, input_hw: [h, w], .. } => {
                // inference checked that the last dim is a multiple of the taps
                let c = out_shape[3];
                let g = Geom::new(op, [shp(0)[0], h, w, c], ksize, c, s, d, p)?;
                im2col::extract_patches_grad(&g, data[0], buf)
            }
        };
        Tensor::from_vec(out_shape, out)
    }
}

/// The dims of a rank-4 tensor (inference checked the rank).
fn shape4(t: &Tensor) -> [usize; 4] {
    let s = t.shape();
    [s[0], s[1], s[2], s[3]]
}

/// Standard-layout views of `inputs` as `T` (copies only of non-standard layouts).
fn standard_views<'t, T: Float>(inputs: &'t [Tensor]) -> Result<Vec<CowArray<'t, T, IxDyn>>> {
    inputs.iter().map(|t| Ok(standard_cow(t.array::<T>()?.view()))).collect()
}

/// The contiguous data of each view.
fn slices<'v, T: Float>(op: &str, views: &'v [CowArray<'_, T, IxDyn>]) -> Result<Vec<&'v [T]>> {
    views.iter().map(|v| v.as_slice().ok_or_else(|| Error::shape(op, "internal: non-contiguous buffer"))).collect()
}

impl fmt::Display for ConvOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind().name();
        let (s, d, p) = self.window_attrs();
        match self {
            ConvOp::Conv2D { .. } | ConvOp::DepthwiseConv2D { .. } => {
                write!(f, "{name}{{strides={s:?}, padding={p}, dilations={d:?}}}")
            }
            ConvOp::Conv2DBackpropInput { input_hw, .. } | ConvOp::DepthwiseConv2DBackpropInput { input_hw, .. } => {
                write!(f, "{name}{{strides={s:?}, padding={p}, dilations={d:?}, input_hw={input_hw:?}}}")
            }
            ConvOp::Conv2DBackpropFilter { filter_hw, .. }
            | ConvOp::DepthwiseConv2DBackpropFilter { filter_hw, .. } => {
                write!(f, "{name}{{strides={s:?}, padding={p}, dilations={d:?}, filter_hw={filter_hw:?}}}")
            }
            ConvOp::MaxPool { ksize, .. } | ConvOp::AvgPool { ksize, .. } | ConvOp::MaxPoolGrad { ksize, .. } => {
                write!(f, "{name}{{ksize={ksize:?}, strides={s:?}, padding={p}}}")
            }
            ConvOp::AvgPoolGrad { ksize, input_hw, .. } => {
                write!(f, "{name}{{ksize={ksize:?}, strides={s:?}, padding={p}, input_hw={input_hw:?}}}")
            }
            ConvOp::ExtractPatches { ksize, .. } => {
                write!(f, "{name}{{ksize={ksize:?}, strides={s:?}, padding={p}, dilations={d:?}}}")
            }
            ConvOp::ExtractPatchesGrad { ksize, input_hw, .. } => write!(
                f,
                "{name}{{ksize={ksize:?}, strides={s:?}, padding={p}, dilations={d:?}, input_hw={input_hw:?}}}"
            ),
        }
    }
}
