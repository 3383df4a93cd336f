"""ONNX Runtime peer: batched inference of ONNX models on ORT's CPU execution provider.

    python peer_ort.py        -> results_ort.csv (and the usual firstcall / quality / checks files)

Models (export_models.py writes them into $PFOR_MODELS, else ~/.cache/pfor/models, when
missing), the `workload` column and batch sizes (QUICK=1: the first two):
- `W2_mnist_cnn_onnx`: W2's MNIST CNN exported from PyTorch (real initializers), n in 1, 16, 64;
  images mnist(n, 100 + n) as W2's peers, NCHW; unit images/s.
- `squeezenet_light`, `resnet50_light`: ONNX's light SqueezeNet / ResNet-50 with a symbolic
  batch dim, n in 1, 8, 32; images uniform [0, 1) from RandomState(300 + n); unit images/s.
ORT_MODELS=w2,squeezenet,resnet50 picks models.

Modes: `batched` = one run of the batched model on all n images; `sequential` = n runs of
it on one image each (the loop ORT offers). Session: intra-op threads = PEERS_THREADS (all
cores), inter-op 1, sequential execution, graph optimizations ORT_ENABLE_ALL, CPU provider.

Checks (checks_ort.txt): the batched output against the sequential one. For pfor's
comparison on the same data, `ort_check_<workload>_{input,output}.f32` (raw little-endian
float32, n = 2, C order) hold an input and ORT's batched output; bench_report runs pfor on
that input and prints the largest difference.
"""
import os
import time

import numpy as np

import peerlib as pl

_t = time.perf_counter()
import onnxruntime as ort  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - _t

import export_models  # noqa: E402

QUICK_SIZES = 2
MODELS = [  # (key, file name, workload, sizes, inputs(n) -> NCHW float32)
    ("w2", "w2_cnn", "W2_mnist_cnn_onnx", [1, 16, 64],
     lambda n: pl.mnist(n, 100 + n)[0].transpose(0, 3, 1, 2).copy()),
    ("squeezenet", "light_squeezenet_dyn", "squeezenet_light", [1, 8, 32],
     lambda n: np.random.RandomState(300 + n).uniform(0, 1, (n, 3, 224, 224)).astype(np.float32)),
    ("resnet50", "light_resnet50_dyn", "resnet50_light", [1, 8, 32],
     lambda n: np.random.RandomState(300 + n).uniform(0, 1, (n, 3, 224, 224)).astype(np.float32)),
]
WANTED = [m.strip().lower() for m in os.environ.get("ORT_MODELS", "w2,squeezenet,resnet50").split(",") if m.strip()]


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = pl.THREADS
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def run(rec):
    paths = export_models.export_all()
    for key, file, workload, sizes, inputs in MODELS:
        if key not in WANTED:
            continue
        if file not in paths:
            rec.failed(workload, "batched", 0, RuntimeError(f"{file}.onnx could not be made (see the log)"))
            continue
        sess = session(paths[file])
        name = sess.get_inputs()[0].name
        batched = lambda x: sess.run(None, {name: x})
        sequential = lambda x: [np.concatenate(o) for o in zip(*(sess.run(None, {name: x[i:i + 1]})
                                                                for i in range(x.shape[0])))]
        # the same data for pfor: an input and ORT's batched output
        x2 = inputs(2)
        x2.astype("<f4").tofile(os.path.join(pl.OUT, f"ort_check_{workload}_input.f32"))
        batched(x2)[0].astype("<f4").tofile(os.path.join(pl.OUT, f"ort_check_{workload}_output.f32"))
        for n in sizes[:QUICK_SIZES] if pl.QUICK else sizes:
            x = inputs(n)
            outs = {}
            for mode, fn in [("batched", batched), ("sequential", sequential)]:
                o = rec.time(workload, mode, n, fn, (x,), n, "images/s")
                if o is not None:
                    outs[mode] = rec.flatten(o)
            if len(outs) == 2:
                rec.check(workload, n, "batched-vs-sequential", outs["batched"], outs["sequential"])
        del sess


if __name__ == "__main__":
    rec = pl.Recorder("ort", peer="ort")
    rec.imported("onnxruntime", IMPORT_SECONDS)
    pl.main(rec.peer, f"onnxruntime {ort.__version__}", IMPORT_SECONDS, lambda: run(rec))
