//! Plan-level fusion: a `concat` on the last axis (channels) whose inputs include results of
//! conv chains (see [`super::conv`]; a bare `conv2d` counts as a chain with nothing after
//! it) runs as ONE step that allocates the concat's output and has each conv kernel write
//! its channels `[off, off + O)` of every output pixel row directly (row stride = the total
//! channels), so the concat copies none of the conv results: SqueezeNet's fire modules
//! (`expand1x1 ‖ expand3x3`) and any user graph with `conv → relu → concat`. Inputs that
//! are not conv chains are copied into their slices.
//!
//! Invariants:
//! - a chain's result joins the step only when the concat is its only reader and it is not
//!   fetched (no one can observe that it never exists), the chain does not end in a max pool,
//!   and its static last dim is the conv's output channels (the reshapes between keep the
//!   channel axis last, so its rows are the conv output's pixels, in order);
//! - the fused step takes the concat's position in the plan, after every input of every
//!   chain (they preceded the chains' steps) and before every reader of the concat; slot
//!   releases are computed after fusion;
//! - the conv parts run in their original plan order, then the other inputs are copied;
//!   between them they write every element of the output (a recycled buffer's stale
//!   content never shows);
//! - results are bit-identical to the unfused plan: each kernel computes the same values
//!   (the same GEMMs and epilogue; a GEMM chunk is written densely to a scratch buffer and
//!   copied into the slice where the kernel cannot write strided rows), and the concat is
//!   a copy;
//! - where the operands do not fit (an op's shape check fails, a part's operands are not
//!   what the fused kernel takes), the parts run op by op and the concat op joins them, so
//!   every error is the unfused one, naming the node that raised it.

use hashbrown::HashSet;

use super::PlanView;
use super::conv::ConvChain;
use crate::error::{Error, Result};
use crate::exec::{ExecCtx, Step};
use crate::ir::NodeId;
use crate::kernels::conv::{Dst, Float, OutBuf};
use crate::ops::{ConvOp, Op, SlicingOp};
use crate::passes::pattern::{Dataflow, sole_reader};
use crate::tensor::{DType, Dim, Tensor, TensorType};

/// One input of the fused concat.
#[derive(Clone, Debug)]
enum Part {
    /// A conv chain, computed into its slice (its step's inputs, [`ConvChain::arity`] of
    /// them).
    Conv(ConvChain),
    /// A value computed elsewhere (one input), copied into its slice.
    Value,
}

impl Part {
    fn arity(&self) -> usize {
        match self {
            Part::Conv(c) => c.arity(),
            Part::Value => 1,
        }
    }
}

/// A concat whose conv inputs write straight into its output (the step's inputs are each
/// part's inputs, in the concat's input order).
#[derive(Clone, Debug)]
pub(crate) struct ConcatSlices {
    node: NodeId,
    op: Op,
    parts: Vec<Part>,
    /// The conv parts (indices into `parts`) in their original plan order.
    order: Vec<usize>,
}

impl ConcatSlices {
    /// The group as text, e.g. `conv2d{..} → relu ‖ conv2d{..} → relu → concat{axis=3}`.
    pub(crate) fn describe(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|p| match p {
                Part::Conv(c) => c.describe(),
                Part::Value => "value".into(),
            })
            .collect();
        format!("{} → {}", parts.join(" ‖ "), self.op)
    }

    /// Run the group; errors are already attributed to the node that raised them.
    pub(crate) fn eval(&self, ins: Vec<Tensor>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        let want: usize = self.parts.iter().map(Part::arity).sum();
        if ins.len() != want {
            return Err(Error::Verify(format!("fused concat: {} inputs, expected {want}", ins.len())));
        }
        let mut it = ins.into_iter();
        let groups: Vec<Vec<Tensor>> = self.parts.iter().map(|p| it.by_ref().take(p.arity()).collect()).collect();
        let types: Option<Vec<TensorType>> = self
            .parts
            .iter()
            .zip(&groups)
            .map(|(p, g)| match p {
                Part::Conv(c) => c.result_type(g),
                Part::Value => Some(g[0].tensor_type()),
            })
            .collect();
        let out = types.as_ref().and_then(|t| Some((self.op.infer(t).ok()?.pop()?, t)));
        match out {
            Some((ty, types))
                if ty.shape.as_fixed().is_some() && types.iter().all(|t| t.shape.as_fixed().is_some()) =>
            {
                let shape = ty.shape.as_fixed().expect("checked fixed");
                let widths: Vec<usize> =
                    types.iter().map(|t| t.shape.dims().last().and_then(Dim::value).unwrap_or(0)).collect();
                crate::dispatch_float!(ty.dtype, T => self.eval_into::<T>(groups, &shape, &widths, ctx),
                    _ => self.eval_parts(groups, ctx))
            }
            _ => self.eval_parts(groups, ctx),
        }
    }

    /// The output `shape` (its last dim the sum of `widths`, one per part) with every part
    /// written into its channel slice.
    fn eval_into<T: Float>(
        &self,
        groups: Vec<Vec<Tensor>>,
        shape: &[usize],
        widths: &[usize],
        ctx: &mut ExecCtx<'_>,
    ) -> Result<Vec<Tensor>> {
        let len: usize = shape.iter().product();
        let stride = *shape.last().expect("concat of rank ≥ 1");
        if stride == 0 || widths.iter().sum::<usize>() != stride {
            return self.eval_parts(groups, ctx);
        }
        let mut out = OutBuf(ctx.recycled::<T>(len)).overwritten(len);
        let offs: Vec<usize> = widths.iter().scan(0, |s, &w| Some(std::mem::replace(s, *s + w))).collect();
        let mut groups: Vec<Option<Vec<Tensor>>> = groups.into_iter().map(Some).collect();
        for &i in &self.order {
            let (Part::Conv(c), Some(g)) = (&self.parts[i], groups[i].take()) else { continue };
            let dst = Dst { stride, off: offs[i] };
            if let Some(y) = c.eval_into::<T>(g, &mut out, dst, ctx)? {
                copy_into(&y, widths[i], dst, &mut out)?;
            }
        }
        for (i, g) in groups.iter().enumerate() {
            if let (Part::Value, Some(g)) = (&self.parts[i], g) {
                copy_into(&g[0], widths[i], Dst { stride, off: offs[i] }, &mut out)?;
            }
        }
        Ok(vec![Tensor::from_vec(shape, out)?])
    }

    /// Op by op, exactly as the unfused plan would run them: the chains in plan order, then
    /// the concat op.
    fn eval_parts(&self, groups: Vec<Vec<Tensor>>, ctx: &mut ExecCtx<'_>) -> Result<Vec<Tensor>> {
        let mut groups: Vec<Option<Vec<Tensor>>> = groups.into_iter().map(Some).collect();
        let mut vals: Vec<Option<Tensor>> = vec![None; self.parts.len()];
        for &i in &self.order {
            if let (Part::Conv(c), Some(g)) = (&self.parts[i], groups[i].take()) {
                vals[i] = c.eval(g, ctx)?.pop();
            }
        }
        let mut ins = Vec::with_capacity(vals.len());
        for (v, g) in vals.into_iter().zip(groups) {
            match v.or_else(|| g.and_then(|mut g| g.pop())) {
                Some(t) => ins.push(t),
                None => return Err(Error::Verify("fused concat: a part has no value".into())),
            }
        }
        self.op.eval(ins, ctx).map_err(|e| e.at_node(self.node, self.op.to_string()))
    }
}

