"""ort_pet_plans.py ORIGINAL.onnx PLAN.onnx INPUT.npy [REF_DIR] - a plan in onnxruntime beside
its original (issue #19): both loaded by onnxruntime (PyPI), their outputs judged against
magpie's float64 run of the original, and both timed side by side.

  - Agreement (REF_DIR: `magpie verify ORIGINAL PLAN -i INPUT.npy -o REF_DIR` wrote the
    original's float64 outputs there): per output, with ref the float64 reference, orig and plan
    onnxruntime's float32 results of the original and of the plan, the plan agrees when
    |plan - ref| <= max(rtol * s, k * |orig - ref|) (L2 norms; s = |ref| floored at 1e-6 of the
    largest output's norm; rtol 1e-4, k 10), the criterion of `magpie verify` (runtime/rt-check.h)
    with onnxruntime's own float32 run of the original as the yardstick.
  - Timing: one intra-op and one inter-op thread, sequential execution, onnxruntime's default
    graph optimizations (what a user gets). A sample is the median of enough back-to-back runs to
    last SAMPLE_S (at least 5); ROUNDS rounds alternate which model goes first; the latencies are
    the medians of the samples, the ratio the median over the rounds of plan over original in
    the same round. Both the wall time and the calling thread's CPU time (time.thread_time: with
    one intra-op thread onnxruntime runs the kernels on the calling thread) are reported; on a
    shared machine the CPU time is the steadier clock. Timing the original against a copy of
    itself gives the control row.

Environment: ROUNDS (9), SAMPLE_S (0.2). Prints one JSON object on stdout. Needs numpy and
onnxruntime (PYTHON=/work/venv-pypi/bin/python in bench_pet_measured.sh); not part of the
default test suite."""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort

RTOL, K = 1e-4, 10.0


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def feeds(sess, x):
    inputs = sess.get_inputs()
    return {inputs[0].name: x}


def sample(sess, feed, reps):
    wall, cpu = [], []
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.thread_time()
        sess.run(None, feed)
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
    return float(np.median(wall)), float(np.median(cpu))


def safe(name):
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def agreement(orig, plan, names_o, names_p, ref_dir):
    got_o = dict(zip(names_o, orig))
    got_p = dict(zip(names_p, plan))
    refs = {}
    for n in names_o:
        path = os.path.join(ref_dir, safe(n) + ".npy")
        if not os.path.exists(path):
            raise SystemExit("ort_pet_plans: no reference %s" % path)
        refs[n] = np.load(path).astype(np.float64)
    floor = 1e-6 * max(np.linalg.norm(r) for r in refs.values())
    outs, ok = [], True
    for n, ref in refs.items():
        if n not in got_p:
            outs.append({"name": n, "agrees": False, "mismatch": "missing in the plan"})
            ok = False
            continue
        e_o = float(np.linalg.norm(got_o[n].astype(np.float64) - ref))
        e_p = float(np.linalg.norm(got_p[n].astype(np.float64) - ref))
        s = max(float(np.linalg.norm(ref)), floor)
        bound = max(RTOL * s, K * e_o)
        outs.append({"name": n, "error": e_p, "original_error": e_o, "bound": bound,
                     "agrees": e_p <= bound})
        ok = ok and e_p <= bound
    return ok, outs


def main():
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    a_path, b_path, x_path = sys.argv[1:4]
    ref_dir = sys.argv[4] if len(sys.argv) > 4 else None
    rounds = int(os.environ.get("ROUNDS", "9"))
    target = float(os.environ.get("SAMPLE_S", "0.2"))
    x = np.load(x_path)
    try:
        a, b = session(a_path), session(b_path)
    except Exception as e:  # a file onnxruntime cannot load: say which and why
        print(json.dumps({"loaded": False, "error": str(e).splitlines()[0][:300]}))
        return
    fa, fb = feeds(a, x), feeds(b, x)
    ya, yb = a.run(None, fa), b.run(None, fb)  # also the warm-up
    res = {"loaded": True, "onnxruntime": ort.__version__}
    if ref_dir:
        ok, outs = agreement(ya, yb, [o.name for o in a.get_outputs()],
                             [o.name for o in b.get_outputs()], ref_dir)
        res["agrees"] = ok
        res["outputs"] = outs
    w, _ = sample(a, fa, 3)
    reps = max(5, int(np.ceil(target / max(w, 1e-6))))
    aw, ac, bw, bc, qw, qc = [], [], [], [], [], []
    for r in range(rounds):
        if r % 2 == 0:
            xa = sample(a, fa, reps)
            xb = sample(b, fb, reps)
        else:
            xb = sample(b, fb, reps)
            xa = sample(a, fa, reps)
        aw.append(xa[0]), ac.append(xa[1]), bw.append(xb[0]), bc.append(xb[1])
        qw.append(xb[0] / xa[0]), qc.append(xb[1] / xa[1])
    med = lambda v: float(np.median(v))
    res.update({"reps": reps, "rounds": rounds,
                "original_wall_s": med(aw), "original_cpu_s": med(ac),
                "plan_wall_s": med(bw), "plan_cpu_s": med(bc),
                "ratio_wall": med(qw), "ratio_cpu": med(qc),
                "ratio_cpu_rounds": qc})
    print(json.dumps(res))


main()
