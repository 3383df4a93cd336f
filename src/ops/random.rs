//! Counter-based random numbers with explicit keys (no hidden state): the same key always
//! gives the same values, and results do not depend on evaluation order.
//!
//! Key rule (what makes vectorization exact): every generator takes an i64 `key` input of
//! any shape `K`; the output is `K ++ shape`, and the block of outputs of key element `k`
//! is drawn from stream `k as u64` with counters `0..prod(shape)` (row-major). So a generator
//! fed keys `[n]` yields, in row `r`, exactly what it yields for the scalar key `key[r]`.
//! Per kind:
//! - `random_uniform` / `random_normal`: float `dtype`; uniform values lie in `[low, high)`
//!   (the nearest representable value below `high` replaces any rounding up to `high`);
//!   normal values come from the ziggurat on the counter stream (`tensor::stream_normal`);
//! - `random_categorical`: key shape = batch shape `B` of logits `[B..., C]`; sample `s`
//!   of batch element `b` inverts the CDF of `softmax(logits[b])` at
//!   `counter_uniform(key[b], s)`;
//! - `random_bernoulli`: `u < p` for a scalar float `p`;
//! - `dropout`: key scalar or of shape equal to a prefix `P` of `x`'s shape; each prefix
//!   row has its own stream with row-major counters over the remaining dims; keeps `x / (1 - rate)`
//!   where `u >= rate`, zero elsewhere; `rate` in `[0, 1)`;
//! - `fold_in`: pure `mix_key(key, data)` with broadcasting (not stateful).
//!
//! Attribute errors (bad rate, non-float dtype, `low >= high`, negative `stddev`...) are
//! reported when the node is built.

use std::fmt;

use ndarray::{ArcArray, IxDyn, NdFloat};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::kernels::alloc::{checked_len, try_vec};
use crate::ops::unary::PAR_THRESHOLD;
use crate::ops::util::zip2;
use crate::ops::{Op, Raises, broadcast_static, expect_arity, expect_dtype, expect_float};
use crate::tensor::{
    DType, Dim, Element, Shape, Tensor, TensorType, counter_uniform, mix_key, stream_base, stream_normal,
    stream_uniform,
};

/// Ops of the random family.
#[derive(Clone, Debug, PartialEq)]
pub enum RandomOp {
    /// Uniform values in `[low, high)`; input `(key)`.
    RandomUniform {
        /// Per-key sample shape.
        shape: Vec<usize>,
        /// Output float dtype.
        dtype: DType,
        /// Inclusive lower bound.
        low: f64,
        /// Exclusive upper bound.
        high: f64,
    },
    /// Normal values; input `(key)`.
    RandomNormal {
        /// Per-key sample shape.
        shape: Vec<usize>,
        /// Output float dtype.
        dtype: DType,
        /// Mean.
        mean: f64,
        /// Standard deviation (`>= 0`).
        stddev: f64,
    },
    /// Category indices sampled from `softmax(logits)`; inputs `(key [B...], logits [B..., C])`,
    /// output i64 `[B..., num_samples]`.
    RandomCategorical {
        /// Samples per batch element.
        num_samples: usize,
    },
    /// Booleans `u < p`; inputs `(key, p scalar float)`.
    RandomBernoulli {
        /// Per-key sample shape.
        shape: Vec<usize>,
    },
    /// Inverted dropout; inputs `(key, x)`.
    Dropout {
        /// Drop probability in `[0, 1)`.
        rate: f64,
    },
    /// Derive keys: `mix_key(key, data)` elementwise with broadcasting; inputs `(key, data)`.
    FoldIn,
}

/// Kinds of the random family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RandomKind {
    /// `random_uniform`.
    RandomUniform,
    /// `random_normal`.
    RandomNormal,
    /// `random_categorical`.
    RandomCategorical,
    /// `random_bernoulli`.
    RandomBernoulli,
    /// `dropout`.
    Dropout,
    /// `fold_in`.
    FoldIn,
}

