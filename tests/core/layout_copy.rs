//! `tensor::layout`'s row-major copies of strided views: transposed views (an earlier axis
//! contiguous, the last one strided) take the tiled path; every view must give the elements in
//! row-major order of its own shape, exactly as ndarray's element iterator does — permuted
//! axes of ranks 2 to 5, sizes around and beyond a tile and past the parallel copy's size,
//! reversed axes (negative strides),
//! stepped slices and broadcast axes.

use ndarray::{ArrayD, Axis, IxDyn, Slice};
use pfor::tensor::layout::{standard_array, standard_cow, standard_vec};

fn array(shape: &[usize]) -> ArrayD<i64> {
    let n = shape.iter().product::<usize>() as i64;
    ArrayD::from_shape_vec(IxDyn(shape), (0..n).collect()).unwrap()
}

#[test]
fn permuted_views_copy_in_row_major_order() {
    let cases: &[(&[usize], &[usize])] = &[
        (&[3, 70], &[1, 0]),
        (&[2, 3, 5, 7], &[0, 2, 3, 1]),
        (&[1, 3, 40, 33], &[0, 2, 3, 1]),
        (&[64, 65, 1, 1], &[2, 3, 1, 0]),
        (&[2, 33, 3, 34], &[0, 3, 1, 2]),
        (&[4, 3, 2, 5, 6], &[4, 1, 3, 0, 2]),
        (&[2, 2, 2, 2, 2], &[1, 0, 4, 2, 3]),
        // last axes of 2 to 8 (image channels: 2 to 4 row by row, wider in tiles)
        (&[2, 2, 9, 11], &[0, 2, 3, 1]),
        (&[1, 4, 13, 7], &[0, 2, 3, 1]),
        (&[3, 6, 5, 19], &[0, 2, 3, 1]),
        (&[2, 8, 33, 3], &[0, 2, 3, 1]),
        // past 2^16 elements: copied on the rayon pool, a single plane split into row ranges
        // (one NCHW -> NHWC image, rows not a multiple of the split), several planes
        // (a batch; two outer axes; the plane's axes not adjacent in the output)
        (&[1, 3, 224, 224], &[0, 2, 3, 1]),
        (&[1, 2, 181, 191], &[0, 2, 3, 1]),
        (&[4, 3, 150, 150], &[0, 2, 3, 1]),
        (&[2, 3, 4, 100, 120], &[1, 0, 3, 4, 2]),
        (&[6, 40, 300], &[2, 1, 0]),
    ];
    for (shape, perm) in cases {
        let a = array(shape);
        let v = a.view().permuted_axes(IxDyn(perm));
        let want: Vec<i64> = v.iter().copied().collect();
        assert_eq!(standard_vec(&v), want, "{shape:?} permuted {perm:?}");
        let s = standard_array(&v);
        assert!(s.is_standard_layout());
        assert_eq!(s.shape(), v.shape());
        assert_eq!(standard_cow(v.clone()).as_slice().unwrap(), want.as_slice());
        // reversed and stepped forms of the same view
        let mut r = v.clone();
        r.invert_axis(Axis(0));
        assert_eq!(standard_vec(&r), r.iter().copied().collect::<Vec<_>>(), "{shape:?} {perm:?} reversed");
        let last = v.ndim() - 1;
        let stepped = v.slice_axis(Axis(last), Slice::new(0, None, 2));
        assert_eq!(standard_vec(&stepped), stepped.iter().copied().collect::<Vec<_>>(), "{shape:?} stepped");
    }
}

#[test]
fn broadcast_and_transposed_views_copy_in_row_major_order() {
    let a = array(&[5, 40]);
    let b = a.t().insert_axis(Axis(1));
    let b = b.broadcast(IxDyn(&[40, 3, 5])).unwrap();
    assert_eq!(standard_vec(&b.view()), b.iter().copied().collect::<Vec<_>>());
    // a row-major view is borrowed, not copied
    assert!(standard_cow(a.view()).is_view());
}
