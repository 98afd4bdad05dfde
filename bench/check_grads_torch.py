#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_grads_torch.py - GridSample's gradients (of the input and of the grid) and Pad's (reflect,
edge, wrap) from `magpie run --train`, against PyTorch's autograd, in float64, case by case:
every GridSample mode (nearest, bilinear, bicubic), padding (zeros, border, reflection) and
align_corners, 4-D and 5-D, and Pad's three reading modes with pads wider than the input. Each
case is a one-op ONNX model whose tensors are initializers (so magpie trains them), weighed by a
constant R (a Constant node: not trained), loss = sum(op(...) * R). The relative L2 error of each
gradient is printed; the script exits 1 when one is over 1e-9.

Grids span [-1.3, 1.3] (points outside the input too), except for bicubic with border padding,
where ONNX (onnx's reference, which magpie follows) and PyTorch differ for a point outside the
input: ONNX clips the point before taking its 4x4 taps, PyTorch only the taps (with reflection
both agree: the reflection maps the tap lattice onto itself). Those cases run twice: inside
[-1, 1], where both agree and must match, and on the wide grid, where the difference is reported,
not judged.

    /usr/bin/python3 bench/check_grads_torch.py build/magpie /tmp/gradcheck

Needs torch and onnx (Debian's /usr/bin/python3 has both). Not part of the default suite:
test_ops_einsum and test_autodiff check the same gradients against finite differences, and the
stn_pad_train fixture against PyTorch, without Python.
"""
import itertools
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto
import torch
import torch.nn.functional as F


def model(path, op, attrs, tensors, out_shape, r, opset):
    """op(*tensors) * R with the tensors as initializers."""
    inits = [numpy_helper.from_array(v, name) for name, v in tensors]
    nodes = [helper.make_node("Constant", [], ["R"], value=numpy_helper.from_array(r, "R")),
             helper.make_node(op, [n for n, _ in tensors], ["y"], **attrs),
             helper.make_node("Mul", ["y", "R"], ["out"])]
    g = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info(
        "out", TensorProto.DOUBLE, out_shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, path)


def run_magpie(magpie, path, out):
    r = subprocess.run([magpie, "run", "--train", path, "-o", out], capture_output=True,
                       text=True)
    if r.returncode:
        raise RuntimeError(f"{path}: magpie exit {r.returncode}: {r.stderr.strip()}")
    return lambda name: np.load(os.path.join(out, f"{name}.grad.npy"))


def rel(a, b):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def main():
    magpie, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    worst, bad, n = 0.0, [], 0
    modes = {"nearest": "nearest", "bilinear": "linear", "bicubic": "cubic"}
    for (tm, om), pad, ac, rank in itertools.product(modes.items(),
                                                     ("zeros", "border", "reflection"), (0, 1),
                                                     (4, 5)):
        if rank == 5 and tm == "bicubic":
            continue  # PyTorch's bicubic is 4-D only
        spans = [1.3]
        if tm == "bicubic" and pad == "border":
            spans = [1.0, 1.3]
        for span in spans:
            x = rng.standard_normal((2, 3, 5, 6) if rank == 4 else (2, 3, 3, 4, 5))
            gshape = (2, 4, 3, 2) if rank == 4 else (2, 2, 3, 2, 3)
            grid = rng.uniform(-span, span, gshape)
            tx = torch.tensor(x, requires_grad=True)
            tg = torch.tensor(grid, requires_grad=True)
            y = F.grid_sample(tx, tg, mode=tm, padding_mode=pad, align_corners=bool(ac))
            r = rng.standard_normal(tuple(y.shape))
            (y * torch.tensor(r)).sum().backward()
            name = f"gridsample_{tm}_{pad}_ac{ac}_{rank}d_span{span}"
            path = os.path.join(work, name + ".onnx")
            # opset 16's names for 4-D; opset 20 for 5-D (and its names)
            model(path, "GridSample",
                  dict(mode=tm if rank == 4 else om, padding_mode=pad, align_corners=ac),
                  [("X", x), ("grid", grid)], list(y.shape), r, 16 if rank == 4 else 20)
            grad = run_magpie(magpie, path, os.path.join(work, name))
            ex, eg = rel(grad("X"), tx.grad.numpy()), rel(grad("grid"), tg.grad.numpy())
            judged = not (tm == "bicubic" and pad == "border" and span > 1)
            tag = "" if judged else "  (ONNX and PyTorch differ outside: not judged)"
            print(f"{name:48s} dX {ex:9.2e}  dgrid {eg:9.2e}{tag}")
            if judged:
                n += 1
                worst = max(worst, ex, eg)
                if max(ex, eg) > 1e-9:
                    bad.append(name)
    torch_pad = {"reflect": "reflect", "edge": "replicate", "wrap": "circular"}
    for mode, shape, pads in itertools.product(("reflect", "edge", "wrap"),
                                               ((2, 3, 5, 6), (1, 2, 4, 3, 5)),
                                               ("narrow", "wide")):
        r4 = len(shape) - 2
        # torch's pad list: last dim first, (before, after) pairs over the spatial dims
        if pads == "narrow":
            tp = [1, 2, 2, 1, 0, 3][:2 * r4]
        else:  # as wide as torch allows: reflect < dim, circular <= dim; edge any
            lim = [s - 1 if mode == "reflect" else s for s in shape[2:]][::-1]
            tp = [v for s in lim for v in (s, max(s - 1, 0))]
        onnx_pads = [0, 0] + [tp[2 * (r4 - 1 - i)] for i in range(r4)] + \
                    [0, 0] + [tp[2 * (r4 - 1 - i) + 1] for i in range(r4)]
        x = rng.standard_normal(shape)
        tx = torch.tensor(x, requires_grad=True)
        y = F.pad(tx, tp, mode=torch_pad[mode])
        r = rng.standard_normal(tuple(y.shape))
        (y * torch.tensor(r)).sum().backward()
        name = f"pad_{mode}_{len(shape)}d_{pads}"
        path = os.path.join(work, name + ".onnx")
        model(path, "Pad", dict(mode=mode),
              [("X", x), ("pads", np.array(onnx_pads, np.int64))], list(y.shape), r, 19)
        grad = run_magpie(magpie, path, os.path.join(work, name))
        ex = rel(grad("X"), tx.grad.numpy())
        print(f"{name:48s} dX {ex:9.2e}")
        n += 1
        worst = max(worst, ex)
        if ex > 1e-9:
            bad.append(name)
    print(f"{n} cases judged, worst relative error {worst:.2e}; over 1e-9: {bad or 'none'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
