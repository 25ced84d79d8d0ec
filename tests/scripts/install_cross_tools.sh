#!/usr/bin/env bash
# Installs what tests/suite/cross.rs needs to link and run aarch64 and
# riscv64 objects: Debian's cross gcc (with the target's libc for -static)
# and qemu-user (whose qemu-x86_64 also runs the kernel tests on an emulated
# AVX2-only CPU, see tests/run.sh). Returns at once when every tool is
# already there.
#
#   bash tests/scripts/install_cross_tools.sh
#
# Uses apt-get (as root, or through sudo); Debian/Ubuntu package names.
set -euo pipefail

log() { echo "install_cross_tools: $*" >&2; }

missing=()
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v riscv64-linux-gnu-gcc >/dev/null || missing+=(gcc-riscv64-linux-gnu libc6-dev-riscv64-cross)
if ! command -v qemu-aarch64 >/dev/null || ! command -v qemu-riscv64 >/dev/null || ! command -v qemu-x86_64 >/dev/null; then
    missing+=(qemu-user)
fi
if [[ ${#missing[@]} -eq 0 ]]; then
    log "cross gcc and qemu-user are installed"
    exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
    sudo=()
elif command -v sudo >/dev/null; then
    sudo=(sudo)
else
    log "need root or sudo to install ${missing[*]}"
    exit 1
fi
log "apt-get install ${missing[*]}"
"${sudo[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
