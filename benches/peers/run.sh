#!/usr/bin/env bash
# The peer benchmarks: pfor's workloads on TensorFlow, JAX, PyTorch, TFP auto-batching and
# Opacus (README.md in this directory says what each one measures). One command: it creates
# (or reuses) a Python venv, installs what the chosen peers need at the versions pinned in
# requirements.txt, and runs the peers one after another, never two at a time.
#
# Usage: benches/peers/run.sh [peer ...]
#   peers: tf jax torch tfp_autobatch (the default set: W1-W6)
#          w8_tf w8_jax w8_torch w8_opacus (W8); w8 = all four;
#          ort (ONNX Runtime: batched inference of ONNX models, peer_ort.py);
#          tfdata (W9: TF tf.data over the W9 Parquet file); all = the default set, w8, ort and tfdata
# Environment (all optional):
#   PEERS_OUT     output directory (default: <repository>/target/peers)
#   PEERS_VENV    the venv (default: ${XDG_CACHE_HOME:-$HOME/.cache}/pfor-peers-venv)
#   PEERS_PYTHON  the Python that creates the venv (default: python3, 3.11 or newer)
#   PEERS_RUNS    runs of each peer (default 1); with N > 1 run1/ .. runN/ hold the runs and
#                 PEERS_OUT their medians (aggregate.py)
#   QUICK=1, ONLY=W1,W3, W8_BATCHES=32,128, W9_ROWS, W9_DIR, FIB_MAX_N, PEERS_THREADS, FOREIGN_MAX, ATTEMPTS,
#   QUIET_WAIT_MAX, TARGET_SECONDS: see README.md; pip's own variables (PIP_CACHE_DIR,
#   PIP_INDEX_URL, ...) apply to the installs.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${PEERS_OUT:-$(cd "$here/../.." && pwd)/target/peers}
venv=${PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/pfor-peers-venv}
runs=${PEERS_RUNS:-1}
pins=$here/requirements.txt

script_of() { # peer -> script [argument]
  case $1 in
    tf | jax | torch | tfp_autobatch) echo "peer_$1.py" ;;
    w8_tf | w8_jax | w8_torch) echo "peer_${1#w8_}.py w8" ;;
    w8_opacus) echo "peer_opacus.py" ;;
    ort) echo "peer_ort.py" ;;
    tfdata) echo "peer_tfdata.py" ;;
    *) return 1 ;;
  esac
}
packages_of() { # peer -> the packages it imports (numpy comes with every peer)
  case $1 in
    tf | w8_tf) echo tensorflow-cpu ;;
    jax | w8_jax) echo jax jaxlib ;;
    torch | w8_torch) echo torch ;;
    w8_opacus) echo torch opacus ;;
    tfp_autobatch) echo tensorflow-cpu tensorflow-probability ;;
    ort) echo onnxruntime onnx torch ;; # torch and onnx: export_models.py
    tfdata) echo tensorflow-cpu pyarrow ;;
  esac
}

peers=()
for arg in "${@:-default}"; do
  case $arg in
    default) peers+=(tf jax torch tfp_autobatch) ;;
    w8) peers+=(w8_tf w8_jax w8_torch w8_opacus) ;;
    all) peers+=(tf jax torch tfp_autobatch w8_tf w8_jax w8_torch w8_opacus ort tfdata) ;;
    *) script_of "$arg" >/dev/null || { echo "run.sh: unknown peer '$arg' (usage: see the top of $0)" >&2; exit 2; }
       peers+=("$arg") ;;
  esac
done

# ---- the venv: created once; each set of packages installed once per version of requirements.txt
if [ ! -x "$venv/bin/python" ]; then
  echo "run.sh: creating the venv $venv"
  "${PEERS_PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  { echo "run.sh: $venv has Python < 3.11 (the pinned jax needs 3.11+); set PEERS_PYTHON / PEERS_VENV" >&2; exit 2; }
for peer in "${peers[@]}"; do
  packages="numpy $(packages_of "$peer")"
  stamp=$venv/.pfor-peers-$(cat "$pins" - <<<"$packages" | sha256sum | cut -c1-16)
  [ -e "$stamp" ] && continue
  echo "run.sh: installing $packages into $venv"
  "$venv/bin/pip" install -q -c "$pins" $packages
  if [ "$peer" = tfp_autobatch ]; then
    # TFP imports tf_keras; tf-keras's own requirement is the CUDA `tensorflow` wheel, which
    # would be unpacked over tensorflow-cpu's files: install it without dependencies.
    "$venv/bin/pip" install -q --no-deps -c "$pins" tf-keras
  fi
  touch "$stamp"
done

# ---- the runs
mkdir -p "$out"
"$venv/bin/pip" freeze >"$out/versions.txt"
status=0
dirs=()
for run in $(seq 1 "$runs"); do
  dir=$out
  [ "$runs" -gt 1 ] && dir=$out/run$run
  mkdir -p "$dir"
  dirs+=("$dir")
  for peer in "${peers[@]}"; do
    read -r script arg <<<"$(script_of "$peer")"
    steal0=$(awk '/^cpu /{print $9}' /proc/stat)
    start=$(date +%s.%N)
    rc=0
    PEERS_OUT=$dir "$venv/bin/python" "$here/$script" $arg >"$dir/log_$peer.txt" 2>&1 || rc=$?
    wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    steal=$(($(awk '/^cpu /{print $9}' /proc/stat) - steal0))
    echo "$(date -u +%FT%TZ) $peer run=$run/$runs rc=$rc wall_s=$wall steal_ticks=$steal log=$dir/log_$peer.txt" |
      tee -a "$out/run_meta.txt"
    [ "$rc" -eq 0 ] || status=1
  done
done
if [ "$runs" -gt 1 ]; then
  "$venv/bin/python" "$here/aggregate.py" "$out" "${dirs[@]}"
fi
echo "run.sh: results in $out/results_<peer>.csv (peer,workload,mode,batch,median_seconds,throughput,unit)"
exit "$status"
