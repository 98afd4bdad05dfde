/* ckpt-search.c - the sections of a search checkpoint (ckpt-search.h spells out every byte):
 * encoders from an xs_snapshot, the optimize command's arguments and a prof_snapshot, and the
 * strict decoders that `magpie resume` runs on them.
 *
 * Invariants of the decoders, whatever the bytes:
 *  - nothing is read out of bounds (every get goes through a ckpt_cur);
 *  - no allocation is larger than the bytes present could justify: a count is checked against
 *    the bytes left divided by the smallest encoding of one record before anything is allocated;
 *  - every field is range-checked against the C type it lands in (no silent truncation);
 *  - a failure is IR_ERR_PARSE (or IR_ERR_NOMEM), its message "section TAG: <where>: <what>",
 *    and the output is left empty (zeroed, nothing to free). The caller prefixes the file name
 *    (the reader does not keep it). */
#include "ckpt-search.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The smallest encodings of one record, for the count checks: varints take at least a byte. */
#define MIN_STATE_BYTES (1u + 1u + 1u + 1u + 1u + 8u + 8u + 8u) /* FRNT state record */
#define MIN_ITEM_BYTES (1u + 1u + 1u + 1u)                      /* FRNT frontier record */
#define MIN_WORKER_BYTES 16u                                    /* RNGS: two u64 */
#define MIN_ARG_BYTES 1u                                        /* OPTS: an empty str */
#define MIN_ENTRY_BYTES (8u + 8u + 1u)                          /* PROF entry */

#define N_WORKER_STATS 12 /* the xp_worker_stats fields, in declaration order */
#define N_FALLBACK 7      /* prof_target's figures */

/* ---------------------------------------------------------------- shared helpers */

