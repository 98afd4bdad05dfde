/* pet-find.c - the verified PET candidates of a whole model (pet-opt.h, pet_find_candidates):
 * split, extract, generate, verify, correct, cost, keep and order, one sub-program at a time on
 * o->threads pthreads.
 *
 * Invariants:
 *  - the table depends only on (g, options): each sub-program's candidates are computed by one
 *    thread from the sub-program alone (generation and verification are deterministic) into its
 *    own slot, and the slots are gathered in sub-program order after every thread has joined,
 *    so the table, counters aside from the seconds, is the same whatever the thread count (the
 *    explorer's replay and resume rebuild it from the model);
 *  - threads share only the read-only graph, the split, the cost model (whose lookups are
 *    thread-safe after profiling, prof.h) and an atomic index of the next sub-program; each has
 *    its own verifier context, so pet_verify runs single-threaded inside a worker when several
 *    workers run (no oversubscription);
 *  - a sub-program that cannot be extracted, mutated or verified (unsupported) is skipped and
 *    counted; running out of memory anywhere fails the whole call. */
#include "pet-opt.h"
#include "pet-post.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_MIN_GAIN 0.02
#define DEFAULT_PER_SUBPROG 4
#define MAX_THREADS 64

static int affinity_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}

/* What one sub-program gave: its kept candidates (best first) and its counters. */
typedef struct slot {
    pet_candidate *c;
    int n;
    bool mutated; /* generation ran (the sub-program counts in subprogs) */
    int mutants, verified, rejected, uncorrectable;
    double gen_s, verify_s, correct_s;
    int64_t box_tests;
} slot;

typedef struct find_job {
    const ir_graph *g;
    const pet_find_opts *o;
    pet_find_opts eff; /* o with defaults filled */
    prof_model *cost;  /* o->gen.cost, or the analytic model opened for the call */
    const pet_split *split;
    slot *slots;
    bool caller_ctx; /* one worker, verifying in the caller's back-end context */
    int vthreads;    /* otherwise: verifier threads of each worker's own context */
    atomic_int next;
    atomic_int failed;    /* set once a worker ran out of memory: the others stop */
    pthread_mutex_t lock; /* guards err and diag */
    ir_status err;
    ir_diag diag;
} find_job;

static void cand_clear(pet_candidate *c) {
    ir_graph_free(c->replacement);
    c->replacement = NULL;
}

/* Best first: the largest predicted gain orig_cost / cost, i.e. (one sub-program, one
 * orig_cost) the smallest cost; then the mutant hash, so that ties order the same on every run. */
static int cmp_cand(const void *pa, const void *pb) {
    const pet_candidate *a = pa, *b = pb;
    if (a->subprog != b->subprog) return a->subprog < b->subprog ? -1 : 1;
    double ga = a->orig_cost / a->cost, gb = b->orig_cost / b->cost;
    if (ga != gb) return ga > gb ? -1 : 1;
    return (a->hash > b->hash) - (a->hash < b->hash);
}

/* Appends c to s (growing its array). false when out of memory (c is then the caller's). */
static bool slot_push(slot *s, int *cap, const pet_candidate *c) {
    if (s->n == *cap) {
        int nc = *cap ? 2 * *cap : 8;
        pet_candidate *p = realloc(s->c, sizeof *p * (size_t)nc);
        if (!p) return false;
        s->c = p;
        *cap = nc;
    }
    s->c[s->n++] = *c;
    return true;
}

/* One mutant of prog: verified, corrected where cells failed, costed; kept into s when it is
 * predicted faster by min_gain. IR_ERR_NOMEM only; everything else is counted. */
