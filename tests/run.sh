#!/usr/bin/env bash
# THE test command: make the test data, build, run every test.
#   bash tests/run.sh
# Needs python3 (with venv) and cargo; the network only for PyPI and crates.io,
# and apt (Debian's cross gcc and qemu-user) when those are missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { echo "==> $*" >&2; }

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
step "all tests passed"
