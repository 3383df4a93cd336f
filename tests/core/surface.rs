//! The API as a user writes it with nothing but the prelude: batched matmul of any rank
//! under `pfor`, `vectorized_map` and `gradients`, split by count, all-axes reductions,
//! squeeze, outputs by fetch, each one call (issue 20's "conformance adapter" cases).

use crate::common::assert_close;
use pfor::prelude::*;

#[test]
fn batched_matmul_under_vectorized_map_and_gradients_is_one_call_each() -> Result<()> {
    // per example: x_i [2, 3] · w [3] (a rank-1 rhs) -> [2]; under vectorized_map -> [4, 2]
    let mut g = Graph::new();
    let xs = g.constant(Tensor::randn_f64(&[4, 2, 3], 0)?);
    let w = g.input("w", DType::F64, [3]);
    let ys = vectorized_map(&mut g, |g, x| Ok(vec![g.matmul(x[0], w)?]), &[xs])?;
    let direct = g.matmul(xs, w)?; // the same without the map: [4, 2, 3] · [3]
    let loss = g.sum_all(ys[0])?;
    let dw = gradients(&mut g, &[loss], &[w], None)?;
    let jac = jacobian(&mut g, direct, w)?; // [4, 2, 3]: d(x w)/dw = x
    let wv = Tensor::randn_f64(&[3], 1)?;
    let mut sess = Session::named(&g, &[("ys", ys[0]), ("direct", direct), ("dw", dw[0]), ("jac", jac)])?;
    let out = sess.run_fetched(&[(w, wv)])?;
    assert_close(out.by_name("ys")?, out.by_name("direct")?, 1e-12);
    // d/dw sum(x w) = the sum of the rows of every x_i
    let xv = Tensor::randn_f64(&[4, 2, 3], 0)?.to_f64_vec();
    let want: Vec<f64> = (0..3).map(|k| xv.iter().skip(k).step_by(3).sum()).collect();
    assert_close(out.by_name("dw")?, &Tensor::from_vec(&[3], want)?, 1e-12);
    assert_close(out.by_name("jac")?, &Tensor::randn_f64(&[4, 2, 3], 0)?, 0.0);
    Ok(())
}

#[test]
fn matmul_of_any_rank_inside_pfor() -> Result<()> {
    // a batch of [3] vectors times a batch of [5, 3, 2] stacks: pfor over the 4 pairs
    let mut g = Graph::new();
    let v = g.constant(Tensor::randn_f64(&[4, 3], 2)?);
    let m = g.constant(Tensor::randn_f64(&[4, 5, 3, 2], 3)?);
    let out = pfor(&mut g, 4, |g, i| {
        let (vi, mi) = (g.gather(v, i, 0)?, g.gather(m, i, 0)?);
        Ok(vec![g.matmul(vi, mi)?]) // [3] · [5, 3, 2] -> [5, 2]
    })?;
    let looped = for_loop(&mut g, 4, |g, i| {
        let (vi, mi) = (g.gather(v, i, 0)?, g.gather(m, i, 0)?);
        Ok(vec![g.matmul(vi, mi)?])
    })?;
    let r = run_once(&g, &[out[0], looped[0]], &[])?;
    assert_eq!(r[0].shape(), &[4, 5, 2]);
    assert_close(&r[0], &r[1], 1e-12);
    Ok(())
}

#[test]
fn split_reduce_squeeze_are_one_call_each() -> Result<()> {
    let mut g = Graph::new();
    let x = g.constant(Tensor::arange(12)?.reshape(&[1, 12, 1])?.cast(DType::F64));
    let parts = g.split_count(x, 1, 3)?; // three [1, 4, 1]
    let biggest = g.reduce_max(parts[2], None, false)?; // every axis: a scalar
    let flat = g.squeeze(parts[0], None)?; // every size-1 axis: [4]
    let kept = g.squeeze(parts[0], Some(&[]))?; // none: [1, 4, 1]
    let r = run_once(&g, &[biggest, flat, kept], &[])?;
    assert_eq!(r[0], Tensor::scalar(11.0f64));
    assert_eq!(r[1], Tensor::from_vec(&[4], vec![0.0f64, 1.0, 2.0, 3.0])?);
    assert_eq!(r[2].shape(), &[1, 4, 1]);
    Ok(())
}
