//! Sizes that overflow are errors, never panics: tensor constructors, reshape, static
//! shapes, shape inference, and kernels that size their output from attributes.

use pfor::prelude::*;

const HUGE: [usize; 2] = [usize::MAX, 2];

fn is_overflow(e: &Error) -> bool {
    matches!(e.root(), Error::Shape { msg, .. } if msg.contains("overflow"))
}

#[test]
fn tensor_constructors_reject_overflowing_shapes() {
    let errs = [
        Tensor::zeros(DType::F32, &HUGE).unwrap_err(),
        Tensor::ones(DType::I64, &HUGE).unwrap_err(),
        Tensor::full(DType::Bool, &[1 << 40, 1 << 40], 1.0).unwrap_err(),
        Tensor::randn(&HUGE, 0).unwrap_err(),
        Tensor::randn_f64(&HUGE, 0).unwrap_err(),
        Tensor::rand_uniform(DType::F64, &HUGE, 0.0, 1.0, 0).unwrap_err(),
        Tensor::from_vec::<f32>(&[1 << 32, 1 << 32], vec![]).unwrap_err(),
    ];
    for e in errs {
        assert!(is_overflow(&e), "{e}");
    }
    // A zero dim does not make the other dims' product fit (ndarray's own limit).
    assert!(is_overflow(&Tensor::zeros(DType::F32, &[usize::MAX, 2, 0]).unwrap_err()));
    assert_eq!(Tensor::zeros(DType::F32, &[1 << 20, 0]).unwrap().shape(), &[1 << 20, 0]);
}

#[test]
fn graph_constants_reject_overflowing_shapes() {
    let mut g = Graph::new();
    assert!(is_overflow(&g.zeros(DType::F64, &HUGE).unwrap_err()));
    assert!(is_overflow(&g.ones(DType::F32, &HUGE).unwrap_err()));
    assert_eq!(g.num_nodes(), 0);
}

#[test]
fn reshape_to_an_overflowing_shape_is_an_error() {
    let t = Tensor::zeros(DType::F32, &[4]).unwrap();
    // The product wraps to 0 or overflows: both used to slip through or panic.
    for shape in [&HUGE[..], &[1 << 32, 1 << 32][..], &[usize::MAX, usize::MAX, 4][..]] {
        let e = t.reshape(shape).unwrap_err();
        assert!(is_overflow(&e), "{shape:?}: {e}");
    }
    assert_eq!(t.reshape(&[2, 2]).unwrap().shape(), &[2, 2]);
}

#[test]
fn static_element_counts_do_not_overflow() {
    let s = Shape::fixed(&[1 << 40, 1 << 40]);
    assert_eq!(s.num_elements(), None);
    assert_eq!(Shape::fixed(&[3, 4]).num_elements(), Some(12));
    assert_eq!(Dim::fixed(1 << 40).mul(&Dim::fixed(1 << 40)), None);
    assert_eq!(Dim::fixed(1 << 20).mul(&Dim::fixed(1 << 20)), Some(Dim::fixed(1 << 40)));
    assert_eq!(Dim::fixed(0).mul(&Dim::unknown()), Some(Dim::fixed(0)));
}

#[test]
fn shape_inference_rejects_overflowing_results() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [1 << 40, 2]);
    let e = g.tile(x, &[1 << 40, 1]).unwrap_err();
    assert!(is_overflow(&e), "{e}");
    let y = g.input("y", DType::F32, [Dim::fixed(1 << 40), Dim::fixed(1 << 40)]);
    let e = g.reshape(y, &[-1]).unwrap_err();
    assert!(is_overflow(&e), "{e}");
    // With a dynamic dim too: the fixed dims' product is checked.
    let z = g.input("z", DType::F32, [Dim::unknown(), Dim::fixed(1 << 40), Dim::fixed(1 << 40)]);
    let e = g.reshape(z, &[-1]).unwrap_err();
    assert!(is_overflow(&e), "{e}");
}

#[test]
fn derivative_apis_reject_overflowing_static_shapes() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [1 << 40, 1 << 40]);
    let y = g.sin(x).unwrap();
    let e = pfor::api::jacobian(&mut g, y, x).unwrap_err();
    assert!(is_overflow(&e), "{e}");
    let e = pfor::api::jacobian_fwd(&mut g, y, x).unwrap_err();
    assert!(is_overflow(&e), "{e}");
}

#[test]
fn an_overflowing_static_output_is_an_error_when_run() {
    let mut g = Graph::new();
    let key = g.constant(Tensor::scalar(7i64));
    let r = g.random_uniform(key, &HUGE, DType::F32, 0.0, 1.0).unwrap();
    let e = run_once(&g, &[r], &[]).unwrap_err();
    assert!(is_overflow(&e), "{e}");
    assert!(e.to_string().contains("random_uniform"), "{e}");
}

