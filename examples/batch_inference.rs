//! Batch inference from Parquet to Parquet with the pipeline engine (`pfor::api::Pipeline`):
//! writes a synthetic MNIST-shaped dataset (an `image` column of `FixedSizeList<Float32, 784>`
//! and an `id` column), runs the MNIST CNN of the benchmarks' W2 *per example* — vectorized
//! once by `pfor` and compiled into one session for every batch size — over the file with
//! parallel decoding, a bounded prefetch and a progress bar, and writes the predictions
//! (`record`, `logits`, `class`) to another Parquet file.
//!
//! The verdict compares a sample of the written predictions with the per-example loop (the
//! unbatched CNN run on each sampled image read back from the input file); the process
//! exits non-zero on a mismatch.
//!
//! Self-contained (as every example): the CNN is written out here as in `per_example_grads`.
//!
//! Run with `cargo run --release --features parquet --example batch_inference
//! [-- --rows N --batch B --decode-threads T --check K --dir DIR]`.

use std::path::PathBuf;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use pfor::api::pipeline::arrow::{record_batch_to_tensors, tensors_to_record_batch};
use pfor::api::pipeline::parquet::{ParquetSink, parquet_batches, parquet_rows};
use pfor::api::{Pipeline, PipelineConfig};
use pfor::prelude::*;
use pfor::tensor::Verdict;

const SHAPES: [&[usize]; 8] =
    [&[5, 5, 1, 32], &[32], &[5, 5, 32, 64], &[64], &[3136, 1024], &[1024], &[1024, 10], &[10]];

fn params(g: &mut Graph) -> Result<Vec<ValueId>> {
    SHAPES
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let fan_in: usize = if s.len() > 1 { s[..s.len() - 1].iter().product() } else { 100 };
            let w = Tensor::randn(s, 10 + k as u64)?.to_array::<f32>()? * (1.0 / (fan_in as f32).sqrt());
            Ok(g.constant(Tensor::from_array(w)))
        })
        .collect()
}

/// The CNN on one image `[28, 28, 1]`: logits `[10]` and the predicted class.
fn predict(g: &mut Graph, x: &[ValueId]) -> Result<Vec<ValueId>> {
    let p = params(g)?;
    let same = Conv2dParams { padding: Padding::Same, ..Conv2dParams::default() };
    let mut h = g.expand_dims(x[0], 0)?;
    for k in 0..2 {
        h = g.conv2d(h, p[2 * k], same)?;
        h = g.bias_add(h, p[2 * k + 1])?;
        h = g.relu(h)?;
        h = g.max_pool(h, [2, 2], [2, 2], Padding::Valid)?;
    }
    let h = g.reshape(h, &[-1, 3136])?;
    let h = g.matmul(h, p[4])?;
    let h = g.bias_add(h, p[5])?;
    let h = g.relu(h)?;
    let h = g.matmul(h, p[6])?;
    let h = g.bias_add(h, p[7])?;
    let logits = g.reshape(h, &[10])?;
    Ok(vec![logits, g.argmax(logits, 0)?])
}

struct Args {
    rows: usize,
    batch: usize,
    decode_threads: usize,
    check: usize,
    dir: PathBuf,
}

fn args() -> Result<Args> {
    let mut a = Args {
        rows: 50_000,
        batch: 256,
        decode_threads: 2,
        check: 32,
        dir: std::env::temp_dir().join("pfor-batch-inference"),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let bad = || Error::InvalidArgument(format!("batch_inference: bad arguments {pair:?}"));
        let v = pair.get(1).ok_or_else(bad)?;
        let num = || v.parse::<usize>().map_err(|_| bad());
        match pair[0].as_str() {
            "--rows" => a.rows = num()?,
            "--batch" => a.batch = num()?,
            "--decode-threads" => a.decode_threads = num()?,
            "--check" => a.check = num()?,
            "--dir" => a.dir = PathBuf::from(v),
            _ => return Err(bad()),
        }
    }
    Ok(a)
}