static ir_status section_err(ir_diag *d, uint32_t tag, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ir_status section_err(ir_diag *d, uint32_t tag, const char *fmt, ...) {
    char msg[900], t[5];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ir_diag_set(d, IR_ERR_PARSE, "section %s: %s", ckpt_tag_str(tag, t), msg);
}

/* Finds the section and checks its version; *c is positioned after it. */
static ir_status open_section(const ckpt_reader *r, uint32_t tag, ckpt_cur *c, ir_diag *d) {
    const uint8_t *p;
    size_t len;
    char t[5];
    if (!ckpt_section(r, tag, &p, &len))
        return ir_diag_set(d, IR_ERR_PARSE, "section %s is missing", ckpt_tag_str(tag, t));
    *c = ckpt_cur_make(p, len);
    uint32_t v;
    if (!ckpt_get_u32(c, &v)) return section_err(d, tag, "truncated in the section version");
    if (v != CKPT_SECTION_VERSION)
        return section_err(d, tag, "version %u, this magpie reads version %u", v,
                           CKPT_SECTION_VERSION);
    return IR_OK;
}

/* The end of a section: no get failed (else: truncated in `where`) and nothing trails. */
static ir_status close_section(const ckpt_cur *c, uint32_t tag, const char *where, ir_diag *d) {
    if (c->bad) return section_err(d, tag, "truncated or malformed in %s", where);
    if (c->pos != c->len)
        return section_err(d, tag, "%zu trailing bytes after %s", c->len - c->pos, where);
    return IR_OK;
}

/* The bytes not yet read. */
static size_t left(const ckpt_cur *c) {
    return c->len - c->pos;
}

/* A count that must fit max and whose records (min_bytes each) must fit in the bytes left. */
static ir_status get_count(ckpt_cur *c, uint32_t tag, const char *field, uint64_t max,
                           size_t min_bytes, uint64_t *n, ir_diag *d) {
    if (!ckpt_get_varint(c, n)) return section_err(d, tag, "truncated in %s", field);
    if (*n > max) return section_err(d, tag, "%s %llu is too large", field, (unsigned long long)*n);
    if (*n > left(c) / min_bytes)
        return section_err(d, tag, "%s %llu: more records than the %zu bytes left can hold", field,
                           (unsigned long long)*n, left(c));
    return IR_OK;
}

static bool figure_ok(double v) {
    return isfinite(v) && v >= 0;
}

/* zigzag: small negative ints take few varint bytes too */
static uint64_t zigzag(int v) {
    int64_t x = v;
    return ((uint64_t)x << 1) ^ (uint64_t)(x >> 63);
}

static void put_version(ckpt_buf *b) {
    ckpt_put_u32(b, CKPT_SECTION_VERSION);
}

/* ---------------------------------------------------------------- snapshot: writer */

static void put_graph(ckpt_buf *b, const xs_snapshot *s) {
    put_version(b);
    ckpt_put_varint(b, s->start_nodes);
    ckpt_put_u64(b, s->eager_peak);
    ckpt_put_f64(b, s->eager_lat);
    ckpt_put_u64(b, s->start_peak);
    ckpt_put_f64(b, s->start_lat);
    ckpt_put_u64(b, s->states[0].fp);
}

static void put_frontier(ckpt_buf *b, const xs_snapshot *s) {
    put_version(b);
    ckpt_put_varint(b, s->n_states);
    for (uint32_t i = 1; i < s->n_states; i++) {
        const xs_snap_state *st = &s->states[i];
        IR_ASSERT(st->parent >= 0 && (uint32_t)st->parent < i);
        IR_ASSERT(st->rw.kind >= 0 && st->rw.kind <= UINT8_MAX);
        ckpt_put_varint(b, (uint64_t)st->parent);
        ckpt_put_u8(b, (uint8_t)st->rw.kind);
        ckpt_put_varint(b, st->rw.node_id);
        ckpt_put_varint(b, zigzag(st->rw.value));
        ckpt_put_varint(b, st->rw.user_id);
        ckpt_put_u64(b, st->peak);
        ckpt_put_f64(b, st->lat);
        ckpt_put_u64(b, st->fp);
    }
    ckpt_put_varint(b, s->n_frontier);
    for (uint32_t i = 0; i < s->n_frontier; i++) {
        const xs_snap_item *it = &s->frontier[i];
        IR_ASSERT(it->state >= 0 && it->worker >= 0);
        ckpt_put_varint(b, (uint64_t)it->state);
        ckpt_put_varint(b, it->seq);
        ckpt_put_varint(b, (uint64_t)it->worker);
        ckpt_put_u8(b, it->unfinished ? 1 : 0);
    }
}

static void put_counters(ckpt_buf *b, const xs_snapshot *s) {
    const xp_worker_stats *w = &s->counters;
    const uint64_t f[N_WORKER_STATS] = {
        w->expanded, w->generated,      w->duplicates,   w->rejected, w->pushed,  w->exposed,
        w->steals,   w->steal_attempts, w->improvements, w->evicted,  w->dropped, w->frontier_peak,
    };
    put_version(b);
    for (int i = 0; i < N_WORKER_STATS; i++) ckpt_put_varint(b, f[i]);
    ckpt_put_varint(b, s->cache_hits);
    ckpt_put_varint(b, s->cache_misses);
    ckpt_put_varint(b, s->replay_steps);
    ckpt_put_varint(b, s->replay_mismatches);
    ckpt_put_varint(b, s->failed_children);
    for (int i = 0; i < XS_PHASE_COUNT; i++) ckpt_put_f64(b, s->phase_seconds[i]);
}

ir_status ckpt_put_snapshot(ckpt_writer *w, const xs_snapshot *s, ir_diag *d) {
    /* states[0] is not recorded in FRNT: GRPH's start figures stand for its evaluation, so they
     * must be the same numbers or a round trip would change the snapshot */
    IR_ASSERT(s->n_states >= 1 && s->states[0].parent == -1);
    IR_ASSERT(s->states[0].peak == s->start_peak && s->states[0].lat == s->start_lat);
    IR_ASSERT(s->n_workers >= 0 && s->best >= 0);
    ckpt_buf b = {0};
    ir_status st;

    put_graph(&b, s);
    if ((st = ckpt_writer_section_buf(w, CKPT_TAG_GRAPH, &b, d)) != IR_OK) return st;
    put_frontier(&b, s);
    if ((st = ckpt_writer_section_buf(w, CKPT_TAG_FRONTIER, &b, d)) != IR_OK) return st;

    /* the codec sorts in place and the snapshot is const: sort a copy */
    uint64_t *fps = NULL;
    if (s->n_fps) {
        if (s->n_fps > SIZE_MAX / sizeof *fps || !(fps = malloc((size_t)s->n_fps * sizeof *fps)))
            return ir_diag_set(d, IR_ERR_NOMEM, "out of memory copying %llu fingerprints",
                               (unsigned long long)s->n_fps);
        memcpy(fps, s->fps, (size_t)s->n_fps * sizeof *fps);
    }
    put_version(&b);
    ckpt_put_fpset(&b, fps, (size_t)s->n_fps);
    free(fps);
    if ((st = ckpt_writer_section_buf(w, CKPT_TAG_FPSET, &b, d)) != IR_OK) return st;

    put_version(&b);
    ckpt_put_varint(&b, (uint64_t)s->best);
    if ((st = ckpt_writer_section_buf(w, CKPT_TAG_BEST, &b, d)) != IR_OK) return st;

    put_version(&b);
    ckpt_put_varint(&b, (uint64_t)s->n_workers);
    for (int32_t i = 0; i < s->n_workers; i++) {
        ckpt_put_u64(&b, s->worker_seq[i]);
        ckpt_put_u64(&b, s->worker_rng[i]);
    }
    if ((st = ckpt_writer_section_buf(w, CKPT_TAG_RNG, &b, d)) != IR_OK) return st;

    put_version(&b);
    ckpt_put_f64(&b, s->elapsed_s);
    ckpt_put_varint(&b, s->resumes);
    if ((st = ckpt_writer_section_buf(w, CKPT_TAG_TIME, &b, d)) != IR_OK) return st;

    put_counters(&b, s);
    return ckpt_writer_section_buf(w, CKPT_TAG_COUNTERS, &b, d);
}

/* ---------------------------------------------------------------- snapshot: reader */

static ir_status get_graph(const ckpt_reader *r, xs_snapshot *s, uint64_t *fp0, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_GRAPH;
    ckpt_cur c;
    uint64_t nodes = 0;
    ir_status st = open_section(r, tag, &c, d);
    if (st != IR_OK) return st;
    ckpt_get_varint(&c, &nodes);
    ckpt_get_u64(&c, &s->eager_peak);
    ckpt_get_f64(&c, &s->eager_lat);
    ckpt_get_u64(&c, &s->start_peak);
    ckpt_get_f64(&c, &s->start_lat);
    ckpt_get_u64(&c, fp0);
    if ((st = close_section(&c, tag, "the start figures", d)) != IR_OK) return st;
    if (nodes > UINT32_MAX)
        return section_err(d, tag, "start_nodes %llu is too large", (unsigned long long)nodes);
    s->start_nodes = (uint32_t)nodes;
    if (!figure_ok(s->eager_lat) || !figure_ok(s->start_lat))
        return section_err(d, tag, "eager_lat %g or start_lat %g is not a finite time >= 0",
                           s->eager_lat, s->start_lat);
    return IR_OK;
}

/* One FRNT state record into states[i] (i >= 1). */
static ir_status get_state(ckpt_cur *c, uint32_t i, xs_snap_state *st, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_FRONTIER;
    uint64_t parent = 0, node = 0, value = 0, user = 0;
    uint8_t kind = 0;
    ckpt_get_varint(c, &parent);
    ckpt_get_u8(c, &kind);
    ckpt_get_varint(c, &node);
    ckpt_get_varint(c, &value);
    ckpt_get_varint(c, &user);
    ckpt_get_u64(c, &st->peak);
    ckpt_get_f64(c, &st->lat);
    ckpt_get_u64(c, &st->fp);
    if (c->bad) return section_err(d, tag, "state %u: truncated", i);
    if (parent >= i)
        return section_err(d, tag, "state %u: parent %llu is not below %u", i,
                           (unsigned long long)parent, i);
    if (kind >= RW_KIND_COUNT)
        return section_err(d, tag, "state %u: rewrite kind %u out of range (0..%d)", i, kind,
                           RW_KIND_COUNT - 1);
    if (node > UINT32_MAX || user > UINT32_MAX || value > UINT32_MAX)
        return section_err(d, tag,
                           "state %u: rewrite node %llu, user %llu or value (zigzag %llu) "
                           "out of range",
                           i, (unsigned long long)node, (unsigned long long)user,
                           (unsigned long long)value);
    if (!figure_ok(st->lat))
        return section_err(d, tag, "state %u: latency %g is not a finite time >= 0", i, st->lat);
    st->parent = (int32_t)parent;
    st->rw.kind = kind;
    st->rw.node_id = (uint32_t)node;
    st->rw.value = (int)((int64_t)(value >> 1) ^ -(int64_t)(value & 1)); /* un-zigzag: int32 */
    st->rw.user_id = (uint32_t)user;
    return IR_OK;
}

static ir_status get_frontier(const ckpt_reader *r, xs_snapshot *s, uint64_t fp0, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_FRONTIER;
    ckpt_cur c;
    uint64_t n = 0;
    ir_status st = open_section(r, tag, &c, d);
    if (st != IR_OK) return st;
    if (!ckpt_get_varint(&c, &n)) return section_err(d, tag, "truncated in n_states");
    if (n == 0) return section_err(d, tag, "n_states 0 (the start state is always there)");
    if (n > INT32_MAX) /* indices are int32 */
        return section_err(d, tag, "n_states %llu is too large", (unsigned long long)n);
    if (n - 1 > left(&c) / MIN_STATE_BYTES)
        return section_err(d, tag, "n_states %llu: more records than the %zu bytes left can hold",
                           (unsigned long long)n, left(&c));
    if (!(s->states = calloc((size_t)n, sizeof *s->states)))
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for %llu states", (unsigned long long)n);
    s->n_states = (uint32_t)n;
    s->states[0] =
        (xs_snap_state){.parent = -1, .peak = s->start_peak, .lat = s->start_lat, .fp = fp0};
    for (uint32_t i = 1; i < s->n_states; i++)
        if ((st = get_state(&c, i, &s->states[i], d)) != IR_OK) return st;

    if ((st = get_count(&c, tag, "n_frontier", INT32_MAX, MIN_ITEM_BYTES, &n, d)) != IR_OK)
        return st;
    if (n && !(s->frontier = calloc((size_t)n, sizeof *s->frontier)))
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for %llu frontier records",
                           (unsigned long long)n);
    s->n_frontier = (uint32_t)n;
    for (uint32_t i = 0; i < s->n_frontier; i++) {
        xs_snap_item *it = &s->frontier[i];
        uint64_t state = 0, worker = 0;
        uint8_t flags = 0;
        ckpt_get_varint(&c, &state);
        ckpt_get_varint(&c, &it->seq);
        ckpt_get_varint(&c, &worker);
        ckpt_get_u8(&c, &flags);
        if (c.bad) return section_err(d, tag, "frontier record %u: truncated", i);
        if (state >= s->n_states)
            return section_err(d, tag, "frontier record %u: state %llu out of range (%u states)", i,
                               (unsigned long long)state, s->n_states);
        if (worker > INT32_MAX)
            return section_err(d, tag, "frontier record %u: worker %llu is too large", i,
                               (unsigned long long)worker);
        if (flags & ~1u)
            return section_err(d, tag, "frontier record %u: flags 0x%02x: bits other than 0 set", i,
                               flags);
        it->state = (int32_t)state;
        it->worker = (int32_t)worker;
        it->unfinished = flags & 1u;
    }
    return close_section(&c, tag, "the frontier records", d);
}

