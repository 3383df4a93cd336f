//! W3 at small sizes: an LSTM run by a per-example `while t < len_i` loop inside pfor
//! (Subset and Mask modes) and the hand-padded batched version, checked against the
//! reference loop and a plain-Rust ndarray LSTM. The graphs are the W3 example's
//! (`examples/lstm_variable_length.rs`), which the W3 benchmark builds too.

use crate::common::*;
use ndarray::{Array1, Array2, Axis, s};
use pfor::prelude::*;

const IN: usize = 4;
const HID: usize = 3;
const MAX_LEN: usize = 7;

// The graph under test is the W3 example's own (`lstm_graph`, any dtype and size).
#[path = "../../examples/lstm_variable_length.rs"]
#[allow(dead_code)]
mod w3_example;
use w3_example::{W3Mode, lstm_graph};

/// The final `h [n,HID]` of every sequence, built in `mode`.
fn lstm(g: &mut Graph, n: usize, mode: W3Mode, x: ValueId, lens: ValueId, w: ValueId, b: ValueId) -> Result<ValueId> {
    lstm_graph(g, n, mode, x, lens, (w, b), (IN, HID))
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
    let modes = [W3Mode::Loop, W3Mode::PforSubset, W3Mode::PforMask, W3Mode::Padded];
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
