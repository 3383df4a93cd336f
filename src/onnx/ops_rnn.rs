//! ONNX recurrent operators: `RNN`, `GRU` (both `linear_before_reset` forms) and `LSTM`
//! (peepholes, `input_forget`), forward / reverse / bidirectional, `clip`, `layout`, initial
//! states, and the activations Sigmoid / Tanh / Relu.
//!
//! Composition, unrolled over the static sequence length (no new kind): the input projection
//! of every step is one matmul up front, then each step is a matmul with the recurrent weight
//! and elementwise gates, so the derivatives and the `pfor` converters are those of the
//! parts (a per-example body under `pfor` keeps the unrolled steps, batched). Invariants:
//! ONNX's gate orders (LSTM `i o f c`, GRU `z r h`); `sequence_lens`, when given, must be a
//! constant equal to the full length for every batch entry (shorter sequences are refused by
//! name, never approximated); any other activation is refused by name.

use super::convert::NodeCx;
use super::ops_shape::fixed_shape;
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::DType;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["GRU", "LSTM", "RNN"];

/// Converts `n` if it is a recurrent op.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(recurrent(g, n))
}

/// The number of gates of each op.
fn gates(op: &str) -> usize {
    match op {
        "LSTM" => 4,
        "GRU" => 3,
        _ => 1,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Act {
    Sigmoid,
    Tanh,
    Relu,
}

fn act(g: &mut Graph, a: Act, x: ValueId) -> Result<ValueId> {
    match a {
        Act::Sigmoid => g.sigmoid(x),
        Act::Tanh => g.tanh(x),
        Act::Relu => g.relu(x),
    }
}

/// Row `k` (of `parts`) of `v` along its last axis.
fn part(g: &mut Graph, v: ValueId, k: usize, h: usize) -> Result<ValueId> {
    let r = g.shape(v)?.rank();
    let mut begin = vec![0i64; r];
    let mut size = vec![-1i64; r];
    begin[r - 1] = (k * h) as i64;
    size[r - 1] = h as i64;
    g.slice(v, &begin, &size)
}

/// One direction's weights: `W^T [in, G*H]`, `R^T [H, G*H]`, the input bias and recurrent
/// bias `[G*H]` (zeros when absent) and the peepholes `[3H]`.
struct Dir {
    wt: ValueId,
    rt: ValueId,
    wb: Option<ValueId>,
    rb: Option<ValueId>,
    p: Option<ValueId>,
}

fn recurrent(g: &mut Graph, n: &NodeCx) -> Result<Vec<ValueId>> {
    let op = n.op().to_string();
    let ng = gates(&op);
    let (x, w, r) = (n.input(0)?, n.input(1)?, n.input(2)?);
    let layout = n.attr_i("layout", 0);
    let x = if layout == 1 { g.transpose(x, &[1, 0, 2])? } else { x };
    let xd = fixed_shape(g, n, x, &op)?;
    let (seq, batch, input) = (xd[0], xd[1], xd[2]);
    let hs = n.attr_i("hidden_size", 0);
    let wd = fixed_shape(g, n, w, &op)?;
    let h = if hs > 0 { hs as usize } else { wd[1] / ng };
    let direction = n.attr_choice("direction", &["forward", "reverse", "bidirectional"])?;
    let dirs = if direction == "bidirectional" { 2 } else { 1 };
    if wd != [dirs, ng * h, input] {
        return Err(
            n.invalid(format!("W of shape {wd:?} for {dirs} directions, {ng} gates, hidden {h}, input {input}"))
        );
    }
    let defaults: &[&str] = match op.as_str() {
        "LSTM" => &["Sigmoid", "Tanh", "Tanh"],
        "GRU" => &["Sigmoid", "Tanh"],
        _ => &["Tanh"],
    };
    let names = n
        .attr("activations")
        .map(|a| a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect::<Vec<_>>());
    let names = names.unwrap_or_else(|| (0..dirs).flat_map(|_| defaults.iter().map(|s| s.to_string())).collect());
    if names.len() != defaults.len() * dirs {
        return Err(n.invalid(format!("{} activations for {dirs} directions", names.len())));
    }
    let acts: Vec<Act> = names
        .iter()
        .map(|s| match s.to_ascii_lowercase().as_str() {
            "sigmoid" => Ok(Act::Sigmoid),
            "tanh" => Ok(Act::Tanh),
            "relu" => Ok(Act::Relu),
            _ => Err(n.unsupported(format!("activation {s} (Sigmoid, Tanh, Relu)"))),
        })
        .collect::<Result<_>>()?;
    if n.attr("activation_alpha").is_some() || n.attr("activation_beta").is_some() {
        return Err(n.unsupported("attributes activation_alpha / activation_beta"));
    }
    let clip = n.attr("clip").map(|a| f64::from(a.f));
    let lbr = op == "GRU" && n.attr_i("linear_before_reset", 0) != 0;
    let input_forget = op == "LSTM" && n.attr_i("input_forget", 0) != 0;
    if let Some(lens) = n.const_ints(g, 4)?
        && lens.iter().any(|&l| l != seq as i64)
    {
        return Err(n.unsupported(format!("sequence_lens {lens:?} shorter than the sequence ({seq})")));
    }
    let init_h = n.opt_input(5);
    let init_c = if op == "LSTM" { n.opt_input(6) } else { None };
    let peep = if op == "LSTM" { n.opt_input(7) } else { None };
    let (init_h, init_c) = if layout == 1 {
        let t = |g: &mut Graph, v: Option<ValueId>| v.map(|v| g.transpose(v, &[1, 0, 2])).transpose();
        (t(g, init_h)?, t(g, init_c)?)
    } else {
        (init_h, init_c)
    };
    let b = n.opt_input(3);
    let xflat = g.reshape(x, &[(seq * batch) as i64, input as i64])?;
    let mut ys = Vec::with_capacity(dirs);
    let mut hs_last = Vec::with_capacity(dirs);
    let mut cs_last = Vec::with_capacity(dirs);
    for d in 0..dirs {
        let pick = |g: &mut Graph, v: ValueId| -> Result<ValueId> {
            let i = g.scalar(DType::I64, d as f64);
            g.gather(v, i, 0)
        };
        let wdir = pick(g, w)?;
        let rdir = pick(g, r)?;
        let (wb, rb) = match b {
            Some(b) => {
                let bd = pick(g, b)?;
                (Some(part(g, bd, 0, ng * h)?), Some(part(g, bd, 1, ng * h)?))
            }
            None => (None, None),
        };
        let dw = Dir {
            wt: g.transpose(wdir, &[1, 0])?,
            rt: g.transpose(rdir, &[1, 0])?,
            wb,
            rb,
            p: peep.map(|p| pick(g, p)).transpose()?,
        };
        let reverse = direction == "reverse" || d == 1;
        let h0 = match init_h {
            Some(v) => pick(g, v)?,
            None => g.zeros(g.dtype(x)?, &[batch, h])?,
        };
        let c0 = match init_c {
            Some(v) => pick(g, v)?,
            None => g.zeros(g.dtype(x)?, &[batch, h])?,
        };
        // the input projections of every step at once: [seq, batch, G*H]
        let xw = g.matmul(xflat, dw.wt)?;
        let xw = match dw.wb {
            Some(wb) => g.add(xw, wb)?,
            None => xw,
        };
        let xw = g.reshape(xw, &[seq as i64, batch as i64, (ng * h) as i64])?;
        let steps = g.unstack(xw, 0)?;
        let a = &acts[d * defaults.len()..(d + 1) * defaults.len()];
        let (mut hcur, mut ccur) = (h0, c0);
        let mut outs = vec![h0; seq];
        let order: Vec<usize> = if reverse { (0..seq).rev().collect() } else { (0..seq).collect() };
        for t in order {
            let (hn, cn) = step(g, &op, &dw, steps[t], hcur, ccur, h, a, clip, lbr, input_forget)?;
            hcur = hn;
            ccur = cn;
            outs[t] = hn;
        }
        ys.push(g.stack(&outs, 0)?);
        hs_last.push(hcur);
        cs_last.push(ccur);
    }
    // Y [seq, dirs, batch, H]; Y_h, Y_c [dirs, batch, H]
    let y = g.stack(&ys, 1)?;
    let yh = g.stack(&hs_last, 0)?;
    let yc = g.stack(&cs_last, 0)?;
    if layout == 1 {
        return Ok(vec![g.transpose(y, &[2, 0, 1, 3])?, g.transpose(yh, &[1, 0, 2])?, g.transpose(yc, &[1, 0, 2])?]);
    }
    Ok(vec![y, yh, yc])
}

/// `v` clipped to `[-c, c]` if `clip` is set.
fn clipped(g: &mut Graph, v: ValueId, clip: Option<f64>) -> Result<ValueId> {
    match clip {
        Some(c) => {
            let lo = g.scalar_like(v, -c)?;
            let hi = g.scalar_like(v, c)?;
            let v = g.maximum(v, lo)?;
            g.minimum(v, hi)
        }
        None => Ok(v),
    }
}

/// One time step: the new hidden (and cell) state.
#[allow(clippy::too_many_arguments)]
fn step(
    g: &mut Graph,
    op: &str,
    dw: &Dir,
    xw: ValueId,
    hp: ValueId,
    cp: ValueId,
    h: usize,
    a: &[Act],
    clip: Option<f64>,
    lbr: bool,
    input_forget: bool,
) -> Result<(ValueId, ValueId)> {
    let hr = g.matmul(hp, dw.rt)?;
    let hr = match dw.rb {
        Some(rb) => g.add(hr, rb)?,
        None => hr,
    };
    match op {
        "RNN" => {
            let s = g.add(xw, hr)?;
            let s = clipped(g, s, clip)?;
            Ok((act(g, a[0], s)?, cp))
        }
        "GRU" => {
            let gate = |g: &mut Graph, k: usize| -> Result<ValueId> {
                let xk = part(g, xw, k, h)?;
                let hk = part(g, hr, k, h)?;
                let s = g.add(xk, hk)?;
                let s = clipped(g, s, clip)?;
                act(g, a[0], s)
            };
            let z = gate(g, 0)?;
            let r = gate(g, 1)?;
            let xh = part(g, xw, 2, h)?;
            let pre = if lbr {
                let hh = part(g, hr, 2, h)?;
                let rh = g.mul(r, hh)?;
                g.add(xh, rh)?
            } else {
                // (r * H) R_h^T + Rb_h
                let rhp = g.mul(r, hp)?;
                let rt_h = part(g, dw.rt, 2, h)?;
                let m = g.matmul(rhp, rt_h)?;
                let m = match dw.rb {
                    Some(rb) => {
                        let rbh = part(g, rb, 2, h)?;
                        g.add(m, rbh)?
                    }
                    None => m,
                };
                g.add(xh, m)?
            };
            let pre = clipped(g, pre, clip)?;
            let hh = act(g, a[1], pre)?;
            // (1 - z) * hh + z * H = hh + z * (H - hh)
            let d = g.sub(hp, hh)?;
            let zd = g.mul(z, d)?;
            Ok((g.add(hh, zd)?, cp))
        }
        _ => {
            let pre = g.add(xw, hr)?;
            let pk = |g: &mut Graph, k: usize, c: ValueId| -> Result<ValueId> {
                let s = part(g, pre, k, h)?;
                let s = match dw.p {
                    Some(p) => {
                        let pp = part(g, p, k, h)?;
                        let pc = g.mul(pp, c)?;
                        g.add(s, pc)?
                    }
                    None => s,
                };
                clipped(g, s, clip)
            };
            // gate order i, o, f, c; peepholes i, o, f (pk: gates i and o)
            let si = pk(g, 0, cp)?;
            let i = act(g, a[0], si)?;
            let f = if input_forget {
                let one = g.scalar_like(i, 1.0)?;
                g.sub(one, i)?
            } else {
                let sf = {
                    let s = part(g, pre, 2, h)?;
                    let s = match dw.p {
                        Some(p) => {
                            let pf = part(g, p, 2, h)?;
                            let pc = g.mul(pf, cp)?;
                            g.add(s, pc)?
                        }
                        None => s,
                    };
                    clipped(g, s, clip)?
                };
                act(g, a[0], sf)?
            };
            let sc = part(g, pre, 3, h)?;
            let sc = clipped(g, sc, clip)?;
            let cc = act(g, a[1], sc)?;
            let fc = g.mul(f, cp)?;
            let ic = g.mul(i, cc)?;
            let c = g.add(fc, ic)?;
            let so = pk(g, 1, c)?;
            let o = act(g, a[0], so)?;
            let hc = act(g, a[2], c)?;
            Ok((g.mul(o, hc)?, c))
        }
    }
}