static ir_status get_fpset(const ckpt_reader *r, xs_snapshot *s, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_FPSET;
    ckpt_cur c;
    size_t n = 0;
    ir_status st = open_section(r, tag, &c, d);
    if (st != IR_OK) return st;
    if (!ckpt_get_fpset(&c, &s->fps, &n))
        return section_err(d, tag,
                           "malformed fingerprint set (count, Rice code or padding), or "
                           "out of memory");
    s->n_fps = n;
    return close_section(&c, tag, "the fingerprint set", d);
}

static ir_status get_best(const ckpt_reader *r, xs_snapshot *s, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_BEST;
    ckpt_cur c;
    uint64_t best = 0;
    ir_status st = open_section(r, tag, &c, d);
    if (st != IR_OK) return st;
    ckpt_get_varint(&c, &best);
    if ((st = close_section(&c, tag, "best", d)) != IR_OK) return st;
    if (best >= s->n_states)
        return section_err(d, tag, "best %llu out of range (%u states)", (unsigned long long)best,
                           s->n_states);
    s->best = (int32_t)best;
    return IR_OK;
}

static ir_status get_rng(const ckpt_reader *r, xs_snapshot *s, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_RNG;
    ckpt_cur c;
    uint64_t n = 0;
    ir_status st = open_section(r, tag, &c, d);
    if (st != IR_OK) return st;
    if ((st = get_count(&c, tag, "n_workers", INT32_MAX, MIN_WORKER_BYTES, &n, d)) != IR_OK)
        return st;
    if (n == 0) return section_err(d, tag, "n_workers 0 (a search has at least one worker)");
    s->worker_seq = malloc((size_t)n * sizeof *s->worker_seq);
    s->worker_rng = malloc((size_t)n * sizeof *s->worker_rng);
    if (!s->worker_seq || !s->worker_rng)
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for %llu workers",
                           (unsigned long long)n);
    s->n_workers = (int32_t)n;
    for (int32_t i = 0; i < s->n_workers; i++) {
        ckpt_get_u64(&c, &s->worker_seq[i]);
        ckpt_get_u64(&c, &s->worker_rng[i]);
    }
    return close_section(&c, tag, "the worker cursors", d);
}

