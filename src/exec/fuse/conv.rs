//! Plan-level fusion: `conv2d → [reshape]* → bias_add → [reshape]* → add(·, residual) →
//! [reshape]* → relu` (bias, add and relu each optional, at least one present), optionally
//! followed by `[reshape]* → max_pool` (after a relu, on a value with the conv output's dims;
//! not after an add), runs as ONE step whose conv kernel adds the bias and the residual
//! (ResNet's shortcut) and applies relu to each GEMM output chunk while it is cache
//! resident, instead of up to four full passes over the output in memory. A 2x2 stride-2
//! VALID pool is pooled in-kernel on each pair of conv rows in cache where the kernel can
//! (the conv output is never written); other pools, over a large conv output, run with the
//! conv a group of images at a time (the group's conv output still cached when the pool
//! reads it); else the pool op runs after the conv inside the same step.
//!
//! A conv whose filter is a constant holds the filter in the form its kernel multiplies by
//! (the Winograd transform, or the in-place GEMM's panels), made when the plan is compiled
//! (`exec::pretranspose::prepared_filter`); such a conv is a chain of its own even with
//! nothing after it.
//!
//! Invariants:
//! - only values with exactly one consumer that are not fetched are fused away, so no one
//!   can observe a skipped intermediate; the fused step replaces the chain's LAST step (its
//!   position in the plan), where every input of the chain is already computed and every
//!   consumer of the result still to come; slot releases are computed after fusion;
//! - a `bias_add` is fused only when its input's static last dim equals the conv's static
//!   output channels (reshapes in between keep the channel axis last);
//! - an `add` is fused only when both operands and its result have one fully static shape
//!   (no broadcasting: the residual's element `i` in row-major order meets the conv output's
//!   element `i`, reshapes being metadata only) and the residual is not the chain's own
//!   value; `add` is commutative bit for bit (IEEE), so either operand order fuses; a step
//!   belongs to one chain at most (the add of two conv chains' results, a projection
//!   shortcut, goes to the chain whose conv comes first in the plan);
//! - results are bit-identical to the unfused plan: the epilogue does the same float
//!   operations in the same order per element, the in-kernel pool applies `max_pool`'s
//!   selection rule to the same values, and reshapes are metadata only;
//! - at run time, operands the fused kernel does not take (non-float, a bias that is not
//!   `[O]` of the input dtype) run the chain op by op instead, so every error is the unfused
//!   one, naming the node that raised it.

use std::sync::Arc;

use hashbrown::HashSet;

use super::PlanView;
use crate::error::{Error, Result};
use crate::exec::{ExecCtx, Step};
use crate::ir::NodeId;
use crate::kernels::conv::PreparedFilter;
use crate::kernels::conv::{Dst, Float};
use crate::ops::conv::ConvEpilogue;
use crate::ops::{BinaryKind, ConvOp, EvalCtx, NnOp, Op, Padding, ShapeOp, UnaryKind};
use crate::passes::pattern::{Dataflow, sole_reader};
use crate::tensor::{DType, Dim, RowStack, Shape, Tensor, TensorType};

/// A chain step's inputs: the conv's input and filter, the bias and the residual.
type Operands = (Tensor, Tensor, Option<Tensor>, Option<Tensor>);

/// One fused-away op after the conv.
#[derive(Clone, Debug)]
enum Tail {
    /// A static reshape.
    Reshape(NodeId, Op),
    /// `bias_add` with the step's extra input (the bias).
    BiasAdd(NodeId),
    /// `add` of the chain's value and the step's last extra input (the residual), of this
    /// fixed shape.
    Add(NodeId, Vec<usize>),
    /// `relu`.
    Relu(NodeId),
    /// A `max_pool` (always last; its input keeps the conv output's `[N, OH, OW, O]` dims).
    MaxPool(NodeId, Op),
}

