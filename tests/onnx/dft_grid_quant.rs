//! `DFT`, `AffineGrid`, `GridSample` and `QuantizeLinear` on models built in memory: the DFT
//! against the direct sum, its inverses as round trips (`ifft(fft(x)) = x`,
//! `irfft(rfft(x)) = x`); an `AffineGrid` of the identity transform against the normalized
//! pixel coordinates, and `GridSample` at it giving the image back in every mode and padding,
//! past the edge reading zeros or the border; `QuantizeLinear`'s saturation range from the
//! zero point's stated element type.

use super::encode::{Attr, FLOAT, Msg, model, node, tensor_f32, tensor_i64, value_info};
use pfor::onnx;
use pfor::prelude::*;

/// Imports `nodes` (opset `opset`, float input `x` of `dims`, output `y`) and runs it on `x`.
fn run(opset: i64, nodes: &[Msg], dims: &[usize], x: Vec<f32>, inits: &[Msg]) -> Tensor {
    let d: Vec<Result<i64, &str>> = dims.iter().map(|&v| Ok(v as i64)).collect();
    let bytes = model(opset, nodes, &[value_info("x", FLOAT, &d)], &[value_info("y", FLOAT, &[])], inits);
    let (g, ins, outs) = onnx::load_bytes(&bytes).unwrap().to_graph().unwrap();
    run_once(&g, &outs, &[(ins[0], Tensor::from_vec(dims, x).unwrap())]).unwrap().remove(0)
}

fn close(a: &[f64], b: &[f64], tol: f64) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    assert!(a.iter().zip(b).all(|(p, q)| (p - q).abs() <= tol), "{a:?} vs {b:?}");
}

#[test]
fn dft_matches_the_direct_sum_and_its_inverses_round_trip() {
    // x [1, 5, 1] (real), signal axis 1: y[k] = sum_j x[j] e^{-2 pi i j k / 5}
    let x = vec![0.5f32, -1.0, 2.0, 0.25, 1.5];
    let y = run(17, &[node("DFT", "dft", &["x"], &["y"], &[Attr::Int("axis", 1)])], &[1, 5, 1], x.clone(), &[]);
    assert_eq!(y.shape(), &[1, 5, 2]);
    let mut want = Vec::new();
    for k in 0..5 {
        let (mut re, mut im) = (0.0, 0.0);
        for (j, &v) in x.iter().enumerate() {
            let t = 2.0 * std::f64::consts::PI * (j * k) as f64 / 5.0;
            re += f64::from(v) * t.cos();
            im -= f64::from(v) * t.sin();
        }
        want.extend([re, im]);
    }
    close(&y.to_f64_vec(), &want, 1e-5);
    // complex [1, 4, 2]: inverse of forward is the identity
    let z: Vec<f32> = (0..8).map(|i| (i as f32 * 0.7).sin()).collect();
    let round = run(
        17,
        &[
            node("DFT", "f", &["x"], &["s"], &[Attr::Int("axis", 1)]),
            node("DFT", "i", &["s"], &["y"], &[Attr::Int("axis", 1), Attr::Int("inverse", 1)]),
        ],
        &[1, 4, 2],
        z.clone(),
        &[],
    );
    close(&round.to_f64_vec(), &z.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 1e-5);
    // real, even length 6, signal axis -2 given as an opset-20 input: rfft gives 4
    // frequencies, irfft of them gives x back ([1, 6, 1])
    let r: Vec<f32> = (0..6).map(|i| (i as f32 * 1.3).cos() + 0.1).collect();
    let round = run(
        20,
        &[
            node("DFT", "f", &["x", "", "axis"], &["s"], &[Attr::Int("onesided", 1)]),
            node("DFT", "i", &["s", "", "axis"], &["y"], &[Attr::Int("onesided", 1), Attr::Int("inverse", 1)]),
        ],
        &[1, 6, 1],
        r.clone(),
        &[tensor_i64("axis", &[], &[-2])],
    );
    assert_eq!(round.shape(), &[1, 6, 1]);
    close(&round.to_f64_vec(), &r.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 1e-5);
}

