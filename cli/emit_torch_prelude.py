# emit_torch_prelude.py - the Python helpers that `magpie emit --torch` copies into an emitted
# step module (cli/emit-torch.c embeds this file at build time). Sections start with a line
# "#@ NAME"; the emitter copies section "core" always and every other one only when a node of the
# plan calls it. Each helper reproduces the semantics of one magpie op (its CPU kernel in ir/ops-*.c)
# with PyTorch ops, for float32 and float64 alike. Helpers never keep references to their inputs,
# so a tensor the step deletes is freed at once (PyTorch frees it with its last reference).
#@ core
import torch

_CONSTS = {}
_DEV_CONSTS = {}


def _K(name, dtype, shape, hexdata):
    """Registers constant `name` (raw little-endian bytes in hex); materialized per device."""
    raw = bytearray(bytes.fromhex(hexdata))
    if raw:
        t = torch.frombuffer(raw, dtype=dtype).reshape(shape).clone()
    else:
        t = torch.zeros(shape, dtype=dtype)
    _CONSTS[name] = t


def _Z(name, dtype, shape):
    """Registers an all-zero constant without spelling out its bytes."""
    _CONSTS[name] = torch.zeros(shape, dtype=dtype)


def _fd(dtype, fdt):
    """The dtype a tensor the plan creates as `dtype` gets in this run: the run's float dtype
    (that of the parameters and inputs: float64 for a reference run) for a float dtype."""
    return fdt if dtype.is_floating_point else dtype


def _where(P, I):
    """The step's device, and its float dtype (the first floating parameter's or input's)."""
    ts = list(P.values()) + list(I.values())
    fl = [t for t in ts if t.is_floating_point()]
    return ts[0].device, (fl[0].dtype if fl else torch.float32)


def _const(name, device, P, fdt=torch.float32):
    """Constant `name` on device: the caller's tensor when params holds one of that name (a
    module's buffer), else the plan's value, copied to the device (in the run's float dtype)
    once."""
    t = P.get(name)
    if t is not None:
        return t
    key = (name, str(device), fdt)
    t = _DEV_CONSTS.get(key)
    if t is None:
        c = _CONSTS[name]
        t = c.to(device, _fd(c.dtype, fdt))
        _DEV_CONSTS[key] = t
    return t


def _fresh(name, device, P, fdt=torch.float32):
    """A constant that the step writes in place (optimizer state, a fission buffer): the
    caller's tensor when given, else a new copy, so that the plan's value stays intact."""
    t = P.get(name)
    if t is not None:
        return t
    c = _CONSTS[name]
    return c.to(device, _fd(c.dtype, fdt), copy=True)


def _check(P, I):
    missing = [n for n in PARAMS if n not in P] + [n for n, _, _ in INPUTS if n not in I]
    if missing:
        raise KeyError("step: missing parameters or inputs: " + ", ".join(missing))
    for n, dt, shape in INPUTS:
        t = I[n]
        if tuple(t.shape) != tuple(shape):
            raise ValueError(f"step: input '{n}' has shape {tuple(t.shape)}, the plan was made "
                             f"for {tuple(shape)}")


def params_from_module(module):
    """The parameters (and buffers) of a torch.nn.Module that this plan reads, by name. The
    tensors are the module's own (detached), so an in-place optimizer step updates the module."""
    named = dict(module.named_parameters())
    named.update(dict(module.named_buffers()))
    missing = [n for n in PARAMS if n not in named]
    if missing:
        have = ", ".join(sorted(named)[:20])
        raise KeyError("params_from_module: the module has no parameter or buffer named "
                       + ", ".join(missing) + f" (it has: {have}{', ...' if len(named) > 20 else ''})")
    out = {n: named[n].detach() for n in PARAMS}
    for n in BUFFERS:
        if n in named:
            out[n] = named[n].detach()
    return out


def step(params, inputs):
    """One training (or inference) step of the plan: a dict from output name to tensor."""
    _check(params, inputs)
    with torch.no_grad():
        return _step(params, inputs)


def _int_div(a, b):
    if a.dtype.is_floating_point or b.dtype.is_floating_point:
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="trunc")


def _pad_nd(x, pads, value=0.0):
    """ONNX pads (begins then ends, one per spatial dim) as F.pad's last-dim-first list."""
    S = len(pads) // 2
    fp = []
    for i in reversed(range(S)):
        fp += [pads[i], pads[S + i]]
    if not any(fp):
        return x
    return torch.nn.functional.pad(x, fp, value=value)
#@ swap
_STREAMS = {}


class _Host:
    """A tensor in pinned host memory and the event its device-to-host copy records."""
    __slots__ = ("host", "event")

    def __init__(self, host, event):
        self.host, self.event = host, event


def _copy_stream(dev, direction):
    """The copy stream of one direction ("d2h" for Stores, "h2d" for Loads): PCIe is full duplex
    and the GPU's copy engines serve the two directions at once, as magpie's simulator assumes."""
    s = _STREAMS.get((dev, direction))
    if s is None:
        s = _STREAMS[(dev, direction)] = torch.cuda.Stream(dev)
    return s


def _store(x):
    """Store: a copy in host memory. On CUDA it runs on the device-to-host copy stream, after the
    compute stream has produced x (non_blocking, pinned); x's device memory is released to the
    allocator only once the copy has read it (record_stream). On the CPU the host copy lives outside PyTorch's
    allocator (a NumPy array), as pinned host memory is outside the CUDA allocator."""
    if x.device.type != "cuda":
        return x.numpy().copy()
    s = _copy_stream(x.device, "d2h")
    s.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.stream(s):
        h = torch.empty(x.shape, dtype=x.dtype, device="cpu", pin_memory=True)
        h.copy_(x, non_blocking=True)
        e = torch.cuda.Event()
        e.record(s)
    x.record_stream(s)
    return _Host(h, e)


def _load(h, dev):
    """Load: the host copy back on the device, on the host-to-device copy stream once its Store has
    finished (its event); the compute stream waits for it before the next op reads it."""
    if not isinstance(h, _Host):
        return torch.from_numpy(h).to(dev, copy=True)
    s = _copy_stream(dev, "h2d")
    with torch.cuda.stream(s):
        s.wait_event(h.event)
        y = h.host.to(dev, non_blocking=True)
        e = torch.cuda.Event()
        e.record(s)
    cur = torch.cuda.current_stream(dev)
    cur.wait_event(e)
    y.record_stream(cur)
    return y
#@ gemm
def _gemm(a, b, c, alpha, beta, ta, tb):
    if ta:
        a = a.transpose(0, 1)
    if tb:
        b = b.transpose(0, 1)
    y = torch.matmul(a, b)
    if alpha != 1.0:
        y.mul_(alpha)
    if c is not None:
        if beta != 1.0:
            y.add_(c, alpha=beta)
        else:
            y.add_(c)
    return y
