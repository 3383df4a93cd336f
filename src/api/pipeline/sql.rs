//! A per-example function as a DataFusion scalar UDF, run vectorized per record batch
//! (feature `datafusion`).
//!
//! [`PforUdf`] is defined by a *serialized* per-example [`Function`] (the bytes of
//! [`Function::to_bytes`], `docs/FORMAT.md`): the bytes are all it needs, so the same UDF is
//! rebuilt wherever they are shipped (a Ballista executor, another process). From them it
//! builds, once, the function vectorized over a dynamic batch dim (the pipeline's model
//! stage, `model.rs`); each invocation feeds a whole record batch — its rows are the batch,
//! `n` — to one compiled session and returns one output column. `SELECT predict(features)
//! FROM 'data.parquet'` thus runs one vectorized session call per record batch.
//!
//! Invariants:
//! - **arguments**: one SQL argument per function parameter, in order; a column of the
//!   parameter's dtype (Float32 ↔ f32, Float64 ↔ f64, Int64 ↔ i64, Boolean ↔ bool) whose rows
//!   hold the parameter's number of elements: a primitive column for a scalar parameter, a
//!   (nested) `FixedSizeList` or equal-length `List` for a tensor (`arrow.rs` converts it; a
//!   row of 784 floats feeds a parameter `[28, 28, 1]`: rows are reshaped to the parameter's
//!   shape when the element counts agree). Anything else is a planning error naming the UDF,
//!   the argument and both types; a null is an execution error naming the row;
//! - **result**: the function has exactly one result, of a fully fixed shape; the column is
//!   its rows as [`column_type`] (a primitive column for a scalar result, nested non-null
//!   `FixedSizeList`s otherwise);
//! - **parallel partitions**: DataFusion calls the UDF from several threads at once (one per
//!   partition). The vectorized graph is built once; compiled sessions are kept in a pool,
//!   one taken per call (a new one compiled only when every pooled one is busy), so `k`
//!   partitions compile at most `k` sessions and never share one;
//! - **copies**: a column whose buffer the record batch still shares (the usual case: DataFusion
//!   keeps the batch) or that the Parquet reader allocated is copied once into the batch
//!   tensor (see `arrow.rs`); the output tensor becomes the result column without a copy;
//! - **identity**: two UDFs are equal when their names and serialized functions are equal
//!   (what DataFusion compares when it deduplicates or re-plans expressions).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::{ArrayRef, new_empty_array};
use arrow_schema::DataType;
use datafusion::common::DataFusionError;
use datafusion::logical_expr::{ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility};

use super::arrow::{array_to_tensor, column_type, tensor_to_array};
use super::model::BatchModel;
use crate::api::MapAxes;
use crate::error::{Error, Result};
use crate::exec::Session;
use crate::ir::{Function, Graph, ValueId};
use crate::tensor::{DType, Tensor, TensorType};
use crate::vectorize::PforOptions;

/// A DataFusion scalar UDF running a serialized per-example [`Function`] vectorized over each
/// record batch (see the module docs). Register it with
/// `SessionContext::register_udf(udf.into_scalar_udf())`.
pub struct PforUdf {
    name: String,
    bytes: Vec<u8>,
    signature: Signature,
    params: Vec<TensorType>,
    /// The result's per-row shape (fixed).
    result_shape: Vec<usize>,
    return_type: DataType,
    /// The vectorized model: its graph, inputs (in parameter order) and output.
    graph: Graph,
    inputs: Vec<ValueId>,
    output: ValueId,
    /// Compiled sessions not in use (see the module docs).
    idle: Mutex<Vec<Session>>,
    rows: AtomicU64,
}

fn udf_err(name: &str, msg: impl fmt::Display) -> Error {
    Error::Data { op: format!("udf '{name}'"), msg: msg.to_string() }
}

