"""TensorFlow peer: tf.vectorized_map (pfor) against tf.map_fn, in tf.function graphs, CPU.

    python peer_tf.py        W1-W5 -> results_tf.csv
    python peer_tf.py w8     W8 (DP-SGD step) -> results_w8_tf.csv

Modes: `vectorized` = tf.function(tf.vectorized_map(per-example body)) (W5:
GradientTape.jacobian with experimental_use_pfor=True); `sequential` =
tf.function(tf.map_fn(body, parallel_iterations=1)) (W5: use_pfor=False, a while loop
of gradients; W8: tf.while_loop accumulating the clipped sum); third mode = the batched
graph written by hand (W4: gradient of the summed loss). No XLA (jit_compile off).
First call = trace + pfor conversion + graph optimisation + one run. pfor's fallbacks
to a while loop ("Using a while_loop for converting <op>") are captured from TF's log:
per first call in the pfor_fallbacks column of firstcall_<name>.csv, in full in
<name>_pfor_fallbacks.txt. Threads: intra-op and inter-op pools = PEERS_THREADS.
"""
import logging
import os
import sys
import time

import numpy as np

import peerlib as pl

_t = time.perf_counter()
import tensorflow as tf  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - _t
tf.config.threading.set_intra_op_parallelism_threads(pl.THREADS)
tf.config.threading.set_inter_op_parallelism_threads(pl.THREADS)
c = tf.constant


class PforFallbacks(logging.Handler):
    """Collects pfor's while-loop fallback messages (DEBUG from jacobian, WARNING from
    vectorized_map); new(workload, mode, batch) writes and returns those since the last call."""

    def __init__(self, path):
        super().__init__(logging.DEBUG)
        self.messages, self.seen = [], 0
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.file = open(path, "w")
        log = tf.get_logger()
        log.setLevel(logging.DEBUG)
        for h in log.handlers:
            h.setLevel(logging.ERROR)  # keep the DEBUG flood out of the log file
        log.addHandler(self)

    def emit(self, record):
        text = record.getMessage()
        if "Using a while_loop for converting" in text:
            self.messages.append(text.splitlines()[0][:300])

    def new(self, workload, mode, batch):
        fresh, self.seen = self.messages[self.seen:], len(self.messages)
        for m in fresh:
            self.file.write(f"{workload},{mode},{batch}: {m}\n")
        self.file.flush()
        return ";".join(sorted({m.split("converting ")[1].split(" ")[0] for m in fresh}))


def flatten(out):
    return [np.asarray(x) for x in tf.nest.flatten(out)]


def cnn_vars():
    return {k: tf.Variable(v, name=k) for k, v in pl.cnn_params().items()}


def cnn(p, x):  # x [B,28,28,1]
    h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, p["c1w"], 1, "SAME") + p["c1b"]), 2, 2, "VALID")
    h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, p["c2w"], 1, "SAME") + p["c2b"]), 2, 2, "VALID")
    h = tf.nn.relu(tf.matmul(tf.reshape(h, [-1, 3136]), p["d1w"]) + p["d1b"])
    return tf.matmul(h, p["d2w"]) + p["d2b"]


LSTM_W, LSTM_B = c(pl.LSTM_WEIGHT()), c(pl.LSTM_BIAS())


def lstm_step(xt, h, cell):  # xt [B,128], h, cell [B,256]
    i, f, g, o = tf.split(tf.matmul(tf.concat([xt, h], 1), LSTM_W) + LSTM_B, 4, axis=1)
    cell = tf.sigmoid(f) * cell + tf.sigmoid(i) * tf.tanh(g)
    return tf.sigmoid(o) * tf.tanh(cell), cell


def modes(body, signature, hand=None):
    """vectorized_map and map_fn (one example at a time) of body(*example), and hand."""
    def one(example):
        return body(*example)
    vec = tf.function(lambda *xs: tf.vectorized_map(one, xs))
    seq = tf.function(lambda *xs: tf.map_fn(one, xs, fn_output_signature=signature, parallel_iterations=1))
    return [vec, seq] + ([tf.function(hand)] if hand else [])


def w1():
    w = c(pl.W1_WEIGHT())
    fns = modes(lambda xi: tf.matmul(xi[None], w), tf.TensorSpec([1, 768], tf.float32), lambda x: tf.matmul(x, w))
    return fns, lambda x: (c(x),)


def w2():
    p = cnn_vars()
    fns = modes(lambda xi: cnn(p, xi[None])[0], tf.TensorSpec([10], tf.float32), lambda x: cnn(p, x))
    return fns, lambda x: (c(x),)


