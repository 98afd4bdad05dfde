/* ir-onnx-functions.h - private to ir/: model-local ONNX functions and the standard ops ONNX
 * defines by a function body, expanded at import (ir-onnx-functions.c). */
#ifndef MAGPIE_IR_ONNX_FUNCTIONS_H
#define MAGPIE_IR_ONNX_FUNCTIONS_H

#include "ir-onnx.h"

typedef struct ir_onnx_fn_expansion {
    bool active;
    ir_arena *arena;               /* the expanded nodes and their names */
    Onnx__NodeProto **graph_nodes; /* the graph's own node array, put back by restore */
    size_t n_graph_nodes;
    Onnx__FunctionProto **std_bodies; /* the standard bodies unpacked, by ir-onnx-stdfn index */
    size_t n_std;
} ir_onnx_fn_expansion;

/* Replaces mp's main-graph nodes that call a function of mp->functions, or a standard op that
 * magpie reads only through ONNX's body of it (ir-onnx-stdfn.h), by the function bodies
 * (recursively, names made unique per call, ref_attr_name resolved). Nothing changes when no
 * node calls one. On failure (a cycle, a sub-graph in a body, a call with more inputs or outputs
 * than the function) mp is unchanged and d names the function and node. */
ir_status ir_onnx_functions_expand(Onnx__ModelProto *mp, ir_onnx_fn_expansion *x, ir_diag *d);
/* Puts mp's own node array back (before onnx__model_proto__free_unpacked). */
void ir_onnx_functions_restore(Onnx__ModelProto *mp, ir_onnx_fn_expansion *x);

#endif
