//! Derivatives of `while` loops under pfor when the trip count differs per iteration:
//! per-example gradients, jacobians and hessians (pfors nested in a pfor) of losses whose
//! loop runs a data-dependent number of steps per example, under strict pfor
//! (`Fallback::Error`) in both control-flow modes. Gradients and jacobians are checked
//! against a loop of per-example `gradients` and central finite differences in f64;
//! hessians against the reference loop.

use pfor::api::{per_example_gradients_loop, per_example_gradients_with};
use pfor::autodiff::{gradients, jvp};
use pfor::ops::IterationCap;
use pfor::prelude::*;
use pfor::reference::for_loop;
use pfor::vectorize::{ControlFlowMode, PforOptions, pfor_with};

use super::control::{HID, IN, lstm_cell, while_loop};

type Loss = fn(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>;

const MODES: [ControlFlowMode; 2] = [ControlFlowMode::Subset, ControlFlowMode::Mask];

fn t(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec()).unwrap()
}
fn ti(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec()).unwrap()
}

fn close(what: &str, a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "{what}: element {i}: {x} vs {y}\n{a:?}\n{b:?}");
    }
}

/// `h ← tanh(h·w + a)·1.5 + 0.2·h` for `k` steps (a counter carry, `t < k`); returns the
/// final `h` and the trip count.
fn tanh_loop(g: &mut Graph, x: ValueId, k: ValueId, w: ValueId, a: ValueId) -> Result<(ValueId, ValueId)> {
    let t0 = g.constant(Tensor::scalar(0i64));
    let out = g.while_loop(
        &[t0, x],
        &[k, w, a],
        |g, p| g.less(p[0], p[2]),
        |g, p| {
            let hw = g.mul(p[1], p[3])?;
            let z = g.add(hw, p[4])?;
            let th = g.tanh(z)?;
            let th = g.mul_scalar(th, 1.5)?;
            let keep = g.mul_scalar(p[1], 0.2)?;
            let one = g.constant(Tensor::scalar(1i64));
            Ok(vec![g.add(p[0], one)?, g.add(th, keep)?])
        },
    )?;
    Ok((out[1], out[0]))
}

/// Rows `(x [3], k)`, params `(w [3], a [])`: `Σ h² + Σ h` of [`tanh_loop`].
fn tanh_loss(g: &mut Graph, rows: &[ValueId], p: &[ValueId]) -> Result<ValueId> {
    let (h, _) = tanh_loop(g, rows[0], rows[1], p[0], p[1])?;
    let sq = g.square(h)?;
    let s = g.add(sq, h)?;
    g.sum_all(s)
}

/// `h ← h·w + sin(h)` while `Σ|h| <= 3`: the trip count depends on the row's values.
fn threshold_loop(g: &mut Graph, x: ValueId, w: ValueId) -> Result<(ValueId, ValueId)> {
    let out = while_loop(g, x, w, 3.0)?;
    Ok((out[0], out[1]))
}

/// Rows `(x [3])`, params `(w [3])`: `Σ cos(h)` of [`threshold_loop`].
fn threshold_loss(g: &mut Graph, rows: &[ValueId], p: &[ValueId]) -> Result<ValueId> {
    let (h, _) = threshold_loop(g, rows[0], p[0])?;
    let c = g.cos(h)?;
    g.sum_all(c)
}

/// Rows `(x [L, IN], len)`, params `(wx [4, IN, HID], wh [4, HID, HID], b [4, HID])`: an
/// LSTM run to the example's own length; `Σ h² + Σ c`.
fn lstm_loss(g: &mut Graph, rows: &[ValueId], p: &[ValueId]) -> Result<ValueId> {
    let t0 = g.constant(Tensor::scalar(0i64));
    let h0 = g.zeros(DType::F64, &[HID]).unwrap();
    let c0 = g.zeros(DType::F64, &[HID]).unwrap();
    let out = g.while_loop(
        &[t0, h0, c0],
        &[rows[1], rows[0], p[0], p[1], p[2]],
        |g, a| g.less(a[0], a[3]),
        |g, a| {
            let xt = g.gather(a[4], a[0], 0)?;
            let (h, c) = lstm_cell(g, xt, a[1], a[2], [a[5], a[6], a[7]])?;
            let one = g.constant(Tensor::scalar(1i64));
            Ok(vec![g.add(a[0], one)?, h, c])
        },
    )?;
    let hh = g.square(out[1])?;
    let s1 = g.sum_all(hh)?;
    let s2 = g.sum_all(out[2])?;
    g.add(s1, s2)
}

