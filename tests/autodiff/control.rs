//! Derivative tests of the `control` family: cond (both branches, captured values), while
//! with a data-dependent trip count (first and second order), cond nested in while, for,
//! call; the O(T) recording of while gradients; the jacobian of while loops with per-row
//! trip counts under strict pfor.

use super::fd::{FdCase, case, check};
use pfor::api::lstm_gates;
use pfor::prelude::*;
use pfor::reference::{LoopLen, for_loop};

fn t(shape: &[usize], v: &[f64]) -> Tensor {
    Tensor::from_vec(shape, v.to_vec()).unwrap()
}

/// `cond(Σx > 0, then: sin(x)·w + x², else: x·w - exp(w))` on `(x, w)`.
fn cond_case(name: &str, x: &[f64]) -> FdCase {
    case(name, vec![t(&[3], x), t(&[3], &[0.7, -1.3, 0.4])], |g, a| {
        let s = g.sum_all(a[0])?;
        let z = g.scalar(DType::F64, 0.0);
        let p = g.greater(s, z)?;
        let out = g.cond(
            p,
            &[a[0], a[1]],
            |g, b| {
                let s = g.sin(b[0])?;
                let m = g.mul(s, b[1])?;
                let q = g.square(b[0])?;
                Ok(vec![g.add(m, q)?])
            },
            |g, b| {
                let m = g.mul(b[0], b[1])?;
                let e = g.exp(b[1])?;
                Ok(vec![g.sub(m, e)?])
            },
        )?;
        Ok(out)
    })
    .second()
}

/// The condition of the loops below: `Σ|x| <= bound` over carries `(i, x)` and captures
/// `(c, bound)`.
fn abs_sum_at_most(g: &mut Graph, a: &[ValueId]) -> Result<ValueId> {
    let ab = g.abs(a[1])?;
    let s = g.sum_all(ab)?;
    g.less_equal(s, a[3])
}

/// `x ← x·c + sin(x)` with a counter, until `Σ|x| > bound`; outputs `(x, count)`.
pub fn while_loop(g: &mut Graph, x: ValueId, c: ValueId, bound: f64) -> Result<Vec<ValueId>> {
    let i0 = g.constant(Tensor::scalar(0i64));
    let b = g.scalar(DType::F64, bound);
    let out = g.while_loop(&[i0, x], &[c, b], abs_sum_at_most, |g, a| {
        let xc = g.mul(a[1], a[2])?;
        let sx = g.sin(a[1])?;
        let one = g.constant(Tensor::scalar(1i64));
        Ok(vec![g.add(a[0], one)?, g.add(xc, sx)?])
    })?;
    Ok(vec![out[1], out[0]])
}

/// Like [`while_loop`] with a cond in the body: even steps `x·c + sin(x)`, odd steps
/// `x + c·cos(x)`.
fn while_cond_loop(g: &mut Graph, x: ValueId, c: ValueId, bound: f64) -> Result<Vec<ValueId>> {
    let i0 = g.constant(Tensor::scalar(0i64));
    let b = g.scalar(DType::F64, bound);
    let out = g.while_loop(&[i0, x], &[c, b], abs_sum_at_most, |g, a| {
        let two = g.constant(Tensor::scalar(2i64));
        let r = g.floor_mod(a[0], two)?;
        let zero = g.constant(Tensor::scalar(0i64));
        let even = g.equal(r, zero)?;
        let x = g.cond(
            even,
            &[a[1], a[2]],
            |g, b| {
                let xc = g.mul(b[0], b[1])?;
                let sx = g.sin(b[0])?;
                Ok(vec![g.add(xc, sx)?])
            },
            |g, b| {
                let cx = g.cos(b[0])?;
                let m = g.mul(b[1], cx)?;
                Ok(vec![g.add(b[0], m)?])
            },
        )?;
        let one = g.constant(Tensor::scalar(1i64));
        Ok(vec![g.add(a[0], one)?, x[0]])
    })?;
    Ok(vec![out[1], out[0]])
}

