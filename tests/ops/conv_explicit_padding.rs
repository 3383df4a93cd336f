//! `Padding::Explicit`: per-side pads of convs and pools (ONNX's `pads`) computed by the
//! kernels themselves. Each case equals the same op with VALID padding on an explicitly
//! padded copy of its input (zeros for convs, -inf for max pooling; average pooling divides
//! by the count of real elements, so the reference is a zero-padded sum over a padded count),
//! in values, in derivatives w.r.t. the input and the filter, under pfor, and through the
//! graph format.

use crate::common::*;
use pfor::autodiff::gradients;
use pfor::ops::conv::Conv2dParams;
use pfor::ops::slicing::PadMode;
use pfor::prelude::*;

use Padding::{Explicit, Valid};

/// (input [N,H,W,C], pads [(top, bottom), (left, right)], window, strides, dilations); no
/// pooled window lies wholly in the padding (pools skip the padded 1x1 case).
type Case = ([usize; 4], [(usize, usize); 2], [usize; 2], [usize; 2], [usize; 2]);

const CASES: &[Case] = &[
    ([2, 7, 6, 3], [(1, 1), (1, 1)], [3, 3], [2, 2], [1, 1]),
    ([1, 8, 8, 2], [(3, 3), (3, 3)], [7, 7], [2, 2], [1, 1]),
    ([2, 5, 6, 2], [(0, 2), (1, 0)], [3, 2], [1, 2], [1, 1]),
    ([1, 6, 5, 2], [(2, 1), (0, 1)], [2, 3], [1, 1], [2, 1]),
    ([1, 4, 4, 1], [(1, 0), (0, 1)], [2, 2], [3, 1], [1, 1]),
    // a padded 1x1 window: no longer a plain GEMM on the input
    ([2, 3, 4, 5], [(1, 2), (2, 0)], [1, 1], [1, 1], [1, 1]),
];

fn padded(g: &mut Graph, x: ValueId, p: [(usize, usize); 2], v: f64) -> Result<ValueId> {
    g.pad(x, &[(0, 0), p[0], p[1], (0, 0)], PadMode::Constant(v))
}

/// `f(explicit)` and `f(reference)` evaluated on the same inputs.
fn both(inputs: &[Tensor], f: impl Fn(&mut Graph, &[ValueId], bool) -> Result<ValueId>) -> (Tensor, Tensor) {
    let mut g = Graph::new();
    let xs: Vec<ValueId> = inputs.iter().map(|t| g.constant(t.clone())).collect();
    let a = f(&mut g, &xs, true).unwrap();
    let b = f(&mut g, &xs, false).unwrap();
    let r = eval(&g, &[a, b]);
    (r[0].clone(), r[1].clone())
}

fn conv(g: &mut Graph, x: ValueId, w: ValueId, c: &Case, explicit: bool) -> Result<ValueId> {
    let (_, pads, _, s, d) = *c;
    if explicit {
        return g.conv2d(x, w, Conv2dParams { strides: s, padding: Explicit(pads), dilations: d });
    }
    let xp = padded(g, x, pads, 0.0)?;
    g.conv2d(xp, w, Conv2dParams { strides: s, padding: Valid, dilations: d })
}

fn max_pool(g: &mut Graph, x: ValueId, c: &Case, explicit: bool) -> Result<ValueId> {
    let (_, pads, k, s, _) = *c;
    if explicit {
        return g.max_pool(x, k, s, Explicit(pads));
    }
    let xp = padded(g, x, pads, f64::NEG_INFINITY)?;
    g.max_pool(xp, k, s, Valid)
}

fn avg_pool(g: &mut Graph, x: ValueId, c: &Case, explicit: bool) -> Result<ValueId> {
    let (_, pads, k, s, _) = *c;
    if explicit {
        return g.avg_pool(x, k, s, Explicit(pads));
    }
    // the mean of the real elements: zero-padded sum over the padded count of ones
    let xp = padded(g, x, pads, 0.0)?;
    let sum = g.avg_pool(xp, k, s, Valid)?;
    let ones = g.ones_like(x)?;
    let ones = padded(g, ones, pads, 0.0)?;
    let share = g.avg_pool(ones, k, s, Valid)?;
    g.div(sum, share)
}

fn input(c: &Case, seed: u64) -> Tensor {
    Tensor::randn(&c.0, seed).unwrap()
}

fn filter(c: &Case, out: usize, seed: u64) -> Tensor {
    Tensor::randn(&[c.2[0], c.2[1], c.0[3], out], seed).unwrap()
}

