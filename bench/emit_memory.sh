#!/usr/bin/env bash
# bench/emit_memory.sh - the table of docs/BENCHMARKS.md "The emitted PyTorch step's memory":
# for each training fixture, a plan optimize finds (--mem-limit 0.5, 400 states, one thread:
# deterministic) and, where force_plan can make one, a plan with one forced fission, remat or
# swap; each emitted with `magpie emit --torch` and measured by bench/emit_memory.py.
#   BUILD=build bench/emit_memory.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
OUT=${1:-out/emit_memory}
mkdir -p "$OUT"
row() { # fixture, then the forced families
  local fx=$1; shift
  local model=tests/fixtures/numeric/$fx/model.onnx plans=()
  "$B/magpie" optimize "$model" --train --mem-limit 0.5 --max-states 400 --threads 1 --quiet \
    --emit torch -o "$OUT/$fx.search" >/dev/null 2>&1 || [ $? -eq 3 ]
  plans+=("$OUT/$fx.search")
  for fam in "$@"; do
    "$B/tests/force_plan" "$model" "$OUT/$fx.$fam" "$fam" >/dev/null
    "$B/magpie" emit "$OUT/$fx.$fam" --torch -o "$OUT/$fx.$fam/step.py" >/dev/null
    plans+=("$OUT/$fx.$fam")
  done
  /usr/bin/python3 bench/emit_memory.py "$B/magpie" "$fx" "${plans[@]}" 2>/dev/null
}
row mlp_dropout_train fission
row cnn_bn_train fission
row resnet_small_train
row unet_transpose_train fission
row gpt_small_train remat swap
row transformer_encoder_train remat
row vit_small_train swap
