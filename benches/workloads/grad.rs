//! W4 (per-example gradients of the MNIST CNN) and W5 (jacobian of a 10-step LSTM with a
//! dense projection w.r.t. the input sequence), in pfor / loop / hand modes.

use pfor::api::{jacobian_loop, jacobian_with, per_example_gradients_loop, per_example_gradients_with};
use pfor::autodiff::gradients;
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

use super::{Mode, Workload, mnist_example_loss, mnist_logits, mnist_params};
use pfor::api::lstm_cell;

/// W4: gradients of the softmax cross-entropy of the MNIST CNN w.r.t. all 8 weights, per
/// example; units = examples. `Hand` is the gradient of the SUMMED loss (one backward
/// pass, not per example): the cost reference the peers also report.
pub fn w4(n: usize, mode: Mode) -> Result<Workload> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [n, 28, 28, 1]);
    let y = g.input("y", DType::I64, [n]);
    let p = mnist_params(&mut g);
    let params = p.values.clone();
    let out = match mode {
        Mode::Hand => {
            let logits = mnist_logits(&mut g, &p, x)?;
            let l = g.sparse_softmax_cross_entropy(y, logits)?;
            let l = g.sum_all(l)?;
            gradients(&mut g, &[l], &params, None)?
        }
        m => {
            let loss = |g: &mut Graph, rows: &[ValueId], _: &[ValueId]| mnist_example_loss(g, &p, rows);
            if m == Mode::Pfor {
                per_example_gradients_with(&mut g, &PforOptions::strict(), loss, &[x, y], &params)?
            } else {
                per_example_gradients_loop(&mut g, loss, &[x, y], &params)?
            }
        }
    };
    let labels = Tensor::rand_uniform(DType::I64, &[n], 0.0, 10.0, 41)?;
    Ok(Workload {
        session: Session::new(&g, &out)?,
        feeds: vec![(x, Tensor::randn(&[n, 28, 28, 1], 40)?), (y, labels)],
        units: n as f64,
    })
}

// W5 sequence length, input and state sizes.
const W5_STEPS: usize = 10;
const W5_IN: usize = 128;
const W5_HIDDEN: usize = 256;

/// W5: `y = h_10 @ Wo [256,out]` of an LSTM unrolled over `x [10,128]`; the jacobian
/// `d y / d x` `[out,10,128]`; units = jacobian rows (`out`). `Hand` is unavailable.
pub fn w5(out: usize, mode: Mode) -> Result<Workload> {
    let mut g = Graph::new();
    let (x, y) = w5_forward(&mut g, out)?;
    let j = match mode {
        Mode::Pfor => jacobian_with(&mut g, y, x, &super::pfor_options())?,
        Mode::Loop => jacobian_loop(&mut g, y, x)?,
        Mode::Hand => return Err(Error::InvalidArgument("W5 has no hand-batched mode".into())),
    };
    Ok(Workload { session: Session::new(&g, &[j])?, feeds: vec![(x, w5_input())], units: out as f64 })
}

/// The W5 forward graph: input `x [10,128]` and `y = h_10 @ Wo` `[out]`.
pub fn w5_forward(g: &mut Graph, out: usize) -> Result<(ValueId, ValueId)> {
    let (t, d, h) = (W5_STEPS, W5_IN, W5_HIDDEN);
    let x = g.input("x", DType::F32, [t, d]);
    let scale = 1.0 / ((d + h) as f32).sqrt();
    let w = g.constant(Tensor::from_array(Tensor::randn(&[d + h, 4 * h], 51)?.to_array::<f32>()? * scale));
    let b = g.constant(Tensor::from_array(Tensor::randn(&[4 * h], 52)?.to_array::<f32>()? * scale));
    let wo = g.constant(Tensor::from_array(Tensor::randn(&[h, out], 53)?.to_array::<f32>()? * (1.0 / 16.0)));
    let mut hs = g.constant(Tensor::zeros(DType::F32, &[1, h])?);
    let mut cs = hs;
    for xt in g.unstack(x, 0)? {
        let xt = g.reshape(xt, &[1, d as i64])?;
        (hs, cs) = lstm_cell(g, xt, hs, cs, w, b)?;
    }
    let y = g.matmul(hs, wo)?;
    Ok((x, g.reshape(y, &[out as i64])?))
}

/// The W5 input sequence fed to [`w5_forward`]'s `x`.
pub fn w5_input() -> Tensor {
    Tensor::randn(&[W5_STEPS, W5_IN], 55).expect("a small fixed shape")
}
