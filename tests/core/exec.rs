//! Core tests: the executor (feeds, errors, in-place safety, variables, recursion limit).

use crate::common::*;
use pfor::prelude::*;

#[test]
fn feeds_by_value_and_name() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [Dim::dynamic("n")]);
    let y = g.exp(x).unwrap();
    let mut s = Session::new(&g, &[y]).unwrap();
    let out = s.run(&[(x, f64t(&[2], &[0.0, 1.0]))]).unwrap();
    assert_close(&out[0], &f64t(&[2], &[1.0, std::f64::consts::E]), 1e-12);
    let out = s.run_named(&[("x", f64t(&[1], &[0.0]))]).unwrap();
    assert_eq!(out[0], f64t(&[1], &[1.0]));
}

#[test]
fn outputs_by_fetched_value_and_by_name() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let e = g.exp(x).unwrap();
    let n = g.neg(x).unwrap();
    let s = g.sum_all(x).unwrap();
    let feed = [(x, f64t(&[2], &[0.0, 1.0]))];
    // by the ValueId fetched, whatever its position
    let mut sess = Session::new(&g, &[e, n]).unwrap();
    let out = sess.run_fetched(&feed).unwrap();
    assert_eq!(out.get(n).unwrap(), &f64t(&[2], &[-0.0, -1.0]));
    assert_eq!(out.get(e).unwrap(), &f64t(&[2], &[1.0, std::f64::consts::E]));
    let err = out.get(s).unwrap_err().to_string();
    assert!(err.contains("was not fetched") && err.contains(&s.to_string()), "{err}");
    // by name, and as a map
    let mut sess = Session::named(&g, &[("sum", s), ("neg", n)]).unwrap();
    let out = sess.run_fetched(&feed).unwrap();
    assert_eq!(out.by_name("sum").unwrap(), &f64t(&[], &[1.0]));
    assert!(out.by_name("exp").unwrap_err().to_string().contains("no fetch named 'exp'"));
    let map = out.into_map();
    assert_eq!(map["neg"], f64t(&[2], &[-0.0, -1.0]));
    assert_eq!(map.len(), 2);
    let err = Session::named(&g, &[("a", s), ("a", n)]).err().unwrap().to_string();
    assert!(err.contains("'a' is given twice"), "{err}");
}

#[test]
fn feed_errors_are_clear() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2]);
    let y = g.exp(x).unwrap();
    let mut s = Session::new(&g, &[y]).unwrap();
    let e = s.run(&[]).unwrap_err();
    assert!(matches!(&e, Error::MissingFeed { name, .. } if name == "x"), "{e}");
    assert!(e.to_string().contains("'x'"));
    let e = s.run(&[(x, f32t(&[3], &[1.0, 2.0, 3.0]))]).unwrap_err();
    assert!(matches!(&e, Error::FeedType { name, got_shape, .. } if name == "x" && got_shape == &[3]), "{e}");
    assert!(e.to_string().contains("f32[2]"), "{e}");
    let e = s.run(&[(x, f64t(&[2], &[1.0, 2.0]))]).unwrap_err();
    assert!(matches!(e, Error::FeedType { got_dtype: DType::F64, .. }));
    let e = s.run(&[(y, f32t(&[2], &[1.0, 2.0]))]).unwrap_err();
    assert!(matches!(e, Error::UnknownFeed { .. }), "{e}");
    let e = s.run_named(&[("nope", f32t(&[2], &[1.0, 2.0]))]).unwrap_err();
    assert!(matches!(e, Error::UnknownFeed { .. }));
}

#[test]
fn in_place_kernels_never_corrupt_shared_values() {
    // x feeds two consumers; exp may run in place only on its last use.
    let mut g = Graph::new();
    let c = g.constant(f64t(&[3], &[0.0, 1.0, 2.0]));
    let a = g.neg(c).unwrap();
    let b = g.square(c).unwrap();
    let d = g.neg(a).unwrap();
    let mut s = Session::new(&g, &[a, b, d, c]).unwrap();
    for _ in 0..2 {
        let out = s.run(&[]).unwrap();
        assert_eq!(out[0], f64t(&[3], &[-0.0, -1.0, -2.0]));
        assert_eq!(out[1], f64t(&[3], &[0.0, 1.0, 4.0]));
        assert_eq!(out[2], f64t(&[3], &[0.0, 1.0, 2.0]));
        assert_eq!(out[3], f64t(&[3], &[0.0, 1.0, 2.0]));
    }
    // a fed tensor is not modified either
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let y = g.neg(x).unwrap();
    let feed = f64t(&[2], &[1.0, 2.0]);
    let out = run_once(&g, &[y], &[(x, feed.clone())]).unwrap();
    assert_eq!(out[0], f64t(&[2], &[-1.0, -2.0]));
    assert_eq!(feed, f64t(&[2], &[1.0, 2.0]));
}

