//! The oracle as a property test: proptest draws the per-iteration shapes, the op
//! attributes (axes, permutations, slice bounds, strides, paddings), the loop length
//! (0 and 1 included), static or dynamic n, and a stacked/unstacked pattern for every
//! input, and asserts `run(pfor(body)) == stack_i run(body(i))` under `Fallback::Error`.
//! One property per op family; the exhaustive fixed-shape cases live in the family files.
//! Guarded-error bodies (an op that fails on the values the guard keeps away from it) check
//! that pfor never fails where the loop succeeds, in every control-flow mode.

use proptest::prelude::*;

use super::oracle::{Body, Spec, check_case, check_case_with};
use crate::robustness::pfor_vs_loop::{RISKY, guarded_cond, guarded_while};
use pfor::ops::slicing::PadMode;
use pfor::ops::{BinaryKind, UnaryKind};
use pfor::prelude::*;
use pfor::vectorize::{ControlFlowMode, PforOptions};

/// The loop lengths drawn: 0 and 1 are the edge cases the issue names.
fn loop_len() -> impl Strategy<Value = usize> {
    prop_oneof![Just(0usize), Just(1usize), Just(2usize), 3usize..8]
}

/// A stacked/unstacked pattern for `k` inputs.
fn pattern(k: usize) -> impl Strategy<Value = Vec<bool>> {
    prop::collection::vec(any::<bool>(), k)
}

/// A per-iteration shape of rank `lo..=hi` with dims in `1..=4`.
fn shape(lo: usize, hi: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..=4, lo..=hi)
}

fn run(specs: &[Spec], stacked: &[bool], n: usize, dynamic: bool, seed: u64, body: Body) -> Result<(), TestCaseError> {
    check_case(specs, stacked, n, dynamic, seed, body).map_err(TestCaseError::fail)
}

/// A shape broadcast-compatible with `s`: a suffix of it with some dims set to 1.
fn broadcast_partner(s: &[usize], keep: usize, ones: u8) -> Vec<usize> {
    let keep = keep.min(s.len());
    s[s.len() - keep..].iter().enumerate().map(|(i, &d)| if ones & (1 << i) != 0 { 1 } else { d }).collect()
}

