//! The reverse- and forward-mode drivers: seeds, accumulation, unreachable inputs,
//! intermediate values as `xs`, error messages.

use pfor::autodiff::{gradients, gradients_with, jvp};
use pfor::prelude::*;

#[test]
fn gradient_of_an_unconnected_input_is_zero_or_none() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let z = g.input("z", DType::F64, [3]);
    let l = g.sum_all(x).unwrap();
    assert_eq!(gradients_with(&mut g, &[l], &[z], None).unwrap(), vec![None]);
    let d = gradients(&mut g, &[l], &[z], None).unwrap();
    let feeds = [(x, Tensor::zeros(DType::F64, &[2]).unwrap()), (z, Tensor::zeros(DType::F64, &[3]).unwrap())];
    assert_eq!(run_once(&g, &d, &feeds).unwrap()[0].to_f64_vec(), vec![0.0; 3]);
}

#[test]
fn explicit_grad_ys_weight_the_outputs() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [3]);
    let y = g.mul_scalar(x, 3.0).unwrap();
    let w = g.constant(Tensor::vec1(&[1.0f64, 2.0, 3.0]));
    let d = gradients(&mut g, &[y], &[x], Some(&[w])).unwrap();
    let v = run_once(&g, &d, &[(x, Tensor::vec1(&[0.0f64; 3]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![3.0, 6.0, 9.0]);
}

#[test]
fn gradient_with_respect_to_an_intermediate_value() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let h = g.exp(x).unwrap();
    let y = g.square(h).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = gradients(&mut g, &[l], &[h, x], None).unwrap();
    let xv = Tensor::vec1(&[0.0f64, 1.0]);
    let v = run_once(&g, &d, &[(x, xv)]).unwrap();
    let e1 = 1f64.exp();
    assert_eq!(v[0].to_f64_vec(), vec![2.0, 2.0 * e1]);
    let want = [2.0, 2.0 * e1 * e1];
    for (a, b) in v[1].to_f64_vec().iter().zip(want) {
        assert!((a - b).abs() < 1e-12);
    }
}

#[test]
fn stop_gradient_stops() {
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let s = g.stop_gradient(x).unwrap();
    let y = g.mul(s, x).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = gradients(&mut g, &[l], &[x], None).unwrap();
    let v = run_once(&g, &d, &[(x, Tensor::vec1(&[2.0f64, 5.0]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![2.0, 5.0]);
}

#[test]
fn integer_xs_and_bad_tangents_are_clear_errors() {
    let mut g = Graph::new();
    let i = g.input("i", DType::I64, [2]);
    let x = g.input("x", DType::F64, [2]);
    let l = g.sum_all(x).unwrap();
    let e = gradients(&mut g, &[l], &[i], None).unwrap_err().to_string();
    assert!(e.contains("only float"), "{e}");
    let t = g.constant(Tensor::zeros(DType::F32, &[2]).unwrap());
    let e = jvp(&mut g, &[l], &[x], &[t]).unwrap_err().to_string();
    assert!(e.contains("tangents[0]"), "{e}");
}

#[test]
fn a_missing_rule_names_the_op_and_node() {
    #[derive(Debug)]
    struct Twice;
    impl pfor::ops::CustomOp for Twice {
        fn name(&self) -> &str {
            "twice"
        }
        fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
            Ok(vec![inputs[0].clone()])
        }
        fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
            Ok(vec![Tensor::from_vec(
                inputs[0].shape(),
                inputs[0].to_f64_vec().iter().map(|v| 2.0 * v).collect::<Vec<_>>(),
            )?])
        }
    }
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let y = g.add_op(Op::Custom(std::sync::Arc::new(Twice)), &[x]).unwrap();
    let l = g.sum_all(y).unwrap();
    let e = gradients(&mut g, &[l], &[x], None).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("twice") && msg.contains(&format!("{}", y.node)), "{msg}");
}

#[test]
fn a_custom_op_with_rules_is_differentiated() {
    #[derive(Debug)]
    struct Cube;
    impl pfor::ops::CustomOp for Cube {
        fn name(&self) -> &str {
            "cube"
        }
        fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
            Ok(vec![inputs[0].clone()])
        }
        fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
            Ok(vec![Tensor::from_vec(
                inputs[0].shape(),
                inputs[0].to_f64_vec().iter().map(|v| v * v * v).collect::<Vec<_>>(),
            )?])
        }
        fn vjp(&self, cx: &mut pfor::autodiff::VjpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
            let (x, dy) = (cx.x(0), cx.dy(0)?);
            let x2 = cx.g.square(x)?;
            let d = cx.g.mul_scalar(x2, 3.0)?;
            Ok(vec![Some(cx.g.mul(dy, d)?)])
        }
        fn jvp(&self, cx: &mut pfor::autodiff::JvpCtx<'_>) -> Result<Vec<Option<ValueId>>> {
            let (x, t) = (cx.x(0), cx.t_or_zero(0)?);
            let x2 = cx.g.square(x)?;
            let d = cx.g.mul_scalar(x2, 3.0)?;
            Ok(vec![Some(cx.g.mul(t, d)?)])
        }
    }
    let mut g = Graph::new();
    let x = g.input("x", DType::F64, [2]);
    let y = g.add_op(Op::Custom(std::sync::Arc::new(Cube)), &[x]).unwrap();
    let l = g.sum_all(y).unwrap();
    let d = gradients(&mut g, &[l], &[x], None).unwrap();
    let t = g.constant(Tensor::vec1(&[1.0f64, 1.0]));
    let j = jvp(&mut g, &[y], &[x], &[t]).unwrap();
    let v = run_once(&g, &[d[0], j[0]], &[(x, Tensor::vec1(&[1.0f64, 2.0]))]).unwrap();
    assert_eq!(v[0].to_f64_vec(), vec![3.0, 12.0]);
    assert_eq!(v[1].to_f64_vec(), vec![3.0, 12.0]);
}
