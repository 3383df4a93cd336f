//! Core tests: the one configuration surface (`ExecOptions`). Every `PFOR_*` switch maps to
//! a field, read by `ExecOptions::from_env` alone; the session's options reach function
//! bodies and custom ops (through the `EvalCtx` trait); the worker pool is a value the
//! session holds.

use std::sync::{Arc, Mutex};

use pfor::kernels::WinogradSchedule;
use pfor::ops::{CustomOp, EvalCtx};
use pfor::prelude::*;

/// The knobs as one comparable tuple.
type Knobs = (bool, Option<usize>, bool, bool, bool, bool, bool, bool, bool, WinogradSchedule, bool);

fn knobs(o: &ExecOptions) -> Knobs {
    (
        o.profile,
        o.profile_report,
        o.fuse,
        o.on_workers,
        o.warm_workers,
        o.winograd,
        o.atb,
        o.implicit_gemm,
        o.pretranspose,
        o.winograd_schedule,
        o.winograd3_rule,
    )
}

#[test]
fn every_environment_switch_maps_to_one_field() {
    use WinogradSchedule::{Auto, PointMajor, TileMajor};
    let builtin = ExecOptions::builtin();
    let (t, f) = (true, false);
    assert_eq!(knobs(&builtin), (f, None, t, t, t, t, t, t, t, Auto, t));
    assert_eq!(knobs(&ExecOptions::from_vars(|_| None)), knobs(&builtin));
    let only = |var: &'static str, value: &'static str| {
        ExecOptions::from_vars(move |name| (name == var).then(|| value.to_string()))
    };
    assert_eq!(knobs(&only("PFOR_PROFILE", "7")), (t, Some(7), t, t, t, t, t, t, t, Auto, t));
    assert_eq!(knobs(&only("PFOR_PROFILE", "")), (t, Some(25), t, t, t, t, t, t, t, Auto, t));
    assert_eq!(knobs(&only("PFOR_NO_FUSE", "1")), (f, None, f, t, t, t, t, t, t, Auto, t));
    assert_eq!(knobs(&only("PFOR_ON_CALLER", "1")), (f, None, t, f, t, t, t, t, t, Auto, t));
    assert_eq!(knobs(&only("PFOR_NO_SPIN", "1")), (f, None, t, t, f, t, t, t, t, Auto, t));
    assert_eq!(knobs(&only("PFOR_NO_WINOGRAD", "1")), (f, None, t, t, t, f, t, t, t, Auto, t));
    assert_eq!(knobs(&only("PFOR_NO_ATB", "1")), (f, None, t, t, t, t, f, t, t, Auto, t));
    assert_eq!(knobs(&only("PFOR_NO_IMPLICIT_GEMM", "1")), (f, None, t, t, t, t, t, f, t, Auto, t));
    assert_eq!(knobs(&only("PFOR_NO_PRETRANSPOSE", "1")), (f, None, t, t, t, t, t, t, f, Auto, t));
    // the two value knobs: the Winograd schedule by name, the F(4x4, 3x3) rule off by "always"
    assert_eq!(knobs(&only("PFOR_WINOGRAD_SCHEDULE", "tile")), (f, None, t, t, t, t, t, t, t, TileMajor, t));
    assert_eq!(knobs(&only("PFOR_WINOGRAD_SCHEDULE", "point")), (f, None, t, t, t, t, t, t, t, PointMajor, t));
    assert_eq!(knobs(&only("PFOR_WINOGRAD_SCHEDULE", "other")), knobs(&builtin));
    assert_eq!(knobs(&only("PFOR_WINOGRAD3", "always")), (f, None, t, t, t, t, t, t, t, Auto, f));
    assert_eq!(knobs(&only("PFOR_WINOGRAD3", "1")), knobs(&builtin));
    // and reach the kernels through `kernel_options`
    let k = only("PFOR_WINOGRAD_SCHEDULE", "point").kernel_options();
    assert_eq!((k.winograd_schedule, k.winograd3_rule), (PointMajor, t));
    assert!(!only("PFOR_WINOGRAD3", "always").kernel_options().winograd3_rule);
    // the knobs that are not switches keep their built-in values
    let o = only("PFOR_NO_FUSE", "1");
    assert_eq!((o.max_call_depth, o.check_types, o.recycle_buffers), (200, true, true));
}

