//! Property test: randomly generated elementwise graphs verify, and the Session (with its
//! in-place buffer reuse and last-use release) computes what a naive evaluator computes.

use proptest::prelude::*;

use pfor::prelude::*;

#[derive(Clone, Debug)]
enum Step {
    Unary(u8, usize),
    Binary(u8, usize, usize),
}

fn unary_ref(k: u8, x: f64) -> f64 {
    match k % 6 {
        0 => -x,
        1 => x.abs(),
        2 => x.tanh(),
        3 => x.sin(),
        4 => x * x,
        _ => x.max(0.0),
    }
}

fn binary_ref(k: u8, a: f64, b: f64) -> f64 {
    match k % 4 {
        0 => a + b,
        1 => a - b,
        2 => a * b,
        _ => a.max(b),
    }
}

fn build(g: &mut Graph, k: u8, ins: &[ValueId]) -> Result<ValueId> {
    match ins {
        [x] => match k % 6 {
            0 => g.neg(*x),
            1 => g.abs(*x),
            2 => g.tanh(*x),
            3 => g.sin(*x),
            4 => g.square(*x),
            _ => g.relu(*x),
        },
        [a, b] => match k % 4 {
            0 => g.add(*a, *b),
            1 => g.sub(*a, *b),
            2 => g.mul(*a, *b),
            _ => g.maximum(*a, *b),
        },
        _ => unreachable!(),
    }
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            (any::<u8>(), any::<usize>()).prop_map(|(k, a)| Step::Unary(k, a)),
            (any::<u8>(), any::<usize>(), any::<usize>()).prop_map(|(k, a, b)| Step::Binary(k, a, b)),
        ],
        1..24,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn session_matches_naive_evaluator(steps in steps(), len in 1usize..6, seed in 0u64..1000, n_fetch in 1usize..4) {
        let mut g = Graph::new();
        let x0 = Tensor::randn_f64(&[len], seed).unwrap();
        let x1 = Tensor::randn_f64(&[len], seed + 1).unwrap();
        let inp = g.input("x", DType::F64, [len]);
        let c = g.constant(x1.clone());
        let mut vals = vec![inp, c];
        let mut naive: Vec<Vec<f64>> = vec![x0.to_f64_vec(), x1.to_f64_vec()];
        for s in &steps {
            let (v, r) = match *s {
                Step::Unary(k, a) => {
                    let a = a % vals.len();
                    (build(&mut g, k, &[vals[a]]).unwrap(), naive[a].iter().map(|x| unary_ref(k, *x)).collect())
                }
                Step::Binary(k, a, b) => {
                    let (a, b) = (a % vals.len(), b % vals.len());
                    let r = naive[a].iter().zip(&naive[b]).map(|(x, y)| binary_ref(k, *x, *y)).collect();
                    (build(&mut g, k, &[vals[a], vals[b]]).unwrap(), r)
                }
            };
            vals.push(v);
            naive.push(r);
        }
        g.verify().unwrap();
        // fetch the last few values (and an input, which must come back unmodified)
        let k = vals.len();
        let mut fetch: Vec<usize> = (k.saturating_sub(n_fetch)..k).collect();
        fetch.push(0);
        let fv: Vec<ValueId> = fetch.iter().map(|&i| vals[i]).collect();
        let mut s = Session::new(&g, &fv).unwrap();
        for _ in 0..2 {
            let out = s.run(&[(inp, x0.clone())]).unwrap();
            for (t, &i) in out.iter().zip(&fetch) {
                let want = Tensor::from_vec(&[len], naive[i].clone()).unwrap();
                prop_assert!(t.allclose(&want, 1e-12, 1e-12), "value {i}: {t} vs {want}");
            }
        }
    }
}
