//! A decoder for the subset of the ONNX protobuf schema (`onnx.proto3`, IR version ≤ 11) that
//! the importer reads: models, graphs, nodes, attributes, tensors and value infos.
//!
//! Invariants: decoding never panics and never allocates more than the input's length per
//! field (every length is checked against the bytes left before slicing); unknown fields are
//! skipped, as protobuf requires; a malformed message is an [`Error::InvalidArgument`] naming
//! the message and field. Repeated scalar fields are accepted packed and unpacked.

use crate::error::{Error, Result};

/// One field's payload, by wire type.
#[derive(Clone, Copy, Debug)]
enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

fn bad(msg: &str, what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("onnx: malformed {msg}: {what}"))
}

/// Iterates over the fields of one message.
struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    msg: &'static str,
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8], msg: &'static str) -> Fields<'a> {
        Fields { buf, pos: 0, msg }
    }

    fn varint(&mut self) -> Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or_else(|| bad(self.msg, "truncated varint"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad(self.msg, "varint longer than 10 bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| bad(self.msg, format!("field of {n} bytes past the end")))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn next_field(&mut self) -> Result<Option<(u64, Wire<'a>)>> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (field, wt) = (key >> 3, key & 7);
        let w = match wt {
            0 => Wire::Varint(self.varint()?),
            1 => Wire::Fixed64(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes"))),
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| bad(self.msg, "length overflow"))?;
                Wire::Bytes(self.take(n)?)
            }
            5 => Wire::Fixed32(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes"))),
            _ => return Err(bad(self.msg, format!("field {field} has wire type {wt} (groups are not supported)"))),
        };
        Ok(Some((field, w)))
    }
}

fn as_bytes<'a>(msg: &str, field: &str, w: Wire<'a>) -> Result<&'a [u8]> {
    match w {
        Wire::Bytes(b) => Ok(b),
        _ => Err(bad(msg, format!("field {field} is not length-delimited"))),
    }
}

fn as_string(msg: &str, field: &str, w: Wire) -> Result<String> {
    let b = as_bytes(msg, field, w)?;
    String::from_utf8(b.to_vec()).map_err(|_| bad(msg, format!("field {field} is not UTF-8")))
}

fn as_varint(msg: &str, field: &str, w: Wire) -> Result<u64> {
    match w {
        Wire::Varint(v) => Ok(v),
        _ => Err(bad(msg, format!("field {field} is not a varint"))),
    }
}

/// Appends a repeated varint field (packed or not) to `out`.
fn push_varints(msg: &'static str, field: &str, w: Wire, out: &mut Vec<i64>) -> Result<()> {
    match w {
        Wire::Varint(v) => out.push(v as i64),
        Wire::Bytes(b) => {
            let mut f = Fields::new(b, msg);
            while f.pos < b.len() {
                out.push(f.varint()? as i64);
            }
        }
        _ => return Err(bad(msg, format!("field {field} is not a varint list"))),
    }
    Ok(())
}

/// Appends a repeated fixed-width field (packed or not) to `out`, as raw little-endian words.
fn push_fixed<const N: usize>(msg: &str, field: &str, w: Wire, out: &mut Vec<[u8; N]>) -> Result<()> {
    match (w, N) {
        (Wire::Fixed32(v), 4) => out.push(v.to_le_bytes()[..N].try_into().expect("N bytes")),
        (Wire::Fixed64(v), 8) => out.push(v.to_le_bytes()[..N].try_into().expect("N bytes")),
        (Wire::Bytes(b), _) if b.len() % N == 0 => {
            out.extend(b.chunks_exact(N).map(|c| <[u8; N]>::try_from(c).expect("N bytes")))
        }
        _ => return Err(bad(msg, format!("field {field} is not a list of {N}-byte words"))),
    }
    Ok(())
}

/// `OperatorSetIdProto`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpsetId {
    /// Operator domain ("" or "ai.onnx" = the default domain).
    pub domain: String,
    /// Opset version.
    pub version: i64,
}

