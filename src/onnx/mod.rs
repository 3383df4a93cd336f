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
//! - An input bound to a known value ([`Model::bind_input`], [`Model::bind_needed_inputs`])
//!   leaves [`Model::inputs`] and is a constant on every call, so the operands computed from
//!   it (a `Reshape` shape, `Resize` scales, `Pad` pads, a `OneHot` depth) are constants. An
//!   operand our op takes statically that is computed at run time is an [`Error::Unsupported`]
//!   naming the op, node, operand and the model inputs it depends on, and saying how to bind
//!   them.
//! - Every node is converted or the import fails with [`Error::Unsupported`] naming the op
//!   type, node name, opset and what is missing (an op, an attribute, an attribute value, an
//!   element type, a non-constant shape operand): an attribute a converter did not read is
//!   such an error, never silently ignored.
//! - Values computed only from constants are folded into constants as they are converted, so
//!   shape arithmetic (`Shape` → `Gather` → `Concat` → `Reshape`) yields the static operands
//!   our ops take.
//! - Element types: see [`tensor`] (narrow integers computed in i64, float16 / bfloat16 in f32).
//! - Convs and pools run in our NHWC layout; activations between them stay NHWC where only
//!   layout-free ops (Relu, batch norm, residual adds, channel concat) separate them, instead
//!   of being transposed to NCHW and back at every layer (see the `layout` module).
//! - [`Model::lift_constants`] turns computed weights (nodes that depend on no input) into
//!   parameters; a lifted model computes what the original does (see the `lift` module).

pub mod proto;
pub mod tensor;

mod convert;
mod layout;
mod legacy;
mod lift;
mod ops_attention;
mod ops_convt;
mod ops_dft;
mod ops_einsum;
mod ops_elementwise;
mod ops_grid;
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
mod ops_training;
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
/// accepted (see the `versions` module), and the opset-6 versions whose legacy attributes `legacy`
/// interprets (binary ops' `broadcast`/`axis`, PRelu, Gemm, BatchNormalization, Dropout;
/// AveragePool-1 needs nothing).
pub const OPSET_RANGE: (i64, i64) = (1, 28);

/// A loaded ONNX model: its graph as a function of its inputs.
#[derive(Clone, Debug)]
pub struct Model {
    proto: ModelProto,
    opset: i64,
    inputs: Vec<(String, TensorType)>,
    outputs: Vec<String>,
    params: Vec<(String, Tensor)>,
    /// Inputs bound to known values ([`Model::bind_input`]), constants on every call.
    bound: Vec<(String, Tensor)>,
    /// The ONNX element types the file states (narrow integers are widened in our dtypes).
    types: convert::OnnxTypes,
    /// After [`Model::lift_constants`]: the body left to convert and its constants.
    lifted: Option<lift::Lifted>,
}

/// Loads an `.onnx` file.
///
/// ```
/// # fn main() -> pfor::Result<()> {
/// let model = pfor::onnx::load("tests/data/mlp.onnx")?; // x [N, 4] → softmax [N, 3]
/// assert_eq!(model.inputs().len(), 1);
/// // a missing file is an error naming it
/// assert!(pfor::onnx::load("no/such.onnx").unwrap_err().to_string().contains("no/such.onnx"));
/// # Ok(())
/// # }
/// ```
pub fn load(path: impl AsRef<Path>) -> Result<Model> {
    let path = path.as_ref();
    let bytes = std::fs::read(path)
        .map_err(|e| Error::InvalidArgument(format!("onnx::load: cannot read {}: {e}", path.display())))?;
    load_bytes(&bytes)
}

