#!/usr/bin/env bash
# THE test command: make the test data, build, run every test.
#   bash tests/run.sh
# Needs python3 (with venv) and cargo; the network only for PyPI and crates.io,
# and apt (Debian's cross gcc and qemu-user) when those are missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { echo "==> $*" >&2; }

# The kernel tests run each SIMD path this CPU has and skip the others
# (ONNXC_REQUIRE_ISA=avx2,avx512,vnni makes a skip fail): say which they are.
isa="$(grep -m1 -ow -e avx2 -e fma -e avx512f -e avx512_vnni /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ' || true)"
step "host: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | xargs || uname -m); ISA: ${isa:-none of avx2/fma/avx512f/avx512_vnni}; ONNXC_REQUIRE_ISA=${ONNXC_REQUIRE_ISA:-}"
step "making test data (bash tests/make_data.sh)"
bash tests/make_data.sh
step "making the scikit-learn cases (bash tests/make_sklearn_data.sh)"
bash tests/make_sklearn_data.sh
step "installing the cross toolchains the cross-target tests run (tests/scripts/install_cross_tools.sh)"
bash tests/scripts/install_cross_tools.sh
step "building (cargo build --release)"
cargo build --release
step "testing (cargo test --release --workspace)"
cargo test --release --workspace
# On an AVX-512 host the kernels choose their AVX-512 paths: run the kernel
# tests once more on an emulated AVX2-only CPU, where they choose the AVX2
# ones (QEMU emulates AVX2 but not AVX-512, so an AVX2-only host cannot
# return the favour).
if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    step "kernel tests on an emulated AVX2-only CPU (qemu-x86_64 -cpu Haswell, ONNXC_REQUIRE_ISA=avx2)"
    ONNXC_REQUIRE_ISA=avx2 cargo test --release -p onnxc-runtime --lib \
        --config 'target.x86_64-unknown-linux-gnu.runner = ["qemu-x86_64", "-cpu", "Haswell"]'
fi
step "all tests passed"
