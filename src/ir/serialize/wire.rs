//! The byte-level primitives of the graph format: a [`Writer`], a bounds-checked [`Reader`]
//! and the [`Wire`] trait with its impls for the attribute types ops carry (see
//! `docs/FORMAT.md` for the layout of each).
//!
//! Invariants: every multi-byte number is little-endian and fixed-width; every count is a
//! `u32` checked against the bytes left *before* anything is allocated for it (each item
//! takes at least [`Wire::MIN_BYTES`] bytes), so hostile input can make a read fail but
//! never allocate more than a small multiple of the input's size; every read either returns
//! a value or an [`Error::Format`] naming the byte offset — never a panic.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ir::{FunctionSignature, Library};
use crate::ops::{Conv2dParams, IterationCap, OnLimit, Padding, slicing::PadMode};
use crate::tensor::{DType, Dim, Shape, Tensor, TensorType};

/// Appends encoded values to a byte buffer.
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
    /// The library of the graph being written (every function body must share it).
    pub(crate) lib: Library,
    /// Nesting depth of function bodies being written (bounded like the reader's).
    pub(crate) depth: usize,
}

impl Writer {
    pub(crate) fn new(lib: Library) -> Writer {
        Writer { buf: Vec::new(), lib, depth: 0 }
    }
    pub(crate) fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A count or index that must fit the format's `u32`.
    pub(crate) fn len(&mut self, n: usize, what: &str) -> Result<()> {
        let n = u32::try_from(n)
            .map_err(|_| Error::InvalidArgument(format!("serialize: {what} count {n} exceeds the format's u32")))?;
        self.u32(n);
        Ok(())
    }
    pub(crate) fn str(&mut self, s: &str) -> Result<()> {
        self.len(s.len(), "string byte")?;
        self.buf.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Reads encoded values from a byte slice, checking every length against what is left.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pub(crate) pos: usize,
    /// The library the graph being read is loaded into (function bodies share it).
    pub(crate) lib: Library,
    /// Nesting depth of function bodies being read (see `MAX_DEPTH`).
    pub(crate) depth: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], lib: Library) -> Reader<'a> {
        Reader { buf, pos: 0, lib, depth: 0 }
    }

    /// An error at the current offset.
    pub(crate) fn err(&self, msg: impl Into<String>) -> Error {
        Error::Format { at: self.pos, msg: msg.into() }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.err(format!("truncated: {n} byte(s) needed, {} left", self.remaining())));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// A `u32` count of items of at least `min_bytes` bytes each, checked against the
    /// bytes left (so no count can make the reader allocate beyond the input's size).
    pub(crate) fn count(&mut self, min_bytes: usize, what: &str) -> Result<usize> {
        let at = self.pos;
        let n = self.u32()? as usize;
        if n.saturating_mul(min_bytes.max(1)) > self.remaining() {
            return Err(Error::Format {
                at,
                msg: format!("{what} count {n} exceeds the {} byte(s) left", self.remaining()),
            });
        }
        Ok(n)
    }

    pub(crate) fn string(&mut self) -> Result<String> {
        let n = self.count(1, "string byte")?;
        let at = self.pos;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| Error::Format { at, msg: "string is not UTF-8".into() })
    }

    /// A one-byte tag below `n`, named `what` in the error.
    pub(crate) fn tag(&mut self, n: u8, what: &str) -> Result<u8> {
        let t = self.u8()?;
        if t >= n {
            self.pos -= 1;
            return Err(self.err(format!("unknown {what} tag {t}")));
        }
        Ok(t)
    }
}

/// A value with a fixed encoding in the graph format.
pub(crate) trait Wire: Sized {
    /// The fewest bytes an encoded value takes (bounds counts before allocating).
    const MIN_BYTES: usize = 1;
    fn put(&self, w: &mut Writer) -> Result<()>;
    fn get(r: &mut Reader) -> Result<Self>;
}

