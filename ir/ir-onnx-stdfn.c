/* ir-onnx-stdfn.c - the table of ONNX's standard function bodies (ir-onnx-stdfn.h). The data file
 * is ONNX's (Apache-2.0, ir/proto/LICENSE-ONNX); each entry names the model opsets it serves. */
#include "ir-onnx-stdfn.h"

typedef struct onnx_std_fn {
    const char *name;
    int lo, hi;     /* the model opsets it serves */
    int body_opset; /* the opset its body was written for */
    const unsigned char *data;
    size_t len;
} onnx_std_fn;

#include "proto/onnx-functions.inc"

#define N_STD_FNS ((int)(sizeof onnx_std_fns / sizeof onnx_std_fns[0]))

int ir_onnx_std_fn_count(void) {
    return N_STD_FNS;
}

int ir_onnx_std_fn_find(const char *op_type, int64_t opset) {
    for (int i = 0; i < N_STD_FNS; i++)
        if (strcmp(onnx_std_fns[i].name, op_type) == 0 && opset >= onnx_std_fns[i].lo &&
            opset <= onnx_std_fns[i].hi)
            return i;
    return -1;
}

Onnx__FunctionProto *ir_onnx_std_fn_unpack(int idx) {
    if (idx < 0 || idx >= N_STD_FNS) return NULL;
    return onnx__function_proto__unpack(NULL, onnx_std_fns[idx].len, onnx_std_fns[idx].data);
}
