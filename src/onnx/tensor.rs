//! ONNX element types and `TensorProto` → [`Tensor`].
//!
//! Invariants: f32, f64, i64 and bool are held as themselves; the narrower integer types
//! (int8–int32, uint8–uint32) are held as i64 and float16 / bfloat16 as f32 (every value is
//! exact in the wider type; results are compared after the same widening); uint64 is held as
//! i64 too, and a uint64 tensor holding a value above `i64::MAX` (not exact in i64) is refused
//! naming the tensor and the value; strings, complex and the 8/6/4/2-bit types are refused
//! with an error naming the type. A tensor's
//! element count is checked against its data before anything is built.

use crate::error::{Error, Result};
use crate::onnx::proto::TensorProto;
use crate::tensor::{DType, Tensor};

/// The name of an ONNX `TensorProto.DataType`.
pub fn onnx_type_name(t: i64) -> &'static str {
    match t {
        1 => "float",
        2 => "uint8",
        3 => "int8",
        4 => "uint16",
        5 => "int16",
        6 => "int32",
        7 => "int64",
        8 => "string",
        9 => "bool",
        10 => "float16",
        11 => "double",
        12 => "uint32",
        13 => "uint64",
        14 => "complex64",
        15 => "complex128",
        16 => "bfloat16",
        17..=20 => "float8",
        21 => "uint4",
        22 => "int4",
        23 => "float4e2m1",
        _ => "an unknown type",
    }
}

