#!/usr/bin/env bash
# bench_optimize_corpus.sh - the memory optimizer on tests/fixtures/corpus/ (gen_corpus.py: PyTorch's
# own modules exported for training), the table of issue 17: for each model, `magpie optimize
# --train --optimizer sgd` on analytic:rtx3090 with all default rule families under
#   --lat-limit 1.10 with the model's own loss (manifest.json "loss": ce or mse),
#   --lat-limit 1.10 with --loss sum,
#   --mem-limit 0.4 --refine with the model's own loss.
# Prints a Markdown table (docs/BENCHMARKS.md): ratios of the written plan against the eager order.
# Models run one after another, each search on THREADS threads.
#
# usage: bench/bench_optimize_corpus.sh [BUILD_DIR] [SECONDS] [THREADS] [MODEL...]
#   defaults: build, 60, 2, every model of the corpus. Output folders go to $OUT_DIR (default
#   /tmp/magpie-bench-corpus). MODES (default "lat sum refine") picks the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SECS=${2:-60}
THREADS=${3:-2}
shift $(($# < 3 ? $# : 3))
OUT_DIR=${OUT_DIR:-/tmp/magpie-bench-corpus}
mkdir -p "$OUT_DIR"
C=tests/fixtures/corpus
MODELS=(te_bert_batch_first te_bert_seq_first vit_b_16 swin_t resnet50 convnext_tiny
    efficientnet_b0 gpt_decoder unet_bn_train)
MODES=${MODES:-lat sum refine}
want() { local m=$1; shift; [ $# -eq 0 ] && return 0; for w in "$@"; do [ "$w" = "$m" ] && return 0; done; return 1; }
loss_of() { python3 -c "import json,sys; print({m['file']: m['loss'] for m in json.load(open(sys.argv[1]))['models']}[sys.argv[2]])" "$C/manifest.json" "$1.onnx"; }
num() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r[sys.argv[2]])" "$@"; }
ratio() { python3 -c "import sys; print(f'{float(sys.argv[1])/float(sys.argv[2]):.3f}')" "$@"; }
echo "| model | loss | eager peak | eager latency | lat-limit 1.10, own loss: peak | latency | lat-limit 1.10, sum: peak | latency | mem-limit 0.4 --refine: peak | latency | states (own, sum, refine) |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for name in "${MODELS[@]}"; do
    want "$name" "$@" || continue
    file=$C/$name.onnx
    own=$(loss_of "$name")
    row=()
    base="? | ?"
    for label in lat sum refine; do
        case $label in
        lat) mode="--lat-limit 1.10" loss=$own ;;
        sum) mode="--lat-limit 1.10" loss=sum ;;
        refine) mode="--mem-limit 0.4 --refine" loss=$own ;;
        esac
        if [[ " $MODES " != *" $label "* ]]; then row+=("-" "-" "-"); continue; fi
        d="$OUT_DIR/$name-$label"
        rc=0
        start=$(date +%s)
        # shellcheck disable=SC2086
        "$BUILD/magpie" optimize "$file" --train --loss "$loss" --optimizer sgd $mode \
            --device analytic:rtx3090 --time "${SECS}s" --threads "$THREADS" --seed 1 --quiet \
            -o "$d" --json >"$d.json" 2>"$d.err" || rc=$?
        echo "$name $label: rc $rc, $(($(date +%s) - start)) s wall, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        if [ ! -s "$d/report.json" ]; then row+=("error $rc" "" ""); continue; fi
        r="$d/report.json"
        bp=$(num "$r" baseline_peak_bytes); bl=$(num "$r" baseline_latency_seconds)
        p=$(num "$r" best_peak_bytes); l=$(num "$r" best_latency_seconds)
        met=$([ $rc -eq 0 ] && echo "" || echo " (not met)")
        row+=("$(ratio "$p" "$bp")$met" "$(ratio "$l" "$bl")" "$(num "$r" states_explored)")
        base="$(python3 -c "print(f'{$bp/2**30:.2f} GiB | {$bl*1e3:.1f} ms')")"
    done
    echo "| $name | $own | $base | ${row[0]} | ${row[1]} | ${row[3]} | ${row[4]} | ${row[6]} | ${row[7]} | ${row[2]}, ${row[5]}, ${row[8]} |"
done
