"""Shared part of the peer benchmarks: settings, timing, output files, workload data, drivers.

Every peer script (peer_tf.py, peer_jax.py, peer_torch.py, peer_opacus.py,
peer_tfp_autobatch.py, peer_tfdata.py) imports this module BEFORE its framework, so that the thread
environment below is in place when the framework starts its pools.

Invariants the scripts rely on:
- Workload definitions (sizes, seeds, units, work per call, mode names) live here only; a
  framework module supplies the functions that compute them, nothing else. All peers
  compute the same functions on the same numpy data (torch gets the NCHW transposes).
- One measurement = call 1 (the first call: tracing / compilation / conversion, recorded
  in firstcall_<name>.csv), call 2 (warm-up; its time sizes the repetition count), then
  `reps` timed calls; the reported time is their median. While timing, the CPU time that
  other processes used is measured; above FOREIGN_MAX the measurement is repeated (see
  Recorder.time).
- Output files, all in the output directory (env PEERS_OUT): results_<name>.csv with the
  columns peer,workload,mode,batch,median_seconds,throughput,unit (a failed mode has
  nan,nan and `FAILED <reason>` in unit, with commas replaced); firstcall_<name>.csv;
  quality_<name>.csv; checks_<name>.txt. <name> is the peer (tf) or w8_<peer> for W8.

Environment: PEERS_OUT (output dir), PEERS_THREADS (default: all cores), QUICK=1 (small
sizes), ONLY=W1,W3 (workload subset), W8_BATCHES=32,128, W9_ROWS (16384), W9_DIR (the W9
dataset's directory, default target/w9), FOREIGN_MAX (0.05), ATTEMPTS
(4), QUIET_WAIT_MAX (180 s), TARGET_SECONDS (2.0: time budget of the timed calls).
"""
import contextlib
import gc
import os
import statistics
import sys
import time

THREADS = int(os.environ.get("PEERS_THREADS") or os.cpu_count() or 1)
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, str(THREADS))
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # CPU measurements; also skips the CUDA probe
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402  (after the thread environment)

QUICK = os.environ.get("QUICK") == "1"
ONLY = [w.strip().upper() for w in os.environ.get("ONLY", "W1,W2,W3,W4,W5").split(",") if w.strip()]
OUT = os.environ.get("PEERS_OUT") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "target", "peers")
FOREIGN_MAX = float(os.environ.get("FOREIGN_MAX", "0.05"))
ATTEMPTS = int(os.environ.get("ATTEMPTS", "4"))
QUIET_WAIT_MAX = float(os.environ.get("QUIET_WAIT_MAX", "180"))
TARGET_SECONDS = float(os.environ.get("TARGET_SECONDS", "2.0"))
CSV_HEADER = "peer,workload,mode,batch,median_seconds,throughput,unit"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- machine load
class LoadMeter:
    """CPU time used by other processes (and hypervisor steal) while a block runs, as a
    fraction of the machine: (busy time of all CPUs - CPU time of this process) / (wall *
    cores). /proc/stat counts in ticks (1/SC_CLK_TCK s), so the denominator is at least 10
    ticks: a block shorter than that would turn one stray tick into a huge fraction."""

    _HZ = os.sysconf("SC_CLK_TCK")
    _CORES = os.cpu_count() or 1

    @classmethod
    def _sample(cls):
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]  # user nice system irq softirq steal
        own = os.times()
        return busy / cls._HZ, own.user + own.system, time.perf_counter()

    def __enter__(self):
        self._a = self._sample()
        return self

    def __exit__(self, *exc):
        b = self._sample()
        wall = max(b[2] - self._a[2], 1e-9)
        other = (b[0] - self._a[0]) - (b[1] - self._a[1])
        self.foreign = max(other, 0.0) / max(wall * self._CORES, 10.0 / self._HZ)
        return False


