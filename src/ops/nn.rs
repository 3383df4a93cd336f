//! Neural-network layers: bias_add, softmax / log_softmax, the softmax / sigmoid
//! cross-entropy losses, l2_loss and (inference-form) layer / batch normalization.
//!
//! Invariants:
//! - float only (f32 or f64); every float input of an op has the dtype of input 0 and the
//!   output keeps it (sparse labels are i64);
//! - "rows" are along the LAST axis (`[..., C]`), except for softmax / log_softmax whose
//!   `axis` attribute (negative counts from the end) picks the axis;
//! - per-channel parameters (`b`, `gamma`, `beta`, `mean`, ...) of the nodes are 1-D `[C]`
//!   and must match the last dim (checked statically where fixed, at run time otherwise);
//!   the `layer_norm` builder also takes `gamma` / `beta` of any shape that broadcasts to
//!   `x`'s (TF / Keras), lowered to the node with unit scale and a `mul` / `add`;
//! - the cross-entropy builders take `(labels, logits)` in TF's order (same-shape floats
//!   make a swap undetectable, so the order is the same everywhere); their nodes keep the
//!   inputs `[logits, labels]`;
//! - softmax, log_softmax and the cross-entropies subtract the row maximum (stable for huge
//!   logits); sigmoid cross-entropy uses `max(x,0) - x*z + log1p(exp(-|x|))`;
//! - a sparse label outside `[0, C)` is `Error::IndexOutOfRange` at run time;
//! - `epsilon` must be finite and `>= 0` (`Error::InvalidArgument` at build time).
//!
//! Kernels work on contiguous rows of a standard-layout buffer (reused in place when the
//! executor hands over the only reference), in parallel above
//! `PAR_THRESHOLD` elements.

use std::fmt;

use ndarray::{ArcArray, Axis, CowArray, IxDyn, NdFloat, Zip};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::ops::unary::PAR_THRESHOLD;
use crate::ops::{Batching, Op, Raises, expect_arity, expect_dtype, expect_float, norm_axis};
use crate::tensor::{DType, Dim, Element, Shape, Tensor, TensorType};

/// Ops of the nn family.
#[derive(Clone, Debug, PartialEq)]
pub enum NnOp {
    /// `x [..., C] + b [C]`.
    BiasAdd,
    /// Softmax along `axis`.
    Softmax {
        /// The axis (negative counts from the end).
        axis: i64,
    },
    /// Log-softmax along `axis`.
    LogSoftmax {
        /// The axis (negative counts from the end).
        axis: i64,
    },
    /// `(logits [..., C], labels [..., C])` → `-sum(labels * log_softmax(logits))` of shape `[...]`.
    SoftmaxCrossEntropy,
    /// `(logits [..., C], labels i64 [...])` → `-log_softmax(logits)[label]` of shape `[...]`.
    SparseSoftmaxCrossEntropy,
    /// Elementwise `(logits, labels)` (same shape) → `max(x,0) - x*z + log(1 + exp(-|x|))`.
    SigmoidCrossEntropy,
    /// `sum(x²) / 2` as a scalar.
    L2Loss,
    /// `(x [..., D], gamma [D], beta [D])`: normalize over the last axis (biased variance).
    LayerNorm {
        /// Added to the variance.
        epsilon: f64,
    },
    /// Inference batch norm `(x [..., C], mean, variance, offset, scale)` (all `[C]`):
    /// `(x - mean) / sqrt(variance + epsilon) * scale + offset`.
    BatchNorm {
        /// Added to the variance.
        epsilon: f64,
    },
}

/// Kinds of the nn family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NnKind {
    /// `bias_add`.
    BiasAdd,
    /// `softmax`.
    Softmax,
    /// `log_softmax`.
    LogSoftmax,
    /// `softmax_cross_entropy`.
    SoftmaxCrossEntropy,
    /// `sparse_softmax_cross_entropy`.
    SparseSoftmaxCrossEntropy,
    /// `sigmoid_cross_entropy`.
    SigmoidCrossEntropy,
    /// `l2_loss`.
    L2Loss,
    /// `layer_norm`.
    LayerNorm,
    /// `batch_norm`.
    BatchNorm,
}

