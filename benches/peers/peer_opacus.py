"""Opacus peer for W8 (one DP-SGD step): PrivacyEngine.make_private around the CNN module.

    python peer_opacus.py     -> results_w8_opacus.csv

Modes: `hooks` (grad_sample_mode="hooks": per-example gradients from module hooks, the
DPOptimizer clips, sums, adds noise and divides by n) and `ghost` (grad_sample_mode="ghost"
with the DPLossFastGradientClipping criterion make_private returns: its backward() runs
twice, once for the per-example norms and once for the clipped sum). Timed: zero_grad +
forward + loss.backward() + optimizer.step(). Settings: max_grad_norm = CLIP,
noise_multiplier = SIGMA, poisson_sampling=False, loss_reduction="mean", SGD with lr = 0
(the weights never change, so every call sees the same step; the update still runs). A
DataLoader of batch size n is passed only for make_private to divide by n.
Checks: both modes' clipped sums against the torch.func vectorized step (peer_torch) on
the same module weights; the module's logits against peer_torch.cnn's.
"""
import time
import warnings

import peerlib as pl
import peer_torch as pt

import torch  # noqa: E402  (already imported by peer_torch, after peerlib)
from torch import nn  # noqa: E402
from torch.func import functional_call  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

_t = time.perf_counter()
import opacus  # noqa: E402

OPACUS_IMPORT_SECONDS = time.perf_counter() - _t
# Opacus's hooks read only grad_output, and the input images need no gradient: torch
# warns about exactly that on every backward pass.
warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed")
warnings.filterwarnings("ignore", message="Secure RNG turned off")  # secure_mode=False is intended


def module():
    """The CNN as an nn.Module holding peer_torch's weights (nn.Linear stores [out, in])."""
    m = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10))
    p = pt.cnn_params()
    with torch.no_grad():
        for (_, param), k in zip(m.named_parameters(), pl.CNN_KEYS):
            param.copy_(p[k].T if k in ("d1w", "d2w") else p[k])
    return m


def private_step(mode, x, y, sigma):
    """A step() -> (noisy average per parameter, examples clipped or None) of a fresh module."""
    model = module()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    made = opacus.PrivacyEngine(accountant="rdp").make_private(
        module=model, optimizer=optimizer, data_loader=DataLoader(TensorDataset(x, y), batch_size=x.shape[0]),
        criterion=nn.CrossEntropyLoss(), noise_multiplier=sigma, max_grad_norm=pl.CLIP,
        poisson_sampling=False, loss_reduction="mean", grad_sample_mode=mode)
    # hooks: (module, optimizer, loader); ghost: (module, optimizer, criterion, loader)
    model, optimizer, criterion = made[0], made[1], made[2] if mode == "ghost" else nn.CrossEntropyLoss()
    assert optimizer.expected_batch_size == x.shape[0]
    params = list(model.parameters())

    def step():
        optimizer.zero_grad(set_to_none=True)  # also drops the per-sample gradients
        criterion(model(x), y).backward()
        optimizer.step()
        norms = getattr(model, "per_sample_gradient_norms", None)  # ghost mode keeps them
        clipped = None if norms is None else (pl.CLIP / (norms + pl.CLIP_EPS) < 1.0).sum()
        return [q.grad for q in params], clipped
    return step


def references(rec, args):
    """The torch.func vectorized step (sigma = 0) on the module's own weights and data."""
    x, y = args
    ref = module()
    names = [name for name, _ in ref.named_parameters()]
    weights = {name: q.detach() for name, q in ref.named_parameters()}
    vectorized, _ = pt.dp_steps(lambda w, xs: functional_call(ref, w, (xs,)), names)
    with torch.no_grad():
        logits_diff = float((ref(x) - pt.cnn(pt.cnn_params(), x)).abs().max())
    rec.note(f"{pl.W8} n={x.shape[0]} nn.Module-vs-peer_torch.cnn logits max_abs_diff={logits_diff:.3e}")
    return {"torch.func_ref": vectorized(weights, x, y, 0.0)}


if __name__ == "__main__":
    rec = pl.Recorder("w8_opacus", peer="opacus", flatten=pt.flatten, error_line=0)
    rec.imported("torch", pt.IMPORT_SECONDS)
    rec.imported("opacus", OPACUS_IMPORT_SECONDS)
    torch.manual_seed(0)
    make = lambda mode: lambda args, sigma: private_step(mode, *args, sigma)
    modes = [("hooks", make("hooks")), ("ghost", make("ghost"))]
    pl.main(rec.peer, f"opacus {opacus.__version__}, torch {torch.__version__}",
            pt.IMPORT_SECONDS + OPACUS_IMPORT_SECONDS,
            lambda: pl.run_w8(rec, lambda x, y: (pt.nchw(x), pt.t(y)), modes, references=lambda a: references(rec, a),
                              pairs=[("hooks", "torch.func_ref"), ("ghost", "torch.func_ref")]))
