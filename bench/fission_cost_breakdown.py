#!/usr/bin/env python3
"""Where a fission's latency goes: per-node costs of a plan against its original training graph.

usage: fission_cost_breakdown.py ORIG_PROFILE.json PLAN_PROFILE.json [LAUNCH_S]

Both files are `magpie profile ... --top 0 --json` (the original with --train and its loss and
optimizer, the plan's optimized.onnx alone) on the same analytic device. A node of the plan
named NAME.fisKpP is part P of the original node NAME; the kept part is NAME itself. Prints the
plan's total against the original's and the difference split into: the fission's own ops
(Fission* by op; FissionAccumulate also by the op producing its part), and per split node
the extra parts' launches (LAUNCH_S, default 5 us, for every part of a node that is no view)
and the rest (the roofline at the part's size against the whole's: the ramp of an op with
FLOPs, and nothing for a memory-bound op), by op. Uses only the standard library."""
import json, re, sys
from collections import defaultdict

orig = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
launch = float(sys.argv[3]) if len(sys.argv) > 3 else 5e-6
on = {n["node"]: n for n in orig["top"]}
parts = defaultdict(list)
own = defaultdict(lambda: [0, 0.0])
other = defaultdict(lambda: [0, 0.0])
prod = {o["name"]: n for n in plan["top"] for o in n["outputs"]}
acc = defaultdict(lambda: [0, 0.0])
for n in plan["top"]:
    if n["op"].startswith("Fission"):
        own[n["op"]][0] += 1
        own[n["op"]][1] += n["seconds"]
        if n["op"] == "FissionAccumulate":
            q = prod.get(n["inputs"][1]["name"])
            a = acc[q["op"] if q else "(input)"]
            a[0] += 1
            a[1] += n["seconds"]
        continue
    base = re.sub(r"\.fis\d+p\d+$", "", n["node"])
    if base in on:
        parts[base].append(n)
    else:
        other[n["op"]][0] += 1
        other[n["op"]][1] += n["seconds"]
T0, T1 = orig["total_seconds"], plan["total_seconds"]
print(f"original {T0*1e3:.3f} ms, plan {T1*1e3:.3f} ms, +{(T1-T0)*1e3:.3f} ms ({(T1/T0-1)*100:.2f} %)")
print("fission ops:")
for op, (c, s) in sorted(own.items(), key=lambda x: -x[1][1]):
    print(f"  {op:20s} {c:5d} {s*1e3:8.3f} ms")
print("FissionAccumulate by the producer of its part:")
for op, (c, s) in sorted(acc.items(), key=lambda x: -x[1][1]):
    print(f"  {op:20s} {c:5d} {s*1e3:8.3f} ms")
split = defaultdict(lambda: [0, 0.0, 0.0])  # nodes, extra launches, rest
unsplit = 0.0
for base, ps in parts.items():
    o = on[base]
    tot = sum(p["seconds"] for p in ps)
    if len(ps) == 1:
        unsplit += tot - o["seconds"]
        continue
    k = len(ps) - 1
    r = split[o["op"]]
    r[0] += 1
    lk = k * launch if o["seconds"] > 0 else 0.0  # a view runs no kernel
    r[1] += lk
    r[2] += tot - o["seconds"] - lk
print("split nodes (extra parts): op, nodes, launches, rest (ms):")
tl = tx = 0.0
for op, (c, l, x) in sorted(split.items(), key=lambda x: -(x[1][1] + x[1][2])):
    tl, tx = tl + l, tx + x
    print(f"  {op:20s} {c:5d} {l*1e3:8.3f} {x*1e3:8.3f}")
print(f"  {'total':20s}       {tl*1e3:8.3f} {tx*1e3:8.3f}")
print(f"unsplit nodes' change {unsplit*1e3:.3f} ms; other new nodes:",
      {k: (v[0], round(v[1] * 1e3, 3)) for k, v in other.items()})
