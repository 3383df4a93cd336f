"""Writes the small ONNX models shipped in tests/data (run with the venv of
tools/onnx_testdata.sh: `~/.cache/pfor/onnx-testdata/.venv/bin/python tools/make_onnx_models.py`).

tests/data/mlp.onnx: x [N, 4] (N symbolic) -> Gemm(4x8) -> Relu -> MatMul(8x3) + b -> Softmax,
fixed weights from a seeded generator; opset 13.
"""
import os
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
w1 = rng.standard_normal((4, 8)).astype(np.float32)
b1 = rng.standard_normal((8,)).astype(np.float32)
w2 = rng.standard_normal((8, 3)).astype(np.float32)
b2 = rng.standard_normal((3,)).astype(np.float32)
nodes = [
    helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="dense1"),
    helper.make_node("Relu", ["h"], ["r"], name="relu"),
    helper.make_node("MatMul", ["r", "w2"], ["z0"], name="dense2"),
    helper.make_node("Add", ["z0", "b2"], ["z"], name="bias2"),
    helper.make_node("Softmax", ["z"], ["probs"], name="softmax", axis=-1),
]
graph = helper.make_graph(
    nodes,
    "mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 3])],
    [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="pfor-tests")
onnx.checker.check_model(model)
out = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "mlp.onnx")
onnx.save(model, out)
x = np.array([[0.5, -1.0, 2.0, 0.25]], dtype=np.float32)
h = np.maximum(x @ w1 + b1, 0)
z = h @ w2 + b2
p = np.exp(z - z.max(-1, keepdims=True))
print("wrote", out, "; probs of [0.5, -1, 2, 0.25]:", (p / p.sum(-1, keepdims=True)).tolist())