const UNARY: &[UnaryKind] = &[
    UnaryKind::Neg,
    UnaryKind::Abs,
    UnaryKind::Tanh,
    UnaryKind::Exp,
    UnaryKind::Sin,
    UnaryKind::Relu,
    UnaryKind::Square,
];
const BINARY: &[BinaryKind] = &[
    BinaryKind::Add,
    BinaryKind::Sub,
    BinaryKind::Mul,
    BinaryKind::Maximum,
    BinaryKind::Minimum,
    BinaryKind::Less,
    BinaryKind::Equal,
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn unary_and_binary_with_random_broadcasting(
        s in shape(0, 3), keep in 0usize..4, ones in any::<u8>(), ku in 0..UNARY.len(), kb in 0..BINARY.len(),
        swap in any::<bool>(), st in pattern(2), n in loop_len(), dynamic in any::<bool>(), seed in 0u64..1000,
    ) {
        let t = broadcast_partner(&s, keep, ones);
        let (a, b) = if swap { (t, s) } else { (s, t) };
        let (ku, kb) = (UNARY[ku], BINARY[kb]);
        run(&[Spec::f64(&a), Spec::f64(&b)], &st, n, dynamic, seed, &|g: &mut Graph, x: &[ValueId]| {
            let u = g.unary(ku, x[0])?;
            Ok(vec![g.binary(kb, u, x[1])?])
        })?;
    }

    #[test]
    fn reductions_over_random_axis_sets(
        s in shape(1, 4), axes_mask in any::<u8>(), keep in any::<bool>(), neg in any::<bool>(),
        st in pattern(1), n in loop_len(), dynamic in any::<bool>(), seed in 0u64..1000,
    ) {
        let r = s.len() as i64;
        let axes: Vec<i64> =
            (0..r).filter(|a| axes_mask & (1 << a) != 0).map(|a| if neg { a - r } else { a }).collect();
        let axis = (axes_mask as i64 % r) - if neg { r } else { 0 };
        run(&[Spec::f64(&s)], &st, n, dynamic, seed, &|g: &mut Graph, x: &[ValueId]| {
            Ok(vec![
                g.reduce_sum(x[0], Some(&axes), keep)?,
                g.reduce_max(x[0], Some(&axes), keep)?,
                g.reduce_mean(x[0], Some(&axes), keep)?,
                g.argmax(x[0], axis)?,
                g.cumsum(x[0], axis, keep, neg)?,
                g.softmax(x[0], axis)?,
            ])
        })?;
    }

    #[test]
    fn shape_ops_with_random_permutations(
        s in shape(1, 4), perm_seed in any::<u64>(), ax in 0usize..5, mult in prop::collection::vec(1usize..3, 4),
        st in pattern(1), n in loop_len(), dynamic in any::<bool>(), seed in 0u64..1000,
    ) {
        let r = s.len();
        // a permutation from the seed (Fisher-Yates over a tiny LCG)
        let mut perm: Vec<usize> = (0..r).collect();
        let mut z = perm_seed;
        for i in (1..r).rev() {
            z = z.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            perm.swap(i, (z >> 33) as usize % (i + 1));
        }
        let ax = (ax % (r + 1)) as i64;
        let total: usize = s.iter().product();
        let mult = mult[..r].to_vec();
        run(&[Spec::f64(&s)], &st, n, dynamic, seed, &|g: &mut Graph, x: &[ValueId]| {
            let e = g.expand_dims(x[0], ax)?;
            Ok(vec![
                g.transpose(x[0], &perm)?,
                g.reshape(x[0], &[total as i64])?,
                g.reshape(x[0], &[-1, *s.last().unwrap_or(&1) as i64])?,
                g.squeeze(e, Some(&[ax]))?,
                g.tile(x[0], &mult)?,
            ])
        })?;
    }

    #[test]
    fn slicing_with_random_bounds(
        s in shape(1, 3), lo in prop::collection::vec(0usize..4, 3), ax in 0usize..3, pads in prop::collection::vec(0usize..3, 6),
        st in pattern(2), n in loop_len(), dynamic in any::<bool>(), seed in 0u64..1000,
    ) {
        let r = s.len();
        let begin: Vec<i64> = (0..r).map(|i| (lo[i] % s[i]) as i64).collect();
        let size: Vec<i64> = (0..r).map(|i| (s[i] - lo[i] % s[i]) as i64).collect();
        let ax = (ax % r) as i64;
        let paddings: Vec<(usize, usize)> = (0..r).map(|i| (pads[2 * i], pads[2 * i + 1])).collect();
        run(&[Spec::f64(&s), Spec::f64(&s)], &st, n, dynamic, seed, &|g: &mut Graph, x: &[ValueId]| {
            Ok(vec![
                g.slice(x[0], &begin, &size)?,
                g.concat(&[x[0], x[1], x[0]], ax)?,
                g.pad(x[1], &paddings, PadMode::Constant(0.5))?,
                g.reverse(x[0], &[ax])?,
                g.stack(&[x[0], x[1]], ax)?,
            ])
        })?;
    }

    #[test]
    fn gathers_with_random_axes_and_index_shapes(
        s in shape(1, 3), ishape in shape(0, 2), ax in 0usize..3, neg in any::<bool>(),
        st in pattern(2), n in loop_len(), dynamic in any::<bool>(), seed in 0u64..1000,
    ) {
        let r = s.len();
        let a = ax % r;
        let axis = if neg { a as i64 - r as i64 } else { a as i64 };
        let specs = [Spec::f64(&s), Spec::int(&ishape, 0, s[a] as i64)];
        run(&specs, &st, n, dynamic, seed, &|g: &mut Graph, x: &[ValueId]| Ok(vec![g.gather(x[0], x[1], axis)?]))?;
    }

    #[test]
    fn matmuls_with_random_dims_and_transposes(
        m in 1usize..5, k in 1usize..5, p in 1usize..5, ta in any::<bool>(), tb in any::<bool>(),
        st in pattern(2), n in loop_len(), dynamic in any::<bool>(), seed in 0u64..1000,
    ) {
        let a = if ta { vec![k, m] } else { vec![m, k] };
        let b = if tb { vec![p, k] } else { vec![k, p] };
        run(&[Spec::f64(&a), Spec::f64(&b)], &st, n, dynamic, seed, &|g: &mut Graph, x: &[ValueId]| {
            Ok(vec![g.matmul_t(x[0], x[1], ta, tb)?])
        })?;
    }

    #[test]
    fn conv_and_pools_with_random_geometry(
        hw in prop::collection::vec(3usize..7, 2), c in 1usize..3, o in 1usize..3, kk in 1usize..4,
        stride in 1usize..3, same in any::<bool>(), dil in 1usize..3,
        st in pattern(2), n in prop_oneof![Just(0usize), Just(1usize), Just(3usize)], seed in 0u64..1000,
    ) {
        let padding = if same { Padding::Same } else { Padding::Valid };
        // keep the dilated window inside the image for VALID
        let kk = kk.min(1 + (hw[0].min(hw[1]) - 1) / dil);
        let params = Conv2dParams { strides: [stride, stride], padding, dilations: [dil, dil] };
        let specs = [Spec::f64(&[2, hw[0], hw[1], c]), Spec::f64(&[kk, kk, c, o])];
        run(&specs, &st, n, false, seed, &|g: &mut Graph, x: &[ValueId]| {
            Ok(vec![
                g.conv2d(x[0], x[1], params)?,
                g.max_pool(x[0], [2, 2], [stride, stride], padding)?,
                g.avg_pool(x[0], [2, 2], [stride, stride], padding)?,
                g.extract_patches(x[0], [kk, kk], params)?,
            ])
        })?;
    }

    #[test]
    fn guarded_error_bodies_never_fail_where_the_loop_succeeds(
        r in 0..RISKY.len(), in_while in any::<bool>(), mode in 0usize..3,
        st in pattern(2), n in loop_len(), dynamic in any::<bool>(), seed in 0u64..1000,
    ) {
        // x in [-2, 5) hits both sides of every guard; p (also a guard) may be invariant
        // while x varies, or vary while x is an invariant unsafe value
        let r = RISKY[r];
        let mode = [ControlFlowMode::Auto, ControlFlowMode::Subset, ControlFlowMode::Mask][mode];
        let opts = PforOptions::strict().with_control_flow(mode);
        let specs = [Spec::int(&[], -2, 5), Spec::bool(&[])];
        check_case_with(&specs, &st, n, dynamic, seed, &opts, &|g: &mut Graph, x: &[ValueId]| {
            let y = if in_while { guarded_while(r, g, x[1], x[0])? } else { guarded_cond(r, g, x[1], x[0])? };
            Ok(vec![y])
        })
        .map_err(|e| TestCaseError::fail(format!("{r:?} {mode:?} while={in_while}: {e}")))?;
    }

    #[test]
    fn nn_ops_with_random_shapes(
        s in shape(1, 3), st in pattern(3), n in loop_len(), dynamic in any::<bool>(), seed in 0u64..1000,
    ) {
        let c = *s.last().unwrap_or(&1);
        let specs = [Spec::f64(&s), Spec::f64(&[c]), Spec::f64(&[c])];
        run(&specs, &st, n, dynamic, seed, &|g: &mut Graph, x: &[ValueId]| {
            Ok(vec![
                g.bias_add(x[0], x[1])?,
                g.log_softmax(x[0], -1)?,
                g.layer_norm(x[0], x[1], x[2], 1e-5)?,
            ])
        })?;
    }
}
