#!/usr/bin/python3
"""Where the plain PyTorch step's memory goes, as PyTorch's profiler sees it, beside magpie's eager
order of the training graph.

    bench/plain_memory_trace.py FIXTURE [--magpie MAGPIE [--model FILE.onnx]
                                [--eager-option OPT]...] [--timeline] [--check BYTES]

The plain step is bench/emit_memory.py's: the fixture's nn.Module, forward, sum of the first
output, backward, measured the same way (torch.profiler.profile(profile_memory=True), the running
sum of every allocation and free plus the parameters, buffers and inputs resident before; the
figure it prints is emit_memory.py's own, and the trace's peak must equal it). The profiler's
event tree (kineto_results.experimental_event_tree(): each allocation with its address and the
ops it happened inside) is replayed block by block, and every block is known by

  - its step: the forward module (a record_function around each module's forward, named by its
    path; a buffer that an in-place module rewrote is known by the last leaf module that returned
    it) or the autograd node whose backward allocated it ("bwd NativeBatchNormBackward0 of
    features.1": a backward node's sequence number is its forward op's), and the aten op;
  - what holds it: a tensor some autograd node saved for its backward (the grad_fn graph is walked
    after the forward; every `_saved_*` tensor's storage address is recorded), a parameter's
    .grad, the loss, the gradient seed, a gradient between backward nodes, or a workspace: a block
    allocated and freed inside one step (a kernel's own buffers).

It prints the blocks live at the peak and their bytes per class; --timeline every step's live
bytes before it, peak inside it and workspace at that peak. With --magpie (schedule --train
--order eager --json of the fixture's model.onnx, or FILE.onnx, with the options given):
  - both steps side by side, aligned by module and phase (magpie's step_bytes and
    step_workspace_bytes per node, the largest of each module's run of nodes);
  - at magpie's eager peak, the plain step's tensors at the peak moment of the aligned step beside
    magpie's hot-spots, matched by phase, module and bytes: every byte of the difference, item by
    item;
  - the plain step's peak recomputed from its own blocks without the tensors autograd saves that
    magpie's graph has no value for (max pooling's int64 indices, batch norm's mean and inverse
    standard deviation), and then also with each step's workspace replaced by magpie's kernel's
    workspace for the aligned step ("accounted", bench/emit_memory.py's column).
--check BYTES (the test): exit 1 unless the trace's peak is the measured one, the items at
magpie's peak add up to the difference, and the accounted plain step is magpie's eager peak to
within BYTES. PyTorch 1.13's record_function allocates a 4-byte handle and a 288-byte buffer per
marker, both freed as its range opens: they are left out of the sum."""
import copy
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "emit"))
import emit_check  # noqa: E402  (exits 77, the tests' skip, without torch)
import torch  # noqa: E402

BWD = "autograd::engine::evaluate_function: "


