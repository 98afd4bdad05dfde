"""bake_weights.py SRC DST INPUT.npy - the PET benches' model preparation: the weights (graph
inputs after the first) become seeded initializers, and a random data input for the first graph
input is saved to INPUT.npy. Seeds come from the input names, so every run bakes the same model."""
import sys, zlib, numpy as np, onnx
from onnx import numpy_helper as nh, helper
try:
    np_type = helper.tensor_dtype_to_np_dtype  # onnx >= 1.13
except AttributeError:
    from onnx import mapping
    np_type = mapping.TENSOR_TYPE_TO_NP_TYPE.__getitem__
src, dst, npy = sys.argv[1:4]
m = onnx.load(src)
g = m.graph
have = {i.name for i in g.initializer}
keep, new = [], []
for k, inp in enumerate(g.input):
    if inp.name in have:
        continue
    t = inp.type.tensor_type
    shape = [d.dim_value for d in t.shape.dim]
    dt = np_type(t.elem_type)
    rng = np.random.default_rng(zlib.crc32(inp.name.encode()))
    if k == 0:
        keep.append(inp)
        np.save(npy, rng.uniform(-1, 1, shape).astype(dt))
        continue
    if not np.issubdtype(dt, np.floating):
        a = np.zeros(shape)
    elif inp.name.endswith("running_var"):
        a = rng.uniform(0.5, 1.5, shape)
    else:
        fan = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        a = rng.uniform(-1, 1, shape) / np.sqrt(max(fan, 1))
    new.append(nh.from_array(a.astype(dt), inp.name))
del g.input[:]
g.input.extend(keep)
g.initializer.extend(new)
onnx.save(m, dst)
