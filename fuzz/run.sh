#!/usr/bin/env bash
# Runs one fuzz target for a given time: bash fuzz/run.sh TARGET SECONDS [JOBS]
#   TARGET: load_check | compile_run | kernels
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
# New inputs go to fuzz/corpus/TARGET (not checked in); the checked-in
# seeds in fuzz/seeds/TARGET are read only. Crashes land in
# fuzz/artifacts/TARGET; turn each into a regression test in tests/.
set -euo pipefail
target=${1:?usage: run.sh TARGET SECONDS [JOBS]}
seconds=${2:?usage: run.sh TARGET SECONDS [JOBS]}
jobs=${3:-1}
cd "$(dirname "$0")"
mkdir -p "corpus/$target" "seeds/$target"
# The models JIT-compile code; leak checking would only report the JIT's
# long-lived allocations.
exec cargo +nightly fuzz run --release "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -jobs="$jobs" -workers="$jobs" -detect_leaks=0 -rss_limit_mb=4096 -timeout=60