/// `ModelProto` (the fields the importer reads).
#[derive(Clone, Debug, Default)]
pub struct ModelProto {
    /// IR version.
    pub ir_version: i64,
    /// Imported opsets.
    pub opset_import: Vec<OpsetId>,
    /// Producer name.
    pub producer_name: String,
    /// The main graph.
    pub graph: GraphProto,
    /// Number of model-local functions (not supported yet; a node using one is reported).
    pub functions: Vec<String>,
}

/// `GraphProto`.
#[derive(Clone, Debug, Default)]
pub struct GraphProto {
    /// Name.
    pub name: String,
    /// Nodes, in topological order.
    pub node: Vec<NodeProto>,
    /// Initializers (weights).
    pub initializer: Vec<TensorProto>,
    /// Inputs (may include initializers, in IR version < 4).
    pub input: Vec<ValueInfo>,
    /// Outputs.
    pub output: Vec<ValueInfo>,
    /// Number of sparse initializers (not supported).
    pub sparse_initializers: usize,
}

/// `NodeProto`.
#[derive(Clone, Debug, Default)]
pub struct NodeProto {
    /// Input names ("" = an omitted optional input).
    pub input: Vec<String>,
    /// Output names ("" = an omitted optional output).
    pub output: Vec<String>,
    /// Node name (may be empty).
    pub name: String,
    /// Operator.
    pub op_type: String,
    /// Operator domain.
    pub domain: String,
    /// Attributes.
    pub attribute: Vec<AttributeProto>,
}

/// `AttributeProto` (the value fields; `kind` is the declared `AttributeType`).
#[derive(Clone, Debug, Default)]
pub struct AttributeProto {
    /// Name.
    pub name: String,
    /// Declared type (1 FLOAT, 2 INT, 3 STRING, 4 TENSOR, 5 GRAPH, 6 FLOATS, 7 INTS, 8 STRINGS, ...).
    pub kind: i64,
    /// `f`.
    pub f: f32,
    /// `i`.
    pub i: i64,
    /// `s`.
    pub s: Vec<u8>,
    /// `t`.
    pub t: Option<TensorProto>,
    /// `g` (a subgraph).
    pub g: Option<GraphProto>,
    /// `floats`.
    pub floats: Vec<f32>,
    /// `ints`.
    pub ints: Vec<i64>,
    /// `strings`.
    pub strings: Vec<Vec<u8>>,
    /// A reference to an attribute of the enclosing function (not supported).
    pub ref_attr_name: String,
}

/// `TensorProto` (data kept as decoded lists; see `onnx::tensor` for the conversion).
#[derive(Clone, Debug, Default)]
pub struct TensorProto {
    /// Name.
    pub name: String,
    /// Dims.
    pub dims: Vec<i64>,
    /// `TensorProto.DataType`.
    pub data_type: i64,
    /// `raw_data` (little-endian).
    pub raw_data: Vec<u8>,
    /// `float_data`.
    pub float_data: Vec<[u8; 4]>,
    /// `int32_data` (also holds 8/16-bit, bool and float16 values).
    pub int32_data: Vec<i64>,
    /// `int64_data`.
    pub int64_data: Vec<i64>,
    /// `double_data`.
    pub double_data: Vec<[u8; 8]>,
    /// `uint64_data` (also uint32).
    pub uint64_data: Vec<i64>,
    /// `string_data` count (strings are not supported).
    pub string_count: usize,
    /// True if the data lives in an external file (not supported yet).
    pub external: bool,
}

/// `ValueInfoProto` with its `TypeProto`.
#[derive(Clone, Debug, Default)]
pub struct ValueInfo {
    /// Name.
    pub name: String,
    /// The value's type.
    pub ty: ValueType,
}

/// The kinds of `TypeProto`.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ValueType {
    /// No type given.
    #[default]
    Unknown,
    /// A tensor: element type and, when given, the shape.
    Tensor {
        /// `TensorProto.DataType`.
        elem_type: i64,
        /// Dims, when the shape is given.
        shape: Option<Vec<DimProto>>,
    },
    /// A sequence, map, optional or sparse tensor (not supported), by name.
    Other(&'static str),
}

/// `TensorShapeProto.Dimension`.
#[derive(Clone, Debug, PartialEq)]
pub enum DimProto {
    /// `dim_value`.
    Value(i64),
    /// `dim_param` (a symbolic dim).
    Param(String),
    /// Neither given.
    Unknown,
}

