//! Matrix products: `matmul` (rank-2 operands) and `batch_matmul` (batched, numpy-style
//! broadcasting of the leading batch dims). The builder [`Graph::matmul`] takes operands of
//! any rank (numpy / TF `matmul`: rank-1 promotion, broadcast batch dims) and lowers them to
//! these two kinds, so converters and derivative rules only ever see them.
//!
//! Invariants:
//! - both operands have the same numeric dtype (f32, f64 or i64); the output has it too;
//! - `matmul{transpose_a, transpose_b}`: `op(a)` is `[m, k]`, `op(b)` is `[k, n]`, output `[m, n]`
//!   (`op` transposes when its flag is set);
//! - `batch_matmul{adj_a, adj_b}`: operands are `[..., r, c]` with rank >= 2 (ranks may differ);
//!   the last two dims are the matrices (adjoint = transpose, the dtypes are real), the leading
//!   dims broadcast like numpy; output `[broadcast batch..., m, n]`. A rank-1 operand is an
//!   error (add a unit dim with `expand_dims` first);
//! - the inner dims must agree (an `Err` naming both shapes); `k = 0` gives zeros.
//!
//! Kernels call [`crate::kernels::gemm::gemm`] directly on the operands' buffers: a standard
//! layout operand, or one whose last two axes are a transposed view of a standard layout
//! buffer, is never copied (the transpose flag is flipped instead). When the rhs is one matrix
//! for the whole batch and the lhs is not transposed, the lhs batch is folded into the rows of a
//! single GEMM; otherwise the batch is looped, on rayon when items are small and numerous.

use std::borrow::Cow;
use std::fmt;

use ndarray::{ArcArray, IxDyn};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::kernels::alloc::{Zeroable, checked_len, try_zeroed};
use crate::kernels::gemm::{GemmElem, PAR_FLOPS, atb_batched, gemm};
use crate::ops::EvalCtx;
use crate::ops::{Op, Raises, broadcast_shapes, broadcast_static, expect_arity};
use crate::tensor::{Dim, Element, Shape, Tensor, TensorType};

/// Outer-product outputs at least this large (twice the last-level cache here) are written
/// with streaming stores (`GemmElem::outer_rows`).
const STREAM_BYTES: usize = 64 << 20;

/// Outer-product outputs at least this long are written on rayon (memory-bound: worth it
/// well below the GEMM threshold).
const OUTER_PAR: usize = 1 << 18;

/// Total multiply-adds of a batched product above which small items are spread over rayon.
const BATCH_PAR_FLOPS: usize = 1 << 16;

/// Ops of the linear family.
#[derive(Clone, Debug, PartialEq)]
pub enum LinearOp {
    /// `op(a) · op(b)` for rank-2 `a`, `b`.
    MatMul {
        /// Use `aᵀ` (a is stored `[k, m]`).
        transpose_a: bool,
        /// Use `bᵀ` (b is stored `[n, k]`).
        transpose_b: bool,
    },
    /// Batched matrix product over the last two dims, broadcasting the leading dims.
    BatchMatMul {
        /// Use the adjoint (transpose) of each `a` matrix.
        adj_a: bool,
        /// Use the adjoint (transpose) of each `b` matrix.
        adj_b: bool,
    },
}

/// Kinds of the linear family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinearKind {
    /// [`LinearOp::MatMul`].
    MatMul,
    /// [`LinearOp::BatchMatMul`].
    BatchMatMul,
}

impl LinearKind {
    /// Every kind.
    pub const ALL: &'static [LinearKind] = &[LinearKind::MatMul, LinearKind::BatchMatMul];
    /// The op name.
    pub fn name(self) -> &'static str {
        match self {
            LinearKind::MatMul => "matmul",
            LinearKind::BatchMatMul => "batch_matmul",
        }
    }
    /// Which inputs' values can make the op fail ([`Raises`]): none.
    pub fn raises(self) -> Raises {
        Raises::Never
    }
}

impl LinearOp {
    /// The kind.
    pub fn kind(&self) -> LinearKind {
        match self {
            LinearOp::MatMul { .. } => LinearKind::MatMul,
            LinearOp::BatchMatMul { .. } => LinearKind::BatchMatMul,
        }
    }

    /// `(adj_a, adj_b)` whatever the kind.
    fn flags(&self) -> (bool, bool) {
        match *self {
            LinearOp::MatMul { transpose_a, transpose_b } => (transpose_a, transpose_b),
            LinearOp::BatchMatMul { adj_a, adj_b } => (adj_a, adj_b),
        }
    }

