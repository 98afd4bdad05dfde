#!/usr/bin/env bash
# gpu_check.sh - the one prepared device check of magpie's CUDA back-ends, for a GPU machine
# (written for an H200). It builds magpie with CUDA there, runs the CUDA tests, profiles a model
# on the GPU (--device cuda) and with the analytic h200 roofline, and prints the two side by
# side, per op type and per node, with measured/analytic ratios. Everything it prints is also
# kept under $OUT_DIR. Exit status: 0 when the build, the tests and both profiles succeeded.
#
# The GPU machine has the CUDA toolkit but not magpie's Debian build dependencies, and cannot
# download: their .deb files travel with the working tree, fetched here beforehand with
# `bench/gpu_check.sh --make-deps` (apt-get download, no root needed), and are unpacked there
# into a private prefix.
#
# Environment:
#   MAGPIE_DEPS_DEBS    the carried .deb files (default: .deps/debs), unpacked into
#                       $BUILD_DIR/deps-root when MAGPIE_DEPS_PREFIX is not given
#   MAGPIE_DEPS_PREFIX  an already unpacked prefix instead; its usr/ goes to CMAKE_PREFIX_PATH,
#                       its libraries to LD_LIBRARY_PATH, its bin/ to PATH
#   CUDNN_ROOT          a folder with include/cudnn.h and lib/libcudnn.so*, when cuDNN is not in
#                       the CUDA toolkit (default: the toolkit's, else python3's nvidia-cudnn
#                       wheel, which PyTorch images carry)
#   BUILD_DIR           build folder (default: build-gpu-check)
#   OUT_DIR             logs and JSON (default: $OUT when set, as on the device machine, else
#                       $BUILD_DIR/gpu-check)
#   MODEL               model to profile (default: tests/fixtures/structure/resnet50.onnx)
#   SHAPE               a second, larger input shape for the default model (default:
#                       input=32,3,224,224; empty for none)
#   CUDA_ARCH           CUDA architectures to build (default: native, else 90)
#   JOBS                build parallelism (default: nproc)
#   EXTRA_CMAKE_ARGS    more configure arguments, space-separated (bench/device_check.sh turns
#                       the benchmarks on with it)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

debs=${MAGPIE_DEPS_DEBS:-.deps/debs}
if [ "${1:-}" = "--make-deps" ]; then
  # Run on the build machine (a Debian release whose glibc is no newer than the device image's).
  # The .deb files are what travels: about 15 MB, against over 100 MB unpacked.
  mkdir -p "$debs"
  pkgs=(libopenblas0-openmp libopenblas-openmp-dev libprotobuf-c1 libprotobuf-c-dev
        protobuf-c-compiler libprotoc32 libprotobuf32 libonnx-dev libcmocka0 libcmocka-dev
        libzstd-dev libck-dev libck0 libgfortran5)
  (cd "$debs" && apt-get download "${pkgs[@]}") || exit 1
  echo "gpu_check: ${#pkgs[@]} packages in $debs ($(du -sh "$debs" | cut -f1)); to carry them," \
    "ignore the folder (echo /.deps/ >>.git/info/exclude) and name it in carry"
  exit 0
fi

build=${BUILD_DIR:-build-gpu-check}
out=${OUT_DIR:-${OUT:-$build/gpu-check}}
model=${MODEL:-tests/fixtures/structure/resnet50.onnx}
jobs=${JOBS:-$(nproc)}
mkdir -p "$out"
log() { echo "gpu_check: $*" | tee -a "$out/gpu_check.log" >&2; }
status=0

# ---------------------------------------------------------------- the machine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 |
  tee -a "$out/gpu_check.log" || log "nvidia-smi failed (no GPU visible?)"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
nvcc --version | tail -1 | tee -a "$out/gpu_check.log"

