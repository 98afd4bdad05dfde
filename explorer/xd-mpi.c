/* xd-mpi.c - the distributed layer of xd.h on MPI: outboxes, the state wire format, interning,
 * the waves (best key, budgets, termination, checkpoints), quiesce and the gathered result. */
#define _POSIX_C_SOURCE 200809L
#include "xd.h"

#include "explorer-impl.h"

#include <stdlib.h>
#include <string.h>

#define TAG_STATES 17
#define STEP_BYTES 40 /* one path step on the wire */

/* The fields of one rank's wave record. */
enum { W_SENT, W_RECV, W_IDLE, W_STOP, W_DISTINCT, W_CKPT, W_K0, W_K1, W_N };

typedef struct outbox {
    pthread_mutex_t mu;
    uint8_t *buf;
    size_t n, cap;
    uint64_t states; /* states appended in all */
    double first_at; /* when the oldest unsent state was appended */
} outbox;

typedef struct pending_send {
    MPI_Request req;
    uint8_t *buf;
} pending_send;

/* A received state, keyed by its parent and its rewrite: the exact path, not the fingerprint.
 * Two states of one fingerprint may number their nodes differently (ir_graph_hash ignores ids),
 * and the rewrites further down a path name node ids: only the path rebuilds them. */
typedef struct intern_slot {
    const xs_state *parent;
    rw_rewrite rw;
    xs_state *s; /* NULL: empty */
} intern_slot;

typedef struct xd {
    struct xs_dist base;
    MPI_Comm data, ctl;
    int rank, size;
    xs_ctx *c;
    xp_pool *p;
    xs_state *root; /* a reference */
    outbox *out;    /* size of them (this rank's unused) */
    pending_send *sends;
    size_t n_sends, cap_sends;
    uint8_t *rbuf;
    size_t rbuf_cap;
    intern_slot *tab; /* (parent, rewrite) -> received state (a reference each) */
    size_t tab_cap, tab_n;
    /* counters: the control thread's */
    uint64_t msgs_sent, msgs_recv, bytes_sent, states_recv;
    double idle_s, blocked_s, last_step, t_begin;
    /* the wave */
    bool wave_active, have_prev;
    MPI_Request wave_req;
    double last_wave;
    uint64_t mine[W_N], *all;
    uint64_t prev_sent, prev_recv;
} xd;

int xd_owner(uint64_t fp, int k) {
    uint64_t h = fp * UINT64_C(0x9e3779b97f4a7c15);
    return (int)((h >> 32) % (uint64_t)k);
}

/* ---------------------------------------------------------------- the wire format
 *
 * A state: u32 depth, u32 zero, then depth steps from the start state's child to the state:
 * i32 kind, u32 node_id, i32 value, u32 user_id, u64 fp, u64 peak, f64 lat (host byte order:
 * one job runs one binary on one architecture). */

static size_t state_bytes(const xs_state *s) {
    return 8 + (size_t)s->depth * STEP_BYTES;
}

static void put_state(uint8_t *out, const xs_state *s) {
    uint32_t hdr[2] = {(uint32_t)s->depth, 0};
    memcpy(out, hdr, 8);
    for (const xs_state *a = s; a->parent; a = a->parent) {
        uint8_t *e = out + 8 + (size_t)(a->depth - 1) * STEP_BYTES;
        int32_t kv[4] = {a->rw.kind, (int32_t)a->rw.node_id, a->rw.value, (int32_t)a->rw.user_id};
        uint64_t peak = a->peak;
        memcpy(e, kv, 16);
        memcpy(e + 16, &a->fp, 8);
        memcpy(e + 24, &peak, 8);
        memcpy(e + 32, &a->lat, 8);
    }
}

static uint64_t slot_hash(const xs_state *parent, const rw_rewrite *rw) {
    uint64_t h = (uint64_t)(uintptr_t)parent;
    h = (h ^ (uint64_t)(uint32_t)rw->kind) * UINT64_C(0x9e3779b97f4a7c15);
    h = (h ^ rw->node_id) * UINT64_C(0xbf58476d1ce4e5b9);
    h = (h ^ (uint64_t)(uint32_t)rw->value) * UINT64_C(0x94d049bb133111eb);
    h = (h ^ rw->user_id) * UINT64_C(0x9e3779b97f4a7c15);
    return h ^ (h >> 31);
}