def wait_until_quiet(window=2.0, threshold=0.03):
    """Waits (at most QUIET_WAIT_MAX s) for a `window` in which others use < threshold of
    the machine; returns the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < QUIET_WAIT_MAX:
        with LoadMeter() as m:
            time.sleep(window)
        if m.foreign < threshold:
            break
    return time.perf_counter() - t0


# ---------------------------------------------------------------- recording
class Recorder:
    """Times functions and writes the output files of one peer script (see module doc)."""

    def __init__(self, name, peer=None, sync=None, flatten=None, firstcall_extra=None, error_line=-1):
        """name: file suffix; peer: the CSV `peer` column (default name); sync(out) waits for
        asynchronous results (JAX); flatten(out) -> list of numpy arrays, for checks;
        firstcall_extra: (column name, fn(workload, mode, batch) -> str) for firstcall_*.csv;
        error_line: which line of an exception's message a FAILED row quotes (torch: 0)."""
        os.makedirs(OUT, exist_ok=True)
        self.peer = peer or name
        self.error_line = error_line
        self.sync = sync or (lambda x: x)
        self.flatten = flatten or (lambda x: [np.asarray(a) for a in x])
        self.extra = firstcall_extra
        path = lambda kind, ext: open(os.path.join(OUT, f"{kind}_{name}.{ext}"), "w")
        self.results = path("results", "csv")
        self.firstcall = path("firstcall", "csv")
        self.quality = path("quality", "csv")
        self.checks = path("checks", "txt")
        self._line(self.results, CSV_HEADER)
        self._line(self.firstcall, "peer,workload,mode,batch,first_call_seconds"
                   + (f",{self.extra[0]}" if self.extra else ""))
        self._line(self.quality, "peer,workload,mode,batch,reps,attempts,foreign_load_fraction,quiet_wait_s")

    @staticmethod
    def _line(f, text):
        f.write(text + "\n")
        f.flush()

    def imported(self, what, seconds):
        self._line(self.firstcall, f"{self.peer},import,{what},0,{seconds:.3f}" + ("," if self.extra else ""))

    def failed(self, workload, mode, batch, err):
        """A mode that raised: a FAILED row quoting one line of the exception."""
        lines = [s.strip() for s in str(err).splitlines() if s.strip()] or [""]
        text = lines[self.error_line]
        if not text.startswith(type(err).__name__):
            text = f"{type(err).__name__}: {text}"
        text = text.replace(",", ";")[:300]
        self._line(self.results, f"{self.peer},{workload},{mode},{batch},nan,nan,FAILED {text}")
        log(f"# FAILED {workload} {mode} n={batch}: {text}")

    def time(self, workload, mode, batch, fn, args, work, unit, ctx=contextlib.nullcontext):
        """Measures fn(*args) (see the module doc); writes its rows and returns its output,
        or None when it raised. `work` / median seconds is the throughput in `unit`."""
        waited = wait_until_quiet()
        with ctx():
            try:
                t = time.perf_counter()
                out = self.sync(fn(*args))
                first = time.perf_counter() - t
                t = time.perf_counter()
                out = self.sync(fn(*args))
                warm = time.perf_counter() - t
            except Exception as e:  # noqa: BLE001 - a framework refusing a workload is a result
                self.failed(workload, mode, batch, e)
                return None
            extra = "," + self.extra[1](workload, mode, batch) if self.extra else ""
            self._line(self.firstcall, f"{self.peer},{workload},{mode},{batch},{first:.4f}{extra}")
            reps = int(min(30, max(5, TARGET_SECONDS / max(warm, 1e-9))))
            best = None  # (foreign fraction, median, attempt)
            for attempt in range(1, ATTEMPTS + 1):
                if attempt > 1:
                    waited += wait_until_quiet()
                    self.sync(fn(*args))  # warm again after the pause
                times = []
                with LoadMeter() as load:
                    for _ in range(reps):
                        t = time.perf_counter()
                        self.sync(fn(*args))
                        times.append(time.perf_counter() - t)
                if best is None or load.foreign < best[0]:
                    best = (load.foreign, statistics.median(times), attempt)
                if load.foreign <= FOREIGN_MAX:
                    break
        foreign, med, _ = best
        self._line(self.quality, f"{self.peer},{workload},{mode},{batch},{reps},{attempt},{foreign:.3f},{waited:.1f}")
        self._line(self.results, f"{self.peer},{workload},{mode},{batch},{med:.6g},{work / med:.6g},{unit}")
        log(f"# {workload} {mode} n={batch}: first {first:.3f} s, median {med:.5g} s of {reps}, "
            f"attempts {attempt}, foreign load {foreign:.3f}")
        return out

    def check(self, workload, batch, what, a, b):
        """Writes max |a - b| over the flattened outputs a and b (lists of arrays)."""
        d = max(float(np.max(np.abs(np.ravel(x) - np.ravel(y)))) for x, y in zip(a, b))
        self._line(self.checks, f"{workload} n={batch} {what} max_abs_diff={d:.3e}")

    def note(self, text):
        self._line(self.checks, text)