fn trips(build: impl Fn(&mut Graph, ValueId, ValueId) -> Result<Vec<ValueId>>, x: &Tensor, c: &Tensor) -> i64 {
    let mut g = Graph::new();
    let (xv, cv) = (g.input("x", DType::F64, x.shape()), g.input("c", DType::F64, c.shape()));
    let out = build(&mut g, xv, cv).unwrap();
    run_once(&g, &[out[1]], &[(xv, x.clone()), (cv, c.clone())]).unwrap()[0].scalar_i64().unwrap()
}

fn x0() -> Tensor {
    t(&[3], &[0.3, -0.2, 0.5])
}
fn c0() -> Tensor {
    t(&[3], &[1.1, 1.2, 0.9])
}

/// Finite-difference cases covering every differentiable kind of the family.
pub fn cases() -> Vec<FdCase> {
    vec![
        cond_case("cond then-branch", &[0.5, -0.2, 0.9]),
        cond_case("cond else-branch", &[-0.5, 0.2, -0.9]),
        case("while data-dependent trip count", vec![x0(), c0()], |g, a| while_loop(g, a[0], a[1], 6.0)).second(),
        case("while with zero trips", vec![x0(), c0()], |g, a| while_loop(g, a[0], a[1], 0.1)).second(),
        case("cond nested in while", vec![x0(), c0()], |g, a| while_cond_loop(g, a[0], a[1], 6.0)).second(),
        case("for over captures", vec![t(&[2], &[0.4, -0.7]), t(&[2], &[1.5, 0.3])], |g, a| {
            let (x, w) = (a[0], a[1]);
            for_loop(g, LoopLen::Static(4), |g, j| {
                let jf = g.cast(j, DType::F64)?;
                let xj = g.mul(x, jf)?;
                let s = g.sin(xj)?;
                let y = g.mul(s, w)?;
                Ok(vec![g.add(y, x)?])
            })
        })
        .second(),
        case("call of a library function", vec![t(&[3], &[0.4, -0.7, 1.1]), t(&[3], &[1.5, 0.3, -0.8])], |g, a| {
            let ty = TensorType::new(DType::F64, [3]);
            g.function("f", &[ty.clone(), ty], |g, p| {
                let e = g.tanh(p[0])?;
                let m = g.mul(e, p[1])?;
                Ok(vec![m, g.sin(p[1])?])
            })?;
            let r = g.call("f", &[a[0], a[1]])?;
            // A second call through another function: nested calls are inlined too.
            let ty = TensorType::new(DType::F64, [3]);
            g.function("h", &[ty], |g, p| {
                let r = g.call("f", &[p[0], p[0]])?;
                Ok(vec![g.add(r[0], r[1])?])
            })?;
            let r2 = g.call("h", &[r[0]])?;
            Ok(vec![r[1], r2[0]])
        })
        .second(),
    ]
}

#[test]
fn control_derivatives_match_finite_differences() {
    // The cases exercise the loops they claim to.
    assert!(trips(|g, x, c| while_loop(g, x, c, 6.0), &x0(), &c0()) >= 3);
    assert_eq!(trips(|g, x, c| while_loop(g, x, c, 0.1), &x0(), &c0()), 0);
    assert!(trips(|g, x, c| while_cond_loop(g, x, c, 6.0), &x0(), &c0()) >= 3);
    for c in cases() {
        check(&c);
    }
}

#[test]
fn gradient_of_a_recursive_call_is_a_clear_error() {
    let mut g = Graph::new();
    let ty = TensorType::scalar(DType::F64);
    let tys = std::slice::from_ref(&ty);
    g.declare_function("r", tys, tys).unwrap();
    g.define_function("r", |g, p| {
        let z = g.scalar(DType::F64, 0.0);
        let pos = g.greater(p[0], z)?;
        g.cond(
            pos,
            &[p[0]],
            |g, q| {
                let d = g.add_scalar(q[0], -1.0)?;
                let r = g.call("r", &[d])?;
                Ok(vec![g.add(r[0], q[0])?])
            },
            |_, q| Ok(vec![q[0]]),
        )
    })
    .unwrap();
    let x = g.input("x", DType::F64, Shape::scalar());
    let y = g.call("r", &[x]).unwrap();
    let err = pfor::autodiff::gradients(&mut g, &[y[0]], &[x], None).unwrap_err().to_string();
    assert!(err.contains("recursive") && err.contains("'r'"), "{err}");
}