static bool same_rw(const rw_rewrite *a, const rw_rewrite *b) {
    return a->kind == b->kind && a->node_id == b->node_id && a->value == b->value &&
           a->user_id == b->user_id;
}

static bool tab_grow(xd *x) {
    size_t cap = x->tab_cap ? 2 * x->tab_cap : 1024;
    intern_slot *t = calloc(cap, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < x->tab_cap; i++) {
        if (!x->tab[i].s) continue;
        size_t j = (size_t)slot_hash(x->tab[i].parent, &x->tab[i].rw) & (cap - 1);
        while (t[j].s) j = (j + 1) & (cap - 1);
        t[j] = x->tab[i];
    }
    free(x->tab);
    x->tab = t;
    x->tab_cap = cap;
    return true;
}

static intern_slot *tab_find(xd *x, const xs_state *parent, const rw_rewrite *rw) {
    size_t j = (size_t)slot_hash(parent, rw) & (x->tab_cap - 1);
    while (x->tab[j].s && !(x->tab[j].parent == parent && same_rw(&x->tab[j].rw, rw)))
        j = (j + 1) & (x->tab_cap - 1);
    return &x->tab[j];
}

/* Parses one state at p (n bytes left) into the interned tree; the state (no reference of the
 * caller's) in *out and its size, or 0 when malformed or out of memory. */
static size_t get_state(xd *x, const uint8_t *p, size_t n, xs_state **out) {
    uint32_t hdr[2];
    if (n < 8) return 0;
    memcpy(hdr, p, 8);
    size_t need = 8 + (size_t)hdr[0] * STEP_BYTES;
    if (need > n) return 0;
    xs_state *cur = x->root;
    for (uint32_t i = 0; i < hdr[0]; i++) {
        const uint8_t *e = p + 8 + (size_t)i * STEP_BYTES;
        int32_t kv[4];
        uint64_t fp, peak;
        double lat;
        memcpy(kv, e, 16);
        memcpy(&fp, e + 16, 8);
        memcpy(&peak, e + 24, 8);
        memcpy(&lat, e + 32, 8);
        rw_rewrite rw = {
            .kind = kv[0], .node_id = (uint32_t)kv[1], .value = kv[2], .user_id = (uint32_t)kv[3]};
        if (rw.kind < 0 || rw.kind >= RW_KIND_COUNT) return 0;
        if ((x->tab_n + 1) * 4 > x->tab_cap * 3 && !tab_grow(x)) return 0;
        intern_slot *sl = tab_find(x, cur, &rw);
        if (sl->s) {
            cur = sl->s;
            continue;
        }
        xs_eval ev = {.peak = (size_t)peak, .lat = lat, .fp = fp};
        xs_state *s = xs_state_new(cur, &rw, &ev);
        if (!s) return 0;
        sl->parent = cur;
        sl->rw = rw;
        sl->s = s; /* the table's reference */
        x->tab_n++;
        cur = s;
    }
    *out = cur;
    return need;
}

/* ---------------------------------------------------------------- sending and receiving */

static bool route(void *arg, const void *state, uint64_t fp, xp_key key) {
    (void)key;
    xd *x = arg;
    int to = xd_owner(fp, x->size);
    if (to == x->rank) return false;
    const xs_state *s = state;
    outbox *o = &x->out[to];
    size_t need = state_bytes(s);
    pthread_mutex_lock(&o->mu);
    if (o->n + need > o->cap) {
        size_t cap = o->cap ? o->cap : XD_BATCH_BYTES;
        while (cap < o->n + need) cap *= 2;
        uint8_t *b = realloc(o->buf, cap);
        if (!b) {
            pthread_mutex_unlock(&o->mu);
            return false; /* kept here instead: a duplicate at worst, never a loss */
        }
        o->buf = b;
        o->cap = cap;
    }
    if (o->n == 0) o->first_at = ir_now_seconds();
    put_state(o->buf + o->n, s);
    o->n += need;
    o->states++;
    pthread_mutex_unlock(&o->mu);
    return true;
}

