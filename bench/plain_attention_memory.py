#!/usr/bin/python3
"""Where the plain PyTorch step's attention memory goes: the plain step (forward + backward of
the fixture's nn.Module, loss sum), measured as bench/emit_memory.py measures it, once as
PyTorch runs it and once with torch.nn.functional.scaled_dot_product_attention replaced by the
ops the exported ONNX graph computes (MatMul of Q and K^T, scale, mask, Softmax, MatMul with V),
so that autograd keeps the [batch, heads, tokens, tokens] softmax as the exported graph's backward
does. PyTorch versions whose nn.MultiheadAttention does not call scaled_dot_product_attention
(1.13) give the same figure twice.

    bench/plain_attention_memory.py FIXTURE [FIXTURE...]
"""
import copy
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "emit"))
import emit_check  # noqa: E402
import emit_memory  # noqa: E402

CALLS = []


def sdpa_as_exported(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                     **kw):
    """scaled_dot_product_attention as the exported graph computes it (dropout 0)."""
    CALLS.append(tuple(q.shape[:-1]) + (k.shape[-2],))
    s = torch.matmul(q, k.transpose(-2, -1)) * (scale if scale is not None else
                                                1.0 / math.sqrt(q.shape[-1]))
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else s + attn_mask
    return torch.matmul(torch.softmax(s, dim=-1), v)


def plain_peak(model, inputs, flatten):
    m = copy.deepcopy(model)
    order = list(inputs)

    def plain():
        m.zero_grad(set_to_none=True)
        flatten(m(*[inputs[n] for n in order]))[0].sum().backward()
    plain()
    m.zero_grad(set_to_none=True)
    res = emit_memory.resident_bytes(list(m.parameters()) + list(m.buffers()) +
                                     list(inputs.values()))
    return emit_memory.cpu_peak(plain) + res


def main(argv):
    torch.set_num_threads(1)
    print("PyTorch", torch.__version__)
    F = torch.nn.functional
    has = hasattr(F, "scaled_dot_product_attention")
    for fixture in argv[1:]:
        model, inputs, flatten = emit_check.fixture_model(fixture)
        as_run = plain_peak(model, inputs, flatten)
        if not has:
            print(f"{fixture}: plain step {as_run} B (no scaled_dot_product_attention here)")
            continue
        orig = F.scaled_dot_product_attention
        F.scaled_dot_product_attention = sdpa_as_exported
        CALLS.clear()
        try:
            exported = plain_peak(model, inputs, flatten)
        finally:
            F.scaled_dot_product_attention = orig
        shapes = sorted(set(CALLS))
        probs = [math.prod(s) * 4 for s in shapes]
        print(f"{fixture}: plain step {as_run} B; with attention as exported {exported} B "
              f"({exported - as_run:+d} B); scaled_dot_product_attention called "
              f"{len(CALLS) // 2} times per step, softmax {shapes} = {probs} B each")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
