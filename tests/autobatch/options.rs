//! Function bodies run with the options of whoever runs them: a session's `ExecOptions`
//! reach the body of a `call` op and the graph-function primops of the auto-batching VM that
//! pfor hands a recursive call to; outside a session, an auto-batching program's primops run
//! with `ExecConfig::functions`. Checked with an option whose effect shows: the memory
//! budget `max_tensor_bytes`, which only a body run with the session's options can hit.

use pfor::autobatch::{ExecConfig, ProgramBuilder, VarType, vm};
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, pfor_with};

/// Elements of the one large tensor each base case materializes (800 KB of f64).
const BIG: usize = 100_000;

/// A budget below one base case's tensor and far above everything else.
fn budget() -> ExecOptions {
    ExecOptions { max_tensor_bytes: Some(BIG * 8 / 2), ..ExecOptions::builtin() }
}

fn is_oom(r: &Result<Vec<Tensor>>) -> bool {
    matches!(r.as_ref().map_err(|e| e.root()), Err(Error::OutOfMemory { .. }))
}

/// `big(n) = n < 1 ? sum(broadcast(n + 1, [BIG])) : big(n - 1)`: `BIG` for `n <= 0`.
fn define_big(g: &mut Graph) {
    g.declare_function("big", &[TensorType::scalar(DType::I64)], &[TensorType::scalar(DType::F64)]).unwrap();
    g.define_function("big", |g, p| {
        let one = g.constant(Tensor::scalar(1i64));
        let small = g.less(p[0], one)?;
        g.cond(
            small,
            &[p[0]],
            |g, a| {
                let x = g.cast(a[0], DType::F64)?;
                let x = g.add_scalar(x, 1.0)?;
                let b = g.broadcast_to(x, &[BIG])?;
                Ok(vec![g.sum_all(b)?])
            },
            |g, a| {
                let one = g.constant(Tensor::scalar(1i64));
                let n1 = g.sub(a[0], one)?;
                g.call("big", &[n1])
            },
        )
    })
    .unwrap();
}

fn run_with(g: &Graph, fetch: &[ValueId], options: ExecOptions) -> Result<Vec<Tensor>> {
    Session::with_options(g, fetch, options)?.run(&[])
}

#[test]
fn a_call_op_runs_its_body_with_the_session_options() {
    let mut g = Graph::new();
    define_big(&mut g);
    let n = g.constant(Tensor::scalar(2i64));
    let y = g.call("big", &[n]).unwrap();
    let ok = run_with(&g, &y, ExecOptions::builtin()).unwrap();
    assert_eq!(ok[0].to_f64_vec(), vec![BIG as f64]);
    let r = run_with(&g, &y, budget());
    assert!(is_oom(&r), "{r:?}");
}

#[test]
fn autobatch_primops_of_a_pfor_hand_off_run_with_the_session_options() {
    let mut g = Graph::new();
    define_big(&mut g);
    let xs = g.constant(Tensor::vec1(&[0i64, 2, 1]));
    let y = pfor_with(&mut g, 3, &PforOptions::strict(), |g, i| {
        let xi = g.gather(xs, i, 0)?;
        g.call("big", &[xi])
    })
    .unwrap();
    let handed_off = g.node_ids().into_iter().any(|n| g.node(n).is_ok_and(|nd| nd.op.name() == "autobatch_call"));
    assert!(handed_off, "the recursive call runs on the auto-batching VM");
    let ok = run_with(&g, &y, ExecOptions::builtin()).unwrap();
    assert_eq!(ok[0].to_f64_vec(), vec![BIG as f64; 3]);
    // The VM's graph-function primop materializes the broadcast: over the session's budget.
    let r = run_with(&g, &y, budget());
    assert!(is_oom(&r), "{r:?}");
}

#[test]
fn an_autobatch_program_runs_graph_primops_with_its_config_options() {
    // f(n) = sum(broadcast(n, [BIG])) as one graph-function primop over batched n.
    let parent = Graph::new();
    let batched = TensorType::new(DType::F64, [Dim::unknown()]);
    let body = Function::build(&parent, &[batched], |g, a| {
        let b = g.expand_dims(a[0], -1)?;
        let b = g.tile(b, &[1, BIG])?;
        Ok(vec![g.reduce_sum(b, Some(&[1]), false)?])
    })
    .unwrap();
    let mut pb = ProgramBuilder::new();
    let f = pb.declare("f", &["n"], &["s"]).unwrap();
    pb.define(f, |b| {
        let (n, s) = (b.param(0)?, b.result(0)?);
        b.graph_prim("spread", &[n], &[s], body)?;
        b.ret(&[s])
    })
    .unwrap();
    let p = pb.build(f, &[VarType::scalar(DType::F64)]).unwrap();
    let n = Tensor::vec1(&[1.0f64, 2.0]);
    let plain = vm::execute_with(&p, std::slice::from_ref(&n), &ExecConfig::default()).unwrap();
    assert_eq!(plain.outputs[0].to_f64_vec(), vec![BIG as f64, 2.0 * BIG as f64]);
    let config = ExecConfig { functions: Some(budget().function_runner()), ..ExecConfig::default() };
    let r = vm::execute_with(&p, &[n], &config).map(|e| e.outputs);
    assert!(is_oom(&r), "{r:?}");
}
