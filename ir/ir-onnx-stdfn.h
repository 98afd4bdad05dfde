/* ir-onnx-stdfn.h - private to ir/: the function bodies of ONNX's standard ops that magpie has no
 * op of its own for (ir/proto/onnx-functions.inc, generated from onnx 1.22's schemas by
 * ir/proto/gen_onnx_functions.py), looked up by op and model opset (ir-onnx-stdfn.c). */
#ifndef MAGPIE_IR_ONNX_STDFN_H
#define MAGPIE_IR_ONNX_STDFN_H

#include "ir-onnx.h"

/* Number of bodies; their indexes are 0 .. count - 1. */
int ir_onnx_std_fn_count(void);
/* Index of the body that serves default-domain op op_type in a model of the given opset, or -1
 * when ONNX defines none there. */
int ir_onnx_std_fn_find(const char *op_type, int64_t opset);
/* Body idx unpacked (free it with onnx__function_proto__free_unpacked), or NULL on out of
 * memory. */
Onnx__FunctionProto *ir_onnx_std_fn_unpack(int idx);

#endif