/* Completed sends are freed. */
static void reap_sends(xd *x) {
    size_t k = 0;
    for (size_t i = 0; i < x->n_sends; i++) {
        int done = 0;
        MPI_Test(&x->sends[i].req, &done, MPI_STATUS_IGNORE);
        if (done)
            free(x->sends[i].buf);
        else
            x->sends[k++] = x->sends[i];
    }
    x->n_sends = k;
}

/* Sends the outboxes that are due (all with force); false when out of memory. */
static bool flush(xd *x, bool force) {
    double now = ir_now_seconds();
    for (int to = 0; to < x->size; to++) {
        if (to == x->rank) continue;
        outbox *o = &x->out[to];
        pthread_mutex_lock(&o->mu);
        bool due = o->n > 0 && (force || o->n >= XD_BATCH_BYTES || now - o->first_at >= XD_FLUSH_S);
        uint8_t *buf = NULL;
        size_t n = 0;
        if (due) {
            buf = o->buf;
            n = o->n;
            o->buf = NULL;
            o->n = o->cap = 0;
        }
        pthread_mutex_unlock(&o->mu);
        if (!due) continue;
        if (x->n_sends == x->cap_sends) {
            size_t cap = x->cap_sends ? 2 * x->cap_sends : 16;
            pending_send *ps = realloc(x->sends, cap * sizeof *ps);
            if (!ps) return false;
            x->sends = ps;
            x->cap_sends = cap;
        }
        pending_send *ps = &x->sends[x->n_sends++];
        ps->buf = buf;
        MPI_Isend(buf, (int)n, MPI_BYTE, to, TAG_STATES, x->data, &ps->req);
        x->msgs_sent++;
        x->bytes_sent += n;
    }
    return true;
}

/* Receives every batch that has arrived and hands its states to the pool. */
static bool receive(xd *x) {
    for (;;) {
        int flag = 0, n = 0;
        MPI_Status stt;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_STATES, x->data, &flag, &stt);
        if (!flag) return true;
        MPI_Get_count(&stt, MPI_BYTE, &n);
        if ((size_t)n > x->rbuf_cap) {
            uint8_t *b = realloc(x->rbuf, (size_t)n);
            if (!b) return false;
            x->rbuf = b;
            x->rbuf_cap = (size_t)n;
        }
        MPI_Recv(x->rbuf, n, MPI_BYTE, stt.MPI_SOURCE, TAG_STATES, x->data, MPI_STATUS_IGNORE);
        x->msgs_recv++;
        for (size_t at = 0; at < (size_t)n;) {
            xs_state *s = NULL;
            size_t k = get_state(x, x->rbuf + at, (size_t)n - at, &s);
            if (k == 0) return false;
            at += k;
            x->states_recv++;
            xs_state_ref(s); /* the pool's */
            xp_pool_inject(x->p, s, s->fp, xs_key(x->c, s->peak, s->lat));
        }
    }
}

static bool outboxes_empty(xd *x) {
    bool empty = true;
    for (int to = 0; to < x->size && empty; to++) {
        if (to == x->rank) continue;
        pthread_mutex_lock(&x->out[to].mu);
        empty = x->out[to].n == 0;
        pthread_mutex_unlock(&x->out[to].mu);
    }
    return empty;
}

/* ---------------------------------------------------------------- the ops */

static bool op_owns(struct xs_dist *base, uint64_t fp) {
    xd *x = (xd *)base;
    return xd_owner(fp, x->size) == x->rank;
}

