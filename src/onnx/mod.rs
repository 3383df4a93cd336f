//! ONNX import: load an `.onnx` model as a function of its inputs and inline it into a
//! [`Graph`], where it can be the per-example body of `pfor` / `vectorized_map`, or be
//! differentiated.
//!
//! ```text
//! bytes ──proto::ModelProto::decode──▶ Model (inputs, outputs, initializers, opset)
//! Model::call(&mut g, &inputs) ──ops::convert per node──▶ our ops in g ──▶ output ValueIds
//! ```
//!
//! Invariants:
//! - Pure Rust: the protobuf subset is decoded by [`proto`] (no `protoc`, no dependency).
//! - Initializers become constants ([`Model::call`]) or caller-supplied values
//!   ([`Model::call_with_params`], in the order of [`Model::parameters`]) so gradients w.r.t.
//!   weights work; an initializer that is also a graph input is a parameter with a default.
//! - Symbolic dims (`dim_param`) are named dynamic dims in [`Model::inputs`].
//! - Every node is converted or the import fails with [`Error::Unsupported`] naming the op
//!   type, node name, opset and what is missing (an op, an attribute, an attribute value, an
//!   element type, a non-constant shape operand): an attribute a converter did not read is
//!   such an error, never silently ignored.
//! - Values computed only from constants are folded into constants as they are converted, so
//!   shape arithmetic (`Shape` → `Gather` → `Concat` → `Reshape`) yields the static operands
//!   our ops take.
//! - Element types: see [`tensor`] (narrow integers computed in i64, float16 / bfloat16 in f32).

pub mod proto;
pub mod tensor;

mod convert;
mod ops_attention;
mod ops_convt;
mod ops_einsum;
mod ops_elementwise;
mod ops_index;
mod ops_loss;
mod ops_math;
mod ops_nn;
mod ops_norm;
mod ops_quant;
mod ops_resize;
mod ops_rnn;
mod ops_rotary;
mod ops_scatter;
mod ops_shape;
mod ops_spatial;
mod ops_window;
mod versions;

pub use convert::supported_ops;
pub use versions::op_version;

use crate::error::{Error, Result};
use crate::ir::{Graph, ValueId};
use crate::tensor::{DType, Dim, Shape, Tensor, TensorType};
use proto::{DimProto, ModelProto, ValueType};
use std::path::Path;

/// The default-domain opsets a model may import (ONNX 1.23.2's). Each node is converted under
/// its op's version at that opset; below opset 7 only op versions unchanged up to opset 7 are
/// accepted (see [`versions`]).
pub const OPSET_RANGE: (i64, i64) = (1, 28);

/// A loaded ONNX model: its graph as a function of its inputs.
#[derive(Clone, Debug)]
pub struct Model {
    proto: ModelProto,
    opset: i64,
    inputs: Vec<(String, TensorType)>,
    outputs: Vec<String>,
    params: Vec<(String, Tensor)>,
}

/// Loads an `.onnx` file.
pub fn load(path: impl AsRef<Path>) -> Result<Model> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| Error::InvalidArgument(format!("onnx::load: cannot read {}: {e}", path.display())))?;
    load_bytes(&bytes)
}

/// Loads a serialized ONNX `ModelProto`.
pub fn load_bytes(bytes: &[u8]) -> Result<Model> {
    let proto = ModelProto::decode(bytes)?;
    let mut opset = None;
    for o in &proto.opset_import {
        if o.domain.is_empty() || o.domain == "ai.onnx" {
            opset = Some(o.version);
        }
    }
    // IR version < 3 models have no opset_import: opset 1
    let opset = opset.unwrap_or(1);
    if opset < OPSET_RANGE.0 || opset > OPSET_RANGE.1 {
        return Err(Error::unsupported(
            "onnx",
            format!("opset {opset} (supported: {} to {})", OPSET_RANGE.0, OPSET_RANGE.1),
        ));
    }
    let graph = &proto.graph;
    if graph.sparse_initializers > 0 {
        return Err(Error::unsupported("onnx", "sparse initializers"));
    }
    let mut params = Vec::with_capacity(graph.initializer.len());
    for t in &graph.initializer {
        params.push((t.name.clone(), tensor::to_tensor(t)?));
    }
    let mut inputs = Vec::new();
    for vi in &graph.input {
        if params.iter().any(|(n, _)| *n == vi.name) {
            continue;
        }
        inputs.push((vi.name.clone(), value_type(&vi.name, &vi.ty)?));
    }
    let outputs = graph.output.iter().map(|o| o.name.clone()).collect();
    Ok(Model { opset, inputs, outputs, params, proto })
}

