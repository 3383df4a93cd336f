//! ONNX `DFT` (opsets 17 and 20) as matrix products with constant cosine / sine matrices.
//!
//! The input is `[..., n, ..., c]`: the signal axis (`axis`: an attribute at opset 17,
//! default 1; a constant input at opset 20, default -2) and a last axis of the real (`c = 1`)
//! or real and imaginary (`c = 2`) parts. The output is `[..., K, ..., 2]`, or `[..., N, ...,
//! 1]` for the inverse of a one-sided spectrum (numpy's `irfft`), with `N` the DFT length
//! (`dft_length`, a constant, default `n`, or `2 (n - 1)` for that inverse) and `K` = `N`, or
//! `N / 2 + 1` when `onesided`. A signal longer than `N` is cropped, a shorter one
//! zero-padded, as numpy's `fft(x, n)` does.
//!
//! Invariants: static shapes; the transform is `re @ C ± im @ S` with `C`, `S` `[n, K]`
//! constants (computed in f64, rows past `N` zero), in the input's dtype, so derivatives
//! and pfor come from matmul, reshape and transpose; the inverse is scaled by `1 / N`.

use super::convert::NodeCx;
use super::ops_shape::{fixed_shape, norm_axis};
use crate::error::Result;
use crate::ir::{Graph, ValueId};
use crate::tensor::Tensor;

/// The op types this family converts.
pub(super) const OPS: &[&str] = &["DFT"];

/// Converts `n` if it is an op of this family.
pub(super) fn convert(g: &mut Graph, n: &NodeCx) -> Option<Result<Vec<ValueId>>> {
    if !OPS.contains(&n.op()) {
        return None;
    }
    Some(dft(g, n).map(|v| vec![v]))
}

fn dft(g: &mut Graph, n: &NodeCx) -> Result<ValueId> {
    let x = n.input(0)?;
    let dims = fixed_shape(g, n, x, "DFT")?;
    let r = dims.len();
    if r < 2 || !(1..=2).contains(&dims[r - 1]) {
        return Err(n.invalid(format!("input of shape {dims:?}: its last axis must be 1 (real) or 2 (complex)")));
    }
    let axis = if n.opset >= 20 {
        n.const_ints(g, 2)?.and_then(|v| v.first().copied()).unwrap_or(-2)
    } else {
        n.attr_i("axis", 1)
    };
    let a = norm_axis(n, axis, r)?;
    if a == r - 1 {
        return Err(n.invalid("the signal axis is the last (real / imaginary) axis"));
    }
    let (inverse, onesided) = (n.attr_i("inverse", 0) != 0, n.attr_i("onesided", 0) != 0);
    let len = dims[a];
    let big_n = match n.const_ints(g, 1)?.and_then(|v| v.first().copied()) {
        Some(l) if l >= 1 => l as usize,
        Some(l) => return Err(n.invalid(format!("dft_length {l} is not positive"))),
        None if inverse && onesided => 2 * len.saturating_sub(1),
        None => len,
    };
    if big_n == 0 {
        return Err(n.invalid("a DFT of length 0"));
    }
    let irfft = inverse && onesided;
    let k_out = if onesided && !inverse { big_n / 2 + 1 } else { big_n };
    // input rows used: irfft reads the first N/2 + 1 frequencies, the others the first N values
    let used = if irfft { big_n / 2 + 1 } else { big_n };
    let (c, s) = matrices(len, used, big_n, k_out, inverse, irfft);
    // [others..., n, c]: the signal axis just before the component axis
    let mut perm: Vec<usize> = (0..r - 1).filter(|&d| d != a).collect();
    perm.extend([a, r - 1]);
    let xt = g.transpose(x, &perm)?;
    let lead: Vec<usize> = perm[..r - 2].iter().map(|&d| dims[d]).collect();
    let m: usize = lead.iter().product();
    let parts = g.unstack(xt, -1)?;
    let dt = g.dtype(x)?;
    let flat = |g: &mut Graph, v: ValueId| g.reshape(v, &[m as i64, len as i64]);
    let re = flat(g, parts[0])?;
    let im = if parts.len() == 2 { Some(flat(g, parts[1])?) } else { None };
    let cm = g.constant(Tensor::from_vec(&[len, k_out], c)?.cast(dt));
    let sm = g.constant(Tensor::from_vec(&[len, k_out], s)?.cast(dt));
    // forward: (re + i im)(C - i S); inverse: (re + i im)(C + i S) (the scale is in C, S)
    let sign = if inverse { -1.0 } else { 1.0 };
    let rc = g.matmul(re, cm)?;
    let rs = g.matmul(re, sm)?;
    let (y_re, y_im) = match im {
        Some(im) => {
            let ic = g.matmul(im, cm)?;
            let is = g.matmul(im, sm)?;
            let is = g.mul_scalar(is, sign)?;
            let rs = g.mul_scalar(rs, -sign)?;
            (g.add(rc, is)?, g.add(ic, rs)?)
        }
        None => (rc, g.mul_scalar(rs, -sign)?),
    };
    let comps = if irfft { vec![y_re] } else { vec![y_re, y_im] };
    let mut shape: Vec<i64> = lead.iter().map(|&d| d as i64).collect();
    shape.push(k_out as i64);
    let comps: Vec<ValueId> = comps.into_iter().map(|v| g.reshape(v, &shape)).collect::<Result<_>>()?;
    let y = g.stack(&comps, -1)?;
    // back to the input's axis order
    let mut back = vec![0; r];
    for (k, &d) in perm.iter().enumerate() {
        back[d] = k;
    }
    g.transpose(y, &back)
}

/// `C`, `S` (`[len, k_out]`, row-major, f64): entry `(j, k)` is `w_j cos(2 pi j k / N)` and
/// `w_j sin(...)` for the rows `j < used` (the others zero), with `w_j` = 1 (or `1 / N` for an
/// inverse, times 2 for the frequencies a one-sided spectrum stands for twice).
fn matrices(len: usize, used: usize, big_n: usize, k_out: usize, inverse: bool, irfft: bool) -> (Vec<f64>, Vec<f64>) {
    let (mut c, mut s) = (vec![0.0; len * k_out], vec![0.0; len * k_out]);
    for j in 0..len.min(used) {
        let mut w = if inverse { 1.0 / big_n as f64 } else { 1.0 };
        // irfft: X_j and its conjugate X_{N-j} both, but X_0 and (N even) X_{N/2} once
        if irfft && j != 0 && 2 * j != big_n {
            w *= 2.0;
        }
        for k in 0..k_out {
            // j k mod N keeps the angle small (exact for integers below 2^53)
            let theta = 2.0 * std::f64::consts::PI * ((j * k) % big_n) as f64 / big_n as f64;
            c[j * k_out + k] = w * theta.cos();
            s[j * k_out + k] = w * theta.sin();
        }
    }
    (c, s)
}