/// Loads a serialized ONNX `ModelProto`.
///
/// ```
/// # fn main() -> pfor::Result<()> {
/// let bytes = std::fs::read("tests/data/mlp.onnx").map_err(|e| pfor::Error::InvalidArgument(e.to_string()))?;
/// let model = pfor::onnx::load_bytes(&bytes)?;
/// assert_eq!(model.outputs().len(), 1);
/// assert!(pfor::onnx::load_bytes(b"not a model").is_err());
/// # Ok(())
/// # }
/// ```
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
    let types = convert::onnx_types(&proto.graph);
    Ok(Model { opset, inputs, outputs, params, bound: Vec::new(), types, proto, lifted: None })
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
    ///
    /// ```
    /// # fn main() -> pfor::Result<()> {
    /// let model = pfor::onnx::load("tests/data/mlp.onnx")?;
    /// let (lo, hi) = pfor::onnx::OPSET_RANGE;
    /// assert!((lo..=hi).contains(&model.opset()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn opset(&self) -> i64 {
        self.opset
    }
    /// The graph's inputs that are not initializers: name and type (symbolic dims are named
    /// dynamic dims; narrow element types are widened, see [`tensor`]).
    ///
    /// ```
    /// # fn main() -> pfor::Result<()> {
    /// let model = pfor::onnx::load("tests/data/mlp.onnx")?;
    /// let (name, ty) = &model.inputs()[0];
    /// println!("input {name}: {ty}"); // a named dynamic batch dim, then 4
    /// assert_eq!(ty.shape.rank(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn inputs(&self) -> &[(String, TensorType)] {
        &self.inputs
    }
    /// The graph's output names.
    ///
    /// ```
    /// # fn main() -> pfor::Result<()> {
    /// let model = pfor::onnx::load("tests/data/mlp.onnx")?;
    /// assert_eq!(model.outputs().len(), 1); // the softmax
    /// # Ok(())
    /// # }
    /// ```
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }
    /// The initializers (weights), in file order: the order [`Model::call_with_params`] takes.
    /// After [`Model::lift_constants`]: the lifted weights, in order of first use.
    ///
    /// ```
    /// # fn main() -> pfor::Result<()> {
    /// let model = pfor::onnx::load("tests/data/mlp.onnx")?;
    /// for (name, w) in model.parameters() {
    ///     println!("{name}: {:?}", w.shape()); // the weights and biases, in file order
    /// }
    /// assert!(!model.parameters().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn parameters(&self) -> &[(String, Tensor)] {
        &self.params
    }
    /// The decoded model.
    ///
    /// ```
    /// # fn main() -> pfor::Result<()> {
    /// let model = pfor::onnx::load("tests/data/mlp.onnx")?;
    /// let ops: Vec<&str> = model.proto().graph.node.iter().map(|n| n.op_type.as_str()).collect();
    /// assert!(ops.contains(&"Softmax"), "{ops:?}");
    /// # Ok(())
    /// # }
    /// ```
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// Inlines the model into `g` with `inputs` (one per [`Model::inputs`], in order) and the
    /// initializers as constants; returns one value per output.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let model = pfor::onnx::load("tests/data/mlp.onnx")?;
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [2, 4]);
    /// let probs = model.call(&mut g, &[x])?;
    /// let r = run_once(&g, &probs, &[(x, Tensor::randn(&[2, 4], 0)?)])?;
    /// assert_eq!(r[0].shape(), &[2, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn call(&self, g: &mut Graph, inputs: &[ValueId]) -> Result<Vec<ValueId>> {
        let params: Vec<ValueId> = self.params.iter().map(|(_, t)| g.constant(t.clone())).collect();
        self.call_with_params(g, inputs, &params)
    }

    /// [`Model::call`] with the initializers given as values (one per [`Model::parameters`],
    /// in order, of the same types): the weights become differentiable inputs.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let model = pfor::onnx::load("tests/data/mlp.onnx")?;
    /// let mut g = Graph::new();
    /// let x = g.input("x", DType::F32, [1, 4]);
    /// // the weights as values, to differentiate the output w.r.t. them
    /// let ws: Vec<ValueId> = model.parameters().iter().map(|(_, t)| g.constant(t.clone())).collect();
    /// let probs = model.call_with_params(&mut g, &[x], &ws)?;
    /// let top = g.reduce_max(probs[0], None, false)?;
    /// let grads = gradients(&mut g, &[top], &ws, None)?;
    /// assert_eq!(grads.len(), ws.len());
    /// # Ok(())
    /// # }
    /// ```
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
        let mut env = self.env();
        self.inline(g, &mut env, inputs, params)?;
        self.outputs.iter().map(|o| env.get(g, o)).collect()
    }

    /// [`Model::call_with_params`] in `env` (which records the inputs that operands needed as
    /// constants depend on).
    fn inline(&self, g: &mut Graph, env: &mut convert::Env, inputs: &[ValueId], params: &[ValueId]) -> Result<()> {
        for ((name, ty), &v) in self.inputs.iter().zip(inputs) {
            let got = g.value_type(v)?;
            if got.dtype != ty.dtype || !got.shape.compatible(&ty.shape) {
                return Err(Error::InvalidArgument(format!(
                    "onnx Model::call: input '{name}' is {got:?}, the model declares {ty:?}"
                )));
            }
            env.bind_input(name, v);
        }
        self.bind_constants(g, env);
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
        convert::run_graph(g, env, self.body())
    }

    /// The model with input `name` bound to `value`: it leaves [`Model::inputs`] and is a
    /// constant on every call (listed by [`Model::bound_inputs`]), so what the model computes
    /// from it folds at import. This is how an operand our ops take statically (a `Reshape`
    /// shape, `Resize` scales or sizes, `Pad` pads, a `OneHot` depth, `TopK`'s k) can come
    /// from a graph input: the import error for such an operand names the inputs to bind.
    /// `value` must have the input's element type and a shape its declared shape admits.
    ///
    /// ```
    /// # fn main() -> pfor::Result<()> {
    /// use pfor::prelude::*;
    /// let model = pfor::onnx::load("tests/data/mlp.onnx")?; // x [N, 4] → softmax [N, 3]
    /// let x = Tensor::randn(&[2, 4], 0)?;
    /// let bound = model.clone().bind_input("x", x.clone())?;
    /// assert!(bound.inputs().is_empty());
    /// let (g, _, outs) = bound.to_graph()?;
    /// let (h, ins, outs2) = model.to_graph()?;
    /// let a = run_once(&g, &outs, &[])?;
    /// let b = run_once(&h, &outs2, &[(ins[0], x)])?;
    /// pfor::tensor::assert_close(&a[0], &b[0], 0.0, 0.0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn bind_input(mut self, name: &str, value: Tensor) -> Result<Model> {
        let Some(k) = self.inputs.iter().position(|(n, _)| n == name) else {
            return Err(Error::InvalidArgument(format!(
                "onnx Model::bind_input: no input '{name}' (inputs: {:?})",
                self.inputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
            )));
        };
        let ty = &self.inputs[k].1;
        if value.dtype() != ty.dtype || !ty.shape.matches(value.shape()) {
            return Err(Error::InvalidArgument(format!(
                "onnx Model::bind_input: input '{name}' is declared {ty:?}, the value is {:?} {:?}",
                value.dtype(),
                value.shape()
            )));
        }
        self.inputs.remove(k);
        self.bound.push((name.to_string(), value));
        Ok(self)
    }

    /// The model with those of its inputs bound ([`Model::bind_input`]) that an operand it
    /// needs as a constant is computed from: `values` gives one value per [`Model::inputs`],
    /// in order; the model is converted on them (the others as run-time placeholders of their
    /// values' shapes) and every input a needs-a-constant error names is bound to its value,
    /// until the conversion succeeds. Inputs no such operand depends on stay inputs. Any other
    /// import error is returned.
    ///
    /// ```
    /// # fn main() -> pfor::Result<()> {
    /// use pfor::prelude::*;
    /// let model = pfor::onnx::load("tests/data/mlp.onnx")?;
    /// // nothing in the MLP needs its input as a constant: it stays an input
    /// let same = model.bind_needed_inputs(&[Tensor::randn(&[2, 4], 0)?])?;
    /// assert_eq!(same.inputs().len(), 1);
    /// assert!(same.bound_inputs().is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub fn bind_needed_inputs(self, values: &[Tensor]) -> Result<Model> {
        if values.len() != self.inputs.len() {
            return Err(Error::InvalidArgument(format!(
                "onnx Model::bind_needed_inputs: {} values given, the model takes {} inputs ({:?})",
                values.len(),
                self.inputs.len(),
                self.inputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
            )));
        }
        let mut values: Vec<(String, Tensor)> =
            self.inputs.iter().map(|(n, _)| n.clone()).zip(values.iter().cloned()).collect();
        let mut m = self;
        loop {
            let mut g = Graph::new();
            let ins: Vec<ValueId> =
                values.iter().map(|(n, t)| g.input(n, t.dtype(), Shape::fixed(t.shape()))).collect();
            let params: Vec<ValueId> = m.params.iter().map(|(_, t)| g.constant(t.clone())).collect();
            let mut env = m.env();
            let err = match m.inline(&mut g, &mut env, &ins, &params) {
                Ok(()) => return Ok(m),
                Err(e) => e,
            };
            let needed: Vec<String> = env.needed().into_iter().filter(|n| values.iter().any(|(v, _)| v == n)).collect();
            if needed.is_empty() {
                return Err(err);
            }
            for name in needed {
                if let Some(k) = values.iter().position(|(v, _)| *v == name) {
                    let (_, t) = values.remove(k);
                    m = m.bind_input(&name, t)?;
                }
            }
        }
    }

    /// The inputs bound to values ([`Model::bind_input`]), in binding order. Empty after
    /// [`Model::lift_constants`], which makes the bound values it reads parameters or
    /// constants like any other input-independent value.
    pub fn bound_inputs(&self) -> &[(String, Tensor)] {
        &self.bound
    }

    /// The model with every node that depends on no model input (`Constant`,
    /// `ConstantOfShape`, initializers and what is computed only from them) evaluated once
    /// and its float results that the rest of the graph reads made parameters
    /// ([`Model::parameters`], in order of first use), so [`Model::call_with_params`] can take
    /// computed weights as differentiable values; integer / bool results, and float results a
    /// node needs statically, stay constants. Call [`Model::with_input_shape`] first if you
    /// change an input's shape (shape arithmetic on the inputs is folded here).
    pub fn lift_constants(mut self) -> Result<Model> {
        let (params, lifted) = lift::lift(&self)?;
        self.params = params;
        self.bound.clear();
        self.lifted = Some(lifted);
        Ok(self)
    }

    /// The model with input `name` declared as `dims` (same element type), e.g. a smaller
    /// image for a fully convolutional network. Whether the graph runs at that shape is
    /// checked when it is called. Refused after [`Model::lift_constants`], which may have
    /// folded the old shape into constants.
    pub fn with_input_shape(mut self, name: &str, dims: &[usize]) -> Result<Model> {
        if self.lifted.is_some() {
            return Err(Error::InvalidArgument(format!(
                "onnx Model::with_input_shape('{name}'): the model's constants are already lifted \
                 (with the old shape); call with_input_shape before lift_constants"
            )));
        }
        let Some((_, ty)) = self.inputs.iter_mut().find(|(n, _)| n == name) else {
            return Err(Error::InvalidArgument(format!(
                "onnx Model::with_input_shape: no input '{name}' (inputs: {:?})",
                self.inputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
            )));
        };
        ty.shape = Shape::fixed(dims);
        Ok(self)
    }

    /// Fresh weights of the shapes and types of [`Model::parameters`], from `seed`: matrices
    /// and kernels (rank ≥ 2) normal with variance 1 / fan-in (the product of all but the
    /// first dim: `Conv`'s and `Gemm` transB's layout), vectors (biases, normalization scales,
    /// means, variances) the current values perturbed by up to ±10 % (variances stay
    /// positive). For architectures whose stored weights are placeholders (ONNX's `light`
    /// models make every weight 0.02, so all channels are alike).
    pub fn random_parameters(&self, seed: u64) -> Result<Vec<Tensor>> {
        let mut out = Vec::with_capacity(self.params.len());
        for (k, (_, t)) in self.params.iter().enumerate() {
            let (s, seed) = (t.shape(), seed.wrapping_add(k as u64));
            let v: Vec<f64> = if s.len() >= 2 {
                let scale = 1.0 / (s[1..].iter().product::<usize>().max(1) as f64).sqrt();
                Tensor::randn_f64(s, seed)?.to_f64_vec().iter().map(|x| x * scale).collect()
            } else {
                let u = Tensor::rand_uniform(DType::F64, s, -0.1, 0.1, seed)?.to_f64_vec();
                t.to_f64_vec().iter().zip(&u).map(|(x, e)| x * (1.0 + e)).collect()
            };
            out.push(Tensor::from_vec(s, v)?.cast(t.dtype()));
        }
        Ok(out)
    }

    /// The nodes [`Model::call`] converts.
    fn body(&self) -> &[proto::NodeProto] {
        self.lifted.as_ref().map_or(&self.proto.graph.node[..], |l| &l.nodes[..])
    }

    /// The values bound as constants on every call (after lifting).
    fn consts(&self) -> &[(String, Tensor)] {
        self.lifted.as_ref().map_or(&[][..], |l| &l.consts[..])
    }

    /// A fresh conversion environment for this model.
    fn env(&self) -> convert::Env {
        convert::Env::new(self.opset, self.types.clone())
    }

    /// Binds the model's inputs as graph inputs of their declared types.
    fn bind_inputs(&self, g: &mut Graph, env: &mut convert::Env) {
        for (n, t) in &self.inputs {
            let v = g.input(n, t.dtype, t.shape.clone());
            env.bind_input(n, v);
        }
    }

    /// Binds the values every call sees as constants: the bound inputs and (after lifting)
    /// the lifted constants.
    fn bind_constants(&self, g: &mut Graph, env: &mut convert::Env) {
        for (name, t) in self.bound.iter().chain(self.consts()) {
            let c = g.constant(t.clone());
            env.bind(name, c);
        }
    }

    /// A new graph holding the model: inputs named as in the file, initializers as
    /// constants. Returns the graph, its input values and its output values.
    ///
    /// ```
    /// use pfor::prelude::*;
    ///
    /// # fn main() -> Result<()> {
    /// let (g, ins, outs) = pfor::onnx::load("tests/data/mlp.onnx")?.to_graph()?;
    /// let mut s = Session::new(&g, &outs)?;
    /// let r = s.run(&[(ins[0], Tensor::randn(&[5, 4], 0)?)])?; // any batch size
    /// assert_eq!(r[0].shape(), &[5, 3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn to_graph(&self) -> Result<(Graph, Vec<ValueId>, Vec<ValueId>)> {
        let mut g = Graph::new();
        let ins: Vec<ValueId> = self.inputs.iter().map(|(n, t)| g.input(n, t.dtype, t.shape.clone())).collect();
        let outs = self.call(&mut g, &ins)?;
        Ok((g, ins, outs))
    }
}

/// The dtype an ONNX element type is computed in (see [`tensor`]).
///
/// ```
/// use pfor::prelude::*;
///
/// # fn main() -> Result<()> {
/// assert_eq!(pfor::onnx::compute_dtype(1)?, DType::F32); // FLOAT
/// assert_eq!(pfor::onnx::compute_dtype(7)?, DType::I64); // INT64
/// assert!(pfor::onnx::compute_dtype(8).is_err());         // STRING
/// # Ok(())
/// # }
/// ```
pub fn compute_dtype(onnx_elem_type: i64) -> Result<DType> {
    tensor::dtype_of(onnx_elem_type)
}
