"""pfor vs ONNX Runtime on the same image model, timed in alternation (A/B) so that both sides
see the same minute of a noisy shared host:

    python ort_ab.py [ROUNDS]     (from the repository root, in the peers' venv)

Each round, for each light model (SqueezeNet, ResNet-50: $PFOR_MODELS, else
~/.cache/pfor/models, written by export_models.py) and n in 1, 8, 32, runs pfor's
`onnx_profile MODEL pfor n reps` (a release build of the example, `vectorized_map` of the
per-example model, best of reps) and then ORT's batched model in this process (ORT's session
options as peer_ort.py: intra-op threads = PEERS_THREADS or all cores, inter-op 1, all graph
optimizations; best of reps after 2 warm-up runs), and prints both rates and their ratio.
Separate runs of bench_report and run.sh moved each side by 15-40 % between minutes (see
BENCHMARKS.md, 2026-11-26 afternoon); this pairing is what a verdict on "≥ 1.0× ORT" needs.
"""
import os
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

MODELS = os.environ.get("PFOR_MODELS", os.path.expanduser("~/.cache/pfor/models"))
PROFILE = os.path.join("target", "release", "examples", "onnx_profile")


def ort_rate(path, n, reps, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.log_severity_level = 3
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    x = np.random.RandomState(300 + n).uniform(0, 1, (n, 3, 224, 224)).astype(np.float32)
    for _ in range(2):
        s.run(None, {name: x})
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        s.run(None, {name: x})
        best = min(best, time.perf_counter() - t)
    return n / best


def pfor_rate(path, n, reps):
    out = subprocess.run([PROFILE, path, "pfor", str(n), str(reps)], capture_output=True, text=True, check=True)
    return float(out.stdout.split("images/s")[0].split()[-1])


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    threads = int(os.environ.get("PEERS_THREADS", os.cpu_count() or 1))
    if not os.path.exists(PROFILE):
        sys.exit(f"ort_ab: {PROFILE} missing: cargo build --release --example onnx_profile")
    print("round,model,n,pfor_images_s,ort_images_s,pfor_over_ort")
    for r in range(1, rounds + 1):
        for model in ("light_squeezenet_dyn", "light_resnet50_dyn"):
            path = os.path.join(MODELS, model + ".onnx")
            for n in (1, 8, 32):
                reps = 20 if n == 1 else 5
                p, o = pfor_rate(path, n, reps), ort_rate(path, n, reps, threads)
                print(f"{r},{model},{n},{p:.1f},{o:.1f},{p / o:.2f}", flush=True)


if __name__ == "__main__":
    main()