impl RandomKind {
    /// Every kind.
    pub const ALL: &'static [RandomKind] = &[
        RandomKind::RandomUniform,
        RandomKind::RandomNormal,
        RandomKind::RandomCategorical,
        RandomKind::RandomBernoulli,
        RandomKind::Dropout,
        RandomKind::FoldIn,
    ];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {
            RandomKind::RandomUniform => "random_uniform",
            RandomKind::RandomNormal => "random_normal",
            RandomKind::RandomCategorical => "random_categorical",
            RandomKind::RandomBernoulli => "random_bernoulli",
            RandomKind::Dropout => "dropout",
            RandomKind::FoldIn => "fold_in",
        }
    }
    /// Which inputs' values can make the op fail ([`Raises`]): the logits of
    /// `random_categorical` (a row without a finite maximum); the other generators' bad
    /// parameters are attributes, checked when the node is built.
    pub fn raises(self) -> Raises {
        match self {
            RandomKind::RandomCategorical => Raises::On(&[1]),
            _ => Raises::Never,
        }
    }
}

fn invalid(op: &str, msg: impl fmt::Display) -> Error {
    Error::InvalidArgument(format!("{op}: {msg}"))
}

/// `K ++ shape`.
fn key_then(key: &Shape, shape: &[usize]) -> Shape {
    Shape::from_dims(key.dims().iter().cloned().chain(shape.iter().map(|&d| Dim::Fixed(d))))
}

/// Error unless the concrete `key` shape equals the first dims of `x`'s shape.
fn check_key_prefix(op: &str, key: &[usize], shape: &[usize]) -> Result<()> {
    if key.len() > shape.len() || key != &shape[..key.len()] {
        return Err(Error::shape(op, format!("key shape {key:?} must be scalar or a prefix of x's shape {shape:?}")));
    }
    Ok(())
}

impl RandomOp {
    /// The kind.
    pub fn kind(&self) -> RandomKind {
        match self {
            RandomOp::RandomUniform { .. } => RandomKind::RandomUniform,
            RandomOp::RandomNormal { .. } => RandomKind::RandomNormal,
            RandomOp::RandomCategorical { .. } => RandomKind::RandomCategorical,
            RandomOp::RandomBernoulli { .. } => RandomKind::RandomBernoulli,
            RandomOp::Dropout { .. } => RandomKind::Dropout,
            RandomOp::FoldIn => RandomKind::FoldIn,
        }
    }

