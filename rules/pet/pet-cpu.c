/* pet-cpu.c - the CPU verification back-end (pet.h "back-ends"): evaluates compiled programs over
 * Z_p at the tested positions, for every input set, on its own pthreads.
 *
 * Evaluation is planned once per program and run once per input set:
 *  - the plan propagates the probes backward through the steps (pet_k_mark): a demand bitmap per
 *    value says which of its elements some probe needs. A heavy step (a product, a convolution,
 *    a reduction) whose output is needed for more than a quarter of its elements marks its inputs
 *    whole and runs its whole-tensor kernel, so lazy evaluation never costs much more than the
 *    paper's whole-tensor evaluation; a light step runs whole when all its inputs are whole;
 *  - a run computes each demanded element once, in step order (every element of every value is
 *    cached in its buffer for the rest of the run), drawing only the demanded elements of the
 *    variables from the counter-based generator.
 * Why lazy: a mutant is tested at (m+1) positions per box, a few hundred positions of tensors of
 * millions of elements; computing only their cones is orders of magnitude cheaper than computing
 * both programs whole t times, and it shares intermediate results between positions all the
 * same. PET_EVAL_DENSE gives the whole-tensor evaluation for comparison.
 *
 * Threads: jobs are (request, input set) pairs taken from an atomic counter; plans are read-only
 * while jobs run, and each job writes only its own slice of its request's vals. */
#include "pet-impl.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

typedef struct plan {
    const pet_prog *p;
    pet_eval_mode mode;
    uint64_t **dem; /* per value, NULL when nothing of it is needed */
    int64_t *count; /* demanded elements per value */
    bool *dense;    /* per step: run its whole-tensor kernel */
    bool *needed;   /* per step: something it writes is demanded */
    int64_t n_probes;
    const pet_probe *probes;
} plan;

static void plan_free(plan *pl) {
    if (!pl->p) return;
    for (int v = 0; v < pl->p->n_values; v++) free(pl->dem ? pl->dem[v] : NULL);
    free(pl->dem);
    free(pl->count);
    free(pl->dense);
    free(pl->needed);
    memset(pl, 0, sizeof *pl);
}

static ir_status plan_nomem(plan *pl, ir_diag *d) {
    plan_free(pl);
    return ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory planning an evaluation");
}

