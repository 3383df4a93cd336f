//! W9: rows/s of a batch-inference pipeline over a Parquet file of MNIST-shaped rows through
//! W2's CNN with peerlib's weights (`benches/workloads/peerlib.rs`: the same function and the
//! same data as the TF `tf.data` peer, `benches/peers/peer_tfdata.py`), per batch size, in
//! three modes measured in interleaved rounds (one pass over the whole file each):
//! - `pfor pipeline`: the engine ([`Pipeline`]): Parquet read on its feeder thread, rows
//!   decoded and stacked on 2 decode threads, the per-example CNN vectorized once into one
//!   session on the calling thread, a sink that counts rows; prefetch 4 batches and a byte
//!   budget of 4 batches' inputs (`peak_bytes_in_flight` is reported against it);
//! - `loop pipeline`: the same engine and file with the map converted in chunks of one
//!   example (`PforOptions::chunk_size = 1`: a loop of per-example runs inside the session,
//!   TF's `map_fn` with `parallel_iterations = 1`);
//! - `model alone`: the same vectorized session over the same rows already stacked into
//!   batches in memory: the ceiling the pipeline is held to (issue 21: pipeline ≥ 0.9×).
//!
//! Besides rows/s, each mode's CPU time over wall time (`cores busy`, from
//! `/proc/self/stat`) and the share of the machine other processes used while W9 ran
//! (`/proc/stat`) are printed: on a loaded machine the ratios mean more than the rates.
//!
//! The dataset, `$W9_DIR` (default `target/w9`) `/mnist_rows_<rows>.parquet` with `$W9_ROWS`
//! rows (default 16384, `--quick` 4096), is written once (an `id` column and an `image`
//! column of `FixedSizeList<Float32, 784>`: peerlib's `mnist(rows, 900)` images) and checked
//! against those values on every run, whichever side wrote it.
//!
//! Without the `parquet` feature W9 prints the command that enables it: a W9 over raw
//! arrays would not measure the Parquet pipeline it is about.

/// The batch sizes.
const BATCHES: [usize; 2] = [128, 512];

#[cfg(not(feature = "parquet"))]
pub(crate) fn w9_table(a: &crate::Args) -> pfor::Result<()> {
    println!("\n### W9 batch pipeline over Parquet\n");
    println!(
        "W9 reads Parquet and needs the `parquet` feature: \
         `cargo run --release --features parquet --example bench_report -- {}--only W9`",
        if a.quick { "--quick " } else { "" }
    );
    a.progress.inc(BATCHES.len() as u64);
    Ok(())
}

#[cfg(feature = "parquet")]
pub(crate) use with_parquet::w9_table;

#[cfg(feature = "parquet")]
mod with_parquet {
    use std::path::{Path, PathBuf};
    use std::time::Instant;

    use pfor::api::pipeline::arrow::{record_batch_to_tensors, tensors_to_record_batch};
    use pfor::api::pipeline::parquet::{ParquetSink, parquet_batches, parquet_rows};
    use pfor::api::{Pipeline, PipelineConfig, PipelineStats, vectorized_map};
    use pfor::prelude::*;
    use pfor::vectorize::PforOptions;

    use super::BATCHES;
    use crate::peers::{best, cell, ratio};
    use crate::workloads::{MnistParams, mnist_image_logits, peerlib};

    /// The peers' `workload` column.
    const WORKLOAD: &str = "W9_parquet_pipeline";
    /// peerlib's seed of the W9 images.
    const SEED: u32 = 900;
    /// Rows per Parquet record batch, written and read (the peer reads with the same).
    const CHUNK: usize = 2048;
    const IMAGE: usize = 784;

    fn err(msg: String) -> Error {
        Error::InvalidArgument(format!("W9: {msg}"))
    }