// ------------------------------------------------------------------ recording is O(T)

/// `x ← 0.999·x + 0.001·sin(x)` for `n` steps (n fed at run time), loss `Σ x`.
fn counted_loop(g: &mut Graph, x: ValueId, n: ValueId) -> Result<ValueId> {
    let i0 = g.constant(Tensor::scalar(0i64));
    let out = g.while_loop(
        &[i0, x],
        &[n],
        |g, a| g.less(a[0], a[2]),
        |g, a| {
            let s = g.sin(a[1])?;
            let s = g.mul_scalar(s, 0.001)?;
            let d = g.mul_scalar(a[1], 0.999)?;
            let one = g.constant(Tensor::scalar(1i64));
            Ok(vec![g.add(a[0], one)?, g.add(d, s)?])
        },
    )?;
    g.sum_all(out[1])
}

/// Every node of `g` and of the functions nested in it.
fn all_nodes(g: &Graph, out: &mut Vec<(Graph, NodeId)>) {
    for n in g.node_ids() {
        out.push((g.clone(), n));
        if let Op::Control(c) = &g.node(n).unwrap().op {
            use pfor::ops::ControlOp;
            match c {
                ControlOp::Cond { then, else_ } => {
                    all_nodes(then.graph(), out);
                    all_nodes(else_.graph(), out);
                }
                ControlOp::While { cond, body, .. } => {
                    all_nodes(cond.graph(), out);
                    all_nodes(body.graph(), out);
                }
                ControlOp::For { body, .. } => all_nodes(body.graph(), out),
                ControlOp::Call { .. } => {}
            }
        }
    }
}