# ---------------------------------------------------------------- dependencies
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMAGPIE_CUDA=ON -DMAGPIE_BENCH=OFF)
prefix=${MAGPIE_DEPS_PREFIX:-}
if [ -z "$prefix" ] && ls "$debs"/*.deb >/dev/null 2>&1; then
  # unpack the carried packages, without what the build does not use (static libraries,
  # documentation)
  mkdir -p "$build/deps-root"
  prefix=$(cd "$build/deps-root" && pwd)
  if [ ! -d "$prefix/usr" ]; then
    for f in "$debs"/*.deb; do
      f=$(realpath "$f")
      dpkg-deb -x "$f" "$prefix" 2>/dev/null ||
        (t=$(mktemp -d) && cd "$t" && ar x "$f" && tar -xf data.tar.* -C "$prefix" && rm -rf "$t")
    done
    find "$prefix" -name '*.a' -delete
    rm -rf "$prefix/usr/share/doc" "$prefix/usr/share/man"
  fi
fi
if [ -n "$prefix" ]; then
  prefix=$(cd "$prefix" && pwd)
  log "Debian libraries from $prefix"
  export CMAKE_PREFIX_PATH="$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PATH="$prefix/usr/bin:$PATH"
  libdirs=$(find "$prefix" -name '*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
  export LD_LIBRARY_PATH="${libdirs}${LD_LIBRARY_PATH:-}"
  # Debian reaches OpenBLAS and its cblas.h through alternatives symlinks, which dpkg -x does
  # not create: name the OpenMP variant's files directly.
  first() { find "$prefix" -path "$1" 2>/dev/null | sort | head -1; }
  f=$(first '*openblas-openmp/libopenblas.so*'); [ -n "$f" ] && cmake_args+=(-DOPENBLAS_LIB="$f")
  f=$(first '*openblas*/cblas.h'); [ -n "$f" ] && cmake_args+=(-DCBLAS_INCLUDE_DIR="$(dirname "$f")")
  f=$(first '*/onnx/onnx.proto'); [ -n "$f" ] && cmake_args+=(-DONNX_PROTO="$f")
  f=$(first '*/bin/protoc-c'); [ -n "$f" ] && cmake_args+=(-DPROTOC_C="$f")
fi

# cuDNN: the toolkit's, else a given root, else the wheel PyTorch uses. Wheels ship only
# libcudnn.so.9, so a link named libcudnn.so is made for find_library.
cudnn=${CUDNN_ROOT:-}
if [ -z "$cudnn" ] && ! ls /usr/local/cuda/include/cudnn.h /usr/include/cudnn.h >/dev/null 2>&1; then
  cudnn=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)
fi
if [ -n "$cudnn" ]; then
  lib=$(find "$cudnn" -name 'libcudnn.so*' | sort | head -1)
  shim="$root/$build/cudnn-shim"
  mkdir -p "$shim"
  [ -n "$lib" ] && ln -sf "$lib" "$shim/libcudnn.so"
  cmake_args+=(-DCUDNN_INCLUDE_DIR="$cudnn/include" -DCUDNN_LIB="$shim/libcudnn.so")
  export LD_LIBRARY_PATH="$(dirname "${lib:-$cudnn/lib/x}"):${LD_LIBRARY_PATH:-}"
  log "cuDNN from $cudnn"
