#!/usr/bin/env bash
# mpi_scaling.sh - distinct states per second of one search at -np 2 --threads 1 against
# -np 1 --threads 1, with the control ratio (two independent one-rank searches at once, which
# shows what two processes get from this machine at all), on the training graphs of BERT-base
# and U-Net (analytic device), and each run's best plan. docs/BENCHMARKS.md has the figures.
#   bench/mpi_scaling.sh [BUILD_DIR] [SECONDS] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build}/magpie
secs=${2:-10}
reps=${3:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=(mpirun --oversubscribe --allow-run-as-root)
common=(--train --mem-limit 0.5 --threads 1 --time "$secs" --quiet --json)

# distinct states, search seconds, best peak, best latency of a report
figures() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = r.get("mpi")
if m:
    distinct = sum(x["distinct_states"] for x in m["per_rank"])
    secs = max(x["search_seconds"] for x in m["per_rank"])
else:
    distinct = r["states_explored"] - r["states_duplicate"] + 1
    secs = r["wall_seconds"]["search"]
print(distinct, secs, r["best_peak_bytes"], r["best_latency_seconds"])
PY
}
rate() { awk '{printf "%.1f", $1 / $2}' <<<"$1"; }

for model in bert_base_encoder unet; do
  m=tests/fixtures/structure/$model.onnx
  for rep in $(seq 1 "$reps"); do
    "$bin" optimize "$m" "${common[@]}" -o "$work/a" >"$work/one.json" 2>/dev/null || true
    ( "$bin" optimize "$m" "${common[@]}" -o "$work/b" >"$work/c1.json" 2>/dev/null || true ) &
    ( "$bin" optimize "$m" "${common[@]}" -o "$work/c" >"$work/c2.json" 2>/dev/null || true ) &
    wait
    "${mpi[@]}" -np 2 "$bin" optimize "$m" "${common[@]}" -o "$work/d" >"$work/two.json" \
      2>/dev/null || true
    one=$(figures "$work/one.json") c1=$(figures "$work/c1.json") c2=$(figures "$work/c2.json")
    two=$(figures "$work/two.json")
    r1=$(rate "$one") rc1=$(rate "$c1") rc2=$(rate "$c2") r2=$(rate "$two")
    awk -v m="$model" -v rep="$rep" -v r1="$r1" -v rc="$(awk -v a="$rc1" -v b="$rc2" 'BEGIN{print a+b}')" \
        -v r2="$r2" -v one="$one" -v two="$two" 'BEGIN {
      split(one, o, " "); split(two, t, " ");
      printf "%s rep %d: np1 %s/s, two np1 at once %s/s (control %.2f), np2 %s/s (ratio %.2f, %.2f of control); best peak np1 %d np2 %d, latency np1 %.6f np2 %.6f\n",
        m, rep, r1, rc, rc / r1, r2, r2 / r1, (r2 / r1) / (rc / r1), o[3], t[3], o[4], t[4] }'
  done
done