    /// Shape and dtype inference (also validates the attributes).
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        let arity = match self {
            RandomOp::RandomUniform { .. } | RandomOp::RandomNormal { .. } => 1,
            _ => 2,
        };
        expect_arity(op, inputs, arity)?;
        let key = &inputs[0];
        expect_dtype(op, key, DType::I64)?;
        let ty = |dtype: DType, shape: Shape| Ok(vec![TensorType { dtype, shape }]);
        match self {
            RandomOp::RandomUniform { shape, dtype, low, high } => {
                if !dtype.is_float() {
                    return Err(Error::dtype(op, "a float type (f32 or f64)", *dtype));
                }
                if !(low.is_finite() && high.is_finite() && low < high && (high - low).is_finite()) {
                    return Err(invalid(op, format_args!("need finite low < high, got low={low}, high={high}")));
                }
                ty(*dtype, key_then(&key.shape, shape))
            }
            RandomOp::RandomNormal { shape, dtype, mean, stddev } => {
                if !dtype.is_float() {
                    return Err(Error::dtype(op, "a float type (f32 or f64)", *dtype));
                }
                if !(mean.is_finite() && stddev.is_finite() && *stddev >= 0.0) {
                    return Err(invalid(op, format_args!("need finite mean and stddev >= 0, got {mean}, {stddev}")));
                }
                ty(*dtype, key_then(&key.shape, shape))
            }
            RandomOp::RandomBernoulli { shape } => {
                let p = &inputs[1];
                expect_float(op, p)?;
                if p.rank() != 0 {
                    return Err(Error::shape(op, format!("p must be a scalar, got {}", p.shape)));
                }
                ty(DType::Bool, key_then(&key.shape, shape))
            }
            RandomOp::RandomCategorical { num_samples } => {
                let logits = &inputs[1];
                expect_float(op, logits)?;
                let r = logits.rank();
                let c = if r == 0 { None } else { Some(logits.shape.dim(r - 1)) };
                let Some(c) = c else {
                    return Err(Error::shape(op, format!("logits must have rank >= 1, got {}", logits.shape)));
                };
                if *num_samples > 0 && c.value() == Some(0) {
                    return Err(Error::shape(op, format!("cannot sample from 0 categories: logits {}", logits.shape)));
                }
                let batch = Shape::from_dims(logits.shape.dims()[..r - 1].iter().cloned());
                let unified: Option<Vec<Dim>> = (key.rank() == batch.rank())
                    .then(|| key.shape.dims().iter().zip(batch.dims()).map(|(a, b)| a.unify(b)).collect())
                    .flatten();
                let Some(mut dims) = unified else {
                    return Err(Error::shape(
                        op,
                        format!("key shape {} must equal the batch shape of logits {}", key.shape, logits.shape),
                    ));
                };
                dims.push(Dim::Fixed(*num_samples));
                ty(DType::I64, Shape::from_dims(dims))
            }
            RandomOp::Dropout { rate } => {
                if !(0.0..1.0).contains(rate) {
                    return Err(invalid(op, format_args!("rate must be in [0, 1), got {rate}")));
                }
                let x = &inputs[1];
                expect_float(op, x)?;
                let k = key.rank();
                let ok = k <= x.rank() && key.shape.dims().iter().zip(x.shape.dims()).all(|(a, b)| a.compatible(b));
                if !ok {
                    return Err(Error::shape(
                        op,
                        format!("key shape {} must be scalar or a prefix of x's shape {}", key.shape, x.shape),
                    ));
                }
                let dims = x.shape.dims().iter().enumerate().map(|(i, d)| {
                    if i < k { d.unify(key.shape.dim(i)).unwrap_or_else(|| d.clone()) } else { d.clone() }
                });
                ty(x.dtype, Shape::from_dims(dims))
            }
            RandomOp::FoldIn => {
                expect_dtype(op, &inputs[1], DType::I64)?;
                ty(DType::I64, broadcast_static(op, &key.shape, &inputs[1].shape)?)
            }
        }
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        let mut it = inputs.into_iter();
        let key = it.next().ok_or_else(|| Error::arity(op, "at least 1", 0))?.into_array::<i64>()?;
        let second = it.next();
        let keys: Vec<u64> = key.iter().map(|&k| k as u64).collect();
        let need = || Error::arity(op, "2", 1);
        let out_shape = |shape: &[usize]| -> Vec<usize> { key.shape().iter().chain(shape).copied().collect() };
        let out = match self {
            RandomOp::RandomUniform { shape, dtype, low, high } => {
                let (low, high) = (*low, *high);
                crate::dispatch_float!(*dtype, T => {
                    let (lo, cap) = (T::from_f64(low), below::<T>(high));
                    let n = checked_len(op, shape)?;
                    let data = generate(op, &keys, n, |k, c| {
                        let v = T::from_f64(low + (high - low) * stream_uniform(k, c));
                        if v > cap { cap } else if v < lo { lo } else { v }
                    })?;
                    Tensor::from_vec(&out_shape(shape), data)?
                }, _ => return Err(Error::dtype(op, "a float type (f32 or f64)", *dtype)))
            }
            RandomOp::RandomNormal { shape, dtype, mean, stddev } => {
                let (mean, stddev) = (*mean, *stddev);
                crate::dispatch_float!(*dtype, T => {
                    let n = checked_len(op, shape)?;
                    let data = generate(op, &keys, n, |k, c| T::from_f64(mean + stddev * stream_normal(k, c)))?;
                    Tensor::from_vec(&out_shape(shape), data)?
                }, _ => return Err(Error::dtype(op, "a float type (f32 or f64)", *dtype)))
            }
            RandomOp::RandomBernoulli { shape } => {
                let p = second.ok_or_else(need)?.scalar_f64()?;
                let data = generate(op, &keys, checked_len(op, shape)?, |k, c| stream_uniform(k, c) < p)?;
                Tensor::from_vec(&out_shape(shape), data)?
            }
            RandomOp::RandomCategorical { num_samples } => {
                let logits = second.ok_or_else(need)?;
                let ls = logits.shape();
                if key.shape() != &ls[..ls.len().saturating_sub(1)] {
                    return Err(Error::shape(
                        op,
                        format!("key shape {:?} must equal the batch shape of logits {ls:?}", key.shape()),
                    ));
                }
                crate::dispatch_float!(logits.dtype(), T => {
                    categorical::<T>(op, &keys, logits.into_array::<T>()?, *num_samples, &out_shape(&[*num_samples]))?
                }, _ => return Err(Error::dtype(op, "a float type (f32 or f64)", logits.dtype())))
            }
            RandomOp::Dropout { rate } => {
                let x = second.ok_or_else(need)?;
                check_key_prefix(op, key.shape(), x.shape())?;
                let rate = *rate;
                crate::dispatch_float!(x.dtype(), T => {
                    dropout::<T>(op, &keys, x.into_array::<T>()?, rate)?
                }, _ => return Err(Error::dtype(op, "a float type (f32 or f64)", x.dtype())))
            }
            RandomOp::FoldIn => {
                let data = second.ok_or_else(need)?.into_array::<i64>()?;
                Tensor::from_array(zip2(op, &key, &data, |k, d| mix_key(k as u64, d as u64) as i64)?)
            }
        };
        Ok(vec![out])
    }

    /// Whether pfor must treat the op as stateful: true for every generator, false for the
    /// pure `fold_in`.
    pub fn is_stateful(&self) -> bool {
        !matches!(self, RandomOp::FoldIn)
    }
}