    /// Shape and dtype inference.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        let op = self.kind().name();
        expect_arity(op, inputs, 2)?;
        let (a, b) = (&inputs[0], &inputs[1]);
        if !a.dtype.is_numeric() {
            return Err(Error::dtype(op, "a numeric type (f32, f64 or i64)", a.dtype));
        }
        if b.dtype != a.dtype {
            return Err(Error::dtype(op, format!("{} (same as input 0)", a.dtype), b.dtype));
        }
        let (ra, rb) = (a.rank(), b.rank());
        match self {
            LinearOp::MatMul { .. } if ra != 2 || rb != 2 => {
                return Err(Error::shape(
                    op,
                    format!(
                        "operands must be rank 2, got {} and {} (`Graph::matmul` lowers other ranks to batch_matmul)",
                        a.shape, b.shape
                    ),
                ));
            }
            LinearOp::BatchMatMul { .. } if ra < 2 || rb < 2 => {
                return Err(Error::shape(
                    op,
                    format!(
                        "operands must have rank >= 2, got {} and {} (use expand_dims to make a vector a matrix)",
                        a.shape, b.shape
                    ),
                ));
            }
            _ => {}
        }
        let (adj_a, adj_b) = self.flags();
        let da = a.shape.dims();
        let db = b.shape.dims();
        let (m, ka) = mat_dims(&da[ra - 2..], adj_a);
        let (kb, n) = mat_dims(&db[rb - 2..], adj_b);
        if ka.unify(kb).is_none() {
            return Err(inner_mismatch(op, &a.shape, &b.shape, adj_a, adj_b));
        }
        let batch =
            broadcast_static(op, &Shape::from_dims(da[..ra - 2].to_vec()), &Shape::from_dims(db[..rb - 2].to_vec()))
                .map_err(|_| Error::shape(op, format!("batch dims of {} and {} do not broadcast", a.shape, b.shape)))?;
        let mut dims = batch.0;
        dims.push(m.clone());
        dims.push(n.clone());
        Ok(vec![TensorType { dtype: a.dtype, shape: Shape(dims) }])
    }

    /// Evaluate.
    pub fn eval(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        self.eval_impl(inputs, None)
    }

    /// Evaluate inside a run, writing the output into a recycled buffer when one fits.
    pub(crate) fn eval_in(&self, inputs: Vec<Tensor>, ctx: &mut dyn EvalCtx) -> Result<Vec<Tensor>> {
        self.eval_impl(inputs, Some(ctx))
    }

    fn eval_impl(&self, inputs: Vec<Tensor>, mut ctx: Option<&mut (dyn EvalCtx + '_)>) -> Result<Vec<Tensor>> {
        let op = self.kind().name();
        expect_arity(op, &inputs, 2)?;
        let (adj_a, adj_b) = self.flags();
        let (a, b) = (&inputs[0], &inputs[1]);
        if a.dtype() != b.dtype() {
            return Err(Error::dtype(op, format!("{} (same as input 0)", a.dtype()), b.dtype()));
        }
        if a.rank() < 2 || b.rank() < 2 {
            return Err(Error::shape(
                op,
                format!("operands must have rank >= 2, got {:?} and {:?}", a.shape(), b.shape()),
            ));
        }
        let out = crate::dispatch_numeric!(a.dtype(), T => {
            T::wrap(batched_product::<T>(op, a.array::<T>()?, adj_a, b.array::<T>()?, adj_b, ctx.as_deref_mut())?)
        }, _ => return Err(Error::dtype(op, "a numeric type (f32, f64 or i64)", a.dtype())));
        if let Some(ctx) = ctx {
            // large operands read for the last time (e.g. window patches) serve later kernels
            for t in inputs {
                ctx.recycle(t);
            }
        }
        Ok(vec![out])
    }
}

impl fmt::Display for LinearOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinearOp::MatMul { transpose_a, transpose_b } => {
                write!(f, "matmul{{transpose_a={transpose_a}, transpose_b={transpose_b}}}")
            }
            LinearOp::BatchMatMul { adj_a, adj_b } => write!(f, "batch_matmul{{adj_a={adj_a}, adj_b={adj_b}}}"),
        }
    }
}

