#!/usr/bin/env bash
# standard_check.sh MAGPIE WORKDIR [FORCE_PLAN] - `magpie export --standard`: inference plans with swaps
# (Store/Load) and fission ops come out in the default ONNX domain only and compute what the
# original computes (magpie verify); a training plan is refused with exit 2 naming its ops, and
# no file is written.
set -uo pipefail
M=$1 W=$2 FORCE=${3:-}
mkdir -p "$W"
fail=0
# a fission plan of an inference graph (force_plan --inference: gpt_small_train's forward, batch 2)
if [ -n "$FORCE" ]; then
  fx=gpt_small_train
  model=tests/fixtures/numeric/$fx/model.onnx
  if "$FORCE" "$model" "$W/fission" fission --inference >/dev/null &&
     "$M" export "$W/fission/optimized.onnx" "$W/fission/standard.onnx" --standard >/dev/null &&
     ! "$M" inspect "$W/fission/standard.onnx" --json | grep -qE '"Fission[A-Za-z]*":' &&
     "$M" verify "$model" "$W/fission/standard.onnx" --seed 1 >/dev/null; then
    n=$("$M" inspect "$W/fission/optimized.onnx" --json | grep -oE '"Fission[A-Za-z]*":[0-9]+' | awk -F: '{s+=$2} END {print s+0}')
    echo "ok $fx forward with a fission: $n fission nodes lowered, outputs agree"
    [ "$n" -gt 0 ] || { echo "FAIL: the forced plan has no fission node"; fail=1; }
  else
    echo "FAIL $fx: the fission plan's standard form"; fail=1
  fi
fi
for fx in resnet_small vit_small unet_upsample; do
  model=tests/fixtures/numeric/$fx/model.onnx
  "$M" optimize "$model" --mem-limit 0.4 --max-states 300 --threads 1 --quiet -o "$W/$fx" \
    >/dev/null 2>&1
  [ $? -le 3 ] || { echo "FAIL $fx: optimize"; fail=1; continue; }
  ops=$("$M" inspect "$W/$fx/optimized.onnx" --json)
  n=$(echo "$ops" | grep -oE '"(Store|Load|FissionBuffer|FissionSlice|FissionAssemble|FissionAccumulate|PetPatch)":[0-9]+' | awk -F: '{s+=$2} END {print s+0}')
  if ! "$M" export "$W/$fx/optimized.onnx" "$W/$fx/standard.onnx" --standard >/dev/null; then
    echo "FAIL $fx: export --standard"; fail=1; continue
  fi
  left=$("$M" inspect "$W/$fx/standard.onnx" --json | grep -oE '"(Store|Load|Fission[A-Za-z]*|PetPatch)":' | head -1)
  if [ -n "$left" ]; then echo "FAIL $fx: $left left in the standard file"; fail=1; fi
  if ! "$M" verify "$model" "$W/$fx/standard.onnx" --seed 1 >/dev/null; then
    echo "FAIL $fx: the standard file's outputs differ"; fail=1; continue
  fi
  echo "ok $fx: $n magpie-domain nodes lowered, outputs agree"
  total=$(( ${total:-0} + n ))
done
if [ "${total:-0}" -eq 0 ]; then echo "FAIL: no plan had a magpie-domain node to lower"; fail=1; fi
# a training plan: its backward ops have no standard form
"$M" optimize tests/fixtures/numeric/mlp_dropout_train/model.onnx --train --mem-limit 0.9 \
  --max-states 20 --threads 1 --quiet -o "$W/train" >/dev/null 2>&1
err=$("$M" export "$W/train/optimized.onnx" "$W/train/standard.onnx" --standard 2>&1)
rc=$?
if [ $rc -eq 2 ] && echo "$err" | grep -q "without a standard ONNX form" && [ ! -e "$W/train/standard.onnx" ]; then
  echo "ok training plan refused: $err"
else
  echo "FAIL training plan: exit $rc, $err"; fail=1
fi
exit $fail