static ir_status one_mutant(find_job *j, const pet_options *vo, int sp, const ir_graph *prog,
                            double orig_cost, const pet_mutant *mu, slot *s, int *cap, ir_diag *d) {
    pet_result r;
    double t0 = ir_now_seconds();
    /* through the lowering that drops biases (pet-post.h): the verifier leaves a convolution's
     * bias out of the original, and a mutant that merged convolutions concatenates their biases,
     * which pet_verify would take for variables the original lacks */
    ir_status st = pet_verify_replacement(prog, mu->graph, vo, &r, d);
    s->verify_s += ir_now_seconds() - t0;
    if (st == IR_ERR_NOMEM) return st;
    if (st != IR_OK) {
        /* a mutant the verifier cannot evaluate is not known to be equivalent anywhere */
        s->rejected++;
        return IR_OK;
    }
    s->verified++;
    s->box_tests += r.box_tests;
    if (r.rejected) {
        s->rejected++;
        pet_result_free(&r);
        return IR_OK;
    }
    pet_candidate c = {.subprog = sp,
                       .cls = mu->cls,
                       .hash = mu->hash,
                       .false_accept_bound = r.false_accept_bound,
                       .orig_cost = orig_cost};
    for (int k = 0; k < r.n_outputs; k++) {
        c.n_boxes += (int)r.outputs[k].mutant_boxes;
        c.n_failed += (int)r.outputs[k].n_failed;
    }
    if (r.equivalent) {
        /* pet_correct post-optimizes what it builds (§6.3); an equivalent mutant gets the same */
        c.replacement = ir_graph_clone(mu->graph);
        if (!c.replacement)
            st = ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory");
        else if ((st = pet_post_optimize(c.replacement, NULL, d)) != IR_OK)
            cand_clear(&c);
    } else {
        t0 = ir_now_seconds();
        c.replacement = pet_correct(prog, mu->graph, &r, &c.n_fused, &st, d);
        s->correct_s += ir_now_seconds() - t0;
        if (!c.replacement && st != IR_ERR_NOMEM) {
            s->uncorrectable++;
            st = IR_OK;
        }
    }
    pet_result_free(&r);
    if (!c.replacement) return st;
    c.cost = pet_gen_cost(j->cost, c.replacement);
    if (!(c.cost > 0 && c.cost < orig_cost * (1.0 - j->eff.min_gain))) {
        cand_clear(&c);
        return IR_OK;
    }
    if (!slot_push(s, cap, &c)) {
        cand_clear(&c);
        return ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory");
    }
    return IR_OK;
}

/* Sub-program sp into its slot. IR_ERR_NOMEM only. */
static ir_status one_subprog(find_job *j, const pet_options *vo, int sp, ir_diag *d) {
    slot *s = &j->slots[sp];
    ir_status st = IR_OK;
    int cap = 0;
    ir_graph *prog = pet_subprog_extract(j->g, &j->split->progs[sp], &st, d);
    if (!prog) return st == IR_ERR_NOMEM ? st : IR_OK;
    pet_mutant_list ml = {0};
    double t0 = ir_now_seconds();
    st = pet_gen_optimize(prog, &j->eff.gen, &ml, d);
    s->gen_s += ir_now_seconds() - t0;
    if (st != IR_OK) {
        pet_mutant_list_free(&ml);
        ir_graph_free(prog);
        return st == IR_ERR_NOMEM ? st : IR_OK; /* unsupported: skipped */
    }
    s->mutated = true;
    s->mutants = ml.n;
    /* the same model costs the original and the replacements (ml.orig_cost is the generator's
     * model, the same one unless the caller gave none) */
    double orig_cost = pet_gen_cost(j->cost, prog);
    volatile sig_atomic_t *stop = j->eff.gen.interrupt;
    for (int k = 0; k < ml.n && st == IR_OK && !(stop && *stop); k++)
        st = one_mutant(j, vo, sp, prog, orig_cost, &ml.items[k], s, &cap, d);
    pet_mutant_list_free(&ml);
    ir_graph_free(prog);
    if (st != IR_OK) return st;
    if (s->n > 1) qsort(s->c, (size_t)s->n, sizeof *s->c, cmp_cand); /* s->c is NULL when empty */
    while (s->n > j->eff.max_per_subprog) cand_clear(&s->c[--s->n]);
    return IR_OK;
}