static ir_status get_time(const ckpt_reader *r, xs_snapshot *s, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_TIME;
    ckpt_cur c;
    uint64_t resumes = 0;
    ir_status st = open_section(r, tag, &c, d);
    if (st != IR_OK) return st;
    ckpt_get_f64(&c, &s->elapsed_s);
    ckpt_get_varint(&c, &resumes);
    if ((st = close_section(&c, tag, "elapsed and resumes", d)) != IR_OK) return st;
    if (!figure_ok(s->elapsed_s))
        return section_err(d, tag, "elapsed %g is not a finite time >= 0", s->elapsed_s);
    if (resumes > UINT32_MAX)
        return section_err(d, tag, "resumes %llu is too large", (unsigned long long)resumes);
    s->resumes = (uint32_t)resumes;
    return IR_OK;
}

static ir_status get_counters(const ckpt_reader *r, xs_snapshot *s, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_COUNTERS;
    ckpt_cur c;
    uint64_t f[N_WORKER_STATS] = {0};
    ir_status st = open_section(r, tag, &c, d);
    if (st != IR_OK) return st;
    for (int i = 0; i < N_WORKER_STATS; i++) ckpt_get_varint(&c, &f[i]);
    ckpt_get_varint(&c, &s->cache_hits);
    ckpt_get_varint(&c, &s->cache_misses);
    ckpt_get_varint(&c, &s->replay_steps);
    ckpt_get_varint(&c, &s->replay_mismatches);
    ckpt_get_varint(&c, &s->failed_children);
    for (int i = 0; i < XS_PHASE_COUNT; i++) ckpt_get_f64(&c, &s->phase_seconds[i]);
    if ((st = close_section(&c, tag, "the counters", d)) != IR_OK) return st;
    for (int i = 0; i < XS_PHASE_COUNT; i++)
        if (!figure_ok(s->phase_seconds[i]))
            return section_err(d, tag, "phase %s: %g seconds is not a finite time >= 0",
                               xs_phase_name(i), s->phase_seconds[i]);
    s->counters = (xp_worker_stats){
        .expanded = f[0],
        .generated = f[1],
        .duplicates = f[2],
        .rejected = f[3],
        .pushed = f[4],
        .exposed = f[5],
        .steals = f[6],
        .steal_attempts = f[7],
        .improvements = f[8],
        .evicted = f[9],
        .dropped = f[10],
        .frontier_peak = f[11],
    };
    return IR_OK;
}