/// A fused conv chain (the plan step's inputs are `[x, filter]`, then the bias and the
/// residual where the chain has them).
#[derive(Clone, Debug)]
pub(crate) struct ConvChain {
    conv_node: NodeId,
    conv: ConvOp,
    /// Static output channels of the conv.
    channels: usize,
    tail: Vec<Tail>,
    /// The constant filter's Winograd transform, made when the plan was compiled.
    filter: Option<Arc<PreparedFilter>>,
}

impl ConvChain {
    /// The chain as text, e.g. `conv2d{..} → bias_add → relu` (for the profiler).
    pub(crate) fn describe(&self) -> String {
        let mut s = self.conv.to_string();
        for t in &self.tail {
            s.push_str(match t {
                Tail::Reshape(..) => " → reshape",
                Tail::BiasAdd(_) => " → bias_add",
                Tail::Add(..) => " → add",
                Tail::Relu(_) => " → relu",
                Tail::MaxPool(..) => " → max_pool",
            });
        }
        s
    }

    fn has_bias(&self) -> bool {
        self.tail.iter().any(|t| matches!(t, Tail::BiasAdd(_)))
    }

    /// The fixed shape of the fused `add`, if the chain has one.
    fn add_shape(&self) -> Option<&[usize]> {
        self.tail.iter().find_map(|t| match t {
            Tail::Add(_, shape) => Some(&shape[..]),
            _ => None,
        })
    }

    /// A conv with nothing fused after it (a part of a fused concat, see `concat`).
    pub(crate) fn bare(conv_node: NodeId, conv: ConvOp, channels: usize) -> ConvChain {
        ConvChain { conv_node, conv, channels, tail: Vec::new(), filter: None }
    }

    /// Static output channels of the conv.
    pub(crate) fn channels(&self) -> usize {
        self.channels
    }

    /// Whether the chain ends in a max pool (its result is not the conv output's layout).
    pub(crate) fn pools(&self) -> bool {
        matches!(self.tail.last(), Some(Tail::MaxPool(..)))
    }

    /// Inputs of the chain's step.
    pub(crate) fn arity(&self) -> usize {
        2 + usize::from(self.has_bias()) + usize::from(self.add_shape().is_some())
    }

    /// The chain's result type on these inputs (the step's), by the ops' own inference;
    /// `None` where an op rejects them (the op-by-op run then reports it).
    pub(crate) fn result_type(&self, ins: &[Tensor]) -> Option<TensorType> {
        let types: Vec<TensorType> = ins.iter().take(2).map(Tensor::tensor_type).collect();
        let mut ty = self.conv.infer(&types).ok()?.pop()?;
        for t in &self.tail {
            if let Tail::Reshape(_, op) | Tail::MaxPool(_, op) = t {
                ty = op.infer(std::slice::from_ref(&ty)).ok()?.pop()?;
            }
        }
        Some(ty)
    }

    /// The step's inputs as `(x, filter, bias, residual)`, and whether the fused kernel
    /// takes them (float operands of the static shapes; else the chain runs op by op).
    fn operands(&self, ins: Vec<Tensor>) -> Result<(Operands, bool)> {
        let want = self.arity();
        if ins.len() != want {
            return Err(Error::Verify(format!("fused conv chain: {} inputs, expected {want}", ins.len())));
        }
        let mut it = ins.into_iter();
        let (x, w) = (it.next().expect("arity checked"), it.next().expect("arity checked"));
        let bias = if self.has_bias() { it.next() } else { None };
        let residual = it.next();
        let float = matches!(x.dtype(), DType::F32 | DType::F64) && w.dtype() == x.dtype();
        let fast = float
            && w.rank() == 4
            && w.shape()[3] == self.channels
            && bias.as_ref().is_none_or(|b| b.dtype() == x.dtype() && b.shape() == [self.channels])
            && residual.as_ref().is_none_or(|r| r.dtype() == x.dtype() && Some(r.shape()) == self.add_shape());
        Ok(((x, w, bias, residual), fast))
    }

