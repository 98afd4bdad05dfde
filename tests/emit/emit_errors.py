#!/usr/bin/python3
"""Two refusals of the emitted PyTorch step, each with its message:
  - params_from_module on a module that lacks some of the plan's parameter names fails listing
    them (KeyError), before any step runs;
  - an op configuration of magpie's table without a PyTorch form in the emitter is refused by
    `magpie emit` with exit 2, the node and the op named, and no file written: MaxPool's Indices
    output (ONNX's flat indices over the whole tensor, not PyTorch's per-plane ones) and a
    GridSample in cubic mode on a 5-D X (magpie's kernel samples it; PyTorch's grid sampler has
    no 3-D cubic mode).

    emit_errors.py MAGPIE WORKDIR"""
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
    import onnx
    from onnx import helper, TensorProto
except ImportError as e:
    print(f"SKIP: {e}: the emitted-module tests need Debian's python3-torch, python3-onnx")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit_check  # noqa: E402


def unbindable(magpie, work):
    plan = os.path.join(work, "plan")
    emit_check.run_optimize(magpie, os.path.join(emit_check.FIXTURES, "numeric",
                                                 "mlp_dropout_train", "model.onnx"),
                            plan, ["--mem-limit", "0.9", "--max-states", "20"])
    mod = emit_check.load_module(os.path.join(plan, "step.py"))
    model, _, _ = emit_check.fixture_model("mlp_dropout_train")
    wrapped = torch.nn.Sequential(model)  # every name gains a "0." prefix
    try:
        mod.params_from_module(wrapped)
    except KeyError as e:
        msg = str(e)
        missing = [p for p in mod.PARAMS if p not in msg]
        if "params_from_module" in msg and not missing and "0." + mod.PARAMS[0] in msg:
            print(f"ok: unbindable names refused: {msg[:160]}...")
            return True
        print(f"FAIL: the message does not list every unbound name ({missing}): {msg}")
        return False
    print("FAIL: params_from_module bound a module without the plan's names")
    return False


def refused_one(magpie, work, tag, nodes, inputs, outputs, opset, name, op):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                          opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(work, tag + ".onnx")
    onnx.save(m, path)
    args = []
    for v in inputs:  # magpie itself runs the graph: only the emitter lacks a form
        f = os.path.join(work, f"{tag}_{v.name}.npy")
        dims = [d.dim_value for d in v.type.tensor_type.shape.dim]
        np.save(f, np.random.RandomState(0).uniform(-1.2, 1.2, dims).astype(np.float32))
        args += ["-i", f"{v.name}={f}"]
    r = subprocess.run([magpie, "run", path, "-o", os.path.join(work, tag + "_out")] + args,
                       capture_output=True, text=True)
    if r.returncode:
        print(f"FAIL: magpie run {tag}: {r.stderr.strip()}")
        return False
    out = os.path.join(work, tag + "_step.py")
    r = subprocess.run([magpie, "emit", path, "--torch", "-o", out], capture_output=True,
                       text=True)
    ok = (r.returncode == 2 and name in r.stderr and op in r.stderr and not os.path.exists(out))
    print(f"{'ok' if ok else 'FAIL'}: emit of {tag}: exit {r.returncode}, {r.stderr.strip()}")
    return ok


def refused(magpie, work):
    F, I64 = TensorProto.FLOAT, TensorProto.INT64
    vi = helper.make_tensor_value_info
    a = refused_one(magpie, work, "maxpool_indices",
                    [helper.make_node("MaxPool", ["x"], ["y", "idx"], name="pool_with_indices",
                                      kernel_shape=[2, 2], strides=[2, 2])],
                    [vi("x", F, [1, 2, 4, 4])], [vi("y", F, [1, 2, 2, 2]),
                                                 vi("idx", I64, [1, 2, 2, 2])],
                    13, "pool_with_indices", "MaxPool")
    b = refused_one(magpie, work, "gridsample_cubic_5d",
                    [helper.make_node("GridSample", ["x", "grid"], ["y"], name="cubic_volume",
                                      mode="cubic")],
                    [vi("x", F, [1, 2, 3, 4, 5]), vi("grid", F, [1, 2, 2, 2, 3])],
                    [vi("y", F, [1, 2, 2, 2, 2])], 20, "cubic_volume", "GridSample")
    return a and b


def main(argv):
    magpie, work = argv[1], argv[2]
    os.makedirs(work, exist_ok=True)
    a = unbindable(magpie, work)
    b = refused(magpie, work)
    return 0 if a and b else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