#[test]
fn explicit_pads_equal_a_padded_copy_with_valid_windows() {
    for (i, c) in CASES.iter().enumerate() {
        let (x, w) = (input(c, 10 + i as u64), filter(c, 4, 20 + i as u64));
        let (a, b) = both(&[x.clone(), w], |g, v, e| conv(g, v[0], v[1], c, e));
        assert_close(&a, &b, 1e-5);
        if c.4 == [1, 1] && c.2 != [1, 1] {
            let (a, b) = both(std::slice::from_ref(&x), |g, v, e| max_pool(g, v[0], c, e));
            assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap(), "max_pool case {i}");
            let (a, b) = both(&[x], |g, v, e| avg_pool(g, v[0], c, e));
            assert_close(&a, &b, 1e-5);
        }
    }
}

#[test]
fn explicit_pads_of_a_depthwise_conv() {
    let c = &CASES[0];
    let (x, w) = (input(c, 3), Tensor::randn(&[3, 3, 3, 2], 4).unwrap());
    let (a, b) = both(&[x, w], |g, v, e| {
        let padding = if e { Explicit(c.1) } else { Valid };
        let xin = if e { v[0] } else { padded(g, v[0], c.1, 0.0)? };
        g.depthwise_conv2d(xin, v[1], Conv2dParams { strides: c.3, padding, dilations: c.4 })
    });
    assert_close(&a, &b, 1e-5);
}

#[test]
fn explicit_pads_keep_the_derivatives() {
    for (i, c) in CASES.iter().enumerate() {
        let (x, w) = (input(c, 30 + i as u64), filter(c, 3, 40 + i as u64));
        let grads = |explicit: bool| -> Vec<Tensor> {
            let mut g = Graph::new();
            let (xv, wv) = (g.constant(x.clone()), g.constant(w.clone()));
            let y = conv(&mut g, xv, wv, c, explicit).unwrap();
            let y = g.tanh(y).unwrap();
            let mut l = g.sum_all(y).unwrap();
            if c.4 == [1, 1] && c.2 != [1, 1] {
                type Pool = fn(&mut Graph, ValueId, &Case, bool) -> Result<ValueId>;
                for pool in [max_pool as Pool, avg_pool] {
                    let p = pool(&mut g, xv, c, explicit).unwrap();
                    let q = g.mul(p, p).unwrap();
                    let q = g.sum_all(q).unwrap();
                    l = g.add(l, q).unwrap();
                }
            }
            let gs = gradients(&mut g, &[l], &[xv, wv], None).unwrap();
            eval(&g, &gs)
        };
        let (a, b) = (grads(true), grads(false));
        for (ga, gb) in a.iter().zip(&b) {
            assert_close(ga, gb, 1e-4);
        }
    }
}

#[test]
fn explicit_pads_under_pfor_equal_the_loop() {
    let c = &CASES[0];
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn(&[3, 2, 7, 6, 3], 7).unwrap());
    let w = g.constant(filter(c, 4, 8));
    let body = |g: &mut Graph, x: ValueId| -> Result<Vec<ValueId>> {
        let y = conv(g, x, w, c, true)?;
        let y = g.relu(y)?;
        Ok(vec![g.max_pool(y, [2, 2], [1, 1], Explicit([(1, 0), (0, 1)]))?])
    };
    let fast = pfor::api::vectorized_map_with(&mut g, &PforOptions::strict(), |g, x| body(g, x[0]), &[xs]).unwrap();
    let slow = for_loop(&mut g, 3, |g, i| {
        let xi = g.gather(xs, i, 0)?;
        body(g, xi)
    })
    .unwrap();
    let r = eval(&g, &[fast[0], slow[0]]);
    assert_close(&r[0], &r[1], 1e-5);
}

#[test]
fn explicit_pads_round_trip_through_the_graph_format() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [1, 5, 5, 2]);
    let y = g.max_pool(x, [3, 3], [2, 2], Explicit([(1, 2), (0, 1)])).unwrap();
    let bytes = g.to_bytes(&[y]).unwrap();
    let (h, outs) = Graph::from_bytes(&bytes).unwrap();
    assert_eq!(h.node(outs[0].node).unwrap().op.to_string(), g.node(y.node).unwrap().op.to_string());
    assert_eq!(h.shape(outs[0]).unwrap(), g.shape(y).unwrap());
}

#[test]
fn a_window_larger_than_the_padded_input_is_an_error_naming_the_op() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [1, 2, 2, 1]);
    let e = g.max_pool(x, [5, 2], [1, 1], Explicit([(1, 1), (0, 0)])).unwrap_err().to_string();
    assert!(e.contains("max_pool") && e.contains("height") && e.contains("padded"), "{e}");
}