    /// The kernel epilogue of the chain's tail.
    fn epilogue<'a>(&'a self, bias: Option<&'a Tensor>, residual: Option<&'a Tensor>) -> ConvEpilogue<'a> {
        let relu = self.tail.iter().any(|t| matches!(t, Tail::Relu(_)));
        ConvEpilogue { bias, residual, relu, filter: self.filter.as_deref() }
    }

    /// Run the chain into the channels `dst` of `out`'s pixel rows (a fused concat's slice;
    /// the chain must not pool): `None` when its kernel wrote them, else (operands the
    /// fused kernel does not take) the op-by-op result, for the caller to copy. Errors are
    /// already attributed to the node that raised them.
    pub(crate) fn eval_into<T: Float>(
        &self,
        ins: Vec<Tensor>,
        out: &mut [T],
        dst: Dst,
        ctx: &mut ExecCtx<'_>,
    ) -> Result<Option<Tensor>> {
        let ((x, w, bias, residual), fast) = self.operands(ins)?;
        if !fast || x.dtype() != T::DTYPE || self.pools() {
            let mut y = self.eval_unfused(x, w, bias, residual, ctx)?;
            return y.pop().map(Some).ok_or_else(|| Error::Verify("fused conv chain: no result".into()));
        }
        let epi = self.epilogue(bias.as_ref(), residual.as_ref());
        let ins = [x, w];
        self.conv
            .eval_fused_into(&ins, epi, out, dst, Some(&mut *ctx))
            .map_err(|e| e.at_node(self.conv_node, self.conv.to_string()))?;
        for t in ins {
            ctx.recycle(t);
        }
        Ok(None)
    }

    /// Run the chain; errors are already attributed to the node that raised them.
    pub(crate) fn eval(&self, ins: Vec<Tensor>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        let conv_err = |e: Error| e.at_node(self.conv_node, self.conv.to_string());
        let ((x, w, bias, residual), fast) = self.operands(ins)?;
        if !fast {
            return self.eval_unfused(x, w, bias, residual, ctx);
        }
        let epi = self.epilogue(bias.as_ref(), residual.as_ref());
        if let Some(Tail::MaxPool(node, pool)) = self.tail.last() {
            // conv + epilogue + a VALID pool in one kernel where one applies; the pool reads
            // the conv output as it is (the fusion checked the dims between)
            let ins = [x, w];
            if let Some(window) = valid_max_pool(pool)
                && let Some(y) = self.conv.eval_fused_pool(&ins, epi, window, Some(&mut *ctx)).map_err(conv_err)?
            {
                for t in ins {
                    ctx.recycle(t);
                }
                return Ok(vec![y]);
            }
            let [x, w] = ins;
            if let Some(y) = self.eval_pool_by_images(&x, &w, epi, (*node, pool), ctx)? {
                return Ok(vec![y]);
            }
            return self.eval_split(x, w, epi, ctx);
        }
        self.eval_split(x, w, epi, ctx)
    }

    /// A pool tail over a conv output larger than [`POOL_GROUP_BYTES`] times two: the conv
    /// (with its epilogue) and the pool run a group of images at a time, each group's conv
    /// output recycled for the next group, so the pool reads it from cache instead of
    /// memory. The reshapes between are metadata (`same_nhwc`), so the pool takes the conv
    /// output `[G, OH, OW, O]` directly; the same kernels run on the same values, so the
    /// result is bit-identical to [`Self::eval_split`]'s. `None`: a single group (no gain).
    fn eval_pool_by_images(
        &self,
        x: &Tensor,
        w: &Tensor,
        epi: ConvEpilogue<'_>,
        (node, pool): (NodeId, &Op),
        ctx: &mut ExecCtx<'_>,
    ) -> Result<Option<Tensor>> {
        let conv_err = |e: Error| e.at_node(self.conv_node, self.conv.to_string());
        let pool_err = |e: Error| e.at_node(node, pool.to_string());
        let n = x.shape().first().copied().unwrap_or(0);
        if x.rank() != 4 {
            return Ok(None);
        }
        let one = TensorType::new(x.dtype(), Shape::fixed(&[&[1], &x.shape()[1..]].concat()));
        let Ok(ty) = self.conv.infer(&[one, w.tensor_type()]) else { return Ok(None) };
        let Some(per_image) = ty[0].shape.num_elements().map(|e| e * x.dtype().size()) else {
            return Ok(None);
        };
        let group = (POOL_GROUP_BYTES / per_image.max(1)).max(1);
        if n < 2 || group >= n || per_image * n < 2 * POOL_GROUP_BYTES {
            return Ok(None);
        }
        let mut out: Option<RowStack> = None;
        for n0 in (0..n).step_by(group) {
            let xg = x.slice_axis0(n0, (n0 + group).min(n)).map_err(conv_err)?;
            let y = self.conv.eval_fused(vec![xg, w.clone()], epi, Some(&mut *ctx)).map_err(conv_err)?;
            let mut pooled = pool.eval(y, ctx).map_err(pool_err)?;
            let p = pooled.pop().ok_or_else(|| Error::Verify(format!("{node}: max_pool gave no output")))?;
            for i in 0..p.shape().first().copied().unwrap_or(0) {
                let row = p.index_axis0(i).map_err(pool_err)?;
                let stack = match &mut out {
                    Some(s) => s,
                    None => {
                        // every row is written below, so a recycled buffer's stale content is fine
                        let buf = n.checked_mul(row.len()).and_then(|len| ctx.take_recycled(row.dtype(), len));
                        out.insert(RowStack::new("max_pool", n, &row, buf).map_err(pool_err)?)
                    }
                };
                stack.put("max_pool", n0 + i, &row).map_err(pool_err)?;
            }
            ctx.recycle(p);
        }
        Ok(out.map(RowStack::finish))
    }

    /// The conv kernel with its epilogue, then the remaining tail ops one by one.
    fn eval_split(&self, x: Tensor, w: Tensor, epi: ConvEpilogue<'_>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        let conv_err = |e: Error| e.at_node(self.conv_node, self.conv.to_string());
        let mut y = self.conv.eval_fused(vec![x, w], epi, Some(&mut *ctx)).map_err(conv_err)?;
        for t in &self.tail {
            match t {
                Tail::Reshape(node, op) => y = op.eval(y, ctx).map_err(|e| e.at_node(*node, op.to_string()))?,
                Tail::BiasAdd(node) => {
                    // Statically guaranteed; checked so a violated guarantee is an error.
                    if y[0].shape().last() != Some(&self.channels) {
                        return Err(Error::Verify(format!(
                            "{node}: fused bias_add input {:?} does not end in the conv's {} channels",
                            y[0].shape(),
                            self.channels
                        )));
                    }
                }
                Tail::Add(..) | Tail::Relu(_) => {}
                Tail::MaxPool(node, op) => y = op.eval(y, ctx).map_err(|e| e.at_node(*node, op.to_string()))?,
            }
        }
        Ok(y)
    }

    /// Op by op, exactly as the unfused plan would run them.
    fn eval_unfused(
        &self,
        x: Tensor,
        w: Tensor,
        bias: Option<Tensor>,
        residual: Option<Tensor>,
        ctx: &mut ExecCtx<'_>,
    ) -> Result<Vec<Tensor>> {
        let conv = Op::Conv(self.conv.clone());
        let mut y = conv.eval(vec![x, w], ctx).map_err(|e| e.at_node(self.conv_node, conv.to_string()))?;
        let (mut bias, mut residual) = (bias, residual);
        for t in &self.tail {
            let (node, op, ins) = match t {
                Tail::Reshape(node, op) => (*node, op.clone(), y),
                Tail::BiasAdd(node) => {
                    let b = bias.take().ok_or_else(|| Error::Verify("fused conv chain: no bias".into()))?;
                    let mut ins = y;
                    ins.push(b);
                    (*node, Op::Nn(NnOp::BiasAdd), ins)
                }
                Tail::Add(node, _) => {
                    let r = residual.take().ok_or_else(|| Error::Verify("fused conv chain: no residual".into()))?;
                    let mut ins = y;
                    ins.push(r);
                    (*node, Op::Binary(BinaryKind::Add), ins)
                }
                Tail::Relu(node) => (*node, Op::Unary(UnaryKind::Relu), y),
                Tail::MaxPool(node, op) => (*node, op.clone(), y),
            };
            y = op.eval(ins, ctx).map_err(|e| e.at_node(node, op.to_string()))?;
        }
        Ok(y)
    }
}

