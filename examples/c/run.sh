#!/usr/bin/env bash
# The main job, end to end: make the example CNN, compile it with onnxc to an
# object file, a C header and a self-contained static archive, link a C
# program against the archive with the system cc, run it, and compare with
# ONNX Runtime's output.
#   bash examples/c/run.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

bash tests/make_data.sh
cargo build --release
case=tests/data/examples/cnn
out=target/examples/c
mkdir -p "$out"
./target/release/onnxc compile "$case/model.onnx" -o "$out/model.o" --emit obj,header,archive
cc -std=c11 -O2 -Wall -Werror -I "$out" examples/c/main.c "$out/model.a" -o "$out/cnn"
"$out/cnn" "$case/input.bin" "$case/expected.bin"