#[test]
fn while_gradient_records_each_step_in_place() {
    use pfor::ops::{ControlOp, IndexOp};
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [4]);
    let n = g.input("n", DType::I64, Shape::scalar());
    let loss = counted_loop(&mut g, x, n).unwrap();
    let before = g.num_nodes();
    let dx = pfor::autodiff::gradients(&mut g, &[loss], &[x], None).unwrap();
    // The gradient graph has a fixed size, whatever the trip count.
    assert!(g.num_nodes() - before < 40, "{} nodes added", g.num_nodes() - before);
    // Structure: the recording loop writes each buffer only with dynamic_update_slice, and
    // that write is the buffer's only use in the body — the executor hands the uniquely
    // owned buffer to the kernel, which updates it in place (one row copied per step).
    let mut recorders = 0;
    for id in g.node_ids() {
        let Op::Control(ControlOp::While { body, num_carries, .. }) = &g.node(id).unwrap().op else { continue };
        let bg = body.graph();
        let dus: Vec<NodeId> = bg
            .node_ids()
            .into_iter()
            .filter(|m| matches!(bg.node(*m).unwrap().op, Op::Index(IndexOp::DynamicUpdateSlice)))
            .collect();
        if dus.is_empty() {
            continue;
        }
        recorders += 1;
        for d in dus {
            let buf = bg.node(d).unwrap().inputs[0];
            assert!(body.params()[..*num_carries].contains(&buf), "the written buffer is a carry");
            assert_eq!(bg.consumers(buf.node), vec![d], "the buffer's only consumer is its update");
            let out = ValueId { node: d, slot: 0 };
            let pos = body.params().iter().position(|p| *p == buf).unwrap();
            assert_eq!(body.results()[pos], out, "the updated buffer is carried to the next step");
        }
        // Nothing in the body grows with T: no concatenation, no scatter of a whole buffer.
        for m in bg.node_ids() {
            let k = bg.node(m).unwrap().op.kind();
            assert!(!matches!(k.name(), "concat" | "tensor_scatter_add" | "tensor_scatter_update"), "{}", k.name());
        }
    }
    assert_eq!(recorders, 1, "one recording loop");
    let mut nested = Vec::new();
    all_nodes(&g, &mut nested);
    assert!(nested.iter().all(|(h, m)| h.node(*m).unwrap().op.kind().name() != "concat"));

    // Run time: 8× the steps must cost about 8× (O(T²) copying would cost 64×). Each step
    // carries 4 KiB, so quadratic copying at T = 4000 would move ~32 GB. The bound is loose
    // (best of 3, ratio < 32) because the suite runs tests in parallel on shared cores.
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [512]);
    let n = g.input("n", DType::I64, Shape::scalar());
    let loss = counted_loop(&mut g, x, n).unwrap();
    let dx2 = pfor::autodiff::gradients(&mut g, &[loss], &[x], None).unwrap();
    let mut sess = Session::new(&g, &[dx2[0]]).unwrap();
    let x0 = super::fd::randn(&[512], 3);
    let mut time = |steps: i64| {
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let t0 = std::time::Instant::now();
            let v = sess.run(&[(x, x0.clone()), (n, Tensor::scalar(steps))]).unwrap();
            best = best.min(t0.elapsed().as_secs_f64());
            // d/dx of 0.999x + 0.001 sin x over T steps: positive, finite.
            assert!(v[0].to_f64_vec().iter().all(|d| d.is_finite() && *d > 0.0));
        }
        best
    };
    let (t1, t8) = (time(500), time(4000));
    eprintln!("while gradient: T=500 {t1:.4}s, T=4000 {t8:.4}s (ratio {:.1})", t8 / t1);
    assert!(t8 / t1 < 32.0, "T=500: {t1:.4}s, T=4000: {t8:.4}s (ratio {:.1})", t8 / t1);
    let _ = dx;
}

// ------------------------------------------------------------------ inside pfor

fn close(a: &Tensor, b: &[f64], tol: f64) {
    let av = a.to_f64_vec();
    assert_eq!(av.len(), b.len());
    for (i, (x, y)) in av.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= tol * (1.0 + y.abs()), "element {i}: {x} vs {y}\n{av:?}\n{b:?}");
    }
}

/// `y[j]` = the while loop of [`while_cond_loop`] run on the scalar `x[j]` alone, so each
/// row of the jacobian has its own data-dependent trip count.
fn per_row_loops(g: &mut Graph, x: ValueId, c: ValueId, n: usize) -> Result<(ValueId, Vec<ValueId>)> {
    let mut ys = Vec::new();
    let mut counts = Vec::new();
    for j in 0..n {
        let jj = g.constant(Tensor::scalar(j as i64));
        let xj = g.gather(x, jj, 0)?;
        let xj = g.reshape(xj, &[1])?;
        let out = while_cond_loop(g, xj, c, 2.0 + j as f64)?;
        ys.push(g.reshape(out[0], &[])?);
        counts.push(out[1]);
    }
    Ok((g.stack(&ys, 0)?, counts))
}

fn fd_jacobian(mut f: impl FnMut(&[f64]) -> Vec<f64>, x0: &[f64]) -> Vec<f64> {
    let eps = 1e-6;
    let n = x0.len();
    let m = f(x0).len();
    let mut jac = vec![0.0; m * n];
    for k in 0..n {
        let mut p = x0.to_vec();
        p[k] += eps;
        let mut q = x0.to_vec();
        q[k] -= eps;
        let (fp, fq) = (f(&p), f(&q));
        for r in 0..m {
            jac[r * n + k] = (fp[r] - fq[r]) / (2.0 * eps);
        }
    }
    jac
}

