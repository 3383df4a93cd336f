//! Core tests: where a run executes (`exec::workers`). Plans that issue several parallel
//! kernels are handed to a pfor worker thread, small ones stay on the caller; either way the
//! results are bit-identical, and recursion to the default depth limit fits a worker's stack.

use pfor::prelude::*;

fn on_caller() -> ExecOptions {
    ExecOptions { on_workers: false, ..ExecOptions::default() }
}

/// Hand-offs need a second thread to be worth anything (CI has two cores).
fn multi_threaded() -> bool {
    rayon::current_num_threads() > 1
}

fn bits(t: &Tensor) -> (Vec<usize>, Vec<u32>) {
    (t.shape().to_vec(), t.to_array::<f32>().unwrap().iter().map(|v| v.to_bits()).collect())
}

/// `tanh(x @ w1) @ w2` with GEMMs far above the parallel threshold, plus a reduction.
fn two_gemms() -> (Graph, ValueId, Vec<ValueId>) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, Shape::fixed(&[192, 256]));
    let w1 = g.constant(Tensor::randn(&[256, 384], 1).unwrap());
    let w2 = g.constant(Tensor::randn(&[384, 128], 2).unwrap());
    let h = g.matmul(x, w1).unwrap();
    let h = g.tanh(h).unwrap();
    let y = g.matmul(h, w2).unwrap();
    let s = g.reduce_sum(y, Some(&[0]), false).unwrap();
    (g, x, vec![y, s])
}

#[test]
fn tiny_plans_stay_on_the_caller() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, Shape::fixed(&[4]));
    let y = g.add(x, x).unwrap();
    let s = Session::new(&g, &[y]).unwrap();
    assert!(!s.hands_off());
    // a GEMV is below every parallel threshold too
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, Shape::fixed(&[1, 384]));
    let w = g.constant(Tensor::randn(&[384, 1024], 3).unwrap());
    let y = g.matmul(x, w).unwrap();
    let z = g.tanh(y).unwrap();
    assert!(!Session::new(&g, &[z]).unwrap().hands_off());
}

#[test]
fn parallel_heavy_plans_hand_off_with_identical_results() {
    let (g, x, outs) = two_gemms();
    let mut s = Session::new(&g, &outs).unwrap();
    assert_eq!(s.hands_off(), multi_threaded());
    let mut c = Session::with_options(&g, &outs, on_caller()).unwrap();
    assert!(!c.hands_off(), "on_workers: false keeps runs on the caller");
    for seed in 0..3 {
        let feed = [(x, Tensor::randn(&[192, 256], 10 + seed).unwrap())];
        let a = s.run(&feed).unwrap();
        let b = c.run(&feed).unwrap();
        for (a, b) in a.iter().zip(&b) {
            assert_eq!(bits(a), bits(b));
        }
    }
}

#[test]
fn runs_from_inside_a_rayon_job_give_the_same_results() {
    let (g, x, outs) = two_gemms();
    let feed = [(x, Tensor::randn(&[192, 256], 7).unwrap())];
    let want = Session::with_options(&g, &outs, on_caller()).unwrap().run(&feed).unwrap();
    // sessions run concurrently from the global pool's workers (each hands off or not)
    let got: Vec<Vec<Tensor>> = rayon::scope(|_| {
        use rayon::prelude::*;
        (0..4).into_par_iter().map(|_| Session::new(&g, &outs).unwrap().run(&feed).unwrap()).collect()
    });
    for r in got {
        for (a, b) in r.iter().zip(&want) {
            assert_eq!(bits(a), bits(b));
        }
    }
}

#[test]
fn loops_with_dynamic_shapes_and_recursion_count_as_several_kernels() {
    // a while loop over a dynamic-shape value: its body's kernels run once per trip
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, Shape::from_dims([Dim::dynamic("n"), Dim::fixed(64)]));
    let i0 = g.constant(Tensor::scalar(0i64));
    let out = g
        .while_loop(
            &[i0, x],
            &[],
            |g, a| {
                let three = g.constant(Tensor::scalar(3i64));
                g.less(a[0], three)
            },
            |g, a| {
                let one = g.constant(Tensor::scalar(1i64));
                Ok(vec![g.add(a[0], one)?, g.tanh(a[1])?])
            },
        )
        .unwrap();
    let mut s = Session::new(&g, &[out[1]]).unwrap();
    assert_eq!(s.hands_off(), multi_threaded());
    let xv = Tensor::randn(&[5, 64], 4).unwrap();
    let got = s.run(&[(x, xv.clone())]).unwrap();
    let want = Session::with_options(&g, &[out[1]], on_caller()).unwrap().run(&[(x, xv)]).unwrap();
    assert_eq!(bits(&got[0]), bits(&want[0]));
}