impl NnKind {
    /// Every kind.
    pub const ALL: &'static [NnKind] = &[
        NnKind::BiasAdd,
        NnKind::Softmax,
        NnKind::LogSoftmax,
        NnKind::SoftmaxCrossEntropy,
        NnKind::SparseSoftmaxCrossEntropy,
        NnKind::SigmoidCrossEntropy,
        NnKind::L2Loss,
        NnKind::LayerNorm,
        NnKind::BatchNorm,
    ];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {
            NnKind::BiasAdd => "bias_add",
            NnKind::Softmax => "softmax",
            NnKind::LogSoftmax => "log_softmax",
            NnKind::SoftmaxCrossEntropy => "softmax_cross_entropy",
            NnKind::SparseSoftmaxCrossEntropy => "sparse_softmax_cross_entropy",
            NnKind::SigmoidCrossEntropy => "sigmoid_cross_entropy",
            NnKind::L2Loss => "l2_loss",
            NnKind::LayerNorm => "layer_norm",
            NnKind::BatchNorm => "batch_norm",
        }
    }
    /// Which inputs' values can make the op fail ([`Raises`]): the labels of
    /// `sparse_softmax_cross_entropy` (outside `[0, C)`); nothing else.
    pub fn raises(self) -> Raises {
        match self {
            NnKind::SparseSoftmaxCrossEntropy => Raises::On(&[1]),
            _ => Raises::Never,
        }
    }

    /// How pfor batches the op ([`Batching`]): softmaxes move their axis past the loop
    /// axis; the last-axis losses take stacked operands; the layers with per-channel
    /// parameters keep their fused kernels by hand (`converters/nn.rs`).
    pub fn batching(self) -> Batching {
        use NnKind::*;
        match self {
            Softmax | LogSoftmax => Batching::AxisMapped,
            SoftmaxCrossEntropy | SparseSoftmaxCrossEntropy | SigmoidCrossEntropy => Batching::Elementwise,
            BiasAdd | L2Loss | LayerNorm | BatchNorm => Batching::Custom,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Inference helpers

/// Error unless `ty` has rank >= 1.
fn expect_rank1plus(op: &str, what: &str, ty: &TensorType) -> Result<()> {
    if ty.rank() == 0 {
        return Err(Error::shape(op, format!("{what} must have rank >= 1, got {}", ty.shape)));
    }
    Ok(())
}

/// Error unless `ty` has the float dtype `want` (the dtype of input 0).
fn expect_same_float(op: &str, ty: &TensorType, want: DType) -> Result<()> {
    if ty.dtype != want {
        return Err(Error::dtype(op, format!("{want} (the dtype of input 0)"), ty.dtype));
    }
    Ok(())
}

/// Unify two shapes that must be equal.
fn unify_shapes(op: &str, a: &Shape, b: &Shape) -> Result<Shape> {
    let mismatch = || Error::shape(op, format!("shapes {a} and {b} must be equal"));
    if a.rank() != b.rank() {
        return Err(mismatch());
    }
    let dims: Option<Vec<Dim>> = a.dims().iter().zip(b.dims()).map(|(x, y)| x.unify(y)).collect();
    Ok(Shape::from_dims(dims.ok_or_else(mismatch)?))
}

/// Check a 1-D per-channel parameter against the last dim `last` of `x`; returns the unified dim.
fn unify_param(op: &str, what: &str, x: &TensorType, p: &TensorType, last: &Dim) -> Result<Dim> {
    expect_same_float(op, p, x.dtype)?;
    if p.rank() != 1 {
        return Err(Error::shape(op, format!("{what} must be 1-D [C] for x {}, got {}", x.shape, p.shape)));
    }
    last.unify(p.shape.dim(0))
        .ok_or_else(|| Error::shape(op, format!("{what} {} does not match the last dim of x {}", p.shape, x.shape)))
}

fn check_epsilon(op: &str, eps: f64) -> Result<()> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::InvalidArgument(format!("{op}: epsilon must be finite and >= 0, got {eps}")));
    }
    Ok(())
}