# ---------------------------------------------------------------- workload data (numpy)
def dense(seed, rows, cols):
    """A [rows, cols] float32 weight ~ N(0, 1/rows)."""
    return (np.random.RandomState(seed).standard_normal((rows, cols)) / np.sqrt(rows)).astype(np.float32)


W1_WEIGHT = lambda: dense(11, 768, 768)
LSTM_WEIGHT = lambda: dense(12, 384, 1024)  # [x_t (128) ; h (256)] -> the 4 gates (4 x 256)
LSTM_BIAS = lambda: np.zeros(1024, np.float32)
W5_OUT_WEIGHT = lambda out: dense(13, 256, 128)[:, :out]
CNN_KEYS = ["c1w", "c1b", "c2w", "c2b", "d1w", "d1b", "d2w", "d2b"]


def cnn_params(channels_first=False):
    """The MNIST CNN's 8 parameters, He-scaled. NHWC layout: conv weights HWIO, d1w rows in
    (h, w, c) order; channels_first: OIHW and d1w rows in (c, h, w) order, so that an NCHW
    network on the transposed input computes exactly the NHWC network's function."""
    shapes = dict(c1w=(5, 5, 1, 32), c1b=(32,), c2w=(5, 5, 32, 64), c2b=(64,),
                  d1w=(3136, 1024), d1b=(1024,), d2w=(1024, 10), d2b=(10,))
    r = np.random.RandomState(1)
    p = {}
    for k in CNN_KEYS:
        s = shapes[k]
        scale = np.sqrt(2.0 / np.prod(s[:-1])) if len(s) > 1 else 0.01
        p[k] = (r.standard_normal(s) * scale).astype(np.float32)
    if channels_first:
        p["c1w"] = p["c1w"].transpose(3, 2, 0, 1).copy()
        p["c2w"] = p["c2w"].transpose(3, 2, 0, 1).copy()
        p["d1w"] = p["d1w"].reshape(7, 7, 64, 1024).transpose(2, 0, 1, 3).reshape(3136, 1024).copy()
    return p


def mnist(n, seed):
    """n MNIST-shaped images x ~ U[0, 1) [n,28,28,1] (NHWC) and labels y ~ U{0..9} (int64)."""
    r = np.random.RandomState(seed)
    return r.uniform(0, 1, (n, 28, 28, 1)).astype(np.float32), r.randint(0, 10, (n,)).astype(np.int64)


class Workload:
    """One of W1-W5: name, unit, batch sizes, mode names, and inputs(n) -> (arrays, work)."""

    def __init__(self, name, unit, sizes, quick, modes, inputs):
        self.name, self.unit, self.modes, self.inputs = name, unit, modes, inputs
        self.sizes = quick if QUICK else sizes


def _w1(n):
    return (np.random.RandomState(n).standard_normal((n, 768)).astype(np.float32),), 2.0 * 768 * 768 * n / 1e9


