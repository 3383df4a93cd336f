//! Property tests: on random inputs and batch sizes, the stackless executor and the VM
//! (in every execution mode and threshold) agree exactly with the unbatched reference
//! interpreter, and with closed forms where there are some.

use pfor::autobatch::{ExecConfig, ExecMode, Program, VariableAllocation, reference, stackless, vm};
use pfor::prelude::*;
use proptest::prelude::*;

use super::programs::*;
use crate::common::i64t;

fn configs() -> Vec<ExecConfig> {
    let mut v = vec![];
    for mode in [ExecMode::Auto, ExecMode::Masked, ExecMode::Gather] {
        v.push(ExecConfig { mode, ..ExecConfig::default() });
    }
    v.push(ExecConfig { gather_threshold: 0.3, ..ExecConfig::default() });
    v
}

fn agree(p: &Program, inputs: &[Tensor]) -> std::result::Result<Vec<Tensor>, TestCaseError> {
    let want = reference::execute(p, inputs).map_err(|e| TestCaseError::fail(format!("reference: {e}")))?;
    for cfg in configs() {
        let s = stackless::execute_with(p, inputs, &cfg).map_err(|e| TestCaseError::fail(format!("stackless: {e}")))?;
        prop_assert_eq!(&s.outputs, &want, "stackless {:?}", cfg);
        let v = vm::execute_with(p, inputs, &cfg).map_err(|e| TestCaseError::fail(format!("vm: {e}")))?;
        prop_assert_eq!(&v.outputs, &want, "vm {:?}", cfg);
    }
    Ok(want)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn fibonacci_agrees(ns in prop::collection::vec(-2i64..11, 1..24)) {
        let out = agree(&fibonacci(), &[i64t(&[ns.len()], &ns)])?;
        let want: Vec<i64> = ns.iter().map(|&n| fib_ref(n)).collect();
        prop_assert_eq!(out[0].to_vec::<i64>().unwrap(), want);
    }

    #[test]
    fn even_odd_agrees(ns in prop::collection::vec(0i64..40, 1..24)) {
        let out = agree(&even_odd(), &[i64t(&[ns.len()], &ns)])?;
        let want: Vec<bool> = ns.iter().map(|&n| n % 2 == 0).collect();
        prop_assert_eq!(out[0].to_vec::<bool>().unwrap(), want);
    }

    #[test]
    fn product_outputs_agree(ns in prop::collection::vec(-1i64..15, 1..16)) {
        let out = agree(&fib_pair(), &[i64t(&[ns.len()], &ns)])?;
        let want: Vec<i64> = ns.iter().map(|&n| if n <= 0 { 1 } else { fib_ref(n) }).collect();
        prop_assert_eq!(out[0].to_vec::<i64>().unwrap(), want);
    }

    #[test]
    fn loops_and_tail_calls_agree(xs in prop::collection::vec(1i64..60, 1..16)) {
        let n = xs.len();
        let out = agree(&collatz(), &[i64t(&[n], &xs)])?;
        let want: Vec<i64> = xs.iter().map(|&x| collatz_ref(x)).collect();
        prop_assert_eq!(out[0].to_vec::<i64>().unwrap(), want);
        let zeros = vec![0i64; n];
        let out = agree(&sum_to(), &[i64t(&[n], &xs), i64t(&[n], &zeros)])?;
        let want: Vec<i64> = xs.iter().map(|&x| x * (x + 1) / 2).collect();
        prop_assert_eq!(out[0].to_vec::<i64>().unwrap(), want);
    }

    #[test]
    fn nuts_like_tree_agrees(depths in prop::collection::vec(0i64..5, 1..10), seed in 0u64..1000) {
        let dim = 3;
        let b = depths.len();
        let inputs = [i64t(&[b], &depths), Tensor::randn_f64(&[b, dim], seed).unwrap(), Tensor::randn_f64(&[b, dim], seed + 1).unwrap()];
        agree(&nuts(dim, 0.05), &inputs)?;
    }

    #[test]
    fn forwarded_copies_agree(xs in prop::collection::vec(-3i64..9, 1..24)) {
        let p = copies();
        for t in ["t", "u", "a", "double"] {
            prop_assert_eq!(p.alloc(var(&p, t)), VariableAllocation::Temporary, "{}", t);
        }
        let out = agree(&p, &[i64t(&[xs.len()], &xs)])?;
        let want: Vec<i64> = xs.iter().map(|&x| if x > 3 { 11 * x + 1 } else { 201 * x }).collect();
        prop_assert_eq!(out[0].to_vec::<i64>().unwrap(), want);
    }

    #[test]
    fn descend_agrees(ns in prop::collection::vec(0i64..8, 1..12), seed in 0u64..1000) {
        let b = ns.len();
        agree(&descend(), &[i64t(&[b], &ns), Tensor::randn_f64(&[b], seed).unwrap()])?;
    }
}
