#!/usr/bin/env bash
# demo.sh - the main job on the bundled example: installs what is missing, builds, then
# inspects, runs and schedules the bundled example (a ResNet at reduced width, exported from
# torchvision's ResNet code by tests/fixtures/gen_fixtures.py), optimizes its training graph's
# memory within 1.10x the latency and verifies the plan, writing everything to out/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
ex=tests/fixtures/numeric/resnet_small
mkdir -p out/demo
./build/magpie inspect "$ex/model.onnx" --plot out/demo/memory.svg
./build/magpie run "$ex/model.onnx" -i "$ex/input_0.npy" -o out/demo
# its training graph (sum loss, backward, one SGD step): eager order against the memory-minimizing
# order, simulated on the default device (analytic:rtx3090); out/demo/schedule.svg plots both
./build/magpie schedule "$ex/model.onnx" --train --optimizer sgd --plot out/demo/schedule.svg
# the optimizer on that training graph: the least peak within 1.10x the eager latency, then the
# plan executed against the original (exit 0 only when they agree)
./build/magpie optimize "$ex/model.onnx" --train --lat-limit 1.10 --time 10s -o out/demo/plan
./build/magpie verify "$ex/model.onnx" out/demo/plan/optimized.onnx --train