#[test]
fn the_winograd_knobs_reach_the_kernel() {
    // A 3x3 conv of 4 tiles, which the F(4x4, 3x3) cost rule leaves to the other kernels:
    // with the rule off it runs by Winograd (other rounding, same values to f32 accuracy);
    // either schedule then gives the same bits.
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [1, 8, 8, 16]);
    let w = g.input("w", DType::F32, [3, 3, 16, 16]);
    let y = g.conv2d(x, w, Conv2dParams::default()).unwrap();
    let feeds = [(x, Tensor::randn(&[1, 8, 8, 16], 1).unwrap()), (w, Tensor::randn(&[3, 3, 16, 16], 2).unwrap())];
    let run = |o: ExecOptions| Session::with_options(&g, &[y], o).unwrap().run(&feeds).unwrap().remove(0).to_f64_vec();
    let ruled = run(ExecOptions::builtin());
    let always = ExecOptions { winograd3_rule: false, ..ExecOptions::builtin() };
    let wino = run(always.clone());
    for schedule in [WinogradSchedule::TileMajor, WinogradSchedule::PointMajor] {
        assert_eq!(run(ExecOptions { winograd_schedule: schedule, ..always.clone() }), wino, "{schedule:?}");
    }
    let far = ruled.iter().zip(&wino).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(far < 1e-3, "Winograd and the direct sum agree to f32 accuracy: {far}");
    if pfor::kernels::cpu::caps().avx512f {
        assert_ne!(ruled, wino, "the rule off must send the conv to the Winograd kernel");
    }
}

/// `x` through a `cond` whose branches are chains of f32 elementwise ops (fusable).
fn cond_with_elementwise_bodies() -> (Graph, ValueId, ValueId, ValueId) {
    let mut g = Graph::new();
    let p = g.input("p", DType::Bool, Shape::scalar());
    let x = g.input("x", DType::F32, [64, 64]);
    let chain = |g: &mut Graph, a: &[ValueId]| -> Result<Vec<ValueId>> {
        let y = g.mul(a[0], a[0])?;
        let y = g.add(y, a[0])?;
        Ok(vec![g.tanh(y)?])
    };
    let y = g.cond(p, &[x], chain, chain).unwrap()[0];
    (g, p, x, y)
}

/// The op kinds a profiled run of `y` executed, with `fuse` on or off.
fn kinds_run(fuse: bool, g: &Graph, p: ValueId, x: ValueId, y: ValueId) -> Vec<String> {
    let opts = ExecOptions { fuse, profile: true, ..ExecOptions::builtin() };
    let mut s = Session::with_options(g, &[y], opts).unwrap();
    s.run(&[(p, Tensor::scalar(true)), (x, Tensor::randn(&[64, 64], 3).unwrap())]).unwrap();
    s.profile().entries().iter().map(|e| e.kind.clone()).collect()
}

#[test]
fn function_bodies_run_with_the_session_options() {
    // the same function (one `Arc<Function>` in one graph) run by two sessions: each
    // compiles the body with its own options (a plan cached with the function would serve
    // the first session's plan to the second)
    let (g, p, x, y) = cond_with_elementwise_bodies();
    let fused = kinds_run(true, &g, p, x, y);
    assert!(fused.iter().any(|k| k == "fused_elementwise"), "{fused:?}");
    let unfused = kinds_run(false, &g, p, x, y);
    assert!(!unfused.iter().any(|k| k == "fused_elementwise"), "{unfused:?}");
    assert!(unfused.iter().any(|k| k == "tanh"), "{unfused:?}");
}

/// Records the kernel options its context hands it, and the thread it ran on.
#[derive(Debug, Default)]
struct Spy {
    seen: Mutex<Vec<(bool, bool, Option<String>)>>,
}

impl CustomOp for Spy {
    fn name(&self) -> &str {
        "spy"
    }
    fn infer(&self, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
        Ok(inputs.to_vec())
    }
    fn eval(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        Ok(inputs.to_vec())
    }
    fn eval_in(&self, inputs: &[Tensor], ctx: &mut dyn EvalCtx) -> Result<Vec<Tensor>> {
        let k = ctx.kernel_options();
        let thread = std::thread::current().name().map(str::to_string);
        self.seen.lock().unwrap().push((k.winograd, k.atb, thread));
        Ok(inputs.to_vec())
    }
}