macro_rules! decode_loop {
    ($buf:expr, $msg:literal, |$field:ident, $w:ident| $body:block) => {{
        let mut fields = Fields::new($buf, $msg);
        while let Some(($field, $w)) = fields.next_field()? $body
    }};
}

impl ModelProto {
    /// Decodes a serialized `ModelProto`.
    pub fn decode(buf: &[u8]) -> Result<ModelProto> {
        const M: &str = "ModelProto";
        let mut m = ModelProto::default();
        decode_loop!(buf, "ModelProto", |field, w| {
            match field {
                1 => m.ir_version = as_varint(M, "ir_version", w)? as i64,
                2 => m.producer_name = as_string(M, "producer_name", w)?,
                7 => m.graph = GraphProto::decode(as_bytes(M, "graph", w)?)?,
                8 => {
                    let mut o = OpsetId::default();
                    decode_loop!(as_bytes(M, "opset_import", w)?, "OperatorSetIdProto", |f, w2| {
                        match f {
                            1 => o.domain = as_string("OperatorSetIdProto", "domain", w2)?,
                            2 => o.version = as_varint("OperatorSetIdProto", "version", w2)? as i64,
                            _ => {}
                        }
                    });
                    m.opset_import.push(o);
                }
                25 => {
                    let mut name = String::new();
                    decode_loop!(as_bytes(M, "functions", w)?, "FunctionProto", |f, w2| {
                        if f == 1 {
                            name = as_string("FunctionProto", "name", w2)?;
                        }
                    });
                    m.functions.push(name);
                }
                _ => {}
            }
        });
        Ok(m)
    }
}

impl GraphProto {
    /// Decodes a serialized `GraphProto`.
    pub fn decode(buf: &[u8]) -> Result<GraphProto> {
        const M: &str = "GraphProto";
        let mut g = GraphProto::default();
        decode_loop!(buf, "GraphProto", |field, w| {
            match field {
                1 => g.node.push(NodeProto::decode(as_bytes(M, "node", w)?)?),
                2 => g.name = as_string(M, "name", w)?,
                5 => g.initializer.push(TensorProto::decode(as_bytes(M, "initializer", w)?)?),
                11 => g.input.push(ValueInfo::decode(as_bytes(M, "input", w)?)?),
                12 => g.output.push(ValueInfo::decode(as_bytes(M, "output", w)?)?),
                15 => g.sparse_initializers += 1,
                _ => {}
            }
        });
        Ok(g)
    }
}

impl NodeProto {
    /// Decodes a serialized `NodeProto`.
    pub fn decode(buf: &[u8]) -> Result<NodeProto> {
        const M: &str = "NodeProto";
        let mut n = NodeProto::default();
        decode_loop!(buf, "NodeProto", |field, w| {
            match field {
                1 => n.input.push(as_string(M, "input", w)?),
                2 => n.output.push(as_string(M, "output", w)?),
                3 => n.name = as_string(M, "name", w)?,
                4 => n.op_type = as_string(M, "op_type", w)?,
                5 => n.attribute.push(AttributeProto::decode(as_bytes(M, "attribute", w)?)?),
                7 => n.domain = as_string(M, "domain", w)?,
                _ => {}
            }
        });
        Ok(n)
    }
}

impl AttributeProto {
    /// Decodes a serialized `AttributeProto`.
    pub fn decode(buf: &[u8]) -> Result<AttributeProto> {
        const M: &str = "AttributeProto";
        let mut a = AttributeProto::default();
        decode_loop!(buf, "AttributeProto", |field, w| {
            match field {
                1 => a.name = as_string(M, "name", w)?,
                2 => {
                    let mut v = Vec::new();
                    push_fixed::<4>(M, "f", w, &mut v)?;
                    a.f = v.last().map_or(0.0, |b| f32::from_le_bytes(*b));
                }
                3 => a.i = as_varint(M, "i", w)? as i64,
                4 => a.s = as_bytes(M, "s", w)?.to_vec(),
                5 => a.t = Some(TensorProto::decode(as_bytes(M, "t", w)?)?),
                6 => a.g = Some(GraphProto::decode(as_bytes(M, "g", w)?)?),
                7 => {
                    let mut v = Vec::new();
                    push_fixed::<4>(M, "floats", w, &mut v)?;
                    a.floats.extend(v.into_iter().map(f32::from_le_bytes));
                }
                8 => push_varints(M, "ints", w, &mut a.ints)?,
                9 => a.strings.push(as_bytes(M, "strings", w)?.to_vec()),
                20 => a.kind = as_varint(M, "type", w)? as i64,
                21 => a.ref_attr_name = as_string(M, "ref_attr_name", w)?,
                _ => {}
            }
        });
        Ok(a)
    }
}

