//! ONNX `Pad` modes our `pad` op does not have: `edge` (repeat the border element) and `wrap`
//! (circular), composed per padded axis from slices and a concat, so derivatives and `pfor`
//! come from those parts.
//!
//! Invariants: the padded axes have static sizes; `wrap` pads are at most the axis size (a
//! larger one is an `Unsupported` error naming the op, node and axis); `edge` on an empty
//! axis with a nonzero pad is an invalid model.

use super::convert::NodeCx;
use crate::error::Result;
use crate::ir::{Graph, ValueId};

/// `x` padded by `pads` (before, after per axis) in mode `edge` or `wrap`.
pub(super) fn edge_or_wrap(
    g: &mut Graph,
    n: &NodeCx,
    x: ValueId,
    pads: &[(usize, usize)],
    mode: &str,
) -> Result<ValueId> {
    let mut y = x;
    for (a, &(lo, hi)) in pads.iter().enumerate() {
        if lo == 0 && hi == 0 {
            continue;
        }
        let s = g.shape(y)?;
        let Some(d) = s.dims()[a].value() else {
            return Err(n.unsupported(format!("mode {mode} on axis {a} of dynamic size ({s})")));
        };
        let r = s.rank();
        let part = |g: &mut Graph, from: usize, len: usize| -> Result<ValueId> {
            let mut begin = vec![0i64; r];
            let mut size = vec![-1i64; r];
            begin[a] = from as i64;
            size[a] = len as i64;
            g.slice(y, &begin, &size)
        };
        let (before, after) = if mode == "edge" {
            if d == 0 {
                return Err(n.invalid(format!("edge padding of the empty axis {a}")));
            }
            let (first, last) = (part(g, 0, 1)?, part(g, d - 1, 1)?);
            (vec![first; lo], vec![last; hi])
        } else {
            if lo > d || hi > d {
                return Err(n.unsupported(format!("mode wrap with pads ({lo}, {hi}) larger than axis {a} ({d})")));
            }
            let before = if lo > 0 { vec![part(g, d - lo, lo)?] } else { vec![] };
            let after = if hi > 0 { vec![part(g, 0, hi)?] } else { vec![] };
            (before, after)
        };
        let mut pieces = before;
        pieces.push(y);
        pieces.extend(after);
        y = g.concat(&pieces, a as i64)?;
    }
    Ok(y)
}
