//! ONNX `Attention` (versions 23 to 25): 3-D (`[B, S, H * d]` with `q_num_heads` /
//! `kv_num_heads`) and 4-D (`[B, H, S, d]`) inputs, `scale`, grouped-query heads, boolean or
//! additive `attn_mask` (padded to the key length), `is_causal`, the key / value cache
//! (`past_key` / `past_value` → `present_key` / `present_value`), `nonpad_kv_seqlen`
//! (version 24; a constant), the sliding window (version 25), `softcap` and the four
//! `qk_matmul_output_mode`s.
//!
//! A composition of our ops (no new kind): two batched matmuls around a softmax, so the
//! derivatives and `pfor` converters are those of the parts. The structural masks (causal,
//! window, key padding) depend only on static sizes and constant operands and are built here
//! as one constant additive bias (0 / -inf); a run-time `attn_mask` is added to it.
//! Invariants, as ONNX's reference: `Q` and `K` are each scaled by `sqrt(scale)` before their
//! product; `softcap` is applied before the bias; a row whose bias is -inf everywhere (fully
//! masked) gives zero probabilities (and a zero output), not NaN; `softmax_precision` must
//! name the dtype the scores are computed in (float16 / bfloat16 inputs are held as f32).

use super::convert::NodeCx;
use super::ops_shape::fixed_shape;
use super::tensor;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::ops::slicing::PadMode;
use crate::tensor::{DType, Tensor};

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["Attention"];

/// Converts `n` if it is an `Attention`.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(attention(g, n))
}

/// `[B, S, H * d]` → `[B, H, S, d]`.
fn split_heads(g: &mut Graph, n: &NodeCx, x: ValueId, heads: i64) -> Result<ValueId> {
    let d = fixed_shape(g, n, x, "Attention")?;
    if heads < 1 || d[2] as i64 % heads != 0 {
        return Err(n.invalid(format!("{heads} heads for an input of shape {d:?}")));
    }
    let y = g.reshape(x, &[d[0] as i64, d[1] as i64, heads, d[2] as i64 / heads])?;
    g.transpose(y, &[0, 2, 1, 3])
}

/// The constant structural bias `[B or 1, 1, q, kv]` (0 allowed, -inf masked): causal and
/// window limits relative to each batch's offset, and key padding.
struct Structure {
    causal: bool,
    left: i64,
    right: i64,
    /// Per-batch offset of the queries' absolute positions (one entry: every batch).
    offsets: Vec<i64>,
    /// Per-batch count of valid keys.
    nonpad: Option<Vec<i64>>,
}

impl Structure {
    fn is_trivial(&self) -> bool {
        !self.causal && self.left < 0 && self.right < 0 && self.nonpad.is_none()
    }
    fn bias(&self, q: usize, kv: usize) -> Result<Tensor> {
        let b = self.offsets.len();
        let mut v = Vec::with_capacity(b * q * kv);
        for bi in 0..b {
            let off = self.offsets[bi];
            for i in 0..q as i64 {
                for j in 0..kv as i64 {
                    let diff = i + off - j;
                    let mut ok = !(self.causal && diff < 0);
                    ok &= self.left < 0 || diff <= self.left;
                    ok &= self.right < 0 || -diff <= self.right;
                    ok &= self.nonpad.as_ref().is_none_or(|np| j < np[bi]);
                    v.push(if ok { 0.0 } else { f64::NEG_INFINITY });
                }
            }
        }
        Tensor::from_vec(&[b, 1, q, kv], v)
    }
}

