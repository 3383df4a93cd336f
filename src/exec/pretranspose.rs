//! Constant right operands of `matmul` in row-major order: a plan rewrite, made when a
//! session compiles (after any differentiation, which only ever sees the graph).
//!
//! Derivative rules are symbolic (`src/autodiff/rules`): the VJP of `A · W` is `C̄ · Wᵀ`, a
//! `matmul` reading `W` with `transpose_b`, so differentiating again still reaches `W`. A
//! GEMM reading its right operand transposed is slower than one reading it in row-major
//! order (W5, the LSTM jacobian: `C̄ Wᵀ` with a constant weight in every backward step).
//! When that operand is a constant, its layout is ours to choose: the plan holds a
//! row-major copy of `op(W)`, computed once here, and the step reads it with the flag off.
//! Likewise a constant stored as a view (a folded `transpose` or `slice`), which the kernel
//! would otherwise copy to row-major on every run.
//!
//! Fires for a `matmul` step (not fused) whose right operand is produced by a `Const` step
//! holding a rank-2 float tensor where `op(W)` (`Wᵀ` with `transpose_b`, `W` without) is
//! not already row-major in memory — except for a one-row product (a vector times `W`)
//! reading a `W` that is contiguous in either order: each output is then a contiguous dot
//! product, as fast as or faster than the row-major form (W5's loop baseline, made of such
//! products: 33.3 ms CPU per run reading a row-major `Wᵀ`, 30.8 reading `W` transposed).
//! The same holds for the constant operands of the conv family (filters, above all): the
//! kernels read row-major slices, and a filter stored as a view — ONNX's `[O, C, KH, KW]`
//! weights reach `conv2d` as a folded `transpose` to `[KH, KW, C, O]` — was copied to
//! row-major on every run, element by element across the whole filter (ResNet-50 light at
//! n = 1: a 1x1 conv `[7,7,512] -> 2048` took 3.5 ms where its GEMM takes 0.44). A conv
//! step reads a row-major copy of every constant operand not already stored that way, and
//! of every `transpose` of a constant (filters above the fold pass's size limit, whose
//! transpose would otherwise run, and the conv copy its result, on every run).
//! `ExecOptions::pretranspose` (`PFOR_NO_PRETRANSPOSE=1`) turns the rewrite off (A/B timing).
//!
//! A constant conv filter that the Winograd kernel will multiply by (3x3 and 5x5 stride-1
//! f32 convs, see `kernels::conv::winograd`) is also transformed here, once per plan
//! ([`winograd_filter`]): the fused conv step holds the transform and hands it to the kernel,
//! which otherwise transforms its filter on every call (36 x C x O values from a 9 or 25
//! tap filter: ResNet-50's 3x3 layers at n = 1 spent about as long on it as on the conv).
//!
//! Invariants:
//! - each product is unchanged: the copy holds exactly the elements of `op(W)`, so every
//!   output element is the same dot product over the same `k` terms (the GEMM may block
//!   the sum differently for a different layout, as for any layout change);
//! - one copy per constant step and flag, shared by every matmul reading the constant with
//!   that flag (and by every conv step reading it: their copy is `op(W)` without the flag); copies take the constant's place in the plan (before all its readers), and
//!   the original step stays only if something else still reads it or it is fetched;
//! - the copy step is attributed to the constant's node, and its type is the static type
//!   of `op(W)` (fully known: a constant).

use hashbrown::{HashMap, HashSet};

use super::Step;
use std::borrow::Cow;

use crate::kernels::conv::Geom;
use crate::kernels::conv::PreparedFilter;
use crate::kernels::conv::winograd::Prepared;
use crate::ops::{ConvOp, LinearOp, Op, ShapeOp};
use crate::tensor::{Dim, Shape, Tensor, TensorType};

