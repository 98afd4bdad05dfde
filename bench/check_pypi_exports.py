"""check_pypi_exports.py - issue 22's exports through magpie as exported (no re-stamping, external
data in place): for every SCRATCH/<model>/<exporter>/m.onnx that bench/gen_pypi_exports.py wrote,
  inspect; run on input_0.npy, judged against PyTorch by rt-check.h's criterion
      ||magpie32 - torch64|| <= max(1e-4 * ||torch64||, 10 * ||torch32 - torch64||)
  (torch64: ref64_0.npy, the model in float64; torch32: output_0.npy); inspect --train;
  optimize --train --lat-limit 1.10 (analytic device, --time T) and magpie verify of its plan.
One table row per file; a failing step shows its first error line.

    python3 bench/check_pypi_exports.py SCRATCH [--magpie build/magpie] [--time 20s] [NAME...]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def sh(cmd, timeout=1800):
    t = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = 124, "", f"timed out after {timeout} s"
    return rc, out, err, time.time() - t


def first_error(err, out=""):
    for line in (err + "\n" + out).splitlines():
        if line.strip() and not line.startswith("warning"):
            return line.strip()[:150]
    return "(no message)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scratch")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--magpie", default="build/magpie")
    ap.add_argument("--time", default="20s")
    a = ap.parse_args()
    mg = os.path.abspath(a.magpie)
    names = a.names or sorted(os.listdir(a.scratch))
    rows = []
    print("| file | inspect | run: error / bound | inspect --train | optimize peak, latency "
          "(of eager) | verify |", flush=True)
    print("| --- | --- | --- | --- | --- | --- |", flush=True)
    for name in names:
        d = os.path.join(a.scratch, name)
        if not os.path.isdir(d):
            continue
        x = os.path.join(d, "input_0.npy")
        t32 = np.load(os.path.join(d, "output_0.npy")).astype(np.float64)
        t64 = np.load(os.path.join(d, "ref64_0.npy")).astype(np.float64)
        for kind in ("dynamo", "torchscript"):
            m = os.path.join(d, kind, "m.onnx")
            if not os.path.exists(m):
                continue
            cells = []
            rc, out, err, _ = sh([mg, "inspect", m])
            cells.append("ok" if rc == 0 else f"FAIL: {first_error(err, out)}")
            od = os.path.join(d, kind, "run")
            os.makedirs(od, exist_ok=True)
            rc, out, err, secs = sh([mg, "run", m, "-i", x, "-o", od, "--json"])
            if rc == 0:
                outs = json.loads(out)["outputs"]
                y = np.load(os.path.join(od, outs[0]["file"]) if "file" in outs[0]
                            else os.path.join(od, sorted(os.listdir(od))[0])).astype(np.float64)
                if y.shape != t64.shape:
                    cells.append(f"FAIL: shape {y.shape} against {t64.shape}")
                else:
                    e = np.linalg.norm(y - t64)
                    bound = max(1e-4 * np.linalg.norm(t64), 10 * np.linalg.norm(t32 - t64))
                    cells.append(f"{'ok' if e <= bound else 'FAIL'} {e:.2e} / {bound:.2e}")
            else:
                cells.append(f"FAIL: {first_error(err, out)}")
            rc, out, err, _ = sh([mg, "inspect", m, "--train"])
            cells.append("ok" if rc == 0 else f"FAIL: {first_error(err, out)}")
            pd = os.path.join(d, kind, "opt")
            rc, out, err, _ = sh([mg, "optimize", m, "--train", "--lat-limit", "1.10", "--time",
                                  a.time, "--quiet", "--json", "-o", pd])
            plan = os.path.join(pd, "optimized.onnx")
            if rc in (0, 3) and out.strip():
                r = json.loads(out)
                cells.append(f"{'ok' if rc == 0 else 'limit not met'} {r['peak_ratio']:.2f}, "
                             f"{r['latency_ratio']:.2f} ({r['states_explored']} states)")
            else:
                cells.append(f"FAIL: {first_error(err, out)}")
            if os.path.exists(plan):
                rc, out, err, _ = sh([mg, "verify", m, plan, "--train", "-i", x, "--json"])
                if rc in (0, 3) and out.strip():
                    v = json.loads(out)
                    cells.append(f"{'ok' if rc == 0 else 'FAIL'} {len(v['outputs'])} outputs, "
                                 f"worst error/bound {v['worst_error_over_bound']:.2g}")
                else:
                    cells.append(f"FAIL: {first_error(err, out)}")
            else:
                cells.append("(no plan)")
            row = f"| {name}/{kind} | " + " | ".join(cells) + " |"
            rows.append(row)
            print(row, flush=True)
    return 0 if all("FAIL" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
