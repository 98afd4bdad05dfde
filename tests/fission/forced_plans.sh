#!/usr/bin/env bash
# forced_plans.sh MAGPIE WORKDIR FORCE_FISSION - training plans (--loss mse) with fissions that a
# search on these small models does not choose, forced by force_fission:
#  - strided: the fission cuts the batch where it is the inner factor of a merged dim
#    (nn.MultiheadAttention's [S*B, E] around its output projection, in both batch_first
#    settings, and torchvision's ViT); the plan holds strided views;
#  - bn: the whole training graph split along the batch across training-mode batch norms, in
#    two phases (a CNN and a U-Net); the plan has no BatchNormalization left and slices;
# each without an optimizer (the outputs: the loss and every gradient) and
# with SGD (the loss and every updated parameter): the plan passes magpie verify on every output
# against float64 (the original computed with its fused BatchNormalization), and its executed
# peak equals the predicted one.
set -uo pipefail
M=$1 W=$2 FORCE=$3
mkdir -p "$W"
fail=0
# FIXTURE:BATCH:BATCH_DIM:KIND (BATCH 0: the model's own static batch)
for c in transformer_encoder_op17:4:0:strided transformer_encoder_seqfirst_op17:4:1:strided \
         vit_small_train:0:0:strided cnn_bn_train:0:0:bn unet_transpose_train:0:0:bn; do
 for opt in none sgd; do
  IFS=: read -r fx b bd kind <<<"$c"
  W1=$W/$opt
  mkdir -p "$W1"
  model=tests/fixtures/numeric/$fx/model.onnx
  shape=()
  [ "$b" -gt 0 ] && shape=(--shape "batch=$b")
  if ! out=$("$FORCE" "$model" "$W1/$fx" "$b" "$bd" $kind $opt 2>/dev/null); then
    echo "FAIL $fx ($opt): force_fission"; fail=1; continue
  fi
  peak=$(echo "$out" | awk '/^peak_bytes/ {print $2}')
  views=$(echo "$out" | awk '/^strided_views/ {print $2}')
  slices=$(echo "$out" | awk '/^fission_slices/ {print $2}')
  bns=$(echo "$out" | awk '/^batch_norms/ {print $2}')
  json=$("$M" verify "$model" "$W1/$fx/optimized.onnx" --train --loss mse --optimizer $opt \
    "${shape[@]}" --json)
  rc=$?
  measured=$(echo "$json" | grep -oE '"optimized_peak_bytes":[0-9]+' | cut -d: -f2)
  n_out=$(echo "$json" | grep -oE '"agrees":(true|false)' | wc -l)
  n_bad=$(echo "$json" | grep -oE '"agrees":false' | wc -l)
  if [ $rc -ne 0 ] || [ "$n_bad" -ne 0 ] || [ "$n_out" -lt 3 ]; then
    echo "FAIL $fx ($opt): verify exit $rc, $n_bad of $n_out outputs disagree"; fail=1; continue
  fi
  if [ $kind = strided ] && [ "${views:-0}" -lt 1 ]; then
    echo "FAIL $fx ($opt): the plan has no strided view"; fail=1; continue
  fi
  if [ $kind = bn ] && { [ "${bns:-1}" -ne 0 ] || [ "${slices:-0}" -lt 2 ]; }; then
    echo "FAIL $fx ($opt): $bns batch norms left, $slices slices"; fail=1; continue
  fi
  if [ "$measured" != "$peak" ]; then
    echo "FAIL $fx ($opt): executed peak $measured bytes, predicted $peak"; fail=1; continue
  fi
  echo "ok $fx ($opt, $kind): $views strided views, $slices slices, $n_out outputs agree with float64, peak $peak bytes executed and predicted"
 done
done
exit $fail
