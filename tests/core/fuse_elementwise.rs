//! Core tests: plan-level fusion of f32 elementwise groups (results bit-identical to the
//! unfused plan — NaNs compared as NaN — for every operand layout: full, strided `split`
//! views, row and column broadcasts, scalars, short and long rows, parallel walks, concat
//! results; fetched and outside-read intermediates; errors identical to the unfused ones).

use pfor::ops::{BinaryKind, UnaryKind};
use pfor::prelude::*;
use proptest::prelude::*;

fn unfused() -> ExecOptions {
    ExecOptions { fuse: false, ..ExecOptions::default() }
}

/// Shape and bit patterns, every NaN mapped to one pattern.
fn bits(t: &Tensor) -> (Vec<usize>, Vec<u64>) {
    let v: Vec<u64> = match t.dtype() {
        DType::F32 => {
            t.to_array::<f32>().unwrap().iter().map(|v| if v.is_nan() { 1 << 40 } else { v.to_bits() as u64 }).collect()
        }
        DType::F64 => {
            t.to_array::<f64>().unwrap().iter().map(|v| if v.is_nan() { 1 << 40 } else { v.to_bits() }).collect()
        }
        d => panic!("unexpected dtype {d}"),
    };
    (t.shape().to_vec(), v)
}

/// Run `fetches` fused and unfused; assert identical results; return (fused, unfused) steps.
fn same_both_ways(g: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> (usize, usize) {
    let mut fused = Session::new(g, fetches).unwrap();
    let mut plain = Session::with_options(g, fetches, unfused()).unwrap();
    let got = fused.run(feeds).unwrap();
    let want = plain.run(feeds).unwrap();
    assert_eq!(got.len(), want.len());
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_eq!(bits(a), bits(b), "fetch {i}");
    }
    (fused.num_steps(), plain.num_steps())
}

/// An LSTM cell's gates and state update on `[m, 4h]` pre-activations (split views) with a
/// bias: returns (graph, inputs, h', c').
fn lstm_cell(m: usize, h: usize) -> (Graph, [ValueId; 3], ValueId, ValueId) {
    let mut g = Graph::new();
    let z = g.input("z", DType::F32, [m, 4 * h]);
    let c = g.input("c", DType::F32, [m, h]);
    let b = g.input("b", DType::F32, [4 * h]);
    let zb = g.bias_add(z, b).unwrap();
    let gates = g.split(zb, 1, &[h; 4]).unwrap();
    let (h2, c2) = pfor::api::lstm_gates(&mut g, [gates[0], gates[1], gates[2], gates[3]], c).unwrap();
    (g, [z, c, b], h2, c2)
}

#[test]
fn lstm_cell_fuses_into_one_step_and_matches() {
    // m·h from tiny (sequential walk) to large (parallel tasks); h below and above one piece
    for (m, h) in [(1, 3), (5, 64), (64, 256), (300, 256), (3, 1500), (0, 8)] {
        let (g, [z, c, b], h2, c2) = lstm_cell(m, h);
        let mut zv = Tensor::randn(&[m, 4 * h], 1).unwrap().to_array::<f32>().unwrap() * 3.0;
        if let Some(v) = zv.as_slice_mut().unwrap().get_mut(m * h / 2) {
            *v = f32::NAN;
        }
        let feeds = [
            (z, Tensor::from_array(zv)),
            (c, Tensor::randn(&[m, h], 2).unwrap()),
            (b, Tensor::randn(&[4 * h], 3).unwrap()),
        ];
        let (f, p) = same_both_ways(&g, &[h2, c2], &feeds);
        // the bias moves through the split into the group (which then reads `z` and the
        // bias pieces): bias_add + split + nine ops → split z, split b, one fused step
        assert_eq!(p - f, 8, "m={m} h={h}: {f} fused vs {p} unfused steps");
        let ops = fused_ops(&g, &[h2, c2], &feeds);
        assert!(
            ops.iter().any(|o| o.starts_with("fused[bias_add, bias_add, bias_add, bias_add, sigmoid")),
            "m={m} h={h}: {ops:?}"
        );
        assert!(!ops.iter().any(|o| o == "bias_add"), "m={m} h={h}: {ops:?}");
    }
}

