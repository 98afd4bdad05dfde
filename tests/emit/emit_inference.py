#!/usr/bin/python3
"""The forward ops of the emitted step on every inference fixture: `magpie emit --torch` of the
fixture's model.onnx (its graph as magpie imports it), run on the fixture's inputs, against the
fixture's nn.Module rebuilt exactly as gen_fixtures.py built it (seed, perturbed parameters, eval
mode), in float64 (the reference) and float32, by DESIGN.md's agreement rule per output.

    emit_inference.py MAGPIE WORKDIR [FIXTURE...]"""
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


def reference(gf, spec):
    torch.manual_seed(spec.seed)
    model = gf.perturb_params(spec.build())
    inputs = spec.inputs()
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


def main(argv):
    magpie, work = argv[1], argv[2]
    os.makedirs(work, exist_ok=True)
    sys.path.insert(0, emit_check.FIXTURES)
    import gen_fixtures as gf
    specs = [s for s in gf.NUMERIC if s.mode == "eval" and (len(argv) < 4 or s.name in argv[3:])]
    results = [check(magpie, work, gf, s) for s in specs]
    print(f"{sum(results)} of {len(results)} inference fixtures agree")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