ir_status ckpt_get_snapshot(const ckpt_reader *r, xs_snapshot *s, ir_diag *d) {
    uint64_t fp0 = 0;
    ir_status st;
    memset(s, 0, sizeof *s);
    /* GRPH before FRNT (states[0] takes its figures), FRNT before BEST (the index's range) */
    if ((st = get_graph(r, s, &fp0, d)) != IR_OK || (st = get_frontier(r, s, fp0, d)) != IR_OK ||
        (st = get_fpset(r, s, d)) != IR_OK || (st = get_best(r, s, d)) != IR_OK ||
        (st = get_rng(r, s, d)) != IR_OK || (st = get_time(r, s, d)) != IR_OK ||
        (st = get_counters(r, s, d)) != IR_OK ||
        (st = xs_snapshot_check(s, NULL, d)) != IR_OK) { /* "search snapshot: ..." */
        xs_snapshot_free(s);
        return st;
    }
    return IR_OK;
}

/* ---------------------------------------------------------------- OPTS */

ir_status ckpt_put_args(ckpt_writer *w, int argc, const char *const *argv, ir_diag *d) {
    IR_ASSERT(argc >= 0);
    ckpt_buf b = {0};
    put_version(&b);
    ckpt_put_varint(&b, (uint64_t)argc);
    for (int i = 0; i < argc; i++) ckpt_put_str(&b, argv[i]);
    return ckpt_writer_section_buf(w, CKPT_TAG_OPTIONS, &b, d);
}

