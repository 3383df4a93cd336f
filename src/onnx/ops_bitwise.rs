//! ONNX bitwise operators: `BitwiseAnd` / `Or` / `Xor` / `Not`, `BitShift` and the integer
//! forms of `BitCast`, onto our i64 bitwise and shift kinds (`ops::binary`).
//!
//! Invariants:
//! - Integers of every width are held in i64, sign-extended (int8 to int64) or zero-extended
//!   (uint8 to uint32; uint64 keeps its bits), see [`super::tensor`]. And / Or / Xor of two
//!   such values is the extended form of the narrow result; a result that can leave the
//!   type's range (`BitShift` left, `BitwiseNot` of an unsigned type) is wrapped back to the
//!   type's width (masked, or sign-extended from its top bit), so it is what ONNX computes in
//!   the narrow type. The width is the input's ONNX element type where the model states it
//!   (graph inputs, initializers, `Constant` and `Cast` outputs); elsewhere it is an
//!   `Unsupported` error naming the op, node and input.
//! - `BitShift` (ONNX 28 semantics): a shift count outside `[0, width)` gives 0 for `LEFT`
//!   and the sign fill for `RIGHT` (0 for unsigned types); `RIGHT` on uint64 is a logical
//!   shift, on other types arithmetic (equal to logical on the non-negative unsigned values).
//! - `BitCast` between integer types of one width (and bool to uint8) re-wraps the value in
//!   the target type; float <-> integer bit casts are refused (no bit-reinterpreting kind).
//! - Integer ops: no derivative flows through them (as for every integer op); under `pfor`
//!   they are elementwise broadcasting ops.

use super::convert::NodeCx;
use super::tensor;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::BinaryKind;
use crate::tensor::{DType, Tensor};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["BitCast", "BitShift", "BitwiseAnd", "BitwiseNot", "BitwiseOr", "BitwiseXor"];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(convert_one(g, n).map(|v| vec![v]))
}

/// The bit width and signedness of an ONNX integer element type.
fn int_type(t: i64) -> Option<(u32, bool)> {
    Some(match t {
        2 => (8, false),
        3 => (8, true),
        4 => (16, false),
        5 => (16, true),
        6 => (32, true),
        7 => (64, true),
        12 => (32, false),
        13 => (64, false),
        _ => return None,
    })
}

/// The integer type of input `k`: width and signedness.
fn input_type(g: &Graph, n: &NodeCx, k: usize) -> Result<(u32, bool)> {
    let x = n.input(k)?;
    match n.elem_type(k) {
        Some(t) => int_type(t).ok_or_else(|| {
            n.unsupported(format!(
                "input {k} of element type {} (an integer type is needed)",
                tensor::onnx_type_name(t)
            ))
        }),
        None if g.dtype(x)? != DType::I64 => {
            Err(n.unsupported(format!("input {k} of dtype {} (an integer type is needed)", g.dtype(x)?)))
        }
        None => Err(n.unsupported(format!(
            "input {k} ('{}') of an element type the model does not state (the result depends on its width)",
            n.proto.input.get(k).map_or("", String::as_str)
        ))),
    }
}

fn int(g: &mut Graph, v: i64) -> ValueId {
    g.constant(Tensor::scalar(v))
}

/// `x` (i64) wrapped to the integer type (`bits`, `signed`): masked, or sign-extended from
/// its top bit.
fn wrap(g: &mut Graph, x: ValueId, bits: u32, signed: bool) -> Result<ValueId> {
    if bits >= 64 {
        return Ok(x);
    }
    if signed {
        let k = int(g, i64::from(64 - bits));
        let up = g.binary(BinaryKind::ShiftLeft, x, k)?;
        g.binary(BinaryKind::ShiftRight, up, k)
    } else {
        let mask = int(g, (1i64 << bits) - 1);
        g.binary(BinaryKind::BitwiseAnd, x, mask)
    }
}

fn convert_one(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    match n.op() {
        "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" => {
            input_type(g, n, 0).or_else(|e| input_type(g, n, 1).map_err(|_| e))?;
            let k = match n.op() {
                "BitwiseAnd" => BinaryKind::BitwiseAnd,
                "BitwiseOr" => BinaryKind::BitwiseOr,
                _ => BinaryKind::BitwiseXor,
            };
            g.binary(k, x, n.input(1)?)
        }
        "BitwiseNot" => {
            let (bits, signed) = input_type(g, n, 0)?;
            let ones = int(g, -1);
            let y = g.binary(BinaryKind::BitwiseXor, x, ones)?;
            wrap(g, y, bits, signed)
        }
        "BitShift" => {
            let (bits, signed) = input_type(g, n, 0)?;
            let s = n.input(1)?;
            let dir = n.attr_s("direction").ok_or_else(|| n.invalid("attribute direction is missing"))?;
            if dir != "LEFT" && dir != "RIGHT" {
                return Err(n.unsupported(format!("attribute direction = '{dir}' (LEFT or RIGHT)")));
            }
            // shift counts as the type reads them: an unsigned count's extended value is
            // non-negative; out of [0, width) the result is 0 / the sign fill
            let w = int(g, i64::from(bits));
            let inside = g.less(s, w)?;
            let zero = int(g, 0);
            let nonneg = g.greater_equal(s, zero)?;
            let inside = g.logical_and(inside, nonneg)?;
            let big = int(g, 64);
            let s = g.select(inside, s, big)?;
            match dir.as_str() {
                "LEFT" => {
                    let y = g.binary(BinaryKind::ShiftLeft, x, s)?;
                    wrap(g, y, bits, signed)
                }
                _ if bits == 64 && !signed => g.binary(BinaryKind::ShiftRightLogical, x, s),
                _ => g.binary(BinaryKind::ShiftRight, x, s),
            }
        }
        _ => {
            // BitCast
            let to = n.attr("to").map(|a| a.i).ok_or_else(|| n.invalid("attribute to is missing"))?;
            let from = n.elem_type(0);
            let target = int_type(to);
            match (from, target) {
                (Some(9), Some((8, false))) => g.cast(x, DType::I64),
                (Some(f), Some((bits, signed))) if int_type(f).is_some_and(|(b, _)| b == bits) => {
                    wrap(g, x, bits, signed)
                }
                _ => Err(n.unsupported(format!(
                    "a bit cast from {} to {} (only between integer types of one width, and bool to uint8)",
                    from.map_or("an unstated type", tensor::onnx_type_name),
                    tensor::onnx_type_name(to)
                ))),
            }
        }
    }
}