def _w3(n):
    r = np.random.RandomState(1000 + n)
    lens = r.randint(1, 101, size=n).astype(np.int32)
    xs = r.standard_normal((n, 100, 128)).astype(np.float32)
    return (xs, lens), float(lens.sum())


def _w5(out):
    return (np.random.RandomState(5).standard_normal((10, 128)).astype(np.float32), W5_OUT_WEIGHT(out)), out


W4_REF = "ref_batch_grad_of_sum_not_per_example"
WORKLOADS = {
    # x_i[1,768] @ W[768,768]; work = FLOPs / 1e9
    "W1": Workload("W1_linear", "GFLOP/s", [1, 8, 64, 512, 4096], [1, 8, 64],
                   ["vectorized", "sequential", "hand_batched"], _w1),
    # MNIST CNN inference, one image per example (inputs: images only)
    "W2": Workload("W2_mnist_cnn", "images/s", [1, 16, 128, 512], [1, 16],
                   ["vectorized", "sequential", "hand_batched"], lambda n: (mnist(n, 100 + n)[:1], n)),
    # LSTM (input 128, state 256) run to each example's own length ~ U{1..100}; work = tokens
    "W3": Workload("W3_lstm_varlen", "tokens/s", [1, 16, 128, 512], [1, 16],
                   ["vectorized", "sequential", "hand_batched_padded_masked"], _w3),
    # per-example gradients of the CNN's softmax cross-entropy w.r.t. its 8 parameters
    "W4": Workload("W4_per_example_grad", "examples/s", [1, 8, 32, 128], [1, 8],
                   ["vectorized", "sequential", W4_REF], lambda n: (mnist(n, 200 + n), n)),
    # jacobian of a 10-step LSTM + dense(out) w.r.t. its [10,128] input; "batch" = out = rows
    "W5": Workload("W5_lstm_jacobian", "jacobian_rows/s", [1, 8, 32, 128], [1, 8],
                   ["vectorized", "sequential"], _w5),
}


def run_workloads(rec, impl, ctx=None):
    """Runs the selected workloads (ONLY) of one framework. impl[key]() -> (fns, prep): one
    function per mode of WORKLOADS[key], in its order, and prep(*numpy inputs) -> their
    arguments (images come NHWC). ctx(key): the context manager the calls run in.
    Checks: each mode's output against the first mode that succeeded; the gradient of the
    summed loss (W4) against the per-example gradients summed over the examples."""
    for key in ONLY:
        if key not in impl:
            continue
        wl = WORKLOADS[key]
        fns, prep = impl[key]()
        for n in wl.sizes:
            arrays, work = wl.inputs(n)
            args = prep(*arrays)
            outs = {}
            for mode, fn in zip(wl.modes, fns):
                o = rec.time(wl.name, mode, n, fn, args, work, wl.unit, ctx=ctx(key) if ctx else contextlib.nullcontext)
                if o is not None:
                    outs[mode] = rec.flatten(o)
            base = next(iter(outs), None)
            for mode, o in outs.items():
                if mode == W4_REF:
                    rec.check(key, n, f"sum({base} per-example)-vs-{mode}", [x.sum(0) for x in outs[base]], o)
                elif mode != base:
                    rec.check(key, n, f"{base}-vs-{mode}", outs[base], o)
            del outs


# ---------------------------------------------------------------- W9: a pipeline over Parquet
W9 = "W9_parquet_pipeline"
W9_UNIT = "rows/s"
W9_SEED = 900     # the images: mnist(rows, W9_SEED)[0], as pfor's W9 (benches/workloads/peerlib.rs)
W9_CHUNK = 2048   # rows per Parquet record batch, written and read
W9_ROWS = int(os.environ.get("W9_ROWS") or (4096 if QUICK else 16384))
W9_BATCHES = [128, 512]