/// The ops a profiled fused run executed (fused groups as `fused[...] → k results`).
fn fused_ops(g: &Graph, fetches: &[ValueId], feeds: &[(ValueId, Tensor)]) -> Vec<String> {
    let mut s = Session::with_options(g, fetches, ExecOptions { profile: true, ..ExecOptions::default() }).unwrap();
    s.run(feeds).unwrap();
    s.profile()
        .entries()
        .iter()
        .map(|e| if e.kind == "fused_elementwise" { e.op.clone() } else { e.kind.clone() })
        .collect()
}

#[test]
fn bias_moves_through_a_split_only_when_nothing_else_needs_it() {
    let (m, h) = (6, 40);
    let feeds = |z, b| [(z, Tensor::randn(&[m, 4 * h], 1).unwrap()), (b, Tensor::randn(&[4 * h], 2).unwrap())];
    // the sum y = bias_add(z, b) read by the split and by `extra`, or fetched, or split
    // along axis 0, or the pieces read only by non-elementwise ops: the bias_add stays
    for case in 0..4 {
        let mut g = Graph::new();
        let z = g.input("z", DType::F32, [m, 4 * h]);
        let b = g.input("b", DType::F32, [4 * h]);
        let y = g.bias_add(z, b).unwrap();
        let mut fetches = Vec::new();
        let pieces = match case {
            2 => g.split(y, 0, &[2, 4]).unwrap(),
            _ => g.split(y, 1, &[h, 3 * h]).unwrap(),
        };
        match case {
            0 => fetches.push(g.reduce_sum(y, Some(&[1]), false).unwrap()),
            1 => fetches.push(y),
            3 => fetches.extend(pieces.iter().map(|&p| g.reduce_sum(p, Some(&[1]), false).unwrap())),
            _ => {}
        }
        if case != 3 {
            for &p in &pieces {
                let s = g.sigmoid(p).unwrap();
                fetches.push(g.mul(s, p).unwrap());
            }
        }
        let fd = feeds(z, b);
        same_both_ways(&g, &fetches, &fd);
        let ops = fused_ops(&g, &fetches, &fd);
        assert!(ops.iter().any(|o| o == "bias_add"), "case {case}: {ops:?}");
    }
    // a piece nobody reads gets no bias_add; the read ones fuse
    let mut g = Graph::new();
    let z = g.input("z", DType::F32, [m, 4 * h]);
    let b = g.input("b", DType::F32, [4 * h]);
    let y = g.bias_add(z, b).unwrap();
    let pieces = g.split(y, -1, &[h, 2 * h, h]).unwrap();
    let t0 = g.tanh(pieces[0]).unwrap();
    let t2 = g.mul(pieces[2], t0).unwrap();
    let fd = feeds(z, b);
    same_both_ways(&g, &[t2, pieces[0]], &fd);
    let ops = fused_ops(&g, &[t2, pieces[0]], &fd);
    assert!(ops.iter().any(|o| o.starts_with("fused[bias_add, bias_add, tanh, mul] → 2 results")), "{ops:?}");
    assert!(!ops.iter().any(|o| o == "bias_add"), "{ops:?}");
}

#[test]
fn broadcast_operand_layouts_match() {
    // x is [rows, len]; operands: full, row [len], [1, len], column [rows, 1], scalar
    for (rows, len) in [(7, 5), (9, 70), (2, 2500), (600, 300), (1, 40), (4096, 3)] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [rows, len]);
        let row = g.input("row", DType::F32, [len]);
        let row2 = g.input("row2", DType::F32, [1, len]);
        let col = g.input("col", DType::F32, [rows, 1]);
        let s = g.constant(Tensor::scalar(0.75f32));
        let a = g.mul(x, row).unwrap();
        let a = g.sub(row2, a).unwrap();
        let a = g.add(a, col).unwrap();
        let a = g.maximum(a, s).unwrap();
        let e = g.exp(a).unwrap();
        let y = g.div(s, e).unwrap();
        let y = g.squared_difference(y, x).unwrap();
        let feeds = [
            (x, Tensor::randn(&[rows, len], 4).unwrap()),
            (row, Tensor::randn(&[len], 5).unwrap()),
            (row2, Tensor::randn(&[1, len], 6).unwrap()),
            (col, Tensor::randn(&[rows, 1], 7).unwrap()),
        ];
        let (f, p) = same_both_ways(&g, &[y], &feeds);
        assert_eq!(p - f, 6, "rows={rows} len={len}");
    }
}

