//! SQL over Parquet with a pfor model as a DataFusion scalar UDF:
//! `SELECT id, predict(features) FROM data`.
//!
//! Writes a synthetic MNIST-shaped dataset (`files` Parquet files, each `rows / files` rows of
//! an `id` and a `features` column of `FixedSizeList<Float32, 784>`), defines a per-example
//! MLP (784 → 256 → 10 logits), *serializes* it (`Function::to_bytes`: the bytes are what
//! defines the UDF, so they could be shipped to other processes), registers
//! `PforUdf::from_bytes("predict", ..)` with DataFusion and runs the query with 1 and then 2
//! target partitions (one vectorized session call per record batch; partitions in
//! parallel), printing rows/s for each.
//!
//! The verdict compares every prediction of the query with the single-machine pipeline
//! (`pfor::api::pipeline` over the same files); the process exits non-zero on a mismatch.
//!
//! Run with `cargo run --release --features datafusion --example sql_predict
//! [-- --rows N --files F --batch B --dir DIR]`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use datafusion::execution::context::SessionContext;
use datafusion::prelude::{ParquetReadOptions, SessionConfig};
use pfor::api::pipeline;
use pfor::api::pipeline::arrow::tensors_to_record_batch;
use pfor::api::pipeline::parquet::{ParquetSink, parquet_rows};
use pfor::api::pipeline::sql::PforUdf;
use pfor::prelude::*;
use pfor::tensor::Verdict;
use pfor::vectorize::PforOptions;

/// The per-example MLP: 784 features → 10 logits.
fn mlp(g: &mut Graph, x: &[ValueId]) -> Result<Vec<ValueId>> {
    let w1 = g.constant(Tensor::from_array(Tensor::randn(&[784, 256], 1)?.to_array::<f32>()? * (1.0 / 28.0)));
    let b1 = g.constant(Tensor::randn(&[256], 2)?);
    let w2 = g.constant(Tensor::from_array(Tensor::randn(&[256, 10], 3)?.to_array::<f32>()? * (1.0 / 16.0)));
    let b2 = g.constant(Tensor::randn(&[10], 4)?);
    let h = g.reshape(x[0], &[1, 784])?;
    let h = g.matmul(h, w1)?;
    let h = g.bias_add(h, b1)?;
    let h = g.relu(h)?;
    let h = g.matmul(h, w2)?;
    let h = g.bias_add(h, b2)?;
    Ok(vec![g.reshape(h, &[10])?])
}

struct Args {
    rows: usize,
    files: usize,
    batch: usize,
    dir: PathBuf,
}

fn args() -> Result<Args> {
    let mut a = Args { rows: 40_000, files: 2, batch: 1024, dir: std::env::temp_dir().join("pfor-sql-predict") };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let bad = || Error::InvalidArgument(format!("sql_predict: bad arguments {pair:?}"));
        let v = pair.get(1).ok_or_else(bad)?;
        let num = || v.parse::<usize>().map_err(|_| bad());
        match pair[0].as_str() {
            "--rows" => a.rows = num()?,
            "--files" => a.files = num()?,
            "--batch" => a.batch = num()?,
            "--dir" => a.dir = PathBuf::from(v),
            _ => return Err(bad()),
        }
    }
    if a.files == 0 || a.rows < a.files || a.batch == 0 {
        return Err(Error::InvalidArgument("sql_predict: needs --files >= 1, --rows >= files, --batch >= 1".into()));
    }
    Ok(a)
}

fn df(e: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("sql_predict: DataFusion: {e}"))
}

/// File `f` of the dataset: rows `[start, start + n)`.
fn write_file(path: &PathBuf, start: usize, n: usize, seed: u64) -> Result<()> {
    let mut sink = ParquetSink::create(path, &[])?;
    for (k, s) in (0..n).step_by(4096).enumerate() {
        let m = 4096.min(n - s);
        let x = Tensor::rand_uniform(DType::F32, &[m, 784], 0.0, 1.0, seed * 1000 + k as u64)?;
        let id = Tensor::from_vec(&[m], ((start + s) as i64..(start + s + m) as i64).collect())?;
        sink.write_batch(&tensors_to_record_batch(vec![("id".into(), id), ("features".into(), x)])?)?;
    }
    sink.finish()?;
    Ok(())
}