fn input_like(g: &mut Graph, name: &str, v: &Tensor, dynamic_n: bool) -> ValueId {
    let shape = v.shape();
    if dynamic_n {
        let mut dims = vec![Dim::dynamic("n")];
        dims.extend(shape[1..].iter().map(|&d| Dim::Fixed(d)));
        g.input(name, v.dtype(), Shape::from_dims(dims))
    } else {
        g.input(name, v.dtype(), shape)
    }
}

/// Per-example gradients of `loss` under strict pfor with `opts`, checked against
/// `per_example_gradients_loop`, a loop of per-example `gradients` and central finite
/// differences (per example, per parameter element). Returns the pfor results.
fn check(loss: Loss, batch: &[Tensor], params: &[Tensor], opts: &PforOptions, dynamic_n: bool) -> Vec<Vec<f64>> {
    let n = batch[0].shape()[0];
    let mut g = Graph::new();
    let xs: Vec<ValueId> =
        batch.iter().enumerate().map(|(i, v)| input_like(&mut g, &format!("x{i}"), v, dynamic_n)).collect();
    let ps: Vec<ValueId> =
        params.iter().enumerate().map(|(i, v)| g.input(&format!("p{i}"), v.dtype(), v.shape())).collect();
    let pv = per_example_gradients_with(&mut g, opts, loss, &xs, &ps).unwrap();
    let pl = per_example_gradients_loop(&mut g, loss, &xs, &ps).unwrap();
    // A loop of per-example `gradients`, and the per-example losses for finite differences.
    let mut losses = Vec::new();
    let mut per_ex = Vec::new();
    for b in 0..n {
        let bb = g.constant(Tensor::scalar(b as i64));
        let rows: Vec<ValueId> = xs.iter().map(|x| g.gather(*x, bb, 0).unwrap()).collect();
        let l = loss(&mut g, &rows, &ps).unwrap();
        per_ex.push(gradients(&mut g, &[l], &ps, None).unwrap());
        losses.push(l);
    }
    let mut feeds: Vec<(ValueId, Tensor)> = xs.iter().copied().zip(batch.iter().cloned()).collect();
    feeds.extend(ps.iter().copied().zip(params.iter().cloned()));
    let mut fetch = pv.clone();
    fetch.extend(&pl);
    fetch.extend(per_ex.iter().flatten());
    let v = run_once(&g, &fetch, &feeds).unwrap();
    let np = params.len();
    let got: Vec<Vec<f64>> = v[..np].iter().map(Tensor::to_f64_vec).collect();
    for (j, p) in params.iter().enumerate() {
        assert_eq!(v[j].shape()[0], n, "param {j}: leading dim");
        close(&format!("param {j}: pfor vs map_fn"), &got[j], &v[np + j].to_f64_vec(), 1e-12);
        let size = p.len();
        for b in 0..n {
            let want = v[2 * np + b * np + j].to_f64_vec();
            close(
                &format!("param {j}, example {b}: pfor vs gradients"),
                &got[j][b * size..(b + 1) * size],
                &want,
                1e-12,
            );
        }
    }
    // Central finite differences of every example's loss.
    let mut sess = Session::new(&g, &losses).unwrap();
    let eps = 1e-6;
    for (j, p) in params.iter().enumerate() {
        let base = p.to_f64_vec();
        let size = base.len();
        for e in 0..size {
            let mut eval = |delta: f64| -> Vec<f64> {
                let mut q = base.clone();
                q[e] += delta;
                let mut f = feeds.clone();
                f[xs.len() + j].1 = t(p.shape(), &q);
                sess.run(&f).unwrap().iter().map(|l| l.scalar_f64().unwrap()).collect()
            };
            let (lp, lm) = (eval(eps), eval(-eps));
            for b in 0..n {
                let fd = (lp[b] - lm[b]) / (2.0 * eps);
                let gv = got[j][b * size + e];
                assert!(
                    (gv - fd).abs() <= 1e-6 * (1.0 + fd.abs()),
                    "param {j}[{e}], example {b}: pfor {gv} vs fd {fd}"
                );
            }
        }
    }
    got
}

