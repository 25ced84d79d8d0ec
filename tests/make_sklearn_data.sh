#!/usr/bin/env bash
# Make tests/data/sklearn/: scikit-learn models converted by skl2onnx, as
# backend-test cases with ONNX Runtime's outputs (tests/scripts/
# make_sklearn_cases.py). Run after tests/make_data.sh, which makes the venv.
#
#   bash tests/make_sklearn_data.sh           # no-op when up to date
#   FORCE=1 bash tests/make_sklearn_data.sh   # remake anyway
#
# Installs the pinned scikit-learn and skl2onnx (and the versions of their
# dependencies that were tested) into tests/.venv; the other pins stay as
# make_data.sh set them. Its own stamp, keyed on these pins, this script and
# the python script, makes a second run return at once.
set -euo pipefail

TESTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$TESTS/.venv"
OUT="$TESTS/data/sklearn"
PINS=(scikit-learn==1.9.1 skl2onnx==1.20.0 onnxconverter-common==1.16.0 scipy==1.17.1 joblib==1.6.0
      threadpoolctl==3.8.0 narwhals==2.29.0 cloudpickle==3.1.2)

log() { echo "make_sklearn_data: $*" >&2; }

[[ -x "$VENV/bin/python" ]] || { log "no $VENV: run bash tests/make_data.sh first"; exit 1; }

key="$(cat "$TESTS/make_sklearn_data.sh" "$TESTS/scripts/make_sklearn_cases.py" <(printf '%s\n' "${PINS[@]}") \
       | sha256sum | cut -d' ' -f1)"
if [[ -z "${FORCE:-}" && -f "$OUT/.stamp" && "$(cat "$OUT/.stamp")" == "$key" ]]; then
    log "tests/data/sklearn is up to date"
    exit 0
fi

pins_key="$(printf '%s\n' "${PINS[@]}")"
if [[ ! -f "$VENV/.sklearn-pins" || "$(cat "$VENV/.sklearn-pins")" != "$pins_key" ]]; then
    log "pip install ${PINS[*]}"
    # Keep what make_data.sh pinned (onnx, numpy, onnxruntime) as it is.
    "$VENV/bin/python" -m pip freeze | grep -Ei '^(onnx|numpy|onnxruntime|protobuf)==' > "$VENV/.sklearn-constraints"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q \
        -c "$VENV/.sklearn-constraints" "${PINS[@]}"
    printf '%s\n' "${PINS[@]}" > "$VENV/.sklearn-pins"
fi

rm -rf "$OUT"
log "writing scikit-learn cases"
"$VENV/bin/python" -W ignore "$TESTS/scripts/make_sklearn_cases.py" "$OUT" > /dev/null
echo "$key" > "$OUT/.stamp"
log "done: $(find "$OUT" -name model.onnx | wc -l) cases in tests/data/sklearn"
