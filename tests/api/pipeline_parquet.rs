//! Arrow arrays / record batches ↔ tensors (nested fixed-size lists, primitives, the
//! zero-copy paths and where they copy) and Parquet as the engine's source and sink, checked
//! against the per-example loop. Feature `parquet`.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Float32Array, Int32Array, RecordBatch};
use pfor::api::pipeline::arrow::{array_to_tensor, record_batch_to_tensors, tensor_to_array, tensors_to_record_batch};
use pfor::api::pipeline::parquet::{ParquetSink, parquet_batches, parquet_rows};
use pfor::api::{Pipeline, PipelineConfig};
use pfor::prelude::*;

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("pfor-test-{}-{name}.parquet", std::process::id()))
}

fn data_ptr(t: &Tensor) -> *const f32 {
    t.array::<f32>().unwrap().as_ptr()
}

#[test]
fn columns_round_trip_through_arrow_for_every_dtype_and_rank() {
    let cols = vec![
        ("x".to_string(), Tensor::randn(&[5, 2, 3], 1).unwrap()),
        ("y".to_string(), Tensor::randn_f64(&[5], 2).unwrap()),
        ("i".to_string(), Tensor::from_vec(&[5, 1], vec![3i64, -1, 4, 1, -5]).unwrap()),
        (
            "b".to_string(),
            Tensor::from_vec(&[5, 2], vec![true, false, true, true, false, false, true, false, true, true]).unwrap(),
        ),
    ];
    let batch = tensors_to_record_batch(cols.clone()).unwrap();
    assert_eq!(batch.num_rows(), 5);
    assert_eq!(
        batch.column(0).data_type().to_string(),
        "FixedSizeList(2 x non-null FixedSizeList(3 x non-null Float32))"
    );
    let back = record_batch_to_tensors(batch, &["b", "x", "i", "y", "x"]).unwrap();
    let want = [&cols[3].1, &cols[0].1, &cols[2].1, &cols[1].1, &cols[0].1];
    for (got, want) in back.iter().zip(want) {
        assert_eq!(got, want);
    }
}

#[test]
fn conversion_is_zero_copy_for_owned_buffers_and_copies_shared_ones() {
    // an owned tensor becomes the Arrow buffer and comes back as the same memory
    let t = Tensor::randn(&[4, 6], 3).unwrap();
    let want = t.to_vec::<f32>().unwrap();
    let p = data_ptr(&t);
    let back = array_to_tensor(tensor_to_array(t).unwrap()).unwrap();
    assert_eq!(data_ptr(&back), p, "owned f32 [4, 6] round trip is zero-copy");
    assert_eq!(back.to_vec::<f32>().unwrap(), want);
    // a tensor still shared is copied (the original stays intact)
    let kept = back.clone();
    let arr = tensor_to_array(back).unwrap();
    let arr2: ArrayRef = arr.clone(); // the array shared too: its conversion copies
    let again = array_to_tensor(arr).unwrap();
    assert_ne!(data_ptr(&again), p);
    assert_eq!(again, kept);
    drop(arr2);
    // a sliced array (offset) is copied, with the right rows
    let a: ArrayRef = Arc::new(Float32Array::from(vec![1.0f32, 2.0, 3.0, 4.0]));
    let s = array_to_tensor(a.slice(1, 2)).unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), [2.0, 3.0]);
}

#[test]
fn nulls_and_unsupported_types_are_data_errors() {
    let a: ArrayRef = Arc::new(Float32Array::from(vec![Some(1.0f32), None, Some(3.0)]));
    let e = array_to_tensor(a).unwrap_err();
    assert!(matches!(e, Error::Data { .. }) && e.to_string().contains("value 1"), "{e}");
    let a: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
    let e = array_to_tensor(a).unwrap_err();
    assert!(e.to_string().contains("Int32"), "{e}");
    assert!(tensor_to_array(Tensor::scalar(1.0f32)).is_err());
    let batch = tensors_to_record_batch(vec![("x".into(), Tensor::zeros(DType::F32, &[2]).unwrap())]).unwrap();
    let e = record_batch_to_tensors(batch, &["nope"]).unwrap_err();
    assert!(e.to_string().contains("'nope'") && e.to_string().contains("\"x\""), "{e}");
}

const D: usize = 6;

fn body(g: &mut Graph, x: &[ValueId]) -> Result<Vec<ValueId>> {
    let w = g.constant(Tensor::randn(&[D, 4], 9)?);
    let xi = g.reshape(x[0], &[1, D as i64])?;
    let h = g.matmul(xi, w)?;
    let h = g.tanh(h)?;
    Ok(vec![g.reshape(h, &[4])?])
}

fn write_dataset(path: &PathBuf, n: usize) -> Tensor {
    let x = Tensor::randn(&[n, D], 5).unwrap();
    let ids = Tensor::from_vec(&[n], (0..n as i64).collect()).unwrap();
    let mut sink = ParquetSink::create(path, &[]).unwrap();
    // two row groups' worth of batches, to read across batch boundaries
    let half = n / 2;
    for (a, b) in [(0, half), (half, n)] {
        let cols =
            vec![("id".to_string(), ids.slice_axis0(a, b).unwrap()), ("x".to_string(), x.slice_axis0(a, b).unwrap())];
        sink.write_batch(&tensors_to_record_batch(cols).unwrap()).unwrap();
    }
    assert_eq!(sink.finish().unwrap(), n);
    x
}