/// The trip count of [`tanh_loop`] / [`threshold_loop`] per example (a reference run).
fn trip_counts(
    batch: &[Tensor],
    params: &[Tensor],
    f: fn(&mut Graph, &[ValueId], &[ValueId]) -> Result<ValueId>,
) -> Vec<i64> {
    let n = batch[0].shape()[0];
    let mut g = Graph::new();
    let xs: Vec<ValueId> =
        batch.iter().enumerate().map(|(i, v)| g.input(&format!("x{i}"), v.dtype(), v.shape())).collect();
    let ps: Vec<ValueId> =
        params.iter().enumerate().map(|(i, v)| g.input(&format!("p{i}"), v.dtype(), v.shape())).collect();
    let mut counts = Vec::new();
    for b in 0..n {
        let bb = g.constant(Tensor::scalar(b as i64));
        let rows: Vec<ValueId> = xs.iter().map(|x| g.gather(*x, bb, 0).unwrap()).collect();
        counts.push(f(&mut g, &rows, &ps).unwrap());
    }
    let mut feeds: Vec<(ValueId, Tensor)> = xs.iter().copied().zip(batch.iter().cloned()).collect();
    feeds.extend(ps.iter().copied().zip(params.iter().cloned()));
    run_once(&g, &counts, &feeds).unwrap().iter().map(|c| c.scalar_i64().unwrap()).collect()
}

fn tanh_trips(g: &mut Graph, rows: &[ValueId], p: &[ValueId]) -> Result<ValueId> {
    Ok(tanh_loop(g, rows[0], rows[1], p[0], p[1])?.1)
}
fn threshold_trips(g: &mut Graph, rows: &[ValueId], p: &[ValueId]) -> Result<ValueId> {
    Ok(threshold_loop(g, rows[0], p[0])?.1)
}

fn tanh_params() -> Vec<Tensor> {
    vec![t(&[3], &[0.9, -1.1, 0.6]), Tensor::scalar(0.15f64)]
}
fn tanh_xs(n: usize) -> Tensor {
    let v: Vec<f64> = (0..3 * n).map(|i| ((i * 7 % 11) as f64 - 5.0) / 6.0).collect();
    t(&[n, 3], &v)
}

#[test]
fn per_example_gradients_of_while_loops_with_per_example_trip_counts() {
    let ks = ti(&[4], &[4, 0, 2, 7]);
    let batch = [tanh_xs(4), ks];
    let params = tanh_params();
    assert_eq!(trip_counts(&batch, &params, tanh_trips), vec![4, 0, 2, 7]);
    for mode in MODES {
        let opts = PforOptions::strict().with_control_flow(mode);
        let got = check(tanh_loss, &batch, &params, &opts, false);
        // Example 1 runs no step: its loss Σ x² + Σ x does not depend on the params.
        assert!(got[0][3..6].iter().chain(&got[1][1..2]).all(|v| *v == 0.0), "{got:?}");
        assert!(got[0][..3].iter().any(|v| *v != 0.0) && got[0][9..].iter().any(|v| *v != 0.0));
        // Dynamic n, and chunks of 3 (a chunk of 3 rows, then a remainder of 1).
        check(tanh_loss, &batch, &params, &opts, true);
        check(tanh_loss, &batch, &params, &opts.clone().with_chunk_size(3), false);
    }
}

#[test]
fn per_example_gradients_of_while_loops_with_zero_trips_everywhere_and_one_example() {
    let params = tanh_params();
    for mode in MODES {
        let opts = PforOptions::strict().with_control_flow(mode);
        let batch = [tanh_xs(3), ti(&[3], &[0, 0, 0])];
        let got = check(tanh_loss, &batch, &params, &opts, false);
        assert!(got.iter().flatten().all(|v| *v == 0.0), "{got:?}");
        check(tanh_loss, &batch, &params, &opts, true);
        for k in [0, 5] {
            let batch = [tanh_xs(1), ti(&[1], &[k])];
            let got = check(tanh_loss, &batch, &params, &opts, false);
            assert_eq!(got[0].iter().any(|v| *v != 0.0), k > 0);
        }
    }
}