/// The next representable value toward minus infinity.
trait NextDown {
    fn next_below(self) -> Self;
}
impl NextDown for f32 {
    fn next_below(self) -> f32 {
        self.next_down()
    }
}
impl NextDown for f64 {
    fn next_below(self) -> f64 {
        self.next_down()
    }
}

/// The largest `T` whose value is strictly below `high`.
fn below<T: Element + NextDown>(high: f64) -> T {
    let mut t = T::from_f64(high);
    while t.to_f64() >= high {
        t = t.next_below();
    }
    t
}

/// Chunk size of the parallel generator loops.
const CHUNK: usize = 1 << 14;

/// Fill `keys.len() * n` outputs: element `i` is `f(stream_base(keys[i / n]), i % n)`
/// (allocated fallibly: an `Err` naming `op`, never an abort). Each stream's base is mixed
/// once, and chunks walk (row, counter) incrementally (no division per element).
fn generate<T: Send + Copy + Default>(
    op: &str,
    keys: &[u64],
    n: usize,
    f: impl Fn(u64, u64) -> T + Sync + Send,
) -> Result<Vec<T>> {
    let total = checked_len(op, &[keys.len(), n])?;
    let mut out = try_vec(op, total)?;
    out.resize(total, T::default());
    let bases: Vec<u64> = keys.iter().map(|&k| stream_base(k)).collect();
    let fill = |start: usize, chunk: &mut [T]| {
        let (mut row, mut c) = (start / n, start % n);
        for v in chunk {
            *v = f(bases[row], c as u64);
            c += 1;
            if c == n {
                (row, c) = (row + 1, 0);
            }
        }
    };
    if total >= PAR_THRESHOLD {
        out.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, ch)| fill(ci * CHUNK, ch));
    } else if total > 0 {
        fill(0, &mut out);
    }
    Ok(out)
}

