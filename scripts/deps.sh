#!/usr/bin/env bash
# deps.sh - installs the Debian 12 packages magpie needs to build and test, when missing.
# Usage: scripts/deps.sh [--fuzz]   (--fuzz adds clang and its sanitizer runtimes)
set -euo pipefail
pkgs=(build-essential cmake pkg-config libopenblas-dev libopenblas0-openmp libprotobuf-c-dev protobuf-c-compiler
      libonnx-dev libck-dev libzstd-dev libcmocka-dev libopenmpi-dev openmpi-bin)
if [ "${1:-}" = "--fuzz" ]; then pkgs+=(clang libclang-rt-14-dev); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "magpie: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