    /// The dataset file of `rows` rows: reused when it holds peerlib's images, else written.
    fn dataset(rows: usize, images: &Tensor) -> Result<PathBuf> {
        let dir = std::env::var_os("W9_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("w9"));
        let path = dir.join(format!("mnist_rows_{rows}.parquet"));
        if path.exists() {
            if read_images(&path, rows).is_ok_and(|t| &t == images) {
                return Ok(path);
            }
            println!("W9: {} does not hold peerlib's mnist({rows}, {SEED}) images: written again", path.display());
        }
        std::fs::create_dir_all(&dir).map_err(|e| err(format!("{}: {e}", dir.display())))?;
        // written under another name and renamed: a reader never sees half a file
        let tmp = path.with_extension("parquet.tmp");
        let mut sink = ParquetSink::create(&tmp, &[])?;
        let flat = images.reshape(&[rows, IMAGE])?;
        for start in (0..rows).step_by(CHUNK) {
            let end = (start + CHUNK).min(rows);
            let id = Tensor::from_vec(&[end - start], (start as i64..end as i64).collect())?;
            let cols = vec![("id".to_string(), id), ("image".to_string(), flat.slice_axis0(start, end)?)];
            sink.write_batch(&tensors_to_record_batch(cols)?)?;
        }
        sink.finish()?;
        std::fs::rename(&tmp, &path).map_err(|e| err(format!("{}: {e}", path.display())))?;
        Ok(path)
    }

    /// The `image` column of `path` as `[rows, 28, 28, 1]`.
    fn read_images(path: &Path, rows: usize) -> Result<Tensor> {
        let mut v = Vec::with_capacity(rows * IMAGE);
        for b in parquet_batches(path, &["image"], CHUNK)? {
            v.extend(record_batch_to_tensors(b?, &["image"])?.remove(0).to_vec::<f32>()?);
        }
        Tensor::from_vec(&[v.len() / IMAGE, 28, 28, 1], v)
    }

    /// The per-example CNN with peerlib's weights.
    fn body(params: &[Tensor]) -> impl Fn(&mut Graph, &[ValueId]) -> Result<Vec<ValueId>> + '_ {
        move |g, x| {
            let p = MnistParams { values: params.iter().map(|t| g.constant(t.clone())).collect() };
            Ok(vec![mnist_image_logits(g, &p, x[0])?])
        }
    }

    /// CPU ticks (1/100 s, Linux's USER_HZ): (all CPUs busy, this process); `None` off Linux.
    fn ticks() -> Option<(f64, f64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let v: Vec<f64> =
            stat.lines().next()?.split_whitespace().skip(1).take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        // the fields after the command name: state is field 3, utime 14, stime 15
        let f: Vec<&str> = own.rsplit_once(')')?.1.split_whitespace().collect();
        let cpu = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
        Some((v.get(..8)?.iter().enumerate().filter(|(k, _)| ![3, 4].contains(k)).map(|(_, x)| x).sum(), cpu))
    }