/// Dropout in place: row `i / n` of the key-prefix rows uses stream `keys[i / n]`, counter `i % n`.
fn dropout<T: Element + NdFloat>(op: &str, keys: &[u64], x: ArcArray<T, IxDyn>, rate: f64) -> Result<Tensor> {
    let mut a = if x.is_standard_layout() { x } else { x.as_standard_layout().into_owned().into_shared() };
    let s = a.as_slice_mut().ok_or_else(|| Error::unsupported(op, "internal: non-contiguous buffer"))?;
    let n = s.len().checked_div(keys.len()).unwrap_or(0);
    let scale = T::from_f64(1.0 / (1.0 - rate));
    let apply = |start: usize, chunk: &mut [T]| {
        for (j, v) in chunk.iter_mut().enumerate() {
            let i = start + j;
            let keep = counter_uniform(keys[i / n], (i % n) as u64) >= rate;
            *v = if keep { *v * scale } else { T::zero() };
        }
    };
    if s.len() >= PAR_THRESHOLD {
        s.par_chunks_mut(CHUNK).enumerate().for_each(|(ci, ch)| apply(ci * CHUNK, ch));
    } else {
        apply(0, s);
    }
    Ok(T::wrap(a))
}

/// Inverse-CDF sampling from `softmax(logits[b])` with uniforms of stream `keys[b]`.
fn categorical<T: Element + NdFloat>(
    op: &str,
    keys: &[u64],
    logits: ArcArray<T, IxDyn>,
    num_samples: usize,
    out_shape: &[usize],
) -> Result<Tensor> {
    let c = logits.shape().last().copied().unwrap_or(0);
    let mut out = try_vec(op, checked_len(op, out_shape)?)?;
    if num_samples > 0 && !keys.is_empty() {
        if c == 0 {
            return Err(Error::shape(op, "cannot sample from 0 categories"));
        }
        let lc = logits.as_standard_layout();
        let ls = lc.as_slice().ok_or_else(|| Error::unsupported(op, "internal: non-contiguous buffer"))?;
        let mut cdf = vec![0.0f64; c];
        for (row, &k) in ls.chunks_exact(c).zip(keys) {
            let m = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(Element::to_f64(v)));
            let mut total = 0.0;
            for (p, &v) in cdf.iter_mut().zip(row) {
                total += (Element::to_f64(v) - m).exp();
                *p = total;
            }
            if !(total.is_finite() && total > 0.0) || row.iter().any(|v| v.is_nan()) {
                return Err(Error::Numerical {
                    op: op.into(),
                    msg: format!("logits row has no finite maximum (max {m}); cannot form probabilities"),
                });
            }
            // The last category with nonzero probability (guards rounding at the top end).
            let last = cdf.iter().position(|&p| p >= total).unwrap_or(c - 1);
            for s in 0..num_samples {
                let target = counter_uniform(k, s as u64) * total;
                out.push(cdf.partition_point(|&p| p <= target).min(last) as i64);
            }
        }
    }
    Tensor::from_vec(out_shape, out)
}

impl fmt::Display for RandomOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.kind().name();
        match self {
            RandomOp::RandomUniform { shape, dtype, low, high } => {
                write!(f, "{name}{{shape={shape:?}, dtype={dtype}, low={low}, high={high}}}")
            }
            RandomOp::RandomNormal { shape, dtype, mean, stddev } => {
                write!(f, "{name}{{shape={shape:?}, dtype={dtype}, mean={mean}, stddev={stddev}}}")
            }
            RandomOp::RandomCategorical { num_samples } => write!(f, "{name}{{num_samples={num_samples}}}"),
            RandomOp::RandomBernoulli { shape } => write!(f, "{name}{{shape={shape:?}}}"),
            RandomOp::Dropout { rate } => write!(f, "{name}{{rate={rate}}}"),
            RandomOp::FoldIn => f.write_str(name),
        }
    }
}

