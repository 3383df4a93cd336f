//! Apache Arrow arrays and record batches ↔ tensors (feature `parquet`).
//!
//! A column holds one value per row; its tensor has the rows on axis 0:
//! - a primitive column of `Float32`, `Float64`, `Int64` or `Boolean` ↔ a tensor `[rows]`;
//! - a `FixedSizeList` of such values (nested to any depth) ↔ `[rows, d1, d2, ...]`, one list
//!   level per dim (a tensor of rank `r` is written as `r - 1` nested lists);
//! - a `List` / `LargeList` whose rows all have the same length reads like a `FixedSizeList`
//!   of that length (rows of different lengths are an error naming the first such row);
//!   tensors are always written as `FixedSizeList`s.
//!
//! **Copies**: converting *by value* is zero-copy when the layout allows: an Arrow buffer that
//! is uniquely owned, unsliced and was allocated as a `Vec` of its element type (e.g. one
//! that came from a tensor) becomes the tensor's storage, and a uniquely owned, contiguous
//! f32/f64/i64 tensor becomes the Arrow buffer. Everything else is copied once: buffers shared
//! with another array or a record batch still alive, sliced arrays (a list column whose first
//! offset is not 0 too), the 64-byte-aligned
//! buffers the Parquet reader allocates (their layout is not a `Vec`'s, so ndarray cannot own
//! them), and every `Boolean` column (Arrow packs booleans into bits).
//!
//! Nulls have no tensor form: a column with a null is an [`Error::Data`] naming the row. As a
//! pipeline source, [`ArrowRows`] yields the rows before the first row holding a null (at any
//! list level) and then that row's error, so the engine stops at that record's index.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{ArrowPrimitiveType, Float32Type, Float64Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, GenericListArray, OffsetSizeTrait, PrimitiveArray, RecordBatch,
};
use arrow_buffer::ScalarBuffer;
use arrow_schema::{DataType, Field, FieldRef, Schema};

use crate::error::{Error, Result};
use crate::tensor::{DType, Element, Tensor};

fn data_err(op: &str, msg: impl Into<String>) -> Error {
    Error::Data { op: op.into(), msg: msg.into() }
}

fn no_nulls(op: &str, a: &dyn Array) -> Result<()> {
    match a.nulls().filter(|n| n.null_count() > 0) {
        Some(n) => {
            let row = (0..a.len()).find(|&i| n.is_null(i)).unwrap_or(0);
            Err(data_err(op, format!("value {row} of a {} array is null; tensors have no nulls", a.data_type())))
        }
        None => Ok(()),
    }
}

/// The column `array` (one value per row) as a tensor `[rows, ...]`, taking its buffer
/// without a copy when the layout allows (see the module docs).
pub fn array_to_tensor(array: ArrayRef) -> Result<Tensor> {
    const OP: &str = "array_to_tensor";
    let mut dims = vec![array.len()];
    let mut a = array;
    loop {
        // own the list (and drop the Arc) so that its child may be uniquely owned
        let (len, child) = match a.data_type() {
            DataType::FixedSizeList(_, size) => {
                no_nulls(OP, a.as_ref())?;
                let len = usize::try_from(*size).map_err(|_| data_err(OP, format!("list size {size}")))?;
                let list: FixedSizeListArray = a.as_fixed_size_list().clone();
                drop(a);
                (len, list.into_parts().2)
            }
            DataType::List(_) => {
                no_nulls(OP, a.as_ref())?;
                let list = a.as_list::<i32>().clone();
                drop(a);
                uniform_list_child(OP, list)?
            }
            DataType::LargeList(_) => {
                no_nulls(OP, a.as_ref())?;
                let list = a.as_list::<i64>().clone();
                drop(a);
                uniform_list_child(OP, list)?
            }
            _ => break,
        };
        dims.push(len);
        a = child;
    }
    no_nulls(OP, a.as_ref())?;
    let n: usize = dims.iter().product();
    if a.len() != n {
        return Err(data_err(OP, format!("{} leaf values for the shape {dims:?}", a.len())));
    }
    match a.data_type() {
        DataType::Float32 => primitive_to_tensor::<Float32Type, f32>(a, &dims),
        DataType::Float64 => primitive_to_tensor::<Float64Type, f64>(a, &dims),
        DataType::Int64 => primitive_to_tensor::<Int64Type, i64>(a, &dims),
        DataType::Boolean => Tensor::from_vec(&dims, a.as_boolean().iter().map(|b| b.unwrap_or(false)).collect()),
        t => Err(data_err(OP, format!("a column of {t} has no tensor dtype (f32, f64, i64, bool)"))),
    }
}

/// The length every row of `list` has and its values (exactly those the rows cover), or an
/// error naming the first row of another length.
fn uniform_list_child<O: OffsetSizeTrait>(op: &str, list: GenericListArray<O>) -> Result<(usize, ArrayRef)> {
    let (_, offsets, values, _) = list.into_parts();
    let o: &[O] = &offsets;
    let start = o.first().map_or(0, |x| x.as_usize());
    let len = o.get(1).map_or(0, |x| x.as_usize() - start);
    if let Some(r) = o.windows(2).position(|w| w[1].as_usize() - w[0].as_usize() != len) {
        let got = o[r + 1].as_usize() - o[r].as_usize();
        return Err(data_err(
            op,
            format!("row {r} of a list column has {got} values, row 0 has {len}: a tensor needs rows of one length"),
        ));
    }
    let n = len * (o.len() - 1);
    let child = if start == 0 && values.len() == n { values } else { values.slice(start, n) };
    Ok((len, child))
}