static ir_status plan_make(plan *pl, const pet_prog *p, int64_t n_probes, const pet_probe *probes,
                           pet_eval_mode mode, ir_diag *d) {
    memset(pl, 0, sizeof *pl);
    pl->p = p;
    pl->mode = mode;
    pl->n_probes = n_probes;
    pl->probes = probes;
    int nv = p->n_values, ns = p->n_steps;
    pl->dem = calloc((size_t)nv + 1, sizeof *pl->dem);
    pl->count = calloc((size_t)nv + 1, sizeof *pl->count);
    pl->dense = calloc((size_t)ns + 1, sizeof *pl->dense);
    pl->needed = calloc((size_t)ns + 1, sizeof *pl->needed);
    if (!pl->dem || !pl->count || !pl->dense || !pl->needed) return plan_nomem(pl, d);
    for (int v = 0; v < nv; v++) {
        pl->dem[v] = calloc(pet_bm_words(p->values[v].numel) + 1, sizeof(uint64_t));
        if (!pl->dem[v]) return plan_nomem(pl, d);
        if (mode == PET_EVAL_DENSE) pet_bm_fill(pl->dem[v], p->values[v].numel);
    }
    for (int64_t i = 0; i < n_probes; i++) {
        IR_ASSERT(probes[i].output >= 0 && probes[i].output < p->n_outputs);
        int v = p->outputs[probes[i].output];
        IR_ASSERT(probes[i].index >= 0 && probes[i].index < p->values[v].numel);
        pet_bm_set(pl->dem[v], probes[i].index);
    }
    /* Backward: when a step is reached, every reader of its output has been, so the output's
     * demand is final. */
    int64_t c[IR_MAX_RANK];
    int last_out = -1;
    int64_t cnt = 0;
    for (int si = ns - 1; si >= 0; si--) {
        const pet_step *s = &p->steps[si];
        const pet_value *ov = &p->values[s->out];
        if (s->out != last_out) {
            cnt = pet_bm_count(pl->dem[s->out], ov->numel);
            last_out = s->out;
        }
        pl->needed[si] = cnt > 0;
        if (!cnt || s->kind == PET_ZERO) continue;
        if (mode == PET_EVAL_DENSE) {
            pl->dense[si] = true;
            continue;
        }
        if (mode == PET_EVAL_AUTO && pet_k_heavy(s->kind) && cnt * 4 > ov->numel) {
            pl->dense[si] = true;
            for (int k = 0; k < 2; k++)
                if (s->in[k] >= 0) pet_bm_fill(pl->dem[s->in[k]], p->values[s->in[k]].numel);
            continue;
        }
        const uint64_t *bm = pl->dem[s->out];
        for (size_t w = 0, nw = pet_bm_words(ov->numel); w < nw; w++)
            for (uint64_t bits = bm[w]; bits; bits &= bits - 1) {
                int64_t e = (int64_t)(w * 64) + __builtin_ctzll(bits);
                pet_unflatten(e, &ov->shape, c);
                if (pet_k_covers(p, s, c)) pet_k_mark(p, s, c, pl->dem);
            }
    }
    for (int v = 0; v < nv; v++) pl->count[v] = pet_bm_count(pl->dem[v], p->values[v].numel);
    /* light steps run whole when every input is whole */
    for (int si = 0; si < ns && mode == PET_EVAL_AUTO; si++) {
        const pet_step *s = &p->steps[si];
        if (!pl->needed[si] || pl->dense[si] || pet_k_heavy(s->kind) || s->kind == PET_ZERO)
            continue;
        bool whole = true;
        for (int k = 0; k < 2; k++)
            if (s->in[k] >= 0) whole = whole && pl->count[s->in[k]] == p->values[s->in[k]].numel;
        pl->dense[si] = whole;
    }
    return IR_OK;
}

/* Buffers for every value pl needs (literals point at their residues); NULL when out of memory.
 * A worker keeps them across the input sets of one request: the elements a run touches are then
 * already mapped, where fresh buffers would take a page fault for every page touched. */
static uint32_t **bufs_alloc(const plan *pl, ir_diag *d) {
    const pet_prog *p = pl->p;
    uint32_t **buf = calloc((size_t)p->n_values + 1, sizeof *buf);
    if (!buf) goto oom;
    for (int v = 0; v < p->n_values; v++) {
        const pet_value *pv = &p->values[v];
        if (!pl->count[v]) continue;
        if (pv->kind == PET_V_LITERAL) {
            buf[v] = pv->lit;
            continue;
        }
        buf[v] = malloc(sizeof(uint32_t) * (size_t)(pv->numel ? pv->numel : 1));
        if (!buf[v]) goto oom;
    }
    return buf;
oom:
    for (int v = 0; buf && v < p->n_values; v++)
        if (p->values[v].kind != PET_V_LITERAL) free(buf[v]);
    free(buf);
    ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory for the values of a program");
    return NULL;
}

static void bufs_free(const plan *pl, uint32_t **buf) {
    for (int v = 0; buf && v < pl->p->n_values; v++)
        if (pl->p->values[v].kind != PET_V_LITERAL) free(buf[v]);
    free(buf);
}