#@ conv
_CONV = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d,
         3: torch.nn.functional.conv3d}
_CONVT = {1: torch.nn.functional.conv_transpose1d, 2: torch.nn.functional.conv_transpose2d,
          3: torch.nn.functional.conv_transpose3d}


def _conv(x, w, b, strides, pads, dil, group):
    S = len(strides)
    if pads[:S] == pads[S:]:
        return _CONV[S](x, w, b, strides, pads[:S], dil, group)
    return _CONV[S](_pad_nd(x, pads), w, b, strides, 0, dil, group)


def _conv_t(x, w, b, strides, pads, dil, group, opad, out_sp, tile_rows=0):
    """ConvTranspose. On the CPU in 2-D, magpie's algorithm (_conv_t_cols); elsewhere the full
    transposed convolution, then the output window ONNX's pads and output_padding select
    (PyTorch's padding when they are symmetric)."""
    S = len(strides)
    if S == 2 and x.device.type == "cpu" and tile_rows > 0:
        return _conv_t_cols(x, w, b, strides, pads, dil, group, out_sp, tile_rows)
    if pads[:S] == pads[S:]:
        return _CONVT[S](x, w, b, strides, pads[:S], opad, group, dil)
    y = _CONVT[S](x, w, None, strides, 0, 0, group, dil)
    for i in range(S):
        y = y.narrow(2 + i, pads[i], min(out_sp[i], y.shape[2 + i] - pads[i]))
    y = _pad_nd(y, [0] * S + [out_sp[i] - y.shape[2 + i] for i in range(S)]).contiguous()
    if b is not None:
        y.add_(b.reshape([1, -1] + [1] * S))
    return y


