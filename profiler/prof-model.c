/* prof-model.c - cost models: opening one from a device string, profiling a graph into the
 * database, and answering per-node and transfer costs.
 *
 * An analytic model ("analytic:<target>") is the roofline of a named target and nothing else. A
 * measured model ("cpu", "cuda") pairs a back-end (prof_backend) with the profile database:
 *  - prof_open loads the database; entries are keyed by a hash of the device detail string
 *    ("cpu: <model name>, 2 threads"), so other machines' and thread counts' entries in a
 *    shared file are kept but never used;
 *  - prof_profile_graph times each distinct signature the database lacks, and once per device a
 *    few calibration measurements (a 512^3 MatMul, a 4 Mi-element Add, a Tanh, the executor's
 *    per-step overhead, a 16 MiB copy) from which the roofline of signatures never measured is
 *    built: the search creates new shapes (fission) after profiling has ended;
 *  - a node costs its measured kernel time plus the step overhead; Store and Load cost the
 *    calibrated transfer; an unmeasured node costs the calibrated roofline.
 * After profiling the model is read-only, so lookups from many search threads need no lock. */
#include "prof-impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_RUNS 5
#define DEFAULT_WARMUP 2
#define CAL_MM_N 512
#define CAL_ADD_N ((int64_t)1 << 22)
#define CAL_OTHER_N ((int64_t)1 << 16)
#define CAL_XFER_BYTES ((size_t)16 << 20)

/* Figures of an uncalibrated CPU (a few cores of a current x86 server); replaced by measured
 * ones as soon as the device has been profiled once. */
static const prof_target cpu_defaults = {
    "cpu-default", "uncalibrated CPU", 50e9, 50e9, 2e9, 10e9, 10e9, 2e-6, 0.0,
};

enum { CAL_MM, CAL_ADD, CAL_OTHER, CAL_N };

struct prof_model {
    char device[64];  /* as opened */
    char detail[320]; /* the physical device, hashed into the database key */
    bool measured;
    prof_target fallback; /* analytic: the named target; measured: the calibrated roofline */
    const prof_backend *be;
    void *ctx;
    uint64_t dev;
    prof_db db;
    prof_db seen; /* signatures already counted in stats (device 0) */
    bool use_db;
    char db_path[4096];
    double step_s; /* added to every measured node */
    int runs, warmup;
    bool cal_done;                    /* calibration attempted by this model */
    volatile sig_atomic_t *interrupt; /* prof_options.interrupt */
    bool frozen; /* a snapshot was applied: profiling measures nothing any more */
    prof_warner warn;
    prof_stats stats;
    uint64_t cal_sig[CAL_N];
    double cal_flops[CAL_N], cal_bytes[CAL_N];
    uint64_t step_sig, xfer_sig;
};

/* ---------------------------------------------------------------- calibration graphs */

/* A one-node graph of op over float32 graph inputs of the given shapes, outputs inferred. */
static ir_graph *synth(ir_op_kind op, int n_in, const ir_shape *shapes, ir_diag *d) {
    ir_graph *g = ir_graph_new();
    int in[4], out;
    if (!g) goto nomem;
    for (int i = 0; i < n_in; i++) {
        char name[8] = {'x', (char)('0' + i), 0};
        if ((in[i] = ir_graph_add_value(g, name, IR_F32, &shapes[i])) < 0) goto nomem;
        g->values[in[i]].flags |= IR_VF_INPUT;
        ir_graph_add_input(g, in[i]);
    }
    if ((out = ir_graph_add_value(g, "y", IR_F32, &shapes[0])) < 0) goto nomem;
    int k = ir_graph_add_node(g, op, "calibration", n_in, in, 1, &out, 0, NULL);
    if (k < 0) goto nomem;
    if (ir_node_infer(g, &g->nodes[k], d) != IR_OK) {
        ir_graph_free(g);
        return NULL;
    }
    ir_graph_add_output(g, out);
    return g;
nomem:
    ir_graph_free(g);
    ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    return NULL;
}