#[test]
fn affine_grid_of_the_identity_is_the_normalized_pixel_grid() {
    // theta = identity [1, 2, 3]; size [1, 1, 2, 3] (H = 2, W = 3)
    let theta = vec![1.0f32, 0.0, 0.0, 0.0, 1.0, 0.0];
    for (align, xs, ys) in [(0, [-2.0 / 3.0, 0.0, 2.0 / 3.0], [-0.5, 0.5]), (1, [-1.0, 0.0, 1.0], [-1.0, 1.0])] {
        let n = node("AffineGrid", "grid", &["x", "size"], &["y"], &[Attr::Int("align_corners", align)]);
        let y = run(20, &[n], &[1, 2, 3], theta.clone(), &[tensor_i64("size", &[4], &[1, 1, 2, 3])]);
        assert_eq!(y.shape(), &[1, 2, 3, 2]);
        let want: Vec<f64> = ys.iter().flat_map(|&yv| xs.iter().flat_map(move |&xv| [xv, yv])).collect();
        close(&y.to_f64_vec(), &want, 1e-6);
    }
}

/// GridSample(x, AffineGrid(theta, [1, 2, 3, 4])) with `mode` and `padding`, x [1, 2, 3, 4].
fn sample_affine(theta: &[f32], mode: &str, padding: &str, x: &[f32]) -> Vec<f64> {
    let attrs = [Attr::Str("mode", mode), Attr::Str("padding_mode", padding)];
    let nodes = [
        node("AffineGrid", "grid", &["theta", "size"], &["g"], &[]),
        node("GridSample", "sample", &["x", "g"], &["y"], &attrs),
    ];
    let inits = [tensor_f32("theta", &[1, 2, 3], theta), tensor_i64("size", &[4], &[1, 2, 3, 4])];
    let y = run(20, &nodes, &[1, 2, 3, 4], x.to_vec(), &inits);
    assert_eq!(y.shape(), &[1, 2, 3, 4]);
    y.to_f64_vec()
}

#[test]
fn grid_sample_at_the_identity_grid_gives_the_image_back_in_every_mode() {
    // at the identity every point is a pixel centre
    let x: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin()).collect();
    let identity = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    for mode in ["linear", "nearest", "cubic"] {
        for padding in ["zeros", "border", "reflection"] {
            let y = sample_affine(&identity, mode, padding, &x);
            close(&y, &x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), 1e-5);
        }
    }
    // shifted by x + 2, row 0 of channel 0 lands right of the image: zeros reads 0 there,
    // border the edge pixel
    let shift = [1.0, 0.0, 2.0, 0.0, 1.0, 0.0];
    for (padding, want_edge) in [("zeros", false), ("border", true)] {
        let y = sample_affine(&shift, "nearest", padding, &x);
        let edge = f64::from(x[3]);
        assert!(y[..4].iter().all(|&v| if want_edge { (v - edge).abs() < 1e-6 } else { v == 0.0 }), "{padding}: {y:?}");
    }
}

#[test]
fn quantize_linear_saturates_to_the_zero_points_type() {
    // x / 0.5 rounded half to even, plus the zero point, saturated: uint8 [0, 255], int8
    // [-128, 127]; the zero point's type comes from the initializer
    let x = vec![-300.0f32, -1.25, 0.25, 0.75, 1.0, 300.0];
    // a scalar zero point 1 of element type t (int32_data)
    let zp = |t: i64| Msg::new().int(2, t).str(8, "zp").int(5, 1);
    let scale = tensor_f32("scale", &[], &[0.5]);
    let q = |t: i64| {
        let n = node("QuantizeLinear", "q", &["x", "scale", "zp"], &["y"], &[]);
        run(13, &[n], &[6], x.clone(), &[scale.clone(), zp(t)]).to_f64_vec()
    };
    assert_eq!(q(2), [0.0, 0.0, 1.0, 3.0, 3.0, 255.0]); // uint8
    assert_eq!(q(3), [-128.0, -1.0, 1.0, 3.0, 3.0, 127.0]); // int8
}