/// The query's predictions ordered by id, as one tensor per row.
fn by_id(batches: &[RecordBatch], rows: usize) -> Result<Vec<Tensor>> {
    let mut out = vec![None; rows];
    for b in batches {
        let ids = b.column(0).as_primitive::<Int64Type>();
        let p = b.column(1).as_fixed_size_list();
        for r in 0..b.num_rows() {
            let id = usize::try_from(ids.value(r)).map_err(df)?;
            let v = p.value(r).as_primitive::<Float32Type>().values().to_vec();
            *out.get_mut(id).ok_or_else(|| df(format!("id {id} out of range")))? = Some(Tensor::from_vec(&[10], v)?);
        }
    }
    out.into_iter().enumerate().map(|(i, t)| t.ok_or_else(|| df(format!("no prediction for id {i}")))).collect()
}

fn main() -> Result<()> {
    let a = args()?;
    std::fs::create_dir_all(&a.dir).map_err(|e| Error::InvalidArgument(format!("{}: {e}", a.dir.display())))?;
    let per_file = a.rows.div_ceil(a.files);
    let mut paths = Vec::new();
    let t = Instant::now();
    for f in 0..a.files {
        let start = f * per_file;
        let n = per_file.min(a.rows - start.min(a.rows));
        let path = a.dir.join(format!("part-{f}.parquet"));
        write_file(&path, start, n, f as u64 + 1)?;
        paths.push((path, n));
    }
    println!(
        "wrote {} rows of 784 f32 in {} files to {} in {:.2} s",
        a.rows,
        a.files,
        a.dir.display(),
        t.elapsed().as_secs_f64()
    );

    // the UDF is defined by the serialized per-example function
    let features = [TensorType::new(DType::F32, [784])];
    let bytes = Function::build(&Graph::new(), &features, mlp)?.to_bytes()?;
    let t = Instant::now();
    let udf = Arc::new(PforUdf::from_bytes("predict", &bytes)?);
    println!("UDF 'predict' from {} serialized bytes, vectorized in {:.2} s", bytes.len(), t.elapsed().as_secs_f64());

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(df)?;
    let (mut results, mut rates) = (Vec::new(), Vec::new());
    for partitions in [1, 2] {
        let config = SessionConfig::new().with_target_partitions(partitions).with_batch_size(a.batch);
        let ctx = SessionContext::new_with_config(config);
        ctx.register_udf(datafusion::logical_expr::ScalarUDF::new_from_shared_impl(udf.clone()));
        let dir = a.dir.to_str().ok_or_else(|| df("the directory is not UTF-8"))?.to_string();
        let run = async {
            ctx.register_parquet("data", &dir, ParquetReadOptions::default()).await?;
            let query = ctx.sql("SELECT id, predict(features) AS logits FROM data").await?;
            // warm-up (compiles the partitions' sessions), then the timed run
            query.clone().collect().await?;
            let t = Instant::now();
            let batches = query.collect().await?;
            Ok::<_, datafusion::error::DataFusionError>((batches, t.elapsed().as_secs_f64()))
        };
        let (batches, secs) = rt.block_on(run).map_err(df)?;
        println!("{partitions} partition(s): {} rows in {secs:.3} s, {:.0} rows/s", a.rows, a.rows as f64 / secs);
        rates.push(a.rows as f64 / secs);
        results.push(by_id(&batches, a.rows)?);
    }
    println!("2 partitions vs 1: {:.2}x rows/s", rates[1] / rates[0]);

    // the verdict: every prediction of both runs vs the single-machine pipeline
    let t = Instant::now();
    let mut want = Vec::with_capacity(a.rows);
    for (path, _) in &paths {
        let examples = parquet_rows(path, &["features"], 4096)?.collect::<Result<Vec<_>>>()?;
        for b in pipeline(examples, a.batch, &features, &PforOptions::default(), mlp)? {
            let y = b?.remove(0);
            for r in 0..y.shape()[0] {
                want.push(y.index_axis0(r)?);
            }
        }
    }
    println!("the single-machine pipeline over the same files: {:.2} s", t.elapsed().as_secs_f64());
    let got: Vec<Tensor> = results.concat();
    let want2: Vec<Tensor> = want.iter().chain(&want).cloned().collect();
    let verdict = Verdict::compare(&got, &want2, 1e-4);
    println!("{} rows x 2 runs vs the pipeline:", a.rows);
    println!("{verdict}");
    verdict.into_result()
}