impl TensorProto {
    /// Decodes a serialized `TensorProto`.
    pub fn decode(buf: &[u8]) -> Result<TensorProto> {
        const M: &str = "TensorProto";
        let mut t = TensorProto::default();
        decode_loop!(buf, "TensorProto", |field, w| {
            match field {
                1 => push_varints(M, "dims", w, &mut t.dims)?,
                2 => t.data_type = as_varint(M, "data_type", w)? as i64,
                4 => push_fixed::<4>(M, "float_data", w, &mut t.float_data)?,
                5 => push_varints(M, "int32_data", w, &mut t.int32_data)?,
                6 => t.string_count += 1,
                7 => push_varints(M, "int64_data", w, &mut t.int64_data)?,
                8 => t.name = as_string(M, "name", w)?,
                9 => t.raw_data = as_bytes(M, "raw_data", w)?.to_vec(),
                10 => push_fixed::<8>(M, "double_data", w, &mut t.double_data)?,
                11 => push_varints(M, "uint64_data", w, &mut t.uint64_data)?,
                13 => t.external = true,
                14 => t.external |= as_varint(M, "data_location", w)? == 1,
                _ => {}
            }
        });
        Ok(t)
    }
}

impl ValueInfo {
    /// Decodes a serialized `ValueInfoProto`.
    pub fn decode(buf: &[u8]) -> Result<ValueInfo> {
        const M: &str = "ValueInfoProto";
        let mut v = ValueInfo::default();
        decode_loop!(buf, "ValueInfoProto", |field, w| {
            match field {
                1 => v.name = as_string(M, "name", w)?,
                2 => v.ty = decode_type(as_bytes(M, "type", w)?)?,
                _ => {}
            }
        });
        Ok(v)
    }
}

fn decode_type(buf: &[u8]) -> Result<ValueType> {
    const M: &str = "TypeProto";
    let mut ty = ValueType::Unknown;
    decode_loop!(buf, "TypeProto", |field, w| {
        match field {
            1 => {
                let (mut elem_type, mut shape) = (0, None);
                decode_loop!(as_bytes(M, "tensor_type", w)?, "TypeProto.Tensor", |f, w2| {
                    match f {
                        1 => elem_type = as_varint(M, "elem_type", w2)? as i64,
                        2 => shape = Some(decode_shape(as_bytes(M, "shape", w2)?)?),
                        _ => {}
                    }
                });
                ty = ValueType::Tensor { elem_type, shape };
            }
            4 => ty = ValueType::Other("sequence"),
            5 => ty = ValueType::Other("map"),
            8 => ty = ValueType::Other("sparse tensor"),
            9 => ty = ValueType::Other("optional"),
            _ => {}
        }
    });
    Ok(ty)
}

fn decode_shape(buf: &[u8]) -> Result<Vec<DimProto>> {
    const M: &str = "TensorShapeProto";
    let mut dims = Vec::new();
    decode_loop!(buf, "TensorShapeProto", |field, w| {
        if field == 1 {
            let mut d = DimProto::Unknown;
            decode_loop!(as_bytes(M, "dim", w)?, "TensorShapeProto.Dimension", |f, w2| {
                match f {
                    1 => d = DimProto::Value(as_varint(M, "dim_value", w2)? as i64),
                    2 => d = DimProto::Param(as_string(M, "dim_param", w2)?),
                    _ => {}
                }
            });
            dims.push(d);
        }
    });
    Ok(dims)
}