#[test]
fn per_example_gradients_of_a_while_loop_until_a_data_dependent_threshold() {
    let xs = t(&[4, 3], &[0.3, -0.2, 0.5, 0.1, 0.1, 0.1, 2.0, -1.5, 0.7, 0.9, -0.8, 0.7]);
    let params = vec![t(&[3], &[1.1, 1.2, 0.9])];
    let trips = trip_counts(std::slice::from_ref(&xs), &params, threshold_trips);
    assert!(trips.contains(&0) && trips.iter().any(|&k| k >= 3), "trip counts {trips:?}");
    assert!(trips.windows(2).filter(|w| w[0] != w[1]).count() >= 2, "trip counts {trips:?}");
    for mode in MODES {
        check(
            threshold_loss,
            std::slice::from_ref(&xs),
            &params,
            &PforOptions::strict().with_control_flow(mode),
            false,
        );
    }
}

#[test]
fn per_example_gradients_of_an_lstm_run_to_per_example_lengths() {
    let l = 4;
    let xs = super::fd::randn(&[4, l, IN], 21);
    let params = vec![
        super::fd::randn(&[4, IN, HID], 22),
        super::fd::randn(&[4, HID, HID], 23),
        super::fd::randn(&[4, HID], 24),
    ];
    // Subset mode never runs a step past an example's length, so a length may be L.
    let lens = ti(&[4], &[3, 1, 4, 0]);
    let opts = PforOptions::strict().with_control_flow(ControlFlowMode::Subset);
    let got = check(lstm_loss, &[xs.clone(), lens], &params, &opts, false);
    // The example of length 0 has zero gradients; the others do not.
    let sz: Vec<usize> = params.iter().map(Tensor::len).collect();
    for (j, s) in sz.iter().enumerate() {
        assert!(got[j][3 * s..4 * s].iter().all(|v| *v == 0.0));
        assert!(got[j][..*s].iter().any(|v| *v != 0.0));
    }
    // Mask mode runs the body on finished rows too (reading x[len]), so lengths stay < L.
    let lens = ti(&[4], &[3, 1, 0, 2]);
    let opts = PforOptions::strict().with_control_flow(ControlFlowMode::Mask);
    check(lstm_loss, &[xs, lens], &params, &opts, false);
}

/// The batch of the nested-derivative tests: rows `x [4,3]` with trip counts `[4, 0, 2, 7]`,
/// and the params `(w [3], a [])`.
fn tanh_batch() -> ([Tensor; 2], Vec<Tensor>) {
    ([tanh_xs(4), ti(&[4], &[4, 0, 2, 7])], tanh_params())
}

/// A graph with inputs `x`, `k` (the batch) and `w`, `a` (the params), and their feeds.
fn tanh_batch_graph(batch: &[Tensor; 2], params: &[Tensor]) -> (Graph, [ValueId; 4], Vec<(ValueId, Tensor)>) {
    let mut g = Graph::new();
    let (xs, ks) = (g.input("x", DType::F64, [4, 3]), g.input("k", DType::I64, [4]));
    let (w, a) = (g.input("w", DType::F64, [3]), g.input("a", DType::F64, Shape::scalar()));
    let feeds = vec![(xs, batch[0].clone()), (ks, batch[1].clone()), (w, params[0].clone()), (a, params[1].clone())];
    (g, [xs, ks, w, a], feeds)
}

