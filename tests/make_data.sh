#!/usr/bin/env bash
# Make the conformance test data under tests/data/ (git-ignored).
#
#   bash tests/make_data.sh           # no-op when the data is up to date
#   FORCE=1 bash tests/make_data.sh   # regenerate anyway
#
# Creates the venv tests/.venv (python3 -m venv) with pinned onnx, numpy and
# onnxruntime, then writes tests/data/{node,simple,pytorch-converted,
# pytorch-operator,light,light-random}/<case>/. A stamp file, keyed on the
# pinned versions and on the contents of this script and the python scripts,
# makes a second run return at once. Needs only PyPI (or a mirror configured
# for pip).
set -euo pipefail

TESTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$TESTS/.venv"
DATA="$TESTS/data"
PYTHON="${PYTHON:-python3}"
# ml_dtypes is onnx's own dependency, pinned too: from 0.7.0 it casts values
# outside INT2/INT4's range to 0 where earlier versions (and onnxc) wrap,
# which rewrites the reference outputs of the Cast to 2- and 4-bit cases.
PINS=(onnx==1.23.2 numpy==2.4.6 onnxruntime==1.31.1 ml_dtypes==0.6.0)
FOLDERS=(node simple pytorch-converted pytorch-operator light light-random examples maps)

log() { echo "make_data: $*" >&2; }

key="$(cat "$TESTS/make_data.sh" "$TESTS/scripts/make_node_cases.py" \
        "$TESTS/scripts/make_light_cases.py" "$TESTS/scripts/make_example_models.py" \
        "$TESTS/scripts/make_map_cases.py" <(printf '%s\n' "${PINS[@]}") \
       | sha256sum | cut -d' ' -f1)"

up_to_date() {
    [[ -f "$DATA/.stamp" && "$(cat "$DATA/.stamp")" == "$key" ]] || return 1
    local f
    for f in "${FOLDERS[@]}"; do [[ -d "$DATA/$f" ]] || return 1; done
}

if [[ -z "${FORCE:-}" ]] && up_to_date; then
    log "tests/data is up to date (delete tests/data/.stamp or set FORCE=1 to remake it)"
    exit 0
fi

start=$SECONDS

# venv: create if missing (or broken), install the pins if they changed
pins_key="$(printf '%s\n' "${PINS[@]}")"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
    log "creating venv $VENV"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi
if [[ ! -f "$VENV/.pins" || "$(cat "$VENV/.pins")" != "$pins_key" ]]; then
    log "pip install ${PINS[*]}"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q "${PINS[@]}"
    printf '%s\n' "${PINS[@]}" > "$VENV/.pins"
fi

mkdir -p "$DATA"
rm -f "$DATA/.stamp"
log "writing node cases and copying the wheel's simple/pytorch-* cases"
"$VENV/bin/python" "$TESTS/scripts/make_node_cases.py" "$DATA"
log "writing light-model cases, also with random weights (reference outputs from ONNX Runtime)"
"$VENV/bin/python" "$TESTS/scripts/make_light_cases.py" "$DATA"

log "writing the example models"
"$VENV/bin/python" "$TESTS/scripts/make_example_models.py" "$DATA"

log "writing map-value cases (ZipMap; reference outputs from ONNX Runtime)"
"$VENV/bin/python" "$TESTS/scripts/make_map_cases.py" "$DATA"

echo "$key" > "$DATA/.stamp"
log "done in $((SECONDS - start)) s: $(du -sh "$DATA" | cut -f1) in tests/data"
