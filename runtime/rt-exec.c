/* rt-exec.c - rt_run: executes a graph in a given order with the op table's CPU kernels and
 * measures its memory (rt.h gives the accounting rules).
 *
 * Invariants:
 *  - every buffer a kernel sees comes from the counting allocator, except constants, which are
 *    read straight from their blobs and counted as external bytes for the whole run;
 *  - residents are graph inputs (bound, filled, or constant-backed) and constants that some node
 *    or graph output reads; they and graph outputs are never freed before the end;
 *  - last uses are derived here from the order, independently of sched/, so that tests can
 *    compare the executor's measured peak with the simulator's analytic one;
 *  - all scratch arrays are sized before the step loop: nothing but the counting allocator
 *    allocates while kernels run.
 * OpenBLAS keeps its own default thread count (all cores it sees); the kernels' OpenMP loops use
 * OMP_NUM_THREADS. They never nest: GEMM kernels call BLAS outside OpenMP regions. */
#include "rt-impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct exec {
    const ir_graph *g;
    const rt_options *o;
    rt_alloc alloc;
    int *order;           /* n_nodes */
    int *pos;             /* node -> step */
    int *last;            /* value -> last step that reads it, -1 if none */
    void **buf;           /* value -> data while live */
    rt_alloc host;        /* the host pool: outputs of IR_OPF_HOST_OUTPUT ops (Store) */
    unsigned char *owned; /* value -> buf came from the allocator (OWNED_DEVICE / OWNED_HOST) */
    unsigned char *keep;  /* value -> resident or graph output: lives to the end */
    unsigned char *bound; /* value -> given by a binding */
    /* value -> a resident that an IR_OPF_INPLACE output takes over (gets a writable buffer) */
    unsigned char *overwritten;
    /* value -> the root of its buffer (itself unless an IR_OPF_INPLACE output or a view:
     * ir_graph_buffer_roots): the value whose buffer it lives in, which owns the buffer's last
     * use and free */
    int *root;
    /* value -> the fused FissionAccumulate whose buffer its producer writes it into
     * (ir_graph_fused_parts, which also gave it that buffer's root), or -1 */
    int *into;
    ir_tensor *tin, *tout;
    ir_diag *d;
} exec;

enum { OWNED_DEVICE = 1, OWNED_HOST = 2 };

/* The pool a value's buffer came from: host values never count as device bytes. */
static rt_alloc *pool_of(exec *x, int v) {
    return x->owned[v] == OWNED_HOST ? &x->host : &x->alloc;
}

/* Checks that order is a topological permutation and fills pos. */
static ir_status check_order(exec *x, const int *order, int n) {
    const ir_graph *g = x->g;
    if (n != g->n_nodes)
        return ir_diag_set(x->d, IR_ERR_INVALID, "order has %d steps but the graph has %d nodes", n,
                           g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) x->pos[i] = -1;
    for (int s = 0; s < n; s++) {
        int k = order[s];
        if (k < 0 || k >= g->n_nodes)
            return ir_diag_set(x->d, IR_ERR_INVALID, "order step %d: %d is not a node index", s, k);
        if (x->pos[k] >= 0)
            return ir_node_fail(x->d, IR_ERR_INVALID, &g->nodes[k],
                                "appears twice in the order (steps %d and %d)", x->pos[k], s);
        x->pos[k] = s;
        x->order[s] = k;
    }
    for (int s = 0; s < n; s++) {
        const ir_node *nd = &g->nodes[order[s]];
        for (int i = 0; i < nd->n_in; i++) {
            int v = nd->in[i];
            if (v < 0) continue;
            if (v >= g->n_values)
                return ir_node_fail(x->d, IR_ERR_INVALID, nd, "input %d refers to no value", i);
            int p = g->values[v].producer;
            if (p >= 0 && x->pos[p] >= s)
                return ir_node_fail(x->d, IR_ERR_INVALID, nd,
                                    "order is not topological: step %d reads '%s', which node "
                                    "'%s' produces at step %d",
                                    s, g->values[v].name, g->nodes[p].name, x->pos[p]);
        }
    }
    /* An in-place output must follow every other reader of the value it overwrites and of its
     * views (they need the old value; an ordering-only input reads none). x->last serves as
     * scratch: value -> step overwriting it. */
    if (!ir_graph_overwriters(g, true, x->last))
        return ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory checking the order");
    for (int v = 0; v < g->n_values; v++)
        if (x->last[v] >= 0) x->last[v] = x->pos[x->last[v]];
    for (int s = 0; s < n; s++) {
        const ir_node *nd = &g->nodes[order[s]];
        for (int i = 0; i < nd->n_in; i++) {
            int v = nd->in[i], w = v >= 0 && !ir_input_order_only(nd, i) ? x->last[v] : -1;
            if (w >= 0 && w < s)
                return ir_node_fail(x->d, IR_ERR_INVALID, nd,
                                    "order is not valid: step %d reads '%s', which node '%s' "
                                    "overwrites in place at step %d",
                                    s, g->values[v].name, g->nodes[order[w]].name, w);
        }
    }
    return IR_OK;
}