/* One evaluation of pl's program for input set `set` in buf (bufs_alloc): vals[0 .. n_probes). */
static ir_status plan_run(const plan *pl, uint32_t **buf, const uint32_t *const *vars,
                          uint64_t seed, int set, uint32_t *vals, int64_t *evaluated, ir_diag *d) {
    const pet_prog *p = pl->p;
    ir_status st = IR_OK;
    int64_t done = 0, c[IR_MAX_RANK];
    for (int i = 0; i < p->n_vars; i++) {
        int v = p->vars[i];
        const pet_value *pv = &p->values[v];
        if (!pl->count[v]) continue;
        if (vars) {
            memcpy(buf[v], vars[i], sizeof(uint32_t) * (size_t)pv->numel);
            continue;
        }
        uint64_t stream = pet_rand_stream(seed, (uint32_t)set, pv->key);
        uint32_t *b = buf[v];
        if (pl->count[v] == pv->numel) {
            for (int64_t e = 0; e < pv->numel; e++) b[e] = pet_rand_at(stream, (uint64_t)e);
        } else {
            const uint64_t *bm = pl->dem[v];
            for (size_t w = 0, nw = pet_bm_words(pv->numel); w < nw; w++)
                for (uint64_t bits = bm[w]; bits; bits &= bits - 1) {
                    int64_t e = (int64_t)(w * 64) + __builtin_ctzll(bits);
                    b[e] = pet_rand_at(stream, (uint64_t)e);
                }
        }
    }
    for (int si = 0; si < p->n_steps; si++) {
        const pet_step *s = &p->steps[si];
        const pet_value *ov = &p->values[s->out];
        if (!pl->needed[si]) continue;
        if (pl->dense[si] || s->kind == PET_ZERO) {
            if ((st = pet_k_dense(p, s, buf, d)) != IR_OK) return st;
            if (s->kind == PET_COPY) {
                int64_t n = 1;
                for (int i = 0; i < ov->shape.rank; i++) n *= s->u.copy.ext[i];
                done += n;
            } else if (s->kind != PET_ZERO) {
                done += ov->numel;
            }
            continue;
        }
        const uint64_t *bm = pl->dem[s->out];
        uint32_t *out = buf[s->out];
        for (size_t w = 0, nw = pet_bm_words(ov->numel); w < nw; w++)
            for (uint64_t bits = bm[w]; bits; bits &= bits - 1) {
                int64_t e = (int64_t)(w * 64) + __builtin_ctzll(bits);
                pet_unflatten(e, &ov->shape, c);
                if (!pet_k_covers(p, s, c)) continue;
                out[e] = pet_k_elem(p, s, buf, c);
                done++;
            }
    }
    for (int64_t i = 0; i < pl->n_probes; i++)
        vals[i] = buf[p->outputs[pl->probes[i].output]][pl->probes[i].index];
    if (evaluated) *evaluated += done;
    return st;
}

ir_status pet_cpu_eval(const pet_prog *p, int64_t n_probes, const pet_probe *probes,
                       pet_eval_mode mode, const uint32_t *const *vars, uint64_t seed, int set,
                       uint32_t *vals, int64_t *evaluated, ir_diag *d) {
    plan pl;
    ir_status st = plan_make(&pl, p, n_probes, probes, mode, d);
    if (st != IR_OK) return st;
    uint32_t **buf = bufs_alloc(&pl, d);
    st = buf ? plan_run(&pl, buf, vars, seed, set, vals, evaluated, d) : IR_ERR_NOMEM;
    bufs_free(&pl, buf);
    plan_free(&pl);
    return st;
}

/* ---------------------------------------------------------------- the back-end */

typedef struct cpu_ctx {
    int threads;
} cpu_ctx;

typedef struct job_pool {
    plan *plans;
    pet_eval_req *reqs;
    int n_reqs, n_sets;
    uint64_t seed;
    atomic_int next;      /* the next job index to take */
    atomic_int error;     /* set once a job failed: the others stop taking work */
    pthread_mutex_t lock; /* guards err, diag and evaluated */
    ir_status err;
    ir_diag diag;
    int64_t evaluated;
} job_pool;

