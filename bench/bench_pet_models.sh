#!/usr/bin/env bash
# bench_pet_models.sh [BUILD] [SECS] - PET in magpie's search on five inference graphs (issue #7,
# "Must show"): ResNet-18, Inception v3, a CSRNet-style dilated-conv network, a BERT-style encoder
# and R3D-18, each optimized three ways with the `cpu` cost model:
#   pet      magpie optimize M --pet                          (mutants + substitutions)
#   mutants  magpie optimize M --pet --rules pet              (PET's mutants alone)
#   subst    magpie optimize M --rules subst --mem-limit 1000 (substitutions alone; a memory
#            limit of 1000x the eager peak bounds nothing, so this minimizes latency as --pet)
# then `magpie verify` of every plan (against the original's float64 run, no --atol; the column
# gives the worst output's error over its bound, `verify --json`'s worst_error_over_bound), and
# the original and optimized graphs timed side by side with `magpie run --repeat REPEAT` (the
# median of REPEAT warm runs), ROUNDS times alternating which goes first; the table reports the
# median over the rounds. Where onnxruntime is installed (in PYTHON)
# both graphs are timed in it too, except plans holding magpie-domain ops (PetPatch, fission
# ops), which onnxruntime cannot run.
#
# Weights. The structure fixtures are exported with export_params=False (weights are graph
# inputs, filled from --seed at run time). PET's weight pre-processing (a concatenation of two
# convolutions' weights computed once, §6.3) only applies to constant weights, so every model is
# first given its weights as initializers (uniform in +-1/sqrt(fan_in), deterministic), in a
# scratch directory; nothing large is written to the repository.
#
# ResNet-18 and the CSRNet-style network are exported by this script into bench/models/ when
# missing (torch/torchvision, export_params=False: small files); the others come from
# tests/fixtures/structure/.
#
# Noise. Each model gets a control row first: the original timed against a byte copy of itself
# the same way, which shows how far two identical graphs measure apart on this machine at that
# time. Kernels run on OMP_NUM_THREADS threads (default here 1, and OpenBLAS 1): on a shared
# machine a single-threaded kernel is disturbed by one other busy process far less than one
# that needs every core; the cpu cost model is measured with the same setting.
#
# DEVICE (cpu) is the cost model the search uses. With an analytic target
# (DEVICE=analytic:rtx3090) there is nothing to time on this machine: the table keeps the
# predicted latency and the verification, and the timing columns read "-".
#
# Environment: REPEAT (3), ROUNDS (5), MODELS (all five), KEEP=1 keeps the scratch directory,
# CONFIGS (pet mutants subst), TIMED=0 skips the timing (predictions and verification only, as
# with an analytic DEVICE),
# PROFILE_DB (the cpu profile database; default a fresh one in the scratch directory),
# PYTHON (/usr/bin/python3: needs onnx and numpy; torch only to export missing models),
# OMP_NUM_THREADS (1). Prints the Markdown table on stdout (progress on stderr);
# docs/BENCHMARKS.md records it.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SECS=${2:-30}
REPEAT=${REPEAT:-3}
ROUNDS=${ROUNDS:-5}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$OMP_NUM_THREADS}
MODELS=${MODELS:-"resnet18 inception_v3 csrnet bert r3d_18"}
CONFIGS=${CONFIGS:-"pet mutants subst"}
PY=${PYTHON:-/usr/bin/python3}
MAGPIE=$BUILD/magpie
DEVICE=${DEVICE:-cpu}
TIMED=${TIMED:-$([ "$DEVICE" = cpu ] && echo 1 || echo 0)}
[ -x "$MAGPIE" ] || { echo "bench_pet_models: no $MAGPIE (build first)" >&2; exit 2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/magpie-pet-bench-XXXXXX")
PROFILE_DB=${PROFILE_DB:-$WORK/profile.db}
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$WORK"' EXIT; else echo "scratch: $WORK" >&2; fi
log() { echo "bench_pet_models: $*" >&2; }

# ---------------------------------------------------------------- models

export_model() { # export_model resnet18|csrnet PATH
    "$PY" - "$1" "$2" <<'EOF'
import sys, torch, torch.nn as nn, torchvision
torch.manual_seed(0)

class CSRNet(nn.Module):
    # CSRNet (Li, Zhang and Chen, CVPR 2018), configuration B: the first ten convolutions of
    # VGG-16 (three max-pools) as the front-end, six 3x3 convolutions with dilation 2 as the
    # back-end, and a 1x1 convolution to the density map
    def __init__(self):
        super().__init__()
        def make(cfg, cin, dil):
            layers = []
            for v in cfg:
                if v == "M":
                    layers.append(nn.MaxPool2d(2, 2))
                else:
                    layers += [nn.Conv2d(cin, v, 3, padding=dil, dilation=dil), nn.ReLU(inplace=True)]
                    cin = v
            return nn.Sequential(*layers)
        self.frontend = make([64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512], 3, 1)
        self.backend = make([512, 512, 512, 256, 128, 64], 512, 2)
        self.output_layer = nn.Conv2d(64, 1, 1)

    def forward(self, x):
        return self.output_layer(self.backend(self.frontend(x)))

which, path = sys.argv[1], sys.argv[2]
if which == "resnet18":
    model, x = torchvision.models.resnet18(), torch.randn(1, 3, 224, 224)
else:  # a small input: the network's cost is in its 512-channel layers
    model, x = CSRNet(), torch.randn(1, 3, 128, 128)
model.eval()
torch.onnx.export(model, x, path, export_params=False, do_constant_folding=False, opset_version=13,
                  input_names=["input"], output_names=["output"])
EOF
}

source_of() {
    case "$1" in
    resnet18) echo bench/models/resnet18.onnx ;;
    csrnet) echo bench/models/csrnet.onnx ;;
    inception_v3) echo tests/fixtures/structure/inception_v3.onnx ;;
    bert) echo tests/fixtures/structure/bert_base_encoder.onnx ;;
    r3d_18) echo tests/fixtures/structure/r3d_18.onnx ;;
    *) echo "bench_pet_models: unknown model $1" >&2; exit 2 ;;
    esac
}