/// Both `[N, OH, OW, O]` with equal fixed `OH, OW, O` (a pool input reshaped back from the
/// conv output: the kernel can pool the conv output directly). `N` may be dynamic (a
/// vectorized body's batch): the ops between (reshapes, bias_add, relu) keep the element
/// count, so equal fixed trailing dims force equal `N` at run time, and a row-major reshape
/// to the same shape is the same layout.
fn same_nhwc(conv: &TensorType, x: &TensorType) -> bool {
    let (c, v) = (conv.shape.dims(), x.shape.dims());
    if c.len() != 4 || v.len() != 4 {
        return false;
    }
    let fixed_tail = c[1..].iter().all(|d| matches!(d, Dim::Fixed(_))) && c[1..] == v[1..];
    let batch = match (&c[0], &v[0]) {
        (Dim::Fixed(a), Dim::Fixed(b)) => a == b,
        _ => true,
    };
    fixed_tail && batch
}

/// Bytes of conv output per image group when a pool tail runs by images (about half the
/// last-level cache a core can count on, so a group's conv output is still cached when the
/// pool reads it).
const POOL_GROUP_BYTES: usize = 4 << 20;

/// The window and strides of a VALID max pool: the pools the conv kernels pool in-kernel.
fn valid_max_pool(op: &Op) -> Option<([usize; 2], [usize; 2])> {
    match op {
        Op::Conv(ConvOp::MaxPool { ksize, strides, padding: Padding::Valid }) => Some((*ksize, *strides)),
        _ => None,
    }
}

