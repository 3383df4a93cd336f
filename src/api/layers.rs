//! Small layers built from graph ops, shared by the examples, benchmarks and tests that need
//! them (one definition each, so a workload and its test compute the same graph).

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};

/// The LSTM state update from the four gate pre-activations `(i, f, o, u)` and the cell state
/// `c`: `c' = σ(f)·c + σ(i)·tanh(u)`, `h' = σ(o)·tanh(c')`; returns `(h', c')`. Shapes
/// broadcast as the elementwise ops do (all `[rows, hidden]` in an LSTM).
///
/// ```
/// use pfor::api::lstm_gates;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let mut g = Graph::new();
/// let zero = g.constant(Tensor::zeros(DType::F32, &[1, 4])?);
/// // all gates at 0: σ = 1/2, tanh(0) = 0, so c' = c/2 and h' = tanh(c')/2
/// let c = g.constant(Tensor::full(DType::F32, &[1, 4], 2.0)?);
/// let (h, c2) = lstm_gates(&mut g, [zero; 4], c)?;
/// let r = run_once(&g, &[h, c2], &[])?;
/// assert_eq!(r[1].to_vec::<f32>()?, [1.0; 4]);
/// assert!((r[0].to_vec::<f32>()?[0] - 1f32.tanh() / 2.0).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
pub fn lstm_gates(g: &mut Graph, gates: [ValueId; 4], c: ValueId) -> Result<(ValueId, ValueId)> {
    let ig = g.sigmoid(gates[0])?;
    let fg = g.sigmoid(gates[1])?;
    let og = g.sigmoid(gates[2])?;
    let u = g.tanh(gates[3])?;
    let fc = g.mul(fg, c)?;
    let iu = g.mul(ig, u)?;
    let c2 = g.add(fc, iu)?;
    let tc = g.tanh(c2)?;
    let h2 = g.mul(og, tc)?;
    Ok((h2, c2))
}

/// One LSTM cell step on a batch of rows: `z = concat(x_t, h) [m, in + hidden] @ w [in +
/// hidden, 4 hidden] + b [4 hidden]`, split into the gates `(i, f, o, u)` (in that order) and
/// passed to [`lstm_gates`]; returns `(h', c')`, each `[m, hidden]`. `w`'s last dimension
/// must be static and a multiple of 4, else a shape error naming `lstm_cell`.
///
/// ```
/// use pfor::api::lstm_cell;
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let (rows, input, hidden) = (2, 3, 5);
/// let mut g = Graph::new();
/// let x = g.constant(Tensor::randn(&[rows, input], 0)?);
/// let w = g.constant(Tensor::randn(&[input + hidden, 4 * hidden], 1)?);
/// let b = g.constant(Tensor::zeros(DType::F32, &[4 * hidden])?);
/// let h0 = g.constant(Tensor::zeros(DType::F32, &[rows, hidden])?);
/// let (h1, c1) = lstm_cell(&mut g, x, h0, h0, w, b)?;
/// assert_eq!(g.shape(h1)?.as_fixed(), Some(vec![rows, hidden]));
/// # let _ = c1;
/// # Ok(())
/// # }
/// ```
pub fn lstm_cell(
    g: &mut Graph,
    xt: ValueId,
    h: ValueId,
    c: ValueId,
    w: ValueId,
    b: ValueId,
) -> Result<(ValueId, ValueId)> {
    let wt = g.value_type(w)?;
    let cols = match wt.shape.as_fixed() {
        Some(d) if d.len() == 2 && d[1] % 4 == 0 => d[1],
        _ => {
            return Err(Error::shape(
                "lstm_cell",
                format!("weights must be [in + hidden, 4 hidden] with static sizes, got {wt}"),
            ));
        }
    };
    let hid = cols / 4;
    let z = g.concat(&[xt, h], 1)?;
    let z = g.matmul(z, w)?;
    let z = g.bias_add(z, b)?;
    let gates = g.split(z, 1, &[hid; 4])?;
    lstm_gates(g, [gates[0], gates[1], gates[2], gates[3]], c)
}
