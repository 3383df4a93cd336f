//! W3 at small sizes: an LSTM run by a per-example `while t < len_i` loop inside pfor
//! (Subset and Mask modes) and the hand-padded batched version, checked against the
//! reference loop and a plain-Rust ndarray LSTM.

use crate::common::*;
use ndarray::{Array1, Array2, Axis, s};
use pfor::api::lstm_cell;
use pfor::prelude::*;
use pfor::vectorize::{ControlFlowMode, PforOptions, pfor_with};

const IN: usize = 4;
const HID: usize = 3;
const MAX_LEN: usize = 7;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Subset,
    Mask,
    Loop,
    Padded,
}

/// The final `h [n,HID]` of every sequence, built in `mode`.
fn lstm(g: &mut Graph, n: usize, mode: Mode, x: ValueId, lens: ValueId, w: ValueId, b: ValueId) -> Result<ValueId> {
    let body = |g: &mut Graph, i: ValueId| -> Result<Vec<ValueId>> {
        let xi = g.gather(x, i, 0)?;
        let li = g.gather(lens, i, 0)?;
        let t0 = g.constant(Tensor::scalar(0i64));
        let h0 = g.constant(Tensor::zeros(DType::F64, &[1, HID]).unwrap());
        let c0 = g.constant(Tensor::zeros(DType::F64, &[1, HID]).unwrap());
        let out = g.while_loop(
            &[t0, h0, c0],
            &[li, xi, w, b],
            |g, a| g.less(a[0], a[3]),
            |g, a| {
                let xt = g.gather(a[4], a[0], 0)?;
                let xt = g.reshape(xt, &[1, IN as i64])?;
                let (h, c) = lstm_cell(g, xt, a[1], a[2], a[5], a[6])?;
                let one = g.constant(Tensor::scalar(1i64));
                Ok(vec![g.add(a[0], one)?, h, c])
            },
        )?;
        Ok(vec![g.reshape(out[1], &[HID as i64])?])
    };
    let out = match mode {
        Mode::Subset | Mode::Mask => {
            let cf = if mode == Mode::Subset { ControlFlowMode::Subset } else { ControlFlowMode::Mask };
            pfor_with(g, n, &PforOptions::strict().with_control_flow(cf), body)?
        }
        Mode::Loop => for_loop(g, n, body)?,
        Mode::Padded => {
            let t0 = g.constant(Tensor::scalar(0i64));
            let h0 = g.constant(Tensor::zeros(DType::F64, &[n, HID]).unwrap());
            let c0 = g.constant(Tensor::zeros(DType::F64, &[n, HID]).unwrap());
            let max_len = g.reduce_max(lens, &[0], false)?;
            let out = g.while_loop(
                &[t0, h0, c0],
                &[max_len, lens, x, w, b],
                |g, a| g.less(a[0], a[3]),
                |g, a| {
                    let xt = g.gather(a[5], a[0], 1)?;
                    let (h, c) = lstm_cell(g, xt, a[1], a[2], a[6], a[7])?;
                    let live = g.less(a[0], a[4])?;
                    let live = g.expand_dims(live, 1)?;
                    let h = g.select(live, h, a[1])?;
                    let c = g.select(live, c, a[2])?;
                    let one = g.constant(Tensor::scalar(1i64));
                    Ok(vec![g.add(a[0], one)?, h, c])
                },
            )?;
            vec![out[1]]
        }
    };
    Ok(out[0])
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// Plain-Rust LSTM: the final h of each sequence `x[i, ..lens[i], :]`.
fn oracle(x: &Tensor, lens: &[i64], w: &Tensor, b: &Tensor) -> Tensor {
    let x: ndarray::Array3<f64> = x.to_array::<f64>().unwrap().into_dimensionality().unwrap();
    let w: Array2<f64> = w.to_array::<f64>().unwrap().into_dimensionality().unwrap();
    let b: Array1<f64> = b.to_array::<f64>().unwrap().into_dimensionality().unwrap();
    let mut out = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        let mut h = Array1::<f64>::zeros(HID);
        let mut c = Array1::<f64>::zeros(HID);
        for t in 0..len as usize {
            let xt = x.slice(s![i, t, ..]);
            let z = ndarray::concatenate(Axis(0), &[xt, h.view()]).unwrap();
            let z = z.dot(&w) + &b;
            let ig = z.slice(s![0..HID]).mapv(sigmoid);
            let fg = z.slice(s![HID..2 * HID]).mapv(sigmoid);
            let og = z.slice(s![2 * HID..3 * HID]).mapv(sigmoid);
            let u = z.slice(s![3 * HID..]).mapv(f64::tanh);
            c = &fg * &c + &ig * &u;
            h = &og * &c.mapv(f64::tanh);
        }
        out.extend(h.iter().copied());
    }
    f64t(&[lens.len(), HID], &out)
}

#[test]
fn lstm_variable_length_all_modes_match_loop_and_ndarray_oracle() {
    let lens_v = [3i64, 1, 7, 2, 5];
    let n = lens_v.len();
    let xt = Tensor::randn_f64(&[n, MAX_LEN, IN], 7).unwrap();
    let scale = 1.0 / ((IN + HID) as f64).sqrt();
    let wt = Tensor::from_array(Tensor::randn_f64(&[IN + HID, 4 * HID], 8).unwrap().to_array::<f64>().unwrap() * scale);
    let bt = Tensor::from_array(Tensor::randn_f64(&[4 * HID], 9).unwrap().to_array::<f64>().unwrap() * scale);
    let want = oracle(&xt, &lens_v, &wt, &bt);

    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [n, MAX_LEN, IN]);
    let lens = g.input("lens", DType::I64, [n]);
    let w = g.constant(wt);
    let b = g.constant(bt);
    let modes = [Mode::Loop, Mode::Subset, Mode::Mask, Mode::Padded];
    let outs: Vec<ValueId> =
        modes.iter().map(|&m| lstm(&mut g, n, m, x, lens, w, b).unwrap_or_else(|e| panic!("{m:?}: {e}"))).collect();
    g.verify().unwrap();
    let r = run_once(&g, &outs, &[(x, xt), (lens, i64t(&[n], &lens_v))]).unwrap_or_else(|e| panic!("run: {e}"));
    assert_close(&r[0], &want, 1e-10);
    for (k, m) in modes.iter().enumerate().skip(1) {
        if let Err(e) = pfor::tensor::assert_close(&r[k], &r[0], 1e-10, 1e-10) {
            panic!("{m:?} vs loop: {e}");
        }
        assert_close(&r[k], &want, 1e-10);
    }
}