def _conv_t_cols(x, w, b, strides, pads, dil, group, out_sp, tile_rows):
    """A 2-D ConvTranspose as magpie's kernel computes it: per sample, group and tile of
    tile_rows input rows, col = W_g^T X_g[:, tile] into one [Mg*K, tile] buffer, scattered into
    Y by a strided add per kernel tap (the adjoint of im2col), so that its workspace is the one
    magpie counts. PyTorch's CPU conv_transpose2d (and so the input gradient of a convolution)
    allocates the whole [Mg*K, H*W] column buffer per sample."""
    N, C, H, W = x.shape
    Cg, Mg, kh, kw = C // group, w.shape[1], w.shape[2], w.shape[3]
    OH, OW = out_sp
    y = torch.empty((N, Mg * group, OH, OW), dtype=x.dtype, device=x.device)
    if b is None:
        y.zero_()
    else:
        y.copy_(b.reshape(1, -1, 1, 1).expand(y.shape))
    tr = max(1, min(tile_rows, H))
    buf = torch.empty(Mg * kh * kw * tr * W, dtype=x.dtype, device=x.device)

    def span(i, st, pad, d, lo_in, hi_in, out):
        """The inputs [lo, hi) within [lo_in, hi_in) whose tap i lands in [0, out), and the
        output index of lo."""
        off = i * d - pad
        lo = max(lo_in, 0 if off >= 0 else (st - 1 - off) // st)
        hi = min(hi_in, (out - 1 - off) // st + 1) if out - 1 - off >= 0 else lo
        return lo, hi, lo * st + off

    for n in range(N):
        for g in range(group):
            xg = x[n, g * Cg:(g + 1) * Cg]
            wt = w[g * Cg:(g + 1) * Cg].reshape(Cg, Mg * kh * kw).t()
            yg = y[n, g * Mg:(g + 1) * Mg]
            for r0 in range(0, H, tr):
                nr = min(tr, H - r0)
                col = buf[:Mg * kh * kw * nr * W].view(Mg * kh * kw, nr * W)
                torch.mm(wt, xg[:, r0:r0 + nr].reshape(Cg, nr * W), out=col)
                c5 = col.view(Mg, kh, kw, nr, W)
                for i in range(kh):
                    lo0, hi0, oh = span(i, strides[0], pads[0], dil[0], r0, r0 + nr, OH)
                    if lo0 >= hi0:
                        continue
                    for j in range(kw):
                        lo1, hi1, ow = span(j, strides[1], pads[1], dil[1], 0, W, OW)
                        if lo1 >= hi1:
                            continue
                        yg[:, oh:oh + (hi0 - lo0 - 1) * strides[0] + 1:strides[0],
                           ow:ow + (hi1 - lo1 - 1) * strides[1] + 1:strides[1]].add_(
                            c5[:, i, j, lo0 - r0:hi0 - r0, lo1:hi1])
    return y
#@ conv_grad_weight
def _im2col(xg, col, strides, pads, dil, r0):
    """col[c, i, j, r, ow] = xg[c, (r0 + r) s0 - p0 + i d0, ow s1 - p1 + j d1] for the output rows
    [r0, r0 + col.shape[3]), the window taps that fall in the input; the others stay as they are
    (zero). Strided copies between views: no allocation."""
    H, W = xg.shape[1], xg.shape[2]
    kh, kw, nr, OW = col.shape[1:]

    def span(i, st, pad, d, size, first, out):
        """The outputs [lo, hi) within [first, out) whose tap i reads inside the input, and the
        input index of lo."""
        off = i * d - pad
        lo = max(first, 0 if off >= 0 else (st - 1 - off) // st)
        hi = min(out, (size - 1 - off) // st + 1) if size - 1 - off >= 0 else 0
        return lo, hi, lo * st + off

    for i in range(kh):
        lo0, hi0, ih = span(i, strides[0], pads[0], dil[0], H, r0, r0 + nr)
        if lo0 >= hi0:
            continue
        for j in range(kw):
            lo1, hi1, iw = span(j, strides[1], pads[1], dil[1], W, 0, OW)
            if lo1 >= hi1:
                continue
            col[:, i, j, lo0 - r0:hi0 - r0, lo1:hi1].copy_(
                xg[:, ih:ih + (hi0 - lo0 - 1) * strides[0] + 1:strides[0],
                   iw:iw + (hi1 - lo1 - 1) * strides[1] + 1:strides[1]])


def _conv_grad_weight(x, dy, wshape, strides, pads, dil, group, tile_rows, out=None,
                      first=False):
    """ConvGradWeight: on the CPU, a 2-D convolution's weight gradient as magpie's kernel
    computes it (per sample, group and tile of tile_rows output rows, dW_g (+)= dY_g[:, tile]
    col^T with col the [Cg*K, tile] im2col of that sample's group, none for a pointwise
    convolution), so that its workspace is the one magpie counts; PyTorch's
    convolution_backward (mkldnn) would copy the weight it does not read and allocate a
    scratchpad several activations large. Elsewhere (CUDA, 1-D and 3-D) PyTorch's own
    backward. With out (a fused FissionAccumulate's buffer) the CPU path adds into it (beta 1;
    beta 0 on its first GEMM when first: part 0 over an unfilled buffer); PyTorch's backward has
    no accumulating form, so elsewhere the gradient is a tensor of its own, added to out."""
    S = len(strides)
    if pads[:S] != pads[S:]:
        x = _pad_nd(x, pads)
        pads = [0] * (2 * S)
    if S == 2 and x.device.type == "cpu":
        N, C = x.shape[0], x.shape[1]
        M, Cg, Mg = wshape[0], C // group, wshape[0] // group
        K, (OH, OW) = wshape[2] * wshape[3], tuple(dy.shape[2:])
        pointwise = K == 1 and list(strides) == [1, 1] and not any(pads)
        tr = max(1, min(tile_rows, OH))
        dw = torch.zeros(wshape, dtype=x.dtype, device=x.device) if out is None else out
        rows = dw.view(M, Cg * K)
        beta = 0.0 if out is not None and first else 1.0
        buf = None if pointwise else torch.empty(Cg * K * tr * OW, dtype=x.dtype,
                                                 device=x.device)
        for n in range(N):
            for g in range(group):
                xg, dyg = x[n, g * Cg:(g + 1) * Cg], dy[n, g * Mg:(g + 1) * Mg]
                if pointwise:
                    rows[g * Mg:(g + 1) * Mg].addmm_(dyg.reshape(Mg, OH * OW),
                                                     xg.reshape(Cg, OH * OW).t(),
                                                     beta=beta if n == 0 else 1.0)
                    continue
                for r0 in range(0, OH, tr):
                    nr = min(tr, OH - r0)
                    col = buf[:Cg * K * nr * OW].view((Cg,) + tuple(wshape[2:]) + (nr, OW))
                    if any(pads):
                        col.zero_()
                    _im2col(xg, col, strides, pads, dil, r0)
                    rows[g * Mg:(g + 1) * Mg].addmm_(
                        dyg[:, r0:r0 + nr].reshape(Mg, nr * OW), col.view(Cg * K, nr * OW).t(),
                        beta=beta if n == 0 and r0 == 0 else 1.0)
        return dw
    w = torch.zeros((), dtype=x.dtype, device=x.device).expand(wshape)
    dw = torch.ops.aten.convolution_backward(dy, x, w, None, strides, pads[:S], dil, False,
                                             [0] * S, group, [False, True, False])[1]
    if out is None:
        return dw
    return out.copy_(dw) if first else out.add_(dw)
#@ pool
_MAXP = {1: torch.nn.functional.max_pool1d, 2: torch.nn.functional.max_pool2d,
         3: torch.nn.functional.max_pool3d}
_AVGP = {1: torch.nn.functional.avg_pool1d, 2: torch.nn.functional.avg_pool2d,
         3: torch.nn.functional.avg_pool3d}


def _maxpool(x, k, s, pads, dil, ceil):
    """MaxPool. Unpadded and undilated windows that tile the input exactly are the maximum over
    an unfolded view, which allocates the output alone as magpie's kernel does (PyTorch's
    max_pool on the CPU also allocates int64 indices, twice the output, which are dropped)."""
    S = len(k)
    if (not any(pads) and all(d == 1 for d in dil) and
            all((x.shape[2 + i] - k[i]) % s[i] == 0 for i in range(S))):
        v = x
        for i in range(S):
            v = v.unfold(2 + i, k[i], s[i])
        return torch.amax(v, dim=tuple(range(-S, 0)))
    if pads[:S] == pads[S:] and all(2 * p <= kk for p, kk in zip(pads[:S], k)):
        return _MAXP[S](x, k, s, pads[:S], dil, ceil)
    return _MAXP[S](_pad_nd(x, pads, float("-inf")), k, s, 0, dil, ceil)


def _avgpool(x, k, s, pads, ceil, cip):
    S = len(k)
    return _AVGP[S](x, k, s, pads[:S], ceil, bool(cip))
#@ pool_grad
def _maxpool_grad(dy, x, k, s, pads, dil, ceil):
    """MaxPoolGrad: dY routed to each window's first maximum of X (PyTorch's own backward, with
    the argmax recomputed from X as magpie's kernel does)."""
    S = len(k)
    if not (pads[:S] == pads[S:] and all(2 * p <= kk for p, kk in zip(pads[:S], k))):
        xp = _pad_nd(x, pads, float("-inf"))
        gp = _maxpool_grad(dy, xp, k, s, [0] * (2 * S), dil, ceil)
        for i in range(S):
            gp = gp.narrow(2 + i, pads[i], x.shape[2 + i])
        return gp.contiguous()
    _, idx = _MAXP[S](x, k, s, pads[:S], dil, ceil, return_indices=True)
    bw = {1: None, 2: torch.ops.aten.max_pool2d_with_indices_backward,
          3: torch.ops.aten.max_pool3d_with_indices_backward}[S]
    if bw is None:
        g = torch.ops.aten.max_pool2d_with_indices_backward(
            dy.unsqueeze(2), x.unsqueeze(2), [1] + list(k), [1] + list(s), [0] + list(pads[:1]),
            [1] + list(dil), ceil, idx.unsqueeze(2))
        return g.squeeze(2)
    return bw(dy, x, list(k), list(s), list(pads[:S]), list(dil), ceil, idx)


def _avgpool_grad(dy, xshape, k, s, pads, ceil, cip):
    S = len(k)
    x = torch.zeros((), dtype=dy.dtype, device=dy.device).expand(xshape)
    if S == 1:
        g = torch.ops.aten.avg_pool2d_backward(dy.unsqueeze(2), x.unsqueeze(2), [1] + list(k),
                                               [1] + list(s), [0] + list(pads[:1]), ceil,
                                               bool(cip), None)
        return g.squeeze(2)
    bw = torch.ops.aten.avg_pool2d_backward if S == 2 else torch.ops.aten.avg_pool3d_backward
    return bw(dy, x, list(k), list(s), list(pads[:S]), ceil, bool(cip), None)


def _global_pool_grad(dy, xshape):
    n = 1
    for d in xshape[2:]:
        n *= d
    return (dy / n).expand(xshape).contiguous()
#@ batchnorm
def _bn_train(x, scale, bias, mean, var, eps, mom):
    """Training BatchNormalization: batch mean and biased variance (ONNX's reference, which also
    updates the running variance with the biased one). Returns (y, running mean, running var,
    batch mean, batch variance)."""
    dims = [0] + list(range(2, x.dim()))
    bv, bm = torch.var_mean(x, dim=dims, unbiased=False)
    shp = [1, -1] + [1] * (x.dim() - 2)
    a = scale / torch.sqrt(bv + eps)
    y = x * a.reshape(shp)
    y.add_((bias - bm * a).reshape(shp))
    return y, mean * mom + bm * (1 - mom), var * mom + bv * (1 - mom), bm, bv


def _bn_eval(x, scale, bias, mean, var, eps):
    return torch.nn.functional.batch_norm(x, mean, var, scale, bias, False, 0.0, eps)
#@ batchnorm_grad
def _bn_grad(dy, x, scale, mean, var, eps, train):
    """BatchNormGrad -> (dX, dScale, dBias), with the batch statistics recomputed from X
    (training) or the running ones. dScale and dBias come from PyTorch's
    native_batch_norm_backward; dX is composed in place in one tensor, the output magpie counts:
    the CPU kernel's contiguous path allocates grad_input twice (the first is freed only after
    the second is made), one activation more than the op's output."""
    dims = [0] + list(range(2, x.dim()))
    shp = [1, -1] + [1] * (x.dim() - 2)
    if train:
        bv, bm = torch.var_mean(x, dim=dims, unbiased=False)
        inv = torch.rsqrt(bv + eps)
        _, ds, db = torch.ops.aten.native_batch_norm_backward(dy, x, scale, None, None, bm, inv,
                                                              True, eps, [False, True, True])
        n = x.numel() // x.shape[1]
        k = scale * inv
        # dX = k (dY - dBias / n - (X - mean) inv dScale / n)
        dx = x - bm.reshape(shp)
        dx.mul_((k * inv * ds).div_(-n).reshape(shp))
        dx.addcmul_(dy, k.reshape(shp))
        dx.sub_((k * db).div_(n).reshape(shp))
        return dx, ds, db
    _, ds, db = torch.ops.aten.native_batch_norm_backward(dy, x, scale, mean, var, None, None,
                                                          False, eps, [False, True, True])
    return dy * (scale * torch.rsqrt(var + eps)).reshape(shp), ds, db
#@ layernorm
def _layernorm(x, scale, bias, axis, eps):
    y, m, r = torch.ops.aten.native_layer_norm(x, list(x.shape[axis:]), scale, bias, eps)
    return y, m, r


def _layernorm_grad(dy, x, scale, mean, inv, axis):
    ns = list(x.shape[axis:])
    # PyTorch's mean/rstd have X's leading dims and ones after, as ONNX's do.
    dx, ds, db = torch.ops.aten.native_layer_norm_backward(dy, x, ns, mean, inv, scale,
                                                           torch.zeros_like(scale),
                                                           [True, True, True])
    return dx, ds, db
#@ instancenorm
def _instnorm(x, scale, bias, eps):
    return torch.nn.functional.instance_norm(x, None, None, scale, bias, True, 0.0, eps)


def _instnorm_grad(dy, x, scale, eps):
    with torch.enable_grad():
        xr = x.detach().requires_grad_(True)
        sr = scale.detach().requires_grad_(True)
        br = torch.zeros_like(scale).requires_grad_(True)
        y = torch.nn.functional.instance_norm(xr, None, None, sr, br, True, 0.0, eps)
        return torch.autograd.grad(y, (xr, sr, br), dy)
#@ softmax
def _softmax(x, axis, old, log):
    f = torch.log_softmax if log else torch.softmax
    if not old:
        return f(x, axis)
    return f(x.reshape(list(x.shape[:axis]) + [-1]), -1).reshape(x.shape)


def _softmax_grad(dy, y, axis, old, log):
    shape = y.shape
    if old:
        dy = dy.reshape(list(shape[:axis]) + [-1])
        y = y.reshape(list(shape[:axis]) + [-1])
        axis = -1
    if log:
        g = torch.ops.aten._log_softmax_backward_data(dy, y, axis, y.dtype)
    else:
        g = torch.ops.aten._softmax_backward_data(dy, y, axis, y.dtype)
    return g.reshape(shape)
#@ reduce
def _reduce(kind, x, axes, keep):
    if kind == "sum":
        return torch.sum(x, dim=axes, keepdim=keep) if axes else (
            torch.sum(x).reshape([1] * x.dim()) if keep else torch.sum(x))
    if kind == "mean":
        return torch.mean(x, dim=axes, keepdim=keep)
    if kind == "max":
        return torch.amax(x, dim=axes, keepdim=keep)
    if kind == "min":
        return torch.amin(x, dim=axes, keepdim=keep)
    if kind == "l2":
        return torch.sqrt(torch.sum(x * x, dim=axes, keepdim=keep))
    if kind == "l1":
        return torch.sum(torch.abs(x), dim=axes, keepdim=keep)
    if kind == "sumsquare":
        return torch.sum(x * x, dim=axes, keepdim=keep)
    if kind == "logsum":
        return torch.log(torch.sum(x, dim=axes, keepdim=keep))
    if kind == "logsumexp":
        return torch.logsumexp(x, dim=axes, keepdim=keep)
    y = x
    for a in sorted(axes, reverse=True):
        y = torch.prod(y, dim=a, keepdim=keep)
    return y
#@ reduce_grad
def _reduce_grad(mode, dy, x, y, axes):
    keep = [1 if i in axes else d for i, d in enumerate(x.shape)]
    dy = dy.reshape(keep)
    y = y.reshape(keep)
    if mode in ("max", "min"):
        m = (x == y).to(x.dtype)
        return m * (dy / m.sum(dim=axes, keepdim=True))
    if mode == "l2":
        return torch.where(y == 0, torch.zeros_like(x), dy * x / y)
    # prod: the product of the other elements, exact where X has zeros.
    g = torch.empty_like(x)
    xf = x.movedim(axes, list(range(x.dim() - len(axes), x.dim())))
    shp = xf.shape
    xf = xf.reshape(list(shp[:x.dim() - len(axes)]) + [-1])
    n = xf.shape[-1]
    ones = torch.ones_like(xf[..., :1])
    pre = torch.cat([ones, torch.cumprod(xf, -1)[..., :-1]], -1)
    suf = torch.cat([torch.cumprod(xf.flip(-1), -1)[..., :-1].flip(-1), ones], -1)
    others = (pre * suf).reshape(shp).movedim(list(range(x.dim() - len(axes), x.dim())), axes)
    g.copy_(others * dy)
    return g
#@ argmax
def _argmax(x, axis, keep, last, smallest=False):
    """ArgMax (ArgMin with smallest): the first extreme's index, the last's with last."""
    f = torch.argmin if smallest else torch.argmax
    if last:
        r = f(x.flip(axis), axis, keepdim=True)
        r = x.shape[axis] - 1 - r
    else:
        r = f(x, axis, keepdim=True)
    return r if keep else r.squeeze(axis)
#@ cumsum
def _cumsum(x, axis, exclusive, reverse):
    if reverse:
        x = x.flip(axis)
    y = torch.cumsum(x, axis)
    if exclusive:
        y = y - x
    return y.flip(axis) if reverse else y
#@ resize
def _resize_tables(ins, outs, scales, ctm, rnd, linear, device):
    tabs = []
    for d, (i, o) in enumerate(zip(ins, outs)):
        sc = scales[d] if scales is not None else o / i
        if i == o and sc == 1.0 and ctm != "tf_half_pixel_for_nn":
            tabs.append(None)
            continue
        a, b, w = [], [], []
        for xo in range(o):
            if ctm == "half_pixel":
                xs = (xo + 0.5) / sc - 0.5
            elif ctm == "pytorch_half_pixel":
                xs = (xo + 0.5) / sc - 0.5 if o > 1 else 0.0
            elif ctm == "align_corners":
                xs = 0.0 if o == 1 else xo * (i - 1) / (o - 1)
            elif ctm == "asymmetric":
                xs = xo / sc
            else:
                xs = (xo + 0.5) / sc
            if linear:
                xs = min(max(xs, 0.0), float(i - 1))
                ia = int(xs // 1)
                ib = ia + 1 if ia + 1 < i else i - 1
                wt = xs - ia
            else:
                f = xs // 1
                fr = xs - f
                if rnd == "round_prefer_floor":
                    ia = int(f if fr <= 0.5 else f + 1)
                elif rnd == "round_prefer_ceil":
                    ia = int(f if fr < 0.5 else f + 1)
                elif rnd == "floor":
                    ia = int(f)
                else:
                    ia = -int((-xs) // 1)
                ia = min(max(ia, 0), i - 1)
                ib, wt = ia, 0.0
            a.append(ia)
            b.append(ib)
            w.append(wt)
        tabs.append((torch.tensor(a, device=device), torch.tensor(b, device=device),
                     torch.tensor(w, dtype=torch.float64, device=device)))
    return tabs


def _resize(x, outs, scales, ctm, rnd, linear):
    """Resize: separable n-linear (or nearest) interpolation with magpie's coordinate tables."""
    tabs = _resize_tables(list(x.shape), outs, scales, ctm, rnd, linear, x.device)
    y = x
    for d, t in enumerate(tabs):
        if t is None:
            continue
        a, b, w = t
        shp = [1] * y.dim()
        shp[d] = -1
        ya = y.index_select(d, a)
        if linear:
            wt = w.to(y.dtype).reshape(shp)
            y = ya * (1 - wt) + y.index_select(d, b) * wt
        else:
            y = ya
    return y.contiguous() if y is not x else x.clone()


def _resize_grad(dy, xshape, scales, ctm, rnd, linear):
    tabs = _resize_tables(list(xshape), list(dy.shape), scales, ctm, rnd, linear, dy.device)
    g = dy
    for d in reversed(range(len(tabs))):
        t = tabs[d]
        if t is None:
            continue
        a, b, w = t
        shp = list(g.shape)
        shp[d] = xshape[d]
        out = torch.zeros(shp, dtype=g.dtype, device=g.device)
        if linear:
            ws = [1] * g.dim()
            ws[d] = -1
            wt = w.to(g.dtype).reshape(ws)
            out.index_add_(d, a, g * (1 - wt))
            out.index_add_(d, b, g * wt)
        else:
            out.index_add_(d, a, g)
        g = out
    return g.contiguous() if g is not dy else dy.clone()
#@ slice
def _slice(x, axes, starts, ends, steps):
    """Slice with starts/ends already clamped as ONNX says; a copy, as magpie's kernel makes."""
    y = x
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st > 0:
            y = y[(slice(None),) * a + (slice(s, max(s, e), st),)]
        else:
            y = y.index_select(a, torch.arange(s, e, st, device=x.device))
    return y.clone(memory_format=torch.contiguous_format)
#@ pad
def _pad_src(j, pb, n, mode):
    """The input index that output index j of a dim padded by pb before reads (ir_pad_source:
    numpy's reflect, edge and wrap)."""
    i = j - pb
    if mode == "wrap":
        return i % n
    if mode == "edge" or n == 1:
        return min(max(i, 0), n - 1)
    p = 2 * (n - 1)
    i %= p
    return i if i < n else p - i


def _pad(x, pads, mode, value):
    """ONNX Pad; pads: every dim's begin, then every dim's end (the axes input resolved)."""
    r = x.dim()
    if mode == "constant":  # negative pads crop, as in F.pad
        fp = []
        for i in reversed(range(r)):
            fp += [pads[i], pads[r + i]]
        while len(fp) > 2 and fp[-1] == 0 and fp[-2] == 0:
            fp = fp[:-2]
        return torch.nn.functional.pad(x, fp, "constant", value)
    # reflect, edge, wrap on any dims and by any amount (reflect over several periods too, where
    # PyTorch's modes stop at the last three dims and pads under the dim's length): the interior
    # is x, then for each dim from the innermost out every border slab (dims before it inside the
    # interior, dims after it complete) copies the slab of its source index, as magpie's kernel;
    # the output is the only allocation
    pb, xs = pads[:r], list(x.shape)
    y = x.new_empty([xs[i] + pads[i] + pads[r + i] for i in range(r)])
    y[tuple(slice(pb[i], pb[i] + xs[i]) for i in range(r))].copy_(x)
    for d in reversed(range(r)):
        v = y
        for i in range(d):
            v = v.narrow(i, pb[i], xs[i])
        for j in range(y.shape[d]):
            if not pb[d] <= j < pb[d] + xs[d]:
                v.select(d, j).copy_(v.select(d, _pad_src(j, pb[d], xs[d], mode) + pb[d]))
    return y


def _pad_regions(r, parts, k=0):
    """Every combination of one part per dim (0 before, 1 interior, 2 after)."""
    if k == r:
        yield ()
        return
    for p in parts[k]:
        for rest in _pad_regions(r, parts, k + 1):
            yield (p,) + rest


def _pad_grad(dy, pads, mode):
    """PadGrad (reflect, edge, wrap): dX[i] sums dY over the positions that read i. dX starts as
    dY's interior; each border region of dY (some dims in a border, the others in the interior)
    is added into dX by index_add_ along its last border dim, one slice per position of its other
    border dims (corners: a few). The output is the only allocation besides the index lists."""
    r = dy.dim()
    pb, pe = pads[:r], pads[r:]
    xs = [dy.shape[i] - pb[i] - pe[i] for i in range(r)]
    dx = dy[tuple(slice(pb[i], pb[i] + xs[i]) for i in range(r))].clone(
        memory_format=torch.contiguous_format)
    spans = [[(0, pb[i]), (pb[i], xs[i]), (pb[i] + xs[i], pe[i])] for i in range(r)]
    parts = [[p for p in range(3) if spans[i][p][1] > 0 and (p == 1 or xs[i] > 0)]
             for i in range(r)]
    for reg in _pad_regions(r, parts):
        border = [i for i in range(r) if reg[i] != 1]
        if not border:
            continue
        src = dy
        for i in range(r):
            src = src.narrow(i, *spans[i][reg[i]])
        last, outer = border[-1], border[:-1]
        s0, n0 = spans[last][reg[last]]
        idx = torch.tensor([_pad_src(j, pb[last], xs[last], mode) for j in range(s0, s0 + n0)],
                           dtype=torch.int64, device=dy.device)
        for pos in _pad_regions(len(outer), [range(spans[d][reg[d]][1]) for d in outer]):
            s, t = src, dx
            for d, p in reversed(list(zip(outer, pos))):
                s = s.select(d, p)
                t = t.select(d, _pad_src(spans[d][reg[d]][0] + p, pb[d], xs[d], mode))
            t.index_add_(last - len(outer), idx, s)
    return dx
#@ grid_sample
_GS_MODE = {"linear": 0, "bilinear": 0, "nearest": 1, "cubic": 2, "bicubic": 2}
_GS_TORCH = ("bilinear", "nearest", "bicubic")
_GS_PAD = {"zeros": 0, "border": 1, "reflection": 2}


def _gs_grid(grid, sizes, mode, pad, align):
    """The grid that PyTorch's sampler reads as ONNX's GridSample (magpie's kernel) reads grid,
    and d(that grid)/d(grid) (None: grid itself). They differ where ONNX pads the point before
    taking its taps and PyTorch does not: cubic with border or reflection (PyTorch pads only the
    taps), nearest with reflection (ONNX rounds before reflecting, PyTorch after: halves differ).
    There the point is padded here, ONNX's way, and handed over inside the image; the slope is 0
    where border clips and +-1 where reflection folds. The padded grid and its slope are
    temporaries of a few times the grid's bytes that magpie's kernels do not have."""
    m = _GS_MODE[mode]
    if m == 0 or pad == "zeros" or (m == 1 and pad == "border"):
        return grid, None  # the two agree: the grid as it is, no temporaries
    cols, slopes = [], []
    for c in range(grid.shape[-1]):  # x first: the last spatial dim
        n = sizes[len(sizes) - 1 - c]
        g = grid[..., c]
        if align and n == 1:  # every point is pixel 0's centre
            cols.append(torch.zeros_like(g))
            slopes.append(torch.zeros_like(g))
            continue
        x = (g + 1) / 2 * (n - 1) if align else ((g + 1) * n - 1) / 2
        if m == 1:
            x = torch.round(x)  # half to even, as magpie's nearbyint
        lo, hi = (0.0, n - 1.0) if align else (-0.5, n - 0.5)
        out = (x < lo) | (x > hi)
        if pad == "border":
            xp = torch.where(out, x.clamp(0, n - 1), x)
            sl = (~out).to(g.dtype)
        else:
            rng = hi - lo
            below = x < lo
            dist = torch.where(below, lo - x, x - hi)
            k = torch.floor(dist / rng)
            rem = dist - k * rng
            even = torch.remainder(k, 2) == 0
            fold = torch.where(below == even, lo + rem, hi - rem)
            xp = torch.where(out, fold, x)
            sl = torch.where(out, 1 - 2 * even.to(g.dtype), torch.ones_like(g))
        cols.append(xp * 2 / (n - 1) - 1 if align else (2 * xp + 1) / n - 1)
        slopes.append(sl)
    return torch.stack(cols, -1), torch.stack(slopes, -1)


def _gs_1d(x, grid, dy=None):
    """A 1-D sampler as a 2-D one of height 1 (PyTorch has none): the point's y is 0, pixel 0's
    centre in both align_corners conventions, where every mode reads row 0 with weight 1."""
    g = torch.stack([grid[..., 0], torch.zeros_like(grid[..., 0])], -1).unsqueeze(1)
    return x.unsqueeze(2), g, None if dy is None else dy.unsqueeze(2)


def _grid_sample(x, grid, mode, pad, align):
    S = x.dim() - 2
    g, _ = _gs_grid(grid, list(x.shape[2:]), mode, pad, align)
    if S == 1:
        x, g, _ = _gs_1d(x, g)
    y = torch.nn.functional.grid_sample(x, g, mode=_GS_TORCH[_GS_MODE[mode]], padding_mode=pad,
                                        align_corners=align)
    return y[:, :, 0] if S == 1 else y


def _gs_backward(dy, x, g, mode, pad, align, mask):
    fn = (torch.ops.aten.grid_sampler_3d_backward if x.dim() == 5 else
          torch.ops.aten.grid_sampler_2d_backward)
    return fn(dy, x, g, _GS_MODE[mode], _GS_PAD[pad], align, mask)


def _grid_sample_grad(dy, grid, shape, mode, pad, align):
    """GridSampleGrad: dX through PyTorch's sampler backward, its grid gradient not computed; X's
    values are not read, so X is a zero scalar expanded to its shape (no memory)."""
    S = len(shape) - 2
    g, _ = _gs_grid(grid, list(shape[2:]), mode, pad, align)
    x = dy.new_zeros(()).expand(shape)
    if S == 1:
        x, g, dy = _gs_1d(x, g, dy)
    dx = _gs_backward(dy, x, g, mode, pad, align, [True, False])[0]
    return dx[:, :, 0] if S == 1 else dx


def _grid_sample_grid_grad(dy, x, grid, mode, pad, align):
    """GridSampleGridGrad: d loss / d grid through PyTorch's sampler backward (dX not computed),
    times the slope of ONNX's padding of the point where _gs_grid applied it."""
    S = x.dim() - 2
    g, slope = _gs_grid(grid, list(x.shape[2:]), mode, pad, align)
    if S == 1:
        x, g, dy = _gs_1d(x, g, dy)
    dg = _gs_backward(dy, x, g, mode, pad, align, [False, True])[1]
    if S == 1:
        dg = dg[:, 0, :, :1].contiguous()
    if slope is not None:
        dg.mul_(slope)
    return dg
#@ more
def _prelu(x, s):
    """PRelu: x where x >= 0, slope * x elsewhere, slope broadcast to x. A per-channel or scalar
    float slope (nn.PReLU's export) is F.prelu; any other shape (and integers) is a select of the
    factor and a multiply in place (its bool mask the one temporary)."""
    if x.is_floating_point() and x.dim() >= 2 and s.dim() <= x.dim():
        sh = [1] * (x.dim() - s.dim()) + list(s.shape)
        if s.numel() == 1 or (sh[1] == x.shape[1] and s.numel() == x.shape[1]):
            return torch.nn.functional.prelu(x, s.reshape(-1))
    y = torch.where(x < 0, s, torch.ones((), dtype=s.dtype, device=s.device))
    return y.mul_(x)


def _depth_to_space(x, b, crd):
    n, c, h, w = x.shape
    if crd:  # PyTorch's pixel_shuffle
        return torch.nn.functional.pixel_shuffle(x, b)
    return x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2).reshape(
        n, c // (b * b), h * b, w * b)


def _space_to_depth(x, b):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4).reshape(
        n, c * b * b, h // b, w // b)


def _topk(x, k, axis, largest):
    """TopK with ONNX's ties (the smaller index first): a stable sort of the whole axis (the sorted
    values and indices are temporaries of X's size), its first k."""
    v, i = torch.sort(x, dim=axis, descending=largest, stable=True)
    return v.narrow(axis, 0, k).contiguous(), i.narrow(axis, 0, k).contiguous()


def _group_norm(x, groups, scale, bias, eps, per_group):
    if per_group:  # opset 18: one scale and bias per group
        r = x.shape[1] // groups
        scale, bias = scale.repeat_interleave(r), bias.repeat_interleave(r)
    return torch.nn.functional.group_norm(x, groups, scale, bias, eps)


def _gather_nd(x, idx, b):
    i = idx.long()
    q = i.shape[-1]
    nb = 1
    for d in x.shape[:b]:
        nb *= d
    xf = x.reshape([nb] + list(x.shape[b:]))
    fi = i.reshape(nb, -1, q)
    cols = tuple(torch.where(fi[..., j] < 0, fi[..., j] + x.shape[b + j], fi[..., j])
                 for j in range(q))
    y = xf[(torch.arange(nb, device=x.device).unsqueeze(1),) + cols]
    return y.reshape(list(i.shape[:-1]) + list(x.shape[b + q:]))


def _scatter_elements(x, idx, upd, axis, reduction):
    i = idx.long()
    i = torch.where(i < 0, i + x.shape[axis], i)
    if reduction == "none":
        return x.scatter(axis, i, upd)
    if reduction == "add":
        return x.scatter_add(axis, i, upd)
    red = {"mul": "prod", "max": "amax", "min": "amin"}[reduction]
    return x.scatter_reduce(axis, i, upd, red, include_self=True)


def _one_hot(idx, depth, values, axis):
    """OneHot: values[1] at each index along the new axis, values[0] elsewhere; negative indices
    count from depth, indices outside [-depth, depth) give a line of values[0]."""
    i = idx.long()
    i = torch.where(i < 0, i + depth, i)
    ok = (i >= 0) & (i < depth)
    shape = list(idx.shape)
    y = torch.empty(shape[:axis] + [depth] + shape[axis:], dtype=values.dtype,
                    device=values.device)
    y.fill_(values[0])
    src = torch.where(ok, values[1], values[0]).unsqueeze(axis)
    return y.scatter_(axis, torch.where(ok, i, torch.zeros_like(i)).unsqueeze(axis), src)
#@ quant
def _q_param(p, x, axis, block):
    """A scale or zero point shaped to broadcast against x: per tensor, per axis, in blocks."""
    if block == 0 and p.numel() == 1 and p.dim() <= 1:
        return p.reshape([])
    if block:
        return p.repeat_interleave(block, dim=axis).narrow(axis, 0, x.shape[axis])
    sh = [1] * x.dim()
    sh[axis] = -1
    return p.reshape(sh)


def _quantize(x, scale, zp, axis, block, dtype, lo, hi):
    """saturate(round(x / scale) + zero point), halves to even, in x's precision (float32 for
    16-bit x); NaN gives the zero point."""
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    q = torch.round(xf / _q_param(scale, x, axis, block).to(xf.dtype))
    z = torch.zeros((), dtype=xf.dtype, device=x.device) if zp is None else \
        _q_param(zp, x, axis, block).to(xf.dtype)
    q = torch.where(torch.isnan(q), z, q + z)
    return q.clamp_(lo, hi).to(dtype)


def _dequantize(x, scale, zp, axis, block):
    """(x - zero point) * scale, the difference exact in int64, of the scale's type."""
    d = x.to(torch.int64)
    if zp is not None:
        d = d - _q_param(zp, x, axis, block).to(torch.int64)
    return d.to(scale.dtype) * _q_param(scale, x, axis, block)
#@ random
def _random(shape, dtype, dev, normal, a, b, seed):
    """RandomNormal (mean a, scale b) or RandomUniform ([a, b), kept below b after rounding to
    dtype) from PyTorch's generator; with a seed, a generator seeded with it alone."""
    g = None
    if seed is not None:
        g = torch.Generator(device=dev)
        g.manual_seed(seed)
    if normal:
        return torch.randn(shape, generator=g, dtype=dtype, device=dev).mul_(b).add_(a)
    y = torch.rand(shape, generator=g, dtype=dtype, device=dev).mul_(b - a).add_(a)
    top = torch.nextafter(torch.tensor(b, dtype=dtype), torch.tensor(a, dtype=dtype)).item()
    return y.clamp_(max=top)
#@ gather
def _norm_index(i, dim):
    i = i.long()
    return torch.where(i < 0, i + dim, i)


def _gather(x, idx, axis):
    i = _norm_index(idx, x.shape[axis])
    y = x.index_select(axis, i.reshape(-1))
    return y.reshape(list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:]))


def _gather_elements(x, idx, axis):
    return torch.gather(x, axis, _norm_index(idx, x.shape[axis]))


def _scatter_nd(x, idx, upd, reduction):
    y = x.clone()
    i = idx.long()
    k = i.shape[-1]
    ix = tuple(_norm_index(i[..., j], x.shape[j]) for j in range(k))
    if reduction == "none":
        y[ix] = upd
    elif reduction == "add":
        y.index_put_(ix, upd, accumulate=True)
    elif reduction == "mul":
        y[ix] = y[ix] * upd
    elif reduction == "max":
        y[ix] = torch.maximum(y[ix], upd)
    else:
        y[ix] = torch.minimum(y[ix], upd)
    return y
#@ gather_grad
def _gather_grad(dy, idx, shape, axis, out=None):
    """GatherGrad: the rows of dy added into zeros, or into out (a fused FissionAccumulate's
    buffer, zeroed by the caller for part 0 over an unfilled one)."""
    if out is None:
        out = torch.zeros(shape, dtype=dy.dtype, device=dy.device)
    i = _norm_index(idx, shape[axis]).reshape(-1)
    src = dy.reshape(list(shape[:axis]) + [i.numel()] + list(shape[axis + 1:]))
    return out.index_add_(axis, i, src)


def _gather_elements_grad(dy, idx, shape, axis):
    out = torch.zeros(shape, dtype=dy.dtype, device=dy.device)
    return out.scatter_add_(axis, _norm_index(idx, shape[axis]), dy)
#@ unary_grad
def _unary_grad(op, dy, t, alpha, beta, lo, hi):
    """UnaryGrad: dY * f'(T), T the forward input or output as ops-train.c's file comment says."""
    # PyTorch's own backward kernels where it has them: one output, no full-size temporaries
    if op == "Relu":
        return torch.ops.aten.threshold_backward(dy, t, 0)
    if op == "LeakyRelu":
        return torch.ops.aten.leaky_relu_backward(dy, t, alpha, False)
    if op == "Sigmoid":
        return torch.ops.aten.sigmoid_backward(dy, t)
    if op == "HardSigmoid":
        z = alpha * t + beta
        return dy * ((z > 0) & (z < 1)).to(dy.dtype) * alpha
    if op == "HardSwish":
        return torch.ops.aten.hardswish_backward(dy, t)
    if op == "Tanh":
        return torch.ops.aten.tanh_backward(dy, t)
    # the others in place in their one output: a temporary per factor would be an activation
    # more than the op's output, which magpie counts alone
    if op == "Erf":
        return torch.mul(t, t).neg_().exp_().mul_(1.1283791670955126).mul_(dy)
    if op == "Exp":
        return dy * t
    if op == "Log":
        return dy / t
    if op == "Sqrt":
        return torch.div(dy, t).mul_(0.5)
    if op == "Abs":
        return torch.sign(t).mul_(dy)
    if op == "Reciprocal":
        return torch.mul(t, t).neg_().mul_(dy)
    if op == "Softplus":
        return torch.sigmoid(t).mul_(dy)
    if op == "Elu":
        return torch.ops.aten.elu_backward(dy, alpha, 1, 1, False, t)
    if op in ("Gelu", "GeluTanh"):
        return torch.ops.aten.gelu_backward(dy, t, approximate="tanh" if op == "GeluTanh" else
                                            "none")
    if op == "Sin":
        return dy * torch.cos(t)
    if op == "Cos":
        return -dy * torch.sin(t)
    if op == "Softsign":
        return dy / (1 + torch.abs(t)) ** 2
    if op == "Selu":  # alpha, and gamma in beta's place
        return torch.where(t > 0, dy * beta, dy * (beta * alpha) * torch.exp(t))
    if op == "Celu":
        return torch.where(t > 0, dy, dy * torch.exp(t / alpha))
    if op == "Mish":
        sp = torch.tanh(torch.nn.functional.softplus(t))
        return dy * (sp + t * torch.sigmoid(t) * (1 - sp * sp))
    # Clip: hardtanh's strict bounds
    return dy * ((t > lo) & (t < hi)).to(dy.dtype)
#@ dropout
def _dropout(x, ratio, training, want_mask):
    """Dropout -> (y, mask); an identity copy (and an all-true mask) when not training."""
    if not training or ratio == 0.0:
        y = x.clone()
        m = torch.ones(x.shape, dtype=torch.bool, device=x.device) if want_mask else None
        return y, m
    m = torch.rand(x.shape, device=x.device) >= ratio
    return x * m.to(x.dtype) * (1.0 / (1.0 - ratio)), m
#@ sce
def _sce(x, labels, ignore, reduction):
    """SoftmaxCrossEntropy -> (loss, log-probabilities): the loss of the positions whose label
    is not ignore_index, summed (reduction "sum") or their mean (by default; NaN when every
    label is ignored, as magpie's kernel and PyTorch's cross_entropy)."""
    lp = torch.log_softmax(x, -1)
    C = x.shape[-1]
    loss = torch.nn.functional.nll_loss(lp.reshape(-1, C), labels.reshape(-1).long(),
                                        ignore_index=ignore, reduction=reduction)
    return loss, lp


def _sce_grad(dl, lp, labels, ignore, reduction):
    """SoftmaxCrossEntropyGrad -> dLogits: dl * (softmax - onehot), divided by the count of
    non-ignored labels unless reduction is "sum"; rows with an ignored label are zero."""
    C = lp.shape[-1]
    lab = labels.reshape(-1).long()
    keep = lab != ignore
    g = torch.exp(lp.reshape(-1, C))
    rows = torch.arange(lab.numel(), device=lp.device)
    g[rows[keep], lab[keep]] -= 1
    scale = dl.reshape(())
    if reduction != "sum":
        scale = scale / keep.sum()
    g.mul_(scale)
    # zero, not 0 * scale: a mean over no labels scales by inf, and the kernel writes 0 there
    g = torch.where(keep.unsqueeze(1), g, torch.zeros((), dtype=g.dtype, device=g.device))
    return g.reshape(lp.shape)
#@ update
def _sgd(p, g, lr):
    return p.add_(g, alpha=-lr)


def _momentum(p, b, g, lr, mu):
    b.mul_(mu).add_(g)
    p.add_(b, alpha=-lr)
    return p, b


def _adam(p, m, v, g, lr, b1, b2, eps, step):
    """torch.optim.Adam (single-tensor, 1.13) for one step `step`."""
    bc1 = 1 - b1 ** step
    bc2s = (1 - b2 ** step) ** 0.5
    m.mul_(b1).add_(g, alpha=1 - b1)
    v.mul_(b2).addcmul_(g, g, value=1 - b2)
    denom = (v.sqrt() / bc2s).add_(eps)
    p.addcdiv_(m, denom, value=-lr / bc1)
    return p, m, v
#@ range
def _range(start, limit, delta, n, dtype):
    s, d = start.item(), delta.item()
    return (torch.arange(n, dtype=torch.float64, device=start.device) * d + s).to(dtype)
#@ trilu
def _trilu(x, k, upper):
    return torch.triu(x, k) if upper else torch.tril(x, k)
#@ patch
def _patch(out, patch, starts):
    v = out
    for d, s in enumerate(starts):
        v = v.narrow(d, s, patch.shape[d])
    v.copy_(patch)
    return out
