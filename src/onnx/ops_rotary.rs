//! ONNX `RotaryEmbedding` (opset 23): rotary position embeddings of 4-D `[B, H, S, d]` or
//! 3-D `[B, S, H * d]` inputs, halves or interleaved pairs, a partial `rotary_embedding_dim`,
//! and caches indexed by `position_ids` (or used as `[S, d / 2]` / `[B, S, d / 2]` directly).
//!
//! A composition (no new kind): the rotated pairs `(x1, x2)` become
//! `(cos x1 - sin x2, sin x1 + cos x2)`, with a gather of the cache rows by position, slices
//! (or a reshape to `[..., d / 2, 2]` for interleaved pairs) and a concat; derivatives come
//! from the parts. Invariants: the caches' last dim must be half the rotated size; dims past
//! `rotary_embedding_dim` pass unchanged.

use super::convert::NodeCx;
use super::ops_shape::fixed_shape;
use crate::error::Result;
use crate::ir::{Graph, ValueId};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["RotaryEmbedding"];

/// Converts `n` if it is a `RotaryEmbedding`.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(rotary(g, n).map(|v| vec![v]))
}

fn last_slice(g: &mut Graph, x: ValueId, r: usize, start: usize, len: usize) -> Result<ValueId> {
    let mut b = vec![0i64; r];
    let mut s = vec![-1i64; r];
    b[r - 1] = start as i64;
    s[r - 1] = len as i64;
    g.slice(x, &b, &s)
}

fn rotary(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    let (cos, sin) = (n.input(1)?, n.input(2)?);
    let d0 = fixed_shape(g, n, x, "RotaryEmbedding")?;
    let interleaved = n.attr_i("interleaved", 0) != 0;
    // work in [B, S, H, d]
    let x4 = match d0.len() {
        4 => g.transpose(x, &[0, 2, 1, 3])?,
        3 => {
            let heads = n.attr_i("num_heads", 0);
            if heads < 1 || d0[2] as i64 % heads != 0 {
                return Err(n.invalid(format!("num_heads {heads} for a 3-D input {d0:?}")));
            }
            g.reshape(x, &[d0[0] as i64, d0[1] as i64, heads, d0[2] as i64 / heads])?
        }
        r => return Err(n.invalid(format!("input of rank {r} (3 or 4)"))),
    };
    let _ = n.attr("num_heads");
    let d4 = fixed_shape(g, n, x4, "RotaryEmbedding")?;
    let head = d4[3];
    let rot = match n.attr_i("rotary_embedding_dim", 0) {
        0 => head,
        v if v > 0 && v as usize <= head && v % 2 == 0 => v as usize,
        v => return Err(n.invalid(format!("rotary_embedding_dim {v} for head size {head}"))),
    };
    let half = rot / 2;
    let (cos, sin) = match n.opt_input(3) {
        Some(pos) => (g.gather(cos, pos, 0)?, g.gather(sin, pos, 0)?),
        None => (cos, sin),
    };
    let cd = fixed_shape(g, n, cos, "RotaryEmbedding")?;
    if cd.last() != Some(&half) {
        return Err(n.invalid(format!("cos cache {cd:?} for a rotated size of {rot}")));
    }
    // [.., S, half] → [.., S, 1, half]
    let cr = cd.len();
    let cos = g.expand_dims(cos, cr as i64 - 1)?;
    let sin = g.expand_dims(sin, cr as i64 - 1)?;
    let xr = if rot == head { x4 } else { last_slice(g, x4, 4, 0, rot)? };
    let (x1, x2) = if interleaved {
        let pairs = g.reshape(xr, &[d4[0] as i64, d4[1] as i64, d4[2] as i64, half as i64, 2])?;
        let a = last_slice(g, pairs, 5, 0, 1)?;
        let b = last_slice(g, pairs, 5, 1, 1)?;
        (g.squeeze(a, Some(&[4]))?, g.squeeze(b, Some(&[4]))?)
    } else {
        (last_slice(g, xr, 4, 0, half)?, last_slice(g, xr, 4, half, half)?)
    };
    let (c1, s2) = (g.mul(cos, x1)?, g.mul(sin, x2)?);
    let real = g.sub(c1, s2)?;
    let (s1, c2) = (g.mul(sin, x1)?, g.mul(cos, x2)?);
    let imag = g.add(s1, c2)?;
    let rotated = if interleaved {
        let re = g.expand_dims(real, -1)?;
        let im = g.expand_dims(imag, -1)?;
        let p = g.concat(&[re, im], -1)?;
        g.reshape(p, &[d4[0] as i64, d4[1] as i64, d4[2] as i64, rot as i64])?
    } else {
        g.concat(&[real, imag], -1)?
    };
    let y = if rot == head {
        rotated
    } else {
        let rest = last_slice(g, x4, 4, rot, head - rot)?;
        g.concat(&[rotated, rest], -1)?
    };
    if d0.len() == 4 {
        g.transpose(y, &[0, 2, 1, 3])
    } else {
        let back: Vec<i64> = d0.iter().map(|&v| v as i64).collect();
        g.reshape(y, &back)
    }
}
