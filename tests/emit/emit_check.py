#!/usr/bin/python3
"""Checks a step module that `magpie emit --torch` wrote against PyTorch autograd on the original
nn.Module: the loss and every gradient, judged against a float64 run of the module as DESIGN.md's
agreement rule says (pass when ||emitted - ref64|| <= max(rtol * s, k * ||plain32 - ref64||), s
= ||ref64|| floored at a small fraction of the largest gradient's norm).

    emit_check.py FIXTURE MAGPIE WORKDIR [optimize options...]

FIXTURE is a training fixture of tests/fixtures/numeric (its module is rebuilt by
gen_fixtures.py and loaded with the file's weights). The script runs `magpie optimize
--train --emit torch` with the options given, imports WORKDIR/plan/step.py and compares.
Exit 0 when everything agrees, 1 otherwise, 77 (skipped) without torch."""
import copy
import importlib.util
import json
import os
import subprocess
import sys

try:
    import torch
    import numpy as np
    import onnx
except ImportError as e:  # the test's skip code (ctest SKIP_RETURN_CODE)
    print(f"SKIP: {e}: the emitted-module tests need Debian's python3-torch, python3-onnx")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "fixtures"))
RTOL, K = 1e-4, 10.0


def load_module(path, name="emitted_step"):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fixture_model(name):
    """The fixture's nn.Module in train mode with the weights its model.onnx holds, and its
    inputs by ONNX graph input name."""
    sys.path.insert(0, FIXTURES)
    import gen_fixtures as gf
    spec = next(s for s in gf.NUMERIC if s.name == name)
    d = os.path.join(FIXTURES, "numeric", name)
    m = onnx.load(os.path.join(d, "model.onnx"))
    model = gf._train_model(spec, m)
    inits = {i.name for i in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    inputs = {n: torch.from_numpy(np.load(os.path.join(d, f"input_{k}.npy")))
              for k, n in enumerate(names)}
    return model, inputs, gf.flatten_outputs


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    return [t for o in out for t in flatten(o)]


def autograd_ref(model, inputs, order, dtype, flatten, loss_fn):
    """loss and gradient of every named parameter (zeros for buffers) of a copy of model in
    dtype, with loss_fn of the first output."""
    m = copy.deepcopy(model).to(dtype)
    m.zero_grad(set_to_none=True)
    args = [inputs[n].to(dtype) if inputs[n].dtype.is_floating_point else inputs[n] for n in order]
    out = flatten(m(*args))[0]
    loss = loss_fn(out)
    loss.backward()
    named = dict(m.named_parameters())
    named.update(dict(m.named_buffers()))
    grads = {}
    for n, t in named.items():
        g = t.grad if isinstance(t, torch.nn.Parameter) and t.grad is not None else None
        grads[n] = (g if g is not None else torch.zeros_like(t)).detach().double()
    return loss.detach().double(), grads


def loss_inputs(kind, model, inputs, order, flatten):
    """The extra graph input --loss adds (magpie's names: 'target', 'labels') and the loss."""
    import torch.nn.functional as F
    if kind == "sum":
        return {}, lambda y: y.sum()
    with torch.no_grad():
        y = flatten(copy.deepcopy(model)(*[inputs[n] for n in order]))[0]
    g = torch.Generator().manual_seed(5)
    if kind == "mse":
        t = torch.randn(y.shape, generator=g)
        return {"target": t}, lambda out: F.mse_loss(out, t.to(out.dtype))
    lab = torch.randint(0, y.shape[-1], y.shape[:-1], generator=g)
    return {"labels": lab}, lambda out: F.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                        lab.reshape(-1))


def optim_ref(model, grads, dtype, kind, lr):
    """Each parameter (and buffer magpie trains) after one torch.optim step with grads."""
    named = dict(model.named_parameters())
    named.update(dict(model.named_buffers()))
    out = {}
    for n, t in named.items():
        if not t.is_floating_point():
            continue
        c = t.detach().to(dtype).clone().requires_grad_(True)
        c.grad = grads[n].to(dtype)
        opt = (torch.optim.SGD([c], lr=lr) if kind == "sgd" else
               torch.optim.SGD([c], lr=lr, momentum=0.9) if kind == "momentum" else
               torch.optim.Adam([c], lr=lr))
        opt.step()
        out[n] = c.detach().double()
    return out


def judge(name, got, ref64, plain32, floor):
    got, plain32 = got.detach().double().cpu(), plain32.double().cpu()
    err = (got - ref64).norm().item()
    base = (plain32 - ref64).norm().item()
    s = max(ref64.norm().item(), floor)
    bound = max(RTOL * s, K * base)
    return err <= bound, err, bound


