//! The one-row form (issue 22): with ONE iteration known when converting, a loop-variant
//! cond or while is re-emitted as the loop runs it for its only row — no partition, no
//! active-set bookkeeping, no select — in every control-flow mode; with n only known at run
//! time the Subset/Mask forms stay. Results equal the loop's, errors and derivatives too.

use crate::common::*;
use pfor::ops::{ControlOp, Op};
use pfor::prelude::*;
use pfor::vectorize::{ControlFlowMode, PforOptions, pfor_with};

const MODES: [ControlFlowMode; 3] = [ControlFlowMode::Subset, ControlFlowMode::Mask, ControlFlowMode::Auto];

/// Names of every op in `g` and, recursively, in the functions of its cond/while nodes.
fn op_names(g: &Graph, out: &mut Vec<String>) {
    for id in g.node_ids() {
        let Ok(node) = g.node(id) else { continue };
        out.push(node.op.name());
        match &node.op {
            Op::Control(ControlOp::While { cond, body, .. }) => {
                op_names(cond.graph(), out);
                op_names(body.graph(), out);
            }
            Op::Control(ControlOp::Cond { then, else_ }) => {
                op_names(then.graph(), out);
                op_names(else_.graph(), out);
            }
            _ => {}
        }
    }
}

fn partition_ops(g: &Graph) -> usize {
    let mut names = Vec::new();
    op_names(g, &mut names);
    names.iter().filter(|n| matches!(n.as_str(), "nonzero" | "tensor_scatter_update" | "select")).count()
}

/// W3's shape of loop: `while t < len_i { s = s * 0.5 + x_i[t]; t += 1 }` on row `i`.
fn running_sum(g: &mut Graph, xs: ValueId, lens: ValueId, i: ValueId) -> Result<Vec<ValueId>> {
    let xi = g.gather(xs, i, 0)?;
    let li = g.gather(lens, i, 0)?;
    let t0 = g.constant(Tensor::scalar(0i64));
    let s0 = g.constant(Tensor::zeros(DType::F64, &[3])?);
    let out = g.while_loop(
        &[t0, s0],
        &[li, xi],
        |g, a| g.less(a[0], a[2]),
        |g, a| {
            let xt = g.gather(a[3], a[0], 0)?;
            let half = g.constant(Tensor::scalar(0.5f64));
            let s = g.mul(a[1], half)?;
            let s = g.add(s, xt)?;
            let one = g.constant(Tensor::scalar(1i64));
            Ok(vec![g.add(a[0], one)?, s])
        },
    )?;
    Ok(vec![out[1]])
}

fn data() -> (Tensor, Tensor) {
    let x = Tensor::from_vec(&[1, 5, 3], (0..15).map(|v| v as f64 * 0.25 - 1.0).collect::<Vec<_>>()).unwrap();
    (x, i64t(&[1], &[4]))
}

#[test]
fn a_while_of_one_static_row_runs_as_the_loop_does() {
    let (x, lens) = data();
    for mode in MODES {
        let mut g = Graph::new();
        let xs = g.constant(x.clone());
        let ls = g.constant(lens.clone());
        let opts = PforOptions::strict().with_control_flow(mode);
        let v = pfor_with(&mut g, 1, &opts, |g, i| running_sum(g, xs, ls, i)).unwrap();
        // the converted graph holds no partition, scatter or select: the plain loop of row 0
        assert_eq!(partition_ops(&g), 0, "{mode:?}");
        let l = for_loop(&mut g, 1, |g, i| running_sum(g, xs, ls, i)).unwrap();
        let r = eval(&g, &[v[0], l[0]]);
        assert_eq!(r[0].shape(), &[1, 3]);
        assert_close(&r[0], &r[1], 0.0);
    }
}

#[test]
fn a_dynamic_n_of_one_keeps_the_vectorized_form_and_agrees() {
    let (x, lens) = data();
    let mut g = Graph::new();
    let xs = g.constant(x);
    let ls = g.constant(lens);
    let n = g.input("n", DType::I64, Shape::scalar());
    let v = pfor_with(&mut g, n, &PforOptions::strict(), |g, i| running_sum(g, xs, ls, i)).unwrap();
    assert!(partition_ops(&g) > 0, "n is not known when converting: the Subset form stays");
    let l = for_loop(&mut g, 1, |g, i| running_sum(g, xs, ls, i)).unwrap();
    let r = run_once(&g, &[v[0], l[0]], &[(n, Tensor::scalar(1i64))]).unwrap();
    assert_close(&r[0], &r[1], 0.0);
}

#[test]
fn a_cond_of_one_static_row_runs_only_its_branch() {
    // the untaken branch indexes out of range: running it would raise
    for (flag, want) in [(1i64, 20.0f64), (0, -1.0)] {
        for mode in MODES {
            let mut g = Graph::new();
            let fs = g.constant(i64t(&[1], &[flag]));
            let table = g.constant(f64t(&[2], &[10.0, 20.0]));
            let opts = PforOptions::strict().with_control_flow(mode);
            let v = pfor_with(&mut g, 1, &opts, |g, i| {
                let f = g.gather(fs, i, 0)?;
                let zero = g.constant(Tensor::scalar(0i64));
                let p = g.greater(f, zero)?;
                let y = g.cond(
                    p,
                    &[f, table],
                    |g, a| g.gather(a[1], a[0], 0).map(|v| vec![v]),
                    |g, a| {
                        let big = g.constant(Tensor::scalar(7i64));
                        let idx = g.add(a[0], big)?;
                        let bad = g.gather(a[1], idx, 0)?;
                        let zero = g.constant(Tensor::scalar(0.0f64));
                        let bad = g.mul(bad, zero)?;
                        let m1 = g.constant(Tensor::scalar(-1.0f64));
                        Ok(vec![g.add(bad, m1)?])
                    },
                )?;
                Ok(y)
            })
            .unwrap();
            assert_eq!(partition_ops(&g), 0, "{mode:?}");
            if flag == 1 {
                assert_close(&eval1(&g, v[0]), &f64t(&[1], &[want]), 0.0);
            } else {
                // the loop raises for this row too (the else branch indexes out of range)
                let err = run_once(&g, &v, &[]).unwrap_err().to_string();
                assert!(err.contains("gather"), "{mode:?}: {err}");
            }
        }
    }
}

#[test]
fn gradients_through_the_one_row_form_match_the_loop() {
    let (x, lens) = data();
    let mut g = Graph::new();
    let xs = g.input("x", DType::F64, [1, 5, 3]);
    let ls = g.constant(lens);
    let v = pfor_with(&mut g, 1, &PforOptions::strict(), |g, i| running_sum(g, xs, ls, i)).unwrap();
    let l = for_loop(&mut g, 1, |g, i| running_sum(g, xs, ls, i)).unwrap();
    let sv = g.reduce_sum(v[0], Some(&[0, 1]), false).unwrap();
    let sl = g.reduce_sum(l[0], Some(&[0, 1]), false).unwrap();
    let gv = pfor::autodiff::gradients(&mut g, &[sv], &[xs], None).unwrap();
    let gl = pfor::autodiff::gradients(&mut g, &[sl], &[xs], None).unwrap();
    let r = run_once(&g, &[gv[0], gl[0]], &[(xs, x)]).unwrap();
    assert_close(&r[0], &r[1], 1e-12);
}
