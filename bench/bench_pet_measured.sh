#!/usr/bin/env bash
# bench_pet_measured.sh [BUILD] [SECS] - PET plans, predicted and measured (issue #18, "Must
# show"), and the same plans in onnxruntime (issue #19): five inference models of
# PyTorch/torchvision families at small resolution with seeded random weights
# (bench/gen_pet_models.py exports them into a scratch directory: ResNet-18 at 64x64, Inception v3
# at 96x96, a quarter-width CSRNet at 128x128, a 2-layer pre-norm transformer encoder over 64
# tokens, ConvNeXt-T at 64x64), each optimized two ways with the cpu cost model:
#   pet      magpie optimize M --pet --device cpu             (mutants + substitutions)
#   mutants  magpie optimize M --pet --rules pet --device cpu (PET's mutants alone)
# with optimize's own measuring (--measure 3, its default: the plan written is the best measured
# one, or the original order when every plan measured ran slower; optimize runs pinned as the
# timing below, so that its measuring and the bench's see the same core). Where optimize wrote
# the original, the row says so ("no plan written") with what optimize measured of the best
# plan it refused; the file is not timed (the original against itself is one more control).
# Then every plan is verified
# (`magpie verify`, which also writes the original's float64 outputs as the reference) and timed
# side by side with its original: `magpie run --repeat REPEAT` (the median of REPEAT warm runs;
# REPEAT is sized per model so that a sample lasts about SAMPLE_S, at least 5 runs), ROUNDS
# rounds alternating which goes first, medians over the rounds (the ratios: medians of the
# per-round ratios), on one kernel thread (OMP_NUM_THREADS=1, OpenBLAS 1) pinned to one CPU
# (taskset -c PIN: no migration between cores mid-run). Two clocks are reported: the wall time
# (`wall_seconds`) and the running thread's CPU time (`cpu_seconds`, which waiting for a core on
# a busy machine does not inflate; the cpu cost model measures ops with it).
#
# onnxruntime (bench/ort_pet_plans.py, with PYTHON_ORT): each plan and its original loaded by
# onnxruntime, the plan's outputs judged against the float64 reference by verify's criterion with
# onnxruntime's own float32 run of the original as the yardstick, and both timed the same way
# (one intra-op thread, alternating rounds, medians). optimize writes a plan without host copies
# or fission in the default ONNX domain (PET's patches as Pad and Where), so every plan here loads.
#
# Noise. Each model gets a control row first: the original against a byte copy of itself, timed
# the same way in both runtimes; its ratio's distance from 1 is the spread two identical graphs
# show at that time. The load column is the 1-minute load average when the row's timing began.
#
# Weights: the models are exported with export_params=False (structure only); every weight is
# given uniform values in +-1/sqrt(fan_in) (deterministic, from its name) as an initializer in
# the scratch directory, since PET's weight pre-processing needs constant weights.
#
# Environment: ROUNDS (9), SAMPLE_S (0.3), PIN (1; empty: no pinning), MODELS (all five),
# CONFIGS (pet mutants), KEEP=1 keeps the scratch directory, PYTHON (/usr/bin/python3: Debian's
# torch 1.13, torchvision, onnx, numpy), PYTHON_ORT (/work/venv-pypi/bin/python: numpy and
# onnxruntime; empty or missing: no onnxruntime columns). Prints the Markdown table on stdout
# (progress on stderr); docs/BENCHMARKS.md records it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SECS=${2:-20}
ROUNDS=${ROUNDS:-9}
SAMPLE_S=${SAMPLE_S:-0.3}
PIN=${PIN-1}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MODELS=${MODELS:-"resnet18 inception_v3 csrnet encoder convnext_t"}
CONFIGS=${CONFIGS:-"pet mutants"}
PY=${PYTHON:-/usr/bin/python3}
PY_ORT=${PYTHON_ORT-/work/venv-pypi/bin/python}
if [ -n "$PY_ORT" ] && ! "$PY_ORT" -c 'import onnxruntime, numpy' 2>/dev/null; then PY_ORT=; fi
MAGPIE=$BUILD/magpie
PINNED=()
if [ -n "$PIN" ] && command -v taskset >/dev/null; then PINNED=(taskset -c "$PIN"); fi
[ -x "$MAGPIE" ] || { echo "bench_pet_measured: no $MAGPIE (build first)" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/magpie-pet-measured-XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$WORK"' EXIT; else echo "scratch: $WORK" >&2; fi
log() { echo "bench_pet_measured: $*" >&2; }

# bake SRC DST INPUT.npy: the weights as seeded initializers, a random data input (bake_weights.py)
bake() { "$PY" bench/bake_weights.py "$1" "$2" "$3"; }

load1() { cut -d' ' -f1 /proc/loadavg; }

# "WALL CPU" seconds of `magpie run MODEL INPUT --repeat REPEAT` (medians of the warm runs)
run_s() {
    "${PINNED[@]}" "$MAGPIE" run "$1" -i "$2" -o "$WORK/run-out" --repeat "$REPEAT" --json |
        "$PY" -c 'import json, sys; r = json.load(sys.stdin); print(r["wall_seconds"], r["cpu_seconds"])'
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# side_by_side A B INPUT: ow op (wall) and oc pc (cpu), the medians over ROUNDS rounds of A's and
# B's run_s, the order alternating from round to round; rw rc, the medians over the rounds of
# B's time over A's in the same round (a busier or quieter moment weighs on both of a pair)
side_by_side() {
    local aw=() ac=() bw=() bc=() qw=() qc=() r x y
    for r in $(seq "$ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then
            read -r -a x <<<"$(run_s "$1" "$3")"
            read -r -a y <<<"$(run_s "$2" "$3")"
        else
            read -r -a y <<<"$(run_s "$2" "$3")"
            read -r -a x <<<"$(run_s "$1" "$3")"
        fi
        aw+=("${x[0]}"); ac+=("${x[1]}"); bw+=("${y[0]}"); bc+=("${y[1]}")
        qw+=("$(awk -v a="${x[0]}" -v b="${y[0]}" 'BEGIN {print b / a}')")
        qc+=("$(awk -v a="${x[1]}" -v b="${y[1]}" 'BEGIN {print b / a}')")
    done
    ow=$(median "${aw[@]}")
    op=$(median "${bw[@]}")
    oc=$(median "${ac[@]}")
    pc=$(median "${bc[@]}")
    rw=$(median "${qw[@]}")
    rc=$(median "${qc[@]}")
}

# ort A B INPUT [REF]: onnxruntime's figures, "ORIG_MS PLAN_MS RATIO AGREES" (cpu clock), or
# "- - - -" without onnxruntime, "- - - not loaded" when it cannot load a file
ort() {
    if [ -z "$PY_ORT" ]; then echo "- - - -"; return; fi
    ROUNDS=$ROUNDS SAMPLE_S=$SAMPLE_S "${PINNED[@]}" "$PY_ORT" bench/ort_pet_plans.py "$@" 2>"$WORK/ort.err" |
        "$PY" -c 'import json, sys
r = json.load(sys.stdin)
if not r["loaded"]:
    print("- - - not-loaded"); sys.exit()
a = {True: "agrees", False: "DIFFERS"}.get(r.get("agrees"), "-")
print("%.2f %.2f %.3f %s" % (1000 * r["original_cpu_s"], 1000 * r["plan_cpu_s"], r["ratio_cpu"], a))' ||
        echo "- - - failed"
}

report_get() { "$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" "$1"; }

log "load at the start: $(uptime)"
log "exporting $MODELS into $WORK"
# shellcheck disable=SC2086 # the names are words
"$PY" bench/gen_pet_models.py "$WORK" $MODELS 2>"$WORK/export.log" || {
    cat "$WORK/export.log" >&2
    exit 2
}

echo "| model | config | rewrites in the plan written (PET classes) | plan written (optimize's measuring) | predicted ratio: search / as written | original wall / cpu (ms) | plan wall / cpu (ms) | measured ratio wall / cpu | predicted / measured (cpu): search / as written | verify | onnxruntime original / plan cpu (ms) | onnxruntime ratio | onnxruntime vs float64 | load |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for name in $MODELS; do
    model="$WORK/$name-w.onnx"
    input="$WORK/$name-input.npy"
    log "$name: weights as initializers"
    bake "$WORK/$name.onnx" "$model" "$input"
    cp "$model" "$WORK/$name-copy.onnx"
    # REPEAT: runs per sample, so that one lasts about SAMPLE_S (at least 5)
    one=$("$MAGPIE" run "$model" -i "$input" -o "$WORK/run-out" --repeat 3 --json |
        "$PY" -c 'import json, sys; print(json.load(sys.stdin)["wall_seconds"])')
    REPEAT=$(awk -v s="$SAMPLE_S" -v t="$one" 'BEGIN {n = int(s / t + 0.999); print n < 5 ? 5 : n}')
    log "$name: control, the original against a copy of itself (--repeat $REPEAT)"
    ld=$(load1)
    side_by_side "$model" "$WORK/$name-copy.onnx" "$input"
    read -r oo op_ orr _ <<<"$(ort "$model" "$WORK/$name-copy.onnx" "$input")"
    awk -v n="$name" -v ow="$ow" -v op="$op" -v oc="$oc" -v pc="$pc" -v rw="$rw" -v rc="$rc" \
        -v oo="$oo" -v opp="$op_" -v orr="$orr" -v ld="$ld" 'BEGIN {
        printf "| %s | control (a copy) | | | 1 / 1 | %.1f / %.1f | %.1f / %.1f | %.3f / %.3f | | | %s / %s | %s | | %s |\n",
            n, 1000 * ow, 1000 * oc, 1000 * op, 1000 * pc, rw, rc, oo, opp, orr, ld}'
    for cfg in $CONFIGS; do
        case "$cfg" in
        pet) flags="--pet" ;;
        mutants) flags="--pet --rules pet" ;;
        *) log "unknown config $cfg"; exit 2 ;;
        esac
        out="$WORK/$name-$cfg"
        log "$name: optimize $flags --device cpu --time $SECS"
        rc=0
        # shellcheck disable=SC2086 # flags are words
        "${PINNED[@]}" "$MAGPIE" optimize "$model" $flags --device cpu --time "$SECS" \
            --profile-db "$WORK/profile.db" -o "$out" --json --quiet >"$out.json" 2>"$out.err" || rc=$?
        if [ "$rc" != 0 ]; then
            echo "| $name | $cfg | optimize failed (exit $rc) | | | | | | | | | | | |"
            continue
        fi
        rep="$out/report.json"
        applied=$(report_get "$rep" '", ".join("%s %d" % (k, v) for k, v in r["subst_rules"].items() if v) + (", " if r["rules"]["subst"] and r["rules"]["pet"] else "") + ("pet %d" % r["rules"]["pet"] if r["rules"]["pet"] else "") or "none"')
        classes=$(report_get "$rep" '", ".join(sorted(set(a["class"] for a in (r["pet"] or {}).get("applied", [])))) or "-"')
        written=$(report_get "$rep" '(lambda m, n: ("the original (%d plans measured slower)" % n) if m["fell_back_to_original"] else "plan %d of %d measured, %.3f" % (m["written"] + 1, n, m["plans"][m["written"]]["measured_ratio"]))(r["measurement"], len([p for p in r["measurement"]["plans"] if p["timed"]]))')
        pred=$(report_get "$rep" '"%.3f" % r["latency_ratio"]')
        # the search's own prediction of the plan written (the original: 1)
        spred=$(report_get "$rep" '(lambda m: "1" if m["fell_back_to_original"] else "%.3f" % m["plans"][m["written"]]["predicted_ratio"])(r["measurement"])')
        if "$MAGPIE" verify "$model" "$out/optimized.onnx" -i "$input" -o "$out.ref" >"$out.verify" 2>&1; then
            ver=match
        else
            ver="MISMATCH"
        fi
        if [ "$(report_get "$rep" 'r["measurement"]["fell_back_to_original"]')" = True ]; then
            # no plan: the file is the original, and timing it against itself is one more
            # control; what optimize measured of the plans it refused is the evidence
            best=$(report_get "$rep" '(lambda p: "the best measured: predicted %.3f, measured %.3f" % (p["predicted_ratio"], p["measured_ratio"]))(min((p for p in r["measurement"]["plans"] if p["timed"]), key=lambda p: p["measured_ratio"]))')
            echo "| $name | $cfg | none | no plan written: the original ($best) | 1 / $pred | | | | | $ver | | | | $(load1) |"
            continue
        fi
        log "$name: timing $ROUNDS x (original, plan), --repeat $REPEAT"
        ld=$(load1)
        side_by_side "$model" "$out/optimized.onnx" "$input"
        read -r oo op_ orr oag <<<"$(ort "$model" "$out/optimized.onnx" "$input" "$out.ref")"
        awk -v n="$name" -v c="$cfg" -v ap="$applied ($classes)" -v wr="$written" -v pr="$pred" -v sp="$spred" \
            -v ow="$ow" -v op="$op" -v oc="$oc" -v pc="$pc" -v rw="$rw" -v rc="$rc" -v v="$ver" \
            -v oo="$oo" -v opp="$op_" -v orr="$orr" -v oag="$oag" -v ld="$ld" 'BEGIN {
            printf "| %s | %s | %s | %s | %s / %s | %.1f / %.1f | %.1f / %.1f | %.3f / %.3f | %.3f / %.3f | %s | %s / %s | %s | %s | %s |\n",
                n, c, ap, wr, sp, pr, 1000 * ow, 1000 * oc, 1000 * op, 1000 * pc, rw, rc, sp / rc, pr / rc, v, oo, opp, orr, oag, ld}'
    done
done
log "load at the end: $(uptime)"
