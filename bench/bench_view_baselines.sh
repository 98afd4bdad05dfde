#!/usr/bin/env bash
# bench_view_baselines.sh - the eager training baselines (peak bytes, analytic latency) of every
# fixture in tests/fixtures/structure/, one TSV row per model, for the before/after-views table in
# docs/BENCHMARKS.md. Deterministic: the analytic device, the eager order.
#   bench/bench_view_baselines.sh [MAGPIE] > rows.tsv      (MAGPIE defaults to build/magpie)
set -euo pipefail
cd "$(dirname "$0")/.."
magpie=${1:-build/magpie}
printf 'model\tpeak_bytes\tlatency_s\n'
for f in tests/fixtures/structure/*.onnx; do
    "$magpie" schedule "$f" --train --order eager --device analytic:rtx3090 --json |
        python3 -c 'import json,sys; j=json.load(sys.stdin); print("%s\t%d\t%.9f" % (sys.argv[1], j["eager_peak_bytes"], j["eager_latency_seconds"]))' "$(basename "$f" .onnx)"
done