static void *worker(void *arg) {
    find_job *j = arg;
    ir_diag d = {{0}};
    pet_options vo = j->eff.verify;
    const pet_backend *be = vo.backend ? vo.backend : pet_cpu_backend();
    void *ctx = NULL;
    ir_status st = IR_OK;
    if (!j->caller_ctx) {
        st = be->open(&ctx, j->vthreads, &d);
        vo.backend = be;
        vo.backend_ctx = ctx;
        vo.threads = j->vthreads;
    }
    while (st == IR_OK) {
        /* relaxed: the index only hands out sub-programs; everything the workers read was
         * written before pthread_create, and each writes its own slot, read after the join */
        int i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->split->n || atomic_load_explicit(&j->failed, memory_order_relaxed)) break;
        if (j->eff.gen.interrupt && *j->eff.gen.interrupt) break; /* the table so far */
        st = one_subprog(j, &vo, i, &d);
    }
    if (ctx) be->close(ctx);
    if (st != IR_OK) {
        atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
        pthread_mutex_lock(&j->lock);
        if (j->err == IR_OK) {
            j->err = st;
            j->diag = d;
        }
        pthread_mutex_unlock(&j->lock);
    }
    return NULL;
}

void pet_table_free(pet_table *t) {
    if (!t) return;
    for (int i = 0; i < t->n; i++) cand_clear(&t->c[i]);
    free(t->c);
    pet_split_free(t->split);
    free(t);
}

/* Gathers the slots into t in sub-program order (taking their candidates). */
static ir_status gather(find_job *j, pet_table *t, ir_diag *d) {
    int total = 0;
    for (int i = 0; i < j->split->n; i++) total += j->slots[i].n;
    t->c = calloc((size_t)total + 1, sizeof *t->c);
    if (!t->c) return ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory");
    for (int i = 0; i < j->split->n; i++) {
        slot *s = &j->slots[i];
        if (s->n) memcpy(t->c + t->n, s->c, sizeof *s->c * (size_t)s->n);
        t->n += s->n;
        s->n = 0; /* taken */
        t->subprogs += s->mutated;
        t->mutants += s->mutants;
        t->verified += s->verified;
        t->rejected += s->rejected;
        t->uncorrectable += s->uncorrectable;
        t->gen_seconds += s->gen_s;
        t->verify_seconds += s->verify_s;
        t->correct_seconds += s->correct_s;
        t->box_tests += s->box_tests;
    }
    t->kept = t->n;
    return IR_OK;
}

ir_status pet_find_candidates(const ir_graph *g, const pet_find_opts *o, pet_table **out,
                              ir_diag *d) {
    *out = NULL;
    find_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.o = o;
    j.eff = *o;
    if (j.eff.min_gain <= 0) j.eff.min_gain = DEFAULT_MIN_GAIN;
    if (j.eff.max_per_subprog <= 0) j.eff.max_per_subprog = DEFAULT_PER_SUBPROG;
    int threads = o->threads > 0 ? o->threads : affinity_cpus();
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    prof_model *own = NULL;
    ir_status st = IR_OK;
    pet_table *t = calloc(1, sizeof *t);
    if (!t) return ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory");
    j.cost = o->gen.cost;
    if (!j.cost && !(j.cost = own = prof_open("analytic:rtx3090", NULL, &st, d))) goto out;
    j.eff.gen.cost = j.cost;
    if ((st = pet_split_graph(g, NULL, &t->split, d)) != IR_OK) goto out;
    j.split = t->split;
    if (threads > t->split->n) threads = t->split->n > 0 ? t->split->n : 1;
    /* one worker verifies with what it was given (the caller's context, or the threads
     * asked for); several each verify on their own thread, in a context of their own */
    j.caller_ctx = threads == 1 && o->verify.backend_ctx;
    j.vthreads = threads > 1 ? 1 : o->verify.threads;
    j.slots = calloc((size_t)t->split->n + 1, sizeof *j.slots);
    if (!j.slots) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory");
        goto out;
    }
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, 0);
    pthread_mutex_init(&j.lock, NULL);
    pthread_t tid[MAX_THREADS];
    int started = 0;
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&tid[started], NULL, worker, &j) != 0) break;
        started++;
    }
    worker(&j); /* the calling thread works too */
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&j.lock);
    if (j.err != IR_OK) {
        st = j.err;
        if (d) *d = j.diag;
        goto out;
    }
    st = gather(&j, t, d);
out:
    for (int i = 0; j.slots && i < t->split->n; i++) {
        for (int k = 0; k < j.slots[i].n; k++) cand_clear(&j.slots[i].c[k]);
        free(j.slots[i].c);
    }
    free(j.slots);
    prof_close(own);
    if (st != IR_OK) {
        pet_table_free(t);
        return st;
    }
    *out = t;
    return IR_OK;
}