/// Our dtype holding an ONNX element type (see the module doc), or an unsupported error.
pub fn dtype_of(t: i64) -> Result<DType> {
    match t {
        1 | 10 | 16 => Ok(DType::F32),
        11 => Ok(DType::F64),
        2..=7 | 12 | 13 => Ok(DType::I64),
        9 => Ok(DType::Bool),
        _ => Err(Error::unsupported("onnx", format!("element type {} ({t})", onnx_type_name(t)))),
    }
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = (h >> 10) & 0x1f;
    let man = u32::from(h & 0x3ff);
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // subnormal: normalize
            let mut e = -14i32;
            let mut m = man;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (((e + 127) as u32) << 23) | ((m & 0x3ff) << 13)
        }
        0x1f => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((u32::from(exp) + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// Converts a decoded `TensorProto` to a tensor (see the module doc for the dtypes).
pub fn to_tensor(t: &TensorProto) -> Result<Tensor> {
    let what = |m: String| Error::unsupported("onnx", format!("tensor '{}': {m}", t.name));
    if t.external {
        return Err(what("data in an external file".into()));
    }
    dtype_of(t.data_type).map_err(|_| what(format!("element type {}", onnx_type_name(t.data_type))))?;
    let mut shape = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        shape.push(
            usize::try_from(d).map_err(|_| Error::InvalidArgument(format!("onnx tensor '{}': dim {d}", t.name)))?,
        );
    }
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let n = n.ok_or_else(|| Error::InvalidArgument(format!("onnx tensor '{}': {shape:?} overflows", t.name)))?;
    let raw = !t.raw_data.is_empty() || n == 0;
    let width = match t.data_type {
        1 | 6 | 12 => 4,
        2 | 3 | 9 => 1,
        4 | 5 | 10 | 16 => 2,
        7 | 11 | 13 => 8,
        _ => 0,
    };
    let len_err = |got: usize| {
        Error::InvalidArgument(format!(
            "onnx tensor '{}': shape {shape:?} needs {n} elements, the data holds {got}",
            t.name
        ))
    };
    if raw {
        if t.raw_data.len() != n * width {
            return Err(len_err(t.raw_data.len() / width.max(1)));
        }
        let b = &t.raw_data;
        let words = |w: usize| b.chunks_exact(w);
        return match t.data_type {
            1 => Tensor::from_vec(&shape, words(4).map(|c| f32::from_le_bytes(c.try_into().expect("4"))).collect()),
            11 => Tensor::from_vec(&shape, words(8).map(|c| f64::from_le_bytes(c.try_into().expect("8"))).collect()),
            10 => Tensor::from_vec(&shape, words(2).map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect()),
            16 => Tensor::from_vec(&shape, words(2).map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]]))).collect()),
            9 => Tensor::from_vec(&shape, b.iter().map(|&x| x != 0).collect()),
            _ => {
                let ints: Vec<i64> = match t.data_type {
                    2 => b.iter().map(|&x| i64::from(x)).collect(),
                    3 => b.iter().map(|&x| i64::from(x as i8)).collect(),
                    4 => words(2).map(|c| i64::from(u16::from_le_bytes([c[0], c[1]]))).collect(),
                    5 => words(2).map(|c| i64::from(i16::from_le_bytes([c[0], c[1]]))).collect(),
                    6 => words(4).map(|c| i64::from(i32::from_le_bytes(c.try_into().expect("4")))).collect(),
                    12 => words(4).map(|c| i64::from(u32::from_le_bytes(c.try_into().expect("4")))).collect(),
                    13 => {
                        let u: Vec<u64> = words(8).map(|c| u64::from_le_bytes(c.try_into().expect("8"))).collect();
                        return uint64_tensor(&t.name, &shape, u);
                    }
                    _ => words(8).map(|c| i64::from_le_bytes(c.try_into().expect("8"))).collect(),
                };
                Tensor::from_vec(&shape, ints)
            }
        };
    }
    let check = |got: usize| if got == n { Ok(()) } else { Err(len_err(got)) };
    match t.data_type {
        1 => {
            check(t.float_data.len())?;
            Tensor::from_vec(&shape, t.float_data.iter().map(|b| f32::from_le_bytes(*b)).collect())
        }
        11 => {
            check(t.double_data.len())?;
            Tensor::from_vec(&shape, t.double_data.iter().map(|b| f64::from_le_bytes(*b)).collect())
        }
        7 => {
            check(t.int64_data.len())?;
            Tensor::from_vec(&shape, t.int64_data.clone())
        }
        12 => {
            check(t.uint64_data.len())?;
            Tensor::from_vec(&shape, t.uint64_data.iter().map(|&x| x & 0xffff_ffff).collect())
        }
        13 => {
            check(t.uint64_data.len())?;
            uint64_tensor(&t.name, &shape, t.uint64_data.iter().map(|&x| x as u64).collect())
        }
        9 => {
            check(t.int32_data.len())?;
            Tensor::from_vec(&shape, t.int32_data.iter().map(|&x| x != 0).collect())
        }
        10 => {
            check(t.int32_data.len())?;
            Tensor::from_vec(&shape, t.int32_data.iter().map(|&x| f16_to_f32(x as u16)).collect())
        }
        16 => {
            check(t.int32_data.len())?;
            Tensor::from_vec(&shape, t.int32_data.iter().map(|&x| bf16_to_f32(x as u16)).collect())
        }
        _ => {
            check(t.int32_data.len())?;
            // int32_data holds int32 values as varints (sign-extended to 64 bits)
            let ints = t.int32_data.iter().map(|&x| match t.data_type {
                2 => x & 0xff,
                3 => i64::from(x as i8),
                4 => x & 0xffff,
                5 => i64::from(x as i16),
                _ => i64::from(x as i32),
            });
            Tensor::from_vec(&shape, ints.collect())
        }
    }
}

/// A uint64 tensor held as i64: every value must fit (see the module doc).
fn uint64_tensor(name: &str, shape: &[usize], v: Vec<u64>) -> Result<Tensor> {
    let mut out = Vec::with_capacity(v.len());
    for x in v {
        let y = i64::try_from(x).map_err(|_| {
            Error::unsupported(
                "onnx",
                format!("tensor '{name}': element type uint64 value {x} (above i64::MAX, not exact in i64)"),
            )
        })?;
        out.push(y);
    }
    Tensor::from_vec(shape, out)
}
