#!/usr/bin/env bash
# build.sh - configures and builds magpie into BUILD_DIR (default build/), Release with asserts.
# Extra arguments go to cmake's configure step, e.g. -DMAGPIE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
