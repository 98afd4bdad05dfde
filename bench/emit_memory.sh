#!/usr/bin/env bash
# bench/emit_memory.sh - the table of docs/BENCHMARKS.md "The emitted PyTorch step's memory":
# for each training fixture, a plan optimize finds (--mem-limit 0.5, 400 states, one thread:
# deterministic) and, where force_plan can make one, a plan with one forced fission, remat or
# swap; each emitted with `magpie emit --torch` and measured by bench/emit_memory.py. The
# transformers also as scripts/export_for_training.py exports them with fused GELU and LayerNorm
# (opset 20, Gelu and LayerNormalization; a PyTorch whose exporter has no Gelu, such as 1.13,
# gets opset 17: LayerNormalization, GELU still through Erf), the ops the plain PyTorch step uses;
# and the fixtures' own opset-13 files read with --fuse-decomposed (the same fusion at import).
#   BUILD=build [PYTHON=/usr/bin/python3] bench/emit_memory.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
PY=${PYTHON:-/usr/bin/python3}
OUT=${1:-out/emit_memory}
mkdir -p "$OUT"
search() { # model, plan dir, more optimize options
  "$B/magpie" optimize "$1" --train --mem-limit 0.5 --max-states 400 --threads 1 --quiet \
    --emit torch -o "$2" "${@:3}" >/dev/null 2>&1 || [ $? -eq 3 ]
}
row() { # fixture, then the forced families
  local fx=$1; shift
  local model=tests/fixtures/numeric/$fx/model.onnx plans=()
  search "$model" "$OUT/$fx.search"
  plans+=("$OUT/$fx.search")
  for fam in "$@"; do
    "$B/tests/force_plan" "$model" "$OUT/$fx.$fam" "$fam" >/dev/null
    "$B/magpie" emit "$OUT/$fx.$fam" --torch -o "$OUT/$fx.$fam/step.py" >/dev/null
    plans+=("$OUT/$fx.$fam")
  done
  "$PY" bench/emit_memory.py "$B/magpie" "$fx" "${plans[@]}" 2>/dev/null
}
row_fused() { # fixture: exported with fused GELU and LayerNorm, its searched plan
  local fx=$1 opset=20 model=$OUT/$1.fused.onnx
  "$PY" bench/emit_memory.py --export "$fx" 20 "$model" >/dev/null 2>&1 ||
    { opset=17; "$PY" bench/emit_memory.py --export "$fx" 17 "$model" >/dev/null 2>&1; }
  echo "($fx exported at opset $opset)"
  search "$model" "$OUT/$fx.fused"
  "$PY" bench/emit_memory.py "$B/magpie" "$fx" --model "$model" "$OUT/$fx.fused" 2>/dev/null
}
row_fuse() { # fixture: the file as it is, read with --fuse-decomposed, its searched plan
  local fx=$1 model=tests/fixtures/numeric/$1/model.onnx
  echo "($fx read with --fuse-decomposed)"
  search "$model" "$OUT/$fx.fuse" --fuse-decomposed
  "$PY" bench/emit_memory.py "$B/magpie" "$fx" --eager-option --fuse-decomposed "$OUT/$fx.fuse" \
    2>/dev/null
}
"$PY" -c 'import torch; print("PyTorch", torch.__version__)'
row mlp_dropout_train fission
row cnn_bn_train fission
row resnet_small_train
row unet_transpose_train
row stn_pad_train fission
row gpt_small_train remat swap
row transformer_encoder_train remat
row vit_small_train swap
row_fused gpt_small_train
row_fused transformer_encoder_train
row_fused vit_small_train
row_fuse gpt_small_train
row_fuse transformer_encoder_train
row_fuse vit_small_train