/* Every node must have a kernel and every value it touches a dtype. */
static ir_status check_nodes(exec *x) {
    const ir_graph *g = x->g;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *nd = &g->nodes[i];
        const ir_op_def *def = ir_op_get(nd->op);
        if (!def || !def->kernel)
            return ir_node_fail(x->d, IR_ERR_UNSUPPORTED, nd, "cannot run an unsupported op");
        for (int k = 0; k < nd->n_out; k++) {
            int v = nd->out[k];
            if (v >= g->n_values || (v >= 0 && g->values[v].producer != i))
                return ir_node_fail(x->d, IR_ERR_INVALID, nd, "output %d has a wrong producer", k);
            if (v >= 0 && ir_dtype_size(g->values[v].dtype) == 0)
                return ir_node_fail(x->d, IR_ERR_INVALID, nd,
                                    "output '%s' has no dtype (shapes were not inferred)",
                                    g->values[v].name);
        }
    }
    return IR_OK;
}

static ir_status check_bindings(exec *x, const rt_binding *in, int n) {
    const ir_graph *g = x->g;
    for (int i = 0; i < n; i++) {
        int id = in[i].value;
        if (id < 0 || id >= g->n_values)
            return ir_diag_set(x->d, IR_ERR_INVALID, "binding %d: %d is not a value id", i, id);
        const ir_value *v = &g->values[id];
        if (v->producer >= 0)
            return ir_diag_set(x->d, IR_ERR_INVALID,
                               "cannot bind '%s': it is computed by node '%s'", v->name,
                               g->nodes[v->producer].name);
        if (!(v->flags & IR_VF_INPUT) && !v->blob)
            return ir_diag_set(x->d, IR_ERR_INVALID,
                               "cannot bind '%s': it is neither a graph input nor a constant",
                               v->name);
        if (x->bound[id])
            return ir_diag_set(x->d, IR_ERR_INVALID, "input '%s' is bound twice", v->name);
        if (in[i].dtype != v->dtype || !ir_shape_eq(&in[i].shape, &v->shape)) {
            char es[160], gs[160];
            return ir_diag_set(x->d, IR_ERR_SHAPE, "input '%s': expected %s %s, given %s %s",
                               v->name, ir_dtype_name(v->dtype),
                               ir_shape_str(&v->shape, es, sizeof es), ir_dtype_name(in[i].dtype),
                               ir_shape_str(&in[i].shape, gs, sizeof gs));
        }
        if (!in[i].data && ir_value_bytes(v) > 0)
            return ir_diag_set(x->d, IR_ERR_INVALID, "input '%s': binding has no data", v->name);
        x->bound[id] = 1;
    }
    return IR_OK;
}

/* Last uses from the order (a produced value nobody reads: its own step); graph outputs and
 * values without a producer are kept. A buffer taken over in place or viewed belongs to its
 * root (ir_graph_buffer_roots), and so does the part of a fused FissionAccumulate that its
 * producer writes into the accumulate's buffer in this order (ir_graph_fused_parts): the root
 * lives until the last use of any value with that root and is kept when one of them is; the
 * other values never free it themselves. */
