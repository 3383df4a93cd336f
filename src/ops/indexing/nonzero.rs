//! `nonzero`: the row-major coordinates of the nonzero (true) elements, whole-tensor or per
//! batch element.
//!
//! With `batch_dims = b`, `x [B.., S..]` gives `[B.., c, rank(S)]`: each batch element's
//! coordinates within the element, where `c` must be the same for every element — a
//! differing count is a shape error naming the counts (the result would be ragged). This
//! is what `nonzero` of a per-iteration value becomes under pfor (`b + 1`): stacking works
//! exactly when every iteration finds the same number of elements, and otherwise the run
//! fails at this node saying so, instead of producing a wrong or padded result.
//! `!=` decides: NaN is nonzero, -0.0 is zero.

use super::*;

/// `[B.., ?, rank - b]` i64.
pub(super) fn infer(op: &str, x: &TensorType, b: usize) -> Result<Vec<TensorType>> {
    let r = x.rank();
    if b > r {
        return Err(Error::shape(op, format!("batch_dims {b} exceeds the rank of {x}")));
    }
    let mut dims = x.shape.dims()[..b].to_vec();
    dims.push(Dim::unknown());
    dims.push(Dim::Fixed(r - b));
    Ok(vec![TensorType::new(DType::I64, dims)])
}

pub(super) fn kernel<T: Element>(op: &str, a: &ArcArray<T, IxDyn>, b: usize) -> Result<Tensor> {
    let shape = a.shape();
    if b > shape.len() {
        return Err(Error::shape(op, format!("batch_dims {b} exceeds rank {}", shape.len())));
    }
    let (lead, elem) = shape.split_at(b);
    let r = elem.len();
    let per: usize = elem.iter().product();
    let zero = T::from_f64(0.0);
    // row-major strides of one element
    let mut strides = vec![1usize; r];
    for d in (0..r.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * elem[d + 1];
    }
    let src = contiguous(a);
    let mut out = Vec::new();
    let mut count = None;
    let elements = if per == 0 { 0 } else { lead.iter().product() };
    for e in 0..elements {
        let mut c = 0;
        for (f, &x) in src[e * per..(e + 1) * per].iter().enumerate() {
            if x != zero {
                c += 1;
                out.extend((0..r).map(|d| ((f / strides[d]) % elem[d]) as i64));
            }
        }
        match count {
            None => count = Some(c),
            Some(c0) if c0 != c => {
                return Err(Error::shape(
                    op,
                    format!(
                        "batch element {e} has {c} nonzero elements, element 0 has {c0}: per-element results \
                         of different lengths cannot be stacked (inside pfor: the iterations' results differ in length)"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    let mut out_shape = lead.to_vec();
    out_shape.push(count.unwrap_or(0));
    out_shape.push(r);
    Tensor::from_vec(&out_shape, out)
}
