//! Converters for linear algebra: every op is batched over leading dims, so a stacked
//! operand is just one more batch dim. Two-operand solves take an invariant matrix with
//! stacked right-hand sides by folding the loop into the columns (one factorization);
//! other mixed patterns tile the invariant operand (the kernels need equal batch dims).

use crate::Result;
use crate::ops::{LinalgKind, LinalgOp, Op, OpKind};
use crate::vectorize::{ConvertCtx, Converted, OpKey, Registry};

fn convert(ctx: &mut ConvertCtx<'_>) -> Result<Converted> {
    let Op::Linalg(op) = ctx.op().clone() else {
        return ConvertCtx::unhandled("not a linalg op");
    };
    let two = matches!(op, LinalgOp::Solve { .. } | LinalgOp::TriangularSolve { .. });
    if two
        && !ctx.is_stacked(0)
        && ctx.input_type(1).rank() == 2
        && let Some(d) = ctx.input_type(1).shape.as_fixed()
    {
        {
            // b_i [m, k] for all i -> [m, n*k]; one solve; back to [n, m, k]
            let (a, b) = (ctx.input(0).value, ctx.input(1).value);
            let g = ctx.graph();
            let bt = g.transpose(b, &[1, 0, 2])?;
            let b2 = g.reshape(bt, &[d[0] as i64, -1])?;
            let x = g.add_op(Op::Linalg(op), &[a, b2])?;
            let x3 = g.reshape(x, &[d[0] as i64, -1, d[1] as i64])?;
            let y = g.transpose(x3, &[1, 0, 2])?;
            return Converted::stacked(y);
        }
    }
    let mut ins = Vec::with_capacity(ctx.num_inputs());
    for k in 0..ctx.num_inputs() {
        ins.push(ctx.stacked(k)?);
    }
    let y = ctx.add(Op::Linalg(op), &ins)?;
    Converted::stacked(y)
}

/// Register the family's converters.
pub fn register(r: &mut Registry) {
    for k in LinalgKind::ALL {
        r.register(OpKey::Builtin(OpKind::Linalg(*k)), convert);
    }
}
