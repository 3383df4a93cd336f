//! A minimal protobuf writer for ONNX models built in memory by the tests (the importer's
//! decoder is the code under test; this writer follows the wire format independently).
#![allow(dead_code)]

/// A field's encoding.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn key(out: &mut Vec<u8>, field: u64, wire: u64) {
    varint(out, field << 3 | wire);
}

/// A message under construction.
#[derive(Default, Clone)]
pub struct Msg(pub Vec<u8>);

impl Msg {
    pub fn new() -> Msg {
        Msg(Vec::new())
    }
    pub fn int(mut self, field: u64, v: i64) -> Msg {
        key(&mut self.0, field, 0);
        varint(&mut self.0, v as u64);
        self
    }
    pub fn bytes(mut self, field: u64, b: &[u8]) -> Msg {
        key(&mut self.0, field, 2);
        varint(&mut self.0, b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    pub fn str(self, field: u64, s: &str) -> Msg {
        self.bytes(field, s.as_bytes())
    }
    pub fn msg(self, field: u64, m: &Msg) -> Msg {
        self.bytes(field, &m.0)
    }
    pub fn float(mut self, field: u64, v: f32) -> Msg {
        key(&mut self.0, field, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
}

/// ONNX element types.
pub const FLOAT: i64 = 1;
pub const INT64: i64 = 7;
pub const DOUBLE: i64 = 11;
pub const INT32: i64 = 6;
pub const BOOL: i64 = 9;

/// A float tensor (raw data).
pub fn tensor_f32(name: &str, dims: &[i64], data: &[f32]) -> Msg {
    let mut m = Msg::new();
    for &d in dims {
        m = m.int(1, d);
    }
    let raw: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    m.int(2, FLOAT).str(8, name).bytes(9, &raw)
}

/// A double tensor (raw data).
pub fn tensor_f64(name: &str, dims: &[i64], data: &[f64]) -> Msg {
    let mut m = Msg::new();
    for &d in dims {
        m = m.int(1, d);
    }
    let raw: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    m.int(2, DOUBLE).str(8, name).bytes(9, &raw)
}

/// An int64 tensor (int64_data, unpacked).
pub fn tensor_i64(name: &str, dims: &[i64], data: &[i64]) -> Msg {
    let mut m = Msg::new();
    for &d in dims {
        m = m.int(1, d);
    }
    m = m.int(2, INT64).str(8, name);
    for &v in data {
        m = m.int(7, v);
    }
    m
}

/// A tensor value info; a dim is a size or a symbolic name.
pub fn value_info(name: &str, elem: i64, dims: &[Result<i64, &str>]) -> Msg {
    let mut shape = Msg::new();
    for d in dims {
        let dim = match d {
            Ok(v) => Msg::new().int(1, *v),
            Err(p) => Msg::new().str(2, p),
        };
        shape = shape.msg(1, &dim);
    }
    let tt = Msg::new().int(1, elem).msg(2, &shape);
    Msg::new().str(1, name).msg(2, &Msg::new().msg(1, &tt))
}

/// An attribute.
pub enum Attr<'a> {
    Int(&'a str, i64),
    Ints(&'a str, &'a [i64]),
    Float(&'a str, f32),
    Str(&'a str, &'a str),
    Tensor(&'a str, Msg),
    /// A subgraph (`If` branches, `Loop` / `Scan` bodies), built with [`graph`].
    Graph(&'a str, Msg),
}

fn attr(a: &Attr) -> Msg {
    match a {
        Attr::Int(n, v) => Msg::new().str(1, n).int(20, 2).int(3, *v),
        Attr::Ints(n, vs) => vs.iter().fold(Msg::new().str(1, n).int(20, 7), |m, &v| m.int(8, v)),
        Attr::Float(n, v) => Msg::new().str(1, n).int(20, 1).float(2, *v),
        Attr::Str(n, s) => Msg::new().str(1, n).int(20, 3).str(4, s),
        Attr::Tensor(n, t) => Msg::new().str(1, n).int(20, 4).msg(5, t),
        Attr::Graph(n, g) => Msg::new().str(1, n).int(20, 5).msg(6, g),
    }
}

/// A node.
pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str], attrs: &[Attr]) -> Msg {
    let mut m = Msg::new();
    for i in inputs {
        m = m.str(1, i);
    }
    for o in outputs {
        m = m.str(2, o);
    }
    m = m.str(3, name).str(4, op);
    for a in attrs {
        m = m.msg(5, &attr(a));
    }
    m
}

/// A graph (a model's, or a subgraph for [`Attr::Graph`]).
pub fn graph(name: &str, nodes: &[Msg], inputs: &[Msg], outputs: &[Msg], initializers: &[Msg]) -> Msg {
    let mut g = Msg::new().str(2, name);
    for n in nodes {
        g = g.msg(1, n);
    }
    for t in initializers {
        g = g.msg(5, t);
    }
    for i in inputs {
        g = g.msg(11, i);
    }
    for o in outputs {
        g = g.msg(12, o);
    }
    g
}

/// A model of one graph at `opset`.
pub fn model(opset: i64, nodes: &[Msg], inputs: &[Msg], outputs: &[Msg], initializers: &[Msg]) -> Vec<u8> {
    let g = graph("test_graph", nodes, inputs, outputs, initializers);
    let opset = Msg::new().str(1, "").int(2, opset);
    Msg::new().int(1, 8).str(2, "pfor-tests").msg(7, &g).msg(8, &opset).0
}