#[test]
fn dynamic_dims_checked_at_run_time_by_runtime_type_check() {
    // An input with a dynamic dim accepts any size; static dims are enforced.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::unknown(), Dim::fixed(2)]);
    let y = g.relu(x).unwrap();
    let out = run_once(&g, &[y], &[(x, f32t(&[3, 2], &[-1.0, 1.0, -2.0, 2.0, 0.0, 3.0]))]).unwrap();
    assert_eq!(out[0], f32t(&[3, 2], &[0.0, 1.0, 0.0, 2.0, 0.0, 3.0]));
    assert!(run_once(&g, &[y], &[(x, f32t(&[2, 3], &[0.0; 6]))]).is_err());
}

#[test]
fn variables_read_and_write() {
    let mut g = Graph::new();
    let v = g.variable("w", f64t(&[2], &[1.0, 2.0])).unwrap();
    let e = g.exp(v).unwrap();
    let mut s = Session::new(&g, &[e]).unwrap();
    assert_close(&s.run(&[]).unwrap()[0], &f64t(&[2], &[1f64.exp(), 2f64.exp()]), 1e-12);
    s.set_variable("w", f64t(&[2], &[0.0, 0.0])).unwrap();
    assert_eq!(s.run(&[]).unwrap()[0], f64t(&[2], &[1.0, 1.0]));
    assert!(matches!(s.set_variable("w", f64t(&[3], &[0.0; 3])), Err(Error::Shape { .. })));
    assert!(matches!(s.variable("nope"), Err(Error::UnknownVariable { .. })));
    assert!(matches!(g.read_variable("nope"), Err(Error::UnknownVariable { .. })));
    assert!(g.variable("w", f64t(&[1], &[0.0])).is_err());
}

/// `[b, m, 1] x [b, 1, n]` outer products big enough (≥ 4 MiB) to go through the buffer pool.
fn outer_graph() -> (Graph, ValueId, ValueId, ValueId) {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, [2, 1, 1024]);
    let b = g.input("b", DType::F32, [2, 1, 1024]);
    let y = g.batch_matmul_t(a, b, true, false).unwrap();
    (g, a, b, y)
}

fn outer_expected(a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut v = Vec::new();
    for item in 0..2 {
        for i in 0..1024 {
            for j in 0..1024 {
                v.push(a[item * 1024 + i] * b[item * 1024 + j]);
            }
        }
    }
    v
}

#[test]
fn recycled_buffers_never_alias_live_outputs() {
    // Runs with different feeds: outputs the caller keeps must not be overwritten by later
    // runs; outputs it drops are recycled (and still every value is right).
    let (g, a, b, y) = outer_graph();
    let mut s = Session::new(&g, &[y]).unwrap();
    let feed = |k: f32| {
        let av: Vec<f32> = (0..2048).map(|i| (i % 7) as f32 + k).collect();
        let bv: Vec<f32> = (0..2048).map(|i| (i % 5) as f32 - k).collect();
        (av, bv)
    };
    let mut kept = Vec::new();
    for k in 0..4 {
        let (av, bv) = feed(k as f32);
        let out = s
            .run(&[
                (a, Tensor::from_vec(&[2, 1, 1024], av.clone()).unwrap()),
                (b, Tensor::from_vec(&[2, 1, 1024], bv.clone()).unwrap()),
            ])
            .unwrap();
        assert_eq!(out[0].to_vec::<f32>().unwrap(), outer_expected(&av, &bv), "run {k}");
        if k % 2 == 0 {
            kept.push((out, av, bv)); // keep this one, drop the odd runs' outputs
        }
    }
    for (out, av, bv) in kept {
        assert_eq!(out[0].to_vec::<f32>().unwrap(), outer_expected(&av, &bv));
    }
}