/// Rewrite every eligible `matmul` and conv step of `steps` (before fusion); new slots are
/// numbered from `*n_slots` on.
pub(super) fn pretranspose_constants(steps: &mut Vec<Step>, n_slots: &mut usize, pinned: &HashSet<usize>) {
    let (readers, producer) = super::fuse::slot_maps(steps);
    // (constant slot, transpose_b) -> slot of the row-major copy of op(W)
    let mut copy_of: HashMap<(usize, bool), usize> = HashMap::new();
    // constant step index -> its copy steps
    let mut copies: HashMap<usize, Vec<Step>> = HashMap::new();
    // constant slot -> reads moved to the copy
    let mut moved: HashMap<usize, usize> = HashMap::new();
    for si in 0..steps.len() {
        let st = &steps[si];
        if st.fused.is_some() {
            continue;
        }
        // (operand index, its transpose flag, the step's op reading the copy)
        let operands: Vec<(usize, bool, Op)> = match st.op {
            Op::Linear(LinearOp::MatMul { transpose_a, transpose_b }) if st.inputs.len() == 2 => {
                vec![(1, transpose_b, Op::Linear(LinearOp::MatMul { transpose_a, transpose_b: false }))]
            }
            Op::Conv(_) => (0..st.inputs.len()).map(|j| (j, false, st.op.clone())).collect(),
            _ => continue,
        };
        let conv = matches!(st.op, Op::Conv(_));
        let one_row = st.out_types.first().is_some_and(|t| t.shape.dims().first() == Some(&Dim::Fixed(1)));
        for (j, transposed, op) in operands {
            let b = steps[si].inputs[j].0;
            let Some(&p) = producer.get(&b) else { continue };
            let Some(value) = known_value(steps, &producer, p, conv) else { continue };
            if steps[p].outputs.len() != 1 {
                continue;
            }
            let slot = match copy_of.get(&(b, transposed)) {
                Some(&s) => s,
                None => {
                    let copy = match value {
                        _ if !conv => row_major_operand(&value, transposed, one_row),
                        Cow::Borrowed(v) => standard_operand(v),
                        Cow::Owned(v) => Some(standard_operand(&v).unwrap_or(v)),
                    };
                    let Some(t) = copy else { continue };
                    let s = *n_slots;
                    *n_slots += 1;
                    let ty = TensorType::new(t.dtype(), Shape::fixed(t.shape()));
                    copies.entry(p).or_default().push(Step {
                        node: steps[p].node,
                        op: Op::Const { value: t },
                        inputs: Vec::new(),
                        outputs: vec![s],
                        out_types: vec![ty],
                        release: Vec::new(),
                        fused: None,
                    });
                    copy_of.insert((b, transposed), s);
                    s
                }
            };
            let st = &mut steps[si];
            st.op = op;
            st.inputs[j].0 = slot;
            *moved.entry(b).or_default() += 1;
        }
    }
    if copies.is_empty() {
        return;
    }
    let old = std::mem::take(steps);
    for (i, st) in old.into_iter().enumerate() {
        let Some(new) = copies.remove(&i) else {
            steps.push(st);
            continue;
        };
        let b = st.outputs[0];
        let still_read = readers.get(&b).map_or(0, Vec::len) > moved.get(&b).copied().unwrap_or(0);
        if still_read || pinned.contains(&b) {
            steps.push(st);
        }
        steps.extend(new);
    }
}

/// `op(w)` as a row-major tensor, if `w` is a rank-2 float tensor, `op(w)` (`wᵀ` when
/// `transpose`) is not already row-major in memory, and the product has more than one row
/// (`!one_row`) or `w` is not contiguous in either order; `None` otherwise.
fn row_major_operand(w: &Tensor, transpose: bool, one_row: bool) -> Option<Tensor> {
    if w.rank() != 2 {
        return None;
    }
    crate::dispatch_float!(w.dtype(), T => {
        let a = w.array::<T>().ok()?;
        let v = if transpose { a.t() } else { a.view() };
        let in_place = a.is_standard_layout() || a.t().is_standard_layout();
        if v.is_standard_layout() || (one_row && in_place) {
            return None;
        }
        Some(Tensor::from_array(v.as_standard_layout().into_owned()))
    }, _ => None)
}

/// The value step `p` computes, where it is known at compile time: a `Const` step's, and
/// for a conv operand also a `transpose` of one (a filter larger than the fold pass folds,
/// see `passes::fold`: the transpose, computed here once, would run on every run).
fn known_value<'a>(
    steps: &'a [Step],
    producer: &HashMap<usize, usize>,
    p: usize,
    conv: bool,
) -> Option<Cow<'a, Tensor>> {
    match &steps[p].op {
        Op::Const { value } => Some(Cow::Borrowed(value)),
        op @ Op::Shape(ShapeOp::Transpose { .. }) if conv && steps[p].inputs.len() == 1 => {
            let &q = producer.get(&steps[p].inputs[0].0)?;
            let Op::Const { value } = &steps[q].op else { return None };
            let mut out = super::eval_detached(op, vec![value.clone()]).ok()?;
            (out.len() == 1).then(|| Cow::Owned(out.remove(0)))
        }
        _ => None,
    }
}

/// `w` in standard (row-major) layout, if it is a float tensor stored otherwise (a view).
fn standard_operand(w: &Tensor) -> Option<Tensor> {
    crate::dispatch_float!(w.dtype(), T => {
        let a = w.array::<T>().ok()?;
        (!a.is_standard_layout()).then(|| Tensor::from_array(crate::tensor::layout::standard_array(&a.view())))
    }, _ => None)
}

