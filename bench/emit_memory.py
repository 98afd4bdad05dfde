#!/usr/bin/python3
"""Peak memory of a plan's emitted PyTorch step, measured by PyTorch itself, beside magpie's
prediction and the plain PyTorch step (forward + backward of the original nn.Module).

    bench/emit_memory.py MAGPIE FIXTURE [--model FILE.onnx] [--eager-option OPT]... PLAN_DIR...
    bench/emit_memory.py --export FIXTURE OPSET OUT.onnx


Each PLAN_DIR holds optimized.onnx and step.py (magpie optimize --emit torch, or magpie emit);
its predicted peak is `magpie inspect --json` of optimized.onnx (the plan's file order, which is
its schedule). On the CPU the peak is the running sum of the allocations and frees the profiler
records (torch.profiler.profile(profile_memory=True)) plus the bytes resident before the step
(parameters, buffers and inputs), as magpie counts residents; with a GPU (--cuda) it is
torch.cuda.max_memory_allocated. The plain step is also itemized (bench/plain_memory_trace.py)
and its peak recomputed from its own blocks without the tensors autograd saves that magpie's
graph has no value for and with each step's workspace magpie's kernel's ("accounted"). One
line per plan, then the plain step's."""
import copy
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "emit"))
import emit_check  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plain_memory_trace  # noqa: E402

# usage: see the docstring; the eager figure is `magpie inspect FIXTURE/model.onnx --train`


def resident_bytes(tensors):
    seen, total = set(), 0
    for t in tensors:
        key = t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage") else t.data_ptr()
        if key in seen:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def event_time(e):
    """A profiler event's start (PyTorch 2.x: start_ns; 1.13: start_us)."""
    return e.start_ns() if hasattr(e, "start_ns") else e.start_us()


def cpu_peak(fn):
    """Peak of the running sum of the profiler's memory events (every allocation and free on
    the CPU, in time order) during fn(). prof.events() folds the allocations an op makes into
    the op; the raw events of the profiler's results keep each one."""
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    evs = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    evs.sort(key=event_time)
    cur = peak = 0
    for e in evs:
        cur += e.nbytes()
        peak = max(peak, cur)
    return peak


def predicted(magpie, onnx_path, *extra):
    r = subprocess.run([magpie, "inspect", onnx_path, "--json", *extra], capture_output=True,
                       text=True)
    if r.returncode:
        raise SystemExit(r.stderr)
    j = json.loads(r.stdout)
    return j["eager_peak_bytes"]


def export(fixture, opset, path):
    """The fixture's module exported by scripts/export_for_training.py at opset (17: the
    LayerNormalization op; 20: Gelu too, with a PyTorch whose exporter writes it)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from export_for_training import export_for_training
    model, inputs, _ = emit_check.fixture_model(fixture)
    names = list(inputs)
    export_for_training(model, tuple(inputs[n] for n in names), path, input_names=names,
                        output_names=["out"], opset=opset)


def main(argv):
    if argv[1] == "--export":
        return export(argv[2], int(argv[3]), argv[4])
    model_file, eager_opts = None, []
    while "--eager-option" in argv:  # an option of the eager figure's `magpie inspect --train`
        i = argv.index("--eager-option")
        eager_opts.append(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    if "--model" in argv:  # the ONNX file the plans were made from (default: the fixture's)
        i = argv.index("--model")
        model_file = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    magpie, fixture, plans = argv[1], argv[2], argv[3:]
    model, inputs, flatten = emit_check.fixture_model(fixture)
    torch.set_num_threads(1)
    rows = []
    for plan in plans:
        mod = emit_check.load_module(os.path.join(plan, "step.py"), "step_" + str(len(rows)))
        m = copy.deepcopy(model)
        P = mod.params_from_module(m)
        mod.step(P, inputs)  # warm-up: constants moved once, lazy initialisation done
        res = resident_bytes(list(P.values()) + list(inputs.values()) +
                             [mod._const(n, "cpu", P) for n in mod.BUFFERS if n not in P])
        peak = cpu_peak(lambda: mod.step(P, inputs)) + res
        rows.append((plan, predicted(magpie, os.path.join(plan, "optimized.onnx")), peak))
    m = copy.deepcopy(model)
    order = [n for n, _, _ in mod.INPUTS]

    def plain():
        m.zero_grad(set_to_none=True)
        flatten(m(*[inputs[n] for n in order]))[0].sum().backward()
    plain()
    m.zero_grad(set_to_none=True)
    res = resident_bytes(list(m.parameters()) + list(m.buffers()) + list(inputs.values()))
    plain_peak = cpu_peak(plain) + res
    eager_model = model_file or os.path.join(emit_check.FIXTURES, "numeric", fixture, "model.onnx")
    eager = predicted(magpie, eager_model, "--train", *eager_opts)
    # the plain step itemized (bench/plain_memory_trace.py): its peak without the tensors autograd
    # saves that magpie's graph has no value for, and with each step's workspace magpie's kernel's
    a = plain_memory_trace.analyse(model, inputs, flatten, magpie, eager_model, eager_opts)
    rws = plain_memory_trace.step_rows(a["blocks"], a["tops"])
    _, acct = plain_memory_trace.accounted(a["blocks"], rws, a["groups"], a["res"], eager, True)
    print(f"{fixture}: magpie's eager training graph {eager} B predicted; the plain PyTorch step "
          f"(forward + backward) {plain_peak} B measured, {acct} B accounted (without what "
          f"autograd keeps that magpie's graph does not, PyTorch's workspace replaced by magpie's; "
          f"its own measurement of the plain step: {a['plain_peak']} B)")
    print(f"{'plan':40s} {'predicted':>10s} {'measured':>10s} {'meas/pred':>9s} "
          f"{'pred/eager':>10s} {'meas/plain':>10s} {'meas/acct':>9s}")
    for plan, pred, peak in rows:
        print(f"{plan[-40:]:40s} {pred:10d} {peak:10d} {peak / pred:9.3f} {pred / eager:10.3f} "
              f"{peak / plain_peak:10.3f} {peak / acct:9.3f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