/// Per-example jacobians `d h_b / d w` (a jacobian pfor nested in the per-example pfor):
/// the inner pfor sees one trip count, the outer one a trip count per example.
#[test]
fn per_example_jacobians_of_while_loops_with_per_example_trip_counts() {
    use pfor::api::{jacobian_with, map_fn, vectorized_map_with};
    let (batch, params) = tanh_batch();
    for mode in MODES {
        let opts = PforOptions::strict().with_control_flow(mode);
        let (mut g, [xs, ks, w, a], feeds) = tanh_batch_graph(&batch, &params);
        let o2 = opts.clone();
        let body = move |g: &mut Graph, r: &[ValueId]| -> Result<Vec<ValueId>> {
            let (h, _) = tanh_loop(g, r[0], r[1], w, a)?;
            Ok(vec![jacobian_with(g, h, w, &o2)?])
        };
        let jv = vectorized_map_with(&mut g, &opts, body.clone(), &[xs, ks]).unwrap()[0];
        let jl = map_fn(&mut g, body, &[xs, ks]).unwrap()[0];
        let v = run_once(&g, &[jv, jl], &feeds).unwrap();
        assert_eq!(v[0].shape(), &[4, 3, 3]);
        close("jacobian: pfor vs map_fn", &v[0].to_f64_vec(), &v[1].to_f64_vec(), 1e-12);
        // Finite differences of h_b w.r.t. w.
        let mut h = Graph::new();
        let (hx, hk, hw, ha) = (
            h.input("x", DType::F64, [4, 3]),
            h.input("k", DType::I64, [4]),
            h.input("w", DType::F64, [3]),
            h.input("a", DType::F64, Shape::scalar()),
        );
        let mut outs = Vec::new();
        for b in 0..4 {
            let bb = h.constant(Tensor::scalar(b as i64));
            let (xb, kb) = (h.gather(hx, bb, 0).unwrap(), h.gather(hk, bb, 0).unwrap());
            outs.push(tanh_loop(&mut h, xb, kb, hw, ha).unwrap().0);
        }
        let y = h.stack(&outs, 0).unwrap();
        let mut sess = Session::new(&h, &[y]).unwrap();
        let w0 = params[0].to_f64_vec();
        let mut eval = |q: &[f64]| {
            let f = vec![(hx, batch[0].clone()), (hk, batch[1].clone()), (hw, t(&[3], q)), (ha, params[1].clone())];
            sess.run(&f).unwrap()[0].to_f64_vec()
        };
        let eps = 1e-6;
        let mut want = vec![0.0; 4 * 3 * 3];
        for e in 0..3 {
            let (mut p, mut m) = (w0.clone(), w0.clone());
            p[e] += eps;
            m[e] -= eps;
            let (yp, ym) = (eval(&p), eval(&m));
            for r in 0..12 {
                want[r * 3 + e] = (yp[r] - ym[r]) / (2.0 * eps);
            }
        }
        close("jacobian: pfor vs fd", &v[0].to_f64_vec(), &want, 1e-6);
    }
}

/// Per-example hessians (second-order derivatives of the loop inside the per-example
/// pfor): the vectorized result equals the reference loop; second derivatives themselves
/// are checked against finite differences in `control.rs`.
#[test]
fn per_example_hessians_of_while_loops_with_per_example_trip_counts() {
    use pfor::api::{hessian_with, map_fn, vectorized_map_with};
    let (batch, params) = tanh_batch();
    for mode in MODES {
        let opts = PforOptions::strict().with_control_flow(mode);
        let (mut g, [xs, ks, w, a], feeds) = tanh_batch_graph(&batch, &params);
        let o2 = opts.clone();
        let body = move |g: &mut Graph, r: &[ValueId]| -> Result<Vec<ValueId>> {
            let l = tanh_loss(g, &[r[0], r[1]], &[w, a])?;
            Ok(vec![hessian_with(g, l, w, &o2)?])
        };
        let hv = vectorized_map_with(&mut g, &opts, body.clone(), &[xs, ks]).unwrap()[0];
        let hl = map_fn(&mut g, body, &[xs, ks]).unwrap()[0];
        let v = run_once(&g, &[hv, hl], &feeds).unwrap();
        assert_eq!(v[0].shape(), &[4, 3, 3]);
        let h = v[0].to_f64_vec();
        close("hessian: pfor vs map_fn", &h, &v[1].to_f64_vec(), 1e-10);
        // Example 1 runs no step (zero hessian); the others do not.
        assert!(h[9..18].iter().all(|x| *x == 0.0) && h[..9].iter().any(|x| *x != 0.0), "{h:?}");
    }
}

// ---- Derivatives of pfor'd control flow (the Subset, Mask and Auto forms) vs the loop ----

const ALL_MODES: [ControlFlowMode; 3] = [ControlFlowMode::Subset, ControlFlowMode::Mask, ControlFlowMode::Auto];

/// One iteration's control flow on `(x_i [3], k_i, w [3], a)`, returning a `[3]` value.
type Step = fn(&mut Graph, ValueId, ValueId, ValueId, ValueId) -> Result<ValueId>;

/// [`tanh_loop`] run `k_i` steps.
fn step_counted(g: &mut Graph, x: ValueId, k: ValueId, w: ValueId, a: ValueId) -> Result<ValueId> {
    Ok(tanh_loop(g, x, k, w, a)?.0)
}