#[test]
fn a_function_rejects_foreign_handles() {
    // Functions are built only through validating constructors (the fields are private,
    // see the compile_fail doctest on `Function`).
    let mut other = Graph::new();
    let foreign = other.input("z", DType::F32, [2]);
    let _ = other.input("w", DType::F32, [2]);
    let g = Graph::new();
    assert!(Function::build(&g, &[], |_, _| Ok(vec![foreign])).is_err());
    assert!(Function::from_parts(Graph::new(), vec![], vec![foreign]).is_err());
}

#[test]
fn unstack_of_a_huge_fixed_axis_is_an_error() {
    // It used to allocate one output type per element of the axis (an abort at 2^40).
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [1 << 40, 2]);
    let e = g.unstack(x, 0).unwrap_err();
    assert!(matches!(e.root(), Error::Shape { msg, .. } if msg.contains("unstack makes at most")), "{e}");
    let y = g.input("y", DType::F32, [3, 2]);
    assert_eq!(g.unstack(y, 0).unwrap().len(), 3);
}

#[test]
fn pfor_of_a_segment_op_with_a_huge_segment_count_is_an_error() {
    // The converter multiplied the segment count by the loop length unchecked (a panic).
    use pfor::vectorize::{PforOptions, pfor_with};
    let mut g = Graph::new();
    let data = g.constant(Tensor::ones(DType::F32, &[2, 3]).unwrap());
    let ids = g.constant(Tensor::from_vec(&[2, 3], vec![0i64, 1, 0, 1, 1, 0]).unwrap());
    let r = pfor_with(&mut g, 2, &PforOptions::strict(), |g, i| {
        let d = g.gather(data, i, 0)?;
        let s = g.gather(ids, i, 0)?;
        Ok(vec![g.unsorted_segment_max(d, s, 1 << 63)?])
    });
    let e = r.unwrap_err();
    assert!(e.to_string().contains("overflow"), "{e}");
}

#[test]
fn gradients_of_linalg_ops_on_huge_static_matrices_build_without_looping_over_them() {
    // The VJP of `trace` built its diagonal mask as a constant of m x n elements: an
    // overflow (panic) at [2^40, 2^40], a 2^40-trip loop (hang) at [2^40, 0].
    for dims in [[1usize << 40, 1 << 40], [1 << 40, 0]] {
        let mut g = Graph::new();
        let x = g.input("x", DType::F32, dims);
        let t = g.trace(x).unwrap();
        let d = pfor::autodiff::gradients(&mut g, &[t], &[x], None).unwrap();
        assert_eq!(g.value_type(d[0]).unwrap().shape, Shape::fixed(&dims));
    }
}

#[test]
fn a_shape_operand_of_a_huge_fixed_length_is_an_error() {
    // reshape_dyn / broadcast_to_dyn / fill_dyn take their rank from the shape operand's
    // static length: 2^40 used to abort allocating the output's dims.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [2]);
    let s = g.input("s", DType::I64, [1 << 40]);
    let z = g.scalar(DType::F32, 0.0);
    for e in [g.reshape_dyn(x, s).unwrap_err(), g.broadcast_to_dyn(x, s).unwrap_err(), g.fill_dyn(s, z).unwrap_err()] {
        assert!(matches!(e.root(), Error::Shape { msg, .. } if msg.contains("rank above")), "{e}");
    }
    let s2 = g.input("s2", DType::I64, [2]);
    let r = g.reshape_dyn(x, s2).unwrap();
    assert_eq!(g.value_type(r).unwrap().rank(), 2);
}

#[test]
fn pad_to_an_overflowing_size_is_an_error_when_run() {
    // The kernel added the paddings unchecked and built the output with ndarray's
    // panicking constructor (a zero dim kept the static size check from refusing it).
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [Dim::unknown(), Dim::unknown()]);
    let big = 1usize << 62;
    let y = g.pad(x, &[(0, 0), (big, big)], pfor::ops::slicing::PadMode::Constant(0.0)).unwrap();
    let e = run_once(&g, &[y], &[(x, Tensor::zeros(DType::F32, &[0, 1]).unwrap())]).unwrap_err();
    assert!(is_overflow(&e), "{e}");
}

#[test]
fn pfor_of_a_conv_whose_flattened_batch_overflows_is_an_error() {
    // Folding the loop axis into a conv's batch multiplied two fixed dims unchecked.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [4, 1 << 62, 1, 1, 0]);
    let f = g.constant(Tensor::zeros(DType::F32, &[1, 1, 0, 1]).unwrap());
    let r = pfor::vectorize::pfor(&mut g, 4, |g, i| {
        let xi = g.gather(x, i, 0)?;
        Ok(vec![g.conv2d(xi, f, Conv2dParams::default())?])
    });
    assert!(is_overflow(&r.unwrap_err()));
}