impl Wire for bool {
    fn put(&self, w: &mut Writer) -> Result<()> {
        w.u8(u8::from(*self));
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self> {
        Ok(r.tag(2, "bool")? == 1)
    }
}

impl Wire for u64 {
    const MIN_BYTES: usize = 8;
    fn put(&self, w: &mut Writer) -> Result<()> {
        w.u64(*self);
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self> {
        r.u64()
    }
}

impl Wire for usize {
    const MIN_BYTES: usize = 8;
    fn put(&self, w: &mut Writer) -> Result<()> {
        w.u64(*self as u64);
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let v = r.u64()?;
        usize::try_from(v).map_err(|_| r.err(format!("size {v} does not fit this platform's usize")))
    }
}

impl Wire for i64 {
    const MIN_BYTES: usize = 8;
    fn put(&self, w: &mut Writer) -> Result<()> {
        w.u64(*self as u64);
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self> {
        Ok(r.u64()? as i64)
    }
}

impl Wire for f64 {
    const MIN_BYTES: usize = 8;
    fn put(&self, w: &mut Writer) -> Result<()> {
        w.u64(self.to_bits());
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self> {
        Ok(f64::from_bits(r.u64()?))
    }
}

impl Wire for String {
    const MIN_BYTES: usize = 4;
    fn put(&self, w: &mut Writer) -> Result<()> {
        w.str(self)
    }
    fn get(r: &mut Reader) -> Result<Self> {
        r.string()
    }
}

impl<T: Wire> Wire for Vec<T> {
    const MIN_BYTES: usize = 4;
    fn put(&self, w: &mut Writer) -> Result<()> {
        w.len(self.len(), "list")?;
        self.iter().try_for_each(|x| x.put(w))
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let n = r.count(T::MIN_BYTES, "list")?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(T::get(r)?);
        }
        Ok(v)
    }
}

impl<T: Wire> Wire for Option<T> {
    fn put(&self, w: &mut Writer) -> Result<()> {
        match self {
            None => {
                w.u8(0);
                Ok(())
            }
            Some(x) => {
                w.u8(1);
                x.put(w)
            }
        }
    }
    fn get(r: &mut Reader) -> Result<Self> {
        Ok(if r.tag(2, "option")? == 1 { Some(T::get(r)?) } else { None })
    }
}

impl<A: Wire, B: Wire> Wire for (A, B) {
    const MIN_BYTES: usize = A::MIN_BYTES + B::MIN_BYTES;
    fn put(&self, w: &mut Writer) -> Result<()> {
        self.0.put(w)?;
        self.1.put(w)
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let a = A::get(r)?;
        Ok((a, B::get(r)?))
    }
}

impl Wire for [usize; 2] {
    const MIN_BYTES: usize = 16;
    fn put(&self, w: &mut Writer) -> Result<()> {
        self[0].put(w)?;
        self[1].put(w)
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let a = usize::get(r)?;
        Ok([a, usize::get(r)?])
    }
}

/// Tags of the dtypes: stable, a new dtype takes the next free number.
const DTYPES: [DType; 4] = [DType::F32, DType::F64, DType::I64, DType::Bool];

impl Wire for DType {
    fn put(&self, w: &mut Writer) -> Result<()> {
        w.u8(match self {
            DType::F32 => 0,
            DType::F64 => 1,
            DType::I64 => 2,
            DType::Bool => 3,
        });
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self> {
        Ok(DTYPES[r.tag(DTYPES.len() as u8, "dtype")? as usize])
    }
}

impl Wire for Dim {
    fn put(&self, w: &mut Writer) -> Result<()> {
        match self {
            Dim::Fixed(n) => {
                w.u8(0);
                n.put(w)
            }
            Dim::Dynamic(None) => {
                w.u8(1);
                Ok(())
            }
            Dim::Dynamic(Some(name)) => {
                w.u8(2);
                w.str(name)
            }
        }
    }
    fn get(r: &mut Reader) -> Result<Self> {
        Ok(match r.tag(3, "dim")? {
            0 => Dim::Fixed(usize::get(r)?),
            1 => Dim::Dynamic(None),
            _ => Dim::Dynamic(Some(Arc::from(r.string()?.as_str()))),
        })
    }
}

impl Wire for TensorType {
    const MIN_BYTES: usize = 5;
    fn put(&self, w: &mut Writer) -> Result<()> {
        self.dtype.put(w)?;
        w.len(self.shape.0.len(), "dim")?;
        self.shape.0.iter().try_for_each(|d| d.put(w))
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let dtype = DType::get(r)?;
        let dims: Vec<Dim> = Vec::get(r)?;
        Ok(TensorType::new(dtype, Shape::from_dims(dims)))
    }
}

impl Wire for Tensor {
    const MIN_BYTES: usize = 5;
    fn put(&self, w: &mut Writer) -> Result<()> {
        self.dtype().put(w)?;
        self.shape().to_vec().put(w)?;
        // Elements in row-major (logical) order, whatever the array's memory layout.
        match self {
            Tensor::F32(a) => a.iter().for_each(|x| w.buf.extend_from_slice(&x.to_le_bytes())),
            Tensor::F64(a) => a.iter().for_each(|x| w.buf.extend_from_slice(&x.to_le_bytes())),
            Tensor::I64(a) => a.iter().for_each(|x| w.buf.extend_from_slice(&x.to_le_bytes())),
            Tensor::Bool(a) => a.iter().for_each(|x| w.buf.push(u8::from(*x))),
        }
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let dtype = DType::get(r)?;
        let shape: Vec<usize> = Vec::get(r)?;
        let at = r.pos;
        let bytes = shape.iter().try_fold(dtype.size(), |a, &d| a.checked_mul(d));
        let Some(bytes) = bytes else {
            return Err(r.err(format!("tensor shape {shape:?} overflows")));
        };
        let data = r.take(bytes)?;
        let t = match dtype {
            DType::F32 => Tensor::from_vec(&shape, le_words(data, f32::from_le_bytes)),
            DType::F64 => Tensor::from_vec(&shape, le_words(data, f64::from_le_bytes)),
            DType::I64 => Tensor::from_vec(&shape, le_words(data, i64::from_le_bytes)),
            DType::Bool => {
                if let Some(k) = data.iter().position(|&b| b > 1) {
                    return Err(Error::Format { at: at + k, msg: format!("bool element {k} is {}", data[k]) });
                }
                Tensor::from_vec(&shape, data.iter().map(|&b| b == 1).collect::<Vec<bool>>())
            }
        };
        t.map_err(|e| Error::Format { at, msg: format!("tensor {dtype}{shape:?}: {e}") })
    }
}

/// The little-endian words of `data` (whose length is a multiple of `N`).
fn le_words<T, const N: usize>(data: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    data.chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            f(a)
        })
        .collect()
}

impl Wire for FunctionSignature {
    const MIN_BYTES: usize = 8;
    fn put(&self, w: &mut Writer) -> Result<()> {
        self.params.put(w)?;
        self.results.put(w)
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let params = Vec::get(r)?;
        Ok(FunctionSignature { params, results: Vec::get(r)? })
    }
}

impl Wire for Padding {
    fn put(&self, w: &mut Writer) -> Result<()> {
        match self {
            Padding::Valid => w.u8(0),
            Padding::Same => w.u8(1),
            Padding::Explicit([(t, b), (l, r)]) => {
                w.u8(2);
                for v in [t, b, l, r] {
                    v.put(w)?;
                }
            }
        }
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self> {
        Ok(match r.tag(3, "padding")? {
            0 => Padding::Valid,
            1 => Padding::Same,
            _ => {
                let [t, b] = <[usize; 2]>::get(r)?;
                let [l, rt] = <[usize; 2]>::get(r)?;
                Padding::Explicit([(t, b), (l, rt)])
            }
        })
    }
}

impl Wire for PadMode {
    fn put(&self, w: &mut Writer) -> Result<()> {
        match self {
            PadMode::Constant(v) => {
                w.u8(0);
                v.put(w)
            }
            PadMode::Reflect => {
                w.u8(1);
                Ok(())
            }
            PadMode::Symmetric => {
                w.u8(2);
                Ok(())
            }
        }
    }
    fn get(r: &mut Reader) -> Result<Self> {
        Ok(match r.tag(3, "pad mode")? {
            0 => PadMode::Constant(f64::get(r)?),
            1 => PadMode::Reflect,
            _ => PadMode::Symmetric,
        })
    }
}

impl Wire for Conv2dParams {
    const MIN_BYTES: usize = 33;
    fn put(&self, w: &mut Writer) -> Result<()> {
        self.strides.put(w)?;
        self.padding.put(w)?;
        self.dilations.put(w)
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let strides = Wire::get(r)?;
        let padding = Wire::get(r)?;
        Ok(Conv2dParams { strides, padding, dilations: Wire::get(r)? })
    }
}

impl Wire for IterationCap {
    const MIN_BYTES: usize = 9;
    fn put(&self, w: &mut Writer) -> Result<()> {
        self.max_iterations.put(w)?;
        w.u8(match self.on_limit {
            OnLimit::Stop => 0,
            OnLimit::Error => 1,
        });
        Ok(())
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let max_iterations = u64::get(r)?;
        let on_limit = if r.tag(2, "on-limit")? == 0 { OnLimit::Stop } else { OnLimit::Error };
        Ok(IterationCap { max_iterations, on_limit })
    }
}