/// A chain found: (conv step, fused chain, fused-away steps after the conv, [the bias slot,
/// the residual slot]).
type Found = (usize, ConvChain, Vec<usize>, [Option<usize>; 2]);

/// The residual slot of step `st` when it is an `add` of `cur` (the chain's value) and
/// another value, all three of one fully static shape (no broadcasting).
fn residual_operand(view: &PlanView<'_>, st: &Step, cur: usize) -> Option<usize> {
    if !matches!(st.op, Op::Binary(BinaryKind::Add)) || st.inputs.len() != 2 || st.out_types.len() != 1 {
        return None;
    }
    let (a, b) = (st.inputs[0].0, st.inputs[1].0);
    let other = match (a == cur, b == cur) {
        (true, false) => b,
        (false, true) => a,
        _ => return None,
    };
    let ty = &st.out_types[0];
    let same = |v: usize| view.value_type(v).is_some_and(|t| t.dtype == ty.dtype && t.shape == ty.shape);
    (ty.shape.as_fixed().is_some() && same(cur) && same(other)).then_some(other)
}

/// Fuse every eligible conv chain in `steps` (before slot releases are computed); `pinned`
/// are the fetched slots. A conv with a constant filter holds it in its kernel's form
/// (`kernels`: the optional kernels that may be that kernel; a conv without a tail then
/// becomes a chain of its own, with an empty tail).
pub(crate) fn conv_chains(steps: &mut Vec<Step>, pinned: &HashSet<usize>, kernels: crate::kernels::KernelOptions) {
    // Match every chain first (on the unchanged plan), then rewrite.
    let view = PlanView::new(steps, pinned);
    let mut found: Vec<Found> = Vec::new();
    // Steps in a chain found so far: an `add` of two conv chains' results (a projection
    // shortcut) belongs to the first chain only, the other's result is its residual.
    let mut claimed: HashSet<usize> = HashSet::new();
    for a in 0..steps.len() {
        let Some(Op::Conv(conv @ ConvOp::Conv2D { .. })) = view.op(a) else { continue };
        if steps[a].outputs.len() != 1 || steps[a].inputs.len() != 2 {
            continue;
        }
        let Some(Dim::Fixed(channels)) = steps[a].out_types[0].shape.dims().last().cloned() else { continue };
        let conv_ty = steps[a].out_types[0].clone();
        let (mut cur, mut cur_ty) = (steps[a].outputs[0], steps[a].out_types[0].clone());
        let (mut tail, mut chain, mut bias, mut residual) = (Vec::new(), Vec::new(), None, None);
        // Length of `tail` / `chain` up to the last bias_add, add or relu.
        let mut keep = 0;
        while let Some(c) = sole_reader(&view, cur) {
            let st = &steps[c];
            if st.outputs.len() != 1 || claimed.contains(&c) {
                break;
            }
            let relu_seen = tail.iter().any(|t| matches!(t, Tail::Relu(_)));
            if let Some(r) = residual_operand(&view, st, cur).filter(|_| residual.is_none() && !relu_seen) {
                residual = Some(r);
                let shape = st.out_types[0].shape.as_fixed().expect("checked fixed");
                tail.push(Tail::Add(st.node, shape));
                keep = tail.len();
                chain.push(c);
                (cur, cur_ty) = (st.outputs[0], st.out_types[0].clone());
                continue;
            }
            if st.inputs.first().map(|i| i.0) != Some(cur) {
                break;
            }
            match &st.op {
                Op::Shape(ShapeOp::Reshape { .. }) if st.inputs.len() == 1 => {
                    tail.push(Tail::Reshape(st.node, st.op.clone()))
                }
                Op::Nn(NnOp::BiasAdd)
                    if st.inputs.len() == 2
                        && bias.is_none()
                        && !relu_seen
                        && st.inputs[1].0 != cur
                        && cur_ty.shape.dims().last() == Some(&Dim::Fixed(channels)) =>
                {
                    bias = Some(st.inputs[1].0);
                    tail.push(Tail::BiasAdd(st.node));
                    keep = tail.len();
                }
                Op::Unary(UnaryKind::Relu) if !relu_seen => {
                    tail.push(Tail::Relu(st.node));
                    keep = tail.len();
                }
                Op::Conv(ConvOp::MaxPool { .. })
                    if relu_seen && residual.is_none() && st.inputs.len() == 1 && same_nhwc(&conv_ty, &cur_ty) =>
                {
                    tail.push(Tail::MaxPool(st.node, st.op.clone()));
                    keep = tail.len();
                    chain.push(c);
                    break;
                }
                _ => break,
            }
            chain.push(c);
            (cur, cur_ty) = (st.outputs[0], st.out_types[0].clone());
        }
        let prepared = crate::exec::pretranspose::prepared_filter(steps, view.producers(), a, kernels).map(Arc::new);
        if keep == 0 && prepared.is_none() {
            continue;
        }
        tail.truncate(keep);
        chain.truncate(keep);
        claimed.extend(chain.iter().copied());
        // The bias and the residual are computed before the bias_add and the add
        // (topological order), hence before the chain's last step.
        let early = |v: Option<usize>| v.is_none_or(|b| view.producer(b).is_none_or(|p| p < chain[keep - 1]));
        debug_assert!(keep == 0 || (early(bias) && early(residual)));
        let fused = ConvChain { conv_node: steps[a].node, conv: conv.clone(), channels, tail, filter: prepared };
        found.push((a, fused, chain, [bias, residual]));
    }
    let mut removed = vec![false; steps.len()];
    for (a, fused, chain, extra) in found {
        // an empty chain: the conv step itself becomes the fused step
        let (last, before) = chain.split_last().map_or((a, &[][..]), |(&l, b)| (l, b));
        let mut inputs = steps[a].inputs.clone();
        for v in extra.into_iter().flatten() {
            inputs.push((v, false));
        }
        let st = &mut steps[last];
        st.inputs = inputs;
        st.fused = Some(Box::new(super::Fused::Conv(fused)));
        removed[a] = last != a;
        for &c in before {
            removed[c] = true;
        }
    }
    super::remove_steps(steps, &removed);
}