/// `shape` with its last dim replaced by `d`.
fn with_last(shape: &Shape, d: Dim) -> Shape {
    let mut s = shape.clone();
    if let Some(l) = s.0.last_mut() {
        *l = d;
    }
    s
}

/// `shape` without its last dim.
fn prefix(shape: &Shape) -> Shape {
    Shape::from_dims(shape.dims()[..shape.rank().saturating_sub(1)].iter().cloned())
}

impl NnOp {
    /// The op with its axis attribute mapped through `f` (`None` without one).
    pub fn map_axes(&self, f: &dyn Fn(i64) -> i64) -> Option<NnOp> {
        match *self {
            NnOp::Softmax { axis } => Some(NnOp::Softmax { axis: f(axis) }),
            NnOp::LogSoftmax { axis } => Some(NnOp::LogSoftmax { axis: f(axis) }),
            _ => None,
        }
    }

    /// The kind.
    pub fn kind(&self) -> NnKind {
        match self {
            NnOp::BiasAdd => NnKind::BiasAdd,
            NnOp::Softmax { .. } => NnKind::Softmax,
            NnOp::LogSoftmax { .. } => NnKind::LogSoftmax,
            NnOp::SoftmaxCrossEntropy => NnKind::SoftmaxCrossEntropy,
            NnOp::SparseSoftmaxCrossEntropy => NnKind::SparseSoftmaxCrossEntropy,
            NnOp::SigmoidCrossEntropy => NnKind::SigmoidCrossEntropy,
            NnOp::L2Loss => NnKind::L2Loss,
            NnOp::LayerNorm { .. } => NnKind::LayerNorm,
            NnOp::BatchNorm { .. } => NnKind::BatchNorm,
        }
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        let arity = match self {
            NnOp::Softmax { .. } | NnOp::LogSoftmax { .. } | NnOp::L2Loss => 1,
            NnOp::LayerNorm { .. } => 3,
            NnOp::BatchNorm { .. } => 5,
            _ => 2,
        };
        expect_arity(op, inputs, arity)?;
        let x = &inputs[0];
        expect_float(op, x)?;
        let dtype = x.dtype;
        let out = |shape: Shape| Ok(vec![TensorType { dtype, shape }]);
        match self {
            NnOp::Softmax { axis } | NnOp::LogSoftmax { axis } => {
                norm_axis(op, *axis, x.rank())?;
                out(x.shape.clone())
            }
            NnOp::L2Loss => out(Shape::scalar()),
            NnOp::SigmoidCrossEntropy => {
                expect_same_float(op, &inputs[1], dtype)?;
                out(unify_shapes(op, &x.shape, &inputs[1].shape)?)
            }
            NnOp::SoftmaxCrossEntropy => {
                expect_rank1plus(op, "logits", x)?;
                expect_same_float(op, &inputs[1], dtype)?;
                out(prefix(&unify_shapes(op, &x.shape, &inputs[1].shape)?))
            }
            NnOp::SparseSoftmaxCrossEntropy => {
                expect_rank1plus(op, "logits", x)?;
                let labels = &inputs[1];
                expect_dtype(op, labels, DType::I64)?;
                out(unify_shapes(op, &prefix(&x.shape), &labels.shape).map_err(|_| {
                    Error::shape(op, format!("labels {} must have the batch shape of logits {}", labels.shape, x.shape))
                })?)
            }
            NnOp::BiasAdd | NnOp::LayerNorm { .. } | NnOp::BatchNorm { .. } => {
                expect_rank1plus(op, "x", x)?;
                if let NnOp::LayerNorm { epsilon } | NnOp::BatchNorm { epsilon } = self {
                    check_epsilon(op, *epsilon)?;
                }
                let names: &[&str] = match self {
                    NnOp::BiasAdd => &["bias"],
                    NnOp::LayerNorm { .. } => &["gamma", "beta"],
                    _ => &["mean", "variance", "offset", "scale"],
                };
                let mut last = x.shape.dim(x.rank() - 1).clone();
                for (p, what) in inputs[1..].iter().zip(names) {
                    last = unify_param(op, what, x, p, &last)?;
                }
                out(with_last(&x.shape, last))
            }
        }
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        let x = inputs.first().ok_or_else(|| Error::arity(op, "at least 1", 0))?;
        let out = crate::dispatch_float!(x.dtype(), T => eval_typed::<T>(self, op, inputs)?,
            _ => return Err(Error::dtype(op, "a float type (f32 or f64)", x.dtype())));
        Ok(vec![out])
    }
}

