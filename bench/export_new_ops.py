#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""export_new_ops.py - a module using nn.PReLU, F.grid_sample, F.scaled_dot_product_attention
(is_causal) and torch.einsum, exported the default way (dynamo) at opset 23 by the newest PyTorch
from PyPI, then run by magpie against PyTorch's own output (relative L2 error) and taken through
`inspect --train`, whose parameters include the grid (GridSample's grid gradient), and `run
--train`, whose loss and gradients are judged against PyTorch's autograd of the same module (the
grid a trainable input too). The export holds Attention 23, GridSample 22, PRelu 16 and Einsum 12
nodes. Not part of the default suite.

    /work/venv-pypi/bin/python bench/export_new_ops.py build/magpie /tmp/newops
"""
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.p = nn.PReLU(4)
        self.q, self.k, self.v = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)

    def forward(self, x, grid):
        y = F.grid_sample(self.p(x), grid, mode="bilinear", padding_mode="border",
                          align_corners=False)
        t = y.flatten(2).transpose(1, 2).repeat(1, 1, 4)  # [2, 16, 16]
        q, k, v = (f(t).view(2, 16, 2, 8).transpose(1, 2) for f in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k).softmax(-1)
        return torch.einsum("bhqk,bhkd->bqhd", s, a).mean(dim=-1)


def main():
    magpie, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    m = M().eval()
    x, g = torch.randn(2, 4, 8, 8), torch.rand(2, 4, 4, 2) * 2.2 - 1.1
    with torch.no_grad():
        ref = m(x, g).numpy()
    path = os.path.join(out, "m.onnx")
    torch.onnx.export(m, (x, g), path, opset_version=23, dynamo=True)
    print("ops:", sorted({n.op_type for n in onnx.load(path).graph.node}))
    np.save(os.path.join(out, "x.npy"), x.numpy())
    np.save(os.path.join(out, "g.npy"), g.numpy())
    subprocess.run([magpie, "run", path, "-i", f"x={out}/x.npy", "-i", f"grid={out}/g.npy",
                    "-o", os.path.join(out, "o")], check=True, capture_output=True)
    got = np.load(os.path.join(out, "o", os.listdir(os.path.join(out, "o"))[0]))
    print("run: relative error vs PyTorch %.3g" % (np.linalg.norm(got - ref) / np.linalg.norm(ref)))
    r = subprocess.run([magpie, "inspect", "--train", path], capture_output=True, text=True)
    print("inspect --train: exit", r.returncode, r.stderr.strip()[:200])
    # the training graph: loss sum of the output, every parameter and the grid trained
    gdir = os.path.join(out, "train")
    subprocess.run([magpie, "run", "--train", path, "-i", f"x={out}/x.npy", "-i",
                    f"grid={out}/g.npy", "-o", gdir],
                   check=True, capture_output=True)
    m.zero_grad()
    gt = g.clone().requires_grad_(True)
    m(x, gt).sum().backward()
    want = {"grid": gt.grad}
    want.update({n: p.grad for n, p in m.named_parameters()})
    # the exporter stores the Linear weights transposed under names of its own (val_N): only the
    # tensors kept under their own names are compared, each error on the scale max(|ref|, 1e-3
    # of the largest gradient's), as DESIGN.md's criterion floors it (k.bias's exact gradient is
    # zero: softmax ignores a shift common to all keys)
    floor = 1e-3 * max(float(np.linalg.norm(r.numpy())) for r in want.values())
    worst = 0.0
    for name, ref in want.items():
        f = os.path.join(gdir, name + ".grad.npy")
        if not os.path.exists(f):
            continue
        e = float(np.linalg.norm(np.load(f) - ref.numpy()) /
                  max(np.linalg.norm(ref.numpy()), floor))
        worst = max(worst, e)
        print(f"  {name:12s} gradient error vs PyTorch {e:.3g}")
    print("run --train: worst gradient error %.3g" % worst)


if __name__ == "__main__":
    main()