fn primitive_to_tensor<P, T>(a: ArrayRef, dims: &[usize]) -> Result<Tensor>
where
    P: ArrowPrimitiveType<Native = T>,
    T: Element + arrow_buffer::ArrowNativeType,
{
    let p: PrimitiveArray<P> = a.as_primitive::<P>().clone();
    drop(a);
    let values: ScalarBuffer<T> = p.into_parts().1;
    let data = match values.into_inner().into_vec::<T>() {
        Ok(v) => v,
        Err(shared) => shared.typed_data::<T>().to_vec(),
    };
    Tensor::from_vec(dims, data)
}

/// The tensor `t` (rows on axis 0, rank >= 1) as an Arrow column: `[rows]` a primitive array,
/// `[rows, d1, ...]` nested `FixedSizeList`s. Zero-copy for a uniquely owned contiguous
/// f32/f64/i64 tensor (see the module docs).
pub fn tensor_to_array(t: Tensor) -> Result<ArrayRef> {
    const OP: &str = "tensor_to_array";
    if t.rank() == 0 {
        return Err(data_err(OP, "a scalar has no row axis; a column needs a tensor of rank >= 1"));
    }
    let shape = t.shape().to_vec();
    let mut array: ArrayRef = match t {
        Tensor::F32(_) => Arc::new(PrimitiveArray::<Float32Type>::new(tensor_into_vec::<f32>(t)?.into(), None)),
        Tensor::F64(_) => Arc::new(PrimitiveArray::<Float64Type>::new(tensor_into_vec::<f64>(t)?.into(), None)),
        Tensor::I64(_) => Arc::new(PrimitiveArray::<Int64Type>::new(tensor_into_vec::<i64>(t)?.into(), None)),
        Tensor::Bool(a) => Arc::new(BooleanArray::from(a.iter().copied().collect::<Vec<bool>>())),
    };
    for &d in shape[1..].iter().rev() {
        let list =
            FixedSizeListArray::try_new(list_field(array.data_type().clone()), list_size(OP, d, &shape)?, array, None)
                .map_err(|e| data_err(OP, e.to_string()))?;
        array = Arc::new(list);
    }
    Ok(array)
}

/// The Arrow type of a column whose rows are tensors of `dtype` and shape `row_shape`: the
/// type [`tensor_to_array`] gives a tensor `[rows, row_shape...]` (nested non-null
/// `FixedSizeList`s, one per dim, around the primitive type).
///
/// ```
/// use pfor::api::pipeline::arrow::{column_type, tensor_to_array};
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// let column = tensor_to_array(Tensor::zeros(DType::F32, &[5, 2, 3])?)?;
/// assert_eq!(&column_type(DType::F32, &[2, 3])?, column.data_type());
/// # Ok(())
/// # }
/// ```
pub fn column_type(dtype: DType, row_shape: &[usize]) -> Result<DataType> {
    let mut t = match dtype {
        DType::F32 => DataType::Float32,
        DType::F64 => DataType::Float64,
        DType::I64 => DataType::Int64,
        DType::Bool => DataType::Boolean,
    };
    for &d in row_shape.iter().rev() {
        t = DataType::FixedSizeList(list_field(t), list_size("column_type", d, row_shape)?);
    }
    Ok(t)
}

/// The item field of the lists this module writes.
fn list_field(item: DataType) -> FieldRef {
    Arc::new(Field::new_list_field(item, false))
}

fn list_size(op: &str, d: usize, shape: &[usize]) -> Result<i32> {
    i32::try_from(d).map_err(|_| data_err(op, format!("dim {d} of {shape:?} exceeds a list size")))
}

/// The elements of `t` in logical (row-major) order: its own buffer when it is uniquely
/// owned and contiguous, a copy otherwise.
fn tensor_into_vec<T: Element>(t: Tensor) -> Result<Vec<T>> {
    let got = t.dtype();
    let a = T::unwrap(t).map_err(|_| Error::dtype("tensor_to_array", T::DTYPE.name(), got))?;
    let n = a.len();
    match a.try_into_owned_nocopy() {
        Ok(owned) if owned.is_standard_layout() => match owned.into_raw_vec_and_offset() {
            (v, None | Some(0)) if v.len() == n => Ok(v),
            (v, Some(off)) => Ok(v[off..off + n].to_vec()),
            (v, None) => Ok(v[..n].to_vec()),
        },
        Ok(owned) => Ok(owned.iter().copied().collect()),
        Err(shared) => Ok(shared.iter().copied().collect()),
    }
}