def storage_key(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    return s.data_ptr()


def saved_tensors(root):
    """{storage address: [(node name, attribute)]} of every tensor an autograd node of the graph
    under root saved for its backward."""
    out, seen, keep, stack = {}, set(), [], [root]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        keep.append(fn)  # the wrapper objects are made on access: keep each so no id is reused
        for a in dir(fn):
            if not a.startswith("_saved_"):
                continue
            try:
                v = getattr(fn, a)
            except Exception:  # a saved tensor already freed, or not a tensor
                continue
            for t in v if isinstance(v, (tuple, list)) else (v,):
                if isinstance(t, torch.Tensor) and t.numel():
                    out.setdefault(storage_key(t), []).append((fn.name(), a[len("_saved_"):]))
        stack += [f for f, _ in fn.next_functions]
    return out


def module_markers(model, outputs):
    """Forward hooks that open a record_function named by each module's path around its forward;
    each call of a leaf module appends (name, storage address of its output) to outputs, in call
    order, so that a buffer that an in-place module rewrote (ReLU(inplace=True), the residual
    `out += identity`) is known by the last leaf module that returned it."""
    from torch.autograd.profiler import record_function
    handles, open_ = [], {}
    for name, mod in model.named_modules():
        if not name:
            continue
        leaf = not any(True for _ in mod.children())

        def pre(m, args, name=name):
            rf = record_function("module: " + name)
            rf.__enter__()
            open_.setdefault(name, []).append(rf)

        def post(m, args, out, name=name, leaf=leaf):
            if leaf and isinstance(out, torch.Tensor):
                outputs.append((name, storage_key(out)))
            open_[name].pop().__exit__(None, None, None)
        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    return handles


def producers(tree, outputs):
    """{storage address: [(end time of the module's call, module)]} from the leaf modules' outputs
    matched, call by call, to their markers' events."""
    calls, stack = {}, list(tree)
    while stack:
        e = stack.pop()
        if e.name.startswith("module: "):
            calls.setdefault(e.name[len("module: "):], []).append(e)
        stack += e.children
    for v in calls.values():
        v.sort(key=lambda e: e.start_time_ns)
    seen, out = {}, {}
    for name, ptr in outputs:
        k = seen.get(name, 0)
        seen[name] = k + 1
        if k < len(calls.get(name, [])):
            out.setdefault(ptr, []).append((calls[name][k].end_time_ns, name))
    return out


def flatten(tree):
    """Every allocation event of the tree with its chain of enclosing ops, in time order."""
    allocs, stack = [], [(e, ()) for e in tree]
    while stack:
        e, chain = stack.pop()
        if e.name == "[memory]":
            allocs.append((e.start_time_ns, e, chain))
            continue
        stack += [(c, chain + (e,)) for c in e.children]
    allocs.sort(key=lambda x: x[0])
    return allocs


def marker_frees(tree):
    """ids of the free events of the blocks the record_function markers themselves allocate
    (PyTorch 1.13: a 4-byte handle made just before the range opens, a 288-byte buffer inside
    it, both freed as the range opens, before the module's first op)."""
    out, stack = set(), list(tree)
    while stack:
        e = stack.pop()
        kids = sorted(e.children, key=lambda c: c.start_time_ns)
        if e.name.startswith("module: "):
            for c in kids:
                if c.name == "[memory]":
                    if c.extra_fields.alloc_size < 0:
                        out.add(c.id)
                elif c.name != "aten::empty":
                    break
        stack += kids
    return out


def seq_modules(allocs_tree):
    """{sequence number: module path} of the forward ops (the module of their innermost marker)."""
    out, stack = {}, [(e, None) for e in allocs_tree]
    while stack:
        e, mod = stack.pop()
        if e.name.startswith("module: "):
            mod = e.name[len("module: "):]
        sn = getattr(e.extra_fields, "sequence_number", -1)
        if mod and isinstance(sn, int) and sn >= 0 and not e.name.startswith(BWD):
            out.setdefault(sn, mod)
        stack += [(c, mod) for c in e.children]
    return out


def describe(chain, seqmod):
    """(phase, where, op) of an allocation from its enclosing ops."""
    top = chain[0] if chain else None
    inner = [e.name for e in chain if e.name.startswith("aten::")]
    op = inner[-1] if inner else (chain[-1].name if chain else "?")
    if top is not None and top.name.startswith(BWD):
        sn = getattr(top.extra_fields, "sequence_number", -1)
        return "bwd", f"{top.name[len(BWD):]} of {seqmod.get(sn, '?')}", op
    mods = [e.name[len("module: "):] for e in chain if e.name.startswith("module: ")]
    return "fwd", mods[-1] if mods else (top.name if top is not None else "?"), op


def analyse(model, inputs, flat, magpie=None, model_path=None, opts=()):
    """The plain step of model measured and its blocks classified; with magpie, the eager order of
    model_path's training graph (schedule --json) aligned with it."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import emit_memory  # its measurement of the plain step (emit_memory imports this module)
    m = copy.deepcopy(model)
    order = list(inputs)  # the fixtures' graph inputs, in order: the module's arguments

    def plain():
        m.zero_grad(set_to_none=True)
        flat(m(*[inputs[n] for n in order]))[0].sum().backward()
    plain()  # warm-up, as bench/emit_memory.py does
    m.zero_grad(set_to_none=True)
    res = emit_memory.resident_bytes(list(m.parameters()) + list(m.buffers()) +
                                     list(inputs.values()))
    plain_peak = emit_memory.cpu_peak(plain) + res

    outputs = []
    handles = module_markers(m, outputs)
    plain()  # with the markers once more, unprofiled
    m.zero_grad(set_to_none=True)
    outputs.clear()
    saved, outs = {}, {}
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = flat(m(*[inputs[n] for n in order]))[0]
        loss = out.sum()
        saved = saved_tensors(loss.grad_fn)
        outs = {storage_key(out): "the module's output", storage_key(loss): "the loss"}
        del out  # as in emit_memory.py's plain step: the output is not held through the backward
        loss.backward()
        grads = {storage_key(p.grad): n + ".grad" for n, p in m.named_parameters()
                 if p.grad is not None}
        del loss
    for h in handles:
        h.remove()
    tree = prof.profiler.kineto_results.experimental_event_tree()
    allocs = flatten(tree)
    seqmod = seq_modules(tree)

    # the markers' own blocks: each freed at its range's start, allocated last before that
    frees = marker_frees(tree)
    last_alloc, skip = {}, set()
    for t, e, chain in allocs:
        f = e.extra_fields
        if f.alloc_size > 0:
            last_alloc[f.ptr] = e.id
        elif e.id in frees and f.ptr in last_alloc:
            skip |= {e.id, last_alloc[f.ptr]}
    blocks = replay(allocs, skip, seqmod)
    made = producers(tree, outputs)
    for b in blocks:  # a forward buffer is named by the last leaf module that returned it
        if b["phase"] != "fwd":
            continue
        ends = [(t, n) for t, n in made.get(b["ptr"], [])
                if b["t"] <= t and (b["t_free"] is None or t <= b["t_free"])]
        if ends and max(ends)[1] != b["where"]:
            b["alloc_in"] = b["where"]
            b["where"] = max(ends)[1]
    classify(blocks, saved, grads, outs)
    tops = {}
    for b in blocks:
        tops.setdefault(b["top"], b["top_name"])
    mj = groups = None
    if magpie:
        mj, groups = magpie_groups(magpie, model_path, opts, dict(m.named_modules()))
    residents = [n for n, _ in m.named_parameters()] + [n for n, _ in m.named_buffers()] + \
        list(inputs)
    return dict(blocks=blocks, tops=tops, res=res, plain_peak=plain_peak, magpie_j=mj,
                groups=groups, params=dict(m.named_parameters()), modules=dict(m.named_modules()),
                residents=residents)


def main(argv):
    fixture, timeline = argv[1], "--timeline" in argv
    magpie, model_file, opts = None, None, []
    if "--magpie" in argv:
        magpie = argv[argv.index("--magpie") + 1]
    if "--model" in argv:
        model_file = argv[argv.index("--model") + 1]
    for k, a in enumerate(argv):
        if a == "--eager-option":
            opts.append(argv[k + 1])
    model, inputs, flat = emit_check.fixture_model(fixture)
    torch.set_num_threads(1)
    a = analyse(model, inputs, flat, magpie, model_file or os.path.join(
        emit_check.FIXTURES, "numeric", fixture, "model.onnx"), opts)
    same, closed, off = report(fixture, a["blocks"], a["tops"], a["res"], a["plain_peak"],
                               timeline, a["magpie_j"], a["groups"], a["params"], a["modules"],
                               a["residents"])
    if "--check" in argv:  # the test: the trace is the measurement, the items add up, and the
        # plain step accounted is magpie's eager prediction to within BYTES
        lim = int(argv[argv.index("--check") + 1])
        ok = same and closed and off is not None and abs(off) <= lim
        print(f"check: trace peak = measured peak {same}, items add up {closed}, accounted - "
              f"eager {off:+d} B (limit {lim}): {'ok' if ok else 'FAILED'}")
        return 0 if ok else 1

def step_of(chain):
    """The step an allocation belongs to: the backward node it is in, or the innermost module
    whose forward it is in (else the top-level op)."""
    if not chain:
        return None
    if chain[0].name.startswith(BWD):
        return chain[0]
    mods = [e for e in chain if e.name.startswith("module: ")]
    return mods[-1] if mods else chain[0]


def replay(allocs, skip, seqmod):
    """The blocks of the step in allocation order: size, address, where they were allocated, and
    the event indices (and top-level ops) of their allocation and free."""
    blocks, open_, bwd_start = [], {}, None
    for k, (t, e, chain) in enumerate(allocs):
        if e.id in skip:
            continue
        f = e.extra_fields
        top = step_of(chain)
        if bwd_start is None and top is not None and top.name.startswith(BWD):
            bwd_start = k
        if f.alloc_size > 0:
            ph, where, op = describe(chain, seqmod)
            tph, twhere, _ = describe(chain[:chain.index(top) + 1] if top else (), seqmod)
            b = dict(n=f.alloc_size, ptr=f.ptr, at=k, freed=None, top=id(top), t=t, t_free=None,
                     top_name=f"{tph} {twhere}", free_top=None, phase=ph, where=where, op=op,
                     chain=" > ".join(x.name for x in chain[1:] if x.name.startswith("aten::")))
            open_[f.ptr] = b
            blocks.append(b)
        elif f.ptr in open_:  # else a block allocated before profiling: not counted
            b = open_.pop(f.ptr)
            b["freed"], b["free_top"], b["t_free"] = k, id(top), t
    for b in blocks:
        b["bwd_start"] = bwd_start
    return blocks


def classify(blocks, saved, grads, outs):
    """What holds each block: saved for the backward, a parameter's gradient, the output or the
    loss, the gradient seed, a workspace (allocated and freed inside one top-level op), a
    gradient between backward nodes, or a forward value freed at its last use."""
    for b in blocks:
        bs = b["bwd_start"]
        live_at_bwd = b["at"] < bs and (b["freed"] is None or b["freed"] > bs)
        transient = b["freed"] is not None and b["free_top"] == b["top"]
        if live_at_bwd and b["ptr"] in saved:
            b["cls"] = "saved for the backward"
            b["by"] = ", ".join(f"{a}.{x}" for a, x in sorted(set(saved[b["ptr"]])))
        elif b["freed"] is None and b["phase"] == "bwd" and b["ptr"] in grads:
            b["cls"], b["by"] = "parameter gradient", grads[b["ptr"]]
        elif live_at_bwd and b["ptr"] in outs:
            b["cls"], b["by"] = outs[b["ptr"]], ""
        elif b["phase"] == "fwd" and b["where"] == "aten::ones_like":
            b["cls"], b["by"] = "the gradient seed", ""
        elif transient:
            b["cls"], b["by"] = f"workspace ({b['phase']})", b["chain"]
        elif b["phase"] == "bwd":
            b["cls"], b["by"] = "gradient between backward nodes", ""
        else:
            b["cls"], b["by"] = "forward value, freed at its last use", ""


def running(blocks, keep=lambda b: True):
    """Peak of the running sum of the blocks keep() selects, and the event index it is at."""
    ev = []
    for b in blocks:
        if keep(b):
            ev.append((b["at"], b["n"]))
            if b["freed"] is not None:
                ev.append((b["freed"], -b["n"]))
    ev.sort()
    cur, peak, at = 0, 0, -1
    for k, n in ev:
        cur += n
        if cur > peak:
            peak, at = cur, k
    return peak, at


def live_at(blocks, k):
    return [b for b in blocks if b["at"] <= k and (b["freed"] is None or b["freed"] > k)]


def place(b):
    """Where a block was made: its module, and the module whose buffer it was, if rewritten."""
    return b["where"] + (f" (in {b['alloc_in']}'s buffer)" if "alloc_in" in b else "")


def step_rows(blocks, tops):
    """Per step (forward module or backward node), in time order: its name, the live bytes before
    it, the peak inside it, the workspace live at that peak and its largest block."""
    order, seen, rows = [], set(), []
    for b in blocks:
        if b["top"] not in seen:
            seen.add(b["top"])
            order.append(b["top"])
    for t in order:
        ks = [b["at"] for b in blocks if b["top"] == t] + \
             [b["freed"] for b in blocks if b["free_top"] == t]
        k0, k1 = min(ks), max(ks)
        before = sum(b["n"] for b in live_at(blocks, k0 - 1))
        best, bk = -1, k0
        for k in range(k0, k1 + 1):
            s_ = sum(b["n"] for b in live_at(blocks, k))
            if s_ > best:
                best, bk = s_, k
        ws = [b for b in live_at(blocks, bk) if b["top"] == t and b["cls"].startswith("workspace")]
        rows.append(dict(name=tops[t], before=before, peak=best, at=bk, k0=k0, k1=k1, top=t,
                         ws=sum(b["n"] for b in ws),
                         big=max(ws, key=lambda b: b["n"]) if ws else None))
    return rows


def module_of(node, modules):
    """The module path of a magpie node from its exporter name: '/layer4/layer4.0/downsample/
    downsample.1/BatchNormalization/grad/BatchNormGrad21' -> 'layer4.0.downsample.1'; the second
    call of a module (relu_1) is the module (relu)."""
    segs = node.strip("/").split("/")
    cut = [k for k, x in enumerate(segs) if x == "grad" or (x.startswith("grad") and
                                                             x[4:].isdigit())]
    if cut:  # a backward node (.../Relu/grad/UnaryGrad17) or a gradient value (.../Relu/grad16)
        segs = segs[:cut[0]]
    path = ""
    for seg in segs[:-1]:
        head, _, tail = seg.rpartition(".")
        if head and path.endswith(head):
            path = path + "." + tail
        else:
            path = (path + "." if path else "") + seg
    if path not in modules and "_" in path:
        base, _, k = path.rpartition("_")
        if k.isdigit() and base in modules:
            path = base
    return path


def magpie_groups(magpie, model_path, opts, modules):
    """magpie's eager order of the training graph (schedule --json): its runs of consecutive steps
    of one module and phase, each with the largest step's bytes and workspace."""
    r = subprocess.run([magpie, "schedule", model_path, "--train", "--order", "eager", "--json",
                        *opts], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr)
    j = json.loads(r.stdout)
    groups = []
    for name, b, w in zip(j["order_nodes"], j["step_bytes"], j["step_workspace_bytes"]):
        phase = "bwd" if "/grad/" in name or name.startswith("train/") else "fwd"
        key = (phase, module_of(name, modules) or name)
        if groups and groups[-1]["key"] == key:
            g = groups[-1]
        else:
            g = dict(key=key, nodes=[], peak=-1, ws=0)
            groups.append(g)
        g["nodes"].append(name.rsplit("/", 1)[-1])
        if b > g["peak"]:
            g["peak"], g["ws"] = b, w
    return j, groups


def pt_key(name):
    ph, _, rest = name.partition(" ")
    return (ph, rest.rsplit(" of ", 1)[-1])


def compare(rows, res, j, groups):
    """The plain step's steps beside magpie's eager order's, aligned by module and phase."""
    import difflib
    a = [pt_key(r["name"]) for r in rows]
    b = [g["key"] for g in groups]
    print(f"\nmagpie's eager order (schedule --train --order eager): peak {j['peak_bytes']} B at "
          f"step {j['peak_step']} ({j['order_nodes'][j['peak_step']]}), resident "
          f"{j['resident_bytes']} B")
    print(f"{'PyTorch: peak':>13s} {'workspace':>9s} | {'magpie: peak':>12s} {'workspace':>9s} | "
          f"{'difference':>10s}  step")
    for tag, i0, i1, j0, j1 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for k in range(max(i1 - i0, j1 - j0)):
            r = rows[i0 + k] if i0 + k < i1 else None
            g = groups[j0 + k] if j0 + k < j1 else None
            left = f"{r['peak'] + res:13d} {r['ws']:9d}" if r else " " * 23
            right = f"{g['peak']:12d} {g['ws']:9d}" if g else " " * 22
            diff = f"{r['peak'] + res - g['peak']:+10d}" if r and g else " " * 10
            name = r["name"] if r else f"{g['key'][0]} {g['key'][1]}"
            nodes = f" [{', '.join(g['nodes'])}]" if g else ""
            print(f"{left} | {right} | {diff}  {name}{nodes}")


# What autograd saves for the backward that magpie's training graph has no value for: max
# pooling's int64 indices (magpie's MaxPoolGrad recomputes each window's argmax from X) and batch
# norm's saved mean and inverse standard deviation (magpie's BatchNormGrad recomputes them).
AUTOGRAD_ONLY = {"MaxPool2DWithIndicesBackward0.result1", "NativeBatchNormBackward0.result1",
                 "NativeBatchNormBackward0.result2"}


def autograd_only(b):
    return b["cls"] == "saved for the backward" and set(b["by"].split(", ")) <= AUTOGRAD_ONLY


def aligned(rows, groups):
    """(plain step row, magpie group) pairs, None where a side has no step there."""
    import difflib
    a, b, out = [pt_key(r["name"]) for r in rows], [g["key"] for g in groups], []
    for tag, i0, i1, j0, j1 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for k in range(max(i1 - i0, j1 - j0)):
            out.append((rows[i0 + k] if i0 + k < i1 else None,
                        groups[j0 + k] if j0 + k < j1 else None))
    return out


def accounted(blocks, rows, groups, res, eager, quiet=False):
    """The plain step's peak recomputed from its own blocks: without what autograd keeps that
    magpie's graph does not, and then also with each step's workspace (its blocks allocated and
    freed inside it) replaced by magpie's workspace for the aligned step (its largest step's)."""
    p1, _ = running(blocks, lambda b: not autograd_only(b))
    p2, where = 0, None
    for r, g in aligned(rows, groups):
        if r is None:
            continue
        ws_mg = g["ws"] if g else 0
        for k in range(r["k0"], r["k1"] + 1):
            n = sum(b["n"] for b in live_at(blocks, k)
                    if not autograd_only(b) and not (b["top"] == r["top"] and
                                                     b["cls"].startswith("workspace")))
            if n + ws_mg > p2:
                p2, where = n + ws_mg, r["name"]
    if quiet:
        return p1 + res, p2 + res
    print(f"\nthe plain step less what autograd keeps and magpie's graph does not "
          f"({', '.join(sorted(AUTOGRAD_ONLY))}): peak {p1 + res} B")
    print(f"  and with each step's workspace that of magpie's kernel for it: peak {p2 + res} B, in "
          f"{where} (magpie's eager peak: {eager} B, {p2 + res - eager:+d} B)")
    return p1 + res, p2 + res


def itemize(blocks, rows, groups, j, res, params, modules, residents):
    """The plain step's tensors at the peak moment of the step that magpie's eager peak is aligned
    with, beside the values live at magpie's peak (its hot-spots), matched by phase, module and
    bytes (a parameter's gradient by name); what is left on either side is the difference."""
    import difflib
    pk, n0, gi = j["peak_step"], 0, None
    for i, g in enumerate(groups):
        if n0 <= pk < n0 + len(g["nodes"]):
            gi = i
        n0 += len(g["nodes"])
    a, b = [pt_key(r["name"]) for r in rows], [g["key"] for g in groups]
    ri = None
    for tag, i0, i1, j0, j1 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal" and j0 <= gi < j1:
            ri = i0 + gi - j0
    if ri is None:
        print("\n(magpie's peak step has no matching step of the plain step)")
        return False
    r = rows[ri]

    def pt_item(b):
        if b["cls"] == "parameter gradient":
            return ("grad", b["by"])
        return (b["phase"], b["where"].rsplit(" of ", 1)[-1], b["n"])

    def mg_item(h):
        n = h["name"]
        if n.endswith(".grad") and n[:-5] in params:
            return ("grad", n)
        if n == "loss":  # --loss sum's ReduceSum: the plain step's .sum()
            return ("fwd", "aten::sum", h["bytes"])
        bwd = "/grad" in n or n.startswith("train/")
        return ("bwd" if bwd else "fwd", module_of(n, modules) or n, h["bytes"])
    pt, mg, common_res, mg_only, pt_only, both = {}, {}, 0, [], [], 0
    for x in live_at(blocks, r["at"]):
        pt.setdefault(pt_item(x), []).append(x)
    for h in j["hotspots"]:
        if h["name"] in residents:
            common_res += h["bytes"]
        else:
            mg.setdefault(mg_item(h), []).append(h)
    for key in set(pt) | set(mg):
        p_, m_ = pt.get(key, []), mg.get(key, [])
        k = min(len(p_), len(m_))
        both += sum(x["n"] for x in p_[:k])
        pt_only += p_[k:]
        mg_only += m_[k:]
    ws_mg = j["peak_bytes"] - sum(h["bytes"] for h in j["hotspots"])
    d = r["peak"] + res - j["peak_bytes"]
    print(f"\nat magpie's eager peak ({j['order_nodes'][pk]}, {j['peak_bytes']} B) and at the peak "
          f"moment of the plain step's {r['name']} ({r['peak'] + res} B): {d:+d} B")
    print(f"{both:+9d}  tensors both hold (not in the difference)")
    for x in sorted(pt_only, key=lambda x: -x["n"]):
        print(f"{x['n']:+9d}  PyTorch only: {x['phase']} {place(x)}, {x['op']}: {x['cls']}"
              f"{': ' + x['by'] if x['by'] else ''}")
    for h in sorted(mg_only, key=lambda h: -h["bytes"]):
        print(f"{-h['bytes']:+9d}  magpie only: {h['name']}")
    print(f"{-ws_mg:+9d}  magpie's workspace of {j['order_nodes'][pk]}")
    print(f"{res - common_res:+9d}  residents: PyTorch's {res} B (parameters, buffers, inputs), "
          f"magpie's {common_res} B of the same names (buffers it has no value for: "
          + ", ".join(n for n in residents if n not in {h['name'] for h in j['hotspots']})[:200]
          + ")")
    check = sum(x["n"] for x in pt_only) - sum(h["bytes"] for h in mg_only) - ws_mg + \
        res - common_res
    print(f"  sum {check:+d} B (the difference: {d:+d} B)")
    return check == d


def magpie_live(j, params):
    """magpie's live set at its eager peak by class (the hot-spots: every value live there)."""
    cls = {}
    hs = sum(h["bytes"] for h in j["hotspots"])
    for h in j["hotspots"]:
        n = h["name"]
        if n.endswith(".grad") and n[:-5] in params:
            c = "parameter gradient"
        elif "/grad" in n or n.startswith("train/") or n.startswith("grad_const"):
            c = "gradient between backward nodes"
        else:
            c = "forward value or resident"
        cls[c] = cls.get(c, 0) + h["bytes"]
    cls["forward value or resident"] -= j["resident_bytes"]
    cls["workspace of the peak's node"] = j["peak_bytes"] - hs
    return cls


def report(fixture, blocks, tops, res, plain_peak, timeline, magpie_j=None, groups=None,
           params=(), modules=(), residents=()):
    peak, at = running(blocks)
    print(f"{fixture}: plain step peak {peak + res} B (bench/emit_memory.py's figure: "
          f"{plain_peak} B), resident before the step {res} B")
    live = live_at(blocks, at)
    where = next(b for b in blocks if b["at"] == at or b["freed"] == at)
    print(f"peak inside: {tops[where['top']] if where['at'] == at else tops[where['free_top']]}")
    print(f"{'bytes':>9s}  {'allocated in':52s} {'op':28s} held as")
    by_class = {}
    for b in sorted(live, key=lambda b: (-b["n"], b["at"])):
        print(f"{b['n']:9d}  {(b['phase'] + ' ' + place(b))[:52]:52s} {b['op'][:28]:28s} "
              f"{b['cls']}{': ' + b['by'] if b['by'] else ''}")
        by_class[b["cls"]] = by_class.get(b["cls"], 0) + b["n"]
    print(f"{res:9d}  resident before the step (parameters, buffers, inputs)")
    print("by class:")
    for c, n in sorted(by_class.items(), key=lambda x: -x[1]):
        print(f"  {c:44s} {n:9d}")
    print(f"  {'resident':44s} {res:9d}")
    if magpie_j:
        print("magpie's eager peak by class:")
        for c, n in sorted(magpie_live(magpie_j, params).items(), key=lambda x: -x[1]):
            print(f"  {c:44s} {n:9d}")
        print(f"  {'resident':44s} {magpie_j['resident_bytes']:9d}")
    pk, k = running(blocks, lambda b: not b["cls"].startswith("workspace"))
    w = next(b for b in blocks if b["at"] == k)
    print(f"without the ops' workspace (blocks allocated and freed inside one step): "
          f"peak {pk + res} B, in {tops[w['top']]}")
    rows = step_rows(blocks, tops)
    if timeline:
        print(f"\n{'live before':>11s} {'peak inside':>11s} {'workspace':>9s}  step: its "
              f"largest workspace block at its peak")
        for r in rows:
            big = r["big"]
            print(f"{r['before'] + res:11d} {r['peak'] + res:11d} {r['ws']:9d}  {r['name']}"
                  + (f": {big['n']} B {big['by']}" if big else ""))
    if magpie_j:
        compare(rows, res, magpie_j, groups)
        closed = itemize(blocks, rows, groups, magpie_j, res, params, modules, residents)
        _, acct = accounted(blocks, rows, groups, res, magpie_j["peak_bytes"])
        return peak + res == plain_peak, closed, acct - magpie_j["peak_bytes"]
    return peak + res == plain_peak, None, None


if __name__ == "__main__":
    sys.exit(main(sys.argv))