/// `depth(n) = n > 0 ? depth(n - 1) + 1 : 0`.
fn depth_graph() -> (Graph, ValueId, ValueId) {
    let mut g = Graph::new();
    let i64s = TensorType::scalar(DType::I64);
    g.declare_function("depth", std::slice::from_ref(&i64s), std::slice::from_ref(&i64s)).unwrap();
    g.define_function("depth", |g, p| {
        let zero = g.constant(Tensor::scalar(0i64));
        let more = g.greater(p[0], zero)?;
        g.cond(
            more,
            &[p[0]],
            |g, a| {
                let one = g.constant(Tensor::scalar(1i64));
                let n1 = g.sub(a[0], one)?;
                let d = g.call("depth", &[n1])?[0];
                Ok(vec![g.add(d, one)?])
            },
            |_, a| Ok(vec![a[0]]),
        )
    })
    .unwrap();
    let n = g.input("n", DType::I64, Shape::scalar());
    let d = g.call("depth", &[n]).unwrap()[0];
    (g, n, d)
}

#[test]
fn recursion_to_the_default_limit_fits_a_worker_stack() {
    let (g, n, d) = depth_graph();
    let mut s = Session::new(&g, &[d]).unwrap();
    // a recursive call may issue anything any number of times
    assert_eq!(s.hands_off(), multi_threaded());
    let limit = ExecOptions::default().max_call_depth as i64;
    for k in [0, 1, 17, limit - 1] {
        assert_eq!(s.run(&[(n, Tensor::scalar(k))]).unwrap()[0], Tensor::scalar(k), "depth({k})");
    }
    let e = s.run(&[(n, Tensor::scalar(limit + 5))]).unwrap_err();
    assert!(matches!(e.root(), Error::RecursionLimit { function, .. } if function == "depth"), "{e}");
}

#[test]
fn kept_warm_workers_change_no_result_on_any_pool_size() {
    // the pool's other threads poll for the run's jobs (ExecOptions::warm_workers) or sleep
    // between kernels: the same kernels and splits, the same bits; a pool of 4 threads has 3
    // pollers on a 2-core machine
    let (g, x, outs) = two_gemms();
    let cold = ExecOptions { warm_workers: false, ..ExecOptions::default() };
    let mut sessions = vec![Session::new(&g, &outs).unwrap(), Session::with_options(&g, &outs, cold).unwrap()];
    let mut four = Session::new(&g, &outs).unwrap();
    four.set_workers(Workers::new(4, "warm-test").unwrap());
    sessions.push(four);
    let mut c = Session::with_options(&g, &outs, on_caller()).unwrap();
    for seed in 0..3 {
        let feed = [(x, Tensor::randn(&[192, 256], 20 + seed).unwrap())];
        let want = c.run(&feed).unwrap();
        for s in &mut sessions {
            for (a, b) in s.run(&feed).unwrap().iter().zip(&want) {
                assert_eq!(bits(a), bits(b));
            }
        }
    }
}

/// An f32 identity whose kernel panics on a negative first element (a user's bug).
#[derive(Debug)]
struct PanicsOnNegative;

impl pfor::ops::CustomOp for PanicsOnNegative {
    fn name(&self) -> &str {
        "panics_on_negative"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(inputs.to_vec())
    }
    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let first = inputs[0].to_array::<f32>()?.iter().next().copied().unwrap_or(0.0);
        assert!(first >= 0.0, "a user kernel's bug");
        Ok(inputs.to_vec())
    }
}

#[test]
fn a_panic_inside_a_kept_warm_run_reaches_the_caller_and_the_pool_keeps_working() {
    // two_gemms, then the panicking op on its output: the run is handed off with the other
    // threads polling; the panic unwinds to the caller (nothing hangs), and the same session
    // and pool run the next feed normally
    let (mut g, x, outs) = two_gemms();
    let z = g.add_op(pfor::ops::Op::Custom(std::sync::Arc::new(PanicsOnNegative)), &[outs[0]]).unwrap();
    let mut s = Session::new(&g, &[z]).unwrap();
    assert_eq!(s.hands_off(), multi_threaded());
    let ones = Tensor::from_array(ndarray::ArrayD::from_elem(ndarray::IxDyn(&[192, 256]), 1.0f32));
    let first_non_negative = |t: &Tensor| t.to_array::<f32>().unwrap().iter().next().copied().unwrap_or(0.0) >= 0.0;
    // find a feed whose first output element is negative, and one whose is not
    let (mut bad, mut good) = (None, None);
    for seed in 0..40 {
        let feed = Tensor::randn(&[192, 256], 100 + seed).unwrap();
        let y = Session::with_options(&g, &[outs[0]], on_caller()).unwrap().run(&[(x, feed.clone())]).unwrap();
        let slot = if first_non_negative(&y[0]) { &mut good } else { &mut bad };
        slot.get_or_insert(feed);
    }
    let (bad, good) = (bad.expect("a feed with a negative output"), good.unwrap_or(ones));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.run(&[(x, bad.clone())])));
    assert!(r.is_err(), "the kernel's panic reaches the caller");
    for _ in 0..3 {
        assert!(s.run(&[(x, good.clone())]).is_ok());
    }
}