#[test]
fn recycling_off_gives_the_same_values() {
    let (g, a, b, y) = outer_graph();
    let opts = ExecOptions { recycle_buffers: false, ..ExecOptions::default() };
    let mut s = Session::with_options(&g, &[y], opts).unwrap();
    let av: Vec<f32> = (0..2048).map(|i| i as f32 * 0.5).collect();
    let bv: Vec<f32> = (0..2048).map(|i| 1.0 - i as f32).collect();
    for _ in 0..2 {
        let feeds = [
            (a, Tensor::from_vec(&[2, 1, 1024], av.clone()).unwrap()),
            (b, Tensor::from_vec(&[2, 1, 1024], bv.clone()).unwrap()),
        ];
        assert_eq!(s.run(&feeds).unwrap()[0].to_vec::<f32>().unwrap(), outer_expected(&av, &bv));
    }
}

#[test]
fn profile_records_every_node_with_shapes() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2, 3]);
    let w = g.constant(f64t(&[3, 1], &[1.0, 2.0, 3.0]));
    let y = g.matmul(x, w).unwrap();
    let z = g.exp(y).unwrap();
    let opts = ExecOptions { profile: true, ..ExecOptions::default() };
    let mut s = Session::with_options(&g, &[z], opts).unwrap();
    for _ in 0..3 {
        s.run(&[(x, f64t(&[2, 3], &[0.0; 6]))]).unwrap();
    }
    let p = s.profile();
    assert_eq!(p.runs(), 3);
    let mm = p.entries().into_iter().find(|e| e.kind == "matmul").expect("matmul profiled");
    assert_eq!(mm.count, 3);
    assert_eq!(mm.input_shapes, vec![vec![2, 3], vec![3, 1]]);
    assert_eq!(mm.output_shapes, vec![vec![2, 1]]);
    // the fastest of the 3 executions: at most their mean, and timed
    assert!(mm.best > std::time::Duration::ZERO && mm.best * 3 <= mm.total, "{:?} of {:?}", mm.best, mm.total);
    assert!(p.report(10).contains("best ms"));
    assert!(p.report(10).contains("matmul"));
    s.clear_profile();
    assert_eq!(s.profile().runs(), 0);
    assert!(s.profile().entries().is_empty());
    // off by default (unless PFOR_PROFILE is set)
    if std::env::var_os("PFOR_PROFILE").is_none() {
        let mut s = Session::new(&g, &[z]).unwrap();
        s.run(&[(x, f64t(&[2, 3], &[0.0; 6]))]).unwrap();
        assert!(s.profile().entries().is_empty());
    }
}

/// A for loop whose rows stack into a 4 MiB+ output (`[rows, 1024, 256]` f32), run `runs`
/// times with the outputs dropped; the pooled bytes after each run and the last output.
fn pooled_after_runs(rows: usize, runs: usize) -> (Vec<usize>, Tensor) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [rows, 1024, 256]);
    let y = for_loop(&mut g, rows, |g, i| {
        let xi = g.gather(x, i, 0)?;
        Ok(vec![g.mul_scalar(xi, 2.0)?])
    })
    .unwrap();
    let mut s = Session::new(&g, &y).unwrap();
    let mut pooled = Vec::new();
    let mut last = None;
    for k in 0..runs {
        drop(last.take()); // the caller drops the previous output before the run
        let xv: Vec<f32> = (0..rows * 1024 * 256).map(|e| (e % 13) as f32 + k as f32).collect();
        let out = s.run(&[(x, Tensor::from_vec(&[rows, 1024, 256], xv).unwrap())]).unwrap();
        pooled.push(s.pooled_bytes());
        last = Some(out.into_iter().next().unwrap());
    }
    (pooled, last.unwrap())
}

#[test]
fn a_session_never_keeps_copies_of_an_output_no_kernel_takes() {
    // Issue 22.3: each run's dropped output joined the pool and nothing took it, so a session
    // held up to 8 of them (bench_report's W4 loop: 8 x 1.6 GB). Now the loop's stack reuses
    // the last output's buffer, and what a whole run leaves untaken is dropped.
    let out_bytes = 4 * 1024 * 256 * 4;
    let (pooled, last) = pooled_after_runs(4, 6);
    assert!(pooled.iter().all(|&b| b <= out_bytes), "pooled bytes per run {pooled:?} (one output: {out_bytes})");
    // the reused buffer is fully overwritten: the last run's values
    let want: Vec<f32> = (0..4 * 1024 * 256).map(|e| 2.0 * ((e % 13) as f32 + 5.0)).collect();
    assert_eq!(last.to_vec::<f32>().unwrap(), want);
}