    /// Wall seconds and this process's CPU seconds of `f`.
    fn timed(f: impl FnOnce() -> Result<()>) -> Result<(f64, f64)> {
        let (c0, t) = (ticks().map_or(0.0, |t| t.1), Instant::now());
        f()?;
        let wall = t.elapsed().as_secs_f64();
        Ok((wall, (ticks().map_or(0.0, |t| t.1) - c0) / 100.0))
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    /// One pass of a pipeline over the file; the first row's logits go to `first`.
    fn pipeline_pass(p: &mut Pipeline, path: &Path, first: &mut Option<Tensor>) -> Result<PipelineStats> {
        let decode = |row: Vec<Tensor>| Ok(vec![row[0].reshape(&[28, 28, 1])?]);
        p.run(parquet_rows(path, &["image"], CHUNK)?, decode, |b| {
            if b.batch == 0 {
                *first = Some(b.outputs[0].index_axis0(0)?);
            }
            Ok(())
        })
    }

    pub(crate) fn w9_table(a: &crate::Args) -> Result<()> {
        let rows =
            std::env::var("W9_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(if a.quick { 4096 } else { 16384 });
        let rounds = if a.quick { 3 } else { 5 };
        let params = peerlib::cnn_params()?;
        let images = peerlib::mnist_images(rows, SEED)?;
        let path = dataset(rows, &images)?;
        println!(
            "\n### W9 batch pipeline over Parquet, MNIST CNN (rows/s over {rows} rows; cores busy = CPU s / wall s)\n"
        );
        println!(
            "file: {}; median of {rounds} interleaved passes per mode after one warm-up pass each\n",
            path.display()
        );
        println!(
            "| batch | pfor pipeline | loop pipeline | model alone | pipeline/model | pfor/loop | TF map→batch | \
             TF batch→vectorized_map | pfor/best TF | cores busy: pipeline, model | peak in flight / budget MB | peak MB |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        let (mut first_logits, load0) = (None, ticks());
        let wall0 = Instant::now();
        for b in BATCHES {
            let row = a.row("W9", b);
            let types = [TensorType::new(DType::F32, [28, 28, 1])];
            let budget = 4 * b * IMAGE * 4;
            let config = |options: PforOptions| {
                PipelineConfig::new(b).decode_threads(2).prefetch(4).max_bytes_in_flight(budget).options(options)
            };
            let mut pipe = Pipeline::new(&types, config(PforOptions::default()), body(&params))?;
            let mut looped = Pipeline::new(&types, config(PforOptions::default().with_chunk_size(1)), body(&params))?;
            let mut g = Graph::new();
            let x = g.input("x", DType::F32, [Dim::dynamic("batch"), Dim::fixed(28), Dim::fixed(28), Dim::fixed(1)]);
            let out = vectorized_map(&mut g, body(&params), &[x])?;
            let mut model = Session::new(&g, &out)?;
            let batches: Vec<Tensor> = (0..rows)
                .step_by(b)
                .map(|s| {
                    let part = images.slice_axis0(s, (s + b).min(rows))?;
                    Tensor::from_vec(part.shape(), part.to_vec::<f32>()?)
                })
                .collect::<Result<_>>()?;
            let mut model_first = None;
            let mut model_pass = || -> Result<()> {
                for t in &batches {
                    let r = model.run(&[(x, t.clone())])?;
                    if model_first.is_none() {
                        model_first = Some(r[0].index_axis0(0)?);
                    }
                }
                Ok(())
            };
            let (mut times, mut cpu) = ([vec![], vec![], vec![]], [0.0; 3]);
            let mut stats = PipelineStats::default();
            let mut pipe_first = None;
            for round in 0..=rounds {
                let m = [
                    timed(|| pipeline_pass(&mut pipe, &path, &mut pipe_first).map(|s| stats = s))?,
                    timed(&mut model_pass)?,
                    timed(|| pipeline_pass(&mut looped, &path, &mut None).map(drop))?,
                ];
                for (k, (wall, c)) in m.into_iter().enumerate().filter(|_| round > 0) {
                    times[k].push(wall);
                    cpu[k] += c;
                }
                a.progress.set_message(format!("W9 batch {b}: round {round}/{rounds}"));
            }
            let (p, m) = (pipe_first.as_ref(), model_first.as_ref());
            if !p.zip(m).is_some_and(|(p, m)| p.allclose(m, 1e-4, 1e-4)) {
                return Err(err(format!("batch {b}: the pipeline's first row {p:?} is not the model's {m:?}")));
            }
            first_logits = pipe_first;
            drop((pipe, looped, model, batches));
            let peak = row.end(a);
            let busy: Vec<f64> = (0..3).map(|k| cpu[k] / times[k].iter().sum::<f64>()).collect();
            let r = times.map(|t| Some(rows as f64 / median(t)));
            let tf = ["map_batch", "batch_vectorized_map"].map(|mode| a.peers.get("tfdata", WORKLOAD, mode, b));
            println!(
                "| {b} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2}, {:.2} | {:.1} / {:.1} | {} |",
                cell(r[0], 0),
                cell(r[2], 0),
                cell(r[1], 0),
                ratio(r[0], r[1]),
                ratio(r[0], r[2]),
                cell(tf[0], 0),
                cell(tf[1], 0),
                ratio(r[0], best(&tf)),
                busy[0],
                busy[1],
                stats.peak_bytes_in_flight as f64 / 1e6,
                budget as f64 / 1e6,
                peak
            );
            eprintln!(
                "W9 batch {b}: last pipeline pass {:.2} s: read {:.2} s, decode {:.2} s (2 threads), model {:.2} s, \
                 waiting for input {:.2} s",
                stats.wall_seconds, stats.read_seconds, stats.decode_seconds, stats.model_seconds, stats.wait_seconds
            );
        }
        if let (Some((b0, o0)), Some((b1, o1))) = (load0, ticks()) {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            let foreign = ((b1 - b0) - (o1 - o0)).max(0.0) / 100.0 / (wall0.elapsed().as_secs_f64() * cores);
            println!("\nmachine load while W9 ran: other processes used {:.0} % of the {cores} cores", foreign * 100.0);
        }
        if let Some(l) = first_logits {
            let v: Vec<String> = l.to_vec::<f32>()?.iter().map(|x| format!("{x:.4}")).collect();
            println!("row 0's logits (the peer's checks_tfdata.txt has its own): [{}]", v.join(", "));
        }
        Ok(())
    }
}
