#!/usr/bin/env bash
# device_check.sh - the one prepared run for a machine with a GPU and many cores (written for the
# H200 machine with 16 cores that some development sessions borrow for a few minutes). In one
# go it:
#   1. runs bench/gpu_check.sh: builds magpie with CUDA (benchmarks included), runs the CUDA
#      tests, and profiles ResNet-50 on the GPU against the analytic h200 roofline;
#   2. measures how the explorer scales with threads (bench_explorer --scaling) up to the
#      machine's cores;
#   3. checks the PET verifier's GPU back-end against the CPU one (bench/pet_gpu_check), when
#      that program was built.
# Each step has its own time limit, so one that hangs cannot eat the others' time. Everything
# goes to $OUT_DIR/device-check/ and is packed into $OUT_DIR/device-check.tar.gz (the device
# tool brings back a few files only); a summary is printed at the end.
#
# Environment: BUILD_DIR (default build-device), OUT_DIR (default $OUT, else $BUILD_DIR),
# SCALING_MODEL (default gpt_small_train), SCALING_STATES (default 4000), SCALING_REPS (3),
# and what bench/gpu_check.sh reads (the carried .deb files in .deps/debs).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-device}
top=${OUT_DIR:-${OUT:-$build}}
out=$top/device-check
mkdir -p "$out"
summary=$out/summary.txt
note() { echo "device_check: $*" | tee -a "$summary" >&2; }
cores=$(nproc)
note "$(date -u +%FT%TZ) on $(hostname), $cores cores"

# ---------------------------------------------------------------- 1. CUDA build, tests, profile
EXTRA_CMAKE_ARGS="-DMAGPIE_BENCH=ON" BUILD_DIR=$build OUT_DIR=$out/gpu \
  timeout 300 bench/gpu_check.sh >"$out/gpu_check.out" 2>&1
note "gpu_check status $? (log: gpu/gpu_check.log, gpu/compare-*.txt)"
tail -5 "$out/gpu_check.out" >>"$summary"
[ -x "$build/magpie" ] || { note "no magpie binary: the build failed"; }

# the carried libraries, for the programs run below
if [ -d "$build/deps-root" ]; then
  libdirs=$(find "$build/deps-root" -name '*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
  export LD_LIBRARY_PATH="${libdirs}${LD_LIBRARY_PATH:-}"
fi

# ---------------------------------------------------------------- 2. explorer scaling
if [ -x "$build/bench/bench_explorer" ]; then
  list=1
  for t in 2 4 8 16 32 64; do [ "$t" -le "$cores" ] && list=$list,$t; done
  model=${SCALING_MODEL:-gpt_small_train}
  note "bench_explorer --model $model --scaling $list"
  timeout 120 "$build/bench/bench_explorer" --model "$model" --states "${SCALING_STATES:-4000}" \
    --reps "${SCALING_REPS:-3}" --scaling "$list" >"$out/scaling.txt" 2>"$out/scaling.err"
  note "scaling status $?"
  cat "$out/scaling.txt" >>"$summary"
fi

# ---------------------------------------------------------------- 3. PET: GPU against CPU
if [ -x "$build/bench/pet_gpu_check" ]; then
  note "pet_gpu_check"
  timeout 120 "$build/bench/pet_gpu_check" >"$out/pet_gpu_check.txt" 2>&1
  note "pet_gpu_check status $?"
  tail -20 "$out/pet_gpu_check.txt" >>"$summary"
fi

tar -czf "$top/device-check.tar.gz" -C "$top" device-check 2>/dev/null
cp "$summary" "$top/summary.txt" 2>/dev/null
cat "$summary"