impl Graph {
    /// Uniform `dtype` values in `[low, high)` of shape `key.shape ++ shape` (stream = key element).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let key = g.constant(Tensor::scalar(42i64));
    /// let u = g.random_uniform(key, &[1000], DType::F64, -1.0, 1.0)?;
    /// let r = run_once(&g, &[u], &[])?;
    /// assert!(r[0].to_f64_vec().iter().all(|v| (-1.0..1.0).contains(v)));
    /// assert_eq!(r[0], run_once(&g, &[u], &[])?[0]); // the same key: the same numbers
    /// # Ok(())
    /// # }
    /// ```
    pub fn random_uniform(
        &mut self,
        key: ValueId,
        shape: &[usize],
        dtype: DType,
        low: f64,
        high: f64,
    ) -> Result<ValueId> {
        self.add_op(Op::Random(RandomOp::RandomUniform { shape: shape.to_vec(), dtype, low, high }), &[key])
    }
    /// Normal `dtype` values of shape `key.shape ++ shape` (stream = key element).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let keys = g.constant(Tensor::vec1(&[1i64, 2])); // two streams
    /// let z = g.random_normal(keys, &[3], DType::F32, 0.0, 1.0)?;
    /// assert_eq!(g.shape(z)?.as_fixed(), Some(vec![2, 3]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn random_normal(
        &mut self,
        key: ValueId,
        shape: &[usize],
        dtype: DType,
        mean: f64,
        stddev: f64,
    ) -> Result<ValueId> {
        self.add_op(Op::Random(RandomOp::RandomNormal { shape: shape.to_vec(), dtype, mean, stddev }), &[key])
    }
    /// `num_samples` category indices (i64 `[B..., num_samples]`) per row of `logits [B..., C]`;
    /// `key` has shape `B` (a scalar for 1-D logits).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let key = g.constant(Tensor::scalar(0i64));
    /// let logits = g.constant(Tensor::vec1(&[0.0f32, 100.0, 0.0])); // almost surely 1
    /// let s = g.random_categorical(key, logits, 4)?;
    /// assert_eq!(run_once(&g, &[s], &[])?[0].to_vec::<i64>()?, [1, 1, 1, 1]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn random_categorical(&mut self, key: ValueId, logits: ValueId, num_samples: usize) -> Result<ValueId> {
        self.add_op(Op::Random(RandomOp::RandomCategorical { num_samples }), &[key, logits])
    }
    /// Booleans `u < p` of shape `key.shape ++ shape` for a scalar float `p`.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let key = g.constant(Tensor::scalar(0i64));
    /// let p = g.constant(Tensor::scalar(1.0f32)); // always true
    /// let b = g.random_bernoulli(key, p, &[3])?;
    /// assert_eq!(run_once(&g, &[b], &[])?[0].to_vec::<bool>()?, [true; 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn random_bernoulli(&mut self, key: ValueId, p: ValueId, shape: &[usize]) -> Result<ValueId> {
        self.add_op(Op::Random(RandomOp::RandomBernoulli { shape: shape.to_vec() }), &[key, p])
    }
    /// Inverted dropout of `x` with drop probability `rate` in `[0, 1)`; `key` is a scalar or
    /// has the shape of a prefix of `x`'s shape (one stream per prefix row).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let x = g.constant(Tensor::ones(DType::F32, &[1000])?);
    /// let key = g.constant(Tensor::scalar(3i64));
    /// let y = g.dropout(x, key, 0.5)?;
    /// // kept elements are scaled by 1 / (1 - rate)
    /// let v = run_once(&g, &[y], &[])?[0].to_vec::<f32>()?;
    /// assert!(v.iter().all(|&e| e == 0.0 || e == 2.0));
    /// # Ok(())
    /// # }
    /// ```
    pub fn dropout(&mut self, x: ValueId, key: ValueId, rate: f64) -> Result<ValueId> {
        self.add_op(Op::Random(RandomOp::Dropout { rate }), &[key, x])
    }
    /// Derive new keys `mix_key(key, data)` elementwise (i64, broadcasting).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let key = g.constant(Tensor::scalar(7i64));
    /// let steps = g.constant(Tensor::vec1(&[0i64, 1, 2]));
    /// let keys = g.fold_in(key, steps)?; // one key per step, derived from one seed
    /// let k = run_once(&g, &[keys], &[])?[0].to_vec::<i64>()?;
    /// assert!(k[0] != k[1] && k[1] != k[2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn fold_in(&mut self, key: ValueId, data: ValueId) -> Result<ValueId> {
        self.add_op(Op::Random(RandomOp::FoldIn), &[key, data])
    }
}
