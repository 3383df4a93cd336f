"""TFP auto-batching peer (W6): tfp.experimental.auto_batching on doubly recursive Fibonacci.

    python peer_tfp_autobatch.py     -> results_tfp_autobatch.csv

The program is the one of TFP's own frontend tests (fib(n) = fib(n-2) + fib(n-1), fib(0)
= fib(1) = 1), batched over n_i ~ U{3..FIB_MAX_N} (default 12; numpy seed = batch size).
Throughput: fib invocations of the whole batch per second. Modes:
  numpy_stack / numpy_stackless        the stack VM / the stackless interpreter, NumPy backend
  tf_eager_stack / tf_eager_stackless  the same on TF eager tensors
  tf_function_stack                    the stack VM staged in one tf.function (the stackless
                                       interpreter does not run in graph mode)
  python_loop_unbatched                plain Python recursion, one example after the other
  tf_eager_dry_run_loop                auto_batching's dry_run=True (the function on TF eager
                                       tensors of batch 1), looped over the examples
Checks (checks_tfp_autobatch.txt): each mode's results equal the closed-form Fibonacci numbers.
"""
import os
import time

import numpy as np

import peerlib as pl

_t = time.perf_counter()
import tensorflow as tf  # noqa: E402
from tensorflow_probability.python.experimental.auto_batching import (  # noqa: E402
    frontend, instructions, numpy_backend, tf_backend)

IMPORT_SECONDS = time.perf_counter() - _t
tf.config.threading.set_intra_op_parallelism_threads(pl.THREADS)
tf.config.threading.set_inter_op_parallelism_threads(pl.THREADS)

MAX_N = int(os.environ.get("FIB_MAX_N", "12"))
WORKLOAD = f"fib_n3..{MAX_N}"
UNIT = "fib_calls/s"
BATCHES = [1, 16, 128]


def fibonacci(n):
    if n <= 1:
        return 1
    else:
        left = fibonacci(n - 2)
        right = fibonacci(n - 1)
        return left + right


def closed_form(n):
    a, b = 1, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def invocations(n):
    """How many times fibonacci(n) calls itself, the first call included."""
    return 1 if n <= 1 else 1 + invocations(n - 1) + invocations(n - 2)


def batched():
    return frontend.Context().batch_uncurried(fibonacci, lambda *_: instructions.TensorType(np.int64, ()))


def auto_batched(backend_name, stackless):
    """fn(ns) for one auto-batching mode (a fresh batched function, traced on its first call)."""
    f = batched()
    backend = numpy_backend.NumpyBackend() if backend_name == "numpy" else tf_backend.TensorFlowBackend()
    run = lambda ns: f(ns, max_stack_depth=MAX_N + 3, backend=backend, stackless=stackless)
    if backend_name == "numpy":
        return run
    staged = tf.function(run) if backend_name == "tf_function" else run
    return lambda ns: staged(tf.constant(ns))


def dry_run_loop():
    f = batched()
    return lambda ns: [np.asarray(f(tf.constant([n], dtype=tf.int64), dry_run=True)).reshape(-1)[0] for n in ns]


def run(rec):
    modes = [(f"{b}_{'stackless' if s else 'stack'}", lambda b=b, s=s: auto_batched(b, s))
             for b in ("numpy", "tf_eager", "tf_function") for s in (False, True) if not (b == "tf_function" and s)]
    modes += [("python_loop_unbatched", lambda: lambda ns: [fibonacci(int(n)) for n in ns]),
              ("tf_eager_dry_run_loop", dry_run_loop)]
    for mode, make in modes:
        for batch in BATCHES:
            ns = np.random.RandomState(batch).randint(3, MAX_N + 1, size=batch).astype(np.int64)
            out = rec.time(WORKLOAD, mode, batch, make(), (ns,), sum(invocations(int(n)) for n in ns), UNIT)
            if out is not None:
                ok = np.array_equal(np.asarray(out).reshape(-1), [closed_form(int(n)) for n in ns])
                rec.note(f"{mode} batch={batch} correct={ok}")


if __name__ == "__main__":
    rec = pl.Recorder("tfp_autobatch")
    rec.imported("tensorflow+tfp.auto_batching", IMPORT_SECONDS)
    import tensorflow_probability as tfp
    pl.main(rec.peer, f"tensorflow {tf.__version__}, tensorflow-probability {tfp.__version__}", IMPORT_SECONDS,
            lambda: run(rec))
