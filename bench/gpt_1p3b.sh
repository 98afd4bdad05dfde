#!/usr/bin/env bash
# gpt_1p3b.sh - issue 22's 1.3-billion-parameter GPT: bench/gen_gpt_1p3b.py exports it (default
# torch.onnx.export, external data, 5.3 GB) into SCRATCH, then magpie inspect, run (batch 1, the
# SEQ tokens of input_0.npy, against PyTorch's float32 logits) and inspect --train, each under
# /usr/bin/time -v: wall time and peak RSS per step. SCRATCH is removed at the end unless KEEP=1.
#
#   bench/gpt_1p3b.sh SCRATCH [SEQ]    (PY: the python with torch 2.15, default /work/venv-pypi/bin/python)
# Needs about 11 GB of free memory for the export and for run, and 5.3 GB of disk.
set -u
scratch=${1:?usage: gpt_1p3b.sh SCRATCH [SEQ]}
seq=${2:-32}
py=${PY:-/work/venv-pypi/bin/python}
here=$(cd "$(dirname "$0")" && pwd)
magpie=${MAGPIE:-$here/../build/magpie}
mkdir -p "$scratch"

step() { # name, command...
    local name=$1
    shift
    /usr/bin/time -v "$@" >"$scratch/$name.out" 2>"$scratch/$name.err"
    local rc=$?
    local wall rss
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$scratch/$name.err")
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$scratch/$name.err")
    printf '%-14s rc %d  wall %s  peak RSS %.2f GiB\n' "$name" "$rc" "$wall" "$(echo "$rss / 1048576" | bc -l)"
    [ $rc -eq 0 ] || grep -v '^\s' "$scratch/$name.err" | grep -v '^Command' | head -3
    return $rc
}

[ -f "$scratch/m.onnx" ] || step export "$py" "$here/gen_gpt_1p3b.py" "$scratch" "$seq" || exit 1
grep -h 'parameters\|exported' "$scratch/export.out" 2>/dev/null
step inspect "$magpie" inspect "$scratch/m.onnx" --shape seq="$seq" && sed -n '1,9p' "$scratch/inspect.out"
mkdir -p "$scratch/run"
if step run "$magpie" run "$scratch/m.onnx" --shape seq="$seq" -i "$scratch/input_0.npy" -o "$scratch/run" --json; then
    "$py" - "$scratch" <<'PY'
import json, sys, numpy as np
d = sys.argv[1]
r = json.load(open(f"{d}/run.out"))
y = np.load(r["outputs"][0]["file"]).astype(np.float64)
t = np.load(f"{d}/output_0.npy").astype(np.float64)
print(f"run: logits {y.shape}, ||magpie - torch32|| / ||torch32|| = "
      f"{np.linalg.norm(y - t) / np.linalg.norm(t):.2e} (float32 against float32: no float64 "
      f"reference at this size); magpie's measured peak {r['peak_bytes'] / 2**30:.2f} GiB, "
      f"execution {r['wall_seconds']:.1f} s")
PY
fi
step inspect_train "$magpie" inspect "$scratch/m.onnx" --shape seq="$seq" --train && grep -i 'train\|param\|peak\|activ' "$scratch/inspect_train.out" | head -8
[ "${KEEP:-0}" = 1 ] || rm -rf "$scratch"