#[test]
fn jacobian_of_while_loops_with_per_row_trip_counts_under_strict_pfor() {
    use pfor::api::{jacobian_fwd_with, jacobian_with};
    use pfor::vectorize::PforOptions;
    let n = 3;
    let x0 = [0.3, -0.45, 0.6];
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [n]);
    let c = g.constant(t(&[1], &[1.3]));
    let (y, counts) = per_row_loops(&mut g, x, c, n).unwrap();
    let j = jacobian_with(&mut g, y, x, &PforOptions::strict()).unwrap();
    let jf = jacobian_fwd_with(&mut g, y, x, &PforOptions::strict()).unwrap();
    let mut fetch = vec![j, jf];
    fetch.extend(&counts);
    let v = run_once(&g, &fetch, &[(x, t(&[n], &x0))]).unwrap();
    let trips: Vec<i64> = v[2..].iter().map(|t| t.scalar_i64().unwrap()).collect();
    assert!(trips.windows(2).any(|w| w[0] != w[1]) && trips.iter().all(|t| *t >= 2), "trip counts {trips:?}");
    let mut sess = Session::new(&g, &[y]).unwrap();
    let want = fd_jacobian(|xv| sess.run(&[(x, t(&[n], xv))]).unwrap()[0].to_f64_vec(), &x0);
    close(&v[0], &want, 1e-6);
    close(&v[1], &want, 1e-6);
}

#[test]
fn per_example_gradients_through_a_cond_with_a_loop_variant_predicate() {
    use pfor::api::{per_example_gradients_loop, per_example_gradients_with};
    use pfor::vectorize::{ControlFlowMode, PforOptions};
    let xs0 = t(&[4, 3], &[0.5, -0.2, 0.9, -0.5, 0.2, -0.9, 1.0, 0.1, 0.1, -0.3, -0.3, 0.2]);
    for mode in [ControlFlowMode::Subset, ControlFlowMode::Mask] {
        let mut g = Graph::new();
        let xs = g.input("x", DType::F64, [4, 3]);
        let w = g.input("w", DType::F64, [3]);
        let loss = |g: &mut Graph, rows: &[ValueId], p: &[ValueId]| -> Result<ValueId> {
            let s = g.sum_all(rows[0])?;
            let z = g.scalar(DType::F64, 0.0);
            let pred = g.greater(s, z)?;
            let out = g.cond(
                pred,
                &[rows[0], p[0]],
                |g, b| {
                    let m = g.mul(b[0], b[1])?;
                    let s = g.sin(m)?;
                    Ok(vec![g.sum_all(s)?])
                },
                |g, b| {
                    let e = g.exp(b[1])?;
                    let m = g.mul(b[0], e)?;
                    Ok(vec![g.sum_all(m)?])
                },
            )?;
            Ok(out[0])
        };
        let opts = PforOptions::strict().with_control_flow(mode);
        let pv = per_example_gradients_with(&mut g, &opts, loss, &[xs], &[w]).unwrap();
        let pl = per_example_gradients_loop(&mut g, loss, &[xs], &[w]).unwrap();
        let v = run_once(&g, &[pv[0], pl[0]], &[(xs, xs0.clone()), (w, t(&[3], &[0.7, -1.3, 0.4]))]).unwrap();
        close(&v[0], &v[1].to_f64_vec(), 1e-12);
        // Both branches were taken (row sums 1.2, -1.2, 1.2, -0.4) and the rows differ.
        let rows = v[0].to_f64_vec();
        assert!(rows[..3] != rows[3..6]);
    }
}

// ------------------------------------------------------------------ LSTM in a while loop

pub(super) const IN: usize = 2;
pub(super) const HID: usize = 2;

/// `v[K] @ w[K, H]` as broadcast-multiply and reduce (no matmul rule is needed).
fn vecmat(g: &mut Graph, v: ValueId, w: ValueId) -> Result<ValueId> {
    let e = g.expand_dims(v, -1)?;
    let p = g.mul(e, w)?;
    g.reduce_sum(p, Some(&[0]), false)
}

