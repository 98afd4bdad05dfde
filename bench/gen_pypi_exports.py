"""gen_pypi_exports.py - issue 22's 14 exports with today's PyTorch from PyPI: for each model of
bench/pypi_models.py (full size, seeded random weights), the default export
torch.onnx.export(model, (x,), "<name>/dynamo/m.onnx") (the dynamo exporter: opset 20, weights
in m.onnx.data) and the dynamo=False one ("<name>/torchscript/m.onnx"). Beside the models, in
<name>/: input_0.npy, output_0.npy (PyTorch's float32 output) and ref64_0.npy (the model and
input in float64: the reference of the verification criterion).

    /work/venv-pypi/bin/python bench/gen_pypi_exports.py SCRATCH [NAME...]

Then /usr/bin/python3 bench/check_pypi_exports.py SCRATCH."""
import os
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pypi_models  # noqa: E402


def export_all(out, names, small):
    for name in names:
        model, x = pypi_models.build(name, small)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with torch.no_grad():
            y = model(x)
            x64 = x.double() if x.is_floating_point() else x
            y64 = model.double()(x64)
            model.float()
        np.save(os.path.join(d, "input_0.npy"), x.numpy())
        np.save(os.path.join(d, "output_0.npy"), y.numpy())
        np.save(os.path.join(d, "ref64_0.npy"), y64.numpy())
        for kind, kw in (("dynamo", {}), ("torchscript", {"dynamo": False})):
            k = os.path.join(d, kind)
            os.makedirs(k, exist_ok=True)
            for f in os.listdir(k):
                os.remove(os.path.join(k, f))
            t = time.time()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, (x,), os.path.join(k, "m.onnx"), **kw)
            print(f"{name}/{kind}: {sorted(os.listdir(k))} in {time.time() - t:.1f} s",
                  flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print(f"torch {torch.__version__}", flush=True)
    export_all(sys.argv[1], sys.argv[2:] or pypi_models.NAMES, small=False)