fi
# cuBLAS likewise when the toolkit has none (the nvidia-cublas wheel)
if ! ls /usr/local/cuda/lib64/libcublas.so* /usr/local/cuda/lib/libcublas.so* >/dev/null 2>&1; then
  cublas=$(python3 -c 'import nvidia.cublas as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  [ -n "$cublas" ] && export LD_LIBRARY_PATH="$cublas/lib:${LD_LIBRARY_PATH:-}" &&
    cmake_args+=(-DCMAKE_LIBRARY_PATH="$cublas/lib") && log "cuBLAS from $cublas"
fi
arch=${CUDA_ARCH:-}
if [ -z "$arch" ]; then
  arch=90
  nvidia-smi >/dev/null 2>&1 && arch=native
fi
cmake_args+=(-DMAGPIE_CUDA_ARCHITECTURES="$arch")
# shellcheck disable=SC2206 # word splitting wanted
[ -n "${EXTRA_CMAKE_ARGS:-}" ] && cmake_args+=($EXTRA_CMAKE_ARGS)

# ---------------------------------------------------------------- build
log "configure: ${cmake_args[*]}"
if ! cmake -S . -B "$build" "${cmake_args[@]}" >"$out/configure.log" 2>&1; then
  tail -30 "$out/configure.log"
  log "configure failed (log: $out/configure.log)"
  exit 1
fi
grep -E 'magpie: (CUDA|BLAS)' "$out/configure.log" | tee -a "$out/gpu_check.log"
grep -q 'CUDA back-ends available' "$out/configure.log" || { log "CUDA back-ends not enabled"; exit 1; }
log "build (-j$jobs)"
if ! cmake --build "$build" -j "$jobs" --target magpie test_gpu_cost >"$out/build.log" 2>&1; then
  grep -E 'error|Error' "$out/build.log" | head -30
  log "build of magpie and test_gpu_cost failed (log: $out/build.log)"
  exit 1
fi
# the rest (other CUDA tests, when present); a failure elsewhere does not stop the check
cmake --build "$build" -j "$jobs" >>"$out/build.log" 2>&1 || log "warning: full build failed; see $out/build.log"

# ---------------------------------------------------------------- tests
log "CUDA tests"
(cd "$build" && ctest -R 'gpu|cuda' --output-on-failure --timeout 300) 2>&1 | tee "$out/ctest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { status=1; log "CUDA tests FAILED"; }
# the test's own report (device, ratios), printed whatever ctest captured
(cd "$root" && MAGPIE_SOURCE_DIR="$root" "$build/tests/test_gpu_cost") >"$out/test_gpu_cost.log" 2>&1
sed -n '/device:/,/^\[/p' "$out/test_gpu_cost.log" | head -40

# ---------------------------------------------------------------- measured vs analytic
# compare.py joins two `magpie profile --json` reports: per op type, then per node
cat >"$out/compare.py" <<'EOF'
import json, math, sys
cu, an = (json.load(open(p)) for p in sys.argv[1:3])
print(f"model {cu['file']}: measured on {cu['device_detail']}")
print(f"  signatures: {cu['signatures']} distinct, {cu['signatures_measured']} measured, "
      f"{cu['signatures_failed']} failed (analytic fallback), calibrated={cu['calibrated']}")
print(f"  total (eager order): measured {cu['total_seconds']*1e3:.3f} ms, "
      f"analytic h200 {an['total_seconds']*1e3:.3f} ms, "
      f"ratio {cu['total_seconds']/an['total_seconds']:.3f}")
aops = {o['op']: o for o in an['by_op']}
print(f"\n{'op':<22}{'count':>6}{'measured ms':>13}{'h200 ms':>11}{'ratio':>8}")
for o in cu['by_op']:
    a = aops.get(o['op'])
    at = a['seconds'] if a else float('nan')
    r = o['seconds'] / at if a and at > 0 else float('nan')
    print(f"{o['op']:<22}{o['count']:>6}{o['seconds']*1e3:>13.4f}{at*1e3:>11.4f}{r:>8.3f}")
anodes = {n['node']: n for n in an['top']}
print(f"\n{'node (30 costliest measured)':<40}{'op':<20}{'meas us':>10}{'h200 us':>10}{'ratio':>8}  shapes")
logs = []
for n in cu['top']:
    a = anodes.get(n['node'])
    if a and a['seconds'] > 0 and n['seconds'] > 0:
        logs.append(math.log(n['seconds'] / a['seconds']))
for n in cu['top'][:30]:
    a = anodes.get(n['node'])
    at = a['seconds'] if a else float('nan')
    r = n['seconds'] / at if a and at > 0 else float('nan')
    shapes = ','.join('x'.join(map(str, t.get('shape', []))) for t in n['inputs'][:2])
    print(f"{n['node'][:39]:<40}{n['op'][:19]:<20}{n['seconds']*1e6:>10.2f}{at*1e6:>10.2f}{r:>8.3f}  {shapes}")
if logs:
    logs.sort()
    print(f"\nper-node measured/analytic: geometric mean {math.exp(sum(logs)/len(logs)):.3f}, "
          f"median {math.exp(logs[len(logs)//2]):.3f}, min {math.exp(logs[0]):.3f}, "
          f"max {math.exp(logs[-1]):.3f} over {len(logs)} nodes")
EOF
# profile_pair TAG [magpie options...]: the model on cuda and on analytic:h200, side by side
profile_pair() {
  local tag=$1
  shift
  log "profile $model $* on cuda and analytic:h200 ($tag)"
  rm -f "$out/profile-$tag.db"
  if ! "$build/magpie" profile "$model" "$@" --device cuda --top 0 --json \
    --profile-db "$out/profile-$tag.db" >"$out/cuda-$tag.json" 2>"$out/cuda-$tag.err"; then
    status=1
    cat "$out/cuda-$tag.err"
    log "magpie profile --device cuda failed ($tag)"
    return
  fi
  grep -i warn "$out/cuda-$tag.err" | head -20
  if ! "$build/magpie" profile "$model" "$@" --device analytic:h200 --top 0 --json \
    >"$out/h200-$tag.json" 2>"$out/h200-$tag.err"; then
    status=1
    cat "$out/h200-$tag.err"
    log "magpie profile --device analytic:h200 failed ($tag)"
    return
  fi
  python3 "$out/compare.py" "$out/cuda-$tag.json" "$out/h200-$tag.json" |
    tee "$out/compare-$tag.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}
profile_pair b1
# a batch that fills the GPU, where the analytic compute rates are tested rather than launches
shape=${SHAPE-input=32,3,224,224}
if [ -n "$shape" ] && [ "$model" = tests/fixtures/structure/resnet50.onnx ]; then
  profile_pair b32 --shape "$shape"
fi
log "done, status $status; files in $out"
exit $status