#[test]
fn transposed_and_sliced_operands_match() {
    // a transposed input (no contiguous rows) and a strided slice of the last axis
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [40, 24]);
    let w = g.input("w", DType::F32, [24, 80]);
    let xt = g.transpose(x, &[1, 0]).unwrap();
    let halves = g.split(w, 1, &[40, 40]).unwrap();
    let a = g.mul(xt, halves[1]).unwrap();
    let a = g.tanh(a).unwrap();
    let y = g.add(a, halves[0]).unwrap();
    let feeds = [(x, Tensor::randn(&[40, 24], 8).unwrap()), (w, Tensor::randn(&[24, 80], 9).unwrap())];
    let (f, p) = same_both_ways(&g, &[y], &feeds);
    assert_eq!(p - f, 2);
}

#[test]
fn fetched_and_outside_read_members_are_produced() {
    let (mut g, [z, c, b], h2, c2) = lstm_cell(6, 16);
    // an outside reader of a member (a reduction) and a later member reading it back: the
    // reader runs between them, so they cannot share one step
    let s = g.reduce_sum(c2, Some(&[1]), true).unwrap();
    let y = g.mul(h2, s).unwrap();
    let feeds = [
        (z, Tensor::randn(&[6, 64], 1).unwrap()),
        (c, Tensor::randn(&[6, 16], 2).unwrap()),
        (b, Tensor::randn(&[64], 3).unwrap()),
    ];
    let (f, p) = same_both_ways(&g, &[y, c2, h2], &feeds);
    assert!(f < p);
    same_both_ways(&g, &[y], &feeds);
}

#[test]
fn concat_of_member_results_is_written_in_place() {
    for (m, h) in [(3, 8), (200, 256), (2, 2000)] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, [m, 1, h]);
        let y = g.input("y", DType::F32, [1, h]);
        let a = g.mul(x, y).unwrap();
        let b = g.sigmoid(a).unwrap();
        let c = g.sub(b, x).unwrap();
        let d = g.mul(c, a).unwrap();
        let e = g.tanh(b).unwrap();
        let cat = g.concat(&[d, e], 2).unwrap();
        let feeds = [(x, Tensor::randn(&[m, 1, h], 10).unwrap()), (y, Tensor::randn(&[1, h], 11).unwrap())];
        // the concat is absorbed: 5 members + concat = 1 step
        let (f, p) = same_both_ways(&g, &[cat], &feeds);
        assert_eq!(p - f, 5, "m={m} h={h}");
        // an operand also fetched: still correct, the concat is not absorbed
        let (f, p) = same_both_ways(&g, &[cat, e], &feeds);
        assert_eq!(p - f, 4, "m={m} h={h}");
        // an operand read by another member (b feeds c and e) is not a concat operand
        let cat_b = g.concat(&[d, b], 2).unwrap();
        let (f, p) = same_both_ways(&g, &[cat_b], &feeds);
        assert_eq!(p - f, 3, "m={m} h={h}");
        // a concat on another axis is not absorbed
        let cat0 = g.concat(&[d, e], 0).unwrap();
        let (f, p) = same_both_ways(&g, &[cat0], &feeds);
        assert_eq!(p - f, 4, "m={m} h={h}");
    }
}

#[test]
fn f64_and_integer_ops_are_left_alone() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [4, 5]);
    let a = g.exp(x).unwrap();
    let y = g.mul(a, x).unwrap();
    let (f, p) = same_both_ways(&g, &[y], &[(x, Tensor::randn_f64(&[4, 5], 1).unwrap())]);
    assert_eq!(f, p);
}