static ir_status op_begin(struct xs_dist *base, xs_ctx *c, xp_pool *p, ir_diag *d) {
    xd *x = (xd *)base;
    x->c = c;
    x->p = p;
    /* the start state: the top of the best's ancestry (restored trees included) */
    xs_state *r = (xs_state *)xp_pool_best(p, NULL);
    while (r->parent) r = r->parent;
    xs_state_ref(r);
    x->root = r;
    if (!tab_grow(x)) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    double t0 = ir_now_seconds();
    MPI_Barrier(x->ctl);
    x->blocked_s += ir_now_seconds() - t0;
    x->t_begin = x->last_step = x->last_wave = ir_now_seconds();
    return IR_OK;
}

static uint64_t dbits(double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return u;
}

static double bitsd(uint64_t u) {
    double v;
    memcpy(&v, &u, 8);
    return v;
}

/* The decision every rank takes from the same gathered wave. */
static xs_dist_act decide(xd *x, xp_stop_reason *why) {
    uint64_t sent = 0, recv = 0, distinct = 0;
    bool idle = true, ckpt = false;
    int stop = XP_STOP_NONE, best = 0;
    for (int r = 0; r < x->size; r++) {
        const uint64_t *w = x->all + (size_t)r * W_N;
        sent += w[W_SENT];
        recv += w[W_RECV];
        distinct += w[W_DISTINCT];
        idle = idle && w[W_IDLE];
        ckpt = ckpt || w[W_CKPT];
        if (stop == XP_STOP_NONE && w[W_STOP] != XP_STOP_NONE) stop = (int)w[W_STOP];
        const uint64_t *b = x->all + (size_t)best * W_N;
        xp_key kr = {{bitsd(w[W_K0]), bitsd(w[W_K1])}}, kb = {{bitsd(b[W_K0]), bitsd(b[W_K1])}};
        if (xs_key_better(x->c, &kr, &kb, 1.0)) best = r;
    }
    const uint64_t *b = x->all + (size_t)best * W_N;
    xp_pool_set_bound(x->p, (xp_key){{bitsd(b[W_K0]), bitsd(b[W_K1])}});
    bool quiet = idle && sent == recv;
    bool done = quiet && x->have_prev && x->prev_sent == sent && x->prev_recv == recv;
    x->have_prev = quiet;
    x->prev_sent = sent;
    x->prev_recv = recv;
    size_t max_states = x->c->o->max_states ? x->c->o->max_states : (size_t)1 << 20;
    if (stop == XP_STOP_NONE && distinct >= max_states) stop = XP_STOP_FULL;
    if (stop == XP_STOP_NONE && done) stop = XP_STOP_EXHAUSTED;
    if (stop != XP_STOP_NONE) {
        *why = (xp_stop_reason)stop;
        return XS_DIST_STOP;
    }
    return ckpt ? XS_DIST_CHECKPOINT : XS_DIST_RUN;
}

static xs_dist_act op_step(struct xs_dist *base, bool want_checkpoint, xp_stop_reason *why) {
    xd *x = (xd *)base;
    double now = ir_now_seconds();
    bool idle = xp_pool_idle(x->p);
    if (idle) x->idle_s += now - x->last_step;
    x->last_step = now;
    reap_sends(x);
    bool ok = receive(x) && flush(x, idle);
    if (!ok) xp_pool_stop(x->p, XP_STOP_NOMEM);
    if (x->wave_active) {
        int done = 0;
        MPI_Test(&x->wave_req, &done, MPI_STATUS_IGNORE);
        if (!done) return XS_DIST_RUN;
        x->wave_active = false;
        x->last_wave = now;
        xs_dist_act act = decide(x, why);
        if (act != XS_DIST_RUN) return act;
    }
    if (now - x->last_wave < XD_WAVE_S) return XS_DIST_RUN;
    /* the sample: pool first (acquire), then the outboxes its expands filled */
    xp_pool_stats ps;
    xp_pool_get_stats(x->p, &ps, NULL, 0);
    bool quiet = xp_pool_idle(x->p) && outboxes_empty(x);
    xp_key k;
    xp_pool_best(x->p, &k);
    x->mine[W_SENT] = x->msgs_sent;
    x->mine[W_RECV] = x->msgs_recv;
    x->mine[W_IDLE] = quiet;
    x->mine[W_STOP] = (uint64_t)ps.reason;
    x->mine[W_DISTINCT] = xp_pool_fp_count(x->p);
    x->mine[W_CKPT] = want_checkpoint;
    x->mine[W_K0] = dbits(k.k[0]);
    x->mine[W_K1] = dbits(k.k[1]);
    MPI_Iallgather(x->mine, W_N, MPI_UINT64_T, x->all, W_N, MPI_UINT64_T, x->ctl, &x->wave_req);
    x->wave_active = true;
    return XS_DIST_RUN;
}

