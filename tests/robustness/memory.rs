//! Memory: a session's budget (`ExecOptions::max_tensor_bytes`) is checked before a kernel
//! allocates, and allocations the system refuses are `Error::OutOfMemory`, not aborts.
//! (Cases that need a real memory limit run in a child process: see `crash.rs`.)

use pfor::prelude::*;

use crate::common::{f32t, i64t};

const MIB: usize = 1 << 20;

fn budget(bytes: usize) -> ExecOptions {
    ExecOptions { max_tensor_bytes: Some(bytes), ..ExecOptions::default() }
}

/// The `OutOfMemory` error of `e` (through its node context): `(op, bytes, limit)`.
fn oom(e: &Error) -> (&str, usize, Option<usize>) {
    match e.root() {
        Error::OutOfMemory { op, bytes, limit } => (op.as_str(), *bytes, *limit),
        other => panic!("expected OutOfMemory, got {other} (from {e})"),
    }
}

#[test]
fn a_budget_stops_a_16_gib_matmul_before_it_allocates() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, [65536, 1]);
    let b = g.input("b", DType::F32, [1, 65536]);
    let c = g.matmul(a, b).unwrap();
    let mut s = Session::with_options(&g, &[c], budget(64 * MIB)).unwrap();
    let feeds =
        [(a, Tensor::ones(DType::F32, &[65536, 1]).unwrap()), (b, Tensor::ones(DType::F32, &[1, 65536]).unwrap())];
    let e = s.run(&feeds).unwrap_err();
    assert_eq!(oom(&e), ("matmul", 1 << 34, Some(64 * MIB)));
    let msg = e.to_string();
    assert!(msg.starts_with(&format!("node {} (matmul", c.node)), "{msg}");
    assert!(msg.contains("17179869184 bytes exceeds the budget of 67108864 bytes"), "{msg}");
}

#[test]
fn a_budget_applies_to_dynamic_shapes_through_inference() {
    let mut g = Graph::new();
    let a = g.input("a", DType::F32, [Dim::unknown(), Dim::fixed(1)]);
    let b = g.input("b", DType::F32, [Dim::fixed(1), Dim::unknown()]);
    let c = g.matmul(a, b).unwrap();
    let mut s = Session::with_options(&g, &[c], budget(MIB)).unwrap();
    let small = s.run(&[(a, f32t(&[2, 1], &[1.0, 2.0])), (b, f32t(&[1, 2], &[3.0, 4.0]))]).unwrap();
    assert_eq!(small[0], f32t(&[2, 2], &[3.0, 4.0, 6.0, 8.0]));
    let n = 1 << 12;
    let feeds = [(a, Tensor::ones(DType::F32, &[n, 1]).unwrap()), (b, Tensor::ones(DType::F32, &[1, n]).unwrap())];
    assert_eq!(oom(&s.run(&feeds).unwrap_err()), ("matmul", n * n * 4, Some(MIB)));
}

#[test]
fn a_budget_applies_to_sizes_read_from_data() {
    // range's length is data: known only inside the kernel, which allocates fallibly.
    let mut g = Graph::new();
    let limit = g.input("limit", DType::I64, Shape::scalar());
    let (zero, one) = (g.constant(Tensor::scalar(0i64)), g.constant(Tensor::scalar(1i64)));
    let r = g.range(zero, limit, one).unwrap();
    let mut s = Session::with_options(&g, &[r], budget(MIB)).unwrap();
    assert_eq!(s.run(&[(limit, Tensor::scalar(3i64))]).unwrap()[0], i64t(&[3], &[0, 1, 2]));
    let e = s.run(&[(limit, Tensor::scalar(1i64 << 40))]).unwrap_err();
    assert_eq!(oom(&e), ("range", 8 << 40, Some(MIB)));
    // fill_dyn likewise.
    let mut g = Graph::new();
    let shape = g.input("shape", DType::I64, [2]);
    let v = g.constant(Tensor::scalar(1.0f32));
    let f = g.fill_dyn(shape, v).unwrap();
    let mut s = Session::with_options(&g, &[f], budget(MIB)).unwrap();
    let e = s.run(&[(shape, i64t(&[2], &[1 << 20, 1 << 20]))]).unwrap_err();
    assert_eq!(oom(&e), ("fill_dyn", 4 << 40, Some(MIB)));
}