static ir_status compute_lifetimes(exec *x) {
    const ir_graph *g = x->g;
    for (int v = 0; v < g->n_values; v++) {
        x->last[v] = -1;
        x->keep[v] = g->values[v].producer < 0;
    }
    for (int i = 0; i < g->n_outputs; i++) x->keep[g->outputs[i]] = 1;
    for (int s = 0; s < g->n_nodes; s++) {
        const ir_node *nd = &g->nodes[x->order[s]];
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i] >= 0) x->last[nd->in[i]] = s;
    }
    for (int v = 0; v < g->n_values; v++) {
        int p = g->values[v].producer;
        if (p >= 0 && x->last[v] < 0) x->last[v] = x->pos[p];
    }
    ir_graph_buffer_roots(g, x->root);
    if (!ir_graph_fused_parts(g, x->order, x->pos, x->root, x->into))
        return ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory placing the fused accumulates");
    for (int v = 0; v < g->n_values; v++) {
        int r = x->root[v];
        if (r == v) continue;
        /* a resident written in place (not one only viewed) needs a writable buffer */
        if (g->values[r].producer < 0 && ir_value_inplace_of(g, v) >= 0) x->overwritten[r] = 1;
        if (x->last[v] > x->last[r]) x->last[r] = x->last[v];
        if (x->keep[v]) x->keep[r] = 1;
    }
    for (int v = 0; v < g->n_values; v++)
        if (x->root[v] != v) x->keep[v] = 1;
    return IR_OK;
}

/* Places every resident: constants from their blobs, graph inputs in allocator buffers (bound
 * data, or seeded values). Returns the resident byte count in *resident. */
static ir_status place_residents(exec *x, const rt_binding *in, int n_in, size_t *resident) {
    const ir_graph *g = x->g;
    const rt_options *o = x->o;
    bool any_data = false;
    for (int i = 0; i < g->n_inputs; i++)
        if (g->values[g->inputs[i]].flags & IR_VF_DATA) any_data = true;
    *resident = 0;
    for (int id = 0; id < g->n_values; id++) {
        const ir_value *v = &g->values[id];
        if (v->producer >= 0) continue;
        bool used = x->last[id] >= 0 || (v->flags & IR_VF_OUTPUT);
        if (!(v->flags & IR_VF_INPUT) && !(v->blob && used)) {
            if (!used) continue;
            return ir_diag_set(x->d, IR_ERR_INVALID,
                               "value '%s' is read but has no data (neither a constant nor a "
                               "graph input)",
                               v->name);
        }
        size_t bytes = ir_value_bytes(v);
        if (ir_dtype_size(v->dtype) == 0)
            return ir_diag_set(x->d, IR_ERR_INVALID, "value '%s' has no dtype", v->name);
        *resident += bytes;
        /* a constant that an in-place update overwrites gets a writable copy: blobs are shared */
        if (!x->bound[id] && v->blob && !x->overwritten[id]) {
            if (ir_blob_bytes(v->blob) < bytes)
                return ir_diag_set(x->d, IR_ERR_INVALID,
                                   "constant '%s' holds %zu bytes, its shape needs %zu", v->name,
                                   ir_blob_bytes(v->blob), bytes);
            x->buf[id] = ir_blob_data(v->blob);
            rt_alloc_external(&x->alloc, bytes);
            continue;
        }
        void *p = rt_alloc_get(&x->alloc, bytes);
        if (!p)
            return ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory for input '%s' (%zu bytes)",
                               v->name, bytes);
        x->buf[id] = p;
        x->owned[id] = 1;
        if (!x->bound[id] && v->blob) {
            memcpy(p, ir_blob_data(v->blob), bytes);
            continue;
        }
        if (x->bound[id]) {
            for (int i = 0; i < n_in; i++)
                if (in[i].value == id && bytes) memcpy(p, in[i].data, bytes);
            continue;
        }
        /* DESIGN.md: data inputs are the flagged ones, by default the first graph input. */
        bool data = any_data ? (v->flags & IR_VF_DATA) : (g->n_inputs > 0 && g->inputs[0] == id);
        if (data && !o->fill_missing_data)
            return ir_diag_set(x->d, IR_ERR_INVALID, "missing data input '%s'", v->name);
        ir_value tmp = *v;
        if (data) tmp.flags |= IR_VF_DATA;
        rt_fill_seeded(&tmp, o->seed, p);
    }
    return IR_OK;
}