static ir_status op_quiesce(struct xs_dist *base, ir_diag *d) {
    xd *x = (xd *)base;
    double t0 = ir_now_seconds();
    for (;;) {
        if (!receive(x) || !flush(x, true)) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        reap_sends(x);
        uint64_t mine[2] = {x->msgs_sent, x->msgs_recv}, sum[2];
        MPI_Allreduce(mine, sum, 2, MPI_UINT64_T, MPI_SUM, x->ctl);
        if (sum[0] == sum[1]) break;
    }
    /* a wave's result is stale after a quiesce: the next one starts afresh */
    x->have_prev = false;
    x->blocked_s += ir_now_seconds() - t0;
    return IR_OK;
}

/* One rank's figures on the wire (gathered by rank 0). */
typedef struct rank_rec {
    xs_rank_stats s;
    uint64_t duplicates, rejected, pushed, improvements;
    double key[2];
} rank_rec;

static ir_status op_finish(struct xs_dist *base, xs_result *r, xs_state **best, ir_diag *d) {
    xd *x = (xd *)base;
    double t0 = ir_now_seconds();
    *best = NULL;
    xs_ctx *c = x->c;
    xp_pool_stats ps;
    xp_pool_get_stats(x->p, &ps, NULL, 0);
    xp_key bk;
    const xs_state *b = xp_pool_best(x->p, &bk);
    rank_rec me = {.s = {.distinct = xp_pool_fp_count(x->p),
                         .expanded = ps.total.expanded,
                         .generated = ps.total.generated,
                         .msgs_sent = x->msgs_sent,
                         .bytes_sent = x->bytes_sent,
                         .states_recv = x->states_recv,
                         .search_s = ir_now_seconds() - x->t_begin,
                         .idle_s = x->idle_s,
                         .blocked_s = x->blocked_s},
                   .duplicates = ps.total.duplicates,
                   .rejected = ps.total.rejected,
                   .pushed = ps.total.pushed,
                   .improvements = ps.total.improvements,
                   .key = {bk.k[0], bk.k[1]}};
    for (int to = 0; to < x->size; to++)
        if (to != x->rank) me.s.states_sent += x->out[to].states;
    for (int i = 0; i < c->n_w; i++) {
        me.s.replay_steps += c->w[i].replay_steps;
        me.s.replay_s += c->w[i].phase[XS_PHASE_REPLAY];
    }
    rank_rec *all = x->rank == 0 ? calloc((size_t)x->size, sizeof *all) : NULL;
    int *lens = x->rank == 0 ? calloc((size_t)x->size, sizeof *lens) : NULL;
    int *offs = x->rank == 0 ? calloc((size_t)x->size, sizeof *offs) : NULL;
    int len = (int)state_bytes(b);
    uint8_t *mine = malloc((size_t)len), *paths = NULL;
    /* every rank takes part in the collectives even when out of memory (no deadlock) */
    bool ok = mine && (x->rank != 0 || (all && lens && offs));
    if (mine) put_state(mine, b);
    MPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, x->ctl);
    MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, x->ctl);
    size_t total = 0;
    if (x->rank == 0 && lens && offs) {
        for (int i = 0; i < x->size; i++) {
            offs[i] = (int)total;
            total += (size_t)lens[i];
        }
        paths = malloc(total ? total : 1);
        ok = ok && paths;
    }
    MPI_Gatherv(mine, len, MPI_BYTE, paths, lens, offs, MPI_BYTE, 0, x->ctl);
    ir_status st = ok ? IR_OK : ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    if (x->rank == 0 && ok) {
        r->per_rank = calloc((size_t)x->size, sizeof *r->per_rank);
        if (!r->per_rank) st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        int bi = 0;
        xp_worker_stats tot = {0};
        for (int i = 0; st == IR_OK && i < x->size; i++) {
            r->per_rank[i] = all[i].s;
            tot.expanded += all[i].s.expanded;
            tot.generated += all[i].s.generated;
            tot.duplicates += all[i].duplicates;
            tot.rejected += all[i].rejected;
            tot.pushed += all[i].pushed;
            tot.improvements += all[i].improvements;
            xp_key ki = {{all[i].key[0], all[i].key[1]}}, kb = {{all[bi].key[0], all[bi].key[1]}};
            if (xs_key_better(c, &ki, &kb, 1.0)) bi = i;
        }
        if (st == IR_OK) {
            tot.exposed = r->stats.total.exposed;
            tot.steals = r->stats.total.steals;
            tot.steal_attempts = r->stats.total.steal_attempts;
            tot.frontier_peak = r->stats.total.frontier_peak;
            r->stats.total = tot;
            xs_state *s = NULL;
            if (get_state(x, paths + offs[bi], (size_t)lens[bi], &s) == 0) {
                st = ir_diag_set(d, IR_ERR_INTERNAL, "rank %d's best state does not parse", bi);
            } else {
                xs_state_ref(s);
                *best = s;
            }
        }
    }
    r->n_ranks = x->size;
    r->rank = x->rank;
    free(all);
    free(lens);
    free(offs);
    free(mine);
    free(paths);
    x->blocked_s += ir_now_seconds() - t0;
    return st;
}

