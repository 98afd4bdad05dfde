#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ort_node_tests.py - onnxruntime on the same node tests that test_conformance runs
(tests/conformance/node/), judged by the same criterion: relative error ||a-b||/max(||b||,1e-12)
<= 1e-4 (1e-2 for float16/bfloat16 outputs), NaN matching NaN, infinities exactly, integers and
booleans exactly. Inputs and expected outputs come from ONNX's own .pb files (onnx 1.22's wheel),
so bfloat16 keeps its type.

    build-venv/bin/pip install onnxruntime
    build-venv/bin/python tests/conformance/ort_node_tests.py
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def agree(a, r):
    if a.shape != r.shape:
        return False
    if r.dtype.kind not in "fc" and str(r.dtype) != "bfloat16":
        return np.array_equal(a, r)
    a = a.astype(np.float64).ravel()
    r = r.astype(np.float64).ravel()
    same = (np.isnan(a) & np.isnan(r)) | (a == r)
    if np.any(~same & ~(np.isfinite(a) & np.isfinite(r))):
        return False
    d = np.where(same, 0, a - r)
    den = np.sqrt(np.sum(np.where(np.isfinite(r), r, 0) ** 2))
    tol = 1e-2 if r.dtype.itemsize == 2 else 1e-4
    return np.sqrt(np.sum(d * d)) / max(den, 1e-12) <= tol


def main():
    passed = failed = 0
    so = ort.SessionOptions()
    so.log_severity_level = 4
    for name in sorted(os.listdir(os.path.join(HERE, "node"))):
        d = os.path.join(SRC, name)
        ds = os.path.join(d, "test_data_set_0")
        model = onnx.load(os.path.join(d, "model.onnx"))
        init = {i.name for i in model.graph.initializer}
        ins = [i.name for i in model.graph.input if i.name not in init]
        ok = False
        try:
            feeds = {}
            for k, n in enumerate(ins):
                t = onnx.TensorProto()
                t.ParseFromString(open(os.path.join(ds, f"input_{k}.pb"), "rb").read())
                feeds[n] = numpy_helper.to_array(t)
            s = ort.InferenceSession(os.path.join(d, "model.onnx"), so,
                                     providers=["CPUExecutionProvider"])
            outs = s.run(None, feeds)
            ok = True
            for k, a in enumerate(outs):
                t = onnx.TensorProto()
                t.ParseFromString(open(os.path.join(ds, f"output_{k}.pb"), "rb").read())
                ok = ok and agree(np.asarray(a), numpy_helper.to_array(t))
        except Exception as e:  # noqa: BLE001 - a refusal counts as not passing
            if os.environ.get("VERBOSE"):
                print(name, str(e).splitlines()[0][:160], file=sys.stderr)
        passed += ok
        failed += not ok
    print(f"onnxruntime {ort.__version__}: {passed} passed, {failed} not (of {passed + failed})")


if __name__ == "__main__":
    main()
