"""PyTorch peer: torch.func (vmap, grad, jacrev, vjp) against Python loops, eager, CPU.

    python peer_torch.py        W1-W5 -> results_torch.csv
    python peer_torch.py w8     W8 (DP-SGD step with torch.func) -> results_w8_torch.csv

Modes: `vectorized` = torch.func.vmap of the per-example body (W5: jacrev);
`sequential` = a Python loop over the examples (W5: one vjp per output row);
third mode = the batched code written by hand (W4: gradient of the summed loss).
The CNN runs NCHW (torch's layout) with weights permuted to compute the NHWC peers'
function. W1-W3 run under torch.inference_mode, W4, W5 and W8 with autograd on.
W3's vectorized mode is expected to fail: vmap cannot run a loop whose trip count
depends on the data. Threads: torch intra-op and inter-op pools = PEERS_THREADS.
"""
import sys
import time

import peerlib as pl

_t = time.perf_counter()
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.func import grad, jacrev, vjp, vmap  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - _t
torch.set_num_threads(pl.THREADS)
torch.set_num_interop_threads(pl.THREADS)

t = torch.from_numpy


def nchw(x):
    return t(x.transpose(0, 3, 1, 2).copy())


def flatten(out):
    """Output (tensor, list, tuple or dict by sorted key) -> list of numpy arrays."""
    if isinstance(out, dict):
        return [a for k in sorted(out) for a in flatten(out[k])]
    if isinstance(out, (list, tuple)):
        return [a for o in out for a in flatten(o)]
    return [out.detach().numpy()]


def cnn_params():
    return {k: t(v) for k, v in pl.cnn_params(channels_first=True).items()}


def cnn(p, x):  # x [B,1,28,28]
    h = F.max_pool2d(F.relu(F.conv2d(x, p["c1w"], p["c1b"], padding=2)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p["c2w"], p["c2b"], padding=2)), 2)
    h = F.relu(h.reshape(h.shape[0], 3136) @ p["d1w"] + p["d1b"])
    return h @ p["d2w"] + p["d2b"]


LSTM_W, LSTM_B = t(pl.LSTM_WEIGHT()), t(pl.LSTM_BIAS())


def lstm_step(xt, h, c):  # xt [B,128], h, c [B,256]
    i, f, g, o = (torch.cat([xt, h], 1) @ LSTM_W + LSTM_B).chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def loop(body):
    return lambda *xs: torch.stack([body(*row) for row in zip(*xs)])


def w1():
    w = t(pl.W1_WEIGHT())
    body = lambda xi: xi[None] @ w
    return [vmap(body), loop(body), lambda x: x @ w], lambda x: (t(x),)


def w2():
    p = cnn_params()
    body = lambda xi: cnn(p, xi[None])[0]
    return [vmap(body), loop(body), lambda x: cnn(p, x)], lambda x: (nchw(x),)


def w3():
    def body(x, length):  # a Python loop to this example's own length
        h = c = torch.zeros(1, 256)
        for step in range(int(length)):
            h, c = lstm_step(x[step:step + 1], h, c)
        return h[0]

    def padded(xs, lens):  # to the longest length, finished rows masked
        h = c = torch.zeros(xs.shape[0], 256)
        for step in range(int(lens.max())):
            hn, cn = lstm_step(xs[:, step], h, c)
            live = (step < lens)[:, None]
            h, c = torch.where(live, hn, h), torch.where(live, cn, c)
        return h

    return [vmap(body), loop(body), padded], lambda xs, lens: (t(xs), t(lens))


def example_loss(p, xi, yi):
    return F.cross_entropy(cnn(p, xi[None]), yi[None])


def summed_loss_grad(p, x, y):  # NOT per-example: a cost floor
    return grad(lambda p: F.cross_entropy(cnn(p, x), y, reduction="sum"))(p)


def w4():
    p = cnn_params()
    g = grad(example_loss)

    def seq(p, x, y):
        gs = [g(p, xi, yi) for xi, yi in zip(x, y)]
        return {k: torch.stack([gi[k] for gi in gs]) for k in p}

    return [vmap(g, in_dims=(None, 0, 0)), seq, summed_loss_grad], lambda x, y: (p, nchw(x), t(y))


def w5():
    def f(x, wo):  # x [10,128] -> [out]
        h = c = torch.zeros(1, 256)
        for step in range(10):
            h, c = lstm_step(x[step:step + 1], h, c)
        return (h @ wo)[0]

    def rows(x, wo):
        y, pullback = vjp(lambda x: f(x, wo), x)
        return torch.stack([pullback(e)[0] for e in torch.eye(y.shape[0])])

    return [jacrev(f), rows], lambda x, wo: (t(x.copy()), t(wo.copy()))


def dp_steps(model, keys):
    """W8's DP-SGD steps for model(params dict, x) -> logits: (vectorized, sequential), each
    (params, x, y, sigma) -> ([noisy average per key], examples clipped)."""
    per_example = grad(lambda p, xi, yi: F.cross_entropy(model(p, xi[None]), yi[None]))

    def noisy(S, n, sigma):  # fresh noise from torch's global generator on every call
        return [(S[k] + sigma * pl.CLIP * torch.randn(S[k].shape)) / n for k in keys]

    def vectorized(p, x, y, sigma):
        G = vmap(per_example, in_dims=(None, 0, 0))(p, x, y)
        n = x.shape[0]
        norms = torch.stack([torch.linalg.vector_norm(G[k].reshape(n, -1), dim=1) for k in keys]).norm(dim=0)
        c = (pl.CLIP / (norms + pl.CLIP_EPS)).clamp(max=1.0)
        return noisy({k: torch.einsum("i,i...->...", c, G[k]) for k in keys}, n, sigma), int((c < 1).sum())

    def sequential(p, x, y, sigma):
        S = {k: torch.zeros_like(p[k]) for k in keys}
        clipped = 0
        for xi, yi in zip(x, y):
            g = per_example(p, xi, yi)
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g[k]) for k in keys]))
            c = (pl.CLIP / (norm + pl.CLIP_EPS)).clamp(max=1.0)
            for k in keys:
                S[k].add_(c * g[k])
            clipped += int(c < 1)
        return noisy(S, x.shape[0], sigma), clipped

    return vectorized, sequential


def w8(rec):
    torch.manual_seed(0)
    p = cnn_params()
    vec, seq = dp_steps(cnn, pl.CNN_KEYS)
    step = lambda fn: lambda args, sigma: lambda: fn(*args, sigma)
    pl.run_w8(rec, lambda x, y: (p, nchw(x), t(y)), [("vectorized", step(vec)), ("sequential", step(seq))],
              ref=summed_loss_grad)


if __name__ == "__main__":
    is_w8 = sys.argv[1:] == ["w8"]
    rec = pl.Recorder("w8_torch" if is_w8 else "torch", peer="torch", flatten=flatten, error_line=0)
    rec.imported("torch", IMPORT_SECONDS)
    grad_mode = lambda key: torch.enable_grad if key in ("W4", "W5") else torch.inference_mode
    run = (lambda: w8(rec)) if is_w8 else (
        lambda: pl.run_workloads(rec, dict(W1=w1, W2=w2, W3=w3, W4=w4, W5=w5), ctx=grad_mode))
    pl.main(rec.peer, f"torch {torch.__version__}", IMPORT_SECONDS, run)
