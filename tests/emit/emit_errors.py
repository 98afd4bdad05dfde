#!/usr/bin/python3
"""Two refusals of the emitted PyTorch step, each with its message:
  - params_from_module on a module that lacks some of the plan's parameter names fails listing
    them (KeyError), before any step runs;
  - an op of magpie's table without a PyTorch form in the emitter (MaxPool's Indices output:
    ONNX's flat indices over the whole tensor, not PyTorch's per-plane ones) is refused by
    `magpie emit` with exit 2, the node and the op named, and no file written.

    emit_errors.py MAGPIE WORKDIR"""
import os
import subprocess
import sys

try:
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


def refused(magpie, work):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 2])
    i = helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 2, 2, 2])
    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], name="pool_with_indices",
                            kernel_shape=[2, 2], strides=[2, 2])
    m = helper.make_model(helper.make_graph([node], "g", [x], [y, i]),
                          opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(work, "maxpool_indices.onnx")
    onnx.save(m, path)
    out = os.path.join(work, "refused_step.py")
    r = subprocess.run([magpie, "emit", path, "--torch", "-o", out], capture_output=True,
                       text=True)
    ok = (r.returncode == 2 and "pool_with_indices" in r.stderr and "MaxPool" in r.stderr
          and not os.path.exists(out))
    print(f"{'ok' if ok else 'FAIL'}: emit of MaxPool with Indices: exit {r.returncode}, "
          f"{r.stderr.strip()}")
    return ok


def main(argv):
    magpie, work = argv[1], argv[2]
    os.makedirs(work, exist_ok=True)
    a = unbindable(magpie, work)
    b = refused(magpie, work)
    return 0 if a and b else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