static ir_graph *cal_graph(int which, ir_diag *d) {
    ir_shape s[2];
    switch (which) {
    case CAL_MM:
        s[0] = s[1] = (ir_shape){.rank = 2, .dims = {CAL_MM_N, CAL_MM_N}};
        return synth(IR_OP_MatMul, 2, s, d);
    case CAL_ADD:
        s[0] = s[1] = (ir_shape){.rank = 1, .dims = {CAL_ADD_N}};
        return synth(IR_OP_Add, 2, s, d);
    default: s[0] = (ir_shape){.rank = 1, .dims = {CAL_OTHER_N}}; return synth(IR_OP_Tanh, 1, s, d);
    }
}

/* Signatures, FLOPs and bytes of the calibration nodes, for reading their entries back. */
static ir_status cal_init(prof_model *m, ir_diag *d) {
    for (int c = 0; c < CAL_N; c++) {
        ir_graph *g = cal_graph(c, d);
        if (!g) return IR_ERR_NOMEM;
        const ir_node *n = &g->nodes[0];
        m->cal_sig[c] = prof_signature(g, n);
        m->cal_flops[c] = ir_node_flops(g, n);
        m->cal_bytes[c] = 0;
        for (int i = 0; i < n->n_in; i++)
            m->cal_bytes[c] += (double)ir_value_bytes(ir_node_in(g, n, i));
        m->cal_bytes[c] += (double)ir_value_bytes(ir_node_out(g, n, 0));
        ir_graph_free(g);
    }
    m->step_sig = prof_signature_tag("cpu-step-overhead");
    char tag[64];
    snprintf(tag, sizeof tag, "host-transfer-%zu", CAL_XFER_BYTES);
    m->xfer_sig = prof_signature_tag(tag);
    return IR_OK;
}

static double entry_seconds(const prof_model *m, uint64_t sig) {
    const prof_entry *e = prof_db_find(&m->db, m->dev, sig);
    return e && e->seconds > 0 ? e->seconds : 0;
}

/* Turns whatever calibration entries the database holds into the fallback roofline. */
static void apply_calibration(prof_model *m) {
    double t;
    int found = 0;
    if ((t = entry_seconds(m, m->cal_sig[CAL_MM])) > 0) {
        m->fallback.mm_f32_flops = m->fallback.mm_f16_flops = m->cal_flops[CAL_MM] / t;
        found++;
    }
    if ((t = entry_seconds(m, m->cal_sig[CAL_ADD])) > 0) {
        m->fallback.mem_bw = m->cal_bytes[CAL_ADD] / t;
        found++;
    }
    if ((t = entry_seconds(m, m->cal_sig[CAL_OTHER])) > 0) {
        m->fallback.other_f32_flops = m->cal_flops[CAL_OTHER] / t;
        found++;
    }
    if (prof_db_find(&m->db, m->dev, m->step_sig)) {
        m->step_s = entry_seconds(m, m->step_sig);
        m->fallback.launch_s = m->step_s;
        found++;
    }
    if ((t = entry_seconds(m, m->xfer_sig)) > 0) m->fallback.host_link_bw = CAL_XFER_BYTES / t;
    m->stats.calibrated = found == 4;
}

static ir_status put_fresh(prof_model *m, uint64_t sig, double seconds) {
    prof_entry e = {
        .device = m->dev, .sig = sig, .seconds = seconds, .runs = (uint32_t)m->runs, .fresh = true};
    return prof_db_put(&m->db, &e);
}

/* A back-end failure other than out-of-memory costs a warning, never the run. */
static ir_status soft(prof_model *m, ir_status st, const ir_diag *d, const char *what) {
    if (st == IR_ERR_NOMEM) return st;
    prof_warnf(&m->warn, "%s: %s: %s", m->device, what,
               d->msg[0] ? d->msg : ir_status_to_string(st));
    return IR_OK;
}

/* Measures what the database lacks, once per model: a back-end that cannot run a calibration
 * op warns once and keeps the default figure. */