/// [`tanh_loop`]'s update while `Σ|h| <= 2 + a` (the trip count depends on the values).
fn step_threshold(g: &mut Graph, x: ValueId, _k: ValueId, w: ValueId, a: ValueId) -> Result<ValueId> {
    let out = g.while_loop(
        &[x],
        &[w, a],
        |g, p| {
            let s = g.abs(p[0])?;
            let s = g.sum_all(s)?;
            let b = g.add_scalar(p[2], 2.0)?;
            g.less_equal(s, b)
        },
        |g, p| {
            let hw = g.mul(p[0], p[1])?;
            let z = g.add(hw, p[2])?;
            let th = g.tanh(z)?;
            let s = g.add_scalar(th, 0.3)?;
            Ok(vec![g.add(s, p[0])?])
        },
    )?;
    Ok(out[0])
}

/// [`tanh_loop`] capped at 3 trips (`Stop`): rows with `k_i > 3` are still active at the cap.
fn step_capped(g: &mut Graph, x: ValueId, k: ValueId, w: ValueId, a: ValueId) -> Result<ValueId> {
    let t0 = g.constant(Tensor::scalar(0i64));
    let out = g.while_loop_with(
        &[t0, x],
        &[k, w, a],
        IterationCap::stop(3),
        |g, p| g.less(p[0], p[2]),
        |g, p| {
            let hw = g.mul(p[1], p[3])?;
            let z = g.add(hw, p[4])?;
            let th = g.tanh(z)?;
            let one = g.constant(Tensor::scalar(1i64));
            Ok(vec![g.add(p[0], one)?, g.add(th, p[1])?])
        },
    )?;
    Ok(out[1])
}

/// [`tanh_loop`] with a float carry `c = x·a` the body passes through unchanged (and reads).
fn step_pass_through(g: &mut Graph, x: ValueId, k: ValueId, w: ValueId, a: ValueId) -> Result<ValueId> {
    let (t0, c0) = (g.constant(Tensor::scalar(0i64)), g.mul(x, a)?);
    let out = g.while_loop(
        &[t0, x, c0],
        &[k, w],
        |g, p| g.less(p[0], p[3]),
        |g, p| {
            let hw = g.mul(p[1], p[4])?;
            let z = g.add(hw, p[2])?;
            let one = g.constant(Tensor::scalar(1i64));
            Ok(vec![g.add(p[0], one)?, g.tanh(z)?, p[2]])
        },
    )?;
    g.add(out[1], out[2])
}

/// `cond(Σx > 0, then: x[rev]·w + sin(x)·a, else: x·a - w)`: the gather keeps `Auto` on the
/// Subset form.
fn step_cond(g: &mut Graph, x: ValueId, _k: ValueId, w: ValueId, a: ValueId) -> Result<ValueId> {
    let s = g.sum_all(x)?;
    let z = g.scalar(DType::F64, 0.0);
    let p = g.greater(s, z)?;
    let out = g.cond(
        p,
        &[x, w, a],
        |g, b| {
            let rev = g.constant(Tensor::vec1(&[2i64, 1, 0]));
            let r = g.gather(b[0], rev, 0)?;
            let r = g.mul(r, b[1])?;
            let s = g.sin(b[0])?;
            let s = g.mul(s, b[2])?;
            Ok(vec![g.add(r, s)?])
        },
        |g, b| {
            let m = g.mul(b[0], b[2])?;
            Ok(vec![g.sub(m, b[1])?])
        },
    )?;
    Ok(out[0])
}

/// `step` on row `i` of `xs`, `ks`.
fn row_step(g: &mut Graph, step: Step, [xs, ks, w, a]: [ValueId; 4], i: ValueId) -> Result<ValueId> {
    let (x, k) = (g.gather(xs, i, 0)?, g.gather(ks, i, 0)?);
    step(g, x, k, w, a)
}

/// `Σ sin(y)·y`, the loss of the comparisons.
fn loss_of(g: &mut Graph, y: ValueId) -> ValueId {
    let s = g.sin(y).unwrap();
    let p = g.mul(s, y).unwrap();
    g.sum_all(p).unwrap()
}

/// Gradients (w.r.t. `xs`, `w`, `a`) and jvps of `loss_of(ys)` / `ys`, in that order.
fn derivatives(g: &mut Graph, ys: ValueId, [xs, _, w, a]: [ValueId; 4]) -> Vec<ValueId> {
    let l = loss_of(g, ys);
    let mut out = gradients(g, &[l], &[xs, w, a], None).unwrap();
    let tx = g.constant(t(&[4, 3], &[0.3, -0.1, 0.2, 0.5, 0.4, -0.6, 0.1, 0.2, 0.3, -0.2, 0.7, 0.1]));
    let tw = g.constant(t(&[3], &[0.2, -0.4, 0.3]));
    let ta = g.constant(Tensor::scalar(-0.5f64));
    out.extend(jvp(g, &[ys, l], &[xs, w, a], &[tx, tw, ta]).unwrap());
    out
}

