/* rt-reference.c - rt_run_reference (rt-check.h): the original graph run in float32 and, on the
 * same inputs, in float64. The bindings are widened here; inputs left unbound are drawn by rt_run
 * in both runs, and rt_fill_seeded gives a float64 value the float32 one, so the two runs differ
 * only in their arithmetic. */
#include "rt-check.h"

#include <stdlib.h>
#include <string.h>

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
    memset(r32, 0, sizeof *r32);
    memset(r64, 0, sizeof *r64);
    /* float64 first, and its copy of the graph (twice the weights' bytes) freed before the
     * float32 run: the two runs' buffers never live at once */
    ir_status st = IR_OK;
    ir_graph *g64 = ir_graph_to_f64(g, &st, d);
    if (!g64) return st;
    rt_options o64 = o ? *o : (rt_options){0};
    o64.order = NULL; /* the copy's own node order: values do not depend on the order */
    o64.n_order = 0;
    rt_binding *b = calloc((size_t)n_in + 1, sizeof *b);
    void **owned = calloc((size_t)n_in + 1, sizeof *owned);
    int nb = 0;
    st = b && owned ? IR_OK : ir_diag_set(d, IR_ERR_NOMEM, "out of memory for the float64 inputs");
    for (; st == IR_OK && nb < n_in; nb++) {
        /* ir_graph_to_f64 keeps value ids; a bad id is rt_run's to report, as in the f32 run */
        int id = in[nb].value;
        if (id < 0 || id >= g64->n_values) {
            b[nb] = in[nb];
            continue;
        }
        const ir_value *v64 = &g64->values[id];
        owned[nb] = convert(in[nb].data, in[nb].dtype, v64->dtype, ir_shape_numel(&in[nb].shape));
        if (!owned[nb]) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory for input '%s'", v64->name);
            break;
        }
        b[nb] = (rt_binding){
            .value = id, .dtype = v64->dtype, .shape = in[nb].shape, .data = owned[nb]};
    }
    if (st == IR_OK) st = rt_run(g64, b, nb, &o64, r64, d);
    for (int i = 0; i < nb; i++) free(owned[i]);
    free(owned);
    free(b);
    ir_graph_free(g64);
    if (st == IR_OK) st = rt_run(g, in, n_in, o, r32, d);
    if (st != IR_OK) rt_result_free(r64);
    return st;
}