static ir_status calibrate(prof_model *m, ir_diag *out) {
    if (m->cal_done) return IR_OK;
    ir_status st = IR_OK;
    ir_diag local = {{0}}, *d = &local;
    double t;
    for (int c = 0; c < CAL_N && st == IR_OK; c++) {
        if (prof_db_find(&m->db, m->dev, m->cal_sig[c])) continue;
        ir_graph *g = cal_graph(c, d);
        if (!g) {
            st = soft(m, IR_ERR_NOMEM, d, "calibration skipped");
            break;
        }
        st = m->be->time_node(m->ctx, g, &g->nodes[0], m->warmup, m->runs, &t, d);
        ir_graph_free(g);
        st = st == IR_OK ? put_fresh(m, m->cal_sig[c], t) : soft(m, st, d, "calibration skipped");
    }
    if (st == IR_OK && m->be->time_step_overhead && !prof_db_find(&m->db, m->dev, m->step_sig)) {
        st = m->be->time_step_overhead(m->ctx, m->runs, &t, d);
        st = st == IR_OK ? put_fresh(m, m->step_sig, t) : soft(m, st, d, "calibration skipped");
    }
    if (st == IR_OK && m->be->time_transfer && !prof_db_find(&m->db, m->dev, m->xfer_sig)) {
        st = m->be->time_transfer(m->ctx, CAL_XFER_BYTES, m->runs, &t, d);
        st = st == IR_OK ? put_fresh(m, m->xfer_sig, t) : soft(m, st, d, "calibration skipped");
    }
    if (st == IR_OK) {
        apply_calibration(m);
        m->cal_done = true;
    } else if (out) {
        *out = local;
    }
    return st;
}

/* ---------------------------------------------------------------- open / close */

static ir_status open_backend(prof_model *m, const char *device, ir_diag *d) {
    if (strcmp(device, "cpu") == 0) {
        m->be = prof_cpu_backend();
    } else {
        m->be = prof_cuda_backend();
        if (!m->be)
            return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                               "device 'cuda': magpie was built without CUDA");
    }
    char why[256] = "";
    if (m->be->available && !m->be->available(why, sizeof why))
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "device '%s': no %s device found (%s)", device,
                           strcmp(device, "cuda") == 0 ? "CUDA" : device,
                           why[0] ? why : "unknown reason");
    m->ctx = NULL;
    ir_status st = m->be->open(&m->ctx, d);
    if (st != IR_OK) {
        m->ctx = NULL; /* a failed open owns nothing */
        if (d && !d->msg[0]) ir_diag_set(d, st, "cannot open the back-end");
        if (d) {
            char msg[sizeof d->msg];
            snprintf(msg, sizeof msg, "%s", d->msg);
            ir_diag_set(d, st, "device '%s': %.900s", device, msg);
        }
        return st;
    }
    char desc[256] = "";
    if (m->be->describe) m->be->describe(m->ctx, desc, sizeof desc);
    snprintf(m->detail, sizeof m->detail, "%s: %s", m->be->name, desc[0] ? desc : "unknown");
    m->fallback = cpu_defaults;
    const char *fb = m->be->fallback_target ? m->be->fallback_target(m->ctx) : NULL;
    const prof_target *t = fb ? prof_target_find(fb) : NULL;
    if (t) m->fallback = *t;
    m->step_s = 0;
    return IR_OK;
}

static ir_status open_db(prof_model *m, const prof_options *o) {
    if (o && o->no_db) return IR_OK;
    if (o && o->db_path && o->db_path[0]) {
        snprintf(m->db_path, sizeof m->db_path, "%s", o->db_path);
    } else if (!prof_db_default_path(m->db_path, sizeof m->db_path)) {
        prof_warnf(&m->warn, "neither XDG_CACHE_HOME nor HOME is set: measurements stay in memory");
        return IR_OK;
    }
    m->use_db = true;
    return prof_db_load(&m->db, m->db_path, &m->warn);
}

