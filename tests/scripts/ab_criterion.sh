#!/bin/bash
# Compares two builds of a Criterion bench binary on a noisy machine.
#
#   tests/scripts/ab_criterion.sh A_BIN B_BIN FILTER [ROUNDS]
#
# e.g. A_BIN=/tmp/base-target/release/deps/planes-*, B_BIN=target/release/deps/planes-*
# (run `cargo bench -p onnxc-runtime --no-run` first: stale deps binaries
# linger). The two binaries run alone on core 0, alternating, ROUNDS times
# (default 6; MT seconds of measurement per case, default 0.4). Per case it
# prints the minimum over rounds of Criterion's estimate for each side and
# B/A of those minima, then the medians: on a shared host the minimum is
# the figure that noise moves least.
set -euo pipefail
A=$1 B=$2 FILTER=$3 ROUNDS=${4:-6}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for _ in $(seq "$ROUNDS"); do
  for side in A B; do
    bin=$A; [ "$side" = B ] && bin=$B
    taskset -c 0 "$bin" --bench --warm-up-time 0.1 --measurement-time "${MT:-0.4}" --noplot "$FILTER" 2>/dev/null \
      | grep -E "^[a-z].*/|time:" | grep -v "%" >> "$out/$side.txt" || true
  done
done
python3 - "$out/A.txt" "$out/B.txt" <<'PY'
import collections, re, statistics, sys
UNITS = {"s": 1e6, "ms": 1e3, "µs": 1.0, "ns": 1e-3}
def parse(path):
    times = collections.defaultdict(list)
    text = open(path).read()
    for m in re.finditer(r"([a-z][\w\-]*/[\w\-/.]+)\s+time:\s+\[[\d.]+ \S+ ([\d.]+) (\S+)", text):
        times[m.group(1)].append(float(m.group(2)) * UNITS[m.group(3)])
    return times
a, b = parse(sys.argv[1]), parse(sys.argv[2])
for case in a:
    if case in b:
        ma, mb = min(a[case]), min(b[case])
        print(f"{case:<36} A min {ma:10.1f} µs  B min {mb:10.1f} µs  B/A {mb / ma:.3f}"
              f"  (medians {statistics.median(a[case]):.1f} {statistics.median(b[case]):.1f})")
PY
