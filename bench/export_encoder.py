"""export_encoder.py OUT.onnx [--batch-first 0|1] [--batch B] [--seq S] [--layers L]

nn.TransformerEncoder at BERT-base size (d 768, 12 heads, ff 3072, GELU, dropout 0), exported the
ordinary way (torch.onnx.export's defaults) by PyTorch 1.13 (Debian's /usr/bin/python3) at opset
17, structure only (no weights stored: magpie draws them from --seed). For the fission benchmarks
of docs/BENCHMARKS.md ("Strided splits"); batch_first 0 is [S, B, E], 1 is [B, S, E]."""
import argparse

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--batch-first", type=int, default=1)
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--seq", type=int, default=512)
ap.add_argument("--layers", type=int, default=12)
a = ap.parse_args()
bf = bool(a.batch_first)
layer = nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072, dropout=0.0,
                                   activation="gelu", batch_first=bf)
model = nn.TransformerEncoder(layer, num_layers=a.layers, enable_nested_tensor=False).eval()
x = torch.randn(a.batch, a.seq, 768) if bf else torch.randn(a.seq, a.batch, 768)
torch.onnx.export(model, (x,), a.out, opset_version=17, input_names=["src"],
                  output_names=["out"], export_params=False)
