//! The pipeline engine (`Pipeline`): results equal the per-example loop, deterministic order
//! under parallel decoding, the byte budget, the per-record error policy, cancellation, the
//! stats, a partial last batch and an empty source.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::time::Duration;

use pfor::api::{BatchOutput, ErrorPolicy, Pipeline, PipelineConfig};
use pfor::prelude::*;

const D: usize = 8;

fn types() -> [TensorType; 1] {
    [TensorType::new(DType::F32, [D])]
}

/// One example: `relu(x @ W)` then its sum with the squares of `x`: a matmul, an
/// elementwise op and a reduction, so that the batched run is a real vectorized graph.
fn body(g: &mut Graph, x: &[ValueId]) -> Result<Vec<ValueId>> {
    let w = g.constant(Tensor::randn(&[D, 3], 7)?);
    let xi = g.expand_dims(x[0], 0)?;
    let h = g.matmul(xi, w)?;
    let h = g.relu(h)?;
    let h = g.reshape(h, &[3])?;
    let sq = g.mul(x[0], x[0])?;
    Ok(vec![h, g.sum_all(sq)?])
}

fn example(k: usize) -> Tensor {
    Tensor::randn(&[D], 100 + k as u64).unwrap()
}

/// The per-example loop: `body` compiled unbatched and run once per example.
fn per_example(k: usize) -> Vec<Tensor> {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [D]);
    let out = body(&mut g, &[x]).unwrap();
    Session::new(&g, &out).unwrap().run(&[(x, example(k))]).unwrap()
}

/// Rows of a batch's outputs, keyed by record index.
fn rows(b: &BatchOutput) -> Vec<(usize, Vec<Tensor>)> {
    b.records
        .iter()
        .enumerate()
        .map(|(r, &i)| (i, b.outputs.iter().map(|o| o.index_axis0(r).unwrap()).collect()))
        .collect()
}

fn assert_rows_match_the_loop(got: &[(usize, Vec<Tensor>)]) {
    for (i, outs) in got {
        let want = per_example(*i);
        for (o, w) in outs.iter().zip(&want) {
            assert!(o.allclose(w, 1e-5, 1e-5), "record {i}: {o} vs {w}");
        }
    }
}

fn decode(k: usize) -> Result<Vec<Tensor>> {
    Ok(vec![example(k)])
}

/// A source of record numbers `0..n`.
fn source(n: usize) -> impl Iterator<Item = Result<usize>> + Send {
    (0..n).map(Ok)
}