void ckpt_args_free(int argc, char **argv) {
    if (!argv) return;
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
}

ir_status ckpt_get_args(const ckpt_reader *r, int *argc, char ***argv, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_OPTIONS;
    ckpt_cur c;
    uint64_t n = 0;
    char **v = NULL;
    int got = 0;
    *argc = 0;
    *argv = NULL;
    ir_status st = open_section(r, tag, &c, d);
    if (st != IR_OK) return st;
    if ((st = get_count(&c, tag, "argc", INT_MAX - 1, MIN_ARG_BYTES, &n, d)) != IR_OK) return st;
    if (!(v = calloc((size_t)n + 1, sizeof *v)))
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for %llu arguments",
                           (unsigned long long)n);
    for (got = 0; got < (int)n; got++) {
        const char *s;
        size_t len;
        if (!ckpt_get_str(&c, &s, &len)) {
            st = section_err(d, tag, "argument %d: truncated", got);
            goto fail;
        }
        if (memchr(s, '\0', len)) {
            st = section_err(d, tag, "argument %d holds a NUL byte", got);
            goto fail;
        }
        if (!(v[got] = malloc(len + 1))) {
            st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory for argument %d", got);
            goto fail;
        }
        memcpy(v[got], s, len);
        v[got][len] = '\0';
    }
    if ((st = close_section(&c, tag, "the arguments", d)) != IR_OK) goto fail;
    *argc = got;
    *argv = v;
    return IR_OK;
fail:
    ckpt_args_free(got, v);
    return st;
}

/* ---------------------------------------------------------------- PROF */

ir_status ckpt_put_profile(ckpt_writer *w, const prof_snapshot *p, ir_diag *d) {
    IR_ASSERT(memchr(p->device, '\0', sizeof p->device) &&
              memchr(p->detail, '\0', sizeof p->detail));
    const prof_target *f = &p->fallback;
    const double fig[N_FALLBACK] = {f->mm_f32_flops, f->mm_f16_flops, f->other_f32_flops, f->mem_bw,
                                    f->host_link_bw, f->launch_s,     f->knee_s};
    ckpt_buf b = {0};
    put_version(&b);
    ckpt_put_str(&b, p->device);
    ckpt_put_str(&b, p->detail);
    ckpt_put_u8(&b, p->measured ? 1 : 0);
    for (int i = 0; i < N_FALLBACK; i++) ckpt_put_f64(&b, fig[i]);
    ckpt_put_f64(&b, p->step_s);
    ckpt_put_varint(&b, p->n_entries);
    for (size_t i = 0; i < p->n_entries; i++) {
        IR_ASSERT(i == 0 || p->entries[i - 1].sig < p->entries[i].sig);
        ckpt_put_u64(&b, p->entries[i].sig);
        ckpt_put_f64(&b, p->entries[i].seconds);
        ckpt_put_varint(&b, p->entries[i].runs);
    }
    return ckpt_writer_section_buf(w, CKPT_TAG_PROFILE, &b, d);
}

