#!/usr/bin/python3
"""The export helper (scripts/export_for_training.py) end to end: for nn.TransformerEncoder
(dropout 0), a GPT decoder with a causal-mask buffer and a ResNet with batch norm, the file it
writes makes magpie train exactly the parameters PyTorch has (same names, same count: no mask,
no running statistics among them, `magpie inspect --train --json`), and the step magpie emits
for a plan of it (`optimize --train --emit torch`) gives PyTorch's loss and gradients by the
float64-referenced rule of emit_check.py.

    export_check.py MAGPIE WORKDIR"""
import copy
import json
import os
import subprocess
import sys

try:
    import torch
    import onnx  # noqa: F401
except ImportError as e:
    print(f"SKIP: {e}: the emitted-module tests need Debian's python3-torch, python3-onnx")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import emit_check  # noqa: E402
from export_for_training import export_for_training  # noqa: E402


def models():
    sys.path.insert(0, emit_check.FIXTURES)
    import gen_fixtures as gf
    torch.manual_seed(21)
    enc = gf.perturb_params(gf.transformer_encoder(d=32, nhead=4, ff=64, layers=2, dropout=0.0))
    yield "transformer_encoder", enc, (torch.randn(2, 8, 32),)
    torch.manual_seed(17)
    gpt = gf.set_dropout_p(gf.perturb_params(next(s for s in gf.NUMERIC
                                                  if s.name == "gpt_small_train").build()), 0.0)
    yield "gpt_decoder", gpt, (torch.randint(0, 64, (2, 16)),)
    torch.manual_seed(4)
    yield "resnet_bn", gf.perturb_params(gf.small_resnet()), (torch.randn(2, 3, 32, 32),)


def check(magpie, work, name, model, args):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    names = [f"in{i}" for i in range(len(args))]
    export_for_training(model, args, path, input_names=names, output_names=["out"])
    r = subprocess.run([magpie, "inspect", path, "--train", "--json"], capture_output=True,
                       text=True)
    if r.returncode:
        print(r.stderr)
        return False
    j = json.loads(r.stdout)
    trained = [t["name"] for t in j["trained"]]
    want = [n for n, p in model.named_parameters() if p.requires_grad]
    ok = j["param_source"] == "metadata" and sorted(trained) == sorted(want)
    print(f"{'ok ' if ok else 'BAD'} {name}: magpie trains {len(trained)} parameters, PyTorch has "
          f"{len(want)}" + ("" if ok else f": extra {sorted(set(trained) - set(want))}, missing "
                                          f"{sorted(set(want) - set(trained))}"))
    plan = os.path.join(d, "plan")
    emit_check.run_optimize(magpie, path, plan, ["--mem-limit", "0.6", "--max-states", "300"])
    mod = emit_check.load_module(os.path.join(plan, "step.py"), "step_" + name)
    inputs = dict(zip(names, args))
    ref = emit_check.autograd_ref(model, inputs, names, torch.float64, emit_check.flatten,
                                  lambda y: y.sum())
    plain = emit_check.autograd_ref(model, inputs, names, torch.float32, emit_check.flatten,
                                    lambda y: y.sum())
    out = mod.step(mod.params_from_module(copy.deepcopy(model)), inputs)
    fails = emit_check.compare(out, ref, plain, mod.PARAMS)
    print(f"{'ok ' if not fails else 'BAD'} {name}: emitted loss and {len(mod.PARAMS)} gradients"
          + (f", failing: {fails}" if fails else ""))
    return ok and not fails and sorted(mod.PARAMS) == sorted(want)


def main(argv):
    magpie, work = argv[1], argv[2]
    results = [check(magpie, work, n, m, a) for n, m, a in models()]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