/* Runs nd's kernel on the buffers run_step prepared (x->tin, x->tout); an input that is a
 * transposed operand (a Transpose output sharing its base's buffer) is flagged for the kernel,
 * and so is an output 0 that is a fused accumulate's part: written into the accumulate's buffer,
 * added to it (beta = 1) unless the accumulate overwrites (part 0 into an unfilled buffer). */
static ir_status run_kernel(exec *x, const ir_node *nd, void *ws, size_t wsb) {
    const ir_graph *g = x->g;
    uint32_t transposed = 0;
    for (int i = 0; i < nd->n_in && i < 32; i++) {
        int v = nd->in[i], p = v >= 0 ? g->values[v].producer : -1;
        if (p >= 0 && g->nodes[p].op == IR_OP_Transpose && x->root[v] != v) transposed |= 1u << i;
    }
    int acc = nd->n_out > 0 && nd->out[0] >= 0 ? x->into[nd->out[0]] : -1;
    bool accumulate = acc >= 0 && !ir_fission_accumulate_overwrites(g, &g->nodes[acc]);
    ir_diag local = {{0}};
    ir_diag *kd = x->d ? x->d : &local;
    kd->msg[0] = 0;
    ir_kernel_ctx k = {.graph = g,
                       .node = nd,
                       .n_in = nd->n_in,
                       .n_out = nd->n_out,
                       .in = x->tin,
                       .out = x->tout,
                       .workspace = ws,
                       .workspace_bytes = wsb,
                       .in_transposed = transposed,
                       .accumulate = accumulate,
                       .seed = x->o->seed,
                       .diag = kd};
    ir_status st = ir_node_run(&k);
    if (st != IR_OK) {
        if (!kd->msg[0])
            ir_node_fail(kd, st, nd, "kernel failed: %s", ir_status_to_string(st));
        else if (!strstr(kd->msg, nd->name)) {
            char tmp[sizeof kd->msg];
            memcpy(tmp, kd->msg, sizeof tmp);
            ir_node_fail(kd, st, nd, "%s", tmp);
        }
    }
    return st;
}

