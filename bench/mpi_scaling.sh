#!/usr/bin/env bash
# mpi_scaling.sh - distinct states per second of one search at -np 2 --threads 1 against
# -np 1 --threads 1, with the control ratio (two independent one-rank searches at once, which
# shows what two processes get from this machine at all), on the training graphs of BERT-base
# and U-Net (analytic device), and each run's best plan. Also distinct states per CPU-second of
# the whole job (user + sys of mpirun and its ranks, start included), which the machine's load
# does not bend as it bends wall time. docs/BENCHMARKS.md has the figures.
#   bench/mpi_scaling.sh [BUILD_DIR] [SECONDS] [REPS]
# Every search runs under mpirun, the one-rank ones too (-np 1 is an ordinary one-process
# search): mpirun starts each rank in a session of its own, and with the kernel's autogroup
# scheduling (sched_autogroup_enabled = 1) a session's threads share one session's CPU share,
# so a plain `magpie` started from this shell would compete in a different class than a rank.
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

# runs "$@" under /usr/bin/time: its CPU seconds (user + sys, ranks and mpirun) go to $1.cpu
timed() {
  local out=$1
  shift
  /usr/bin/time -f "%U %S" -o "$out.cpu" "$@" >"$out" 2>/dev/null || true
}
cpu() { tail -n 1 "$1.cpu" | awk '{print $1 + $2}'; }  # after any exit-status line

printf "%-18s %3s %9s %9s %7s %9s %6s %6s %9s %9s %12s %12s\n" model rep np1/s 2xnp1/s control \
  np2/s ratio ofctl np1/cpu-s np2/cpu-s np1-best-lat np2-best-lat
for model in bert_base_encoder unet; do
  m=tests/fixtures/structure/$model.onnx
  for rep in $(seq 1 "$reps"); do
    timed "$work/one.json" "${mpi[@]}" -np 1 "$bin" optimize "$m" "${common[@]}" -o "$work/a"
    timed "$work/c1.json" "${mpi[@]}" -np 1 "$bin" optimize "$m" "${common[@]}" -o "$work/b" &
    timed "$work/c2.json" "${mpi[@]}" -np 1 "$bin" optimize "$m" "${common[@]}" -o "$work/c" &
    wait
    timed "$work/two.json" "${mpi[@]}" -np 2 "$bin" optimize "$m" "${common[@]}" -o "$work/d"
    read -r d1 s1 p1 l1 <<<"$(figures "$work/one.json")"
    read -r dc1 sc1 _ _ <<<"$(figures "$work/c1.json")"
    read -r dc2 sc2 _ _ <<<"$(figures "$work/c2.json")"
    read -r d2 s2 p2 l2 <<<"$(figures "$work/two.json")"
    awk -v m="$model" -v rep="$rep" -v d1="$d1" -v s1="$s1" -v dc1="$dc1" -v sc1="$sc1" \
      -v dc2="$dc2" -v sc2="$sc2" -v d2="$d2" -v s2="$s2" -v c1="$(cpu "$work/one.json")" \
      -v c2="$(cpu "$work/two.json")" -v p1="$p1" -v p2="$p2" -v l1="$l1" -v l2="$l2" 'BEGIN {
      r1 = d1 / s1; rc = dc1 / sc1 + dc2 / sc2; r2 = d2 / s2;
      printf "%-18s %3d %9.1f %9.1f %7.2f %9.1f %6.2f %6.2f %9.1f %9.1f %12.6f %12.6f\n",
        m, rep, r1, rc, rc / r1, r2, r2 / r1, (r2 / r1) / (rc / r1), d1 / c1, d2 / c2, l1, l2
      if (p1 != p2) printf "  best peaks differ: np1 %d, np2 %d\n", p1, p2 }'
  done
done
