//! Random ops inside pfor under each `Randomness` policy.

use crate::common::coverage::pfor_recorded;
use crate::common::*;
use pfor::prelude::*;
use pfor::vectorize::{PforOptions, Randomness};

/// A body taking the key and the loop index.
type KeyBody<'a> = &'a dyn Fn(&mut Graph, ValueId, ValueId) -> Result<Vec<ValueId>>;

fn run_both(policy: Randomness, n: usize, vec_body: KeyBody, loop_body: KeyBody) -> (Vec<Tensor>, Vec<Tensor>) {
    let mut g = Graph::new();
    let key = g.constant(Tensor::scalar(42i64));
    let opts = PforOptions::strict().with_randomness(policy);
    let a = pfor_recorded(&mut g, n, &opts, |g, i| vec_body(g, key, i)).unwrap();
    let b = for_loop(&mut g, n, |g, i| loop_body(g, key, i)).unwrap();
    g.verify().unwrap();
    (eval(&g, &a), eval(&g, &b))
}

fn generators(g: &mut Graph, key: ValueId) -> Result<Vec<ValueId>> {
    let x = g.constant(Tensor::ones(DType::F64, &[3, 4]).unwrap());
    let logits = g.constant(f64t(&[3], &[0.0, 1.0, 2.0]));
    let p = g.scalar(DType::F64, 0.3);
    Ok(vec![
        g.random_uniform(key, &[2, 3], DType::F64, -1.0, 1.0)?,
        g.random_normal(key, &[4], DType::F32, 0.0, 1.0)?,
        g.random_bernoulli(key, p, &[5])?,
        g.random_categorical(key, logits, 6)?,
        g.dropout(x, key, 0.5)?,
    ])
}

#[test]
fn different_policy_equals_a_loop_folding_the_index_into_the_key() {
    for n in [0, 1, 5] {
        let (v, l) = run_both(Randomness::Different, n, &|g, k, _i| generators(g, k), &|g, k, i| {
            let k2 = g.fold_in(k, i)?;
            generators(g, k2)
        });
        for (a, b) in v.iter().zip(&l) {
            assert_eq!(a, b);
        }
        if n == 5 {
            // iterations differ from each other
            assert_ne!(v[0].index_axis0(0).unwrap(), v[0].index_axis0(1).unwrap());
        }
    }
}

#[test]
fn same_policy_equals_the_plain_loop() {
    let (v, l) = run_both(Randomness::Same, 4, &|g, k, _i| generators(g, k), &|g, k, _i| generators(g, k));
    for (a, b) in v.iter().zip(&l) {
        assert_eq!(a, b);
    }
}

#[test]
fn stacked_keys_and_error_policy() {
    // per-iteration keys computed from the index: stacked key input
    let (v, l) = run_both(
        Randomness::Error,
        3,
        &|g, k, i| {
            let k2 = g.fold_in(k, i)?;
            Ok(vec![g.random_normal(k2, &[2], DType::F64, 1.0, 2.0)?])
        },
        &|g, k, i| {
            let k2 = g.fold_in(k, i)?;
            Ok(vec![g.random_normal(k2, &[2], DType::F64, 1.0, 2.0)?])
        },
    );
    assert_eq!(v, l);
    let mut g = Graph::new();
    let key = g.constant(Tensor::scalar(1i64));
    let opts = PforOptions::strict().with_randomness(Randomness::Error);
    let e = pfor_recorded(&mut g, 3, &opts, |g, i| {
        let x = g.cast(i, DType::F64)?;
        let r = g.random_normal(key, &[2], DType::F64, 0.0, 1.0)?;
        Ok(vec![g.add(r, x)?])
    });
    // a random op in the body draws per iteration even without reading i: a policy decision
    assert!(matches!(e.unwrap_err().root(), Error::Unsupported { .. }));
    let e = pfor_recorded(&mut g, 3, &opts, |g, i| {
        let x = g.cast(i, DType::F64)?;
        Ok(vec![g.dropout(x, key, 0.5)?])
    })
    .unwrap_err();
    assert!(matches!(e.root(), Error::Unsupported { .. }), "{e}");
}

#[test]
fn body_random_ops_are_per_iteration_even_after_prune_reuses_node_ids() {
    // `prune` frees node slots that petgraph reuses for the traced body: the driver must
    // still see the body's generators as new (per iteration), not as pre-existing values.
    let mut g = Graph::new();
    let junk: Vec<ValueId> = (0..3).map(|k| g.constant(Tensor::scalar(k as f64))).collect();
    let key = g.constant(Tensor::scalar(7i64));
    // free the slots lowest first, so they are handed out again highest first: the loop
    // index placeholder then gets a HIGHER id than the body's generator.
    for k in 0..junk.len() {
        let mut keep = junk[k + 1..].to_vec();
        keep.push(key);
        assert_eq!(g.prune(&keep).unwrap(), 1);
    }
    let opts = PforOptions::strict().with_randomness(Randomness::Different);
    let out =
        pfor_recorded(&mut g, 4, &opts, |g, _i| Ok(vec![g.random_normal(key, &[3], DType::F64, 0.0, 1.0)?])).unwrap();
    let loop_out = for_loop(&mut g, 4, |g, i| {
        let k2 = g.fold_in(key, i)?;
        Ok(vec![g.random_normal(k2, &[3], DType::F64, 0.0, 1.0)?])
    })
    .unwrap();
    let (v, l) = (eval(&g, &out), eval(&g, &loop_out));
    assert_eq!(v[0], l[0]);
    assert_ne!(v[0].index_axis0(0).unwrap(), v[0].index_axis0(1).unwrap());
}
