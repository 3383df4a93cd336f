//! Graph serialization (issue 21): round trips of every op kind (derived from the graphs the
//! value tests run), control flow and nested functions, pfor on a loaded graph, determinism,
//! fresh handles, and rejection of malformed, truncated, hostile and future-version bytes.

use std::cell::Cell;
use std::sync::Arc;

use pfor::error::Error;
use pfor::ir::serialize::{FORMAT_VERSION, MAGIC, MAX_DEPTH};
use pfor::ops::CustomOp;
use pfor::prelude::*;
use pfor::run_function;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::common::coverage::{self, Area};

/// Kinds no value test's graph can round-trip, with the reason. Empty: every built-in kind
/// is saved and loaded (custom ops are not built-in kinds: saving one is an error, tested
/// below).
const EXCLUDED: &[(&str, &str)] = &[];

#[test]
fn round_trip_coverage_of_every_op_kind() {
    if coverage::recording() {
        return;
    }
    let lines = coverage::roundtrip_covered();
    let failures: Vec<&String> = lines.iter().filter(|(a, _)| a == "serialize-fail").map(|(_, m)| m).collect();
    assert!(failures.is_empty(), "graphs of value tests that do not round-trip: {failures:#?}");
    let missing = coverage::missing(&lines, Area::Serialized, OpKind::all());
    let mut excluded: Vec<String> = EXCLUDED.iter().map(|(k, _)| k.to_string()).collect();
    excluded.sort();
    let mut missing_sorted = missing.clone();
    missing_sorted.sort();
    assert_eq!(missing_sorted, excluded, "op kinds whose round trip no value test checked (or stale exclusions)");
}

fn f64t(shape: &[usize], data: &[f64]) -> Tensor {
    Tensor::from_vec(shape, data.to_vec()).unwrap()
}

/// A graph with a recursive library function (cond + call), a while loop whose body holds a
/// cond and captures an outer value, a capped while, a for loop, a variable read, assigned
/// and incremented, a range, constants of every dtype and an input with a named dynamic dim.
/// Returns the graph and its outputs.
fn control_graph() -> Result<(Graph, Vec<ValueId>)> {
    let mut g = Graph::new();
    let v3 = TensorType::new(DType::F64, [3]);
    let k = TensorType::new(DType::I64, Shape::scalar());
    // shrink(x, k) = k <= 0 ? x : shrink(sin(x), k - 1)
    g.declare_function("shrink", &[v3.clone(), k.clone()], std::slice::from_ref(&v3))?;
    g.define_function("shrink", |g, p| {
        let zero = g.scalar(DType::I64, 0.0);
        let done = g.less_equal(p[1], zero)?;
        g.cond(
            done,
            &[p[0], p[1]],
            |_, q| Ok(vec![q[0]]),
            |g, q| {
                let s = g.sin(q[0])?;
                let one = g.scalar(DType::I64, 1.0);
                let k = g.sub(q[1], one)?;
                g.call("shrink", &[s, k])
            },
        )
    })?;
    let x = g.input("x", DType::F64, [3]);
    let batch = g.input("batch", DType::F32, [Dim::dynamic("n"), Dim::fixed(3)]);
    let w = g.variable("w", f64t(&[3], &[0.5, -1.0, 2.0]))?;
    let flags = g.constant(Tensor::from_vec(&[3], vec![true, false, true])?);
    let zero_i = g.scalar(DType::I64, 0.0);
    let acc0 = g.mul(x, w)?;
    let out = g.while_loop(
        &[zero_i, acc0],
        &[],
        |g, c| {
            let three = g.scalar(DType::I64, 3.0);
            g.less(c[0], three)
        },
        |g, c| {
            let one = g.scalar(DType::I64, 1.0);
            let i = g.add(c[0], one)?;
            let odd = g.equal(i, one)?;
            // a cond nested in the loop body, capturing the outer input `x`
            let acc = g.cond(odd, &[c[1]], |g, a| Ok(vec![g.add(a[0], x)?]), |g, a| Ok(vec![g.neg(a[0])?]))?;
            let two = g.scalar(DType::I64, 2.0);
            let r = g.call("shrink", &[acc[0], two])?;
            Ok(vec![i, r[0]])
        },
    )?;
    let capped = g.while_loop_with(
        &[x],
        &[],
        IterationCap::stop(4),
        |g, c| {
            let s = g.sum_all(c[0])?;
            let big = g.scalar(DType::F64, -1e9);
            g.greater(s, big)
        },
        |g, c| Ok(vec![g.cos(c[0])?]),
    )?;
    let looped = pfor::reference::for_loop(&mut g, 2, |g, i| {
        let f = g.cast(i, DType::F64)?;
        Ok(vec![g.mul(x, f)?])
    })?;
    let picked = g.select(flags, out[1], capped[0])?;
    let rows = g.reduce_sum(batch, Some(&[0]), false)?;
    // range and variable writes (value tests run these only through sessions)
    let (start, limit, delta) = (g.scalar(DType::F64, 0.5), g.scalar(DType::F64, 3.0), g.scalar(DType::F64, 1.0));
    let steps = g.range(start, limit, delta)?;
    let set = g.assign("w", capped[0])?;
    let bumped = g.assign_add("w", x)?;
    Ok((g, vec![picked, looped[0], rows, out[0], steps, set, bumped]))
}