int rt_kernel_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs step s: allocate, sample, run the kernel, free what died. */
static ir_status run_step(exec *x, int s, size_t *step_bytes) {
    const ir_graph *g = x->g;
    const ir_node *nd = &g->nodes[x->order[s]];
    void *ws = NULL;
    ir_status st = IR_OK;
    for (int i = 0; i < nd->n_in; i++) {
        int v = nd->in[i];
        x->tin[i] = (ir_tensor){.dtype = IR_DTYPE_NONE};
        if (v < 0) continue;
        x->tin[i].dtype = g->values[v].dtype;
        x->tin[i].shape = g->values[v].shape;
        x->tin[i].data = x->buf[v];
        if (!x->buf[v]) /* a value whose producer field disagrees with the node lists */
            return ir_node_fail(x->d, IR_ERR_INVALID, nd, "input '%s' has no data at step %d",
                                g->values[v].name, s);
    }
    for (int i = 0; i < nd->n_out; i++) {
        int v = nd->out[i];
        x->tout[i] = (ir_tensor){.dtype = IR_DTYPE_NONE};
        if (v < 0) continue;
        if (x->root[v] != v) { /* in place, a view or a fused part: its root's buffer */
            x->buf[v] = x->buf[x->root[v]];
            x->tout[i] = (ir_tensor){
                .dtype = g->values[v].dtype, .shape = g->values[v].shape, .data = x->buf[v]};
            continue;
        }
        size_t bytes = ir_value_bytes(&g->values[v]);
        bool host = ir_value_on_host(g, v);
        void *p = rt_alloc_get(host ? &x->host : &x->alloc, bytes);
        if (!p)
            return ir_node_fail(x->d, IR_ERR_NOMEM, nd, "out of memory for output '%s' (%zu bytes)",
                                g->values[v].name, bytes);
        x->buf[v] = p;
        x->owned[v] = host ? OWNED_HOST : OWNED_DEVICE;
        x->tout[i].dtype = g->values[v].dtype;
        x->tout[i].shape = g->values[v].shape;
        x->tout[i].data = p;
    }
    size_t wsb = ir_node_workspace(g, nd);
    if (wsb) {
        ws = rt_alloc_get(&x->alloc, wsb);
        if (!ws)
            return ir_node_fail(x->d, IR_ERR_NOMEM, nd, "out of memory for %zu bytes of workspace",
                                wsb);
    }
    step_bytes[s] = x->alloc.live;
    /* A view runs no kernel: its output is its base's bytes (a transposed operand's, read
     * transposed by its MatMul/Gemm readers). */
    const ir_op_def *def = ir_op_get(nd->op);
    bool view = (def->flags & IR_OPF_VIEW) && nd->out[0] >= 0 && x->root[nd->out[0]] != nd->out[0];
    if (!view) st = run_kernel(x, nd, ws, wsb);
    rt_alloc_put(&x->alloc, ws);
    if (st != IR_OK) return st;
    /* Buffers at their last use: read here, or written here and never read. A buffer this node
     * touches twice is freed once: buf is cleared. */
    for (int i = 0; i < nd->n_in + nd->n_out; i++) {
        int v = i < nd->n_in ? nd->in[i] : nd->out[i - nd->n_in], r = v >= 0 ? x->root[v] : -1;
        if (r >= 0 && !x->keep[r] && x->last[r] == s && x->buf[r]) {
            rt_alloc_put(pool_of(x, r), x->buf[r]);
            x->buf[r] = NULL;
        }
    }
    return IR_OK;
}

static ir_status copy_outputs(exec *x, rt_result *r) {
    const ir_graph *g = x->g;
    r->outputs = calloc((size_t)(g->n_outputs ? g->n_outputs : 1), sizeof(ir_tensor));
    if (!r->outputs) return ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory for the outputs");
    r->n_outputs = g->n_outputs;
    for (int i = 0; i < g->n_outputs; i++) {
        const ir_value *v = &g->values[g->outputs[i]];
        size_t bytes = ir_value_bytes(v);
        ir_tensor *t = &r->outputs[i];
        t->dtype = v->dtype;
        t->shape = v->shape;
        t->data = malloc(bytes ? bytes : 1);
        if (!t->data)
            return ir_diag_set(x->d, IR_ERR_NOMEM, "out of memory for output '%s'", v->name);
        if (!x->buf[g->outputs[i]])
            return ir_diag_set(x->d, IR_ERR_INVALID, "graph output '%s' is never produced",
                               v->name);
        if (bytes) memcpy(t->data, x->buf[g->outputs[i]], bytes);
    }
    return IR_OK;
}

ir_status rt_run(const ir_graph *g, const rt_binding *inputs, int n_inputs, const rt_options *o,
                 rt_result *r, ir_diag *d) {
    static const rt_options defaults = {0};
    if (!o) o = &defaults;
    memset(r, 0, sizeof *r);
    if (d) d->msg[0] = 0;
    ir_status st = IR_OK;
    size_t nv = (size_t)(g->n_values ? g->n_values : 1), nn = (size_t)(g->n_nodes ? g->n_nodes : 1);
    int max_in = 1, max_out = 1;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].n_in > max_in) max_in = g->nodes[i].n_in;
        if (g->nodes[i].n_out > max_out) max_out = g->nodes[i].n_out;
    }
    bool poison = o->poison_freed;
#ifdef MAGPIE_DEBUG
    poison = true;
