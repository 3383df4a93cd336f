//! The point-major schedule of the Winograd conv kernel (`src/kernels/conv/winograd/points.rs`):
//! every tile's input transform, then one GEMM per transform point over all tiles, then the
//! output transforms, where the transformed filter is larger than 16 MB, or 4 MB at few tiles.
//!
//! Checked: the point-major and tile-major schedules give the same bits (with the `+ bias +
//! residual → relu` epilogue), over odd tile counts, maps smaller than a tile, n = 0 and 1,
//! output channels that are not a multiple of the 64-wide register block and groups of
//! tiles split in several; both within the documented error of an f64 reference; a session
//! conv whose filter takes the point-major path by the rule matches the reference and the
//! kernel's bits; shapes the kernel does not take and bad buffers.

use super::conv_winograd::{conv, reference, winograd_cpu, worst};
use pfor::kernels::{WinogradSchedule as Schedule, winograd_conv2d};
use pfor::ops::conv::Padding;
use pfor::prelude::*;

/// Error bound relative to `Σ |x·w|` (as `conv_winograd3`'s).
const REL_BOUND: f64 = 4e-6;

fn values(t: &Tensor) -> Vec<f32> {
    t.to_array::<f32>().unwrap().iter().copied().collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The kernel's output for a 3x3 SAME conv of `x [n, h, w, c]` by `f [3, 3, c, o]`.
fn run(x: &Tensor, f: &Tensor, epi: Option<(&[f32], &[f32])>, schedule: Schedule) -> Option<Vec<f32>> {
    let s = x.shape().to_vec();
    let o = f.shape()[3];
    let (bias, res) = (epi.map(|e| e.0), epi.map(|e| e.1));
    winograd_conv2d(&values(x), [s[0], s[1], s[2], s[3]], &values(f), [3, o], bias, res, epi.is_some(), schedule)
        .unwrap()
}

#[test]
fn point_major_gives_the_tile_major_bits_within_the_reference_bound() {
    if !winograd_cpu() {
        return;
    }
    // (n, h, w, c, o): 2x2 tiles (ResNet's 7x7 maps), 3x3 (odd count, partial edge tiles),
    // a map smaller than a tile, n = 1 and 0, O = 48 and 80 (partial 64-wide blocks).
    let cases = [(1, 7, 7, 64, 64), (3, 9, 11, 16, 48), (2, 3, 5, 32, 80), (1, 14, 14, 48, 16), (0, 7, 7, 16, 16)];
    for (i, &(n, h, w, c, o)) in cases.iter().enumerate() {
        let x = Tensor::randn(&[n, h, w, c], 70 + i as u64).unwrap();
        let f = Tensor::randn(&[3, 3, c, o], 80 + i as u64).unwrap();
        let point = run(&x, &f, None, Schedule::PointMajor).expect("the kernel takes the case");
        let tile = run(&x, &f, None, Schedule::TileMajor).expect("the kernel takes the case");
        assert_eq!(bits(&point), bits(&tile), "case {i}: schedules differ");
        let (want, mag, _) = reference(&x, &f, Padding::Same);
        let e = worst(&Tensor::from_vec(&[n, h, w, o], point).unwrap(), &want, &mag);
        assert!(e <= REL_BOUND, "case {i}: point-major error {e:e} of Σ|x·w|");
        // the fused epilogue, both schedules
        let bias = values(&Tensor::randn(&[o], 90 + i as u64).unwrap());
        let res = values(&Tensor::randn(&[n, h, w, o], 100 + i as u64).unwrap());
        let point = run(&x, &f, Some((&bias, &res)), Schedule::PointMajor).unwrap();
        let tile = run(&x, &f, Some((&bias, &res)), Schedule::TileMajor).unwrap();
        assert_eq!(bits(&point), bits(&tile), "case {i}: schedules differ with the epilogue");
        assert!(point.iter().all(|&v| v >= 0.0), "case {i}: relu applied");
    }
}

#[test]
fn point_major_splits_many_tiles_into_groups_with_the_same_bits() {
    if !winograd_cpu() {
        return;
    }
    // 5 x 30 x 30 = 4,500 tiles of 16 + 16 channels: more than one 16 MiB group of
    // transformed inputs and products (3,640 tiles), the last one partial.
    let x = Tensor::randn(&[5, 120, 118, 16], 7).unwrap();
    let f = Tensor::randn(&[3, 3, 16, 16], 8).unwrap();
    let point = run(&x, &f, None, Schedule::PointMajor).unwrap();
    let tile = run(&x, &f, None, Schedule::TileMajor).unwrap();
    assert_eq!(bits(&point), bits(&tile));
    assert_eq!(bits(&run(&x, &f, None, Schedule::Auto).unwrap()), bits(&tile));
}

#[test]
fn a_filter_larger_than_the_rule_runs_point_major_in_a_session() {
    // U = 36 x 192 x 192 x 4 B = 5.3 MB at 16 tiles: the rule picks point-major (> 4 MB,
    // <= 64 tiles); 16 tiles pass the F(4x4, 3x3) cost rule
    let (n, hw, c) = (1, 14, 192);
    let x = Tensor::randn(&[n, hw, hw, c], 11).unwrap();
    let f = Tensor::randn(&[3, 3, c, c], 12).unwrap();
    let (want, mag, _) = reference(&x, &f, Padding::Same);
    let y = conv(&x, &f, Padding::Same, true);
    let e = worst(&y, &want, &mag);
    assert!(e <= REL_BOUND, "error {e:e} of Σ|x·w|");
    if winograd_cpu() {
        let auto = run(&x, &f, None, Schedule::Auto).unwrap();
        assert_eq!(bits(&values(&y)), bits(&auto), "the session ran the kernel");
        assert_eq!(bits(&auto), bits(&run(&x, &f, None, Schedule::PointMajor).unwrap()));
    }
}

#[test]
fn shapes_the_kernel_does_not_take_and_bad_buffers() {
    let x = Tensor::randn(&[1, 7, 7, 24], 1).unwrap();
    let f = Tensor::randn(&[3, 3, 24, 32], 2).unwrap();
    // C = 24 is not a multiple of 16: not taken (also on CPUs without AVX-512)
    assert!(run(&x, &f, None, Schedule::PointMajor).is_none());
    let e = winograd_conv2d(&[0.0; 10], [1, 7, 7, 16], &[0.0; 9 * 16 * 16], [3, 16], None, None, false, Schedule::Auto)
        .unwrap_err()
        .to_string();
    assert!(e.contains("winograd_conv2d") && e.contains("[1, 7, 7, 16]"), "{e}");
}
