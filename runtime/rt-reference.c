/* rt-reference.c - rt_run_reference (rt-check.h): the original graph run in float32 and, on the
 * same inputs, in float64. Inputs the caller does not bind are drawn here in the graph's own
 * dtype, as rt_run would draw them, and widened: a float64 draw would give other values (not
 * rounded to float), and the two runs would then differ by their inputs, not only by their
 * arithmetic. */
#include "rt-check.h"
#include "rt-impl.h"

#include <stdlib.h>
#include <string.h>

static const rt_binding *binding_of(const rt_binding *in, int n, int id) {
    for (int i = n - 1; i >= 0; i--) /* the last binding of a value wins, as in rt_run */
        if (in[i].value == id) return &in[i];
    return NULL;
}

/* A copy of src's data (dtype st, n elements) as dtype dt, malloc'd; NULL on out of memory. */
static void *convert(const void *src, ir_dtype st, ir_dtype dt, int64_t n) {
    size_t bytes = (size_t)n * ir_dtype_size(dt);
    void *p = malloc(bytes ? bytes : 1);
    if (!p) return NULL;
    if (st == dt)
        memcpy(p, src, bytes);
    else
        for (int64_t i = 0; i < n; i++) ir_store_f64(p, dt, i, ir_load_f64(src, st, i));
    return p;
}

ir_status rt_run_reference(const ir_graph *g, const rt_binding *in, int n_in, const rt_options *o,
                           rt_result *r32, rt_result *r64, ir_diag *d) {
    memset(r64, 0, sizeof *r64);
    ir_status st = rt_run(g, in, n_in, o, r32, d);
    if (st != IR_OK) return st;
    ir_graph *g64 = ir_graph_to_f64(g, &st, d);
    if (!g64) {
        rt_result_free(r32);
        return st;
    }
    rt_options o64 = o ? *o : (rt_options){0};
    o64.order = NULL; /* the copy's own node order: values do not depend on the order */
    o64.n_order = 0;
    /* every graph input, and every bound constant (at most one binding per value) */
    int cap = g->n_values, nb = 0;
    rt_binding *b = calloc((size_t)(cap ? cap : 1), sizeof *b);
    void **owned = calloc((size_t)(cap ? cap : 1), sizeof *owned);
    void *draw = NULL;
    st = b && owned ? IR_OK : ir_diag_set(d, IR_ERR_NOMEM, "out of memory for the float64 inputs");
    for (int id = 0; st == IR_OK && id < g->n_values; id++) {
        const ir_value *v = &g->values[id];
        const rt_binding *given = binding_of(in, n_in, id);
        if (!given && !(v->flags & IR_VF_INPUT)) continue;
        int id64 = id; /* ir_graph_to_f64 keeps value ids */
        const ir_value *v64 = &g64->values[id64];
        const void *src = given ? given->data : NULL;
        if (!src) {
            free(draw);
            draw = malloc(ir_value_bytes(v) ? ir_value_bytes(v) : 1);
            if (!draw) {
                st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory for input '%s'", v->name);
                break;
            }
            ir_value tmp = *v;
            if (rt_is_data_input(g, id)) tmp.flags |= IR_VF_DATA;
            rt_fill_seeded(&tmp, o64.seed, draw);
            src = draw;
        }
        owned[nb] = convert(src, v->dtype, v64->dtype, ir_shape_numel(&v->shape));
        if (!owned[nb]) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory for input '%s'", v->name);
            break;
        }
        b[nb] = (rt_binding){
            .value = id64, .dtype = v64->dtype, .shape = v64->shape, .data = owned[nb]};
        nb++;
    }
    free(draw);
    if (st == IR_OK) st = rt_run(g64, b, nb, &o64, r64, d);
    for (int i = 0; i < nb; i++) free(owned[i]);
    free(owned);
    free(b);
    ir_graph_free(g64);
    if (st != IR_OK) rt_result_free(r32);
    return st;
}
