/* ir-impl.h - private declarations shared by the files of ir/: the arena, and the helpers that
 * op definitions (ops-*.c) use for shape inference and kernels. Not part of the public API. */
#ifndef MAGPIE_IR_IMPL_H
#define MAGPIE_IR_IMPL_H

#include "ir.h"

#include <string.h>

/* ---------------------------------------------------------------- arena */

/* A bump allocator freed in one call: one per graph lifetime. */
ir_arena *ir_arena_new(void);
void ir_arena_free(ir_arena *a);
void *ir_arena_alloc(ir_arena *a, size_t bytes); /* zeroed, 16-byte aligned, NULL on OOM */
char *ir_arena_strdup(ir_arena *a, const char *s);

/* ---------------------------------------------------------------- op definitions */

/* Every op file defines `const ir_op_def ir_opdef_<name>` for each of its ops. */
#define IR_OP(name, domain) extern const ir_op_def ir_opdef_##name;
#include "ir-ops.def"
#undef IR_OP

/* Message for a failure at node n: "node 'NAME' (OP): <fmt>". Returns st. */
ir_status ir_node_fail(ir_diag *d, ir_status st, const ir_node *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Sets output i's dtype and shape. */
static inline void ir_set_out(ir_graph *g, ir_node *n, int i, ir_dtype t, const ir_shape *s) {
    ir_value *v = &g->values[n->out[i]];
    v->dtype = t;
    v->shape = *s;
}

/* Reads constant input i as int64 values (any integer dtype). Returns the count, or -1 with a
 * message (input absent: -2, without message, so optional inputs can default). */
int ir_const_ints(const ir_graph *g, const ir_node *n, int i, int64_t *out, int max, ir_diag *d);
/* Reads constant scalar input i as double; false with a message when not constant. */
bool ir_const_scalar(const ir_graph *g, const ir_node *n, int i, double *out, ir_diag *d);

/* Normalizes a possibly negative axis against rank; false when out of range. */
static inline bool ir_norm_axis(int64_t axis, int rank, int *out) {
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= (rank > 0 ? rank : 1)) return false;
    *out = (int)axis;
    return true;
}

/* Number of elements of a kernel tensor. */
static inline int64_t ir_tensor_numel(const ir_tensor *t) { return ir_shape_numel(&t->shape); }

/* Parallel loops: OpenMP when the build has it (both cores), serial otherwise. Use for loops
 * whose iterations are independent and each worth at least a few microseconds in total. */
#ifdef _OPENMP
#define IR_PRAGMA(x) _Pragma(#x)
#define IR_PARALLEL_FOR(cond) IR_PRAGMA(omp parallel for schedule(static) if (cond))
#else
#define IR_PARALLEL_FOR(cond)
#endif
/* Loops with fewer element-operations than this stay serial. */
#define IR_PAR_MIN 32768

/* Index helpers for broadcasting: strides of `in` viewed as shape `out` (0 where broadcast). */
void ir_broadcast_strides(const ir_shape *in, const ir_shape *out, int64_t *strides);

#endif