def w9_path(rows=W9_ROWS):
    """The W9 dataset pfor's bench_report writes and reads: $W9_DIR (default target/w9 of the
    repository) / mnist_rows_<rows>.parquet."""
    d = os.environ.get("W9_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "target", "w9")
    return os.path.join(d, f"mnist_rows_{rows}.parquet")


# ---------------------------------------------------------------- W8: one DP-SGD step
W8 = "W8_dpsgd_step"
W8_UNIT = "examples/s"
CLIP = 1.0        # C: clipping norm (Opacus: max_grad_norm)
SIGMA = 1.0       # noise multiplier: the noise std is SIGMA * CLIP
CLIP_EPS = 1e-6   # c_i = min(1, C / (||g_i|| + CLIP_EPS)), Opacus's clip factor
W8_BATCHES = ([int(b) for b in os.environ["W8_BATCHES"].split(",")] if os.environ.get("W8_BATCHES")
              else [8, 32] if QUICK else [32, 128, 512])


def run_w8(rec, prep, modes, ref=None, references=None, pairs=(("vectorized", "sequential"),)):
    """W8 on one framework, for each batch size n (data: mnist(n, 800 + n), NHWC).
    prep(x, y) -> args; modes: [(mode, make)], make(args, sigma) -> step, step() ->
    (outputs, examples clipped or None), the outputs being the noisy average (S + noise) / n;
    ref(*args): the gradient of the summed loss, timed as `ref_nonprivate`;
    references(args) -> {name: (outputs at sigma 0, clipped)}: untimed outputs to check
    against; pairs: (a, b) whose clipped sums S (sigma = 0) are compared."""
    for n in W8_BATCHES:
        args = prep(*mnist(n, 800 + n))
        outs = {k: (None, rec.flatten(o), c) for k, (o, c) in (references(args) if references else {}).items()}
        for mode, make in modes:
            try:
                step = make(args, SIGMA)
            except Exception as e:  # noqa: BLE001 - e.g. Opacus refusing the model: a result
                rec.failed(W8, mode, n, e)
                continue
            noisy = rec.time(W8, mode, n, step, (), n, W8_UNIT)
            del step
            gc.collect()  # the step's per-example gradients (Opacus modules hold reference cycles)
            if noisy is not None:
                exact, clipped = make(args, 0.0)()
                outs[mode] = (rec.flatten(noisy[0]), rec.flatten(exact), clipped)
            del noisy
            gc.collect()
        if ref is not None:
            rec.time(W8, "ref_nonprivate", n, ref, args, n, W8_UNIT)
        w8_checks(rec, n, outs, pairs)


def w8_checks(rec, n, outs, pairs):
    """outs: mode -> (outputs at sigma 1 or None, outputs at sigma 0, clipped or None).
    n * output at sigma 0 is the clipped sum S (exactly, n being a power of two), and
    n * (output[sigma 1] - output[sigma 0]) is the noise added, whose std should be SIGMA * CLIP."""
    sums = {m: [n * a for a in o[1]] for m, o in outs.items()}
    for m, (noisy, exact, clipped) in outs.items():
        line = f"{W8} n={n} {m}: examples clipped {'n/a' if clipped is None else f'{int(clipped)}/{n}'}"
        line += f"; max|S|={max(float(np.max(np.abs(s))) for s in sums[m]):.4g}"
        if noisy is not None:
            noise = np.concatenate([(n * (a - b)).ravel() for a, b in zip(noisy, exact)]).astype(np.float64)
            line += (f"; noise std={noise.std():.4f} mean={noise.mean():+.4f} over {noise.size} elements"
                     f" (expect {SIGMA * CLIP:g}, 0)")
        rec.note(line)
    for a, b in pairs:
        if a in sums and b in sums:
            rec.check(W8, n, f"{a}-vs-{b} clipped sum S (sigma=0)", sums[a], sums[b])


def main(name, versions, import_seconds, run):
    """Common main: a header line in the log, run(), then total time and peak RSS."""
    log(f"# {name}: {versions}; threads {THREADS}; import {import_seconds:.2f} s; QUICK={QUICK}; out {OUT}")
    t = time.perf_counter()
    run()
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    log(f"# total {time.perf_counter() - t:.1f} s, peak RSS {peak:.1f} GiB")
