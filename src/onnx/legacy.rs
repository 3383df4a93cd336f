//! Opset 6, the last opset before numpy-style broadcasting (ONNX's `pytorch-converted` and
//! `pytorch-operator` suites are exported at opset 6): the attributes whose meaning changed
//! at opset 7 are interpreted here, before the op families see the node.
//!
//! - Binary ops (`Add`, `Sub`, `Mul`, `Div`, `Pow`, `And`, `Or`, `Xor`, `Equal`, `Less`,
//!   `Greater`) with `broadcast = 1`: B's shape is a contiguous run of A's dims starting at
//!   `axis` (default: the trailing dims); B gets unit dims appended so numpy broadcasting
//!   lines it up there. Without `broadcast` the shapes must be equal, which numpy
//!   broadcasting computes alike.
//! - `PRelu`'s slope: one value per channel (axis 1) when it is a vector of the channel
//!   count (opset 7 broadcasts it numpy-style, against the last axis).
//! - `Gemm`'s `broadcast`: with 1, C broadcasts to [M, N] as opset 7 does; with 0, C must be
//!   [M, N] already, a special case: the attribute is consumed and the family converts.
//! - `BatchNormalization`'s and `Dropout`'s `is_test`: 1 is inference, what the families
//!   convert; 0 (the default: training statistics, random masks) is refused.
//!
//! Invariant: a node of opset ≥ 7 never gets here; anything this module does not interpret
//! is left to the families (which refuse unread attributes).

use super::convert::NodeCx;
use super::ops_elementwise;
use crate::error::Result;
use crate::ir::{Graph, ValueId};

/// The ops whose opset-6 versions this module interprets (accepted at opset 6 although
/// they changed at opset 7; see `versions::check`).
pub(super) const INTERPRETED: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Less",
    "Greater",
    "PRelu",
    "Gemm",
    "BatchNormalization",
    "Dropout",
    // AveragePool-1 is AveragePool-7 without `count_include_pad` (so with its default, 0):
    // nothing to interpret, the family converts it.
    "AveragePool",
];

/// Interprets the opset-6 attributes of node `n`; `Some` when it converted the node, `None`
/// to let the op families convert it.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if n.opset >= 7 {
        return None;
    }
    match n.op() {
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "And" | "Or" | "Xor" | "Equal" | "Less" | "Greater" => {
            binary(g, n).transpose()
        }
        "PRelu" => prelu(g, n).transpose(),
        "Gemm" => {
            let _ = n.attr("broadcast");
            None
        }
        "BatchNormalization" | "Dropout" => match n.attr_i_only("is_test", 1) {
            Ok(()) => None,
            Err(e) => Some(Err(e)),
        },
        _ => None,
    }
}

/// A binary op with legacy broadcasting: `Ok(None)` when there is none to interpret.
fn binary(g: &mut Graph, n: &NodeCx) -> Result<Option<Vec<ValueId>>> {
    if n.attr_i("broadcast", 0) == 0 {
        if let Some(a) = n.attr("axis") {
            return Err(n.invalid(format!("attribute axis = {} without broadcast = 1", a.i)));
        }
        return Ok(None);
    }
    let (a, b) = (n.input(0)?, n.input(1)?);
    let (ra, sb) = (g.shape(a)?.rank(), g.shape(b)?);
    let rb = sb.rank();
    let axis = n.attr("axis").map_or(ra as i64 - rb as i64, |x| x.i);
    let axis = if axis < 0 { axis + ra as i64 } else { axis };
    if axis < 0 || axis as usize + rb > ra {
        return Err(n.invalid(format!("broadcast of B (rank {rb}) at axis {axis} into A of rank {ra}")));
    }
    let trailing = ra - axis as usize - rb;
    let b = if trailing == 0 {
        b
    } else {
        let mut dims: Vec<i64> = sb.dims().iter().map(|d| d.value().map_or(-1, |v| v as i64)).collect();
        if dims.iter().filter(|d| **d < 0).count() > 1 {
            return Err(n.unsupported("legacy broadcast of B with more than one dynamic dim"));
        }
        dims.extend(std::iter::repeat_n(1, trailing));
        g.reshape(b, &dims)?
    };
    let cx = n.with_input(1, b);
    ops_elementwise::convert(g, &cx).transpose()
}

/// `PRelu` with a per-channel slope vector: `Ok(None)` when the slope is not one.
fn prelu(g: &mut Graph, n: &NodeCx) -> Result<Option<Vec<ValueId>>> {
    let (x, slope) = (n.input(0)?, n.input(1)?);
    let (sx, ss) = (g.shape(x)?, g.shape(slope)?);
    let channels = sx.dims().get(1).and_then(|d| d.value());
    if sx.rank() <= 2 || ss.rank() != 1 || channels.is_none() || ss.dims()[0].value() != channels {
        return Ok(None);
    }
    let mut dims = vec![channels.unwrap_or(1) as i64];
    dims.extend(std::iter::repeat_n(1, sx.rank() - 2));
    let slope = g.reshape(slope, &dims)?;
    ops_elementwise::convert(g, &n.with_input(1, slope)).transpose()
}
