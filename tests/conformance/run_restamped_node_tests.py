#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""run_restamped_node_tests.py - onnx 1.22's node tests of QuantizeLinear, DequantizeLinear
(stamped opset 25) and DynamicQuantizeLinear (stamped opset 11), whose opsets magpie does not
read, re-stamped into its window (25 -> 23, 11 -> 13; the ops' semantics for these tests are
the same there) and run through `magpie run`, judged exactly (integer outputs) or by relative
error 1e-4 (floats) against ONNX's expected outputs. A diagnostic kept beside the converted
suite (test_conformance does not run these: their models are not ONNX's as written).

    /work/venv-onnx122/bin/python tests/conformance/run_restamped_node_tests.py build/magpie /tmp/rs
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

SRC = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
RESTAMP = {25: 23, 11: 13}


def main():
    magpie, out = sys.argv[1], sys.argv[2]
    counts = {}
    for name in sorted(os.listdir(SRC)):
        if not any(w in name for w in ("quantizelinear",)):
            continue
        d = os.path.join(SRC, name)
        ds = os.path.join(d, "test_data_set_0")
        m = onnx.load(os.path.join(d, "model.onnx"))
        for o in m.opset_import:
            if o.domain in ("", "ai.onnx"):
                o.version = RESTAMP.get(o.version, o.version)
        td = os.path.join(out, name)
        os.makedirs(td, exist_ok=True)
        mp = os.path.join(td, "model.onnx")
        onnx.save(m, mp)
        init = {i.name for i in m.graph.initializer}
        args = []
        for k, n in enumerate(i.name for i in m.graph.input if i.name not in init):
            t = onnx.TensorProto()
            t.ParseFromString(open(os.path.join(ds, f"input_{k}.pb"), "rb").read())
            f = os.path.join(td, f"in{k}.npy")
            np.save(f, numpy_helper.to_array(t))
            args += ["-i", f"{n}={f}"]
        r = subprocess.run([magpie, "run", mp, "-o", os.path.join(td, "o")] + args,
                           capture_output=True, timeout=60)
        if r.returncode != 0:
            verdict = "refused: " + r.stderr.decode(errors="replace").strip()
        else:
            verdict = "pass"
            for k, o in enumerate(m.graph.output):
                t = onnx.TensorProto()
                t.ParseFromString(open(os.path.join(ds, f"output_{k}.pb"), "rb").read())
                want = numpy_helper.to_array(t)
                got = np.load(os.path.join(td, "o", o.name + ".npy"))
                if got.dtype != want.dtype or got.shape != want.shape:
                    verdict = f"fail: output {k} is {got.dtype}{got.shape}, expected " \
                              f"{want.dtype}{want.shape}"
                elif want.dtype.kind == "f":
                    w = want.astype(np.float64)
                    e = np.linalg.norm(got - w) / max(np.linalg.norm(w), 1e-12)
                    if not e <= 1e-4:
                        verdict = f"fail: output {k} relative error {e:.3g}"
                elif not np.array_equal(got, want):
                    verdict = f"fail: output {k} differs in {np.sum(got != want)} elements"
        counts[verdict.split(":")[0]] = counts.get(verdict.split(":")[0], 0) + 1
        print(f"{name}: {verdict}")
    print(counts)


if __name__ == "__main__":
    main()