/// The synthetic dataset: `rows` images of uniform noise in chunks of 4096 rows.
fn write_dataset(path: &PathBuf, rows: usize) -> Result<()> {
    let mut sink = ParquetSink::create(path, &[])?;
    for (k, start) in (0..rows).step_by(4096).enumerate() {
        let n = 4096.min(rows - start);
        let image = Tensor::rand_uniform(DType::F32, &[n, 784], 0.0, 1.0, 1000 + k as u64)?;
        let id = Tensor::from_vec(&[n], (start as i64..(start + n) as i64).collect())?;
        sink.write_batch(&tensors_to_record_batch(vec![("id".into(), id), ("image".into(), image)])?)?;
    }
    sink.finish()?;
    Ok(())
}

/// Rows `which` (sorted) of column `name` of `path`, each with axis 0 removed.
fn read_rows(path: &PathBuf, name: &str, which: &[usize]) -> Result<Vec<Tensor>> {
    let (mut out, mut base) = (Vec::new(), 0);
    for b in parquet_batches(path, &[name], 4096)? {
        let t = record_batch_to_tensors(b?, &[name])?.remove(0);
        let n = t.shape()[0];
        for &i in which.iter().filter(|&&i| i >= base && i < base + n) {
            out.push(t.index_axis0(i - base)?);
        }
        base += n;
    }
    Ok(out)
}

fn main() -> Result<()> {
    let a = args()?;
    std::fs::create_dir_all(&a.dir).map_err(|e| Error::InvalidArgument(format!("{}: {e}", a.dir.display())))?;
    let (input, output) = (a.dir.join("images.parquet"), a.dir.join("predictions.parquet"));

    let t = Instant::now();
    write_dataset(&input, a.rows)?;
    println!("wrote {} rows of 784 f32 to {} in {:.2} s", a.rows, input.display(), t.elapsed().as_secs_f64());

    let image = [TensorType::new(DType::F32, [28, 28, 1])];
    let config = PipelineConfig::new(a.batch).decode_threads(a.decode_threads).prefetch(2 * a.decode_threads + 2);
    let t = Instant::now();
    let mut pipeline = Pipeline::new(&image, config, predict)?;
    println!("vectorized and compiled the per-example CNN once in {:.2} s", t.elapsed().as_secs_f64());

    let bar = ProgressBar::new(a.rows as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} rows {per_sec} eta {eta}")
            .map_err(|e| Error::InvalidArgument(e.to_string()))?,
    );
    let mut sink = ParquetSink::create(&output, &["logits", "class"])?;
    let source = parquet_rows(&input, &["image"], 2048)?;
    // decoding (on the decode threads): the 784 values of a row as an image
    let decode = |row: Vec<Tensor>| Ok(vec![row[0].reshape(&[28, 28, 1])?]);
    let stats =
        pipeline.run_with_progress(source, decode, |b| sink.write_output(b), |s| bar.set_position(s.records as u64))?;
    bar.finish();
    sink.finish()?;
    println!(
        "{} rows in {} batches: {:.0} rows/s ({:.2} s wall: read {:.2} s, decode {:.2} s over {} threads, model {:.2} s, \
         sink {:.2} s, waiting for input {:.2} s); predictions in {}",
        stats.rows,
        stats.batches,
        stats.rows_per_second(),
        stats.wall_seconds,
        stats.read_seconds,
        stats.decode_seconds,
        a.decode_threads,
        stats.model_seconds,
        stats.sink_seconds,
        stats.wait_seconds,
        output.display()
    );

    // the verdict: a sample of the written predictions vs the per-example loop
    let step = (a.rows / a.check.max(1)).max(1);
    let sample: Vec<usize> = (0..a.rows).step_by(step).take(a.check).collect();
    let images = read_rows(&input, "image", &sample)?;
    let written = read_rows(&output, "logits", &sample)?;
    let records = read_rows(&output, "record", &sample)?;
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [28, 28, 1]);
    let out = predict(&mut g, &[x])?;
    let mut one = Session::new(&g, &out)?;
    let mut want = Vec::with_capacity(sample.len());
    for ((i, img), r) in sample.iter().zip(&images).zip(&records) {
        want.push(one.run(&[(x, img.reshape(&[28, 28, 1])?)])?.remove(0));
        if r.scalar_i64()? != *i as i64 {
            return Err(Error::InvalidArgument(format!("batch_inference: row {i} of the predictions is record {r}")));
        }
    }
    let verdict = Verdict::compare(&written, &want, 1e-3);
    println!("{} of {} sampled rows checked against the per-example loop", sample.len(), a.rows);
    println!("{verdict}");
    verdict.into_result()
}
