"""gen_gpt_1p3b.py - a 1.3-billion-parameter GPT (GPT-Neo-1.3B's shape: 24 layers, width 2048,
16 heads, vocab 50257, 512 positions, tied LM head, SDPA with is_causal=True), seeded random
weights, exported by today's default torch.onnx.export (dynamo: opset 20, the 5.3 GB of float32
weights in m.onnx.data) at batch 1 with the sequence length dynamic (1..512). Writes to SCRATCH:
m.onnx, m.onnx.data, input_0.npy (1 x SEQ tokens, default 32) and output_0.npy (PyTorch's float32
logits for it). bench/gpt_1p3b.sh runs it and magpie on the files.

    /work/venv-pypi/bin/python bench/gen_gpt_1p3b.py SCRATCH [SEQ]
"""
import gc
import os
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pypi_models import GPT  # noqa: E402

out = sys.argv[1]
seq = int(sys.argv[2]) if len(sys.argv) > 2 else 32
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
t = time.time()
model = GPT(50257, 2048, 16, 24, 512, sdpa=True, tied=True).eval()
for p in model.parameters():
    p.requires_grad_(False)
n = sum(p.numel() for p in model.parameters())
print(f"{n / 1e9:.3f} B parameters ({n * 4 / 1e9:.2f} GB float32), built in {time.time() - t:.0f} s",
      flush=True)
idx = torch.randint(0, 50257, (1, seq))
with torch.no_grad():
    y = model(idx)
np.save(os.path.join(out, "input_0.npy"), idx.numpy())
np.save(os.path.join(out, "output_0.npy"), y.numpy())
del y
gc.collect()
t = time.time()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    # the export traces at seq 8 (an example below 512); the dimension stays symbolic
    torch.onnx.export(model, (idx[:, :8],), os.path.join(out, "m.onnx"),
                      dynamic_shapes=({1: torch.export.Dim("seq", min=2, max=512)},))
print(f"exported in {time.time() - t:.0f} s: " + ", ".join(
    f"{f} {os.path.getsize(os.path.join(out, f)) / 1e9:.3f} GB" for f in sorted(os.listdir(out))),
    flush=True)