/// One LSTM step; gate `k` uses `wx[k]`, `wh[k]`, `b[k]` (order i, f, o, u).
pub(super) fn lstm_cell(
    g: &mut Graph,
    xt: ValueId,
    h: ValueId,
    c: ValueId,
    p: [ValueId; 3],
) -> Result<(ValueId, ValueId)> {
    let mut gates = Vec::new();
    for k in 0..4 {
        let kk = g.constant(Tensor::scalar(k as i64));
        let (wx, wh, b) = (g.gather(p[0], kk, 0)?, g.gather(p[1], kk, 0)?, g.gather(p[2], kk, 0)?);
        let zx = vecmat(g, xt, wx)?;
        let zh = vecmat(g, h, wh)?;
        let z = g.add(zx, zh)?;
        gates.push(g.add(z, b)?);
    }
    lstm_gates(g, [gates[0], gates[1], gates[2], gates[3]], c)
}

/// Final `h` of every sequence `x[b]` run to its own length `lens[b]`: `[B, HID]`.
fn lstm(g: &mut Graph, x: ValueId, lens: &[i64], p: [ValueId; 3]) -> Result<ValueId> {
    let mut hs = Vec::new();
    for (b, &len) in lens.iter().enumerate() {
        let bb = g.constant(Tensor::scalar(b as i64));
        let xb = g.gather(x, bb, 0)?;
        let l = g.constant(Tensor::scalar(len));
        let t0 = g.constant(Tensor::scalar(0i64));
        let h0 = g.zeros(DType::F64, &[HID]).unwrap();
        let c0 = g.zeros(DType::F64, &[HID]).unwrap();
        let out = g.while_loop(
            &[t0, h0, c0],
            &[l, xb, p[0], p[1], p[2]],
            |g, a| g.less(a[0], a[3]),
            |g, a| {
                let xt = g.gather(a[4], a[0], 0)?;
                let (h, c) = lstm_cell(g, xt, a[1], a[2], [a[5], a[6], a[7]])?;
                let one = g.constant(Tensor::scalar(1i64));
                Ok(vec![g.add(a[0], one)?, h, c])
            },
        )?;
        hs.push(out[1]);
    }
    g.stack(&hs, 0)
}

#[test]
fn jacobian_of_an_lstm_run_to_per_example_lengths_under_strict_pfor() {
    use pfor::api::jacobian_with;
    use pfor::vectorize::PforOptions;
    let (b, l) = (3, 4);
    let lens = [3i64, 1, 4];
    let x0 = super::fd::randn(&[b, l, IN], 11);
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [b, l, IN]);
    let wx = g.constant(super::fd::randn(&[4, IN, HID], 12));
    let wh = g.constant(super::fd::randn(&[4, HID, HID], 13));
    let bias = g.constant(super::fd::randn(&[4, HID], 14));
    let y = lstm(&mut g, x, &lens, [wx, wh, bias]).unwrap();
    let j = jacobian_with(&mut g, y, x, &PforOptions::strict()).unwrap();
    assert_eq!(g.shape(j).unwrap(), Shape::fixed(&[b, HID, b, l, IN]));
    let v = run_once(&g, &[j], &[(x, x0.clone())]).unwrap();
    let mut sess = Session::new(&g, &[y]).unwrap();
    let want = fd_jacobian(|xv| sess.run(&[(x, t(&[b, l, IN], xv))]).unwrap()[0].to_f64_vec(), &x0.to_f64_vec());
    close(&v[0], &want, 1e-6);
    // Steps past an example's length do not influence it: example 1 (length 1) depends on
    // x[1, 0] only.
    let jv = v[0].to_f64_vec();
    let at = |r: usize, hh: usize, bb: usize, tt: usize, k: usize| jv[(((r * HID + hh) * b + bb) * l + tt) * IN + k];
    assert!((0..HID).all(|hh| (1..l).all(|tt| (0..IN).all(|k| at(1, hh, 1, tt, k) == 0.0))));
    assert!((0..HID).any(|hh| (0..IN).any(|k| at(1, hh, 1, 0, k) != 0.0)));
}
