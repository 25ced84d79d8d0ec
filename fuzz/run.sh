#!/usr/bin/env bash
# Runs one fuzz target for a given time: bash fuzz/run.sh TARGET SECONDS [JOBS]
#   TARGET: load_check | compile_run | kernels
#   JOBS: parallel fuzzing processes (default 1), logs in fuzz/logs/TARGET/
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
args=(-max_total_time="$seconds" -detect_leaks=0 -rss_limit_mb=4096 -timeout=60)
if [ "$jobs" -gt 1 ]; then
    mkdir -p logs
    # libFuzzer writes fuzz-N.log in the current folder: one per target.
    mkdir -p "logs/$target" && cd "logs/$target"
    args+=(-jobs="$jobs" -workers="$jobs")
    corpus=(../../corpus/"$target" ../../seeds/"$target")
    exec cargo +nightly fuzz run --fuzz-dir ../.. --release "$target" "${corpus[@]}" -- "${args[@]}"
fi
exec cargo +nightly fuzz run --release "$target" "corpus/$target" "seeds/$target" -- "${args[@]}"