// ---------------------------------------------------------------------------------------
// Kernels

/// A standard-layout array owning (or sharing) its buffer.
fn standard<T: Element>(a: ArcArray<T, IxDyn>) -> ArcArray<T, IxDyn> {
    if a.is_standard_layout() { a } else { a.as_standard_layout().into_owned().into_shared() }
}

fn internal(op: &str) -> Error {
    Error::unsupported(op, "internal: a standard-layout buffer is not contiguous")
}

/// The contiguous elements of a standard-layout array, uniquely owned for writing.
fn slice_mut<'a, T: Element>(op: &str, a: &'a mut ArcArray<T, IxDyn>) -> Result<&'a mut [T]> {
    a.as_slice_mut().ok_or_else(|| internal(op))
}

/// The contiguous elements of a standard-layout view.
fn slice<'a, T: Element>(op: &str, a: &'a CowArray<'_, T, IxDyn>) -> Result<&'a [T]> {
    a.as_slice().ok_or_else(|| internal(op))
}

/// Apply `f` to every row of `n` elements (in parallel for large buffers).
fn for_rows<T: Element>(s: &mut [T], n: usize, f: impl Fn(&mut [T]) + Sync + Send) {
    if n == 0 {
        return;
    }
    if s.len() >= PAR_THRESHOLD && rayon::current_num_threads() > 1 {
        // Tasks of whole rows, ≥ ~16K elements each (per-row tasks cost more than short rows).
        let rows = (1usize << 14).div_ceil(n).max(1);
        s.par_chunks_mut(n * rows).for_each(|c| c.chunks_exact_mut(n).for_each(&f));
    } else {
        s.chunks_exact_mut(n).for_each(f);
    }
}

/// Runtime check that a dim promised equal is equal.
fn check_len(op: &str, what: &str, got: &[usize], want: &[usize]) -> Result<()> {
    if got != want {
        return Err(Error::shape(op, format!("{what} has shape {got:?}, expected {want:?}")));
    }
    Ok(())
}

fn max_of<T: NdFloat>(r: &[T]) -> T {
    r.iter().fold(T::neg_infinity(), |m, &v| if v > m || v.is_nan() { v } else { m })
}

/// `(max, log(sum(exp(x - max))))` of a non-empty row.
fn max_lse<T: NdFloat>(r: &[T]) -> (T, T) {
    let m = max_of(r);
    let s = r.iter().fold(T::zero(), |s, &v| s + (v - m).exp());
    (m, s.ln())
}

fn softmax_row<T: NdFloat>(r: &mut [T], log: bool) {
    if r.is_empty() {
        return;
    }
    if log {
        let (m, lse) = max_lse(r);
        r.iter_mut().for_each(|v| *v = *v - m - lse);
    } else {
        let m = max_of(r);
        let mut s = T::zero();
        for v in r.iter_mut() {
            *v = (*v - m).exp();
            s += *v;
        }
        r.iter_mut().for_each(|v| *v /= s);
    }
}

fn softmax_kernel<T: Element + NdFloat>(op: &str, x: ArcArray<T, IxDyn>, axis: usize, log: bool) -> Result<Tensor> {
    let mut a = standard(x);
    let n = a.shape()[axis];
    if axis + 1 == a.ndim() {
        for_rows(slice_mut(op, &mut a)?, n, |r| softmax_row(r, log));
    } else {
        // Strided lanes: gather into one reused scratch row.
        let mut row = Vec::with_capacity(n);
        for mut lane in a.lanes_mut(Axis(axis)) {
            row.clear();
            row.extend(lane.iter().copied());
            softmax_row(&mut row, log);
            lane.iter_mut().zip(&row).for_each(|(o, &v)| *o = v);
        }
    }
    Ok(T::wrap(a))
}

