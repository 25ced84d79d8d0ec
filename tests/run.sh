#!/usr/bin/env bash
# THE test command: make the test data, build, run every test.
#   bash tests/run.sh
# Needs python3 (with venv) and cargo; the network only for PyPI and crates.io.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { echo "==> $*" >&2; }

step "making test data (bash tests/make_data.sh)"
bash tests/make_data.sh
step "building (cargo build --release)"
cargo build --release
step "testing (cargo test --release --workspace)"
cargo test --release --workspace
step "all tests passed"
