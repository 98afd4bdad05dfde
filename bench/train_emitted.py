#!/usr/bin/python3
"""Train a small ResNet for 20 steps with magpie's emitted step inside an ordinary torch.optim
loop, next to the plain PyTorch loop, and check every step's loss against a float64 PyTorch loop.

    /usr/bin/python3 bench/train_emitted.py [MAGPIE] [WORKDIR]

1. exports torchvision's ResNet (BasicBlock [1,1,1,1], planes 8..64, batch norm) for training
   with scripts/export_for_training.py;
2. `magpie optimize model.onnx --train --loss ce --mem-limit 0.6 --emit torch -o WORKDIR/plan`
   writes the plan and its step module, WORKDIR/plan/step.py;
3. runs three loops from the same weights on the same batches, SGD (lr 0.05, momentum 0.9):
   the emitted step (float32: step() gives the loss and gradients, which become p.grad before
   opt.step()), the plain PyTorch step (float32), and the plain step in float64 (the reference);
4. each step's loss passes when |emitted - ref64| <= max(1e-4 |ref64|, 10 |plain32 - ref64|),
   the agreement rule of DESIGN.md; exit 1 otherwise.
"""
import copy
import importlib.util
import os
import subprocess
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # 77: ctest's skip (tests/CMakeLists.txt runs this example)
    print(f"SKIP: {e}: the example needs Debian's python3-torch, python3-torchvision, python3-onnx")
    sys.exit(77)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
from export_for_training import export_for_training  # noqa: E402

STEPS, BATCH, CLASSES, LR, MOMENTUM = 20, 8, 10, 0.05, 0.9


def build():
    import gen_fixtures as gf  # torchvision's own ResNet blocks at reduced width
    torch.manual_seed(4)
    return gf.small_resnet(num_classes=CLASSES)


def batches():
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(BATCH, 3, 32, 32, generator=g),
             torch.randint(0, CLASSES, (BATCH,), generator=g)) for _ in range(4)]
    return [data[i % len(data)] for i in range(STEPS)]


def plain_loop(model, dtype, data):
    m = copy.deepcopy(model).to(dtype).train()
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM)
    losses = []
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(x.to(dtype)), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def emitted_loop(step_mod, model, data):
    m = copy.deepcopy(model).train()
    opt = torch.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM)
    named = dict(m.named_parameters())
    params = step_mod.params_from_module(m)  # the module's own tensors, bound by name
    losses = []
    for x, y in data:
        out = step_mod.step(params, {"input": x, "labels": y})
        for name in step_mod.PARAMS:
            named[name].grad = out[name + ".grad"]
        opt.step()  # updates the module's parameters, which params shares
        losses.append(out["loss"].item())
    return losses


def main(argv):
    magpie = argv[1] if len(argv) > 1 else os.path.join(ROOT, "build", "magpie")
    work = argv[2] if len(argv) > 2 else os.path.join(ROOT, "out", "train_emitted")
    os.makedirs(work, exist_ok=True)
    model = build()
    path = os.path.join(work, "model.onnx")
    export_for_training(model, (torch.randn(BATCH, 3, 32, 32),), path, input_names=["input"],
                        output_names=["logits"])
    plan = os.path.join(work, "plan")
    cmd = [magpie, "optimize", path, "--train", "--loss", "ce", "--mem-limit", "0.6",
           "--max-states", "500", "--threads", "1", "--quiet", "--emit", "torch", "-o", plan]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 3):
        print(r.stderr)
        return 1
    spec = importlib.util.spec_from_file_location("step", os.path.join(plan, "step.py"))
    step_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(step_mod)
    data = batches()
    ref = plain_loop(model, torch.float64, data)
    plain = plain_loop(model, torch.float32, data)
    emitted = emitted_loop(step_mod, model, data)
    bad = 0
    print(f"{'step':>4} {'emitted':>12} {'plain32':>12} {'ref64':>12} {'|emit-ref|':>10} "
          f"{'bound':>10}")
    for i, (e, p, r64) in enumerate(zip(emitted, plain, ref)):
        bound = max(1e-4 * abs(r64), 10 * abs(p - r64))
        ok = abs(e - r64) <= bound
        bad += not ok
        print(f"{i:4d} {e:12.6f} {p:12.6f} {r64:12.6f} {abs(e - r64):10.2e} {bound:10.2e}"
              f"{'' if ok else '  FAIL'}")
    print(f"{STEPS - bad} of {STEPS} steps agree with the float64 loop "
          f"(plan: {plan}, {len(step_mod.PARAMS)} parameters)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
