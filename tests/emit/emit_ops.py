#!/usr/bin/python3
"""The emitted step's form of the ops no fixture exercises, each in a small hand-built graph
(w * x, then the op, with w a trainable [C] weight): its forward (`magpie run`) or its training
step (`magpie run --train`, loss sum: the loss and w's gradient) on magpie's CPU executor, against
the step `magpie emit --torch` writes, run in float64. Agreement: ||magpie32 - emitted64|| <=
max(1e-4 * ||emitted64||, 10 * ||emitted32 - emitted64||) (floored at 1e-6 of the largest output):
magpie's kernels and the emitted PyTorch form must compute the same function; the float64 run is
the emitted one because magpie's kernels run float32 only.

    emit_ops.py MAGPIE WORKDIR [GROUP...]   (GROUP: base, sampling, newer; default all)"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import torch
    from onnx import helper, numpy_helper, TensorProto
except ImportError as e:
    print(f"SKIP: {e}: the emitted-module tests need Debian's python3-torch, python3-onnx")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import emit_check  # noqa: E402

F = TensorProto.FLOAT
X_SHAPE = [2, 3, 6, 6]


def const_i64(name, vals):
    return numpy_helper.from_array(np.array(vals, dtype=np.int64), name)


def case(name, nodes, out_shape, train=True, inits=(), opset=13, out_dtype=F, x_pos=False):
    return dict(name=name, nodes=nodes, out_shape=out_shape, train=train, inits=list(inits),
                opset=opset, out_dtype=out_dtype, x_pos=x_pos)


def cases():
    n = helper.make_node
    c = []
    c.append(case("instance_norm", [n("InstanceNormalization", ["h", "w", "b"], ["y"],
                                      epsilon=1e-5)], X_SHAPE,
                  inits=[numpy_helper.from_array(np.linspace(-1, 1, 3).astype(np.float32), "b")]))
    c.append(case("log_softmax", [n("LogSoftmax", ["h"], ["y"], axis=-1)], X_SHAPE))
    for op in ("ReduceMax", "ReduceMin", "ReduceL2", "ReduceProd"):
        c.append(case(op.lower(), [n(op, ["h"], ["y"], axes=[1, 3], keepdims=0)], [2, 6]))
    c.append(case("resize_linear", [n("Resize", ["h", "", "sc"], ["y"], mode="linear")],
                  [2, 3, 12, 9], inits=[numpy_helper.from_array(
                      np.array([1, 1, 2, 1.5], np.float32), "sc")]))
    c.append(case("resize_nearest", [n("Resize", ["h", "", "sc"], ["y"], mode="nearest",
                                       coordinate_transformation_mode="asymmetric",
                                       nearest_mode="floor")], [2, 3, 12, 12],
                  inits=[numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "sc")]))
    c.append(case("resize_align", [n("Resize", ["h", "", "sc"], ["y"], mode="linear",
                                     coordinate_transformation_mode="align_corners")],
                  [2, 3, 11, 11],
                  inits=[numpy_helper.from_array(np.array([1, 1, 11 / 6, 11 / 6], np.float32),
                                                 "sc")]))
    idx = np.random.RandomState(0).randint(0, 6, size=(2, 3, 6, 4)).astype(np.int64)
    c.append(case("gather_elements", [n("GatherElements", ["h", "ix"], ["y"], axis=3)],
                  [2, 3, 6, 4], inits=[numpy_helper.from_array(idx, "ix")]))
    c.append(case("avgpool_pads", [n("AveragePool", ["h"], ["y"], kernel_shape=[3, 3],
                                     strides=[2, 2], pads=[1, 1, 1, 1])], [2, 3, 3, 3]))
    c.append(case("avgpool_incl", [n("AveragePool", ["h"], ["y"], kernel_shape=[3, 3],
                                     strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1,
                                     ceil_mode=1)], [2, 3, 4, 4]))
    c.append(case("maxpool_pads", [n("MaxPool", ["h"], ["y"], kernel_shape=[3, 3],
                                     strides=[2, 2], pads=[1, 1, 1, 1])], [2, 3, 3, 3]))
    c.append(case("maxpool_asym", [n("MaxPool", ["h"], ["y"], kernel_shape=[2, 2],
                                     strides=[2, 2], pads=[0, 0, 1, 1])], [2, 3, 4, 4]))
    wc = np.random.RandomState(1).randn(4, 3, 3, 3).astype(np.float32) * 0.3
    c.append(case("conv_asym", [n("Conv", ["h", "wc"], ["y"], kernel_shape=[3, 3],
                                  pads=[0, 1, 1, 0])], [2, 4, 5, 5],
                  inits=[numpy_helper.from_array(wc, "wc")]))
    wt = np.random.RandomState(2).randn(3, 2, 3, 3).astype(np.float32) * 0.3
    c.append(case("convtranspose_asym", [n("ConvTranspose", ["h", "wt"], ["y"],
                                           kernel_shape=[3, 3], strides=[2, 2],
                                           pads=[1, 0, 0, 1])], [2, 2, 12, 12],
                  inits=[numpy_helper.from_array(wt, "wt")]))
    c.append(case("convtranspose_sym", [n("ConvTranspose", ["h", "wt"], ["y"],
                                          kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                          output_padding=[1, 1])], [2, 2, 12, 12],
                  inits=[numpy_helper.from_array(wt, "wt")]))
    # weight gradients (ConvGradWeight): pointwise, grouped with stride and dilation, depthwise
    rs = np.random.RandomState(4)
    wa, wb = rs.randn(4, 3, 1, 1).astype(np.float32), rs.randn(6, 2, 3, 3).astype(np.float32)
    c.append(case("conv_grad_group_dil", [
        n("Conv", ["h", "wa"], ["a"], kernel_shape=[1, 1]),
        n("Conv", ["a", "wb"], ["y"], kernel_shape=[3, 3], group=2, strides=[2, 2],
          dilations=[2, 2], pads=[2, 1, 2, 1])], [2, 6, 3, 2],
        inits=[numpy_helper.from_array(wa, "wa"), numpy_helper.from_array(wb, "wb")]))
    wd = rs.randn(3, 1, 3, 3).astype(np.float32)
    c.append(case("conv_grad_depthwise", [n("Conv", ["h", "wd"], ["y"], kernel_shape=[3, 3],
                                            group=3, pads=[1, 1, 1, 1])], X_SHAPE,
                  inits=[numpy_helper.from_array(wd, "wd")]))
    for op, attrs in (("HardSigmoid", {}), ("HardSwish", {}), ("LeakyRelu", {"alpha": 0.1}),
                      ("Elu", {"alpha": 0.7}), ("Softplus", {}), ("Abs", {}), ("Tanh", {}),
                      ("Sigmoid", {}), ("Exp", {}), ("Erf", {}), ("Gelu", {}),
                      ("Gelu", {"approximate": "tanh"}), ("Sin", {}), ("Cos", {}),
                      ("Softsign", {}), ("Selu", {"alpha": 1.5, "gamma": 1.1}),
                      ("Celu", {"alpha": 0.8}), ("Mish", {})):
        name = op.lower() + ("_tanh" if attrs.get("approximate") == "tanh" else "")
        c.append(case(name, [n(op, ["h"], ["y"], **attrs)], X_SHAPE,
                      opset=20 if op == "Gelu" else 18 if op == "Mish" else
                      14 if op == "HardSwish" else 13))
    c.append(case("sqrt_log_recip", [n("Sqrt", ["h"], ["s"]), n("Log", ["s"], ["l"]),
                                     n("Reciprocal", ["s"], ["r"]), n("Add", ["l", "r"], ["y"])],
                  X_SHAPE, x_pos=True))
    c.append(case("clip", [n("Constant", [], ["lo"], value=numpy_helper.from_array(
        np.array(-0.5, np.float32))), n("Constant", [], ["hi"], value=numpy_helper.from_array(
            np.array(0.7, np.float32))), n("Clip", ["h", "lo", "hi"], ["y"])], X_SHAPE))
    # forward-only ops
    c.append(case("cumsum", [n("CumSum", ["h", "ax"], ["y"], exclusive=1, reverse=1)], X_SHAPE,
                  train=False, inits=[const_i64("ax", 2)]))
    c.append(case("argmax", [n("ArgMax", ["h"], ["y"], axis=2, keepdims=0,
                                select_last_index=1)], [2, 3, 6], train=False,
                  out_dtype=TensorProto.INT64))
    c.append(case("trilu", [n("Trilu", ["h", "k"], ["y"], upper=0)], X_SHAPE, train=False,
                  opset=14, inits=[const_i64("k", 1)]))
    return c


def weighted(nodes, y_in, shape, seed):
    """nodes + y = y_in * K (K a Constant of random values): the loss's gradient reaching the op
    is not all ones, so its backward is checked with a varied dY."""
    k = np.random.RandomState(seed).uniform(0.2, 1.8, size=shape).astype(np.float32)
    return nodes + [helper.make_node("Constant", [], ["K"], value=numpy_helper.from_array(k)),
                    helper.make_node("Mul", [y_in, "K"], ["y"])]


def grid_sample_cases():
    """GridSample and its two gradients (GridSampleGrad for h, GridSampleGridGrad for each grid, a
    trained initializer): per spatial rank and mode, one sampler per padding mode and
    align_corners, on grids reaching past the image (padding read, reflection folded several
    times). 4-D X as is, 3-D X (1 spatial dim) and 5-D X reshaped from h; cubic 5-D has no
    PyTorch form (emit_errors.py)."""
    n = helper.make_node
    out = []
    rs = np.random.RandomState(7)
    specs = [(2, m, 20) for m in ("linear", "nearest", "cubic")] + \
            [(1, m, 20) for m in ("linear", "nearest", "cubic")] + \
            [(3, m, 20) for m in ("linear", "nearest")] + [(2, "bicubic", 16), (2, "bilinear", 16)]
    for S, mode, opset in specs:
        xs = {1: [2, 3, 36], 2: [2, 3, 6, 6], 3: [2, 3, 3, 4, 3]}[S]
        osp = {1: [7], 2: [4, 5], 3: [2, 3, 2]}[S]
        nodes, inits, parts = [], [const_i64("xs", xs)], []
        nodes.append(n("Reshape", ["h", "xs"], ["hx"]))
        for pad in ("zeros", "border", "reflection"):
            for ac in (0, 1):
                gname = f"grid_{pad}_{ac}"
                g = rs.uniform(-1.6, 1.6, size=[2] + osp + [S])
                g.flat[::5] *= 2.2  # several folds of reflection
                inits.append(numpy_helper.from_array(g.astype(np.float32), gname))
                nodes.append(n("GridSample", ["hx", gname], [f"s_{pad}_{ac}"], mode=mode,
                               padding_mode=pad, align_corners=ac))
                parts.append(f"s_{pad}_{ac}")
        nodes.append(n("Concat", parts, ["cat"], axis=1))
        shape = [2, 3 * len(parts)] + osp
        out.append(case(f"grid_sample_{S}d_{mode}" + ("_op16" if opset == 16 else ""),
                        weighted(nodes, "cat", shape, 11 + S), shape, inits=inits,
                        opset=opset))
    return out


def pad_cases():
    """Pad in reflect, edge and wrap modes and its gradient PadGrad: pads over a dim's length
    (reflect over several periods, wrap around twice), pads on the batch and channel dims, the
    axes input (opset 18) with negative axes."""
    n = helper.make_node
    out = []
    for name, mode, pads, axes, shape, opset in (
            ("pad_reflect_long", "reflect", [0, 1, 7, 2, 1, 0, 3, 9], None, [3, 4, 16, 17], 13),
            ("pad_edge_axes", "edge", [4, 2, 1, 3], [-1, 1], [2, 8, 6, 11], 18),
            ("pad_wrap_long", "wrap", [1, 0, 8, 3, 0, 2, 1, 13], None, [3, 5, 15, 22], 19),
            ("pad_reflect_axes", "reflect", [5, 2, 0, 1], [2, 3], [2, 3, 11, 9], 18)):
        inits = [const_i64("pads", pads)] + ([const_i64("axes", axes)] if axes else [])
        node = n("Pad", ["h", "pads", "", "axes"] if axes else ["h", "pads"], ["p"], mode=mode)
        out.append(case(name, weighted([node], "p", shape, len(pads)), shape, inits=inits,
                        opset=opset))
    return out


def newer_op_cases():
    """The ops opsets 13-23 brought (issue 22): PRelu, Mean, the four newer reductions, ArgMin,
    IsNaN/IsInf, DepthToSpace/SpaceToDepth, TopK (its ties too), GroupNormalization (opsets 18 and
    21), Einsum (a contraction and a diagonal), GatherND, ScatterElements, OneHot."""
    n = helper.make_node
    f32 = lambda a, name: numpy_helper.from_array(np.asarray(a, np.float32), name)  # noqa: E731
    rs = np.random.RandomState(9)
    c = []
    c.append(case("prelu_channel", [n("PRelu", ["h", "sl"], ["y"])], X_SHAPE, opset=16,
                  inits=[f32(rs.uniform(0.1, 0.5, (3, 1, 1)), "sl")]))
    c.append(case("prelu_broadcast", [n("PRelu", ["h", "sl"], ["y"])], X_SHAPE, opset=16,
                  inits=[f32(rs.uniform(0.1, 0.5, (6, 6)), "sl")]))
    c.append(case("mean3", [n("Mean", ["h", "ma", "mb"], ["y"])], X_SHAPE,
                  inits=[f32(rs.randn(6), "ma"), f32(rs.randn(3, 1, 1), "mb")]))
    for op in ("ReduceL1", "ReduceSumSquare", "ReduceLogSumExp"):
        c.append(case(op.lower(), [n(op, ["h", "ax"], ["y"], keepdims=0)], [2, 6], opset=18,
                      inits=[const_i64("ax", [1, 3])]))
    c.append(case("reducelogsum", [n("ReduceLogSum", ["h"], ["y"], axes=[2], keepdims=1)],
                  [2, 3, 1, 6], x_pos=True))
    c.append(case("argmin", [n("ArgMin", ["h"], ["y"], axis=1, keepdims=1)], [2, 1, 6, 6],
                  train=False, out_dtype=TensorProto.INT64))
    c.append(case("argmin_last", [n("Floor", ["h"], ["f"]),
                                  n("ArgMin", ["f"], ["y"], axis=3, keepdims=0,
                                    select_last_index=1)], [2, 3, 6], train=False,
                  out_dtype=TensorProto.INT64))
    z = np.ones((1, 3, 1, 6), np.float32)
    z[0, 1, 0, 2] = z[0, 0, 0, 5] = 0
    c.append(case("isinf_isnan", [n("Div", ["h", "zc"], ["q"]),
                                  n("IsInf", ["q"], ["a"], detect_negative=0),
                                  n("Log", ["h"], ["l"]), n("IsNaN", ["l"], ["b"]),
                                  n("Or", ["a", "b"], ["y"])], X_SHAPE, train=False,
                  out_dtype=TensorProto.BOOL,
                  inits=[numpy_helper.from_array(z, "zc")]))
    cat4 = [n("Concat", ["h", "h", "h", "h"], ["h4"], axis=1)]  # 12 channels
    c.append(case("depth_to_space", cat4 + [n("DepthToSpace", ["h4"], ["y"], blocksize=2)],
                  [2, 3, 12, 12]))
    c.append(case("depth_to_space_crd", cat4 + [n("DepthToSpace", ["h4"], ["y"], blocksize=2,
                                                  mode="CRD")], [2, 3, 12, 12], train=False))
    c.append(case("space_to_depth", [n("SpaceToDepth", ["h"], ["y"], blocksize=3)],
                  [2, 27, 2, 2]))
    c.append(case("topk", [n("TopK", ["h", "k"], ["y", "i"], axis=-1)], [2, 3, 6, 3],
                  inits=[const_i64("k", [3])]))
    c.append(case("topk_ties", [n("Floor", ["h"], ["f"]),
                                n("TopK", ["f", "k"], ["v", "y"], axis=2, largest=0)],
                  [2, 3, 4, 6], train=False, out_dtype=TensorProto.INT64,
                  inits=[const_i64("k", [4])]))
    cat2 = [n("Concat", ["h", "h2"], ["h6"], axis=1)]
    c.append(case("group_norm_21", [n("Mul", ["h", "h"], ["h2"])] + cat2 +
                  [n("GroupNormalization", ["h6", "gs", "gb"], ["y"], num_groups=3,
                     epsilon=1e-4)], [2, 6, 6, 6], opset=21,
                  inits=[f32(rs.uniform(0.5, 1.5, 6), "gs"), f32(rs.randn(6), "gb")]))
    c.append(case("group_norm_18", [n("Mul", ["h", "h"], ["h2"])] + cat2 +
                  [n("GroupNormalization", ["h6", "gs", "gb"], ["y"], num_groups=2)],
                  [2, 6, 6, 6], opset=18,
                  inits=[f32(rs.uniform(0.5, 1.5, 2), "gs"), f32(rs.randn(2), "gb")]))
    c.append(case("einsum_contract", [n("Einsum", ["h", "ek"], ["y"], equation="bchw,hk->bckw")],
                  [2, 3, 4, 6], opset=13, inits=[f32(rs.randn(6, 4), "ek")]))
    c.append(case("einsum_diagonal", [n("Einsum", ["h"], ["y"], equation="bcii->bci")],
                  [2, 3, 6], opset=13))
    gi = np.array([[[1, 2], [-1, 0], [0, 5]], [[2, -3], [1, 1], [0, 0]]], np.int64)  # [2, 3, 2]
    c.append(case("gather_nd_batch", [n("GatherND", ["h", "gi"], ["y"], batch_dims=1)],
                  [2, 3, 6], train=False, inits=[numpy_helper.from_array(gi, "gi")]))
    gi0 = np.array([[0, 1], [1, -1], [1, 2]], np.int64)
    c.append(case("gather_nd", [n("GatherND", ["h", "gi"], ["y"])], [3, 6, 6], train=False,
                  inits=[numpy_helper.from_array(gi0, "gi")]))
    si = np.random.RandomState(5).randint(-6, 6, size=(2, 3, 6, 4)).astype(np.int64)
    for red, opset in (("none", 13), ("add", 16), ("mul", 18), ("max", 18), ("min", 18)):
        idx = si if red != "none" else np.tile(np.array([5, 0, -2, 3]), (2, 3, 6, 1))
        c.append(case(f"scatter_elements_{red}", [
            n("Slice", ["h", "s0", "s1", "s2"], ["u"]),
            n("ScatterElements", ["h", "si", "u"], ["y"], axis=3,
              **({} if red == "none" else {"reduction": red}))], X_SHAPE, train=False,
            opset=opset, inits=[numpy_helper.from_array(idx, "si"), const_i64("s0", [0]),
                                const_i64("s1", [4]), const_i64("s2", [3])]))
    oi = np.array([[0, 3, -1], [7, -5, 2]], np.int64)
    c.append(case("one_hot", [n("OneHot", ["oi", "od", "ov"], ["o"], axis=1),
                              n("ReduceMean", ["h"], ["m"], keepdims=0),
                              n("Add", ["o", "m"], ["y"])], [2, 5, 3], train=False, opset=13,
                  inits=[numpy_helper.from_array(oi, "oi"), f32(5, "od"), f32([-0.5, 2.0], "ov")]))
    # QuantizeLinear then DequantizeLinear (a float output, judged as floats: a float64 run may
    # round a near-tie the other way, one step, as a float32 run may): per tensor, per axis, blocks
    u8, i8 = TensorProto.UINT8, TensorProto.INT8
    for name, sc, zp, zt, attrs, opset in (
            ("qdq_tensor", [0.02], [128], u8, {}, 13),
            ("qdq_axis", [0.01, 0.03, 0.02], [-3, 0, 5], i8, {"axis": 1}, 13),
            ("qdq_block", rs.uniform(0.01, 0.04, (2, 3, 6, 3)), rs.randint(-9, 9, (2, 3, 6, 3)),
             i8, {"axis": 3, "block_size": 2}, 21)):
        zpa = np.asarray(zp, np.uint8 if zt == u8 else np.int8)
        c.append(case(name, [n("QuantizeLinear", ["h", "qs", "qz"], ["q"], **attrs),
                             n("DequantizeLinear", ["q", "qs", "qz"], ["y"], **attrs)],
                      X_SHAPE, train=False, opset=opset,
                      inits=[f32(np.asarray(sc).reshape(np.shape(sc)), "qs"),
                             numpy_helper.from_array(zpa, "qz")]))
    return c


def build(cs, path):
    x = helper.make_tensor_value_info("x", F, X_SHAPE)
    y = helper.make_tensor_value_info("y", cs["out_dtype"], cs["out_shape"])
    w = numpy_helper.from_array(np.linspace(0.5, 1.5, 3).astype(np.float32).reshape(1, 3, 1, 1),
                                "w")
    inits = [w] + cs["inits"]
    if cs["name"] == "instance_norm":
        inits[0] = numpy_helper.from_array(np.linspace(0.5, 1.5, 3).astype(np.float32), "w")
        nodes = [helper.make_node("Identity", ["x"], ["h"])] + cs["nodes"]
    else:
        nodes = [helper.make_node("Mul", ["x", "w"], ["h"])] + cs["nodes"]
    g = helper.make_graph(nodes, cs["name"], [x], [y], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", cs["opset"])])
    onnx.save(m, path)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode and not (cmd[1] == "optimize" and r.returncode == 3):  # 3: limit not met
        raise RuntimeError(" ".join(cmd) + ": " + r.stderr.strip())


def check(magpie, work, cs):
    d = os.path.join(work, cs["name"])
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    build(cs, path)
    x = np.random.RandomState(3).randn(*X_SHAPE).astype(np.float32)
    if cs["x_pos"]:
        x = np.abs(x) + 0.5
    np.save(os.path.join(d, "x.npy"), x)
    tr = ["--train"] if cs["train"] else []
    run([magpie, "run", path, "-i", os.path.join(d, "x.npy"), "-o", os.path.join(d, "out")] + tr)
    plan = os.path.join(d, "plan")
    if cs["train"]:
        run([magpie, "optimize", path, "--train", "--mem-limit", "0.9", "--max-states", "30",
             "--threads", "1", "--quiet", "--emit", "torch", "-o", plan])
        step = os.path.join(plan, "step.py")
    else:
        step = os.path.join(d, "step.py")
        run([magpie, "emit", path, "--torch", "-o", step])
    mod = emit_check.load_module(step, "op_" + cs["name"])
    outs = {}
    for dt in (torch.float64, torch.float32):
        P = {p: torch.from_numpy(numpy_helper.to_array(i).copy()).to(dt)
             for i in onnx.load(path).graph.initializer for p in [i.name] if p in mod.PARAMS}
        outs[dt] = mod.step(P, {"x": torch.from_numpy(x).to(dt)})
    names = ["loss", "w.grad"] if cs["train"] else ["y"]
    if cs["train"]:  # the other trained initializers' gradients (a Conv's weight)
        names += [p + ".grad" for p in mod.PARAMS if p != "w" and p + ".grad" in mod.OUTPUTS]
    ok = True
    for nm in names:
        got = torch.from_numpy(np.load(os.path.join(d, "out", nm.replace("/", "_") + ".npy")))
        e64, e32 = outs[torch.float64][nm], outs[torch.float32][nm]
        if not e64.is_floating_point():
            good = torch.equal(got, e64.cpu()) and torch.equal(got, e32.cpu())
            err, bound = float(not good), 0.0
        else:
            floor = 1e-6 * e64.double().norm().item()
            good, err, bound = emit_check.judge(nm, got, e64.double(), e32, floor)
        ok &= good
        if not good:
            print(f"  BAD {cs['name']} {nm}: |magpie - emitted64| = {err:.3e}, bound {bound:.3e}")
    print(f"{'ok ' if ok else 'BAD'} {cs['name']}{' (training step)' if cs['train'] else ''}")
    return ok


def check_patch(magpie, work):
    """PetPatch (a PET correction, magpie's domain): the emitted step and `export --standard`'s
    Pad + Where lowering against magpie's kernel."""
    d = os.path.join(work, "pet_patch")
    os.makedirs(d, exist_ok=True)
    patch = np.arange(2 * 2 * 3 * 2, dtype=np.float32).reshape(2, 2, 3, 2)
    x = helper.make_tensor_value_info("x", F, X_SHAPE)
    y = helper.make_tensor_value_info("y", F, X_SHAPE)
    w = numpy_helper.from_array(np.linspace(0.5, 1.5, 3).astype(np.float32).reshape(1, 3, 1, 1),
                                "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["h"]),
             helper.make_node("PetPatch", ["h", "p"], ["y"], domain="magpie",
                              starts=[0, 1, 2, 3])]
    g = helper.make_graph(nodes, "patch", [x], [y],
                          initializer=[w, numpy_helper.from_array(patch, "p")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("magpie", 1)])
    path, std = os.path.join(d, "model.onnx"), os.path.join(d, "standard.onnx")
    onnx.save(m, path)
    xv = np.random.RandomState(4).randn(*X_SHAPE).astype(np.float32)
    np.save(os.path.join(d, "x.npy"), xv)
    run([magpie, "run", path, "-i", os.path.join(d, "x.npy"), "-o", os.path.join(d, "out")])
    run([magpie, "export", path, std, "--standard"])
    run([magpie, "run", std, "-i", os.path.join(d, "x.npy"), "-o", os.path.join(d, "std")])
    run([magpie, "emit", path, "--torch", "-o", os.path.join(d, "step.py")])
    mod = emit_check.load_module(os.path.join(d, "step.py"), "op_patch")
    ref = np.load(os.path.join(d, "out", "y.npy"))
    got = mod.step({}, {"x": torch.from_numpy(xv)})["y"].numpy()
    lowered = np.load(os.path.join(d, "std", "y.npy"))
    domains = {n.domain for n in onnx.load(std).graph.node}
    expect = xv * numpy_helper.to_array(w)
    expect[0:2, 1:3, 2:5, 3:5] = patch
    ok = (np.array_equal(ref, expect) and np.array_equal(got, ref) and
          np.array_equal(lowered, ref) and domains <= {""})
    print(f"{'ok ' if ok else 'BAD'} pet_patch (emitted, and lowered by export --standard to "
          f"{sorted(n.op_type for n in onnx.load(std).graph.node)})")
    return ok


def check_random(magpie, work):
    """RandomUniformLike (seeded) and RandomNormal: the emitted step draws from PyTorch's
    generator, so the numbers are not magpie's; checked are the shape, the dtype (float64 in a
    float64 run), the range [low, high), mean and deviation within 4 standard errors of the
    distribution's, magpie's own draws by the same test, a seeded node giving the same numbers
    on every step and an unseeded one new ones."""
    d = os.path.join(work, "random")
    os.makedirs(d, exist_ok=True)
    x = helper.make_tensor_value_info("x", F, X_SHAPE)
    u = helper.make_tensor_value_info("u", F, X_SHAPE)
    r = helper.make_tensor_value_info("r", F, [64, 64])
    w = numpy_helper.from_array(np.linspace(0.5, 1.5, 3).astype(np.float32).reshape(1, 3, 1, 1),
                                "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["h"]),
             helper.make_node("RandomUniformLike", ["h"], ["u"], low=-2.0, high=3.0, seed=1.5),
             helper.make_node("RandomNormal", [], ["r"], shape=[64, 64], mean=1.0, scale=2.0)]
    m = helper.make_model(helper.make_graph(nodes, "random", [x], [u, r], initializer=[w]),
                          opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    xv = np.random.RandomState(4).randn(*X_SHAPE).astype(np.float32)
    np.save(os.path.join(d, "x.npy"), xv)
    run([magpie, "run", path, "-i", os.path.join(d, "x.npy"), "-o", os.path.join(d, "out")])
    run([magpie, "emit", path, "--torch", "-o", os.path.join(d, "step.py")])
    mod = emit_check.load_module(os.path.join(d, "step.py"), "op_random")

    def plausible(uv, rv):
        uv, rv = uv.astype(np.float64), rv.astype(np.float64)
        su, sr = 5 / np.sqrt(12) / np.sqrt(uv.size), 2 / np.sqrt(rv.size)
        return (uv.min() >= -2 and uv.max() < 3 and abs(uv.mean() - 0.5) < 4 * su and
                abs(rv.mean() - 1) < 4 * sr and abs(rv.std() - 2) < 0.1)
    ok = plausible(np.load(os.path.join(d, "out", "u.npy")), np.load(os.path.join(d, "out", "r.npy")))
    for dt in (torch.float32, torch.float64):
        a = mod.step({}, {"x": torch.from_numpy(xv).to(dt)})
        b = mod.step({}, {"x": torch.from_numpy(xv).to(dt)})
        ok &= (a["u"].dtype == dt and list(a["u"].shape) == X_SHAPE and a["r"].dtype == dt and
               list(a["r"].shape) == [64, 64] and plausible(a["u"].numpy(), a["r"].numpy()) and
               torch.equal(a["u"], b["u"]) and not torch.equal(a["r"], b["r"]))
    print(f"{'ok ' if ok else 'BAD'} random (RandomUniformLike seeded, RandomNormal: "
          "distribution, dtype, seeding)")
    return ok


# The case groups, each its own ctest entry (they take minutes on two loaded cores together).
GROUPS = {"base": lambda: cases(), "sampling": lambda: grid_sample_cases() + pad_cases(),
          "newer": lambda: newer_op_cases()}


def main(argv):
    magpie, work = argv[1], argv[2]
    groups = argv[3:] or list(GROUPS)
    results = []
    if "base" in groups:
        results += [check_patch(magpie, work)]
    if "newer" in groups:
        results += [check_random(magpie, work)]
    for cs in [cs for g in groups for cs in GROUPS[g]()]:
        try:
            results.append(check(magpie, work, cs))
        except RuntimeError as e:
            print(f"BAD {cs['name']}: {e}")
            results.append(False)
    print(f"{sum(results)} of {len(results)} op cases agree")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