prof_model *prof_open(const char *device, const prof_options *o, ir_status *st, ir_diag *d) {
    ir_status s = IR_OK;
    prof_model *m = calloc(1, sizeof *m);
    if (!m) {
        s = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    prof_db_init(&m->db);
    prof_db_init(&m->seen);
    m->runs = o && o->runs > 0 ? (o->runs < 1000 ? o->runs : 1000) : DEFAULT_RUNS;
    m->warmup = o && o->warmup > 0 ? o->warmup : DEFAULT_WARMUP;
    if (o) m->warn = (prof_warner){o->warn, o->warn_ctx};
    if (o) m->interrupt = o->interrupt;
    if (!device) device = "analytic:rtx3090";
    snprintf(m->device, sizeof m->device, "%s", device);
    char names[128];
    if (strncmp(device, "analytic:", 9) == 0) {
        const prof_target *t = prof_target_find(device + 9);
        if (!t) {
            s = ir_diag_set(d, IR_ERR_INVALID,
                            "device '%s': unknown analytic target '%s' (known: %s)", device,
                            device + 9, prof_target_names(names, sizeof names));
            goto out;
        }
        m->fallback = *t;
        snprintf(m->detail, sizeof m->detail, "%s", device);
    } else if (strcmp(device, "cpu") == 0 || strcmp(device, "cuda") == 0) {
        m->measured = true;
        if ((s = open_backend(m, device, d)) != IR_OK) goto out;
        m->dev = ir_hash_bytes(m->detail, strlen(m->detail), 0);
        if ((s = cal_init(m, d)) != IR_OK) goto out;
        if ((s = open_db(m, o)) != IR_OK) {
            ir_diag_set(d, s, "out of memory loading the profile database");
            goto out;
        }
        apply_calibration(m);
    } else {
        s = ir_diag_set(d, IR_ERR_INVALID,
                        "unknown device '%s' (expected cpu, cuda or analytic:<target> with a "
                        "target among %s)",
                        device, prof_target_names(names, sizeof names));
        goto out;
    }
out:
    if (st) *st = s;
    if (s != IR_OK) {
        prof_close(m);
        return NULL;
    }
    return m;
}

void prof_close(prof_model *m) {
    if (!m) return;
    if (m->use_db) prof_db_save(&m->db, m->db_path, &m->warn);
    if (m->be && m->ctx && m->be->close) m->be->close(m->ctx);
    prof_db_clear(&m->db);
    prof_db_clear(&m->seen);
    free(m);
}

const char *prof_device(const prof_model *m) {
    return m->device;
}

bool prof_is_measured(const prof_model *m) {
    return m->measured;
}

const char *prof_device_detail(const prof_model *m) {
    return m->detail;
}

const char *prof_db_path(const prof_model *m) {
    return m->use_db ? m->db_path : NULL;
}

const prof_target *prof_fallback_target(const prof_model *m) {
    return &m->fallback;
}

void prof_get_stats(const prof_model *m, prof_stats *s) {
    *s = m->stats;
    s->db_entries = m->measured ? (int)prof_db_count_device(&m->db, m->dev) : 0;
}

/* ---------------------------------------------------------------- profiling and lookups */

/* prof_options.interrupt was set: measure nothing more. */
static bool interrupted(const prof_model *m) {
    return m->interrupt && *m->interrupt;
}

ir_status prof_profile_graph(prof_model *m, const ir_graph *g, ir_diag *d) {
    if (!m->measured || m->frozen || interrupted(m)) return IR_OK;
    ir_status st = calibrate(m, d);
    for (int i = 0; i < g->n_nodes && st == IR_OK && !interrupted(m); i++) {
        const ir_node *n = &g->nodes[i];
        size_t bytes;
        if (prof_is_transfer(g, n, &bytes)) continue; /* costed by the calibrated transfer */
        uint64_t sig = prof_signature(g, n);
        if (prof_db_find(&m->seen, 0, sig)) continue;
        prof_entry seen = {.sig = sig};
        if ((st = prof_db_put(&m->seen, &seen)) != IR_OK) break;
        if (prof_db_find(&m->db, m->dev, sig)) {
            m->stats.reused++;
            continue;
        }
        double t = 0;
        ir_diag nd = {{0}};
        st = m->be->time_node(m->ctx, g, n, m->warmup, m->runs, &t, &nd);
        if (st == IR_OK) {
            st = put_fresh(m, sig, t);
            m->stats.measured++;
        } else if (st != IR_ERR_NOMEM) {
            prof_warnf(&m->warn, "%s: %s: using the analytic estimate", m->device, nd.msg);
            m->stats.failed++;
            st = IR_OK;
        } else {
            ir_diag_set(d, st, "%s", nd.msg);
        }
    }
    if (st == IR_ERR_NOMEM && d && !d->msg[0]) ir_diag_set(d, st, "out of memory while profiling");
    if (st != IR_OK && d && g->source && g->source[0]) ir_diag_prefix(d, g->source);
    return st;
}

/* A signature prof_retime times: where one node of it lives, and its samples. */
typedef struct retime_item {
    const ir_graph *g;
    const ir_node *n;
    uint64_t sig;
    bool failed;  /* timing it alone failed: it keeps the entry it has */
    bool covered; /* a chosen graph holds it (in-run) */
    bool in_run;  /* sampled inside a graph's run */
} retime_item;

/* One in-run sample: the item (signature) and the node's seconds in that run. */
typedef struct run_sample {
    size_t item;
    double s;
} run_sample;

static int cmp_run_sample(const void *a, const void *b) {
    const run_sample *x = a, *y = b;
    if (x->item != y->item) return x->item < y->item ? -1 : 1;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* The item of node nd of g, or -1 when it has none (a transfer, a signature the database does
 * not hold) or runs no kernel in the executor (a view: root says, ir_graph_buffer_roots). */
static long item_of(const prof_db *idx, const ir_graph *g, const ir_node *nd, const int *root) {
    size_t bytes;
    if (prof_is_transfer(g, nd, &bytes)) return -1;
    const ir_op_def *def = ir_op_get(nd->op);
    if (root && def && (def->flags & IR_OPF_VIEW) && nd->n_out > 0 && nd->out[0] >= 0 &&
        root[nd->out[0]] != nd->out[0])
        return -1;
    const prof_entry *e = prof_db_find(idx, 0, prof_signature(g, nd));
    return e ? (long)e->runs : -1;
}

/* The in-run part of prof_retime (prof.h): the graphs chosen, warmed up, run in rounds; the
 * items they sample get their entries. Graphs that fail to run are dropped (their items are then
 * timed alone); only IR_ERR_NOMEM of this function's own buffers is an error. */
static ir_status retime_in_run(prof_model *m, const ir_graph *const *gs, int n, retime_item *it,
                               size_t ni, const prof_db *idx, ir_diag *d) {
    int max_nodes = 1, max_values = 1;
    for (int k = 0; k < n; k++) {
        if (gs[k]->n_nodes > max_nodes) max_nodes = gs[k]->n_nodes;
        if (gs[k]->n_values > max_values) max_values = gs[k]->n_values;
    }
    int *root = malloc(sizeof *root * (size_t)max_values);
    double *ns = malloc(sizeof *ns * (size_t)max_nodes);
    int *chosen = malloc(sizeof *chosen * (size_t)(n > 0 ? n : 1)), n_chosen = 0;
    run_sample *smp = NULL;
    ir_status st = root && ns && chosen ? IR_OK : IR_ERR_NOMEM;
    /* gs[0] (the original), then from the last graph back, each one that brings an item */
    for (int j = 0; j < n && st == IR_OK; j++) {
        int k = j == 0 ? 0 : n - j;
        const ir_graph *g = gs[k];
        ir_graph_buffer_roots(g, root);
        bool brings = k == 0;
        for (int i = 0; i < g->n_nodes && !brings; i++) {
            long t = item_of(idx, g, &g->nodes[i], root);
            brings = t >= 0 && !it[t].covered;
        }
        if (!brings) continue;
        for (int i = 0; i < g->n_nodes; i++) {
            long t = item_of(idx, g, &g->nodes[i], root);
            if (t >= 0) it[t].covered = true;
        }
        chosen[n_chosen++] = k;
    }
    /* warm-up: pages every buffer in, and sizes the rounds; a graph whose runs would not fit
     * the budget (at the least rounds) is dropped with the ones after it, its items timed alone */
    double round_s = 0;
    size_t per_round = 0;
    for (int c = 0; c < n_chosen && st == IR_OK && !interrupted(m); c++) {
        double run_s = 0;
        ir_diag gd = {{0}};
        if (m->be->time_graph(m->ctx, gs[chosen[c]], ns, &run_s, &gd) != IR_OK) {
            chosen[c] = -1;
            continue;
        }
        if (c > 0 && (round_s + run_s) * (m->runs + 1) > PROF_RETIME_BUDGET_S) {
            for (int e = c; e < n_chosen; e++) chosen[e] = -1;
            break;
        }
        round_s += run_s;
        per_round += (size_t)gs[chosen[c]]->n_nodes;
    }
    int rounds = round_s > 0 ? (int)(PROF_RETIME_BUDGET_S / round_s) : PROF_RETIME_MAX_ROUNDS;
    if (rounds > PROF_RETIME_MAX_ROUNDS) rounds = PROF_RETIME_MAX_ROUNDS;
    if (rounds < m->runs) rounds = m->runs;
    if (st == IR_OK && per_round && !(smp = malloc(sizeof *smp * per_round * (size_t)rounds)))
        st = IR_ERR_NOMEM;
    size_t ns_n = 0;
    /* round r runs every chosen graph once: a machine growing busier or quieter weighs on all */
    for (int r = 0; r < rounds && st == IR_OK && per_round && !interrupted(m); r++)
        for (int c = 0; c < n_chosen; c++) {
            if (chosen[c] < 0) continue;
            const ir_graph *g = gs[chosen[c]];
            double run_s;
            ir_diag gd = {{0}};
            if (m->be->time_graph(m->ctx, g, ns, &run_s, &gd) != IR_OK) {
                chosen[c] = -1; /* its samples so far count */
                continue;
            }
            ir_graph_buffer_roots(g, root);
            for (int i = 0; i < g->n_nodes; i++) {
                long t = item_of(idx, g, &g->nodes[i], root);
                if (t < 0) continue;
                smp[ns_n++] = (run_sample){(size_t)t, ns[i]};
                it[t].in_run = true;
            }
        }
    if (st == IR_OK && ns_n) {
        qsort(smp, ns_n, sizeof *smp, cmp_run_sample);
        for (size_t a = 0; a < ns_n && st == IR_OK;) {
            size_t b = a;
            while (b < ns_n && smp[b].item == smp[a].item) b++;
            size_t c = b - a;
            double med = c % 2 ? smp[a + c / 2].s : 0.5 * (smp[a + c / 2 - 1].s + smp[a + c / 2].s);
            /* prof_node_seconds adds the step overhead back */
            double kernel = med > m->step_s ? med - m->step_s : 0;
            st = put_fresh(m, it[smp[a].item].sig, kernel);
            a = b;
        }
    }
    free(root);
    free(ns);
    free(chosen);
    free(smp);
    if (st == IR_ERR_NOMEM && d && !d->msg[0]) ir_diag_set(d, st, "out of memory re-timing");
    return st;
}

ir_status prof_retime(prof_model *m, const ir_graph *const *gs, int n, ir_diag *d) {
    if (!m->measured || m->frozen || !m->be->time_node) return IR_OK;
    size_t cap = 0;
    for (int k = 0; k < n; k++) cap += (size_t)gs[k]->n_nodes;
    int runs = m->runs;
    retime_item *it = malloc(sizeof *it * (cap ? cap : 1));
    double *t = malloc(sizeof *t * (cap ? cap : 1) * (size_t)runs);
    prof_db idx;
    prof_db_init(&idx);
    ir_status st = it && t ? IR_OK : IR_ERR_NOMEM;
    size_t ni = 0;
    for (int k = 0; k < n && st == IR_OK; k++)
        for (int i = 0; i < gs[k]->n_nodes && st == IR_OK; i++) {
            const ir_graph *g = gs[k];
            const ir_node *nd = &g->nodes[i];
            size_t bytes;
            if (prof_is_transfer(g, nd, &bytes)) continue;
            uint64_t sig = prof_signature(g, nd);
            if (!prof_db_find(&m->db, m->dev, sig) || prof_db_find(&idx, 0, sig)) continue;
            prof_entry e = {.sig = sig, .runs = (uint32_t)ni};
            st = prof_db_put(&idx, &e);
            it[ni++] = (retime_item){.g = g, .n = nd, .sig = sig};
        }
    if (st == IR_OK && m->be->time_graph) st = retime_in_run(m, gs, n, it, ni, &idx, d);
    /* alone: round r times every signature no run sampled once; interrupted, the rounds not
     * all run leave every entry as it was */
    int done = 0;
    for (; done < runs && st == IR_OK && !interrupted(m); done++)
        for (size_t i = 0; i < ni && st == IR_OK; i++) {
            const int r = done;
            if (it[i].failed || it[i].in_run) continue;
            ir_diag nd = {{0}};
            ir_status ts = m->be->time_node(m->ctx, it[i].g, it[i].n, 1, 1, &t[i * runs + r], &nd);
            if (ts == IR_ERR_NOMEM)
                st = ir_diag_set(d, ts, "%s", nd.msg);
            else if (ts != IR_OK)
                it[i].failed = true; /* keeps the entry it has */
        }
    for (size_t i = 0; i < ni && st == IR_OK && done == runs; i++)
        if (!it[i].failed && !it[i].in_run)
            st = put_fresh(m, it[i].sig, prof_median(&t[i * runs], runs));
    prof_db_clear(&idx);
    free(it);
    free(t);
    if (st == IR_ERR_NOMEM && d && !d->msg[0]) ir_diag_set(d, st, "out of memory re-timing");
    return st;
}

double prof_node_seconds(prof_model *m, const ir_graph *g, const ir_node *n) {
    size_t bytes;
    if (prof_is_transfer(g, n, &bytes)) return prof_transfer_seconds(m, bytes);
    if (m->measured) {
        const prof_entry *e = prof_db_find(&m->db, m->dev, prof_signature(g, n));
        if (e) return e->seconds + m->step_s;
    }
    return prof_roofline_seconds(&m->fallback, g, n);
}

double prof_transfer_seconds(const prof_model *m, size_t bytes) {
    return prof_roofline_transfer(&m->fallback, bytes);
}

/* ---------------------------------------------------------------- internals (prof-snapshot.c) */

uint64_t prof_model_dev(const prof_model *m) {
    return m->dev;
}

const prof_db *prof_model_db(const prof_model *m) {
    return &m->db;
}

double prof_model_step_s(const prof_model *m) {
    return m->step_s;
}

void prof_model_install(prof_model *m, prof_db *db, const char *detail, const prof_target *fb,
                        double step_s) {
    if (m->measured && strcmp(detail, m->detail) != 0)
        prof_warnf(&m->warn,
                   "%s: costs come from a checkpoint profiled on '%s', not on this "
                   "machine ('%s')",
                   m->device, detail, m->detail);
    snprintf(m->detail, sizeof m->detail, "%s", detail);
    prof_db_clear(&m->db);
    m->db = *db;
    prof_db_init(db);
    if (m->measured) {
        m->dev = ir_hash_bytes(m->detail, strlen(m->detail), 0);
        apply_calibration(m); /* for stats.calibrated; the figures are the snapshot's below */
    }
    const char *name = m->fallback.name, *description = m->fallback.description;
    m->fallback = *fb;
    m->fallback.name = name;
    m->fallback.description = description;
    m->step_s = step_s;
    m->cal_done = m->frozen = true;
}
