#!/usr/bin/env bash
# Writes the ONNX backend test data into a cache directory for tests/onnx/node_suite.rs and
# tests/onnx/suites.rs.
#
# Creates a venv with the pinned `onnx` package (PyPI), runs
# `onnx.backend.test.case.node.collect_testcases(None)` and writes, per case,
# `<cache>/node/<case>/model.onnx`, `test_data_set_<k>/input_<i>.pb` / `output_<i>.pb` and
# `tolerance.txt` ("rtol atol", ONNX's own per-case tolerances); and copies the model suites
# the package ships (`onnx/backend/test/data/{pytorch-converted,pytorch-operator,simple,light}`)
# into `<cache>/<suite>/` as they are (`<case>/model.onnx` + `test_data_set_<k>/`; for `light`,
# `light_<model>.onnx` + `light_<model>_output_0.pb`). Runs once: a finished cache holds a
# stamp file naming the onnx version and the layout revision (bump `LAYOUT` when the cache
# gains content, so existing caches refresh), and the script returns at once when it is there.
#
# Cache directory: $PFOR_ONNX_TESTDATA, else $HOME/.cache/pfor/onnx-testdata (the Rust test
# reads the same place).
set -euo pipefail
ONNX_VERSION="${ONNX_VERSION:-1.23.2}"
CACHE="${PFOR_ONNX_TESTDATA:-$HOME/.cache/pfor/onnx-testdata}"
LAYOUT=2  # 1: node suite; 2: + pytorch-converted, pytorch-operator, simple, light
STAMP="$CACHE/.complete-onnx-$ONNX_VERSION-layout$LAYOUT"
if [[ -f "$STAMP" ]]; then
    echo "onnx testdata: cached in $CACHE (onnx $ONNX_VERSION)"
    exit 0
fi
VENV="$CACHE/.venv"
mkdir -p "$CACHE"
if [[ ! -x "$VENV/bin/python" ]]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet "onnx==$ONNX_VERSION"
rm -rf "$CACHE/node"
"$VENV/bin/python" - "$CACHE/node" <<'PY'
import os, sys
import onnx
from onnx import numpy_helper
from onnx.backend.test.case.node import collect_testcases

out = sys.argv[1]
cases = collect_testcases(None)
written = 0
for case in cases:
    d = os.path.join(out, case.name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    with open(os.path.join(d, "tolerance.txt"), "w") as f:
        f.write(f"{case.rtol} {case.atol}\n")
    for k, (inputs, outputs) in enumerate(case.data_sets or []):
        ds = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(ds, exist_ok=True)
        for tag, values in (("input", inputs), ("output", outputs)):
            for i, v in enumerate(values):
                try:
                    proto = numpy_helper.from_array(v)
                except Exception:
                    # sequences, maps, optionals: written as a marker the Rust test skips
                    with open(os.path.join(ds, f"{tag}_{i}.nontensor"), "w") as f:
                        f.write(type(v).__name__)
                    continue
                with open(os.path.join(ds, f"{tag}_{i}.pb"), "wb") as f:
                    f.write(proto.SerializeToString())
    written += 1
print(f"onnx {onnx.__version__}: wrote {written} node cases into {out}")
PY
DATA="$("$VENV/bin/python" -c 'import os, onnx.backend.test as t; print(os.path.join(os.path.dirname(t.__file__), "data"))')"
for suite in pytorch-converted pytorch-operator simple light; do
    rm -rf "${CACHE:?}/$suite"
    cp -r "$DATA/$suite" "$CACHE/$suite"
    echo "onnx $ONNX_VERSION: copied the $suite suite ($(ls "$CACHE/$suite" | wc -l) entries) into $CACHE/$suite"
done
touch "$STAMP"
