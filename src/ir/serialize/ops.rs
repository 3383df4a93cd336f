//! The encoding of an [`Op`]: its family's tag, its variant's tag and its attributes in
//! declaration order (see `docs/FORMAT.md`).
//!
//! Invariants: each family's table below lists every variant with every field, and the
//! encoder and decoder are generated from the same table, so they cannot disagree; the
//! encoder's `match` is exhaustive, so a new variant (or field) fails to compile until it
//! is listed here. A variant's tag is its Rust identifier (`"MatMul"`), a fieldless kind's
//! tag its op name (`"sin"`): renaming one is a format change (see the versioning rule).

use super::wire::{Reader, Wire, Writer};
use crate::error::{Error, Result};
use crate::ops::{
    BinaryKind, ControlOp, ConvOp, ElementwiseOp, IndexOp, LinalgOp, LinearOp, NnOp, Op, RandomOp, ReduceForm,
    ReduceKind, ReduceOp, ShapeOp, SlicingOp, StateOp, UnaryKind,
};

/// `impl Wire` for a family's op enum from the list of its variants and their fields.
macro_rules! wire_enum {
    ($ty:ident { $($var:ident { $($f:ident),* }),* $(,)? }) => {
        impl Wire for $ty {
            fn put(&self, w: &mut Writer) -> Result<()> {
                match self {
                    $($ty::$var { $($f),* } => {
                        w.str(stringify!($var))?;
                        $($f.put(w)?;)*
                    })*
                }
                Ok(())
            }
            fn get(r: &mut Reader) -> Result<Self> {
                let at = r.pos;
                let tag = r.string()?;
                Ok(match tag.as_str() {
                    $(stringify!($var) => $ty::$var { $($f: Wire::get(r)?),* },)*
                    other => {
                        return Err(Error::Format { at, msg: format!("unknown {} variant '{other}'", stringify!($ty)) })
                    }
                })
            }
        }
    };
}

wire_enum!(ElementwiseOp { Select {}, Cast { to }, Clip {} });

/// A reduction is written as its kind's Rust identifier (`"Sum"`, `"ArgMax"`, `"CumSum"`)
/// and the fields of the kind's form in declaration order (`axes, keep_dims` / `axis` /
/// `axis, exclusive, reverse`): the layout of format version 1, when each kind was its own
/// variant.
impl Wire for ReduceOp {
    fn put(&self, w: &mut Writer) -> Result<()> {
        w.str(&format!("{:?}", self.kind()))?;
        match self {
            ReduceOp::Axes { axes, keep_dims, .. } => {
                axes.put(w)?;
                keep_dims.put(w)
            }
            ReduceOp::Arg { axis, .. } => axis.put(w),
            ReduceOp::Scan { axis, exclusive, reverse, .. } => {
                axis.put(w)?;
                exclusive.put(w)?;
                reverse.put(w)
            }
        }
    }
    fn get(r: &mut Reader) -> Result<Self> {
        let at = r.pos;
        let tag = r.string()?;
        let Some(&kind) = ReduceKind::ALL.iter().find(|k| format!("{k:?}") == tag) else {
            return Err(Error::Format { at, msg: format!("unknown ReduceOp variant '{tag}'") });
        };
        Ok(match kind.form() {
            ReduceForm::Axes => ReduceOp::Axes { kind, axes: Wire::get(r)?, keep_dims: Wire::get(r)? },
            ReduceForm::Arg => ReduceOp::Arg { kind, axis: Wire::get(r)? },
            ReduceForm::Scan => {
                ReduceOp::Scan { kind, axis: Wire::get(r)?, exclusive: Wire::get(r)?, reverse: Wire::get(r)? }
            }
        })
    }
}

wire_enum!(ShapeOp {
    Reshape { shape },
    ReshapeDyn {},
    Transpose { perm },
    ExpandDims { axis },
    Squeeze { axes },
    BroadcastTo { shape },
    BroadcastToDyn {},
    Tile { multiples },
    Fill { shape },
    FillDyn {},
    ZerosLike {},
    OnesLike {},
    ShapeOf {},
    Size {},
    Rank {},
    Identity {},
    StopGradient {},
    OneHot { depth, axis, on, off, dtype },
    Range {},
    LoopMax {},
    Stack { axis },
    MatchShape { x_lead, like_lead },
    Unstack { axis, num },
});

wire_enum!(SlicingOp {
    Concat { axis },
    Split { axis, sizes },
    Slice { begin, size },
    DynamicSlice { sizes },
    StridedSlice { begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask },
    Pad { paddings, mode },
    Reverse { axes },
    Roll { axes },
});

wire_enum!(IndexOp {
    Gather { axis, batch_dims },
    GatherNd { batch_dims },
    ScatterNd { shape },
    TensorScatterUpdate {},
    TensorScatterAdd {},
    UnsortedSegmentSum { num_segments },
    UnsortedSegmentMax { num_segments },
    UnsortedSegmentMin { num_segments },
    UnsortedSegmentProd { num_segments },
    DynamicUpdateSlice {},
    TopK { k, sorted },
    NonZero { batch_dims },
});