fn feeds(g: &Graph) -> Vec<(ValueId, Tensor)> {
    vec![
        (g.input_by_name("x").unwrap(), f64t(&[3], &[0.25, -0.5, 1.5])),
        (g.input_by_name("batch").unwrap(), Tensor::from_vec(&[2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap()),
    ]
}

#[test]
fn control_flow_and_nested_functions_round_trip() {
    let (g, outs) = control_graph().unwrap();
    g.verify().unwrap();
    let want = run_once(&g, &outs, &feeds(&g)).unwrap();
    let bytes = g.to_bytes(&outs).unwrap();
    assert_eq!(&bytes[..8], MAGIC);
    let (h, outs2) = Graph::from_bytes(&bytes).unwrap();
    assert_eq!(h.num_nodes(), g.num_nodes());
    assert_eq!(h.library().function_names(), vec!["shrink".to_string()]);
    assert_eq!(h.library().variables().len(), 1);
    // node by node: the same ops (with attributes) and types, in the saved graph's order
    let (a, b) = (g.topo_order().unwrap(), h.node_ids());
    for (n, m) in a.iter().zip(&b) {
        let (x, y) = (g.node(*n).unwrap(), h.node(*m).unwrap());
        assert_eq!(x.op.to_string(), y.op.to_string());
        assert_eq!(x.outputs, y.outputs);
    }
    let x = h.input_by_name("batch").unwrap();
    assert_eq!(h.value_type(x).unwrap().to_string(), "f32[n,3]");
    let got = run_once(&h, &outs2, &feeds(&h)).unwrap();
    assert_eq!(got, want);
    // deterministic: the loaded graph saves to the same bytes, and so does a second build
    assert_eq!(h.to_bytes(&outs2).unwrap(), bytes);
    let (g2, outs3) = control_graph().unwrap();
    assert_eq!(g2.to_bytes(&outs3).unwrap(), bytes);
}

#[test]
fn loaded_graph_has_fresh_handles() {
    let (g, outs) = control_graph().unwrap();
    let (h, outs2) = Graph::from_bytes(&g.to_bytes(&outs).unwrap()).unwrap();
    for v in &outs {
        assert!(h.check_value(*v).is_err(), "{v} of the saved graph names a node of the loaded one");
    }
    for v in &outs2 {
        assert!(g.check_value(*v).is_err());
    }
}

#[test]
fn pfor_converts_a_loaded_graph() {
    let (g, _) = control_graph().unwrap();
    let bytes = g.to_bytes(&[]).unwrap();
    let (mut h, _) = Graph::from_bytes(&bytes).unwrap();
    let xs = h.constant(Tensor::randn_f64(&[4, 3], 7).unwrap());
    let ks = h.constant(Tensor::from_vec(&[4], vec![0i64, 1, 2, 3]).unwrap());
    let body = |g: &mut Graph, i: ValueId| {
        let x = g.gather(xs, i, 0)?;
        let k = g.gather(ks, i, 0)?;
        g.call("shrink", &[x, k])
    };
    let vectorized = pfor::vectorize::pfor(&mut h, 4, body).unwrap();
    let looped = pfor::reference::for_loop(&mut h, 4, body).unwrap();
    h.verify().unwrap();
    let r = run_once(&h, &[vectorized[0], looped[0]], &[]).unwrap();
    assert_eq!(r[0], r[1]);
}

#[test]
fn function_round_trips_with_its_library() {
    let (g, _) = control_graph().unwrap();
    let f = g.library().get("shrink").unwrap();
    let bytes = f.to_bytes().unwrap();
    let h = Function::from_bytes(&bytes).unwrap();
    assert_eq!(h.signature(), f.signature());
    assert_eq!(h.graph().library().function_names(), vec!["shrink".to_string()]);
    let args = vec![f64t(&[3], &[1.0, 2.0, 3.0]), Tensor::scalar_of(DType::I64, 3.0)];
    assert_eq!(run_function(&h, args.clone()).unwrap(), run_function(&f, args).unwrap());
    assert_eq!(h.to_bytes().unwrap(), bytes);
    // a function file is not a graph file, and the other way round
    let e = Graph::from_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("holds a function, not a graph"), "{e}");
}

#[test]
fn save_and_load_files() {
    let (g, outs) = control_graph().unwrap();
    let path = std::env::temp_dir().join(format!("pfor-serialize-test-{}.pfor", std::process::id()));
    g.save(&path, &outs).unwrap();
    let (h, outs2) = Graph::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(run_once(&h, &outs2, &feeds(&h)).unwrap(), run_once(&g, &outs, &feeds(&g)).unwrap());
}

#[test]
fn future_version_is_rejected_naming_both_versions() {
    let (g, outs) = control_graph().unwrap();
    let mut bytes = g.to_bytes(&outs).unwrap();
    bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let e = Graph::from_bytes(&bytes).unwrap_err();
    assert!(matches!(e, Error::Format { at: 8, .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains(&format!("version {}", FORMAT_VERSION + 1)), "{msg}");
    assert!(msg.contains(&format!("versions 1 to {FORMAT_VERSION}")) && msg.contains("newer"), "{msg}");
}

#[test]
fn bad_magic_truncation_and_trailing_bytes_are_errors() {
    let (g, outs) = control_graph().unwrap();
    let bytes = g.to_bytes(&outs).unwrap();
    let e = Graph::from_bytes(b"PK\x03\x04 not a graph").unwrap_err().to_string();
    assert!(e.contains("bad magic"), "{e}");
    assert!(Graph::from_bytes(&[]).is_err());
    for cut in [9, 13, bytes.len() / 2, bytes.len() - 1] {
        let e = Graph::from_bytes(&bytes[..cut]).unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "cut at {cut}: {e:?}");
    }
    let mut long = bytes.clone();
    long.push(0);
    let e = Graph::from_bytes(&long).unwrap_err().to_string();
    assert!(e.contains("1 trailing byte"), "{e}");
}

#[test]
fn hostile_counts_fail_before_allocating() {
    // A header, an empty library, then a node table claiming u32::MAX nodes.
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&[0; 12]);
    bytes.extend_from_slice(&u32::MAX.to_le_bytes());
    let e = Graph::from_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("node count 4294967295 exceeds"), "{e}");
    // a constant whose shape claims 2^40 elements in a few bytes
    let mut g = Graph::new();
    let c = g.constant(f64t(&[2], &[1.0, 2.0]));
    let mut bytes = g.to_bytes(&[c]).unwrap();
    let two = 2u64.to_le_bytes();
    let at = bytes.windows(8).position(|w| w == two).unwrap();
    bytes[at..at + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let e = Graph::from_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("truncated"), "{e}");
}

