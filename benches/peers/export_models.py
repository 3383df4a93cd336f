"""Exports the benchmark models to ONNX, for the ONNX Runtime peer (peer_ort.py) and for pfor's
`bench_report --only ONNX` (which imports the same files):

    python export_models.py [DIR]     DIR: $PFOR_MODELS, else ~/.cache/pfor/models

- `w2_cnn.onnx`: W2's MNIST CNN from PyTorch (`torch.onnx.export`, TorchScript exporter,
  opset 17), its weights REAL initializers (peerlib.cnn_params(channels_first=True): the
  function the NHWC workloads compute, in torch's NCHW), input `x` [N, 1, 28, 28] and output
  `logits` [N, 10] with a symbolic batch dim N. ~13 MB (the 3136x1024 dense layer).
- `w3_lstm_cell.onnx`: one step of W3's LSTM cell (peerlib.LSTM_WEIGHT / LSTM_BIAS):
  (x [N,128], h [N,256], c [N,256]) -> (h', c'), batch dim symbolic.
- `light_squeezenet_dyn.onnx`, `light_resnet50_dyn.onnx`: ONNX's `light` models (from the
  test-data cache `tools/onnx_testdata.sh` writes: $PFOR_ONNX_TESTDATA, else
  ~/.cache/pfor/onnx-testdata) with their batch dim made symbolic, for batched inference.
  Their files fix it at 1; the edit: the image input's and the output's dim 0 become `N`,
  intermediate shape annotations (value_info) are dropped, and a `Reshape` whose shape is a
  constant starting with 1 (ResNet-50's flatten before the classifier: [1, 2048]) starts
  with -1 instead (the same for N = 1). A graph that pins the batch in any other way is
  reported and skipped.

A torchvision ResNet-18 is not exported: torchvision is not among the peers' pins.
Writes only missing files (delete one to re-export). Needs torch, onnx (the edits) and numpy.
"""
import os
import sys
import warnings

import numpy as np

import peerlib as pl

MODELS_DIR = os.environ.get("PFOR_MODELS") or os.path.join(os.path.expanduser("~"), ".cache", "pfor", "models")
TESTDATA = os.environ.get("PFOR_ONNX_TESTDATA") or os.path.join(os.path.expanduser("~"), ".cache", "pfor",
                                                                   "onnx-testdata")
LIGHT = ["squeezenet", "resnet50"]


# the TorchScript exporter is the one that takes dynamic_axes (the dynamo one needs onnxscript)
warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*legacy TorchScript")


def export_w2(path):
    import torch
    import torch.nn.functional as F

    p = {k: torch.from_numpy(v) for k, v in pl.cnn_params(channels_first=True).items()}

    class Cnn(torch.nn.Module):
        """peer_torch.cnn as a module: the weights are parameters, so they export as initializers."""

        def __init__(self):
            super().__init__()
            for k, v in p.items():
                self.register_parameter(k, torch.nn.Parameter(v, requires_grad=False))

        def forward(self, x):  # x [N,1,28,28]
            h = F.max_pool2d(F.relu(F.conv2d(x, self.c1w, self.c1b, padding=2)), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, self.c2w, self.c2b, padding=2)), 2)
            h = F.relu(torch.flatten(h, 1) @ self.d1w + self.d1b)
            return h @ self.d2w + self.d2b

    x = torch.zeros(2, 1, 28, 28)
    torch.onnx.export(Cnn().eval(), (x,), path, dynamo=False, opset_version=17, input_names=["x"],
                      output_names=["logits"], dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})


def export_w3_cell(path):
    import torch

    w, b = torch.from_numpy(pl.LSTM_WEIGHT()), torch.from_numpy(pl.LSTM_BIAS())

    class Cell(torch.nn.Module):
        """peer_torch.lstm_step as a module."""

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(w, requires_grad=False)
            self.b = torch.nn.Parameter(b, requires_grad=False)

        def forward(self, x, h, c):
            i, f, g, o = (torch.cat([x, h], 1) @ self.w + self.b).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            return torch.sigmoid(o) * torch.tanh(c), c

    args = (torch.zeros(2, 128), torch.zeros(2, 256), torch.zeros(2, 256))
    batch = {0: "N"}
    torch.onnx.export(Cell().eval(), args, path, dynamo=False, opset_version=17, input_names=["x", "h", "c"],
                      output_names=["h_next", "c_next"],
                      dynamic_axes={k: batch for k in ["x", "h", "c", "h_next", "c_next"]})


def symbolic_batch(src, path):
    """ONNX's light model `src` with a symbolic batch dim (see the module doc); False when the
    graph pins the batch otherwise."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(src)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    images = [i for i in g.input if i.name not in inits]
    if len(images) != 1:
        print(f"export_models: {src}: {len(images)} non-initializer inputs, one expected", file=sys.stderr)
        return False
    for v in [images[0], *g.output]:
        d0 = v.type.tensor_type.shape.dim[0]
        if d0.dim_value != 1:
            print(f"export_models: {src}: {v.name} has batch dim {d0}", file=sys.stderr)
            return False
        d0.dim_param = "N"
    del g.value_info[:]
    for node in g.node:
        if node.op_type == "Reshape" and len(node.input) > 1 and node.input[1] in inits:
            shape = numpy_helper.to_array(inits[node.input[1]]).copy()
            if shape.size and shape[0] == 1 and -1 not in shape:
                shape[0] = -1
                inits[node.input[1]].CopyFrom(numpy_helper.from_array(shape.astype(np.int64), node.input[1]))
        elif node.op_type == "Reshape":
            print(f"export_models: {src}: Reshape {node.name} has a computed shape", file=sys.stderr)
            return False
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return True


def export_all(out=MODELS_DIR):
    """Writes the missing files; returns {name: path} of the files present."""
    os.makedirs(out, exist_ok=True)
    done = {}
    jobs = [("w2_cnn", export_w2), ("w3_lstm_cell", export_w3_cell)]
    jobs += [(f"light_{m}_dyn", lambda path, m=m: symbolic_batch(
        os.path.join(TESTDATA, "light", f"light_{m}.onnx"), path)) for m in LIGHT]
    for name, fn in jobs:
        path = os.path.join(out, f"{name}.onnx")
        if not os.path.exists(path):
            tmp = path + ".tmp"
            try:
                if fn(tmp) is False:
                    continue
            except Exception as e:  # noqa: BLE001 - reported; the other models still export
                print(f"export_models: {name}: {type(e).__name__}: {e}", file=sys.stderr)
                continue
            os.replace(tmp, path)
            print(f"export_models: wrote {path}", file=sys.stderr)
        done[name] = path
    return done


if __name__ == "__main__":
    got = export_all(sys.argv[1] if len(sys.argv) > 1 else MODELS_DIR)
    print("\n".join(f"{k}: {v}" for k, v in got.items()))
