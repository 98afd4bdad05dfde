#!/usr/bin/python3
"""Export the corpus's GPT decoder (tests/fixtures/gen_corpus.py GPTDecoder: token embedding,
learned positions, nn.TransformerEncoder under a causal mask, tied head) at a small configuration
for `magpie verify` of its training plans: vocab 97, d 32, 4 heads, ff 64, 2 layers, batch 8 x 16
(a batch of 8, so that fissions of 4 and 8 parts exist). Structure as the corpus exports it
(scripts/export_for_training.py, opset 17), weights kept.

usage: /usr/bin/python3 bench/export_small_gpt_decoder.py OUT.onnx"""
import importlib.util
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from export_for_training import export_for_training  # noqa: E402

spec = importlib.util.spec_from_file_location("gen_corpus",
                                              os.path.join(ROOT, "tests/fixtures/gen_corpus.py"))
gen_corpus = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen_corpus)

torch.manual_seed(0)
model = gen_corpus.GPTDecoder(vocab=97, max_len=32, d=32, nhead=4, ff=64, layers=2)
idx = torch.randint(0, 97, (8, 16), dtype=torch.long)
export_for_training(model, (idx,), sys.argv[1], input_names=["idx"], output_names=["logits"],
                    opset=17)