fn compare(what: &str, v: &[Tensor], tol: f64) {
    let h = v.len() / 2;
    for (j, (p, l)) in v[..h].iter().zip(&v[h..]).enumerate() {
        assert_eq!(p.shape(), l.shape(), "{what}: derivative {j}: shape");
        close(&format!("{what}: derivative {j}: pfor vs loop"), &p.to_f64_vec(), &l.to_f64_vec(), tol);
    }
}

/// The graph of the comparisons: [`tanh_batch`] (trip counts `[4, 0, 2, 7]`: the capped
/// loop stops rows 0 and 3 at its cap of 3).
fn form_graph() -> (Graph, [ValueId; 4], Vec<(ValueId, Tensor)>) {
    let (batch, params) = tanh_batch();
    tanh_batch_graph(&batch, &params)
}

#[test]
fn gradients_and_jvps_of_pfor_converted_control_flow_equal_the_loops() {
    let steps: [(&str, Step); 5] = [
        ("counted while", step_counted),
        ("while with a pass-through carry", step_pass_through),
        ("threshold while", step_threshold),
        ("capped while", step_capped),
        ("cond", step_cond),
    ];
    for (name, step) in steps {
        for mode in ALL_MODES {
            let opts = PforOptions::strict().with_control_flow(mode);
            let (mut g, ins, feeds) = form_graph();
            let yp = pfor_with(&mut g, 4, &opts, |g, i| Ok(vec![row_step(g, step, ins, i)?])).unwrap()[0];
            let yl = for_loop(&mut g, 4, |g, i| Ok(vec![row_step(g, step, ins, i)?])).unwrap()[0];
            let mut fetch = vec![yp];
            fetch.extend(derivatives(&mut g, yp, ins));
            fetch.push(yl);
            fetch.extend(derivatives(&mut g, yl, ins));
            g.verify().unwrap();
            let v = run_once(&g, &fetch, &feeds).unwrap_or_else(|e| panic!("{name}, {mode:?}: {e}"));
            compare(&format!("{name}, {mode:?}"), &v, 1e-12);
            // every derivative is nonzero somewhere (the comparison is not vacuous)
            assert!(v[1..6].iter().all(|d| d.to_f64_vec().iter().any(|x| *x != 0.0)), "{name}, {mode:?}");
        }
    }
}

/// A pfor over `a` of a pfor over `b` of a while with trip count `ks[a, b]` (the Subset
/// form rebuilt over the combined iteration space), differentiated, vs the nested loop.
#[test]
fn derivatives_of_two_level_pfor_converted_whiles_equal_the_loops() {
    let xv: Vec<f64> = (0..18).map(|i| ((i * 5 % 7) as f64 - 3.0) / 4.0).collect();
    let kv = [3i64, 0, 5, 1, 4, 2];
    for (name, step) in [("counted", step_counted as Step), ("capped", step_capped), ("cond", step_cond)] {
        for mode in ALL_MODES {
            let opts = PforOptions::strict().with_control_flow(mode);
            let mut g = Graph::new();
            let (xs, ks) = (g.input("x", DType::F64, [2, 3, 3]), g.input("k", DType::I64, [2, 3]));
            let (w, a) = (g.input("w", DType::F64, [3]), g.input("a", DType::F64, Shape::scalar()));
            let inner = |g: &mut Graph, i: ValueId, j: ValueId| -> Result<ValueId> {
                let (x, k) = (g.gather(xs, i, 0)?, g.gather(ks, i, 0)?);
                row_step(g, step, [x, k, w, a], j)
            };
            let o2 = opts.clone();
            let yp =
                pfor_with(&mut g, 2, &opts, |g, i| pfor_with(g, 3, &o2, |g, j| Ok(vec![inner(g, i, j)?]))).unwrap()[0];
            let yl = for_loop(&mut g, 2, |g, i| for_loop(g, 3, |g, j| Ok(vec![inner(g, i, j)?]))).unwrap()[0];
            let mut fetch = Vec::new();
            for y in [yp, yl] {
                let l = loss_of(&mut g, y);
                fetch.extend(gradients(&mut g, &[l], &[xs, w, a], None).unwrap());
                let (tx, tw) = (g.ones_like(xs).unwrap(), g.constant(t(&[3], &[0.5, -1.0, 0.25])));
                let ta = g.constant(Tensor::scalar(0.3f64));
                fetch.extend(jvp(&mut g, &[y], &[xs, w, a], &[tx, tw, ta]).unwrap());
            }
            let feeds = vec![
                (xs, t(&[2, 3, 3], &xv)),
                (ks, ti(&[2, 3], &kv)),
                (w, t(&[3], &[0.9, -1.1, 0.6])),
                (a, Tensor::scalar(0.15f64)),
            ];
            let v = run_once(&g, &fetch, &feeds).unwrap_or_else(|e| panic!("{name}, {mode:?}: {e}"));
            compare(&format!("two levels, {name}, {mode:?}"), &v, 1e-12);
        }
    }
}