def w3():
    def body(x, length):  # a while loop to this example's own length
        def step(t, h, cell):
            h, cell = lstm_step(x[t][None], h, cell)
            return t + 1, h, cell
        zero = tf.zeros([1, 256])
        return tf.while_loop(lambda t, h, cell: t < length, step, [c(0), zero, zero])[1][0]

    def padded(xs, lens):  # to the longest length, finished rows masked
        def step(t, h, cell):
            hn, cn = lstm_step(xs[:, t], h, cell)
            live = (t < lens)[:, None]
            return t + 1, tf.where(live, hn, h), tf.where(live, cn, cell)
        zero = tf.zeros([tf.shape(xs)[0], 256])
        longest = tf.reduce_max(lens)
        return tf.while_loop(lambda t, h, cell: t < longest, step, [c(0), zero, zero])[1]

    return modes(body, tf.TensorSpec([256], tf.float32), padded), lambda xs, lens: (c(xs), c(lens))


def cross_entropy(p, x, y):  # per-example softmax cross-entropy, [B]
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=cnn(p, x))


def loss_grads(loss, p):
    """Gradients of loss() w.r.t. the CNN's variables, in CNN_KEYS order."""
    variables = [p[k] for k in pl.CNN_KEYS]
    with tf.GradientTape() as tape:
        value = loss()
    return tape.gradient(value, variables)


def w4():
    p = cnn_vars()
    signature = tuple(tf.TensorSpec(v.shape, tf.float32) for v in p.values())
    body = lambda xi, yi: tuple(loss_grads(lambda: tf.reduce_mean(cross_entropy(p, xi[None], yi[None])), p))
    summed = lambda x, y: tuple(loss_grads(lambda: tf.reduce_sum(cross_entropy(p, x, y)), p))
    return modes(body, signature, summed), lambda x, y: (c(x), c(y.astype(np.int32)))


def w5():
    def jacobian(x, wo, use_pfor):
        with tf.GradientTape() as tape:
            tape.watch(x)
            h = cell = tf.zeros([1, 256])
            for step in range(10):
                h, cell = lstm_step(x[step:step + 1], h, cell)
            y = tf.matmul(h, wo)[0]
        return tape.jacobian(y, x, experimental_use_pfor=use_pfor)

    fns = [tf.function(lambda x, wo: jacobian(x, wo, True)), tf.function(lambda x, wo: jacobian(x, wo, False))]
    return fns, lambda x, wo: (c(x), c(wo))


def w8(rec):
    p = cnn_vars()
    n_clipped = lambda factors: tf.reduce_sum(tf.cast(factors < 1.0, tf.int32))

    def example_grad(xi, yi):
        return loss_grads(lambda: tf.reduce_mean(cross_entropy(p, xi[None], yi[None])), p)

    def clip_factor(sq_norm):
        return tf.minimum(1.0, pl.CLIP / (tf.sqrt(sq_norm) + pl.CLIP_EPS))

    def noisy(S, n, sigma):  # a stateful random op: new noise on every call
        return [(s + sigma * pl.CLIP * tf.random.normal(tf.shape(s))) / n for s in S]

    @tf.function
    def vectorized(x, y, sigma):
        n = x.shape[0]
        G = tf.vectorized_map(lambda xy: example_grad(*xy), (x, y))
        factors = clip_factor(tf.add_n([tf.reduce_sum(tf.square(tf.reshape(g, [n, -1])), axis=1) for g in G]))
        return noisy([tf.tensordot(factors, g, axes=1) for g in G], n, sigma), n_clipped(factors)

    @tf.function
    def sequential(x, y, sigma):
        def one(i, S, clipped):
            g = example_grad(x[i], y[i])
            factor = clip_factor(tf.add_n([tf.reduce_sum(tf.square(gi)) for gi in g]))
            return i + 1, [s + factor * gi for s, gi in zip(S, g)], clipped + n_clipped(factor)
        start = [c(0), [tf.zeros_like(p[k]) for k in pl.CNN_KEYS], c(0)]
        _, S, clipped = tf.while_loop(lambda i, S, clipped: i < x.shape[0], one, start, parallel_iterations=1)
        return noisy(S, x.shape[0], sigma), clipped

    summed = tf.function(lambda x, y: loss_grads(lambda: tf.reduce_sum(cross_entropy(p, x, y)), p))
    make = lambda fn: lambda args, sigma: (lambda s: lambda: fn(*args, s))(c(sigma, tf.float32))
    pl.run_w8(rec, lambda x, y: (c(x), c(y.astype(np.int32))),
              [("vectorized", make(vectorized)), ("sequential", make(sequential))], ref=summed)


if __name__ == "__main__":
    name = "w8_tf" if sys.argv[1:] == ["w8"] else "tf"
    fallbacks = PforFallbacks(os.path.join(pl.OUT, f"{name}_pfor_fallbacks.txt"))
    rec = pl.Recorder(name, peer="tf", flatten=flatten, firstcall_extra=("pfor_fallbacks", fallbacks.new))
    rec.imported("tensorflow", IMPORT_SECONDS)
    workloads = dict(W1=w1, W2=w2, W3=w3, W4=w4, W5=w5)
    run = (lambda: w8(rec)) if name == "w8_tf" else (lambda: pl.run_workloads(rec, workloads))
    pl.main(rec.peer, f"tensorflow {tf.__version__}", IMPORT_SECONDS, run)