#[test]
fn a_budget_covers_feeds_constants_and_random_generators() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::unknown()]);
    let y = g.neg(x).unwrap();
    let mut s = Session::with_options(&g, &[y], budget(1024)).unwrap();
    assert!(s.run(&[(x, Tensor::zeros(DType::F32, &[256]).unwrap())]).is_ok());
    let e = s.run(&[(x, Tensor::zeros(DType::F32, &[257]).unwrap())]).unwrap_err();
    assert_eq!(oom(&e), ("feed for input 'x'", 1028, Some(1024)));

    let mut g = Graph::new();
    let c = g.zeros(DType::F64, &[1024]).unwrap();
    let key = g.constant(Tensor::scalar(3i64));
    let r = g.random_uniform(key, &[1 << 40], DType::F32, 0.0, 1.0).unwrap();
    assert_eq!(oom(&run_with(&g, &[c], budget(4096)).unwrap_err()), ("const", 8192, Some(4096)));
    assert_eq!(oom(&run_with(&g, &[r], budget(MIB)).unwrap_err()), ("random_uniform", 4 << 40, Some(MIB)));
}

#[test]
fn runs_within_the_budget_are_unchanged() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2, 3]);
    let w = g.constant(f32t(&[3, 2], &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0]));
    let y = g.matmul(x, w).unwrap();
    let z = g.relu(y).unwrap();
    let xv = f32t(&[2, 3], &[1.0, -2.0, 3.0, -4.0, 5.0, -6.0]);
    let want = run_once(&g, &[z], &[(x, xv.clone())]).unwrap();
    assert_eq!(run_with_feeds(&g, &[z], &[(x, xv)], budget(24)).unwrap(), want);
}

#[test]
fn an_allocation_larger_than_the_address_space_is_an_error() {
    // 4 PiB: beyond any machine's address space, so refused whatever the overcommit policy.
    let e = Tensor::zeros(DType::F32, &[1 << 50]).unwrap_err();
    assert_eq!(oom(&e), ("Tensor::full", 4 << 50, None));
    let e = Tensor::full(DType::F64, &[1 << 49], 2.0).unwrap_err();
    assert_eq!(oom(&e), ("Tensor::full", 4 << 50, None));
    let e = Tensor::arange(1 << 50).unwrap_err();
    assert_eq!(oom(&e), ("Tensor::arange", 8 << 50, None));
    // The same inside a run without a budget: checked before the kernel runs.
    let mut g = Graph::new();
    let key = g.constant(Tensor::scalar(3i64));
    let r = g.random_normal(key, &[1 << 50], DType::F32, 0.0, 1.0).unwrap();
    let e = run_once(&g, &[r], &[]).unwrap_err();
    assert_eq!(oom(&e), ("random_normal", 4 << 50, None));
    assert!(e.to_string().contains("could not be allocated"), "{e}");
}

fn run_with(g: &Graph, fetches: &[ValueId], opts: ExecOptions) -> Result<Vec<Tensor>> {
    run_with_feeds(g, fetches, &[], opts)
}

fn run_with_feeds(
    g: &Graph,
    fetches: &[ValueId],
    feeds: &[(ValueId, Tensor)],
    opts: ExecOptions,
) -> Result<Vec<Tensor>> {
    Session::with_options(g, fetches, opts)?.run(feeds)
}

#[test]
fn a_budget_also_bounds_what_a_session_folds_when_it_compiles() {
    // one_hot of a constant: folding it at compile time would allocate 256 KiB past the
    // budget there; it is left to the run, which refuses it at the one_hot node.
    let mut g = Graph::new();
    let rows = g.constant(Tensor::from_vec(&[256], (0..256i64).collect()).unwrap());
    let y = g.one_hot(rows, 256, -1, 1.0, 0.0, DType::F32).unwrap();
    let mut s = Session::with_options(&g, &[y], budget(64 * 1024)).unwrap();
    assert_eq!(oom(&s.run(&[]).unwrap_err()), ("one_hot", 256 * 256 * 4, Some(64 * 1024)));
    // within the budget, the folded result is the value
    let mut s = Session::with_options(&g, &[y], budget(MIB)).unwrap();
    let eye = s.run(&[]).unwrap().remove(0).to_f64_vec();
    assert!(eye.iter().enumerate().all(|(k, &v)| v == if k / 256 == k % 256 { 1.0 } else { 0.0 }));
}