/// `(rows, cols)` of `op(x)` for the last two dims `d` of `x`.
fn mat_dims(d: &[Dim], adj: bool) -> (&Dim, &Dim) {
    if adj { (&d[1], &d[0]) } else { (&d[0], &d[1]) }
}

fn inner_mismatch(op: &str, a: &impl fmt::Display, b: &impl fmt::Display, adj_a: bool, adj_b: bool) -> Error {
    Error::shape(op, format!("inner dims differ: lhs {a} (adjoint={adj_a}) times rhs {b} (adjoint={adj_b})"))
}

/// One operand as a GEMM source: a row-major buffer of matrices and the per-item transpose
/// flag that makes each stored matrix the logical `op(x)`.
struct Operand<'a, T: Clone> {
    data: Cow<'a, [T]>,
    /// The transpose flag to pass to gemm.
    trans: bool,
    /// Element offset of the matrix of each output batch item (broadcast applied).
    offsets: Vec<usize>,
    /// Number of distinct matrices stored.
    items: usize,
}

impl<'a, T: GemmElem> Operand<'a, T> {
    /// Borrow `x` when it is standard layout or its last two axes are a transposed view of a
    /// standard layout buffer; copy it to standard layout otherwise.
    fn new(x: &'a ArcArray<T, IxDyn>, adj: bool, out_batch: &[usize]) -> Operand<'a, T> {
        let r = x.ndim();
        let mut swapped = x.view();
        swapped.swap_axes(r - 2, r - 1);
        let (data, stored_transposed) = if let Some(s) = x.as_slice() {
            (Cow::Borrowed(s), false)
        } else if let Some(s) = swapped.to_slice() {
            (Cow::Borrowed(s), true)
        } else {
            (Cow::Owned(crate::tensor::layout::standard_vec(&x.view())), false)
        };
        let shape = x.shape();
        let item = shape[r - 2] * shape[r - 1];
        let own_batch = &shape[..r - 2];
        let items = own_batch.iter().product();
        // Row-major offsets of the output batch items, broadcasting size-1 dims.
        let lead = out_batch.len() - own_batch.len();
        let mut stride = item;
        let mut strides = vec![0; out_batch.len()];
        for (i, &d) in own_batch.iter().enumerate().rev() {
            strides[lead + i] = if d == 1 { 0 } else { stride };
            stride *= d;
        }
        let mut offsets = vec![0usize];
        for (&d, &s) in out_batch.iter().zip(&strides) {
            offsets = offsets.iter().flat_map(|&o| (0..d).map(move |t| o + t * s)).collect();
        }
        Operand { data, trans: adj ^ stored_transposed, offsets, items }
    }

    fn item(&self, i: usize, len: usize) -> &[T] {
        let o = self.offsets[i];
        &self.data[o..o + len]
    }
}

/// The batched product of `op(a)` and `op(b)` (a rank-2 pair is a batch of one).
fn batched_product<T: GemmElem + Zeroable>(
    op: &str,
    a: &ArcArray<T, IxDyn>,
    adj_a: bool,
    b: &ArcArray<T, IxDyn>,
    adj_b: bool,
    ctx: Option<&mut (dyn EvalCtx + '_)>,
) -> Result<ArcArray<T, IxDyn>> {
    let (sa, sb) = (a.shape(), b.shape());
    let (ra, rb) = (sa.len(), sb.len());
    let (m, k) = if adj_a { (sa[ra - 1], sa[ra - 2]) } else { (sa[ra - 2], sa[ra - 1]) };
    let (kb, n) = if adj_b { (sb[rb - 1], sb[rb - 2]) } else { (sb[rb - 2], sb[rb - 1]) };
    if k != kb {
        return Err(inner_mismatch(op, &format!("{sa:?}"), &format!("{sb:?}"), adj_a, adj_b));
    }
    let out_batch = broadcast_shapes(op, &sa[..ra - 2], &sb[..rb - 2])
        .map_err(|_| Error::shape(op, format!("batch dims of {sa:?} and {sb:?} do not broadcast")))?;
    let mut out_shape = out_batch.clone();
    out_shape.extend([m, n]);
    let len = checked_len(op, &out_shape)?;
    let batch = checked_len(op, &out_batch)?;
    let kernels = crate::ops::ctx::kernel_options(ctx.as_deref());
    // A recycled buffer has stale content: every path below overwrites all of it.
    let mut out = match ctx.and_then(|c| c.recycled::<T>(len)) {
        Some(mut v) if k == 0 => {
            v.fill(T::default());
            v
        }
        Some(v) => v,
        None => try_zeroed(op, len)?,
    };
    if !out.is_empty() && k > 0 {
        let lhs = Operand::new(a, adj_a, &out_batch);
        let rhs = Operand::new(b, adj_b, &out_batch);
        let (la, lb) = (m * k, k * n);
        if k == 1 && T::DTYPE.is_float() {
            // Outer products (per-example dense weight gradients): a [m,1] or [1,m] is the same
            // m contiguous values whatever the transpose flag, b likewise; memory-bound, so
            // stream the rows directly (on rayon when large) instead of a packed GEMM. (Floats only:
            // i64 products wrap, as in the GEMM.)
            let stream = len * size_of::<T>() >= STREAM_BYTES;
            // tasks of whole rows, ~64K values each
            let block = (1usize << 16).div_ceil(n).max(1);
            let rows = |(b, chunk): (usize, &mut [T])| {
                // the chunk's rows item by item: each segment has one `x` and one `y` slice
                let (mut g, mut rest) = (b * block, chunk);
                while !rest.is_empty() {
                    let (i, r) = (g / m, g % m);
                    let cnt = (m - r).min(rest.len() / n);
                    let (seg, tail) = std::mem::take(&mut rest).split_at_mut(cnt * n);
                    let (xs, ys) = (&lhs.item(i, la)[r..r + cnt], rhs.item(i, lb));
                    T::outer_rows(seg, n, |t| xs[t], |_| ys, stream);
                    (g, rest) = (g + cnt, tail);
                }
            };
            if len >= OUTER_PAR && rayon::current_num_threads() > 1 {
                out.par_chunks_mut(block * n).enumerate().for_each(rows);
            } else {
                out.chunks_mut(block * n).enumerate().for_each(rows);
            }
        } else if lhs.trans && !rhs.trans && T::has_atb() && atb_batched(kernels, batch, m, k, n) {
            // Aᵀ B of depth-major items (per-example weight gradients), one item per task
            let one = |(i, c): (usize, &mut [T])| {
                let done = T::atb(m, k, n, lhs.item(i, la), rhs.item(i, lb), c);
                debug_assert!(done, "atb declined shapes atb_applies took");
            };
            if batch * m * k * n >= BATCH_PAR_FLOPS && rayon::current_num_threads() > 1 {
                out.par_chunks_mut(m * n).enumerate().for_each(one);
            } else {
                out.chunks_mut(m * n).enumerate().for_each(one);
            }
        } else if rhs.items == 1 && !lhs.trans && lhs.items == batch {
            // One rhs matrix for all: fold the lhs batch into the rows of one GEMM.
            gemm(batch * m, k, n, &lhs.data, false, rhs.item(0, lb), rhs.trans, &mut out, false)?;
        } else {
            let one = |(i, c): (usize, &mut [T])| {
                gemm(m, k, n, lhs.item(i, la), lhs.trans, rhs.item(i, lb), rhs.trans, c, false)
            };
            let per_item = m * k * n;
            if batch > 1
                && per_item < PAR_FLOPS
                && batch * per_item >= BATCH_PAR_FLOPS
                && rayon::current_num_threads() > 1
            {
                out.par_chunks_mut(m * n).enumerate().try_for_each(one)?;
            } else {
                out.chunks_mut(m * n).enumerate().try_for_each(one)?;
            }
        }
    }
    ArcArray::from_shape_vec(IxDyn(&out_shape), out).map_err(|e| Error::shape(op, format!("output {out_shape:?}: {e}")))
}

impl Graph {
    /// Matrix product with numpy / TF `matmul` semantics, for operands of any rank >= 1:
    /// `[..., m, k] · [..., k, n] → [broadcast batch..., m, n]`. A rank-1 lhs `[k]` is read as
    /// `[1, k]` and a rank-1 rhs `[k]` as `[k, 1]`, and the added dim is removed from the
    /// result (vector · vector is a scalar). Lowered to the fast kinds: two rank-2 operands
    /// give one `matmul` node, anything else one `batch_matmul` node (whose batch dims
    /// broadcast), with `expand_dims` / `squeeze` around it for rank-1 operands; pfor and
    /// the derivatives see only those kinds. A rank-0 operand or disagreeing inner dims are
    /// an `Err` naming both shapes.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.input("a", DType::F32, [8, 2, 3]); // a batch of 8 matrices
    /// let w = g.input("w", DType::F32, [3, 4]); // one matrix, broadcast over the batch
    /// let v = g.input("v", DType::F32, [3]);
    /// let aw = g.matmul(a, w)?;
    /// let av = g.matmul(a, v)?; // matrix · vector
    /// let vv = g.matmul(v, v)?; // vector · vector: a scalar
    /// assert_eq!(g.shape(aw)?.as_fixed(), Some(vec![8, 2, 4]));
    /// assert_eq!(g.shape(av)?.as_fixed(), Some(vec![8, 2]));
    /// assert_eq!(g.shape(vv)?.rank(), 0);
    /// assert!(g.matmul(w, w).is_err()); // [3, 4] · [3, 4]: inner dims differ
    /// # Ok(())
    /// # }
    /// ```
    pub fn matmul(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.matmul_t(a, b, false, false)
    }

    /// [`matmul`](Self::matmul) of `op(a)` and `op(b)`, `op` transposing the last two dims
    /// where its flag is set. A rank-1 operand is a vector, the same transposed or not (its
    /// flag is ignored).
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.constant(Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0])?);
    /// let ata = g.matmul_t(a, a, true, false)?; // aᵀ a
    /// assert_eq!(run_once(&g, &[ata], &[])?[0].to_vec::<f32>()?, [10.0, 14.0, 14.0, 20.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn matmul_t(&mut self, a: ValueId, b: ValueId, transpose_a: bool, transpose_b: bool) -> Result<ValueId> {
        let (ra, rb) = (self.value_type(a)?.rank(), self.value_type(b)?.rank());
        if ra == 2 && rb == 2 {
            return self.add_op(Op::Linear(LinearOp::MatMul { transpose_a, transpose_b }), &[a, b]);
        }
        if ra == 0 || rb == 0 {
            let (sa, sb) = (self.shape(a)?, self.shape(b)?);
            return Err(Error::shape("matmul", format!("operands must have rank >= 1, got {sa} and {sb}")));
        }
        let a2 = if ra == 1 { self.expand_dims(a, 0)? } else { a };
        let b2 = if rb == 1 { self.expand_dims(b, -1)? } else { b };
        let (adj_a, adj_b) = (transpose_a && ra > 1, transpose_b && rb > 1);
        let op = if ra <= 2 && rb <= 2 {
            LinearOp::MatMul { transpose_a: adj_a, transpose_b: adj_b }
        } else {
            LinearOp::BatchMatMul { adj_a, adj_b }
        };
        let y = match self.add_op(Op::Linear(op), &[a2, b2]) {
            Ok(y) => y,
            Err(e) => {
                let (sa, sb) = (self.shape(a)?, self.shape(b)?);
                return Err(Error::shape("matmul", format!("operands {sa} and {sb}: {e}")));
            }
        };
        match (ra == 1, rb == 1) {
            (true, true) => self.squeeze(y, Some(&[-2, -1])),
            (true, false) => self.squeeze(y, Some(&[-2])),
            (false, true) => self.squeeze(y, Some(&[-1])),
            (false, false) => Ok(y),
        }
    }

    /// Batched matrix product over the last two dims (rank >= 2 each); leading dims
    /// broadcast. [`matmul`](Self::matmul) accepts this and every other rank.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.input("a", DType::F64, [5, 2, 3]);
    /// let b = g.input("b", DType::F64, [1, 3, 4]); // batch dims broadcast
    /// let c = g.batch_matmul(a, b)?;
    /// assert_eq!(g.shape(c)?.as_fixed(), Some(vec![5, 2, 4]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn batch_matmul(&mut self, a: ValueId, b: ValueId) -> Result<ValueId> {
        self.batch_matmul_t(a, b, false, false)
    }

    /// Batched `adj(a) · adj(b)` over the last two dims, `adj` transposing where asked.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let mut g = Graph::new();
    /// let a = g.input("a", DType::F32, [5, 3, 2]);
    /// let b = g.input("b", DType::F32, [5, 4, 3]);
    /// let c = g.batch_matmul_t(a, b, true, true)?; // aᵀ bᵀ per item
    /// assert_eq!(g.shape(c)?.as_fixed(), Some(vec![5, 2, 4]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn batch_matmul_t(&mut self, a: ValueId, b: ValueId, adj_a: bool, adj_b: bool) -> Result<ValueId> {
        self.add_op(Op::Linear(LinearOp::BatchMatMul { adj_a, adj_b }), &[a, b])
    }
}
