//! The converter of a reference loop (`For`) inside pfor: the loops are interchanged.
//!
//! A `For` node runs its body (params `[i] ++ captures`) for `i in 0..n` and stacks the
//! results on a new axis 0. It appears inside a pfor body when a chunked `pfor` (its chunks
//! run by a `For`), a `map_fn` or a `for_loop` is nested in a pfor. With a loop-invariant
//! trip count `n`, the converted node is ONE `For` over the same `n` whose body is the
//! original body converted for the enclosing loop (the outer loop's `n` and `index` are
//! passed in as parameters, like the loop-invariant `while` form): per step it computes
//! all outer iterations at once, so a chunked pfor keeps its memory bound per chunk. A
//! stacked result comes out as `[n, outer, ...]` and is transposed to `[outer, n, ...]`;
//! a result the converted body leaves loop-invariant stays `[n, ...]`, unstacked.
//!
//! A per-iteration trip count (a stacked `n`) is declined: the per-op fallback runs it.

use std::cell::RefCell;
use std::sync::Arc;

use super::{inner_info, ty};
use crate::error::Result;
use crate::ir::{Function, ValueId};
use crate::ops::{ControlOp, Op};
use crate::tensor::{DType, Shape, TensorType};
use crate::vectorize::{ConvertCtx, Converted, Wrapped, convert_function};

pub(super) fn convert(ctx: &mut ConvertCtx<'_>, body: &Function, static_n: Option<usize>) -> Result<Converted> {
    if ctx.is_stacked(0) {
        return ConvertCtx::unhandled("a reference loop with a per-iteration trip count");
    }
    let info = ctx.loop_info().clone();
    let options = ctx.options().clone();
    let n = ctx.input(0).value;
    let captures: Vec<Wrapped> = ctx.inputs()[1..].to_vec();
    let g = ctx.graph();
    // params: the step `i`, the outer loop's `n` and `index`, then the captures
    let mut types = vec![TensorType::new(DType::I64, Shape::scalar()), ty(g, info.n)?, ty(g, info.index)?];
    let mut inputs = vec![n, info.n, info.index];
    for w in &captures {
        types.push(ty(g, w.value)?);
        inputs.push(w.value);
    }
    let stacked: RefCell<Vec<bool>> = RefCell::new(Vec::new());
    let f = Function::build(g, &types, |sub, p| {
        let i2 = inner_info(&info, p[1], p[2]);
        let mut args = vec![Wrapped::unstacked(p[0])];
        args.extend(p[3..].iter().zip(&captures).map(|(v, w)| Wrapped { value: *v, stacked: w.stacked }));
        let r = convert_function(sub, body, &args, &i2, &options)?;
        *stacked.borrow_mut() = r.iter().map(|w| w.stacked).collect();
        Ok(r.into_iter().map(|w| w.value).collect())
    })?;
    let outs = g.add_op_multi(Op::Control(ControlOp::For { body: Arc::new(f), static_n }), &inputs)?;
    let mut res = Vec::with_capacity(outs.len());
    for (v, s) in outs.into_iter().zip(stacked.into_inner()) {
        res.push(if s { Wrapped::stacked(swap_first_two(g, v)?) } else { Wrapped::unstacked(v) });
    }
    ConvertCtx::done(res)
}

fn swap_first_two(g: &mut crate::ir::Graph, v: ValueId) -> Result<ValueId> {
    let r = g.shape(v)?.rank();
    let mut perm = vec![1, 0];
    perm.extend(2..r);
    g.transpose(v, &perm)
}