static void *worker(void *arg) {
    job_pool *jp = arg;
    int n_jobs = jp->n_reqs * jp->n_sets;
    int64_t mine = 0;
    ir_diag d = {{0}};
    /* this thread's buffers, per request (jobs of one request are consecutive) */
    uint32_t ***bufs = calloc((size_t)jp->n_reqs + 1, sizeof *bufs);
    ir_status st = bufs ? IR_OK : ir_diag_set(&d, IR_ERR_NOMEM, "PET: out of memory");
    for (; st == IR_OK;) {
        /* relaxed: the counter only hands out indices; the plans were written before the
         * threads started (pthread_create orders that) and each job writes its own slice */
        int j = atomic_fetch_add_explicit(&jp->next, 1, memory_order_relaxed);
        if (j >= n_jobs || atomic_load_explicit(&jp->error, memory_order_relaxed)) break;
        int r = j / jp->n_sets, s = j % jp->n_sets;
        pet_eval_req *rq = &jp->reqs[r];
        if (!bufs[r] && !(bufs[r] = bufs_alloc(&jp->plans[r], &d))) {
            st = IR_ERR_NOMEM;
            break;
        }
        st = plan_run(&jp->plans[r], bufs[r], NULL, jp->seed, s, rq->vals + s * rq->n_probes, &mine,
                      &d);
    }
    pthread_mutex_lock(&jp->lock);
    if (st != IR_OK && jp->err == IR_OK) {
        jp->err = st;
        jp->diag = d;
    }
    jp->evaluated += mine;
    pthread_mutex_unlock(&jp->lock);
    if (st != IR_OK) atomic_store_explicit(&jp->error, 1, memory_order_relaxed);
    for (int r = 0; bufs && r < jp->n_reqs; r++) bufs_free(&jp->plans[r], bufs[r]);
    free(bufs);
    return NULL;
}

static int affinity_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

static bool cpu_available(char *why, size_t n) {
    (void)why;
    (void)n;
    return true;
}

static ir_status cpu_open(void **ctx, int threads, ir_diag *d) {
    cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory");
    c->threads = threads > 0 ? threads : affinity_cpus();
    *ctx = c;
    return IR_OK;
}

static void cpu_close(void *ctx) {
    free(ctx);
}

static ir_status cpu_eval(void *ctx, pet_eval_req *reqs, int n_reqs, uint64_t seed, int n_sets,
                          pet_eval_mode mode, int64_t *evaluated, ir_diag *d) {
    cpu_ctx *c = ctx;
    ir_status st = IR_OK;
    job_pool jp;
    memset(&jp, 0, sizeof jp);
    jp.plans = calloc((size_t)n_reqs + 1, sizeof *jp.plans);
    if (!jp.plans) return ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory");
    for (int r = 0; r < n_reqs; r++)
        if ((st = plan_make(&jp.plans[r], reqs[r].prog, reqs[r].n_probes, reqs[r].probes, mode,
                            d)) != IR_OK)
            goto out;
    jp.reqs = reqs;
    jp.n_reqs = n_reqs;
    jp.n_sets = n_sets;
    jp.seed = seed;
    atomic_init(&jp.next, 0);
    atomic_init(&jp.error, 0);
    pthread_mutex_init(&jp.lock, NULL);
    int nt = c->threads, n_jobs = n_reqs * n_sets;
    if (nt > n_jobs) nt = n_jobs;
    pthread_t tid[64];
    if (nt > 64) nt = 64;
    int started = 0;
    for (int i = 1; i < nt; i++) {
        if (pthread_create(&tid[started], NULL, worker, &jp) != 0) break;
        started++;
    }
    worker(&jp); /* the calling thread works too */
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&jp.lock);
    if (jp.err != IR_OK) {
        st = jp.err;
        if (d) *d = jp.diag;
    }
    if (evaluated) *evaluated = jp.evaluated;
out:
    for (int r = 0; r < n_reqs; r++) plan_free(&jp.plans[r]);
    free(jp.plans);
    return st;
}

static const pet_backend cpu_backend = {.name = "cpu",
                                        .available = cpu_available,
                                        .open = cpu_open,
                                        .close = cpu_close,
                                        .eval = cpu_eval};

const pet_backend *pet_cpu_backend(void) {
    return &cpu_backend;
}
