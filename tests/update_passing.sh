#!/usr/bin/env bash
# Ratchet up tests/conformance/passing.txt: run the release onnxc over every
# case in tests/data/{node,simple,pytorch-converted,pytorch-operator,light,
# light-random,sklearn,maps} and merge each case that passes into the list (union with
# what is there, sorted; never removes a line). Review the diff and commit it.
#
#   cargo build --release && bash tests/update_passing.sh
#
# A case counts as passing when it passes `onnxc test --via jit` and then
# `--via object` (the conformance test runs a fixed subset of the list through
# the object path, so every listed case must pass both). VIA="jit" skips the
# object check. BATCH (default 100) cases go to one onnxc process; a crash
# only loses the rest of that batch (those cases are just not added).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ONNXC="${ONNXC:-$ROOT/target/release/onnxc}"
DATA="$ROOT/tests/data"
LIST="$ROOT/tests/conformance/passing.txt"
FOLDERS=(node simple pytorch-converted pytorch-operator light light-random sklearn maps)
BATCH="${BATCH:-100}"
VIA="${VIA:-jit object}"
TIMEOUT="${TIMEOUT:-1800}"

[[ -x "$ONNXC" ]] || { echo "update_passing: no $ONNXC; run cargo build --release" >&2; exit 1; }
[[ -d "$DATA" ]] || { echo "update_passing: no tests/data; run bash tests/make_data.sh" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# run_cases VIA FOLDER CASE... : prints the cases that passed. If onnxc dies
# part-way, the cases it did not report are rerun one per process.
run_cases() {
    local via="$1" folder="$2" rc=0 name
    shift 2
    # whole models: rtol 1e-3 / atol 1e-4 against ONNX Runtime, scikit-learn
    # models atol 1e-5 (as in tests/suite/conformance.rs)
    local -a tol=()
    [[ "$folder" == light* ]] && tol=(--atol 1e-4)
    [[ "$folder" == sklearn ]] && tol=(--atol 1e-5)
    (cd "$DATA/$folder" && timeout "$TIMEOUT" "$ONNXC" test --via "$via" "${tol[@]}" "$@") \
        > "$tmp/out" 2> "$tmp/err" || rc=$?
    # "PASS name" / "FAIL name: why", name possibly a path: keep its last
    # component, and only names that are cases of this batch
    sed -n 's/^PASS \(.*\)$/\1/p' "$tmp/out" | sed 's:/*$::; s:.*/::' \
        | grep -Fxf <(printf '%s\n' "$@") > "$tmp/passed" || true
    cat "$tmp/passed"
    if ! tail -n 1 "$tmp/out" | grep -Eq '^[0-9]+ passed, [0-9]+ failed$'; then
        echo "update_passing: onnxc test --via $via stopped early in $folder (exit $rc); stderr ends:" >&2
        tail -n 3 "$tmp/err" | sed 's/^/    /' >&2
        if [[ $# -gt 1 ]]; then
            sed -n 's/^\(PASS\|FAIL\) \(.*\)$/\2/p' "$tmp/out" | sed 's/: .*$//; s:/*$::; s:.*/::' \
                > "$tmp/reported"
            printf '%s\n' "$@" | grep -Fvxf "$tmp/reported" > "$tmp/missing" || true
            local -a missing
            mapfile -t missing < "$tmp/missing"
            for name in "${missing[@]}"; do run_cases "$via" "$folder" "$name"; done
        fi
    fi
}

# run_via VIA FOLDER < case-names > passing case-names
run_via() {
    local via="$1" folder="$2"
    local -a chunk=()
    while IFS= read -r name; do
        chunk+=("$name")
        if [[ ${#chunk[@]} -ge $BATCH ]]; then run_cases "$via" "$folder" "${chunk[@]}"; chunk=(); fi
    done
    if [[ ${#chunk[@]} -gt 0 ]]; then run_cases "$via" "$folder" "${chunk[@]}"; fi
}

cp "$LIST" "$tmp/old"
{ grep -Ev '^[[:space:]]*(#|$)' "$LIST" || true; } | sed 's/[[:space:]]*#.*//; s/[[:space:]]*$//' | sort -u > "$tmp/listed"
: > "$tmp/passing"
printf '%-18s %7s %7s %7s %7s\n' folder cases passing listed added
for folder in "${FOLDERS[@]}"; do
    [[ -d "$DATA/$folder" ]] || { echo "update_passing: no $DATA/$folder" >&2; exit 1; }
    (cd "$DATA/$folder" && for d in */; do [[ -f "$d/model.onnx" ]] && echo "${d%/}"; done) \
        | sort > "$tmp/cases"
    cp "$tmp/cases" "$tmp/pass"
    for via in $VIA; do
        run_via "$via" "$folder" < "$tmp/pass" | sort -u > "$tmp/pass.next"
        mv "$tmp/pass.next" "$tmp/pass"
    done
    sed "s:^:$folder/:" "$tmp/pass" >> "$tmp/passing"
    total=$(wc -l < "$tmp/cases")
    passing=$(wc -l < "$tmp/pass")
    added=$(sed "s:^:$folder/:" "$tmp/pass" | sort | comm -13 "$tmp/listed" - | wc -l)
    merged=$(sed "s:^:$folder/:" "$tmp/pass" | sort -u - <(grep "^$folder/" "$tmp/listed" || true) | sort -u | wc -l)
    printf '%-18s %7d %7d %7d %7d\n' "$folder" "$total" "$passing" "$merged" "$added"
done

# Header comments stay, entries become the sorted union.
{
    grep -E '^[[:space:]]*#' "$tmp/old" || true
    sort -u "$tmp/listed" "$tmp/passing"
} > "$LIST"
added=$(sort -u "$tmp/passing" | comm -13 "$tmp/listed" - | wc -l)
gone=$(sort -u "$tmp/passing" | comm -23 "$tmp/listed" - | wc -l)
echo "update_passing: added $added case(s); passing.txt now lists $(grep -Evc '^[[:space:]]*(#|$)' "$LIST")"
if [[ $gone -gt 0 ]]; then
    echo "update_passing: WARNING: $gone listed case(s) did not pass now (kept in the list; CI will fail):" >&2
    sort -u "$tmp/passing" | comm -23 "$tmp/listed" - | sed 's/^/    /' >&2
fi
