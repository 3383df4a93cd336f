//! Converters for reductions, arg-reductions and scans: the op runs on the stacked value
//! with its axes renumbered past the loop axis (non-negative axes shift by one; negative
//! axes count from the end and are unchanged).

use crate::Result;
use crate::ops::{Op, OpKind, ReduceKind, ReduceOp};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry, Wrapped};

/// Shift a per-iteration axis past the loop axis.
pub(crate) fn shift(axis: i64) -> i64 {
    if axis >= 0 { axis + 1 } else { axis }
}

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Reduce(op) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not a reduction");
    };
    let shifted = match op {
        ReduceOp::Sum { axes, keep_dims } => ReduceOp::Sum { axes: axes.into_iter().map(shift).collect(), keep_dims },
        ReduceOp::Mean { axes, keep_dims } => ReduceOp::Mean { axes: axes.into_iter().map(shift).collect(), keep_dims },
        ReduceOp::Prod { axes, keep_dims } => ReduceOp::Prod { axes: axes.into_iter().map(shift).collect(), keep_dims },
        ReduceOp::Max { axes, keep_dims } => ReduceOp::Max { axes: axes.into_iter().map(shift).collect(), keep_dims },
        ReduceOp::Min { axes, keep_dims } => ReduceOp::Min { axes: axes.into_iter().map(shift).collect(), keep_dims },
        ReduceOp::All { axes, keep_dims } => ReduceOp::All { axes: axes.into_iter().map(shift).collect(), keep_dims },
        ReduceOp::Any { axes, keep_dims } => ReduceOp::Any { axes: axes.into_iter().map(shift).collect(), keep_dims },
        ReduceOp::LogSumExp { axes, keep_dims } => {
            ReduceOp::LogSumExp { axes: axes.into_iter().map(shift).collect(), keep_dims }
        }
        ReduceOp::ArgMax { axis } => ReduceOp::ArgMax { axis: shift(axis) },
        ReduceOp::ArgMin { axis } => ReduceOp::ArgMin { axis: shift(axis) },
        ReduceOp::CumSum { axis, exclusive, reverse } => ReduceOp::CumSum { axis: shift(axis), exclusive, reverse },
        ReduceOp::CumProd { axis, exclusive, reverse } => ReduceOp::CumProd { axis: shift(axis), exclusive, reverse },
    };
    let x = ctx.stacked(0)?;
    let y = ctx.add(Op::Reduce(shifted), &[x])?;
    ConvertCtx::done(vec![Wrapped::stacked(y)])
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in ReduceKind::ALL {
        r.register(OpKey::Builtin(OpKind::Reduce(*k)), convert);
    }
}
