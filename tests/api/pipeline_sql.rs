//! The DataFusion scalar UDF (`pfor::api::pipeline::sql`, feature `datafusion`): a
//! serialized per-example function run by SQL over a Parquet dataset in two partitions,
//! checked against the single-machine pipeline over the same files; argument checks, bad
//! functions, equal-length `List` columns. The helpers are shared with `pipeline_ballista`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float32Array, ListArray, RecordBatch};
use arrow_buffer::OffsetBuffer;
use arrow_schema::Field;
use datafusion::execution::context::SessionContext;
use datafusion::physical_plan::{ExecutionPlanProperties, collect};
use datafusion::prelude::{ParquetReadOptions, SessionConfig};
use pfor::api::pipeline;
use pfor::api::pipeline::arrow::{array_to_tensor, tensors_to_record_batch};
use pfor::api::pipeline::parquet::{ParquetSink, parquet_rows};
use pfor::api::pipeline::sql::PforUdf;
use pfor::prelude::*;
use pfor::vectorize::PforOptions;

/// Features per row (stored flat; the function takes them as `[2, 4]`).
pub(crate) const D: usize = 8;

/// The per-example model: `[2, 4]` features → 3 scores.
pub(crate) fn body(g: &mut Graph, x: &[ValueId]) -> Result<Vec<ValueId>> {
    let w = g.constant(Tensor::randn(&[D, 3], 21)?);
    let b = g.constant(Tensor::randn(&[3], 22)?);
    let xi = g.reshape(x[0], &[1, D as i64])?;
    let h = g.matmul(xi, w)?;
    let h = g.bias_add(h, b)?;
    let h = g.tanh(h)?;
    Ok(vec![g.reshape(h, &[3])?])
}

pub(crate) fn param_types() -> [TensorType; 1] {
    [TensorType::new(DType::F32, [2, 4])]
}

/// The serialized per-example function (what defines the UDF).
pub(crate) fn function_bytes() -> Vec<u8> {
    Function::build(&Graph::new(), &param_types(), body).unwrap().to_bytes().unwrap()
}

/// A fresh directory holding `files` Parquet files of `rows` rows each: an `id` column
/// (i64, global row number) and `features` (`FixedSizeList<Float32, D>`).
pub(crate) fn write_dataset(name: &str, files: usize, rows: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pfor-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in 0..files {
        let x = Tensor::randn(&[rows, D], 40 + f as u64).unwrap();
        let ids = Tensor::from_vec(&[rows], ((f * rows) as i64..((f + 1) * rows) as i64).collect()).unwrap();
        let mut sink = ParquetSink::create(dir.join(format!("part-{f}.parquet")), &[]).unwrap();
        sink.write_batch(&tensors_to_record_batch(vec![("id".into(), ids), ("features".into(), x)]).unwrap()).unwrap();
        assert_eq!(sink.finish().unwrap(), rows);
    }
    dir
}

/// The single-machine pipeline's predictions over every file of `dir`, by id.
pub(crate) fn pipeline_predictions(dir: &Path, files: usize, rows: usize) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    let flat = [TensorType::new(DType::F32, [D])];
    for f in 0..files {
        let source = parquet_rows(dir.join(format!("part-{f}.parquet")), &["features"], 16).unwrap();
        let examples = source.map(|r| r.unwrap());
        // the files store rows flat: the pipeline's example is the flat row, reshaped as the UDF does
        let per_example = |g: &mut Graph, x: &[ValueId]| {
            let xi = g.reshape(x[0], &[2, 4])?;
            body(g, &[xi])
        };
        for b in pipeline(examples, 7, &flat, &PforOptions::default(), per_example).unwrap() {
            let y = b.unwrap().remove(0);
            for r in 0..y.shape()[0] {
                out.push(y.index_axis0(r).unwrap().to_vec::<f32>().unwrap());
            }
        }
    }
    assert_eq!(out.len(), files * rows);
    out
}

