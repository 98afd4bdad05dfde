#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""run_all_node_tests.py - every one of onnx 1.22's 1,765 backend node tests through
`magpie run` (not only the converted ones): counts exit statuses and lists any test that crashes,
times out (60 s), or is refused with anything but exactly one line on stderr. Results are not
judged here (test_conformance does that).

    build-venv/bin/python tests/conformance/run_all_node_tests.py build/magpie /tmp/allnode
    ... build/magpie /tmp/somenode attention,rotary   # only tests whose names contain a word
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper
SRC=os.path.join(os.path.dirname(onnx.__file__),"backend","test","data","node")
magpie=sys.argv[1]; out=sys.argv[2]
only=sys.argv[3].split(",") if len(sys.argv)>3 else None
rcs={}; bad=[]
for name in sorted(os.listdir(SRC)):
    d=os.path.join(SRC,name); ds=os.path.join(d,"test_data_set_0")
    if not os.path.isdir(ds): continue
    if only and not any(w in name for w in only): continue
    m=onnx.load(os.path.join(d,"model.onnx"), load_external_data=False)
    init={i.name for i in m.graph.initializer}
    ins=[i.name for i in m.graph.input if i.name not in init]
    args=[]
    td=os.path.join(out,name); os.makedirs(td,exist_ok=True)
    ok=True
    for k,n in enumerate(ins):
        p=os.path.join(ds,f"input_{k}.pb")
        try:
            t=onnx.TensorProto(); t.ParseFromString(open(p,'rb').read())
            a=numpy_helper.to_array(t)
            if a.dtype==object or str(a.dtype) not in ('float32','float64','float16','bfloat16','int64','int32','int16','int8',
                                                                'uint64','uint32','uint16','uint8','bool'):
                a=a.astype(np.float32) if a.dtype!=object else None
            if a is None: ok=False; break
            f=os.path.join(td,f"in{k}.npy"); np.save(f,a); args+=["-i",f"{n}={f}"]
        except Exception:
            ok=False; break
    cmd=[magpie,"run",os.path.join(d,"model.onnx"),"-o",os.path.join(td,"o")]+args
    try:
        r=subprocess.run(cmd,capture_output=True,timeout=60)
        rc=r.returncode; err=r.stderr.decode(errors='replace')
    except subprocess.TimeoutExpired:
        rc='timeout'; err=''
    rcs[rc]=rcs.get(rc,0)+1
    lines=[l for l in err.splitlines() if l.strip()]
    if rc not in (0,2,3) or (rc==2 and len(lines)!=1):
        bad.append((name,rc,err[:300]))
print(rcs)
for b in bad: print(b)
