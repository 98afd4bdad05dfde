#!/usr/bin/env bash
# bench_optimize_models.sh - the memory optimizer on training graphs of full-size models, as
# MAGIS evaluates it: for each model, `magpie optimize --train` under
#   --lat-limit 1.10 (minimise the peak; report peak and latency as ratios of the eager order)
#   --mem-limit 0.4  (minimise latency with the peak at most 0.4 of the eager order's)
#   --mem-limit 0.4 --refine  (the same, half the time Algorithm 3, then latency-bounded
#                    searches: explorer.h, xs_search_refined)
# each with all rule families and again without swapping (--rules without swap), on the
# analytic rtx3090 model. Prints a Markdown table (docs/BENCHMARKS.md). `magpie verify` is not
# run here: executing full-size training graphs on the CPU takes long; the tests verify fission,
# remat and swap plans on the numeric fixtures.
#
# usage: bench/bench_optimize_models.sh [BUILD_DIR] [SECONDS] [THREADS] [MODEL...]
#   defaults: build, 60, 2, every model below (names: bert vit_b_16 unet unetpp gpt2 resnet50). Output files go to $OUT_DIR (default
#   /tmp/magpie-bench-models), one folder per run. MODES (default "lat mem refine") picks the
#   runs; the columns of the others read "-".
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SECS=${2:-60}
THREADS=${3:-2}
shift $(($# < 3 ? $# : 3))
OUT_DIR=${OUT_DIR:-/tmp/magpie-bench-models}
mkdir -p "$OUT_DIR"
S=tests/fixtures/structure
# name | model file | extra options (shapes: realistic training batches)
MODELS=(
    "bert|$S/bert_base_s512_b8.onnx|"
    "vit_b_16|$S/vit_b_16_b32.onnx|"
    "unet|$S/unet.onnx|--shape input=8,3,256,256"
    "unetpp|$S/unetpp.onnx|--shape input=8,3,256,256"
    "gpt2|$S/gpt2_small_s512_b8.onnx|"
    "resnet50|$S/resnet50.onnx|--shape input=64,3,224,224"
)
MODES=${MODES:-lat mem refine}
want() { local m=$1; shift; [ $# -eq 0 ] && return 0; for w in "$@"; do [ "$w" = "$m" ] && return 0; done; return 1; }
ALL_RULES=fission,remat,swap,reorder,subst
NOSWAP_RULES=fission,remat,reorder,subst
num() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r[sys.argv[2]])" "$@"; }
echo "| model | eager peak | eager latency | rules | lat-limit 1.10: peak | latency | mem-limit 0.4: peak | latency | --refine: peak | latency | states (lat, mem, refine) |"
echo "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for spec in "${MODELS[@]}"; do
    IFS='|' read -r name file extra <<<"$spec"
    want "$name" "$@" || continue
    for rules in "$ALL_RULES" "$NOSWAP_RULES"; do
        tag=$([ "$rules" = "$ALL_RULES" ] && echo all || echo no-swap)
        row=()
        base="? | ?"
        for label in lat mem refine; do
            case $label in
            lat) mode="--lat-limit 1.10" ;;
            mem) mode="--mem-limit 0.4" ;;
            refine) mode="--mem-limit 0.4 --refine" ;;
            esac
            if [[ " $MODES " != *" $label "* ]]; then row+=("-" "-" "-"); continue; fi
            d="$OUT_DIR/$name-$tag-${mode#--}"
            d=${d// /_}
            rc=0
            # shellcheck disable=SC2086
            "$BUILD/magpie" optimize "$file" $extra --train $mode --rules "$rules" \
                --time "${SECS}s" --threads "$THREADS" --seed 1 --quiet -o "$d" --json \
                >"$d.json" 2>"$d.err" || rc=$?
            if [ ! -s "$d/report.json" ]; then row+=("error $rc" "" ""); continue; fi
            r="$d/report.json"
            bp=$(num "$r" baseline_peak_bytes); bl=$(num "$r" baseline_latency_seconds)
            p=$(num "$r" best_peak_bytes); l=$(num "$r" best_latency_seconds)
            st=$(num "$r" states_explored)
            met=$([ $rc -eq 0 ] && echo "" || echo " (not met)")
            row+=("$(python3 -c "print(f'{$p/$bp:.3f}$met')")" "$(python3 -c "print(f'{$l/$bl:.3f}')")" "$st")
            base="$(python3 -c "print(f'{$bp/2**30:.2f} GiB | {$bl*1e3:.1f} ms')")"
        done
        echo "| $name | $base | $tag | ${row[0]} | ${row[1]} | ${row[3]} | ${row[4]} | ${row[6]} | ${row[7]} | ${row[2]}, ${row[5]}, ${row[8]} |"
    done
done