/// The named columns of `batch` as tensors `[rows, ...]`, in the order of `columns`. Takes
/// the batch by value: a column whose buffer nothing else shares is not copied.
pub fn record_batch_to_tensors(batch: RecordBatch, columns: &[&str]) -> Result<Vec<Tensor>> {
    let (schema, mut arrays, _) = batch.into_parts();
    let mut picked = Vec::with_capacity(columns.len());
    for name in columns {
        let k = schema.index_of(name).map_err(|_| {
            let have: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
            data_err("record_batch_to_tensors", format!("no column '{name}' (the batch has {have:?})"))
        })?;
        picked.push(k);
    }
    let mut out = Vec::with_capacity(columns.len());
    for (j, &k) in picked.iter().enumerate() {
        // the last use of a column moves it out (a column named twice is cloned first)
        let a =
            if picked[j + 1..].contains(&k) { arrays[k].clone() } else { std::mem::replace(&mut arrays[k], empty()) };
        out.push(
            array_to_tensor(a)
                .map_err(|e| data_err("record_batch_to_tensors", format!("column '{}': {e}", columns[j])))?,
        );
    }
    Ok(out)
}

fn empty() -> ArrayRef {
    Arc::new(BooleanArray::from(Vec::<bool>::new()))
}

/// A record batch with one column per `(name, tensor)` (every tensor with the same number
/// of rows on axis 0), converted by [`tensor_to_array`].
pub fn tensors_to_record_batch(columns: Vec<(String, Tensor)>) -> Result<RecordBatch> {
    let mut fields = Vec::with_capacity(columns.len());
    let mut arrays = Vec::with_capacity(columns.len());
    for (name, t) in columns {
        let a = tensor_to_array(t).map_err(|e| data_err("tensors_to_record_batch", format!("column '{name}': {e}")))?;
        fields.push(Field::new(name, a.data_type().clone(), false));
        arrays.push(a);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| data_err("tensors_to_record_batch", e.to_string()))
}

/// A pipeline source over record batches: yields one example per row, the named columns'
/// values of that row (views into the batch's tensors: the rows are not copied here; the
/// decode threads' stacking copies them once into the model's batch).
pub struct ArrowRows<I> {
    batches: I,
    columns: Vec<String>,
    current: Vec<Tensor>,
    row: usize,
    rows: usize,
    /// Rows of the batches before the current one.
    base: usize,
    /// The error of the row after the current batch's last (a row with a null).
    pending: Option<Error>,
    failed: bool,
}

impl<I: Iterator<Item = Result<RecordBatch>>> ArrowRows<I> {
    /// Rows of `batches`, each the values of `columns` (in that order).
    pub fn new(batches: I, columns: &[&str]) -> ArrowRows<I> {
        ArrowRows {
            batches,
            columns: columns.iter().map(|c| c.to_string()).collect(),
            current: Vec::new(),
            row: 0,
            rows: 0,
            base: 0,
            pending: None,
            failed: false,
        }
    }

    /// Take `batch` as the current one: its rows before the first null, and that row's error.
    fn load(&mut self, batch: RecordBatch) -> Result<()> {
        self.base += self.rows;
        let names: Vec<&str> = self.columns.iter().map(String::as_str).collect();
        let null = names
            .iter()
            .filter_map(|&c| Some((c, first_null_row(batch.column_by_name(c)?.as_ref())?)))
            .min_by_key(|(_, r)| *r);
        let batch = match null {
            Some((c, r)) => {
                self.pending = Some(Error::Data {
                    op: "ArrowRows".into(),
                    msg: format!("row {} (row {r} of its record batch): column '{c}' has a null", self.base + r),
                });
                batch.slice(0, r)
            }
            None => batch,
        };
        let rows = batch.num_rows();
        (self.current, self.row, self.rows) = (record_batch_to_tensors(batch, &names)?, 0, rows);
        Ok(())
    }
}

/// The first row of the column `a` with a null at any list level.
fn first_null_row(a: &dyn Array) -> Option<usize> {
    let (mut level, mut per_row, mut first) = (a, 1usize, None::<usize>);
    loop {
        if let Some(i) =
            level.nulls().filter(|n| n.null_count() > 0).and_then(|n| (0..level.len()).find(|&i| n.is_null(i)))
        {
            first = Some(first.map_or(i / per_row, |f| f.min(i / per_row)));
        }
        match level.data_type() {
            DataType::FixedSizeList(_, size) => {
                per_row = per_row.saturating_mul(usize::try_from(*size).unwrap_or(1).max(1));
                level = level.as_fixed_size_list().values().as_ref();
            }
            _ => return first,
        }
    }
}

impl<I: Iterator<Item = Result<RecordBatch>>> Iterator for ArrowRows<I> {
    type Item = Result<Vec<Tensor>>;
    fn next(&mut self) -> Option<Self::Item> {
        while self.row == self.rows {
            if self.failed {
                return None;
            }
            if let Some(e) = self.pending.take() {
                self.failed = true;
                return Some(Err(e));
            }
            if let Err(e) = self.batches.next()?.and_then(|b| self.load(b)) {
                self.failed = true;
                return Some(Err(e));
            }
        }
        let r = self.row;
        self.row += 1;
        Some(self.current.iter().map(|t| t.index_axis0(r)).collect())
    }
}
