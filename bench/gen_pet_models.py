#!/usr/bin/python3
"""gen_pet_models.py DIR [NAME...] - the five inference models of bench_pet_models.sh, exported
from PyTorch/torchvision (Debian's python3-torch 1.13 and python3-torchvision) at small
resolution, batch 1, eval mode, as DIR/NAME.onnx with export_params=False: the weights are graph
inputs, which the bench gives seeded random values (uniform in +-1/sqrt(fan_in)) as initializers
in its scratch directory, so the files written here are small (structure only).

  resnet18      torchvision ResNet-18 at 64x64
  inception_v3  torchvision Inception v3 (no auxiliary head) at 96x96 (its minimum is 75)
  csrnet        CSRNet configuration B (Li, Zhang and Chen, CVPR 2018) at a quarter of its width
                (VGG-16 front-end 16..128 channels, dilation-2 back-end) at 128x128
  encoder       nn.TransformerEncoder: 2 pre-norm layers, d_model 128, 4 heads, GELU feed-forward 512,
                64 tokens
  convnext_t    torchvision ConvNeXt-T at 64x64

Each model is built after torch.manual_seed(0), so the structure is the same on every run."""
import sys

import torch
import torch.nn as nn
import torchvision


class CSRNet(nn.Module):
    def __init__(self, width=0.25):
        super().__init__()

        def c(v):
            return v if v == "M" else max(1, int(v * width))

        def make(cfg, cin, dil):
            layers = []
            for v in map(c, cfg):
                if v == "M":
                    layers.append(nn.MaxPool2d(2, 2))
                else:
                    layers += [nn.Conv2d(cin, v, 3, padding=dil, dilation=dil), nn.ReLU(inplace=True)]
                    cin = v
            return nn.Sequential(*layers), cin

        self.frontend, cin = make([64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512], 3, 1)
        self.backend, cin = make([512, 512, 512, 256, 128, 64], cin, 2)
        self.output_layer = nn.Conv2d(cin, 1, 1)

    def forward(self, x):
        return self.output_layer(self.backend(self.frontend(x)))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        # pre-norm with GELU, as ViT's encoder; sequence-first (batch_first=False) keeps PyTorch
        # off its fused inference path (aten::_transformer_encoder_layer_fwd), which ONNX cannot
        # export
        layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, activation="gelu",
                                           norm_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        return self.enc(x)


def build(name):
    torch.manual_seed(0)
    if name == "resnet18":
        return torchvision.models.resnet18(), torch.randn(1, 3, 64, 64)
    if name == "inception_v3":
        m = torchvision.models.inception_v3(aux_logits=False, init_weights=False)
        return m, torch.randn(1, 3, 96, 96)
    if name == "csrnet":
        return CSRNet(), torch.randn(1, 3, 128, 128)
    if name == "encoder":
        return Encoder(), torch.randn(64, 1, 128)
    if name == "convnext_t":
        return torchvision.models.convnext_tiny(), torch.randn(1, 3, 64, 64)
    raise SystemExit("gen_pet_models: unknown model " + name)


NAMES = ["resnet18", "inception_v3", "csrnet", "encoder", "convnext_t"]

if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    for name in sys.argv[2:] or NAMES:
        model, x = build(name)
        model.eval()
        with torch.no_grad():
            torch.onnx.export(model, x, "%s/%s.onnx" % (out, name), export_params=False,
                              do_constant_folding=False, opset_version=13,
                              input_names=["input"], output_names=["output"])
        print("gen_pet_models: %s/%s.onnx" % (out, name), file=sys.stderr)