#[test]
fn parquet_to_predictions_to_parquet_equals_the_per_example_loop() {
    let (input, output) = (tmp("in"), tmp("out"));
    let n = 23;
    let x = write_dataset(&input, n);
    let mut p =
        Pipeline::new(&[TensorType::new(DType::F32, [D])], PipelineConfig::new(4).decode_threads(2), body).unwrap();
    let mut sink = ParquetSink::create(&output, &["y"]).unwrap();
    let stats = p.run(parquet_rows(&input, &["x"], 5).unwrap(), Ok, |b| sink.write_output(b)).unwrap();
    assert_eq!((stats.rows, stats.batches), (n, 6));
    assert_eq!(sink.finish().unwrap(), n);
    // read the predictions back and compare with the loop
    let mut g = Graph::new();
    let xi = g.input("x", DType::F32, [D]);
    let out = body(&mut g, &[xi]).unwrap();
    let mut one = Session::new(&g, &out).unwrap();
    let mut seen = 0;
    for b in parquet_batches(&output, &["record", "y"], 7).unwrap() {
        let cols = record_batch_to_tensors(b.unwrap(), &["record", "y"]).unwrap();
        for (r, i) in cols[0].to_vec::<i64>().unwrap().into_iter().enumerate() {
            assert_eq!(i as usize, seen, "rows in source order");
            let want = one.run(&[(xi, x.index_axis0(seen).unwrap())]).unwrap();
            assert!(cols[1].index_axis0(r).unwrap().allclose(&want[0], 1e-5, 1e-5), "row {i}");
            seen += 1;
        }
    }
    assert_eq!(seen, n);
    let _ = std::fs::remove_file(&input);
    let _ = std::fs::remove_file(&output);
}

#[test]
fn parquet_errors_name_the_file_and_the_column() {
    let path = tmp("cols");
    write_dataset(&path, 4);
    let e = parquet_rows(&path, &["x", "label"], 2).err().unwrap();
    let msg = e.to_string();
    assert!(msg.contains("'label'") && msg.contains(&path.display().to_string()), "{msg}");
    let e = parquet_rows(tmp("missing"), &["x"], 2).err().unwrap();
    assert!(matches!(e, Error::Data { .. }), "{e}");
    // a file that is not Parquet
    std::fs::write(&path, b"not parquet").unwrap();
    assert!(parquet_batches(&path, &["x"], 2).is_err());
    let _ = std::fs::remove_file(&path);
    // a sliced record batch column reads the right rows
    let batch =
        RecordBatch::try_from_iter([("x", Arc::new(Float32Array::from(vec![1.0f32, 2.0, 3.0])) as ArrayRef)]).unwrap();
    let t = record_batch_to_tensors(batch.slice(1, 2), &["x"]).unwrap();
    assert_eq!(t[0].to_vec::<f32>().unwrap(), [2.0, 3.0]);
}

/// Record batches of a `FixedSizeList<Float32, 2>` column `x` with `rows` rows each, values
/// `row * 10 + k`; `null_leaf`: the leaf value made null in the last batch.
fn list_batches(rows: &[usize], null_leaf: usize) -> Vec<Result<RecordBatch>> {
    use arrow_array::FixedSizeListArray;
    use arrow_schema::{DataType, Field};
    let mut base = 0;
    let mut out = Vec::new();
    for (b, &n) in rows.iter().enumerate() {
        let leaves: Vec<Option<f32>> = (0..2 * n)
            .map(|l| (b + 1 < rows.len() || l != null_leaf).then_some(((base + l / 2) * 10 + l % 2) as f32))
            .collect();
        let field = Arc::new(Field::new_list_field(DataType::Float32, true));
        let list = FixedSizeListArray::try_new(field, 2, Arc::new(Float32Array::from(leaves)), None).unwrap();
        out.push(Ok(RecordBatch::try_from_iter([("x", Arc::new(list) as ArrayRef)]).unwrap()));
        base += n;
    }
    out
}

#[test]
fn a_null_in_a_row_stops_the_pipeline_at_that_record() {
    use pfor::api::pipeline::arrow::ArrowRows;
    // rows 0..4 in the first record batch, 4..12 in the second; leaf 11 of the second batch
    // is the second value of its row 5: record 9
    let mut p =
        Pipeline::new(&[TensorType::new(DType::F32, [2])], PipelineConfig::new(3), |g, x| Ok(vec![g.sum_all(x[0])?]))
            .unwrap();
    let mut sunk = Vec::new();
    let e = p
        .run(ArrowRows::new(list_batches(&[4, 8], 11).into_iter(), &["x"]), Ok, |b| {
            sunk.extend(b.outputs[0].to_vec::<f32>()?);
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(e, Error::AtRecord { index: 9, .. }), "{e}");
    assert!(e.to_string().contains("row 9 (row 5 of its record batch): column 'x' has a null"), "{e}");
    // the records before it are mapped, in order
    assert_eq!(sunk, (0..9).map(|r| (20 * r + 1) as f32).collect::<Vec<_>>());
    // a null in a row's first value, directly as an iterator: the rows before it, then its error
    let rows: Vec<Result<Vec<Tensor>>> = ArrowRows::new(list_batches(&[3, 3], 2).into_iter(), &["x"]).collect();
    assert_eq!(rows.len(), 5);
    assert_eq!(rows[3].as_ref().unwrap()[0].to_vec::<f32>().unwrap(), [30.0, 31.0]);
    assert!(rows[4].as_ref().unwrap_err().to_string().contains("row 4 (row 1"), "{:?}", rows[4]);
}
