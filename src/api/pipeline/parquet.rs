//! Parquet files as a pipeline source and sink (feature `parquet`).
//!
//! - [`parquet_rows`]: the rows of a file's named columns, read in record batches by the
//!   `parquet` crate's Arrow reader and yielded one example per row ([`ArrowRows`]). Reading
//!   and decompressing run on the engine's feeder thread, overlapped with the model; the
//!   reader's buffers are 64-byte aligned, so their conversion to tensors copies once (see
//!   `arrow`'s module docs).
//! - [`ParquetSink`]: writes record batches, or the engine's [`BatchOutput`]s as rows (a
//!   `record` column with each row's source index, then one column per output), Snappy
//!   compressed. The schema is fixed by the first batch written.
//!
//! Every failure (I/O, a malformed file, a missing column) is an [`Error::Data`] naming the
//! file.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use super::BatchOutput;
use super::arrow::{ArrowRows, tensors_to_record_batch};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

fn data_err(op: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Data { op: op.into(), msg: format!("{}: {e}", path.display()) }
}

/// The record batches of a Parquet file's columns (from [`parquet_batches`]).
pub struct ParquetBatches {
    reader: ParquetRecordBatchReader,
    path: PathBuf,
}

impl Iterator for ParquetBatches {
    type Item = Result<RecordBatch>;
    fn next(&mut self) -> Option<Result<RecordBatch>> {
        Some(self.reader.next()?.map_err(|e| data_err("parquet_batches", &self.path, e)))
    }
}

/// The record batches of `path`'s named columns, `batch_rows` rows at a time (the last one
/// may be smaller).
pub fn parquet_batches(path: impl AsRef<Path>, columns: &[&str], batch_rows: usize) -> Result<ParquetBatches> {
    const OP: &str = "parquet_batches";
    let path = path.as_ref().to_path_buf();
    if batch_rows == 0 {
        return Err(data_err(OP, &path, "batch_rows must be > 0"));
    }
    let file = File::open(&path).map_err(|e| data_err(OP, &path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| data_err(OP, &path, e))?;
    let schema = builder.schema().clone();
    let mut roots = Vec::with_capacity(columns.len());
    for name in columns {
        let k = schema.index_of(name).map_err(|_| {
            let have: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            data_err(OP, &path, format!("no column '{name}' (the file has {have:?})"))
        })?;
        roots.push(k);
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader =
        builder.with_projection(mask).with_batch_size(batch_rows).build().map_err(|e| data_err(OP, &path, e))?;
    Ok(ParquetBatches { reader, path })
}

/// The rows of `path`'s named columns as pipeline records: each an example with one tensor
/// per column (a row of a `FixedSizeList<f32>` column of size 784 is an f32 tensor `[784]`).
pub fn parquet_rows(path: impl AsRef<Path>, columns: &[&str], batch_rows: usize) -> Result<ArrowRows<ParquetBatches>> {
    Ok(ArrowRows::new(parquet_batches(path, columns, batch_rows)?, columns))
}

/// A Parquet file written batch by batch; [`finish`](Self::finish) it to write the footer
/// (a file not finished is not readable).
pub struct ParquetSink {
    path: PathBuf,
    names: Vec<String>,
    writer: Option<ArrowWriter<File>>,
    rows: usize,
}

impl ParquetSink {
    /// Create (or truncate) `path`. `outputs` names the map's outputs, in order, for
    /// [`write_output`](Self::write_output).
    pub fn create(path: impl AsRef<Path>, outputs: &[&str]) -> Result<ParquetSink> {
        let path = path.as_ref().to_path_buf();
        File::create(&path).map_err(|e| data_err("ParquetSink::create", &path, e))?;
        Ok(ParquetSink { path, names: outputs.iter().map(|s| s.to_string()).collect(), writer: None, rows: 0 })
    }

    /// Append a record batch (the first one fixes the file's schema).
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        const OP: &str = "ParquetSink::write_batch";
        if self.writer.is_none() {
            let file = File::create(&self.path).map_err(|e| data_err(OP, &self.path, e))?;
            let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
            let w = ArrowWriter::try_new(file, batch.schema(), Some(props)).map_err(|e| data_err(OP, &self.path, e))?;
            self.writer = Some(w);
        }
        if let Some(w) = self.writer.as_mut() {
            w.write(batch).map_err(|e| data_err(OP, &self.path, e))?;
        }
        self.rows += batch.num_rows();
        Ok(())
    }

    /// Append one batch of the engine's outputs: a `record` column (i64 source indices) and
    /// one column per output, named as given to [`create`](Self::create). The outputs must
    /// have the batch on axis 0 (the default out-axes).
    pub fn write_output(&mut self, out: BatchOutput) -> Result<()> {
        if out.outputs.len() != self.names.len() {
            return Err(data_err(
                "ParquetSink::write_output",
                &self.path,
                format!("{} outputs for {} names {:?}", out.outputs.len(), self.names.len(), self.names),
            ));
        }
        let index: Vec<i64> = out.records.iter().map(|&i| i as i64).collect();
        let mut columns = vec![("record".to_string(), Tensor::from_vec(&[index.len()], index)?)];
        columns.extend(self.names.iter().cloned().zip(out.outputs));
        let batch = tensors_to_record_batch(columns)?;
        self.write_batch(&batch)
    }

    /// Write the footer and close the file; returns the rows written. A sink that wrote
    /// nothing leaves an empty file (no schema to write).
    pub fn finish(self) -> Result<usize> {
        if let Some(w) = self.writer {
            w.close().map_err(|e| data_err("ParquetSink::finish", &self.path, e))?;
        }
        Ok(self.rows)
    }
}