impl PforUdf {
    /// The UDF `name` computing, per row, the per-example function serialized in `bytes`
    /// (by [`Function::to_bytes`]), vectorized with the default [`PforOptions`]. Fails on
    /// bytes that are not a valid function file, a function with no parameter or not exactly
    /// one result, a result shape that is not fixed, or a function that does not vectorize.
    ///
    /// ```
    /// use pfor::api::pipeline::sql::PforUdf;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let row = [TensorType::new(DType::F32, [3])];
    /// let f = Function::build(&Graph::new(), &row, |g, x| Ok(vec![g.reduce_sum(x[0], Some(&[0]), false)?]))?;
    /// let udf = PforUdf::from_bytes("total", &f.to_bytes()?)?; // e.g. bytes read from a file
    /// let _ = udf.into_scalar_udf(); // ctx.register_udf(...), then SELECT total(x) FROM t
    /// assert!(PforUdf::from_bytes("total", b"not a function").is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<PforUdf> {
        PforUdf::from_bytes_with(name, bytes, &PforOptions::default())
    }

    /// [`from_bytes`](Self::from_bytes) with vectorization options.
    pub fn from_bytes_with(name: &str, bytes: &[u8], options: &PforOptions) -> Result<PforUdf> {
        if name.is_empty() {
            return Err(udf_err(name, "a UDF needs a name"));
        }
        let f = Function::from_bytes(bytes).map_err(|e| udf_err(name, format!("the serialized function: {e}")))?;
        let params = f.param_types();
        if params.is_empty() {
            return Err(udf_err(name, "the function has no parameter (a UDF takes at least one column)"));
        }
        let results = f.result_types();
        let [result] = results.as_slice() else {
            return Err(udf_err(name, format!("the function has {} results; a scalar UDF returns one", results.len())));
        };
        let result_shape = result
            .shape
            .as_fixed()
            .ok_or_else(|| udf_err(name, format!("the result type {result} is not of a fixed shape")))?;
        let return_type = column_type(result.dtype, &result_shape)?;
        // the model calls the function by name, in a graph sharing the loaded function's
        // library (its own callees are there)
        let lib = f.graph().library().clone();
        let callee = (0..).map(|k| format!("__pfor_udf_{k}")).find(|c| lib.signature(c).is_err()).unwrap_or_default();
        let parent = f.graph().new_child();
        lib.define(&callee, f)?;
        let call = |g: &mut Graph, x: &[ValueId]| g.call(&callee, x);
        let (graph, outs, assembler) = BatchModel::vectorize(&parent, &params, options, call, &MapAxes::new())
            .map_err(|e| udf_err(name, format!("vectorizing the function: {e}")))?;
        let [output] = outs[..] else {
            return Err(udf_err(name, format!("the vectorized function has {} outputs", outs.len())));
        };
        let signature = Signature::any(params.len(), Volatility::Immutable);
        Ok(PforUdf {
            name: name.to_string(),
            bytes: bytes.to_vec(),
            signature,
            params,
            result_shape,
            return_type,
            graph,
            inputs: assembler.inputs,
            output,
            idle: Mutex::new(Vec::new()),
            rows: AtomicU64::new(0),
        })
    }

    /// [`from_bytes`](Self::from_bytes) of `f.to_bytes()`.
    ///
    /// ```
    /// use pfor::api::pipeline::sql::PforUdf;
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let f = Function::build(&Graph::new(), &[TensorType::new(DType::F64, [2])], |g, x| Ok(vec![g.neg(x[0])?]))?;
    /// let udf = PforUdf::from_function("neg", &f)?;
    /// assert_eq!(udf.bytes(), f.to_bytes()?.as_slice()); // what to ship to rebuild it
    /// assert_eq!(udf.rows_computed(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_function(name: &str, f: &Function) -> Result<PforUdf> {
        PforUdf::from_bytes(name, &f.to_bytes()?)
    }

    /// The serialized function that defines this UDF (what to ship to rebuild it elsewhere).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Rows this instance has computed so far (all partitions together).
    pub fn rows_computed(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    /// This UDF as DataFusion's [`ScalarUDF`], to register with a session.
    pub fn into_scalar_udf(self) -> ScalarUDF {
        ScalarUDF::new_from_impl(self)
    }

    /// Check the SQL arguments' types against the parameters (the planning-time check).
    fn check_args(&self, arg_types: &[DataType]) -> Result<()> {
        if arg_types.len() != self.params.len() {
            return Err(udf_err(
                &self.name,
                format!("{} arguments for a function of {} parameters", arg_types.len(), self.params.len()),
            ));
        }
        for (k, (t, p)) in arg_types.iter().zip(&self.params).enumerate() {
            let (leaf, per_row) = leaf_type(t);
            let fits = leaf_dtype(leaf) == Some(p.dtype) && per_row.is_none_or(|n| Some(n) == p.shape.num_elements());
            if !fits {
                return Err(udf_err(
                    &self.name,
                    format!(
                        "argument {k} is a column of {t}, the parameter is {p} (a column of its dtype with its element count per row)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The result column of one record batch's argument columns (`rows` rows each).
    fn run_batch(&self, columns: Vec<ArrayRef>, rows: usize) -> Result<ArrayRef> {
        if rows == 0 {
            return Ok(new_empty_array(&self.return_type));
        }
        let mut feeds = Vec::with_capacity(columns.len());
        for (k, (col, (v, p))) in columns.into_iter().zip(self.inputs.iter().zip(&self.params)).enumerate() {
            let t = array_to_tensor(col).map_err(|e| udf_err(&self.name, format!("argument {k}: {e}")))?;
            feeds.push((*v, rows_as(t, p, rows).map_err(|e| udf_err(&self.name, format!("argument {k}: {e}")))?));
        }
        let session = self.idle.lock().map_err(|_| udf_err(&self.name, "session pool poisoned"))?.pop();
        let mut session = match session {
            Some(s) => s,
            None => Session::new(&self.graph, &[self.output])?,
        };
        let out = session.run(&feeds);
        if let Ok(mut idle) = self.idle.lock() {
            idle.push(session);
        }
        let out = out.map_err(|e| udf_err(&self.name, format!("a batch of {rows} rows: {e}")))?;
        let [t] = <[Tensor; 1]>::try_from(out).map_err(|o| udf_err(&self.name, format!("{} outputs", o.len())))?;
        let want: Vec<usize> = std::iter::once(rows).chain(self.result_shape.iter().copied()).collect();
        if t.shape() != want.as_slice() {
            return Err(udf_err(&self.name, format!("the output is {:?}, expected {want:?}", t.shape())));
        }
        self.rows.fetch_add(rows as u64, Ordering::Relaxed);
        tensor_to_array(t)
    }
}

/// The column tensor `t` (`[rows, ...]`) as the batch feed of parameter `p`:
/// `[rows, p's shape...]`, reshaped when the per-row element counts agree.
fn rows_as(t: Tensor, p: &TensorType, rows: usize) -> std::result::Result<Tensor, String> {
    let dims = p.shape.as_fixed().unwrap_or_default();
    let want: Vec<usize> = std::iter::once(rows).chain(dims.iter().copied()).collect();
    if t.dtype() != p.dtype || t.shape().first() != Some(&rows) {
        return Err(format!("a {}{:?} column for the parameter {p}", t.dtype(), t.shape()));
    }
    if t.shape() == want.as_slice() {
        return Ok(t);
    }
    if p.shape.is_fixed() && t.len() == want.iter().product::<usize>() {
        return t.reshape(&want).map_err(|e| e.to_string());
    }
    if !p.shape.is_fixed() && p.shape.matches(&t.shape()[1..]) {
        return Ok(t);
    }
    Err(format!("rows of shape {:?} for the parameter {p}", &t.shape()[1..]))
}

/// The primitive type at the bottom of nested list types, and the element count per row when
/// every level has a fixed size.
fn leaf_type(t: &DataType) -> (&DataType, Option<usize>) {
    let (mut t, mut per_row) = (t, Some(1usize));
    loop {
        match t {
            DataType::FixedSizeList(f, n) => {
                per_row = per_row.and_then(|p| p.checked_mul(usize::try_from(*n).ok()?));
                t = f.data_type();
            }
            DataType::List(f) | DataType::LargeList(f) => {
                per_row = None;
                t = f.data_type();
            }
            _ => return (t, per_row),
        }
    }
}

fn leaf_dtype(t: &DataType) -> Option<DType> {
    match t {
        DataType::Float32 => Some(DType::F32),
        DataType::Float64 => Some(DType::F64),
        DataType::Int64 => Some(DType::I64),
        DataType::Boolean => Some(DType::Bool),
        _ => None,
    }
}

impl fmt::Debug for PforUdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PforUdf")
            .field("name", &self.name)
            .field("params", &self.params)
            .field("return_type", &self.return_type)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl PartialEq for PforUdf {
    fn eq(&self, other: &PforUdf) -> bool {
        self.name == other.name && self.bytes == other.bytes
    }
}

impl Eq for PforUdf {}

impl Hash for PforUdf {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
        self.bytes.hash(state);
    }
}

fn df_err(e: Error) -> DataFusionError {
    DataFusionError::Execution(e.to_string())
}

impl ScalarUDFImpl for PforUdf {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> datafusion::common::Result<DataType> {
        self.check_args(arg_types).map_err(|e| DataFusionError::Plan(e.to_string()))?;
        Ok(self.return_type.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> datafusion::common::Result<ColumnarValue> {
        let rows = args.number_rows;
        let columns =
            args.args.into_iter().map(|a| a.into_array(rows)).collect::<datafusion::common::Result<Vec<_>>>()?;
        Ok(ColumnarValue::Array(self.run_batch(columns, rows).map_err(df_err)?))
    }
}