# bake SRC DST INPUT.npy: the weights as seeded initializers, a random data input (bake_weights.py)
bake() { "$PY" bench/bake_weights.py "$1" "$2" "$3"; }

# ---------------------------------------------------------------- measurements

# wall seconds of `magpie run MODEL INPUT` (median of REPEAT runs after one warm-up)
run_s() {
    "$MAGPIE" run "$1" -i "$2" -o "$WORK/run-out" --repeat "$REPEAT" --json |
        "$PY" -c 'import json, sys; print(json.load(sys.stdin)["wall_seconds"])'
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

HAVE_ORT=0
if "$PY" -c "import onnxruntime" 2>/dev/null; then HAVE_ORT=1; fi

# side_by_side A B INPUT: mo, mp = the medians over ROUNDS rounds of A's and B's run_s, the
# order alternating from round to round
side_by_side() {
    local to=() tp=() r
    for r in $(seq "$ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then
            to+=("$(run_s "$1" "$3")")
            tp+=("$(run_s "$2" "$3")")
        else
            tp+=("$(run_s "$2" "$3")")
            to+=("$(run_s "$1" "$3")")
        fi
    done
    mo=$(median "${to[@]}")
    mp=$(median "${tp[@]}")
}

# onnxruntime seconds of MODEL on INPUT (median of REPEAT after a warm-up), or a reason
ort_s() {
    "$PY" - "$1" "$2" "$REPEAT" <<'EOF'
import sys, time, numpy as np, onnx
path, npy, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if any(node.domain == "magpie" for node in onnx.load(path, load_external_data=False).graph.node):
    print("magpie ops")
    sys.exit(0)
import onnxruntime as ort
s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
feed = {s.get_inputs()[0].name: np.load(npy)}
s.run(None, feed)
t = []
for _ in range(n):
    t0 = time.perf_counter()
    s.run(None, feed)
    t.append(time.perf_counter() - t0)
print(float(np.median(t)))
EOF
}

# one field of a report.json: report_get FILE EXPR (EXPR in terms of r)
report_get() {
    "$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" "$1"
}

# ---------------------------------------------------------------- the run

for m in resnet18 csrnet; do
    if [ ! -f "$(source_of $m)" ]; then
        log "exporting $m to $(source_of $m)"
        export_model "$m" "$(source_of $m)"
    fi
done

echo "| model | config | rewrites applied (PET classes) | PET candidates | nodes | predicted latency | original (ms) | optimized (ms) | speedup | verify | onnxruntime original / optimized (ms) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for name in $MODELS; do
    src=$(source_of "$name")
    model="$WORK/$name.onnx"
    input="$WORK/$name-input.npy"
    log "$name: weights as initializers"
    bake "$src" "$model" "$input"
    if [ "$TIMED" = 1 ]; then
        cp "$model" "$WORK/$name-copy.onnx"
        log "$name: control, the original against a copy of itself"
        side_by_side "$model" "$WORK/$name-copy.onnx" "$input"
        awk -v n="$name" -v o="$mo" -v p="$mp" 'BEGIN {printf "| %s | control (a copy of the original) | | | | | %.1f | %.1f | %.3f | | |\n",
            n, 1000 * o, 1000 * p, o / p}'
    fi
    for cfg in $CONFIGS; do
        case "$cfg" in
        pet) flags="--pet" ;;
        mutants) flags="--pet --rules pet" ;;
        subst) flags="--rules subst --mem-limit 1000" ;;
        esac
        out="$WORK/$name-$cfg"
        log "$name: optimize $flags --device $DEVICE --time $SECS"
        rc=0
        # shellcheck disable=SC2086 # flags are words
        "$MAGPIE" optimize "$model" $flags --device "$DEVICE" --time "$SECS" \
            --profile-db "$PROFILE_DB" -o "$out" --json --quiet >"$out.json" || rc=$?
        if [ "$rc" != 0 ]; then
            echo "| $name | $cfg | optimize failed (exit $rc) | | | | | | | | |"
            continue
        fi
        rep="$out/report.json"
        applied=$(report_get "$rep" '", ".join("%s %d" % (k, v) for k, v in r["rules"].items() if v) or "none"')
        classes=$(report_get "$rep" '", ".join(sorted(set(a["class"] for a in (r["pet"] or {}).get("applied", [])))) or "-"')
        cands=$(report_get "$rep" '"%d of %d mutants (%.0f s)" % (r["pet"]["candidates"], r["pet"]["mutants"], r["pet"]["seconds"]["total"]) if r["pet"] else "-"')
        pred=$(report_get "$rep" '"%.3f" % r["latency_ratio"]')
        nodes=$(report_get "$rep" 'r["nodes"]')
        # verify: the plan against the original's float64 run (rtol 1e-4, k 10, no --atol);
        # the column gives the worst output's error as a fraction of its bound
        vrc=0
        "$MAGPIE" verify "$model" "$out/optimized.onnx" --json >"$out.verify.json" 2>"$out.verify.err" || vrc=$?
        worst=$(report_get "$out.verify.json" '"%.2g" % r["worst_error_over_bound"]' 2>/dev/null || echo "?")
        case "$vrc" in
        0) ver="match ($worst)" ;;
        3) ver="MISMATCH ($worst)" ;;
        *) ver="verify failed (exit $vrc)" ;;
        esac
        if [ "$TIMED" = 0 ]; then
            echo "| $name | $cfg | $applied ($classes) | $cands | $nodes | $pred | - | - | - | $ver | - |"
            continue
        fi
        log "$name: timing $ROUNDS x (original, optimized), --repeat $REPEAT"
        side_by_side "$model" "$out/optimized.onnx" "$input"
        ort="not installed"
        if [ "$HAVE_ORT" = 1 ]; then
            oo=$(ort_s "$model" "$input")
            op=$(ort_s "$out/optimized.onnx" "$input")
            ort=$(awk -v a="$oo" -v b="$op" 'function f(x) {return x ~ /^[0-9.e-]+$/ ? sprintf("%.1f", 1000 * x) : x}
                  BEGIN {print f(a) " / " f(b)}')
        fi
        awk -v n="$name" -v c="$cfg" -v ap="$applied ($classes)" -v ca="$cands" -v nd="$nodes" \
            -v pr="$pred" -v o="$mo" -v p="$mp" -v v="$ver" -v ort="$ort" \
            'BEGIN {printf "| %s | %s | %s | %s | %s | %s | %.1f | %.1f | %.3f | %s | %s |\n",
                    n, c, ap, ca, nd, pr, 1000 * o, 1000 * p, o / p, v, ort}'
    done
done