#[test]
fn nesting_deeper_than_the_limit_is_an_error() {
    fn nest(g: &mut Graph, x: ValueId, depth: usize) -> Result<ValueId> {
        if depth == 0 {
            return g.neg(x);
        }
        let t = g.constant(Tensor::from_vec(&[], vec![true])?);
        Ok(g.cond(t, &[x], |g, p| Ok(vec![nest(g, p[0], depth - 1)?]), |_, p| Ok(vec![p[0]]))?[0])
    }
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let y = nest(&mut g, x, MAX_DEPTH).unwrap();
    let (h, o) = Graph::from_bytes(&g.to_bytes(&[y]).unwrap()).unwrap();
    let r = run_once(&h, &o, &[(h.input_by_name("x").unwrap(), f64t(&[2], &[1.0, 2.0]))]).unwrap();
    assert_eq!(r[0].to_vec::<f64>().unwrap(), vec![-1.0, -2.0]);
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let y = nest(&mut g, x, MAX_DEPTH + 1).unwrap();
    let e = g.to_bytes(&[y]).unwrap_err().to_string();
    assert!(e.contains(&format!("nest deeper than {MAX_DEPTH}")), "{e}");
}

#[derive(Debug)]
struct Twice;

impl CustomOp for Twice {
    fn name(&self) -> &str {
        "twice"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(inputs.to_vec())
    }
    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Ok(inputs.to_vec())
    }
}