wire_enum!(LinearOp { MatMul { transpose_a, transpose_b }, BatchMatMul { adj_a, adj_b } });

wire_enum!(ConvOp {
    Conv2D { params },
    Conv2DBackpropInput { params, input_hw },
    Conv2DBackpropFilter { params, filter_hw },
    DepthwiseConv2D { params },
    DepthwiseConv2DBackpropInput { params, input_hw },
    DepthwiseConv2DBackpropFilter { params, filter_hw },
    MaxPool { ksize, strides, padding },
    AvgPool { ksize, strides, padding },
    MaxPoolGrad { ksize, strides, padding },
    AvgPoolGrad { ksize, strides, padding, input_hw },
    ExtractPatches { ksize, params },
    ExtractPatchesGrad { ksize, params, input_hw },
});

wire_enum!(NnOp {
    BiasAdd {},
    Softmax { axis },
    LogSoftmax { axis },
    SoftmaxCrossEntropy {},
    SparseSoftmaxCrossEntropy {},
    SigmoidCrossEntropy {},
    L2Loss {},
    LayerNorm { epsilon },
    BatchNorm { epsilon },
});

wire_enum!(LinalgOp {
    MatrixInverse {},
    Determinant {},
    MatrixLogDet {},
    Cholesky {},
    Solve { adjoint },
    TriangularSolve { lower, adjoint },
    MatrixDiag {},
    MatrixDiagPart {},
    Trace {},
});

wire_enum!(RandomOp {
    RandomUniform { shape, dtype, low, high },
    RandomNormal { shape, dtype, mean, stddev },
    RandomCategorical { num_samples },
    RandomBernoulli { shape },
    Dropout { rate },
    FoldIn {},
});

wire_enum!(StateOp { Read { var, ty }, Assign { var }, AssignAdd { var } });

// Function bodies (`Arc<Function>`) are encoded by `super::function`.
wire_enum!(ControlOp {
    Cond { then, else_ },
    While { cond, body, num_carries, max_iterations },
    Call { function, signature },
    For { body, static_n },
});

/// The fieldless kind of `all` whose `name` is the next string of `r`.
fn kind_by_name<K: Copy>(r: &mut Reader, family: &str, all: &[K], name: fn(K) -> &'static str) -> Result<K> {
    let at = r.pos;
    let s = r.string()?;
    all.iter()
        .copied()
        .find(|&k| name(k) == s)
        .ok_or_else(|| Error::Format { at, msg: format!("unknown {family} op '{s}'") })
}

impl Wire for Op {
    /// The family tag is [`OpKind::family`](crate::OpKind::family), except for inputs and
    /// constants (`"input"`, `"const"`).
    fn put(&self, w: &mut Writer) -> Result<()> {
        if let Op::Custom(c) = self {
            return Err(Error::unsupported(
                c.name(),
                "custom ops cannot be serialized (their code is not data): replace the node before saving",
            ));
        }
        w.str(match self {
            Op::Input { .. } => "input",
            Op::Const { .. } => "const",
            op => op.kind().family(),
        })?;
        match self {
            Op::Input { name } => w.str(name),
            Op::Const { value } => value.put(w),
            Op::Unary(k) => w.str(k.name()),
            Op::Binary(k) => w.str(k.name()),
            Op::Elementwise(o) => o.put(w),
            Op::Reduce(o) => o.put(w),
            Op::Shape(o) => o.put(w),
            Op::Slicing(o) => o.put(w),
            Op::Index(o) => o.put(w),
            Op::Linear(o) => o.put(w),
            Op::Conv(o) => o.put(w),
            Op::Nn(o) => o.put(w),
            Op::Linalg(o) => o.put(w),
            Op::Random(o) => o.put(w),
            Op::State(o) => o.put(w),
            Op::Control(o) => o.put(w),
            Op::Custom(_) => Ok(()),
        }
    }

    fn get(r: &mut Reader) -> Result<Self> {
        let at = r.pos;
        let family = r.string()?;
        Ok(match family.as_str() {
            "input" => Op::Input { name: r.string()? },
            "const" => Op::Const { value: Wire::get(r)? },
            "unary" => Op::Unary(kind_by_name(r, "unary", UnaryKind::ALL, UnaryKind::name)?),
            "binary" => Op::Binary(kind_by_name(r, "binary", BinaryKind::ALL, BinaryKind::name)?),
            "elementwise" => Op::Elementwise(Wire::get(r)?),
            "reduce" => Op::Reduce(Wire::get(r)?),
            "shape" => Op::Shape(Wire::get(r)?),
            "slicing" => Op::Slicing(Wire::get(r)?),
            "indexing" => Op::Index(Wire::get(r)?),
            "linear" => Op::Linear(Wire::get(r)?),
            "conv" => Op::Conv(Wire::get(r)?),
            "nn" => Op::Nn(Wire::get(r)?),
            "linalg" => Op::Linalg(Wire::get(r)?),
            "random" => Op::Random(Wire::get(r)?),
            "state" => Op::State(Wire::get(r)?),
            "control" => Op::Control(Wire::get(r)?),
            other => return Err(Error::Format { at, msg: format!("unknown op family '{other}'") }),
        })
    }
}