/* A str into a fixed array with room for its NUL. */
static ir_status get_fixed_str(ckpt_cur *c, const char *field, char *out, size_t cap, ir_diag *d) {
    const char *s;
    size_t len;
    if (!ckpt_get_str(c, &s, &len))
        return section_err(d, CKPT_TAG_PROFILE, "truncated in %s", field);
    if (len >= cap)
        return section_err(d, CKPT_TAG_PROFILE, "%s of %zu bytes (at most %zu)", field, len,
                           cap - 1);
    if (memchr(s, '\0', len)) return section_err(d, CKPT_TAG_PROFILE, "%s holds a NUL byte", field);
    memcpy(out, s, len);
    out[len] = '\0';
    return IR_OK;
}

static ir_status get_profile(ckpt_cur *c, prof_snapshot *p, ir_diag *d) {
    const uint32_t tag = CKPT_TAG_PROFILE;
    static const char *const names[N_FALLBACK] = {"mm_f32",       "mm_f16",   "other_f32", "mem_bw",
                                                  "host_link_bw", "launch_s", "knee_s"};
    double fig[N_FALLBACK] = {0};
    uint8_t measured = 0;
    uint64_t n = 0;
    ir_status st;
    if ((st = get_fixed_str(c, "device", p->device, sizeof p->device, d)) != IR_OK ||
        (st = get_fixed_str(c, "detail", p->detail, sizeof p->detail, d)) != IR_OK)
        return st;
    ckpt_get_u8(c, &measured);
    for (int i = 0; i < N_FALLBACK; i++) ckpt_get_f64(c, &fig[i]);
    ckpt_get_f64(c, &p->step_s);
    if (c->bad) return section_err(d, tag, "truncated in the fallback figures");
    if (measured > 1) return section_err(d, tag, "measured %u is not 0 or 1", measured);
    for (int i = 0; i < N_FALLBACK; i++)
        if (!figure_ok(fig[i]))
            return section_err(d, tag, "fallback %s %g is not finite and >= 0", names[i], fig[i]);
    if (!figure_ok(p->step_s))
        return section_err(d, tag, "step_s %g is not a finite time >= 0", p->step_s);
    p->measured = measured;
    p->fallback = (prof_target){NULL, NULL, fig[0], fig[1], fig[2], fig[3], fig[4], fig[5], fig[6]};
    if ((st = get_count(c, tag, "n", SIZE_MAX / sizeof *p->entries, MIN_ENTRY_BYTES, &n, d)) !=
        IR_OK)
        return st;
    if (n && !(p->entries = malloc((size_t)n * sizeof *p->entries)))
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for %llu profile entries",
                           (unsigned long long)n);
    p->n_entries = (size_t)n;
    for (size_t i = 0; i < p->n_entries; i++) {
        prof_snapshot_entry *e = &p->entries[i];
        uint64_t runs = 0;
        ckpt_get_u64(c, &e->sig);
        ckpt_get_f64(c, &e->seconds);
        ckpt_get_varint(c, &runs);
        if (c->bad) return section_err(d, tag, "entry %zu: truncated", i);
        if (i > 0 && e->sig <= p->entries[i - 1].sig)
            return section_err(d, tag, "entry %zu: sig %016llx not above the previous %016llx", i,
                               (unsigned long long)e->sig,
                               (unsigned long long)p->entries[i - 1].sig);
        if (!figure_ok(e->seconds))
            return section_err(d, tag, "entry %zu: %g seconds is not a finite time >= 0", i,
                               e->seconds);
        if (runs > UINT32_MAX)
            return section_err(d, tag, "entry %zu: runs %llu is too large", i,
                               (unsigned long long)runs);
        e->runs = (uint32_t)runs;
    }
    return close_section(c, tag, "the entries", d);
}

ir_status ckpt_get_profile(const ckpt_reader *r, prof_snapshot *p, ir_diag *d) {
    ckpt_cur c;
    memset(p, 0, sizeof *p);
    ir_status st = open_section(r, CKPT_TAG_PROFILE, &c, d);
    if (st == IR_OK) st = get_profile(&c, p, d);
    if (st != IR_OK) prof_snapshot_free(p);
    return st;
}