/// `(id, prediction)` of the query's batches, sorted by id.
pub(crate) fn by_id(batches: &[RecordBatch]) -> Vec<(i64, Vec<f32>)> {
    let mut rows = Vec::new();
    for b in batches {
        let ids = b.column(0).as_primitive::<Int64Type>();
        let p = b.column(1).as_fixed_size_list();
        for r in 0..b.num_rows() {
            let v = p.value(r);
            rows.push((ids.value(r), v.as_primitive::<Float32Type>().values().to_vec()));
        }
    }
    rows.sort_by_key(|r| r.0);
    rows
}

pub(crate) fn assert_same_predictions(got: &[(i64, Vec<f32>)], want: &[Vec<f32>]) {
    assert_eq!(got.len(), want.len(), "one prediction per row");
    for (k, ((id, g), w)) in got.iter().zip(want).enumerate() {
        assert_eq!(*id, k as i64, "every id once");
        assert_eq!(g.len(), 3);
        for (a, b) in g.iter().zip(w) {
            assert!((a - b).abs() <= 1e-5 + 1e-5 * b.abs(), "row {id}: {g:?} vs the pipeline's {w:?}");
        }
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn udf_of(ctx: &SessionContext, name: &str) -> Arc<datafusion::logical_expr::ScalarUDF> {
    ctx.state().scalar_functions().get(name).cloned().unwrap()
}

#[test]
fn sql_predict_over_two_partitions_equals_the_pipeline() {
    let (files, rows) = (2, 37);
    let dir = write_dataset("sql", files, rows);
    let want = pipeline_predictions(&dir, files, rows);
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2).with_batch_size(16));
    ctx.register_udf(PforUdf::from_bytes("predict", &function_bytes()).unwrap().into_scalar_udf());
    let rt = runtime();
    let batches = rt.block_on(async {
        ctx.register_parquet("t", dir.to_str().unwrap(), ParquetReadOptions::default()).await.unwrap();
        let df = ctx.sql("SELECT id, predict(features) AS p FROM t").await.unwrap();
        let plan = df.create_physical_plan().await.unwrap();
        assert_eq!(plan.output_partitioning().partition_count(), 2, "one partition per file");
        collect(plan, ctx.task_ctx()).await.unwrap()
    });
    assert_same_predictions(&by_id(&batches), &want);
    let udf = udf_of(&ctx, "predict");
    let inner = udf.inner().downcast_ref::<PforUdf>().unwrap();
    assert_eq!(inner.rows_computed(), (files * rows) as u64);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wrong_arguments_are_errors_naming_the_udf_and_the_argument() {
    let dir = write_dataset("sqlerr", 1, 4);
    let ctx = SessionContext::new();
    ctx.register_udf(PforUdf::from_bytes("predict", &function_bytes()).unwrap().into_scalar_udf());
    let rt = runtime();
    rt.block_on(async {
        ctx.register_parquet("t", dir.to_str().unwrap(), ParquetReadOptions::default()).await.unwrap();
        for q in ["SELECT predict(id) FROM t", "SELECT predict(features, features) FROM t"] {
            let e = match ctx.sql(q).await {
                Ok(df) => df.collect().await.unwrap_err(),
                Err(e) => e,
            };
            let msg = e.to_string();
            assert!(msg.contains("predict"), "{q}: {msg}");
        }
        let e = ctx.sql("SELECT predict(id) FROM t").await.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("argument 0") && e.contains("Int64"), "{e}");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_functions_are_refused_with_the_reason() {
    let g = Graph::new();
    let t = [TensorType::new(DType::F32, [2])];
    let two = Function::build(&g, &t, |g, x| Ok(vec![x[0], g.neg(x[0])?])).unwrap();
    let e = PforUdf::from_function("f", &two).unwrap_err().to_string();
    assert!(e.contains("udf 'f'") && e.contains("2 results"), "{e}");
    let none = Function::build(&g, &[], |g, _| Ok(vec![g.scalar(DType::F32, 1.0)])).unwrap();
    assert!(PforUdf::from_function("f", &none).unwrap_err().to_string().contains("no parameter"));
    let e = PforUdf::from_bytes("f", b"pforgrph junk").unwrap_err().to_string();
    assert!(e.contains("udf 'f'") && e.contains("serialized function"), "{e}");
    assert!(PforUdf::from_function("", &two).is_err());
}

#[test]
fn a_batch_runs_as_one_vectorized_call_and_a_null_row_is_named() {
    let udf = PforUdf::from_bytes("predict", &function_bytes()).unwrap();
    assert_eq!(udf.bytes(), function_bytes().as_slice());
    let x = Tensor::randn(&[5, D], 3).unwrap();
    let col = pfor::api::pipeline::arrow::tensor_to_array(x.clone()).unwrap();
    let f = udf.into_scalar_udf();
    let out = invoke(&f, col, 5).unwrap();
    let mut g = Graph::new();
    let xi = g.input("x", DType::F32, [2, 4]);
    let y = body(&mut g, &[xi]).unwrap();
    let mut one = Session::new(&g, &y).unwrap();
    let got = array_to_tensor(out).unwrap();
    for r in 0..5 {
        let want = one.run(&[(xi, x.index_axis0(r).unwrap().reshape(&[2, 4]).unwrap())]).unwrap();
        assert!(got.index_axis0(r).unwrap().allclose(&want[0], 1e-5, 1e-5), "row {r}");
    }
    // a row with a null list is an execution error naming the row
    let values = Arc::new(Float32Array::from(vec![0.5f32; 3 * D]));
    let nulls = arrow_buffer::NullBuffer::from(vec![true, false, true]);
    let field = Arc::new(Field::new_list_field(arrow_schema::DataType::Float32, false));
    let col: ArrayRef = Arc::new(arrow_array::FixedSizeListArray::new(field, D as i32, values, Some(nulls)));
    let e = invoke(&f, col, 3).unwrap_err().to_string();
    assert!(e.contains("udf 'predict'") && e.contains("value 1"), "{e}");
}

fn invoke(f: &datafusion::logical_expr::ScalarUDF, col: ArrayRef, rows: usize) -> datafusion::common::Result<ArrayRef> {
    use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs};
    let arg_fields = vec![Arc::new(Field::new("x", col.data_type().clone(), true))];
    let return_field = Arc::new(Field::new("p", f.return_type(&[col.data_type().clone()])?, true));
    let args = ScalarFunctionArgs {
        args: vec![ColumnarValue::Array(col)],
        arg_fields,
        number_rows: rows,
        return_field,
        config_options: Arc::new(Default::default()),
    };
    f.invoke_with_args(args)?.into_array(rows)
}

#[test]
fn equal_length_list_columns_read_as_tensors_and_ragged_ones_name_the_row() {
    let values = Arc::new(Float32Array::from((0..12).map(|k| k as f32).collect::<Vec<_>>()));
    let field = Arc::new(Field::new_list_field(arrow_schema::DataType::Float32, true));
    let list = ListArray::new(field.clone(), OffsetBuffer::from_lengths([4, 4, 4]), values.clone(), None);
    let t = array_to_tensor(Arc::new(list.clone())).unwrap();
    assert_eq!(t.shape(), &[3, 4]);
    assert_eq!(t.to_vec::<f32>().unwrap(), (0..12).map(|k| k as f32).collect::<Vec<_>>());
    // a sliced list reads only its rows
    let list: ArrayRef = Arc::new(list);
    let t = array_to_tensor(list.slice(1, 2)).unwrap();
    assert_eq!(t.to_vec::<f32>().unwrap(), (4..12).map(|k| k as f32).collect::<Vec<_>>());
    let ragged = ListArray::new(field, OffsetBuffer::from_lengths([4, 4, 3, 1]), values, None);
    let e = array_to_tensor(Arc::new(ragged)).unwrap_err().to_string();
    assert!(e.contains("row 2") && e.contains("3 values"), "{e}");
}