/// Copy `t` (rows of `o` values) into the channel slice `dst` of `out`.
fn copy_into<T: Float>(t: &Tensor, o: usize, dst: Dst, out: &mut [T]) -> Result<()> {
    let a = t.array::<T>()?.as_standard_layout();
    let src = a.as_slice().ok_or_else(|| Error::Verify("fused concat: non-contiguous part".into()))?;
    if !dst.fits(src.len().checked_div(o).unwrap_or(0), o, out.len()) {
        return Err(Error::Verify(format!("fused concat: a part of {} values does not fill {dst:?}", src.len())));
    }
    dst.scatter(src, o, out);
    Ok(())
}

/// The conv chain producing `v` when the concat `ci` is its only reader, `v` is not
/// fetched, and the chain's result keeps the conv output's channels last (rank ≥ 1).
fn conv_part(steps: &[Step], view: &PlanView<'_>, v: usize, ci: usize) -> Option<(usize, ConvChain)> {
    if sole_reader(view, v) != Some(ci) {
        return None;
    }
    let p = view.producer(v)?;
    let st = &steps[p];
    if st.outputs.len() != 1 {
        return None;
    }
    let chain = match (&st.fused, &st.op) {
        (Some(f), _) => match &**f {
            super::Fused::Conv(c) if !c.pools() => c.clone(),
            _ => return None,
        },
        (None, Op::Conv(conv @ ConvOp::Conv2D { .. })) if st.inputs.len() == 2 => {
            let Some(Dim::Fixed(o)) = st.out_types[0].shape.dims().last().cloned() else { return None };
            ConvChain::bare(st.node, conv.clone(), o)
        }
        _ => return None,
    };
    let last = st.out_types[0].shape.dims().last().cloned();
    (last == Some(Dim::Fixed(chain.channels())) && st.inputs.len() == chain.arity()).then_some((p, chain))
}

/// Fuse every eligible concat in `steps` (after the conv chains are fused, before slot
/// releases are computed); `pinned` are the fetched slots.
pub(crate) fn concat_slices(steps: &mut Vec<Step>, pinned: &HashSet<usize>) {
    let view = PlanView::new(steps, pinned);
    // (concat step, fused group, its inputs, the chain steps it takes in)
    let mut found = Vec::new();
    for ci in 0..steps.len() {
        let Some(op @ Op::Slicing(SlicingOp::Concat { axis })) = view.op(ci) else { continue };
        let st = &steps[ci];
        let ty = &st.out_types[0];
        let rank = ty.shape.dims().len() as i64;
        if st.outputs.len() != 1
            || st.inputs.len() < 2
            || !matches!(ty.dtype, DType::F32 | DType::F64)
            || rank == 0
            || (*axis != rank - 1 && *axis != -1)
        {
            continue;
        }
        let (mut parts, mut inputs, mut chains) = (Vec::new(), Vec::new(), Vec::new());
        for &(v, _) in &st.inputs {
            match conv_part(steps, &view, v, ci) {
                Some((p, chain)) => {
                    parts.push(Part::Conv(chain));
                    inputs.extend(steps[p].inputs.iter().copied());
                    chains.push((p, parts.len() - 1));
                }
                None => {
                    parts.push(Part::Value);
                    inputs.push((v, false));
                }
            }
        }
        if chains.is_empty() {
            continue;
        }
        chains.sort_unstable();
        let order = chains.iter().map(|&(_, i)| i).collect();
        let fused = ConcatSlices { node: st.node, op: op.clone(), parts, order };
        found.push((ci, fused, inputs, chains.into_iter().map(|(p, _)| p).collect::<Vec<_>>()));
    }
    let mut removed = vec![false; steps.len()];
    for (ci, fused, inputs, chains) in found {
        let st = &mut steps[ci];
        st.inputs = inputs;
        st.fused = Some(Box::new(super::Fused::Concat(fused)));
        for p in chains {
            removed[p] = true;
        }
    }
    super::remove_steps(steps, &removed);
}
