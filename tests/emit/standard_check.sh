#!/usr/bin/env bash
# standard_check.sh MAGPIE WORKDIR FORCE_PLAN - `magpie export --standard`: inference plans with swaps
# (Store/Load) and fission ops come out in the default ONNX domain only and compute what the
# original computes (magpie verify); a training plan is refused with exit 2 naming its ops, and
# no file is written.
set -uo pipefail
M=$1 W=$2 FORCE=${3:-}
mkdir -p "$W"
fail=0
# Plans with magpie-domain nodes, each family forced (force_plan --inference) rather than left to
# what a search happens to find (since views own no bytes, a small model's search may need no
# swap or fission at all): FAMILY:FIXTURE, every one must lower at least one node.
lower_one() { # DIR MODEL LABEL: export DIR/optimized.onnx --standard, check it; prints the count
  local dir=$1 model=$2 label=$3 n left
  n=$("$M" inspect "$dir/optimized.onnx" --json | grep -oE '"(Store|Load|Fission[A-Za-z]*|PetPatch)":[0-9]+' | awk -F: '{s+=$2} END {print s+0}')
  if ! "$M" export "$dir/optimized.onnx" "$dir/standard.onnx" --standard >/dev/null; then
    echo "FAIL $label: export --standard"; return 1
  fi
  left=$("$M" inspect "$dir/standard.onnx" --json | grep -oE '"(Store|Load|Fission[A-Za-z]*|PetPatch)":' | head -1)
  if [ -n "$left" ]; then echo "FAIL $label: $left left in the standard file"; return 1; fi
  if ! "$M" verify "$model" "$dir/standard.onnx" --seed 1 >/dev/null; then
    echo "FAIL $label: the standard file's outputs differ"; return 1
  fi
  echo "ok $label: $n magpie-domain nodes lowered, outputs agree"
  LOWERED=$n
}
if [ -z "$FORCE" ]; then echo "FAIL: no force_plan given"; fail=1; fi
for plan in fission:gpt_small_train swap:gpt_small_train swap:vit_small fission:vit_small; do
  [ -n "$FORCE" ] || break
  fam=${plan%%:*} fx=${plan#*:}
  model=tests/fixtures/numeric/$fx/model.onnx
  if ! "$FORCE" "$model" "$W/${fam}_$fx" "$fam" --inference >/dev/null; then
    echo "FAIL $fx: force_plan $fam --inference"; fail=1; continue
  fi
  LOWERED=0
  lower_one "$W/${fam}_$fx" "$model" "$fx forward with a forced $fam" || { fail=1; continue; }
  [ "$LOWERED" -gt 0 ] || { echo "FAIL $fx: the forced $fam plan has no magpie-domain node"; fail=1; }
done
# plans a search finds: whatever they hold (possibly nothing) must still come out standard
for fx in resnet_small unet_upsample; do
  model=tests/fixtures/numeric/$fx/model.onnx
  "$M" optimize "$model" --mem-limit 0.4 --max-states 300 --threads 1 --quiet -o "$W/$fx" \
    >/dev/null 2>&1
  [ $? -le 3 ] || { echo "FAIL $fx: optimize"; fail=1; continue; }
  lower_one "$W/$fx" "$model" "$fx (searched plan)" || fail=1
done
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