#[test]
fn custom_op_cannot_be_saved_and_the_error_names_it() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let y = g.add_op(Op::Custom(Arc::new(Twice)), &[x]).unwrap();
    let e = g.to_bytes(&[y]).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("twice") && msg.contains("cannot be serialized") && msg.contains(&y.node.to_string()),
        "{msg}"
    );
}

#[test]
fn output_of_another_graph_is_an_error() {
    let mut g = Graph::new();
    let mut other = Graph::new();
    let v = other.scalar(DType::F64, 1.0);
    g.scalar(DType::F64, 2.0);
    let e = g.to_bytes(&[v]).unwrap_err().to_string();
    assert!(e.contains("not a value of the graph being saved"), "{e}");
}

/// One mutation of a valid file: overwrite bytes, truncate, insert or delete.
#[derive(Clone, Debug)]
enum Mutation {
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    SetWord(usize, u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Set(a, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..9)).prop_map(|(a, b)| Mutation::Insert(a, b)),
        1 => (any::<usize>(), 1usize..9).prop_map(|(a, n)| Mutation::Delete(a, n)),
        2 => (any::<usize>(), prop_oneof![Just(0u32), Just(1), Just(u32::MAX), Just(1 << 20), any::<u32>()])
            .prop_map(|(a, w)| Mutation::SetWord(a, w)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    match m {
        Mutation::Set(a, b) => bytes[a % n] = *b,
        Mutation::Truncate(a) => bytes.truncate(a % n),
        Mutation::Insert(a, b) => {
            let at = a % (n + 1);
            bytes.splice(at..at, b.iter().copied());
        }
        Mutation::Delete(a, k) => {
            let at = a % n;
            bytes.drain(at..(at + k).min(n));
        }
        Mutation::SetWord(a, w) => {
            let at = a % n.saturating_sub(3).max(1);
            let end = (at + 4).min(n);
            bytes[at..end].copy_from_slice(&w.to_le_bytes()[..end - at]);
        }
    }
}

/// A graph of ops with many attributes (shapes, axes, paddings, masks, windows), so that byte
/// mutations reach the attribute decoders and shape inference. Ops whose inference rejects
/// these operands are left out; at least 10 must be in.
fn attribute_graph() -> (Graph, Vec<ValueId>) {
    use pfor::ops::slicing::PadMode;
    use pfor::ops::{ConvOp, IndexOp, NnOp, ReduceKind, ReduceOp, ShapeOp, SlicingOp};
    let mut g = Graph::new();
    let x = g.constant(Tensor::randn(&[2, 3, 4, 5], 3).unwrap());
    let w = g.constant(Tensor::randn(&[2, 2, 5, 4], 4).unwrap());
    let idx = g.constant(Tensor::from_vec(&[2], vec![2i64, 0]).unwrap());
    let params = Conv2dParams { strides: [1, 2], padding: Padding::Same, dilations: [1, 1] };
    let ops: Vec<(Op, Vec<ValueId>)> = vec![
        (Op::Shape(ShapeOp::Reshape { shape: vec![6, -1] }), vec![x]),
        (Op::Shape(ShapeOp::Transpose { perm: vec![0, 2, 1, 3] }), vec![x]),
        (Op::Shape(ShapeOp::Tile { multiples: vec![1, 2, 1, 1] }), vec![x]),
        (Op::Shape(ShapeOp::OneHot { depth: 4, axis: -1, on: 1.0, off: 0.0, dtype: DType::F32 }), vec![idx]),
        (
            Op::Slicing(SlicingOp::Pad { paddings: vec![(1, 0), (0, 1), (0, 0), (2, 2)], mode: PadMode::Reflect }),
            vec![x],
        ),
        (Op::Slicing(SlicingOp::Slice { begin: vec![0, 1, 0, 0], size: vec![1, -1, 2, 3] }), vec![x]),
        (Op::Slicing(SlicingOp::Split { axis: 3, sizes: vec![2, 3] }), vec![x]),
        (
            Op::Slicing(SlicingOp::StridedSlice {
                begin: vec![0, 1],
                end: vec![2, 3],
                strides: vec![1, 2],
                begin_mask: 0,
                end_mask: 1,
                ellipsis_mask: 0,
                new_axis_mask: 0,
                shrink_axis_mask: 0,
            }),
            vec![x],
        ),
        (Op::Conv(ConvOp::Conv2D { params }), vec![x, w]),
        (Op::Conv(ConvOp::MaxPool { ksize: [2, 2], strides: [1, 1], padding: Padding::Valid }), vec![x]),
        (Op::Conv(ConvOp::ExtractPatches { ksize: [2, 2], params }), vec![x]),
        (Op::Reduce(ReduceOp::Scan { kind: ReduceKind::CumSum, axis: 1, exclusive: true, reverse: false }), vec![x]),
        (Op::Reduce(ReduceOp::Axes { kind: ReduceKind::Max, axes: vec![1, -1], keep_dims: true }), vec![x]),
        (Op::Index(IndexOp::Gather { axis: 1, batch_dims: 0 }), vec![x, idx]),
        (Op::Index(IndexOp::TopK { k: 2, sorted: true }), vec![x]),
        (Op::Nn(NnOp::Softmax { axis: -1 }), vec![x]),
    ];
    let mut outs = Vec::new();
    for (op, inputs) in ops {
        if let Ok(vs) = g.add_op_multi(op, &inputs) {
            outs.extend(vs);
        }
    }
    assert!(outs.len() >= 10, "only {} attribute ops built", outs.len());
    (g, outs)
}

#[test]
fn attribute_graph_round_trips() {
    let (g, outs) = attribute_graph();
    let (h, outs2) = Graph::from_bytes(&g.to_bytes(&outs).unwrap()).unwrap();
    assert_eq!(run_once(&h, &outs2, &[]).unwrap(), run_once(&g, &outs, &[]).unwrap());
}

#[test]
fn mutated_files_load_verified_or_fail_cleanly() {
    let (g, outs) = control_graph().unwrap();
    let graph_bytes = g.to_bytes(&outs).unwrap();
    let (a, a_outs) = attribute_graph();
    let attr_bytes = a.to_bytes(&a_outs).unwrap();
    let fn_bytes = g.library().get("shrink").unwrap().to_bytes().unwrap();
    let mut runner = TestRunner::new_with_rng(
        Config { cases: 2500, failure_persistence: None, ..Config::default() },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[21; 32]),
    );
    let (ok, err) = (Cell::new(0usize), Cell::new(0usize));
    let strategy = (0..3u8, proptest::collection::vec(mutation(), 1..4));
    runner
        .run(&strategy, |(which, muts)| {
            let function = which == 0;
            let mut bytes = [&fn_bytes, &graph_bytes, &attr_bytes][which as usize].clone();
            for m in &muts {
                if !bytes.is_empty() {
                    apply(&mut bytes, m);
                }
            }
            if function {
                match Function::from_bytes(&bytes) {
                    Ok(f) => {
                        prop_assert!(f.graph().verify().is_ok());
                        ok.set(ok.get() + 1);
                    }
                    Err(e) => {
                        prop_assert!(matches!(e, Error::Format { .. }), "{e:?}");
                        err.set(err.get() + 1);
                    }
                }
            } else {
                match Graph::from_bytes(&bytes) {
                    Ok((h, o)) => {
                        prop_assert!(h.verify().is_ok());
                        prop_assert!(o.iter().all(|v| h.check_value(*v).is_ok()));
                        ok.set(ok.get() + 1);
                    }
                    Err(e) => {
                        prop_assert!(matches!(e, Error::Format { .. }), "{e:?}");
                        err.set(err.get() + 1);
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    let (ok, err) = (ok.get(), err.get());
    assert_eq!(ok + err, 2500);
    assert!(err > 1000, "most mutations must be rejected ({ok} loaded, {err} rejected)");
}