#endif
    exec x = {.g = g, .o = o, .d = d};
    rt_alloc_init(&x.alloc, poison);
    rt_alloc_init(&x.host, poison);
    x.order = malloc(sizeof(int) * nn);
    x.pos = malloc(sizeof(int) * nn);
    x.last = malloc(sizeof(int) * nv);
    x.buf = calloc(nv, sizeof(void *));
    x.owned = calloc(nv, 1);
    x.keep = calloc(nv, 1);
    x.overwritten = calloc(nv, 1);
    x.bound = calloc(nv, 1);
    x.root = malloc(sizeof(int) * nv);
    x.into = malloc(sizeof(int) * nv);
    x.tin = calloc((size_t)max_in, sizeof(ir_tensor));
    x.tout = calloc((size_t)max_out, sizeof(ir_tensor));
    r->step_bytes = calloc(nn, sizeof(size_t));
    if (!x.order || !x.pos || !x.last || !x.buf || !x.owned || !x.keep || !x.overwritten ||
        !x.bound || !x.root || !x.into || !x.tin || !x.tout || !r->step_bytes) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory preparing the run");
        goto out;
    }
    if (o->order) {
        st = check_order(&x, o->order, o->n_order);
    } else {
        for (int i = 0; i < g->n_nodes; i++) x.order[i] = i;
        st = check_order(&x, x.order, g->n_nodes);
    }
    if (st != IR_OK) goto out;
    if ((st = check_nodes(&x)) != IR_OK) goto out;
    if ((st = check_bindings(&x, inputs, n_inputs)) != IR_OK) goto out;
    if ((st = compute_lifetimes(&x)) != IR_OK) goto out;
    size_t resident = 0;
    if ((st = place_residents(&x, inputs, n_inputs, &resident)) != IR_OK) goto out;
    r->resident_bytes = resident;
    r->n_steps = g->n_nodes;

    double t0 = ir_now_seconds(), c0 = thread_cpu_seconds();
    if (o->node_seconds) {
        /* one clock read per step: a step's end is the next one's start */
        bool cpu = rt_kernel_threads() == 1;
        double prev = cpu ? c0 : t0;
        for (int s = 0; s < g->n_nodes; s++) {
            if ((st = run_step(&x, s, r->step_bytes)) != IR_OK) goto out;
            double now = cpu ? thread_cpu_seconds() : ir_now_seconds();
            o->node_seconds[x.order[s]] = now - prev;
            prev = now;
        }
    } else {
        for (int s = 0; s < g->n_nodes; s++)
            if ((st = run_step(&x, s, r->step_bytes)) != IR_OK) goto out;
    }
    r->wall_seconds = ir_now_seconds() - t0;
    r->cpu_seconds = thread_cpu_seconds() - c0;

    r->peak_bytes = resident;
    for (int s = 0; s < g->n_nodes; s++)
        if (r->step_bytes[s] > r->peak_bytes) r->peak_bytes = r->step_bytes[s];
    /* Allocations only happen before each sample, so the allocator's own running maximum must
     * agree with the sampled one. */
    IR_ASSERT(r->peak_bytes == x.alloc.peak);
    r->peak_host_bytes = x.host.peak;
    st = copy_outputs(&x, r);
out:
    if (x.buf && x.owned)
        for (size_t v = 0; v < nv; v++)
            if (x.owned[v]) rt_alloc_put(pool_of(&x, (int)v), x.buf[v]);
    IR_ASSERT(x.alloc.n_live == 0 && x.host.n_live == 0);
    free(x.order);
    free(x.pos);
    free(x.last);
    free(x.buf);
    free(x.owned);
    free(x.keep);
    free(x.overwritten);
    free(x.bound);
    free(x.root);
    free(x.into);
    free(x.tin);
    free(x.tout);
    if (st != IR_OK) {
        rt_result_free(r);
        if (d && g->source && g->source[0]) ir_diag_prefix(d, g->source);
    }
    return st;
}

void rt_result_free(rt_result *r) {
    if (!r) return;
    for (int i = 0; i < r->n_outputs; i++) free(r->outputs[i].data);
    free(r->outputs);
    free(r->step_bytes);
    memset(r, 0, sizeof *r);
}
