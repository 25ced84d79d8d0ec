#!/usr/bin/env bash
# Makes the broad benchmark suite (make_suite.py) and the per-operator cases
# (make_ops.py) in a cache folder outside the repository and outside CI:
#   bash tests/scripts/bench_suite/make.sh            # -> $ONNXC_BENCH_CACHE (default ~/.cache/onnxc-bench)
# then time them against ONNX Runtime:
#   $ONNXC_BENCH_CACHE/venv/bin/python tests/scripts/bench_vs_ort.py $ONNXC_BENCH_CACHE/suite
#   $ONNXC_BENCH_CACHE/venv/bin/python tests/scripts/bench_vs_ort.py $ONNXC_BENCH_CACHE/ops
# The venv pins torch and torchvision (PyPI's wheels, several GB with their
# CUDA libraries, which the exports do not use) and the ONNX packages.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${ONNXC_BENCH_CACHE:-$HOME/.cache/onnxc-bench}"
mkdir -p "$cache"
if [ ! -x "$cache/venv/bin/python" ]; then
    python3 -m venv "$cache/venv"
fi
"$cache/venv/bin/pip" install -q "torch==2.8.0" "torchvision==0.23.0" "onnx==1.23.2" "onnxruntime==1.31.1" "numpy==2.4.6" "ml_dtypes==0.6.0"
"$cache/venv/bin/python" "$here/make_suite.py" "$cache/suite" "$@"
"$cache/venv/bin/python" "$here/make_ops.py" "$cache/ops"