fn value_type(name: &str, ty: &ValueType) -> Result<TensorType> {
    match ty {
        ValueType::Tensor { elem_type, shape } => {
            let dtype = tensor::dtype_of(*elem_type).map_err(|_| {
                Error::unsupported(
                    "onnx",
                    format!("input '{name}': element type {}", tensor::onnx_type_name(*elem_type)),
                )
            })?;
            let Some(dims) = shape else {
                return Err(Error::unsupported("onnx", format!("input '{name}': no shape (unknown rank)")));
            };
            let dims = dims.iter().map(|d| match d {
                DimProto::Value(v) if *v >= 0 => Dim::fixed(*v as usize),
                DimProto::Param(p) => Dim::dynamic(p),
                _ => Dim::unknown(),
            });
            Ok(TensorType::new(dtype, Shape::from_dims(dims)))
        }
        ValueType::Unknown => Err(Error::unsupported("onnx", format!("input '{name}': no type"))),
        ValueType::Other(k) => {
            Err(Error::unsupported("onnx", format!("input '{name}': a {k} (only tensors are supported)")))
        }
    }
}

impl Model {
    /// The opset of the default domain.
    pub fn opset(&self) -> i64 {
        self.opset
    }
    /// The graph's inputs that are not initializers: name and type (symbolic dims are named
    /// dynamic dims; narrow element types are widened, see [`tensor`]).
    pub fn inputs(&self) -> &[(String, TensorType)] {
        &self.inputs
    }
    /// The graph's output names.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }
    /// The initializers (weights), in file order: the order [`Model::call_with_params`] takes.
    pub fn parameters(&self) -> &[(String, Tensor)] {
        &self.params
    }
    /// The decoded model.
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// Inlines the model into `g` with `inputs` (one per [`Model::inputs`], in order) and the
    /// initializers as constants; returns one value per output.
    pub fn call(&self, g: &mut Graph, inputs: &[ValueId]) -> Result<Vec<ValueId>> {
        let params: Vec<ValueId> = self.params.iter().map(|(_, t)| g.constant(t.clone())).collect();
        self.call_with_params(g, inputs, &params)
    }

    /// [`Model::call`] with the initializers given as values (one per [`Model::parameters`],
    /// in order, of the same types): the weights become differentiable inputs.
    pub fn call_with_params(&self, g: &mut Graph, inputs: &[ValueId], params: &[ValueId]) -> Result<Vec<ValueId>> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::InvalidArgument(format!(
                "onnx Model::call: {} inputs given, the model takes {} ({:?})",
                inputs.len(),
                self.inputs.len(),
                self.inputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
            )));
        }
        if params.len() != self.params.len() {
            return Err(Error::InvalidArgument(format!(
                "onnx Model::call_with_params: {} parameters given, the model has {}",
                params.len(),
                self.params.len()
            )));
        }
        let mut env = convert::Env::new(self.opset);
        for ((name, ty), &v) in self.inputs.iter().zip(inputs) {
            let got = g.value_type(v)?;
            if got.dtype != ty.dtype || !got.shape.compatible(&ty.shape) {
                return Err(Error::InvalidArgument(format!(
                    "onnx Model::call: input '{name}' is {got:?}, the model declares {ty:?}"
                )));
            }
            env.bind(name, v);
        }
        for ((name, t), &v) in self.params.iter().zip(params) {
            let got = g.value_type(v)?;
            if got.dtype != t.dtype() || !got.shape.matches(t.shape()) {
                return Err(Error::InvalidArgument(format!(
                    "onnx Model::call_with_params: parameter '{name}' is {got:?}, the initializer is {:?} {:?}",
                    t.dtype(),
                    t.shape()
                )));
            }
            env.bind(name, v);
        }
        convert::run_graph(g, &mut env, &self.proto.graph.node)?;
        self.outputs.iter().map(|o| env.get(g, o)).collect()
    }

    /// A new graph holding the model: inputs named as in the file, initializers as
    /// constants. Returns the graph, its input values and its output values.
    pub fn to_graph(&self) -> Result<(Graph, Vec<ValueId>, Vec<ValueId>)> {
        let mut g = Graph::new();
        let ins: Vec<ValueId> = self.inputs.iter().map(|(n, t)| g.input(n, t.dtype, t.shape.clone())).collect();
        let outs = self.call(&mut g, &ins)?;
        Ok((g, ins, outs))
    }
}

/// The dtype an ONNX element type is computed in (see [`tensor`]).
pub fn compute_dtype(onnx_elem_type: i64) -> Result<DType> {
    tensor::dtype_of(onnx_elem_type)
}
