//! The path a user takes to add an op, through the PUBLIC API only (`pfor::…` paths, no
//! crate internals): a [`CustomOp`] with its kernel (`infer` + `eval`), how pfor batches
//! it (a declared [`Batching`] class, or a converter registered in a [`Registry`]), and
//! its derivative rules (`vjp` and `jvp`). Each op is checked by pfor against the loop,
//! its gradients and its JVPs against finite differences (`tests/autodiff/fd.rs`).
//!
//! - `cube` (`y = x³`): a unary op that declares [`Batching::Elementwise`], so it needs no
//!   converter (the derived one runs);
//! - `sum_squares{axis}` (`Σ x²` along `axis`): a reduction that declares
//!   [`Batching::AxisMapped`] and maps its axis ([`CustomOp::map_axes`]); the same op with
//!   [`Batching::Custom`] and a hand-written converter registered under its name.

use std::sync::Arc;

use pfor::autodiff::{JvpCtx, VjpCtx};
use pfor::ops::{Batching, CustomOp, norm_axis};
use pfor::prelude::*;
use pfor::vectorize::{ConvertCtx, Converted, OpKey, PforOptions, Registry, pfor_with_report};

use crate::autodiff::fd::{self, randn};
use crate::common::{assert_close, f64t};

/// The one f64 input of op `op` (an error naming the op otherwise).
fn one_f64<'a>(op: &str, inputs: &'a [TensorType]) -> Result<&'a TensorType> {
    let [x] = inputs else { return Err(Error::InvalidArgument(format!("{op} takes 1 input, got {}", inputs.len()))) };
    if x.dtype != DType::F64 {
        return Err(Error::dtype(op, "f64", x.dtype));
    }
    Ok(x)
}

/// `y = x³`, elementwise.
#[derive(Debug)]
struct Cube;

impl CustomOp for Cube {
    fn name(&self) -> &str {
        "cube"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let x = one_f64("cube", inputs)?;
        Ok(vec![x.clone()])
    }
    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Ok(vec![Tensor::from_array(inputs[0].to_array::<f64>()?.mapv(|v| v * v * v))])
    }
    fn may_raise(&self) -> bool {
        false
    }
    fn batching(&self) -> Batching {
        Batching::Elementwise
    }
    fn vjp(&self, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
        let dy = cx.dy(0)?;
        let d = local_derivative(cx.g, cx.x(0))?;
        Ok(vec![Some(cx.g.mul(dy, d)?)])
    }
    fn jvp(&self, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
        let Some(t) = cx.t(0) else { return Ok(vec![None]) };
        let d = local_derivative(cx.g, cx.x(0))?;
        Ok(vec![Some(cx.g.mul(t, d)?)])
    }
}

/// `d cube / dx = 3x²`, built from graph ops (so second derivatives work too).
fn local_derivative(g: &mut Graph, x: ValueId) -> Result<ValueId> {
    let x2 = g.square(x)?;
    g.mul_scalar(x2, 3.0)
}

/// `Σ x²` along `axis` (the axis removed).
#[derive(Debug)]
struct SumSquares {
    axis: i64,
    batching: Batching,
}

impl CustomOp for SumSquares {
    fn name(&self) -> &str {
        "sum_squares"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let x = one_f64("sum_squares", inputs)?;
        let a = norm_axis("sum_squares", self.axis, x.rank())?;
        let dims = x.shape.dims().iter().enumerate().filter(|(i, _)| *i != a).map(|(_, d)| d.clone());
        Ok(vec![TensorType { dtype: DType::F64, shape: Shape::from_dims(dims) }])
    }
    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let x = inputs[0].to_array::<f64>()?;
        let a = norm_axis("sum_squares", self.axis, x.ndim())?;
        Ok(vec![Tensor::from_array(x.mapv(|v| v * v).sum_axis(ndarray::Axis(a)))])
    }
    fn may_raise(&self) -> bool {
        false
    }
    fn batching(&self) -> Batching {
        self.batching
    }
    fn map_axes(&self, f: &dyn Fn(i64) -> i64) -> Option<Arc<dyn CustomOp>> {
        Some(Arc::new(SumSquares { axis: f(self.axis), batching: self.batching }))
    }
    fn vjp(&self, cx: &mut VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
        // dx = 2 x · expand(dy, axis)
        let (x, dy) = (cx.x(0), cx.dy(0)?);
        let rank = cx.g.value_type(x)?.rank();
        let a = norm_axis("sum_squares", self.axis, rank)? as i64;
        let e = cx.g.expand_dims(dy, a)?;
        let two_x = cx.g.mul_scalar(x, 2.0)?;
        Ok(vec![Some(cx.g.mul(two_x, e)?)])
    }
    fn jvp(&self, cx: &mut JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
        // dy = Σ 2 x t along axis
        let Some(t) = cx.t(0) else { return Ok(vec![None]) };
        let two_x = cx.g.mul_scalar(cx.x(0), 2.0)?;
        let p = cx.g.mul(two_x, t)?;
        Ok(vec![Some(cx.g.reduce_sum(p, Some(&[self.axis]), false)?)])
    }
}

/// `y[b, j] = x[b, j + 1] - x[b, j]` on a MATRIX only (rank 2: a batch axis and a row):
/// it declares [`Batching::BatchFolding`], so pfor folds the loop axis into the batch axis.
#[derive(Debug)]
struct RowDiff;

