#!/usr/bin/python3
"""The forward ops of the emitted step on every inference fixture, and (--train) the backward
ops of their training graphs: `magpie emit --torch` of the
fixture's model.onnx (its graph as magpie imports it), run on the fixture's inputs, against the
fixture's nn.Module rebuilt exactly as gen_fixtures.py built it (seed, perturbed parameters, eval
mode), in float64 (the reference) and float32, by DESIGN.md's agreement rule per output.

    emit_inference.py MAGPIE WORKDIR [--train] [FIXTURE...]

With --train: `magpie optimize model.onnx --train` (loss sum) of each inference fixture whose
initializers all keep their state_dict names (the exporter renames the Conv weights it fuses
with BatchNorm), emitted, against autograd on the eval-mode module; at least five fixtures must
be checked."""
import copy
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e}: the emitted-module tests need Debian's python3-torch, python3-onnx")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit_check  # noqa: E402


def stored_inputs(spec):
    """The fixture's inputs as its files hold them (spec.inputs() draws them again, which
    another PyTorch's generator may do differently)."""
    d = os.path.join(emit_check.FIXTURES, "numeric", spec.name)
    n = len(json.load(open(os.path.join(d, "meta.json")))["inputs"])
    return [torch.from_numpy(np.load(os.path.join(d, f"input_{k}.npy"))) for k in range(n)]


def reference(gf, spec):
    torch.manual_seed(spec.seed)
    model = gf.perturb_params(spec.build())
    # the file's weights wherever they keep their state_dict names: a PyTorch other than the one
    # that made the fixture may initialise a module differently from the same seed
    import onnx
    gf._sync_model_from_onnx(model, onnx.load(os.path.join(emit_check.FIXTURES, "numeric",
                                                           spec.name, "model.onnx")))
    inputs = stored_inputs(spec)
    model.eval()
    outs = {}
    for dt in (torch.float64, torch.float32):
        m = copy.deepcopy(model).to(dt)
        args = [x.to(dt) if x.is_floating_point() else x for x in inputs]
        with torch.no_grad():
            outs[dt] = [o.double() for o in gf.flatten_outputs(m(*args))]
    return inputs, outs[torch.float64], outs[torch.float32]


def check(magpie, work, gf, spec):
    d = os.path.join(emit_check.FIXTURES, "numeric", spec.name)
    meta = json.load(open(os.path.join(d, "meta.json")))
    py = os.path.join(work, spec.name + ".py")
    shapes = []
    for n, s in zip(meta["inputs"], meta["input_shapes"]):
        shapes += ["--shape", f"{n}={','.join(str(x) for x in s)}"]
    r = subprocess.run([magpie, "emit", os.path.join(d, "model.onnx"), "--torch", "-o", py]
                       + shapes, capture_output=True, text=True)
    if r.returncode:
        print(f"BAD {spec.name}: emit failed: {r.stderr.strip()}")
        return False
    mod = emit_check.load_module(py, "inf_" + spec.name)
    inputs, ref64, plain32 = reference(gf, spec)
    stored = [np.load(os.path.join(d, f"output_{i}.npy")) for i in range(len(meta["outputs"]))]
    if any(not np.allclose(p.numpy(), s, rtol=1e-5, atol=1e-6 * max(1.0, np.abs(s).max()))
           for p, s in zip(plain32, stored)):
        print(f"BAD {spec.name}: the rebuilt module does not reproduce the stored outputs")
        return False
    out = mod.step({}, {n: x for n, x in zip(meta["inputs"], inputs)})
    floor = 1e-6 * max(r.norm().item() for r in ref64)
    ok = True
    for name, r64, p32 in zip(meta["outputs"], ref64, plain32):
        good, err, bound = emit_check.judge(name, out[name], r64, p32, floor)
        ok &= good
        if not good:
            print(f"BAD {spec.name} {name}: |emitted - ref64| = {err:.3e}, bound {bound:.3e}")
    print(f"{'ok ' if ok else 'BAD'} {spec.name}: {len(meta['outputs'])} outputs")
    return ok


def check_train(magpie, work, gf, spec):
    """None when the fixture's names do not allow the comparison, else whether it agrees."""
    import onnx
    d = os.path.join(emit_check.FIXTURES, "numeric", spec.name)
    m = onnx.load(os.path.join(d, "model.onnx"))
    torch.manual_seed(spec.seed)
    model = gf.perturb_params(spec.build()).eval()
    gf._sync_model_from_onnx(model, m)
    inputs = stored_inputs(spec)
    named = dict(model.named_parameters())
    named.update(dict(model.named_buffers()))
    floats = [i.name for i in m.graph.initializer if i.data_type in (1, 11)]
    if any(n not in named for n in floats):
        return None
    meta = json.load(open(os.path.join(d, "meta.json")))
    extra = []
    for n, sh in zip(meta["inputs"], meta["input_shapes"]):
        extra += ["--shape", f"{n}={','.join(str(x) for x in sh)}"]
    plan = os.path.join(work, spec.name + ".train")
    emit_check.run_optimize(magpie, os.path.join(d, "model.onnx"), plan,
                            ["--mem-limit", "0.6", "--max-states", "100"] + extra)
    mod = emit_check.load_module(os.path.join(plan, "step.py"), "tr_" + spec.name)
    ins = dict(zip(meta["inputs"], inputs))
    order = meta["inputs"]
    ref = emit_check.autograd_ref(model, ins, order, torch.float64, gf.flatten_outputs,
                                  lambda y: y.sum())
    plain = emit_check.autograd_ref(model, ins, order, torch.float32, gf.flatten_outputs,
                                    lambda y: y.sum())
    out = mod.step(mod.params_from_module(copy.deepcopy(model)), ins)
    fails = emit_check.compare(out, ref, plain, mod.PARAMS, verbose=False)
    print(f"{'ok ' if not fails else 'BAD'} {spec.name} --train: loss and {len(mod.PARAMS)} "
          f"gradients" + (f", failing: {fails}" if fails else ""))
    return not fails


def main(argv):
    magpie, work = argv[1], argv[2]
    train = "--train" in argv[3:]
    names = [a for a in argv[3:] if a != "--train"]
    os.makedirs(work, exist_ok=True)
    sys.path.insert(0, emit_check.FIXTURES)
    import gen_fixtures as gf
    specs = [s for s in gf.NUMERIC if s.mode == "eval" and (not names or s.name in names)]
    if train:
        results = [r for r in (check_train(magpie, work, gf, s) for s in specs) if r is not None]
        print(f"{sum(results)} of {len(results)} training graphs of inference fixtures agree")
        return 0 if all(results) and len(results) >= (5 if not names else 1) else 1
    results = [check(magpie, work, gf, s) for s in specs]
    print(f"{sum(results)} of {len(results)} inference fixtures agree")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