/// Wait (at most 30 s, so that a broken engine fails instead of hanging) until `done`.
fn wait_for(done: impl Fn() -> bool) -> bool {
    for _ in 0..30_000 {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn results_equal_the_per_example_loop_in_source_order_with_parallel_decode() {
    let cfg = PipelineConfig::new(3).decode_threads(4).prefetch(8);
    let mut p = Pipeline::new(&types(), cfg, body).unwrap();
    // batch 0 finishes decoding only after batch 1 has (record 2 waits for record 5), and
    // other decode times are uneven: batches reach the engine out of order
    let batch1_done = AtomicUsize::new(0);
    let slow_decode = |k: usize| {
        if k == 2 {
            assert!(wait_for(|| batch1_done.load(Ordering::SeqCst) == 1), "batch 1 was never decoded");
        }
        if k % 7 < 3 {
            std::thread::sleep(Duration::from_millis(3));
        }
        let ex = decode(k);
        if k == 5 {
            batch1_done.store(1, Ordering::SeqCst);
        }
        ex
    };
    let mut got = Vec::new();
    let mut batches = Vec::new();
    let stats = p
        .run(source(31), slow_decode, |b| {
            batches.push((b.batch, b.records.len()));
            got.extend(rows(&b));
            Ok(())
        })
        .unwrap();
    assert_eq!(got.iter().map(|(i, _)| *i).collect::<Vec<_>>(), (0..31).collect::<Vec<_>>());
    assert_rows_match_the_loop(&got);
    // 31 = 10 * 3 + 1: the last, partial batch runs on the same session
    let mut want: Vec<(usize, usize)> = (0..10).map(|b| (b, 3)).collect();
    want.push((10, 1));
    assert_eq!(batches, want);
    assert_eq!((stats.records, stats.rows, stats.batches, stats.skipped), (31, 31, 11, 0));
    assert!(!stats.cancelled);
    assert!(stats.rows_per_second() > 0.0 && stats.model_seconds > 0.0 && stats.decode_seconds > 0.0);
}

#[test]
fn one_engine_runs_several_sources_and_an_empty_one() {
    let mut p = Pipeline::new(&types(), PipelineConfig::new(4), body).unwrap();
    let mut calls = 0;
    let stats = p
        .run(source(0), decode, |_| {
            calls += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!((calls, stats.records, stats.batches, stats.rows), (0, 0, 0, 0));
    let mut got = Vec::new();
    let stats = p
        .run(source(6), decode, |b| {
            got.extend(rows(&b));
            Ok(())
        })
        .unwrap();
    assert_eq!((stats.rows, stats.batches), (6, 2));
    assert_rows_match_the_loop(&got);
}

#[test]
fn the_byte_budget_bounds_the_decoded_records_in_flight() {
    // a record is D f32 = 32 bytes; a batch of 2 is 64 bytes; the budget holds 3 batches
    let record = D * 4;
    let budget = 6 * record;
    let cfg = PipelineConfig::new(2).decode_threads(4).prefetch(32).max_bytes_in_flight(budget);
    let mut p = Pipeline::new(&types(), cfg, body).unwrap();
    let (decoded, sunk, worst) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    let counting_decode = |k: usize| {
        let d = decoded.fetch_add(1, Ordering::SeqCst) + 1;
        worst.fetch_max(d - sunk.load(Ordering::SeqCst), Ordering::SeqCst);
        decode(k)
    };
    let stats = p
        .run(source(60), counting_decode, |b| {
            std::thread::sleep(Duration::from_millis(2)); // a slow sink: the input runs ahead
            sunk.fetch_add(b.records.len(), Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    assert_eq!(stats.rows, 60);
    let worst = worst.load(Ordering::SeqCst);
    assert!(worst * record <= budget, "{worst} records ({} bytes) in flight, budget {budget}", worst * record);
    assert!(stats.peak_bytes_in_flight <= budget && stats.peak_bytes_in_flight >= 2 * record, "{stats:?}");
    // the control: without the budget the same count sees the input run ahead of it
    let mut p = Pipeline::new(&types(), PipelineConfig::new(2).decode_threads(4).prefetch(32), body).unwrap();
    let (decoded, sunk, worst) = (AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0));
    let counting_decode = |k: usize| {
        let d = decoded.fetch_add(1, Ordering::SeqCst) + 1;
        worst.fetch_max(d - sunk.load(Ordering::SeqCst), Ordering::SeqCst);
        decode(k)
    };
    p.run(source(60), counting_decode, |b| {
        if b.batch == 0 {
            assert!(wait_for(|| decoded.load(Ordering::SeqCst) >= 20));
        }
        sunk.fetch_add(b.records.len(), Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    assert!(worst.load(Ordering::SeqCst) * record > budget);
}

#[test]
fn a_byte_budget_needs_fixed_types_and_room_for_one_batch() {
    let e = Pipeline::new(&types(), PipelineConfig::new(4).max_bytes_in_flight(100), body).err().unwrap();
    let msg = e.to_string();
    assert!(msg.contains("128 bytes") && msg.contains("max_bytes_in_flight = 100"), "{msg}");
    let dynamic = [TensorType::new(DType::F32, [Dim::dynamic("n")])];
    let e =
        Pipeline::new(&dynamic, PipelineConfig::new(4).max_bytes_in_flight(1 << 20), |g, x| Ok(vec![g.sum_all(x[0])?]))
            .err()
            .unwrap();
    assert!(e.to_string().contains("fully fixed"), "{e}");
    for cfg in [PipelineConfig::new(0), PipelineConfig::new(2).prefetch(0), PipelineConfig::new(2).decode_threads(0)] {
        assert!(Pipeline::new(&types(), cfg, body).is_err());
    }
}

/// Records 13 and 27 fail: one decode error, one example of the wrong shape.
fn flaky_decode(k: usize) -> Result<Vec<Tensor>> {
    match k {
        13 => Err(Error::InvalidArgument("bad bytes".into())),
        27 => Ok(vec![Tensor::zeros(DType::F32, &[D + 1])?]),
        _ => decode(k),
    }
}

#[test]
fn fail_policy_names_the_first_failing_record_after_the_batches_before_it() {
    let cfg = PipelineConfig::new(4).decode_threads(3);
    let mut p = Pipeline::new(&types(), cfg, body).unwrap();
    let mut sunk = 0;
    let e = p
        .run(source(40), flaky_decode, |b| {
            sunk += b.records.len();
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(e, Error::AtRecord { index: 13, .. }), "{e}");
    assert!(e.to_string().contains("record 13") && e.to_string().contains("bad bytes"), "{e}");
    assert_eq!(sunk, 12, "the batches before record 13's batch reach the sink, none after");
    // a wrong-shaped record is named too
    let e = p.run((14..40).map(Ok), flaky_decode, |_| Ok(())).unwrap_err();
    assert!(matches!(e, Error::AtRecord { index: 13, .. }), "index 13 of this source is record 27: {e}");
    assert!(e.to_string().contains("[9]"), "{e}");
}

#[test]
fn skip_policy_drops_and_counts_failing_records() {
    let cfg = PipelineConfig::new(2).decode_threads(3).errors(ErrorPolicy::Skip);
    let mut p = Pipeline::new(&types(), cfg, body).unwrap();
    // records 4 and 5 form a whole batch that fails (one panics in the decode closure)
    let decode = |k: usize| match k {
        4 => Err(Error::InvalidArgument("bad".into())),
        5 => panic!("a decoder bug"),
        k => flaky_decode(k),
    };
    let mut got = Vec::new();
    let stats = p
        .run(source(30), decode, |b| {
            got.extend(rows(&b));
            Ok(())
        })
        .unwrap();
    assert_eq!((stats.skipped, stats.skipped_records.clone()), (4, vec![4, 5, 13, 27]));
    assert_eq!((stats.records, stats.rows, stats.batches), (30, 26, 14));
    let want: Vec<usize> = (0..30).filter(|k| ![4, 5, 13, 27].contains(k)).collect();
    assert_eq!(got.iter().map(|(i, _)| *i).collect::<Vec<_>>(), want);
    assert_rows_match_the_loop(&got);
}

#[test]
fn a_source_error_stops_the_run_with_its_record_index() {
    let mut p = Pipeline::new(&types(), PipelineConfig::new(4), body).unwrap();
    let src = (0..20).map(|k| if k == 7 { Err(Error::InvalidArgument("disk".into())) } else { Ok(k) });
    let mut sunk = 0;
    let e = p
        .run(src, decode, |b| {
            sunk += b.records.len();
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(e, Error::AtRecord { index: 7, .. }), "{e}");
    assert_eq!(sunk, 7, "the records before the failure are mapped");
}

#[test]
fn cancelling_in_the_sink_stops_before_the_next_batch() {
    let token = CancelToken::new();
    let cfg = PipelineConfig::new(4).cancel(&token).prefetch(8);
    let mut p = Pipeline::new(&types(), cfg, body).unwrap();
    let mut seen = Vec::new();
    let stats = p
        .run(source(100), decode, |b| {
            seen.push(b.batch);
            if b.batch == 2 {
                token.cancel();
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(seen, [0, 1, 2]);
    assert!(stats.cancelled && stats.batches == 3 && stats.rows == 12, "{stats:?}");
}

#[test]
fn cancelling_from_another_thread_stops_within_one_batch() {
    let token = CancelToken::new();
    let cfg = PipelineConfig::new(4).cancel(&token).decode_threads(2).prefetch(3);
    let mut p = Pipeline::new(&types(), cfg, body).unwrap();
    // record 20 (batch 5) cancels while it is decoded: batch 5 is not run
    let decode = |k: usize| {
        if k == 20 {
            token.cancel();
        }
        decode(k)
    };
    let mut seen = Vec::new();
    let stats = p
        .run(source(400), decode, |b| {
            seen.push(b.batch);
            Ok(())
        })
        .unwrap();
    assert!(stats.cancelled);
    assert!(seen.len() <= 5 && seen.iter().copied().eq(0..seen.len()), "{seen:?}");
}

#[test]
fn decoding_overlaps_the_model_and_the_sink() {
    let cfg = PipelineConfig::new(4).decode_threads(1).prefetch(2);
    let mut p = Pipeline::new(&types(), cfg, body).unwrap();
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    let decode = |k: usize| {
        if k == 4 {
            let _ = tx.lock().unwrap().send(()); // batch 1 is being decoded
        }
        decode(k)
    };
    let mut overlapped = None;
    p.run(source(8), decode, |b| {
        if b.batch == 0 {
            // a pipeline that ran its stages one after the other would never get here first
            overlapped = Some(rx.recv_timeout(Duration::from_secs(30)).is_ok());
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(overlapped, Some(true));
}

#[test]
fn progress_is_reported_after_every_batch() {
    let mut p = Pipeline::new(&types(), PipelineConfig::new(5), body).unwrap();
    let mut seen = Vec::new();
    let stats = p.run_with_progress(source(12), decode, |_| Ok(()), |s| seen.push((s.batches, s.rows))).unwrap();
    assert_eq!(seen, [(1, 5), (2, 10), (3, 12)]);
    assert_eq!(stats.batches, 3);
}

#[test]
fn model_and_sink_errors_stop_the_run() {
    let mut p = Pipeline::new(&types(), PipelineConfig::new(4), body).unwrap();
    let e =
        p.run(source(10), decode, |b| if b.batch == 1 { Err(Error::InvalidArgument("full".into())) } else { Ok(()) });
    assert!(e.unwrap_err().to_string().contains("full"));
}