/// Conv step `si`'s constant filter in the form its kernel multiplies by, made now: the
/// Winograd transform where that kernel will take the conv (`kernels.winograd`: it may), else
/// the `[KH*KW*C, O]` filter in the panels of the in-place GEMM where the implicit-GEMM conv
/// takes the conv (`kernels::conv::implicit`: f32 over more than 4 channels, AVX-512) or the
/// in-place GEMM its products (`kernels::gemm::ab_applies`): both sum in one order whatever
/// form the filter has, so the panels change no bit, and their weight-bound products at
/// small batches read the panels as one stream each. Deeper GEMMs (faer) keep the row-major
/// filter: panels there would change the rounding against the same conv with a fed filter,
/// which the fused / unfused and batched / per-example equalities rule out.
pub(super) fn prepared_filter(
    steps: &[Step],
    producer: &HashMap<usize, usize>,
    si: usize,
    kernels: crate::kernels::KernelOptions,
) -> Option<PreparedFilter> {
    let st = &steps[si];
    let Op::Conv(ConvOp::Conv2D { .. }) = &st.op else { return None };
    if let Some(p) = kernels.winograd.then(|| winograd_filter(steps, producer, si, kernels)).flatten() {
        return Some(PreparedFilter::Winograd(p));
    }
    let Op::Const { value: w } = &steps[*producer.get(&st.inputs.get(1)?.0)?].op else { return None };
    let xt = slot_type(steps, producer, st.inputs.first()?.0)?;
    let ws = w.shape();
    if xt.dtype != crate::tensor::DType::F32 || w.dtype() != crate::tensor::DType::F32 || ws.len() != 4 {
        return None;
    }
    let (k, n) = (ws[0] * ws[1] * ws[2], ws[3]);
    let implicit = kernels.implicit_gemm && crate::kernels::conv::implicit::takes(ws[2], n);
    if !implicit && !<f32 as crate::kernels::gemm::GemmElem>::in_place(1, k, n) {
        return None;
    }
    let a = w.array::<f32>().ok()?;
    let a = a.as_standard_layout();
    crate::kernels::gemm::Panels::new(k, n, a.as_slice()?).map(PreparedFilter::Panels)
}

/// The static type of slot `s` (its producing step's output type).
fn slot_type<'a>(steps: &'a [Step], producer: &HashMap<usize, usize>, s: usize) -> Option<&'a TensorType> {
    let p = &steps[*producer.get(&s)?];
    p.outputs.iter().position(|&o| o == s).map(|k| &p.out_types[k])
}

/// The Winograd transform of conv step `si`'s filter, made now, where the filter is a
/// constant (a `Const` step) and the Winograd kernel will take the conv: f32, a static input
/// shape (or one whose batch alone is dynamic) whose geometry the kernel applies to and, with
/// a static batch, its cost rule picks.
fn winograd_filter(
    steps: &[Step],
    producer: &HashMap<usize, usize>,
    si: usize,
    kernels: crate::kernels::KernelOptions,
) -> Option<Prepared> {
    let st = &steps[si];
    let Op::Conv(conv @ ConvOp::Conv2D { params }) = &st.op else { return None };
    let (&(xs, _), &(ws, _)) = (st.inputs.first()?, st.inputs.get(1)?);
    let Op::Const { value: w } = &steps[*producer.get(&ws)?].op else { return None };
    let xt = slot_type(steps, producer, xs)?;
    let dims = xt.shape.dims();
    if xt.dtype != crate::tensor::DType::F32
        || w.dtype() != crate::tensor::DType::F32
        || dims.len() != 4
        || w.rank() != 4
    {
        return None;
    }
    let fixed = |d: &Dim| match d {
        Dim::Fixed(v) => Some(*v),
        Dim::Dynamic(_) => None,
    };
    let n = fixed(&dims[0]);
    let x = [n.unwrap_or(1), fixed(&dims[1])?, fixed(&dims[2])?, fixed(&dims[3])?];
    let ws = w.shape();
    let g = Geom::new(conv.kind().name(), x, [ws[0], ws[1]], ws[3], params.strides, params.dilations, params.padding)
        .ok()?;
    if ws[2] != g.c || (n.is_some() && !crate::kernels::conv::winograd::profitable(&g, kernels)) {
        return None;
    }
    let a = w.array::<f32>().ok()?;
    let a = a.as_standard_layout();
    Prepared::new(&g, a.as_slice()?)
}