/// Build a `[batch...]` output from per-row values.
fn rows_out<T: Element>(batch: &[usize], data: Vec<T>) -> Result<Tensor> {
    Tensor::from_vec(batch, data)
}

fn eval_typed<T: Element + NdFloat>(op_: &NnOp, op: &str, inputs: Vec<Tensor>) -> Result<Tensor> {
    let mut arrays = Vec::with_capacity(inputs.len());
    let mut labels = None;
    for t in inputs {
        match t {
            Tensor::I64(l) => labels = Some(l),
            t => arrays.push(t.into_array::<T>()?),
        }
    }
    let mut it = arrays.into_iter();
    let x = it.next().ok_or_else(|| Error::arity(op, "at least 1", 0))?;
    let params: Vec<ArcArray<T, IxDyn>> = it.collect();
    let shape = x.shape().to_vec();
    let c = shape.last().copied().unwrap_or(1);
    let batch = &shape[..shape.len().saturating_sub(1)];
    match op_ {
        NnOp::Softmax { axis } | NnOp::LogSoftmax { axis } => {
            let ax = norm_axis(op, *axis, x.ndim())?;
            softmax_kernel(op, x, ax, matches!(op_, NnOp::LogSoftmax { .. }))
        }
        NnOp::L2Loss => {
            let s = x.iter().fold(T::zero(), |s, &v| s + v * v);
            Ok(Tensor::scalar(s / T::from_f64(2.0)))
        }
        NnOp::SigmoidCrossEntropy => {
            let z = params.first().ok_or_else(|| Error::arity(op, "2", 1))?;
            check_len(op, "labels", z.shape(), &shape)?;
            let mut a = x;
            Zip::from(&mut a).and(z).for_each(|x, &z| {
                let v = *x;
                *x = v.max(T::zero()) - v * z + (-v.abs()).exp().ln_1p();
            });
            Ok(T::wrap(a))
        }
        NnOp::SoftmaxCrossEntropy => {
            let z = params.first().ok_or_else(|| Error::arity(op, "2", 1))?;
            check_len(op, "labels", z.shape(), &shape)?;
            let (xc, zc) = (x.as_standard_layout(), z.as_standard_layout());
            let (xs, zs) = (slice(op, &xc)?, slice(op, &zc)?);
            let rows: usize = batch.iter().product();
            let data: Vec<T> = if c == 0 {
                vec![T::zero(); rows]
            } else {
                xs.chunks_exact(c)
                    .zip(zs.chunks_exact(c))
                    .map(|(xr, zr)| {
                        let (m, lse) = max_lse(xr);
                        // -sum z * (x - m - lse); zero labels contribute nothing (even for -inf logits).
                        xr.iter()
                            .zip(zr)
                            .filter(|(_, z)| **z != T::zero())
                            .fold(T::zero(), |s, (&x, &z)| s + z * (m + lse - x))
                    })
                    .collect()
            };
            rows_out(batch, data)
        }
        NnOp::SparseSoftmaxCrossEntropy => {
            let l = labels.ok_or_else(|| Error::arity(op, "2", 1))?;
            check_len(op, "labels", l.shape(), batch)?;
            let lc = l.as_standard_layout();
            let ls = slice(op, &lc)?;
            if let Some(&bad) = ls.iter().find(|&&v| v < 0 || v as u64 >= c as u64) {
                return Err(Error::IndexOutOfRange { op: op.into(), index: bad, bound: c });
            }
            let xc = x.as_standard_layout();
            let xs = slice(op, &xc)?;
            // Non-empty rows here: with c == 0 any label is out of range (or there are no rows).
            let data: Vec<T> = if c == 0 {
                Vec::new()
            } else {
                xs.chunks_exact(c)
                    .zip(ls)
                    .map(|(xr, &j)| {
                        let (m, lse) = max_lse(xr);
                        m + lse - xr[j as usize]
                    })
                    .collect()
            };
            rows_out(batch, data)
        }
        NnOp::BiasAdd => {
            let b = params.first().ok_or_else(|| Error::arity(op, "2", 1))?;
            check_len(op, "bias", b.shape(), &[c])?;
            let bc = b.as_standard_layout();
            let bs = slice(op, &bc)?;
            let mut a = standard(x);
            for_rows(slice_mut(op, &mut a)?, c, |r| r.iter_mut().zip(bs).for_each(|(v, &b)| *v += b));
            Ok(T::wrap(a))
        }
        NnOp::LayerNorm { epsilon } => {
            let [g, b] = params.as_slice() else { return Err(Error::arity(op, "3", params.len() + 1)) };
            check_len(op, "gamma", g.shape(), &[c])?;
            check_len(op, "beta", b.shape(), &[c])?;
            let (gc, bc) = (g.as_standard_layout(), b.as_standard_layout());
            let (gs, bs) = (slice(op, &gc)?, slice(op, &bc)?);
            let eps = T::from_f64(*epsilon);
            let n = T::from_f64(c as f64);
            let mut a = standard(x);
            for_rows(slice_mut(op, &mut a)?, c, |r| {
                let mean = r.iter().fold(T::zero(), |s, &v| s + v) / n;
                let var = r.iter().fold(T::zero(), |s, &v| s + (v - mean) * (v - mean)) / n;
                let inv = (var + eps).sqrt().recip();
                for ((v, &g), &b) in r.iter_mut().zip(gs).zip(bs) {
                    *v = (*v - mean) * inv * g + b;
                }
            });
            Ok(T::wrap(a))
        }
        NnOp::BatchNorm { epsilon } => {
            let [mean, var, off, scale] = params.as_slice() else {
                return Err(Error::arity(op, "5", params.len() + 1));
            };
            for (p, what) in [(mean, "mean"), (var, "variance"), (off, "offset"), (scale, "scale")] {
                check_len(op, what, p.shape(), &[c])?;
            }
            let eps = T::from_f64(*epsilon);
            // Per-channel multiplier scale / sqrt(var + eps).
            let mul: Vec<T> = var.iter().zip(scale).map(|(&v, &s)| s / (v + eps).sqrt()).collect();
            let (mc, oc) = (mean.as_standard_layout(), off.as_standard_layout());
            let (ms, os) = (slice(op, &mc)?, slice(op, &oc)?);
            let mut a = standard(x);
            for_rows(slice_mut(op, &mut a)?, c, |r| {
                for (((v, &m), &k), &o) in r.iter_mut().zip(ms).zip(&mul).zip(os) {
                    *v = (*v - m) * k + o;
                }
            });
            Ok(T::wrap(a))
        }
    }
}