fn attention(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let (q, k, v) = (n.input(0)?, n.input(1)?, n.input(2)?);
    let qd = fixed_shape(g, n, q, "Attention")?;
    let rank = qd.len();
    let qh = n.attr_i("q_num_heads", 0);
    let kvh = n.attr_i("kv_num_heads", 0);
    let (q, k, v) = match rank {
        3 => {
            if qh < 1 || kvh < 1 {
                return Err(n.invalid("3-D inputs need q_num_heads and kv_num_heads"));
            }
            (split_heads(g, n, q, qh)?, split_heads(g, n, k, kvh)?, split_heads(g, n, v, kvh)?)
        }
        4 => (q, k, v),
        r => return Err(n.invalid(format!("Q of rank {r} (3 or 4)"))),
    };
    let dt = g.dtype(q)?;
    let q4 = fixed_shape(g, n, q, "Attention")?;
    let scale = match n.attr("scale").map(|a| f64::from(a.f)) {
        Some(s) if s != 0.0 => s,
        _ => 1.0 / (q4[3] as f64).sqrt(),
    };
    if let Some(p) = n.attr("softmax_precision").map(|a| a.i).filter(|&p| p != 0) {
        let pd = tensor::dtype_of(p).map_err(|_| n.unsupported(format!("softmax_precision {p}")))?;
        if pd != dt {
            return Err(n.unsupported(format!("softmax_precision {} with {dt:?} scores", tensor::onnx_type_name(p))));
        }
    }
    let (pk, pv) = (n.opt_input(4), n.opt_input(5));
    if pk.is_some() != pv.is_some() {
        return Err(n.invalid("past_key and past_value must be given together"));
    }
    let nonpad = n.const_ints(g, 6)?;
    if nonpad.is_some() && pk.is_some() {
        return Err(n.invalid("nonpad_kv_seqlen with past_key / past_value"));
    }
    let (k, v) = match (pk, pv) {
        (Some(pk), Some(pv)) => (g.concat(&[pk, k], 2)?, g.concat(&[pv, v], 2)?),
        _ => (k, v),
    };
    let (present_k, present_v) = (k, v);
    let kd = fixed_shape(g, n, k, "Attention")?;
    let (sq, skv) = (q4[2], kd[2]);
    let past = match pk {
        Some(p) => fixed_shape(g, n, p, "Attention")?[2] as i64,
        None => 0,
    };
    let st = Structure {
        causal: n.attr_i("is_causal", 0) != 0,
        left: n.attr_i("left_window_size", -1),
        right: n.attr_i("right_window_size", -1),
        offsets: match &nonpad {
            Some(np) => np.iter().map(|&l| l - sq as i64).collect(),
            None => vec![past],
        },
        nonpad,
    };
    // the additive bias: the attention mask (bool: 0 / -inf), padded to the key length, and
    // the structural masks
    let mut bias = match n.opt_input(3) {
        Some(m) => {
            let m = if g.dtype(m)? == DType::Bool {
                let z = g.scalar(dt, 0.0);
                let ninf = g.scalar(dt, f64::NEG_INFINITY);
                g.select(m, z, ninf)?
            } else {
                m
            };
            let md = fixed_shape(g, n, m, "Attention")?;
            let last = *md.last().ok_or_else(|| n.invalid("a scalar attn_mask"))?;
            if last < skv {
                let mut p = vec![(0, 0); md.len()];
                p[md.len() - 1] = (0, skv - last);
                Some(g.pad(m, &p, PadMode::Constant(f64::NEG_INFINITY))?)
            } else {
                Some(m)
            }
        }
        None => None,
    };
    if !st.is_trivial() {
        let s = g.constant(st.bias(sq, skv)?.cast(dt));
        bias = Some(match bias {
            Some(b) => g.add(b, s)?,
            None => s,
        });
    }
    // grouped-query heads: each key / value head serves consecutive query heads
    let (hq, hk) = (q4[1], kd[1]);
    let (k, v) = if hq != hk && hk > 0 && hq % hk == 0 {
        (repeat_heads(g, n, k, hq / hk)?, repeat_heads(g, n, v, hq / hk)?)
    } else {
        (k, v)
    };
    let root = scale.sqrt();
    let qs = g.mul_scalar(q, root)?;
    let ks = g.mul_scalar(k, root)?;
    let kt = g.transpose(ks, &[0, 1, 3, 2])?;
    let mut qk = g.batch_matmul(qs, kt)?;
    let softcap = n.attr_f("softcap", 0.0);
    if softcap > 0.0 {
        let t = g.mul_scalar(qk, 1.0 / softcap)?;
        let t = g.tanh(t)?;
        qk = g.mul_scalar(t, softcap)?;
    }
    let with_bias = match bias {
        Some(b) => g.add(qk, b)?,
        None => qk,
    };
    let probs = match bias {
        Some(b) => {
            // fully masked rows: zero probabilities, not NaN
            let m = g.reduce_max(b, Some(&[-1]), true)?;
            let ninf = g.scalar_like(m, f64::NEG_INFINITY)?;
            let masked = g.equal(m, ninf)?;
            let z = g.scalar_like(with_bias, 0.0)?;
            let safe = g.select(masked, z, with_bias)?;
            let p = g.softmax(safe, -1)?;
            g.select(masked, z, p)?
        }
        None => g.softmax(with_bias, -1)?,
    };
    let qk_out = match n.attr_i("qk_matmul_output_mode", 0) {
        0 | 1 => qk,
        2 => with_bias,
        3 => probs,
        m => return Err(n.unsupported(format!("qk_matmul_output_mode {m}"))),
    };
    let mut y = g.batch_matmul(probs, v)?;
    if rank == 3 {
        let yd = fixed_shape(g, n, y, "Attention")?;
        let yt = g.transpose(y, &[0, 2, 1, 3])?;
        y = g.reshape(yt, &[yd[0] as i64, yd[2] as i64, (yd[1] * yd[3]) as i64])?;
    }
    Ok(vec![y, present_k, present_v, qk_out])
}

/// `[B, H, S, d]` → `[B, H * r, S, d]`, each head repeated `r` times in place.
fn repeat_heads(g: &mut Graph, n: &NodeCx, x: ValueId, r: usize) -> Result<ValueId> {
    let d = fixed_shape(g, n, x, "Attention")?;
    let y = g.reshape(x, &[d[0] as i64, d[1] as i64, 1, d[2] as i64, d[3] as i64])?;
    let y = g.broadcast_to(y, &[d[0], d[1], r, d[2], d[3]])?;
    g.reshape(y, &[d[0] as i64, (d[1] * r) as i64, d[2] as i64, d[3] as i64])
}