impl CustomOp for RowDiff {
    fn name(&self) -> &str {
        "row_diff"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let x = one_f64("row_diff", inputs)?;
        let (Some(b), Some(k)) = (x.shape.dims().first(), x.shape.dims().get(1).and_then(|d| d.value())) else {
            return Err(Error::InvalidArgument(format!("row_diff wants [b, k] with k fixed, got {x}")));
        };
        if x.rank() != 2 || k == 0 {
            return Err(Error::InvalidArgument(format!("row_diff wants [b, k >= 1], got {x}")));
        }
        Ok(vec![TensorType { dtype: DType::F64, shape: Shape::from_dims([b.clone(), Dim::fixed(k - 1)]) }])
    }
    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let x = inputs[0].to_array::<f64>()?;
        let k = x.shape()[1];
        let d = &x.slice(ndarray::s![.., 1..]) - &x.slice(ndarray::s![.., ..k - 1]);
        Ok(vec![Tensor::from_array(d)])
    }
    fn may_raise(&self) -> bool {
        false
    }
    fn batching(&self) -> Batching {
        Batching::BatchFolding { batched: &[0] }
    }
}

/// The hand-written converter of a reduction over the LAST axis: the op runs unchanged
/// on the stacked value (its axis, -1, needs no shift).
fn sum_squares_last_axis(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let x = ctx.stacked(0)?;
    let op = ctx.op().clone();
    let y = ctx.add(op, &[x])?;
    Converted::stacked(y)
}

fn custom(op: impl CustomOp + 'static) -> Op {
    Op::Custom(Arc::new(op))
}

/// pfor over the rows of `xv` against the loop, strict (no fallback), and the fallbacks
/// recorded (none).
fn pfor_matches_loop(op: Op, xv: &Tensor, registry: Registry) {
    let n = xv.shape()[0];
    let mut g = Graph::new();
    let x = g.constant(xv.clone());
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let xi = g.gather(x, i, 0)?;
        let y = g.add_op(op.clone(), &[xi])?;
        Ok(vec![g.sin(y)?])
    };
    let opts = PforOptions::strict().with_registry(registry);
    let (out, report) = pfor_with_report(&mut g, n, &opts, body).unwrap();
    assert!(report.fallbacks.is_empty(), "{}: {:?}", op.name(), report.fallbacks);
    let want = for_loop(&mut g, n, body).unwrap();
    let r = run_once(&g, &[out[0], want[0]], &[]).unwrap();
    assert_close(&r[0], &r[1], 1e-12);
}

#[test]
fn elementwise_custom_op_needs_no_converter() {
    let xv = randn(&[4, 3, 2], 1);
    pfor_matches_loop(custom(Cube), &xv, Registry::builtin());
}

#[test]
fn axis_mapped_custom_op_shifts_its_axis() {
    let xv = randn(&[4, 3, 2], 2);
    for axis in [0, 1, -1, -2] {
        pfor_matches_loop(custom(SumSquares { axis, batching: Batching::AxisMapped }), &xv, Registry::builtin());
    }
}

#[test]
fn batch_folding_custom_op_folds_the_loop_into_its_batch_axis() {
    let xv = randn(&[4, 3, 5], 5);
    pfor_matches_loop(custom(RowDiff), &xv, Registry::builtin());
}

#[test]
fn custom_op_with_a_registered_converter() {
    let xv = randn(&[4, 3, 2], 3);
    let mut reg = Registry::builtin();
    reg.register(OpKey::Custom("sum_squares".into()), sum_squares_last_axis);
    pfor_matches_loop(custom(SumSquares { axis: -1, batching: Batching::Custom }), &xv, reg);
    // without the converter (and no declared class) strict pfor fails, naming the op
    let mut g = Graph::new();
    let x = g.constant(xv);
    let op = custom(SumSquares { axis: -1, batching: Batching::Custom });
    let e = pfor::vectorize::pfor_with(&mut g, 4, &PforOptions::strict(), |g, i| {
        let xi = g.gather(x, i, 0)?;
        Ok(vec![g.add_op(op.clone(), &[xi])?])
    })
    .unwrap_err();
    assert!(e.to_string().contains("sum_squares"), "{e}");
}

#[test]
fn custom_op_derivatives_match_finite_differences() {
    let x = f64t(&[2, 3], &[0.5, -1.0, 2.0, 0.3, -0.7, 1.5]);
    fd::check(&fd::case("cube", vec![x.clone()], |g, v| Ok(vec![g.add_op(custom(Cube), &[v[0]])?])).second());
    for axis in [0, -1] {
        let op = custom(SumSquares { axis, batching: Batching::AxisMapped });
        fd::check(&fd::case("sum_squares", vec![x.clone()], move |g, v| Ok(vec![g.add_op(op.clone(), &[v[0]])?])));
    }
}

#[test]
fn derivatives_of_a_custom_op_vectorize() {
    // per-row gradients of Σ cube(x) through pfor match the closed form 3x²
    let xv = randn(&[5, 3], 4);
    let mut g = Graph::new();
    let x = g.constant(xv.clone());
    let out = pfor::vectorize::pfor_with(&mut g, 5, &PforOptions::strict(), |g, i| {
        let xi = g.gather(x, i, 0)?;
        let y = g.add_op(custom(Cube), &[xi])?;
        let s = g.reduce_sum(y, Some(&[0]), false)?;
        pfor::autodiff::gradients(g, &[s], &[xi], None)
    })
    .unwrap();
    let got = run_once(&g, &out, &[]).unwrap();
    let want = Tensor::from_array(xv.to_array::<f64>().unwrap().mapv(|v| 3.0 * v * v));
    assert_close(&got[0], &want, 1e-12);
}