/// `spy(x @ w1) @ w2`: two GEMMs far above the parallel threshold (a plan worth handing off).
fn spied_gemms(spy: &Arc<Spy>) -> (Graph, ValueId, ValueId) {
    let mut g = Graph::new();
    let x = g.input("x", DType::F32, [192, 256]);
    let w1 = g.constant(Tensor::randn(&[256, 384], 1).unwrap());
    let w2 = g.constant(Tensor::randn(&[384, 128], 2).unwrap());
    let h = g.matmul(x, w1).unwrap();
    let h = g.add_op_multi(Op::Custom(spy.clone()), &[h]).unwrap()[0];
    let y = g.matmul(h, w2).unwrap();
    (g, x, y)
}

#[test]
fn ops_read_the_session_knobs_through_their_context() {
    for (winograd, atb) in [(true, false), (false, true)] {
        let spy = Arc::new(Spy::default());
        let (g, x, y) = spied_gemms(&spy);
        let opts = ExecOptions { winograd, atb, on_workers: false, ..ExecOptions::builtin() };
        let mut s = Session::with_options(&g, &[y], opts).unwrap();
        s.run(&[(x, Tensor::randn(&[192, 256], 3).unwrap())]).unwrap();
        let seen = spy.seen.lock().unwrap();
        assert_eq!(seen.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>(), vec![(winograd, atb)]);
    }
}

#[test]
fn a_session_hands_its_runs_to_the_workers_it_holds() {
    if rayon::current_num_threads() < 2 {
        return; // no hand-off with one thread
    }
    let feed = Tensor::randn(&[192, 256], 3).unwrap();
    // a first run is handed off whatever its length: one session on the shared default
    // pool, one given a pool of its own
    let run = |workers: Option<Arc<Workers>>| {
        let spy = Arc::new(Spy::default());
        let (g, x, y) = spied_gemms(&spy);
        let mut s = Session::with_options(&g, &[y], ExecOptions::builtin()).unwrap();
        assert_eq!(s.workers().threads(), Workers::shared().threads());
        if let Some(w) = workers {
            s.set_workers(w);
        }
        assert!(s.hands_off());
        let out = s.run(&[(x, feed.clone())]).unwrap().remove(0);
        let thread = spy.seen.lock().unwrap()[0].2.clone().unwrap_or_default();
        (thread, out.to_array::<f32>().unwrap())
    };
    let (shared_thread, shared) = run(None);
    assert!(shared_thread.starts_with("pfor-worker-"), "{shared_thread}");
    let mine = Workers::new(2, "mine").unwrap();
    assert_eq!(mine.threads(), 2);
    let (own_thread, own) = run(Some(mine));
    assert!(own_thread.starts_with("mine-"), "{own_thread}");
    // (bit-identical only where both pools have as many threads)
    assert!(shared.iter().zip(&own).all(|(a, b)| (a - b).abs() <= 1e-3 * (1.0 + a.abs())));
}

#[test]
fn a_copy_of_a_function_is_a_new_identity() {
    // compiled plans are cached by function id: a copy (which may be rebuilt differently by
    // whoever holds it) must never find the original's plan, nor two functions one id
    let g = Graph::new();
    let f = Function::build(&g, &[TensorType::new(DType::F32, Shape::fixed(&[2]))], |g, p| Ok(vec![g.tanh(p[0])?]))
        .unwrap();
    let h = Function::build(&g, &[], |_, _| Ok(vec![])).unwrap();
    let copy = f.clone();
    assert_ne!(copy.id(), f.id());
    assert_ne!(h.id(), f.id());
    assert_ne!(h.id(), copy.id());
}

#[test]
fn cpu_capabilities_are_probed_into_one_table() {
    let caps = pfor::kernels::cpu::caps();
    assert_eq!(caps, pfor::kernels::cpu::CpuCaps::detect());
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        (caps.avx, caps.avx2, caps.avx512f),
        (
            std::arch::is_x86_feature_detected!("avx"),
            std::arch::is_x86_feature_detected!("avx2"),
            std::arch::is_x86_feature_detected!("avx512f")
        )
    );
}
