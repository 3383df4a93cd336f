"""JAX peer: jit(vmap) against jit(lax.map), CPU.

    python peer_jax.py        W1-W5 -> results_jax.csv
    python peer_jax.py w8     W8 (DP-SGD step) -> results_w8_jax.csv

Modes: `vectorized` = jit(vmap(per-example body)) (W5: jit(jacrev));
`sequential` = jit(lax.map(body)) (W5: lax.map over one vjp per output row; W8: lax.scan
carrying the clipped sum); third mode = the batched code written by hand, jitted
(W4: gradient of the summed loss). Weights are jit arguments, never closed-over
constants (XLA would fold them). First call = trace + XLA compile + one run.
Threads: XLA:CPU's own pool (sized to the visible cores).
"""
import sys
import time

import numpy as np

import peerlib as pl

_t = time.perf_counter()
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - _t
a = jnp.asarray


def flatten(out):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]


def cnn_params():
    return {k: a(v) for k, v in pl.cnn_params().items()}


def max_pool2(h):
    return lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def conv_relu(h, w, b):
    return jax.nn.relu(lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b)


def cnn(p, x):  # x [B,28,28,1]
    h = max_pool2(conv_relu(x, p["c1w"], p["c1b"]))
    h = max_pool2(conv_relu(h, p["c2w"], p["c2b"]))
    h = jax.nn.relu(h.reshape(h.shape[0], 3136) @ p["d1w"] + p["d1b"])
    return h @ p["d2w"] + p["d2b"]


LSTM = {"w": a(pl.LSTM_WEIGHT()), "b": a(pl.LSTM_BIAS())}