#[test]
fn mismatched_dynamic_shapes_report_the_unfused_error() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::dynamic("n"), Dim::Fixed(4)]);
    let y = g.input("y", DType::F32, [Dim::dynamic("k"), Dim::Fixed(4)]);
    let a = g.exp(x).unwrap();
    let b = g.mul(a, y).unwrap();
    let out = g.tanh(b).unwrap();
    let feeds = [(x, Tensor::randn(&[3, 4], 1).unwrap()), (y, Tensor::randn(&[2, 4], 2).unwrap())];
    let mut fused = Session::new(&g, &[out]).unwrap();
    let mut plain = Session::with_options(&g, &[out], unfused()).unwrap();
    assert!(fused.num_steps() < plain.num_steps());
    let got = fused.run(&feeds).unwrap_err();
    let want = plain.run(&feeds).unwrap_err();
    assert_eq!(got.to_string(), want.to_string());
    assert!(matches!(&got, Error::AtNode { node, .. } if *node == b.node), "{got:?}");
    // the same plan with agreeing sizes runs fused
    let ok = [(x, Tensor::randn(&[3, 4], 1).unwrap()), (y, Tensor::randn(&[3, 4], 2).unwrap())];
    assert_eq!(bits(&fused.run(&ok).unwrap()[0]), bits(&plain.run(&ok).unwrap()[0]));
}

/// One op of a random elementwise program: kind and operand picks.
#[derive(Clone, Debug)]
struct RandOp {
    kind: u8,
    a: usize,
    b: usize,
}

const UNARY: [UnaryKind; 8] = [
    UnaryKind::Sigmoid,
    UnaryKind::Tanh,
    UnaryKind::Neg,
    UnaryKind::Exp,
    UnaryKind::Abs,
    UnaryKind::Relu,
    UnaryKind::Square,
    UnaryKind::Softplus,
];
const BINARY: [BinaryKind; 6] =
    [BinaryKind::Add, BinaryKind::Sub, BinaryKind::Mul, BinaryKind::Div, BinaryKind::Maximum, BinaryKind::Minimum];

fn rand_op() -> impl Strategy<Value = RandOp> {
    (0u8..16, 0usize..64, 0usize..64).prop_map(|(kind, a, b)| RandOp { kind, a, b })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Random elementwise programs over full, row, column and scalar operands, with random
    /// fetches and an occasional non-elementwise reader (a reduction) in the middle: the
    /// fused plan agrees bit for bit with the unfused one.
    #[test]
    fn random_elementwise_programs_match(
        rows in 0usize..40,
        len in prop::sample::select(vec![1usize, 3, 17, 64, 130, 1100]),
        ops in prop::collection::vec(rand_op(), 1..14),
        fetch_mask in any::<u64>(),
    ) {
        let mut g = Graph::new();
        let full = g.input("x", DType::F32, [rows, len]);
        let full2 = g.input("x2", DType::F32, [rows, len]);
        let row = g.input("row", DType::F32, [len]);
        let col = g.input("col", DType::F32, [rows, 1]);
        let sc = g.constant(Tensor::scalar(-0.5f32));
        // values of shape [rows, len] (operands of later ops) and broadcast operands
        let mut vals = vec![full, full2];
        let bcast = [row, col, sc];
        for op in &ops {
            let a = vals[op.a % vals.len()];
            let v = if op.kind < 6 {
                g.unary(UNARY[(op.a + op.b) % UNARY.len()], a).unwrap()
            } else if op.kind < 13 {
                let b = if op.kind % 2 == 0 { vals[op.b % vals.len()] } else { bcast[op.b % bcast.len()] };
                let (x, y) = if op.b % 3 == 0 { (b, a) } else { (a, b) };
                g.binary(BINARY[op.b % BINARY.len()], x, y).unwrap()
            } else {
                // a non-elementwise reader between members
                let s = g.reduce_sum(a, Some(&[1]), true).unwrap();
                g.mul(s, a).unwrap()
            };
            vals.push(v);
        }
        let mut fetches: Vec<ValueId> =
            vals[2..].iter().enumerate().filter(|(i, _)| fetch_mask >> (i % 64) & 1 == 1).map(|(_, &v)| v).collect();
        fetches.push(*vals.last().unwrap());
        if fetch_mask >> 63 == 1 && vals.len() > 3 {
            // the last two results joined along the last axis (absorbed when unfetched)
            let n = vals.len();
            let cat = g.concat(&[vals[n - 1], vals[n - 2]], 1).unwrap();
            fetches = vec![cat];
        }
        let feeds = [
            (full, Tensor::randn(&[rows, len], 1).unwrap()),
            (full2, Tensor::randn(&[rows, len], 2).unwrap()),
            (row, Tensor::randn(&[len], 3).unwrap()),
            (col, Tensor::randn(&[rows, 1], 4).unwrap()),
        ];
        same_both_ways(&g, &fetches, &feeds);
    }
}