def compare(out, ref, plain, params, verbose=True, suffix=".grad"):
    """Compares the emitted step's outputs with the references (gradients, or with
    suffix ".new" the parameters after the optimizer step); returns the failures."""
    loss64, g64 = ref
    loss32, g32 = plain
    floor = 1e-6 * max([g.norm().item() for g in g64.values()] + [1e-30])
    fails = []
    rows = [("loss", out["loss"], loss64, loss32)]
    for p in params:
        rows.append((p + suffix, out[p + suffix], g64[p], g32[p]))
    for name, got, r64, p32 in rows:
        ok, err, bound = judge(name, got, r64, p32, floor if name != "loss" else 0.0)
        if not ok:
            fails.append(name)
        if verbose and (not ok or name == "loss"):
            print(f"  {'ok ' if ok else 'BAD'} {name}: |emitted - ref64| = {err:.3e}, "
                  f"bound {bound:.3e}")
    return fails


def run_optimize(magpie, model_path, plan_dir, extra):
    cmd = [magpie, "optimize", model_path, "--train", "--emit", "torch", "-o", plan_dir,
           "--quiet", "--threads", "1"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 3):
        print(" ".join(cmd))
        print(r.stderr)
        raise SystemExit(1)
    return json.load(open(os.path.join(plan_dir, "report.json")))


def plan_ops(plan_dir):
    m = onnx.load(os.path.join(plan_dir, "optimized.onnx"))
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    return ops


def main(argv):
    if len(argv) < 4:
        print(__doc__)
        return 2
    fixture, magpie, work = argv[1], argv[2], argv[3]
    extra = argv[4:]
    require = None
    if "--require" in extra:  # --require OP: the plan must contain that op (a family's mark)
        i = extra.index("--require")
        require = extra[i + 1]
        extra = extra[:i] + extra[i + 2:]
    os.makedirs(work, exist_ok=True)
    plan = os.path.join(work, "plan")
    model_path = os.path.join(FIXTURES, "numeric", fixture, "model.onnx")
    if extra and extra[0] == "--force":  # --force FAMILY FORCE_PLAN: one rewrite of FAMILY
        fam, tool = extra[1], extra[2]
        r = subprocess.run([tool, model_path, plan, fam], capture_output=True, text=True)
        if r.returncode:
            print(r.stderr)
            return 1
        r = subprocess.run([magpie, "emit", plan, "--torch", "-o",
                            os.path.join(plan, "step.py")], capture_output=True, text=True)
        if r.returncode:
            print(r.stderr)
            return 1
        extra = ["--force", fam]
        require = require or {"fission": "FissionSlice", "remat": None, "swap": "Store"}[fam]
    else:
        run_optimize(magpie, model_path, plan, extra)
    ops = plan_ops(plan)
    if require and not ops.get(require):
        print(f"FAIL: the plan of {fixture} ({' '.join(extra)}) has no {require} node: {ops}")
        return 1
    mod = load_module(os.path.join(plan, "step.py"))
    model, inputs, flatten = fixture_model(fixture)
    opt = lambda k, d: extra[extra.index(k) + 1] if k in extra else d  # noqa: E731
    loss, optim, lr = opt("--loss", "sum"), opt("--optimizer", "none"), float(opt("--lr", 0.01))
    order = [n for n in inputs]
    more, loss_fn = loss_inputs(loss, model, inputs, order, flatten)
    ref = autograd_ref(model, inputs, order, torch.float64, flatten, loss_fn)
    plain = autograd_ref(model, inputs, order, torch.float32, flatten, loss_fn)
    suffix = ".grad"
    if optim != "none":
        ref = (ref[0], optim_ref(model, ref[1], torch.float64, optim, lr))
        plain = (plain[0], optim_ref(model, plain[1], torch.float32, optim, lr))
        suffix = ".new"
    P = mod.params_from_module(copy.deepcopy(model))
    out = mod.step(P, dict(inputs, **more))
    fails = compare(out, ref, plain, mod.PARAMS, suffix=suffix)
    if optim != "none":  # the update is applied in place, to the module's own tensors
        fails += [p + ".new (not in place)" for p in mod.PARAMS
                  if out[p + ".new"].data_ptr() != P[p].data_ptr()]
    marks = {k: ops.get(k, 0) for k in ("Store", "Load", "FissionSlice", "FissionAssemble",
                                         "FissionAccumulate")}
    print(f"{fixture} {' '.join(extra)}: {len(mod.PARAMS)} gradients + loss, "
          f"{sum(ops.values())} nodes, {marks}: {'FAIL ' + ', '.join(fails) if fails else 'ok'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
