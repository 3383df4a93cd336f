//! `benches/workloads/peerlib.rs` reproduces numpy's legacy `RandomState` and peerlib's
//! generators: the values below were printed by numpy 2.4 (`np.random.RandomState(s)`).

// also compiled as `workloads::peerlib` by `decisions.rs`
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../benches/workloads/peerlib.rs"]
mod np_peerlib;

use np_peerlib::{RandomState, cnn_params, mnist_images};

#[test]
fn the_stream_is_numpys_random_state() {
    let mut r = RandomState::new(1);
    assert_eq!([r.next_u32(), r.next_u32(), r.next_u32()], [1_791_095_845, 4_282_876_139, 3_093_770_124]);
    // np.random.RandomState(1).standard_normal(5): the polar method's cached second value too
    let mut r = RandomState::new(1);
    let want = [1.6243453636632417, -0.6117564136500754, -0.5281717522634557, -1.0729686221561705, 0.8654076293246785];
    for w in want {
        assert_eq!(r.standard_normal(), w);
    }
    // np.random.RandomState(900).uniform(0, 1, 3)
    let mut r = RandomState::new(900);
    for w in UNIFORM_900 {
        assert_eq!(r.random_sample(), w);
    }
    // past the first 624 words (the state's first regeneration): RandomState(900)'s 1000th
    // uniform, np.random.RandomState(900).uniform(0, 1, 1000)[-1]
    let mut r = RandomState::new(900);
    let last = (0..1000).map(|_| r.random_sample()).last().unwrap();
    assert_eq!(last, LAST_OF_1000);
}

/// `np.random.RandomState(900).uniform(0, 1, 3)`.
const UNIFORM_900: [f64; 3] = [0.4332015284267342, 0.30732792685059374, 0.5444184525223866];

/// `np.random.RandomState(900).uniform(0, 1, 1000)[-1]`.
const LAST_OF_1000: f64 = 0.8642280194563701;

#[test]
fn peerlib_generators_draw_in_peerlibs_order() {
    let p = cnn_params().unwrap();
    let shapes: Vec<&[usize]> = p.iter().map(|t| t.shape()).collect();
    assert_eq!(shapes, np_peerlib::CNN_SHAPES);
    // c1w[0, 0, 0, 0] = 1.6243453636632417 * sqrt(2 / 25), rounded to f32
    assert_eq!(p[0].to_vec::<f32>().unwrap()[0], (1.6243453636632417f64 * (2.0f64 / 25.0).sqrt()) as f32);
    // c1b, drawn after c1w's 800 normals: peerlib.cnn_params()["c1b"][:2]
    let c1b: Vec<f64> = p[1].to_vec::<f32>().unwrap()[..2].iter().map(|&v| f64::from(v)).collect();
    assert_eq!(c1b, C1B);
    let x = mnist_images(2, 900).unwrap();
    assert_eq!(x.shape(), &[2, 28, 28, 1]);
    let want = UNIFORM_900.map(|v| v as f32);
    assert_eq!(x.to_vec::<f32>().unwrap()[..3], want);
}

/// `peerlib.cnn_params()["c1b"][:2]`.
const C1B: [f64; 2] = [0.008143431507050991, 0.007804699242115021];