static void op_end(struct xs_dist *base) {
    xd *x = (xd *)base;
    for (size_t i = 0; i < x->tab_cap; i++)
        if (x->tab[i].s) xs_state_unref(x->c, x->tab[i].s);
    free(x->tab);
    x->tab = NULL;
    x->tab_cap = x->tab_n = 0;
    if (x->root) xs_state_unref(x->c, x->root);
    x->root = NULL;
}

static const xs_dist_ops xd_ops = {.owns = op_owns,
                                   .begin = op_begin,
                                   .step = op_step,
                                   .quiesce = op_quiesce,
                                   .finish = op_finish,
                                   .end = op_end,
                                   .route = route};

struct xs_dist *xd_create(MPI_Comm comm) {
    xd *x = calloc(1, sizeof *x);
    if (!x) return NULL;
    x->base.ops = &xd_ops;
    MPI_Comm_dup(comm, &x->data);
    MPI_Comm_dup(comm, &x->ctl);
    MPI_Comm_rank(comm, &x->rank);
    MPI_Comm_size(comm, &x->size);
    x->out = calloc((size_t)x->size, sizeof *x->out);
    x->all = calloc((size_t)x->size * W_N, sizeof *x->all);
    if (!x->out || !x->all) {
        xd_free(&x->base);
        return NULL;
    }
    for (int i = 0; i < x->size; i++) pthread_mutex_init(&x->out[i].mu, NULL);
    return &x->base;
}

void xd_free(struct xs_dist *base) {
    if (!base) return;
    xd *x = (xd *)base;
    /* every send completes: the receivers took them all in the final quiesce */
    for (size_t i = 0; i < x->n_sends; i++) {
        MPI_Wait(&x->sends[i].req, MPI_STATUS_IGNORE);
        free(x->sends[i].buf);
    }
    free(x->sends);
    for (int i = 0; x->out && i < x->size; i++) {
        free(x->out[i].buf);
        pthread_mutex_destroy(&x->out[i].mu);
    }
    free(x->out);
    free(x->all);
    free(x->rbuf);
    free(x->tab);
    if (x->data != MPI_COMM_NULL) MPI_Comm_free(&x->data);
    if (x->ctl != MPI_COMM_NULL) MPI_Comm_free(&x->ctl);
    free(x);
}