def lstm_step(lp, xt, h, c):  # xt [B,128], h, c [B,256]
    i, f, g, o = jnp.split(jnp.concatenate([xt, h], 1) @ lp["w"] + lp["b"], 4, axis=1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    return jax.nn.sigmoid(o) * jnp.tanh(c), c


def modes(body, hand, in_axes):
    """jit(vmap(body)), jit(lax.map(body)) over the in_axes == 0 arguments, jit(hand)."""
    def seq(*args):
        mapped = tuple(x for x, ax in zip(args, in_axes) if ax == 0)

        def one(row):
            it = iter(row)
            return body(*(next(it) if ax == 0 else x for x, ax in zip(args, in_axes)))
        return lax.map(one, mapped)
    return [jax.jit(jax.vmap(body, in_axes=in_axes)), jax.jit(seq)] + ([jax.jit(hand)] if hand else [])


def w1():
    w = a(pl.W1_WEIGHT())
    return modes(lambda xi, w: xi[None] @ w, lambda x, w: x @ w, (0, None)), lambda x: (a(x), w)


def w2():
    p = cnn_params()
    return modes(lambda xi, p: cnn(p, xi[None])[0], lambda x, p: cnn(p, x), (0, None)), lambda x: (a(x), p)


def w3():
    def body(x, length, lp):  # a while loop to this example's own length
        def step(s):
            t, h, c = s
            h, c = lstm_step(lp, lax.dynamic_slice_in_dim(x, t, 1, 0), h, c)
            return t + 1, h, c
        zero = jnp.zeros((1, 256))
        return lax.while_loop(lambda s: s[0] < length, step, (jnp.int32(0), zero, zero))[1][0]

    def padded(xs, lens, lp):  # to the longest length, finished rows masked
        def step(s):
            t, h, c = s
            hn, cn = lstm_step(lp, lax.dynamic_index_in_dim(xs, t, 1, keepdims=False), h, c)
            live = (t < lens)[:, None]
            return t + 1, jnp.where(live, hn, h), jnp.where(live, cn, c)
        zero = jnp.zeros((xs.shape[0], 256))
        return lax.while_loop(lambda s: s[0] < jnp.max(lens), step, (jnp.int32(0), zero, zero))[1]

    return modes(body, padded, (0, 0, None)), lambda xs, lens: (a(xs), a(lens), LSTM)


def example_loss(p, xi, yi):  # softmax cross-entropy of one example
    logits = cnn(p, xi[None])[0]
    return jax.nn.logsumexp(logits) - logits[yi]


def summed_loss(p, x, y):
    logits = cnn(p, x)
    return jnp.sum(jax.nn.logsumexp(logits, axis=1) - jnp.take_along_axis(logits, y[:, None], 1)[:, 0])


def w4():
    p = cnn_params()
    g = jax.grad(example_loss)
    fns = modes(lambda xi, yi, p: g(p, xi, yi), lambda x, y, p: jax.grad(summed_loss)(p, x, y), (0, 0, None))
    return fns, lambda x, y: (a(x), a(y.astype(np.int32)), p)


def w5():
    def f(x, wo, lp):  # x [10,128] -> [out]
        h = c = jnp.zeros((1, 256))
        for step in range(10):
            h, c = lstm_step(lp, x[step:step + 1], h, c)
        return (h @ wo)[0]

    def rows(x, wo, lp):
        y, pullback = jax.vjp(lambda x: f(x, wo, lp), x)
        return lax.map(lambda e: pullback(e)[0], jnp.eye(y.shape[0], dtype=y.dtype))

    return [jax.jit(jax.jacrev(f)), jax.jit(rows)], lambda x, wo: (a(x), a(wo), LSTM)


def w8(rec):
    p = cnn_params()
    per_example = jax.grad(example_loss)

    def noisy(S, n, sigma, key):
        keys = jax.random.split(key, len(pl.CNN_KEYS))
        return [(S[k] + sigma * pl.CLIP * jax.random.normal(kk, S[k].shape, S[k].dtype)) / n
                for k, kk in zip(pl.CNN_KEYS, keys)]

    def clip_factor(sq_norm):
        return jnp.minimum(1.0, pl.CLIP / (jnp.sqrt(sq_norm) + pl.CLIP_EPS))

    @jax.jit
    def vectorized(p, x, y, sigma, key):
        n = x.shape[0]
        G = jax.vmap(per_example, in_axes=(None, 0, 0))(p, x, y)
        c = clip_factor(sum(jnp.sum(jnp.square(G[k].reshape(n, -1)), axis=1) for k in pl.CNN_KEYS))
        key, sub = jax.random.split(key)
        S = {k: jnp.tensordot(c, G[k], axes=1) for k in pl.CNN_KEYS}
        return (noisy(S, n, sigma, sub), jnp.sum(c < 1.0)), key

    @jax.jit
    def sequential(p, x, y, sigma, key):  # lax.scan: the carry holds S, never n gradients
        def one(carry, xy):
            S, clipped = carry
            g = per_example(p, *xy)
            c = clip_factor(sum(jnp.sum(jnp.square(g[k])) for k in pl.CNN_KEYS))
            return ({k: S[k] + c * g[k] for k in pl.CNN_KEYS}, clipped + (c < 1.0).astype(jnp.int32)), None
        (S, clipped), _ = lax.scan(one, ({k: jnp.zeros_like(v) for k, v in p.items()}, jnp.int32(0)), (x, y))
        key, sub = jax.random.split(key)
        return (noisy(S, x.shape[0], sigma, sub), clipped), key

    def make(fn):
        """A step that threads its PRNG key through the calls: new noise on every call."""
        def build(args, sigma):
            state = [jax.random.key(args[1].shape[0])]
            sigma = jnp.float32(sigma)  # a traced argument: sigma = 0 compiles nothing new

            def step():
                out, state[0] = fn(*args, sigma, state[0])
                return out
            return step
        return build

    pl.run_w8(rec, lambda x, y: (p, a(x), a(y.astype(np.int32))),
              [("vectorized", make(vectorized)), ("sequential", make(sequential))],
              ref=jax.jit(jax.grad(summed_loss)))


if __name__ == "__main__":
    is_w8 = sys.argv[1:] == ["w8"]
    rec = pl.Recorder("w8_jax" if is_w8 else "jax", peer="jax", sync=jax.block_until_ready, flatten=flatten)
    rec.imported("jax", IMPORT_SECONDS)
    run = (lambda: w8(rec)) if is_w8 else (lambda: pl.run_workloads(rec, dict(W1=w1, W2=w2, W3=w3, W4=w4, W5=w5)))
    pl.main(rec.peer, f"jax {jax.__version__}, devices {jax.devices()}", IMPORT_SECONDS, run)
