#!/usr/bin/python3
"""Where an emitted step's memory goes, statement by statement, as PyTorch's profiler sees it.

    bench/emit_memory_trace.py FIXTURE PLAN_DIR [--all]

Runs PLAN_DIR/step.py's _step with a marker before every statement: the marker records the
bytes of the tensors the step's locals hold at that point (what the schedule keeps live: the
figure magpie's peak counts) and makes an allocation of a unique size, so that the profiler's
memory events (torch.profiler.profile(profile_memory=True), as bench/emit_memory.py measures)
split exactly at statement boundaries. For each statement it prints the live bytes before it,
the peak of the running sum inside it (plus the bytes resident before the step) and the excess
of that peak over the live bytes before and after: workspace or temporaries the statement's
PyTorch calls allocate beyond the tensors it returns. Without --all only the statements with
an excess are printed, and the step's peak with the statement it falls in."""
import ast
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "emit"))
import emit_check  # noqa: E402
import emit_memory  # noqa: E402
from emit_memory import event_time  # noqa: E402

MARK0 = 7_340_033  # marker sizes MARK0 + 2 i: odd, far from any tensor of these fixtures


def instrument(mod):
    """mod._step rewritten with _mark(i, locals()) before its statement i; returns the
    statements' source lines."""
    src = open(mod.__file__).read()
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_step")
    lines = src.splitlines()
    body, texts = [], []
    for i, st in enumerate(fn.body):
        call = ast.parse(f"_mark({i}, locals())").body[0]
        body += [call, st]
        texts.append(lines[st.lineno - 1].strip())
    fn.body = body
    fn.decorator_list = []
    mini = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(mini)
    live = {}

    def _mark(i, loc):
        seen, total = set(), 0
        for v in loc.values():
            ts = v if isinstance(v, (tuple, list)) else (v,)
            for t in ts:
                if isinstance(t, torch.Tensor):
                    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
                    key = s.data_ptr()
                    if key not in seen:
                        seen.add(key)
                        total += s.nbytes() if hasattr(s, "nbytes") else s.size() * t.element_size()
        live[i] = total
        torch.empty(MARK0 + 2 * i, dtype=torch.uint8)

    mod.__dict__["_mark"] = _mark
    exec(compile(mini, mod.__file__, "exec"), mod.__dict__)
    return texts, live


def main(argv):
    fixture, plan, show_all = argv[1], argv[2], "--all" in argv
    model, inputs, _ = emit_check.fixture_model(fixture)
    torch.set_num_threads(1)
    mod = emit_check.load_module(os.path.join(plan, "step.py"), "step_trace")
    P = mod.params_from_module(copy.deepcopy(model))
    mod.step(P, inputs)
    res = emit_memory.resident_bytes(list(P.values()) + list(inputs.values()) +
                                     [mod._const(n, "cpu", P) for n in mod.BUFFERS if n not in P])
    texts, live = instrument(mod)
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        mod.step(P, inputs)
    evs = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    evs.sort(key=event_time)
    cur, seg = 0, -1
    start, top = {}, {}
    marks = {MARK0 + 2 * i: i for i in range(len(texts))}
    for e in evs:
        n = e.nbytes()
        if n in marks:
            seg = marks[n]
            start[seg] = cur
            top[seg] = cur
            continue
        if -n in marks:
            continue
        cur += n
        top[seg] = max(top.get(seg, cur), cur)
    n = len(texts)
    peak_seg = max(top, key=lambda s: top[s])
    print(f"{fixture} {plan}: resident before the step {res} B; measured peak {top[peak_seg] + res}"
          f" B, in statement {peak_seg}")
    print(f"{'#':>3s} {'live before':>11s} {'peak inside':>11s} {'excess':>8s}  statement")
    for i in range(n):
        lb = live.get(i, 0)
        la = live.get(i + 1, lb)
        pk = top.get(i, start.get(i, 0)) + res
        ex = pk - max(lb, la)
        if show_all or ex > 0 or i == peak_seg:
            mark = " <- peak" if i == peak_seg else ""
            print(f"{i:3d} {lb:11d} {pk:11d} {ex:8d}  {texts[i][:90]}{mark}")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
