#!/usr/bin/env python3
# Copyright (c) ONNX Project Contributors (the test cases); magpie authors (this script).
# SPDX-License-Identifier: Apache-2.0
"""gen_node_tests.py - converts ONNX's backend node tests into magpie's conformance fixtures.

The node tests ship in onnx 1.22's wheel (onnx/backend/test/data/node/<test>/: model.onnx and
test_data_set_0/{input,output}_<i>.pb). A test is taken when every op of its graph is one magpie
claims (the default-domain entries of ir/ir-ops.def, and the ops the importer expands into them:
claimed_ops), its opset is one magpie reads (13 to 23),
its inputs and outputs are plain tensors, and its files are small (--max-bytes). Each becomes
tests/conformance/node/<test>/ with model.onnx as ONNX wrote it (its own opset), input_<i>.npy and
output_<i>.npy (the expected outputs, ONNX's numpy reference), and inputs.txt naming the graph input
each input_<i>.npy binds. Tests at opsets outside 13-23 are counted, not copied.

    python3 -m venv build-venv && build-venv/bin/pip install onnx==1.22.0 numpy
    build-venv/bin/python tests/conformance/gen_node_tests.py

The ONNX test data is Apache-2.0 (tests/conformance/LICENSE-ONNX). The summary it prints is the
source of docs/onnx-conformance.md's counts.
"""
import argparse
import os
import re
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OPSET_MIN, OPSET_MAX = 13, 23


def claimed_ops():
    ops = set()
    with open(os.path.join(ROOT, "ir", "ir-ops.def")) as f:
        for m in re.finditer(r'^IR_OP\((\w+), ""\)', f.read(), re.M):
            ops.add(m.group(1))
    # ops without an entry that the importer expands into entries: in C (the table in
    # ir/ir-expand-build.c) and by ONNX's own function bodies (ir/proto/onnx-functions.inc)
    # where every op a body uses is read
    with open(os.path.join(ROOT, "ir", "ir-expand-build.c")) as f:
        for m in re.finditer(r'\{"(\w+)", ir_expand_(\w+)\}', f.read()):
            ops.add(m.group(1))
    with open(os.path.join(ROOT, "ir", "proto", "onnx-functions.inc")) as f:
        text = f.read()
    for m in re.finditer(r"^/\* (\w+) \(since opset \d+\).*?\n((?: \*.*\n)*?) \*/", text, re.M):
        body_ops = set(re.findall(r"= (\w+) [<(]", m.group(2)))
        if body_ops <= ops:
            ops.add(m.group(1))
    return ops


def default_opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return None


def graph_ops(g):
    """Every (domain, op_type) of the graph, sub-graphs included."""
    out = set()
    for n in g.node:
        out.add((n.domain if n.domain not in ("ai.onnx",) else "", n.op_type))
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out |= graph_ops(a.g)
            for sg in a.graphs:
                out |= graph_ops(sg)
    return out


def read_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t


def to_npy_array(t):
    if t.data_type == onnx.TensorProto.BFLOAT16:
        # numpy has no bfloat16; magpie reads and writes it as float32 (exact)
        return numpy_helper.to_array(t).astype(np.float32)
    return numpy_helper.to_array(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(os.path.dirname(onnx.__file__),
                                                  "backend", "test", "data", "node"))
    ap.add_argument("--out", default=os.path.join(HERE, "node"))
    ap.add_argument("--max-bytes", type=int, default=48 * 1024,
                    help="largest test (model and data files) copied")
    args = ap.parse_args()
    if onnx.__version__ != "1.22.0":
        print(f"warning: the fixtures are made with onnx 1.22.0, this is {onnx.__version__}",
              file=sys.stderr)
    ops = claimed_ops()
    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    counts = {"total": 0, "other_ops": 0, "opset_below": 0, "opset_above": 0,
              "not_tensor": 0, "too_big": 0, "copied": 0}
    total_bytes = 0
    for name in sorted(os.listdir(args.src)):
        d = os.path.join(args.src, name)
        mp = os.path.join(d, "model.onnx")
        if not os.path.isfile(mp):
            continue
        counts["total"] += 1
        model = onnx.load(mp)
        if any(dom != "" or op not in ops for dom, op in graph_ops(model.graph)):
            counts["other_ops"] += 1
            continue
        opset = default_opset(model)
        if opset is None or opset < OPSET_MIN:
            counts["opset_below"] += 1
            continue
        if opset > OPSET_MAX:
            counts["opset_above"] += 1
            continue
        ds = os.path.join(d, "test_data_set_0")
        if not os.path.isdir(ds):
            counts["not_tensor"] += 1
            continue
        init = {i.name for i in model.graph.initializer}
        inputs = [i for i in model.graph.input if i.name not in init]
        if any(i.type.WhichOneof("value") != "tensor_type" for i in inputs) or any(
                o.type.WhichOneof("value") != "tensor_type" for o in model.graph.output):
            counts["not_tensor"] += 1
            continue
        size = os.path.getsize(mp) + sum(
            os.path.getsize(os.path.join(ds, f)) for f in os.listdir(ds))
        if size > args.max_bytes:
            counts["too_big"] += 1
            continue
        arrays = {}
        try:
            for kind, n in (("input", len(inputs)), ("output", len(model.graph.output))):
                for i in range(n):
                    arrays[f"{kind}_{i}.npy"] = to_npy_array(
                        read_tensor(os.path.join(ds, f"{kind}_{i}.pb")))
        except (FileNotFoundError, ValueError, TypeError):
            counts["not_tensor"] += 1
            continue
        if any(a.dtype == object for a in arrays.values()):  # strings: no dtype magpie has
            counts["not_tensor"] += 1
            continue
        od = os.path.join(args.out, name)
        os.makedirs(od)
        shutil.copyfile(mp, os.path.join(od, "model.onnx"))
        for f, a in arrays.items():
            np.save(os.path.join(od, f), a, allow_pickle=False)
        with open(os.path.join(od, "inputs.txt"), "w") as f:
            for i in inputs:
                f.write(i.name + "\n")
        bf16 = [i.name for i in inputs
                if i.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16]
        if bf16:  # these input_<i>.npy hold float32 values of bfloat16 inputs
            with open(os.path.join(od, "bf16.txt"), "w") as f:
                f.write("".join(n + "\n" for n in bf16))
        total_bytes += sum(os.path.getsize(os.path.join(od, f)) for f in os.listdir(od))
        counts["copied"] += 1
    print(" ".join(f"{k}={v}" for k, v in counts.items()), f"bytes={total_bytes}")


if __name__ == "__main__":
    main()
