#!/usr/bin/env python3
"""gen_gpt_neo_shape.py - a GPT decoder with GPT-Neo-1.3B's shape, structure only, for the
explorer's large-graph benchmark (bench/bench_children.sh, docs/BENCHMARKS.md).

24 pre-LN blocks of d 2048 with 16 heads, vocabulary 50257, learned positions (context 2048),
causal mask and a head tied to the token embedding: the GPT of tests/fixtures/gen_fixtures.py
(the same code as the gpt2_small fixtures), at sequence 512. It is exported the ordinary way
with Debian's PyTorch 1.13 at opset 17, without weights (export_params=False, so the file is
small), at batch 1 with a dynamic batch dimension named 'batch': exporting at batch 8 needs more
than 24 GiB in PyTorch 1.13. Bind the batch with `--shape batch=8`.

    /usr/bin/python3 bench/gen_gpt_neo_shape.py [OUT.onnx]   (default out/bench/gpt_neo_1p3b.onnx)
    /usr/bin/python3 bench/gen_gpt_neo_shape.py --bind8 IN.onnx OUT.onnx

--bind8 writes a copy whose batch is 8 in the file (the inputs' and outputs' 'batch' made 8), for
builds whose optimize fails on re-reading a plan of a symbolic batch (main at 22b5c67, issue 17);
it is the same graph as `--shape batch=8` on the original.
"""
import os
import sys

import onnx
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
import gen_fixtures  # noqa: E402  (the GPT module of the fixtures)


def bind8(src, dst):
    m = onnx.load(src)
    for vi in list(m.graph.input) + list(m.graph.output):
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param == "batch":
                d.Clear()
                d.dim_value = 8
    onnx.checker.check_model(m)
    onnx.save(m, dst)
    print(f"{dst}: batch 8")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--bind8":
        return bind8(sys.argv[2], sys.argv[3])
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "out", "bench",
                                                             "gpt_neo_1p3b.onnx")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    torch.manual_seed(0)
    with torch.no_grad():
        model = gen_fixtures.GPT(vocab=50257, max_len=2048, d=2048, nhead=16, layers=24,
                                 tied=True).eval()
        idx = torch.randint(0, 50257, (1, 512), dtype=torch.long)
        torch.onnx.export(model, (idx,), out, export_params=False, do_constant_folding=False,
                          opset_version=17, input_names=["idx"], output_names=["logits"],
                          dynamic_axes={"idx": {0: "batch"}, "logits": {0: "batch"}})
    m = onnx.load(out)
    onnx.checker.check_model(m)
    print(f"{out}: {len(m.graph.node)} nodes, {os.path.getsize(out) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