impl fmt::Display for NnOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind().name();
        match self {
            NnOp::Softmax { axis } | NnOp::LogSoftmax { axis } => write!(f, "{name}{{axis={axis}}}"),
            NnOp::LayerNorm { epsilon } | NnOp::BatchNorm { epsilon } => write!(f, "{name}{{epsilon={epsilon}}}"),
            _ => f.write_str(name),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Builders

impl Graph {
    /// `x [..., C] + b [C]` (bias along the last axis).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0])?);
    /// let b = g.constant(Tensor::vec1(&[10.0f32, 20.0]));
    /// let y = g.bias_add(x, b)?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f32>()?, [11.0, 22.0, 13.0, 24.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn bias_add(&mut self, x: ValueId, b: ValueId) -> Result<ValueId> {
        self.add_op(Op::Nn(NnOp::BiasAdd), &[x, b])
    }
    /// Numerically stable softmax along `axis` (negative counts from the end).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[0.0f64, 0.0, 1000.0])); // no overflow
    /// let p = g.softmax(x, -1)?;
    /// assert_eq!(run_once(&g, &[p], &[])?[0].to_vec::<f64>()?, [0.0, 0.0, 1.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn softmax(&mut self, x: ValueId, axis: i64) -> Result<ValueId> {
        self.add_op(Op::Nn(NnOp::Softmax { axis }), &[x])
    }
    /// Numerically stable log-softmax along `axis` (negative counts from the end).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[1.0f64, 1.0]));
    /// let l = g.log_softmax(x, 0)?;
    /// let r = run_once(&g, &[l], &[])?[0].to_vec::<f64>()?;
    /// assert!(r.iter().all(|v| (v + 2f64.ln()).abs() < 1e-12)); // log(1/2) each
    /// # Ok(())
    /// # }
    /// ```
    pub fn log_softmax(&mut self, x: ValueId, axis: i64) -> Result<ValueId> {
        self.add_op(Op::Nn(NnOp::LogSoftmax { axis }), &[x])
    }
    /// Per-row loss `-sum(labels * log_softmax(logits))` over the last axis: `[..., C]` → `[...]`.
    /// Arguments in TF's order: `labels` (a distribution per row) first, then `logits`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let labels = g.constant(Tensor::from_vec(&[1, 2], vec![0.5f64, 0.5])?);
    /// let logits = g.constant(Tensor::from_vec(&[1, 2], vec![3.0f64, 3.0])?);
    /// let loss = g.softmax_cross_entropy(labels, logits)?; // [1]: one row
    /// let r = run_once(&g, &[loss], &[])?;
    /// assert!((r[0].to_vec::<f64>()?[0] - 2f64.ln()).abs() < 1e-12);
    /// # Ok(())
    /// # }
    /// ```
    pub fn softmax_cross_entropy(&mut self, labels: ValueId, logits: ValueId) -> Result<ValueId> {
        self.add_op(Op::Nn(NnOp::SoftmaxCrossEntropy), &[logits, labels])
    }
    /// Per-row loss `-log_softmax(logits)[label]` with i64 `labels` `[...]` and `logits`
    /// `[..., C]` (TF's order: labels first); a label outside `[0, C)` fails at run time with
    /// `Error::IndexOutOfRange`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let labels = g.input("labels", DType::I64, [2]);
    /// let logits = g.constant(Tensor::from_vec(&[2, 2], vec![0.0f64, 0.0, 5.0, 5.0])?);
    /// let loss = g.sparse_softmax_cross_entropy(labels, logits)?; // [2]
    /// let r = run_once(&g, &[loss], &[(labels, Tensor::vec1(&[1i64, 0]))])?;
    /// assert!(r[0].to_vec::<f64>()?.iter().all(|v| (v - 2f64.ln()).abs() < 1e-12));
    /// // a label outside [0, 2) fails when it runs
    /// assert!(run_once(&g, &[loss], &[(labels, Tensor::vec1(&[2i64, 0]))]).is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn sparse_softmax_cross_entropy(&mut self, labels: ValueId, logits: ValueId) -> Result<ValueId> {
        self.add_op(Op::Nn(NnOp::SparseSoftmaxCrossEntropy), &[logits, labels])
    }
    /// Elementwise stable sigmoid cross-entropy of (same-shape) `labels` and `logits`, in
    /// TF's order (labels first).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let labels = g.constant(Tensor::vec1(&[1.0f64, 0.0]));
    /// let logits = g.constant(Tensor::vec1(&[0.0f64, 0.0]));
    /// let loss = g.sigmoid_cross_entropy(labels, logits)?; // -log(sigmoid(0)) both
    /// let r = run_once(&g, &[loss], &[])?;
    /// assert!(r[0].to_vec::<f64>()?.iter().all(|v| (v - 2f64.ln()).abs() < 1e-12));
    /// # Ok(())
    /// # }
    /// ```
    pub fn sigmoid_cross_entropy(&mut self, labels: ValueId, logits: ValueId) -> Result<ValueId> {
        self.add_op(Op::Nn(NnOp::SigmoidCrossEntropy), &[logits, labels])
    }
    /// Scalar `sum(x²) / 2`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::vec1(&[3.0f32, 4.0]));
    /// let l = g.l2_loss(x)?;
    /// assert_eq!(run_once(&g, &[l], &[])?[0].scalar_f64()?, 12.5);
    /// # Ok(())
    /// # }
    /// ```
    pub fn l2_loss(&mut self, x: ValueId) -> Result<ValueId> {
        self.add_op(Op::Nn(NnOp::L2Loss), &[x])
    }
    /// Layer normalization over the last axis: `(x - mean) / sqrt(var + epsilon) * gamma + beta`
    /// (biased variance; `epsilon` finite and `>= 0`). `gamma` and `beta` broadcast against
    /// `x` as TF / Keras document (a scalar, `[C]`, `[1, C]`, `[T, C]`, `x`'s own shape …);
    /// the result has `x`'s shape (a parameter that would grow it is an `Err` naming the
    /// shapes). Per-channel `[C]` parameters make one fused node; any other shape normalizes
    /// with unit scale in that node (the last dim must then be fixed) and applies the
    /// parameters with a broadcasting `mul` and `add`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f64, 3.0, 2.0, 6.0])?);
    /// let gamma = g.constant(Tensor::vec1(&[1.0f64, 2.0])); // per channel: [C]
    /// let beta = g.constant(Tensor::scalar(1.0f64)); // broadcast as Keras does
    /// let y = g.layer_norm(x, gamma, beta, 0.0)?;
    /// // each row normalizes to [-1, 1], then * gamma + beta
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f64>()?, [0.0, 3.0, 0.0, 3.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn layer_norm(&mut self, x: ValueId, gamma: ValueId, beta: ValueId, epsilon: f64) -> Result<ValueId> {
        let op = "layer_norm";
        let xt = self.value_type(x)?.clone();
        let Some(last) = xt.shape.dims().last().cloned() else {
            return self.add_op(Op::Nn(NnOp::LayerNorm { epsilon }), &[x, gamma, beta]);
        };
        let (gt, bt) = (self.value_type(gamma)?.clone(), self.value_type(beta)?.clone());
        let per_channel = |t: &TensorType| t.rank() == 1 && t.shape.dim(0).unify(&last).is_some();
        if per_channel(&gt) && per_channel(&bt) {
            return self.add_op(Op::Nn(NnOp::LayerNorm { epsilon }), &[x, gamma, beta]);
        }
        for (t, what) in [(&gt, "gamma"), (&bt, "beta")] {
            if t.dtype != xt.dtype {
                return Err(Error::dtype(op, format!("{} {what} (the dtype of x)", xt.dtype), t.dtype));
            }
            let grown = crate::ops::broadcast_static(op, &xt.shape, &t.shape).ok().filter(|s| s.rank() == xt.rank());
            if grown.is_none_or(|s| s.dims().iter().zip(xt.shape.dims()).any(|(a, b)| a.unify(b).is_none())) {
                return Err(Error::shape(op, format!("{what} {} does not broadcast to x {}", t.shape, xt.shape)));
            }
        }
        let Some(c) = last.value() else {
            return Err(Error::shape(
                op,
                format!("gamma {} and beta {} broadcast over x {} need a fixed last dim", gt.shape, bt.shape, xt.shape),
            ));
        };
        let ones = self.ones(xt.dtype, &[c])?;
        let zeros = self.zeros(xt.dtype, &[c])?;
        let n = self.add_op(Op::Nn(NnOp::LayerNorm { epsilon }), &[x, ones, zeros])?;
        let y = self.mul(n, gamma)?;
        self.add(y, beta)
    }
    /// Inference batch normalization over the last (channel) axis:
    /// `(x - mean) / sqrt(variance + epsilon) * scale + offset` (`epsilon` finite and `>= 0`).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f64, 2.0, 3.0, 4.0])?);
    /// let mean = g.constant(Tensor::vec1(&[2.0f64, 3.0]));
    /// let variance = g.constant(Tensor::vec1(&[1.0f64, 4.0]));
    /// let offset = g.constant(Tensor::vec1(&[0.0f64, 10.0]));
    /// let scale = g.constant(Tensor::vec1(&[1.0f64, 1.0]));
    /// let y = g.batch_norm(x, mean, variance, offset, scale, 0.0)?;
    /// assert_eq!(run_once(&g, &[y], &[])?[0].to_vec::<f64>()?, [-1.0, 9.5, 1.0, 10.5]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn batch_norm(
        &mut self,
        x: ValueId,
        mean: ValueId,
        variance: ValueId,
        offset: ValueId,
        scale: ValueId,
        epsilon: f64,
    ) -> Result<ValueId> {
        self.add_op(Op::Nn(NnOp::BatchNorm { epsilon }), &[x, mean, variance, offset, scale])
    }
}
