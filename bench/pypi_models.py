"""pypi_models.py - the seven models of issue 22's exports, as a user of today's PyTorch writes
them: torchvision's resnet18, vit_b_16, mobilenet_v3_small and convnext_tiny, an
nn.TransformerEncoder with GELU, and two GPT decoders, one with
F.scaled_dot_product_attention(is_causal=True) and one with a triu mask added to the scores.

build(name, small) returns (model in eval mode, input tensor). small=False keeps each model's
real architecture and size (at batch 1, 224x224 for the vision models, which vit_b_16 needs);
small=True reduces width, depth and resolution for the committed test fixtures (resnet18's
torchvision builder has no width to reduce: small only lowers its resolution). Weights are
seeded random (torch.manual_seed before each build). Used by bench/gen_pypi_exports.py and
tests/fixtures/exports/gen_exports.py."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NAMES = ["resnet18", "vit_b_16", "transformer_encoder", "gpt_sdpa", "gpt_triu",
         "mobilenet_v3_small", "convnext_tiny"]


class Block(nn.Module):
    """A pre-norm GPT block; causal attention by SDPA(is_causal=True) or by a triu -inf mask."""

    def __init__(self, d, heads, seq, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        if not sdpa:
            self.register_buffer(
                "mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1),
                persistent=False)

    def attend(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads) + self.mask[:t, :t]
            y = torch.softmax(s, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attend(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """tied=True: the LM head is the token embedding (GPT-2's and GPT-Neo's)."""

    def __init__(self, vocab, d, heads, layers, seq, sdpa, tied=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, seq, sdpa) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = None if tied else nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        x = self.ln_f(x)
        return self.head(x) if self.head is not None else F.linear(x, self.wte.weight)


def build(name, small):
    import torchvision.models as tvm
    torch.manual_seed(0)
    res = 32 if small else 224
    if name == "resnet18":
        m = tvm.resnet18(weights=None, num_classes=10 if small else 1000)
        x = torch.randn(1, 3, res, res)
    elif name == "vit_b_16":
        if small:  # ViT's architecture at 32x32, patch 8, 2 layers, width 32
            m = tvm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4,
                                      hidden_dim=32, mlp_dim=64, num_classes=10)
        else:
            m = tvm.vit_b_16(weights=None)
        # torchvision starts the classifier at zero (a zero output would check nothing)
        nn.init.normal_(m.heads.head.weight, std=0.02)
        x = torch.randn(1, 3, res, res)
    elif name == "transformer_encoder":
        d, heads, ff, layers, seq = (32, 4, 64, 2, 8) if small else (512, 8, 2048, 6, 128)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation="gelu",
                                           batch_first=True)
        m = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        x = torch.randn(2 if small else 4, seq, d)
    elif name in ("gpt_sdpa", "gpt_triu"):
        vocab, d, heads, layers, seq = (64, 32, 4, 2, 16) if small else (8192, 512, 8, 6, 128)
        m = GPT(vocab, d, heads, layers, seq, name == "gpt_sdpa")
        x = torch.randint(0, vocab, (1, seq))
    elif name == "mobilenet_v3_small":
        m = (tvm.mobilenet_v3_small(weights=None, num_classes=10, width_mult=0.25) if small
             else tvm.mobilenet_v3_small(weights=None))
        x = torch.randn(1, 3, res, res)
    elif name == "convnext_tiny":
        if small:  # ConvNeXt's blocks, two stages of width 16 and 32
            from torchvision.models.convnext import CNBlockConfig, ConvNeXt
            m = ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)],
                         stochastic_depth_prob=0.0, num_classes=10)
        else:
            m = tvm.convnext_tiny(weights=None)
        x = torch.randn(1, 3, res, res)
    else:
        raise ValueError(name)
    return m.eval(), x