/// `jacobian` (a pfor of gradients) and `hessian` (its jacobian) of a function whose pfor'd
/// body holds a data-dependent while, vs loops of gradients.
#[test]
fn jacobians_and_hessians_through_pfor_converted_whiles_equal_loops_of_gradients() {
    use pfor::api::{hessian_with, jacobian_fwd_with, jacobian_loop, jacobian_with};
    for (name, step) in [("counted", step_counted as Step), ("threshold", step_threshold), ("capped", step_capped)] {
        for mode in ALL_MODES {
            let opts = PforOptions::strict().with_control_flow(mode);
            let (mut g, ins, feeds) = form_graph();
            let w = ins[2];
            let yp = pfor_with(&mut g, 4, &opts, |g, i| Ok(vec![row_step(g, step, ins, i)?])).unwrap()[0];
            let yl = for_loop(&mut g, 4, |g, i| Ok(vec![row_step(g, step, ins, i)?])).unwrap()[0];
            let (lp, ll) = (loss_of(&mut g, yp), loss_of(&mut g, yl));
            let jp = jacobian_with(&mut g, yp, w, &opts).unwrap();
            let jf = jacobian_fwd_with(&mut g, yp, w, &opts).unwrap();
            let hp = hessian_with(&mut g, lp, w, &opts).unwrap();
            let jl = jacobian_loop(&mut g, yl, w).unwrap();
            let dl = gradients(&mut g, &[ll], &[w], None).unwrap()[0];
            let hl = jacobian_loop(&mut g, dl, w).unwrap();
            let v = run_once(&g, &[jp, jf, hp, jl, jl, hl], &feeds).unwrap_or_else(|e| panic!("{name}, {mode:?}: {e}"));
            assert_eq!(v[0].shape(), &[4, 3, 3]);
            assert_eq!(v[2].shape(), &[3, 3]);
            compare(&format!("jacobian / hessian, {name}, {mode:?}"), &v, 1e-10);
        }
    }
}

/// Gradients of per-example gradients (a pfor of gradients of a loss with a per-example
/// trip count, differentiated again) vs the same of the loop of per-example gradients.
#[test]
fn gradients_of_per_example_gradients_through_while_loops_equal_the_loops() {
    for mode in ALL_MODES {
        let opts = PforOptions::strict().with_control_flow(mode);
        let (mut g, [xs, ks, w, a], feeds) = form_graph();
        let pv = per_example_gradients_with(&mut g, &opts, tanh_loss, &[xs, ks], &[w, a]).unwrap();
        let pl = per_example_gradients_loop(&mut g, tanh_loss, &[xs, ks], &[w, a]).unwrap();
        let mut fetch = Vec::new();
        for pe in [pv, pl] {
            let s0 = loss_of(&mut g, pe[0]);
            let s1 = loss_of(&mut g, pe[1]);
            let s = g.add(s0, s1).unwrap();
            fetch.extend(gradients(&mut g, &[s], &[xs, w, a], None).unwrap());
            let tw = g.constant(t(&[3], &[0.2, -0.4, 0.3]));
            let ta = g.constant(Tensor::scalar(0.7f64));
            fetch.extend(jvp(&mut g, &[pe[0], pe[1]], &[w, a], &[tw, ta]).unwrap());
        }
        let v = run_once(&g, &fetch, &feeds).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        compare(&format!("per-example gradients, {mode:?}"), &v, 1e-10);
        assert!(v[1].to_f64_vec().iter().any(|x| *x != 0.0));
    }
}
