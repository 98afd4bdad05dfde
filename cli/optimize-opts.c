/* optimize-opts.c - the options of `magpie optimize` (and of the search `magpie resume`
 * continues): parsed and checked before anything is read or written, so that a usage error
 * leaves nothing behind; and the options hash a checkpoint records.
 *
 * The hash covers what defines the search, parsed (so "0.5" and ".5" agree) and written as one
 * "key=value" line each, in a fixed order: mode and limit, device, rule families, delta,
 * max-frontier, seed, training options, import options. A new option that changes what the
 * search explores must be added here, or a resume could continue a different search (--pet is:
 * it sets the pet rule family and, alone, the infinite memory limit). */
#include "optimize-run.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_FRONTIER 100000

const cli_rule_family cli_rule_families[] = {
    {"fission", XS_RULE_FISSION},  {"remat", XS_RULE_REMAT}, {"swap", XS_RULE_SWAP},
    {"reorder", XS_RULE_REORDER},  {"subst", XS_RULE_SUBST}, {"pet", XS_RULE_PET},
    {"remat-chain", XS_RULE_CHAIN}};
const int cli_n_rule_families = (int)(sizeof cli_rule_families / sizeof cli_rule_families[0]);

static int parse_rules(const char *n, const char *rules, unsigned *out) {
    *out = 0;
    for (const char *p = rules;;) {
        size_t len = strcspn(p, ",");
        int k = 0;
        while (k < cli_n_rule_families && (strlen(cli_rule_families[k].name) != len ||
                                           strncmp(p, cli_rule_families[k].name, len)))
            k++;
        if (k == cli_n_rule_families)
            return cli_fail(CLI_EXIT_USAGE,
                            "%s: --rules '%s': unknown rule family '%.*s' (expected fission, "
                            "remat, swap, reorder, subst, pet)",
                            n, rules, (int)len, p);
        *out |= cli_rule_families[k].flag;
        if (!p[len]) break;
        p += len + 1;
    }
    return CLI_EXIT_OK;
}

/* A time option: a plain number or a number with a time unit, in seconds. */
static int parse_seconds(const char *n, const char *opt, const char *s, double *out) {
    cli_limit t;
    if (!cli_parse_limit(s, &t) || t.kind == CLI_LIMIT_BYTES)
        return cli_fail(CLI_EXIT_USAGE, "%s: --%s '%s': expected seconds (10, 10s, 500ms)", n, opt,
                        s);
    *out = t.value;
    return CLI_EXIT_OK;
}

int cli_optimize_parse(const cli_cmd *cmd, const cli_opts *o, cli_opt_args *a) {
    const char *n = cmd->name;
    memset(a, 0, sizeof *a);
    /* --pet alone: PET's own objective, the fastest equivalent graph whatever its memory (the
     * memory mode with an infinite limit, the one non-finite limit there is) */
    bool unbounded = o->pet && !o->mem_limit && !o->lat_limit;
    if (!unbounded && !!o->mem_limit == !!o->lat_limit)
        return cli_fail(CLI_EXIT_USAGE,
                        "%s: give exactly one of --mem-limit and --lat-limit (or --pet alone)", n);
    a->xs.mode = o->lat_limit ? XS_MODE_LAT : XS_MODE_MEM;
    if (unbounded) a->limit = (cli_limit){.kind = CLI_LIMIT_BYTES, .value = INFINITY};
    a->limit_text = unbounded ? "none" : o->mem_limit ? o->mem_limit : o->lat_limit;
    cli_limit_kind want = o->mem_limit ? CLI_LIMIT_BYTES : CLI_LIMIT_SECONDS;
    if (!unbounded && (!cli_parse_limit(a->limit_text, &a->limit) ||
                       (a->limit.kind != CLI_LIMIT_RATIO && a->limit.kind != want)))
        return cli_fail(
            CLI_EXIT_USAGE,
            "%s: --%s '%s': expected a ratio of the unoptimized value (e.g. %s) or %s", n,
            o->mem_limit ? "mem-limit" : "lat-limit", a->limit_text, o->mem_limit ? "0.5" : "1.10",
            o->mem_limit ? "bytes with a unit (512MiB, 8GiB)" : "a time with a unit (12ms, 1.5s)");
    a->device = o->device ? o->device : CLI_DEFAULT_DEVICE;
    a->xs.max_seconds = 10.0;
    int code;
    if (o->time_budget &&
        (code = parse_seconds(n, "time", o->time_budget, &a->xs.max_seconds)) != CLI_EXIT_OK)
        return code;
    long long v;
    if (o->max_states) {
        if (!cli_parse_int(o->max_states, 1, 1LL << 32, &v))
            return cli_fail(CLI_EXIT_USAGE, "%s: --max-states '%s': expected an integer >= 1", n,
                            o->max_states);
        a->xs.max_states = (size_t)v;
    }
    a->xs.max_frontier = DEFAULT_MAX_FRONTIER;
    if (o->max_frontier) {
        if (!cli_parse_int(o->max_frontier, 1, 1LL << 32, &v))
            return cli_fail(CLI_EXIT_USAGE, "%s: --max-frontier '%s': expected an integer >= 1", n,
                            o->max_frontier);
        a->xs.max_frontier = (size_t)v;
    }
    if (o->threads) {
        if (!cli_parse_int(o->threads, 1, 1024, &v))
            return cli_fail(CLI_EXIT_USAGE, "%s: --threads '%s': expected an integer in 1..1024", n,
                            o->threads);
        a->xs.threads = (int)v;
    } else {
        a->xs.threads = xp_default_threads();
    }
    a->xs.delta = 1.1;
    if (o->delta) {
        char *end = NULL;
        errno = 0;
        double d = strtod(o->delta, &end);
        if (!*o->delta || *end || errno || !isfinite(d) || d < 1.0 || d > 100.0)
            return cli_fail(CLI_EXIT_USAGE, "%s: --delta '%s': expected a number in [1, 100]", n,
                            o->delta);
        a->xs.delta = d;
    }
    /* --pet alone searches PET's mutants and the fully equivalent substitutions, nothing that
     * trades time for memory; with a limit they join the memory rules */
    a->xs.rules = unbounded ? XS_RULE_PET | XS_RULE_SUBST : XS_RULE_ALL;
    if (o->rules && (code = parse_rules(n, o->rules, &a->xs.rules)) != CLI_EXIT_OK) return code;
    if (o->pet) a->xs.rules |= XS_RULE_PET;
    if ((a->xs.rules & XS_RULE_PET) && o->train)
        return cli_fail(CLI_EXIT_USAGE,
                        "%s: PET (--pet, --rules pet) works on inference graphs: it cannot be "
                        "combined with --train",
                        n);
    a->xs.seed = o->seed;
    if (o->checkpoint_every && !o->checkpoint)
        return cli_fail(CLI_EXIT_USAGE, "%s: --checkpoint-every needs --checkpoint FILE", n);
    a->checkpoint_every_s = CLI_DEFAULT_CKPT_EVERY_S;
    if (o->checkpoint_every && (code = parse_seconds(n, "checkpoint-every", o->checkpoint_every,
                                                     &a->checkpoint_every_s)) != CLI_EXIT_OK)
        return code;
    a->measure = CLI_DEFAULT_MEASURE;
    if (o->measure) {
        if (!cli_parse_int(o->measure, 0, CLI_MAX_MEASURE, &v))
            return cli_fail(CLI_EXIT_USAGE, "%s: --measure '%s': expected an integer in 0..%d", n,
                            o->measure, CLI_MAX_MEASURE);
        a->measure = (int)v;
    }
    a->measure_s = 0.25 * a->xs.max_seconds;
    if (o->measure_time &&
        (code = parse_seconds(n, "measure-time", o->measure_time, &a->measure_s)) != CLI_EXIT_OK)
        return code;
    a->refine = o->refine;
    if (o->refine && (!o->mem_limit || o->checkpoint))
        return cli_fail(CLI_EXIT_USAGE,
                        "%s: --refine needs --mem-limit and does not combine with --checkpoint "
                        "(its later searches are not checkpointed)",
                        n);
    return CLI_EXIT_OK;
}

/* ---------------------------------------------------------------- options hash */

/* One "key=value\n" line of the canonical text (value NULL: empty). */
static void put_line(ckpt_xxh64_state *h, const char *key, const char *value) {
    ckpt_xxh64_update(h, key, strlen(key));
    ckpt_xxh64_update(h, "=", 1);
    if (value) ckpt_xxh64_update(h, value, strlen(value));
    ckpt_xxh64_update(h, "\n", 1);
}

/* %.17g prints every double so that it parses back to the same bits. */
static void put_num(ckpt_xxh64_state *h, const char *key, double v) {
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", v);
    put_line(h, key, buf);
}

static void put_uint(ckpt_xxh64_state *h, const char *key, unsigned long long v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%llu", v);
    put_line(h, key, buf);
}

uint64_t cli_optimize_options_hash(const cli_opts *o, const cli_opt_args *a) {
    static const char *const limit_kinds[] = {"ratio", "bytes", "seconds"};
    ckpt_xxh64_state h;
    ckpt_xxh64_init(&h, 0);
    put_line(&h, "magpie-search-options", "1"); /* this text's own version */
    put_line(&h, "mode", a->xs.mode == XS_MODE_MEM ? "memory" : "latency");
    put_line(&h, "limit-kind", limit_kinds[a->limit.kind]);
    put_num(&h, "limit", a->limit.value);
    put_line(&h, "device", a->device);
    put_uint(&h, "rules", a->xs.rules);
    put_num(&h, "delta", a->xs.delta);
    put_uint(&h, "max-frontier", a->xs.max_frontier);
    put_uint(&h, "seed", a->xs.seed);
    put_uint(&h, "train", o->train);
    if (o->train) {
        put_uint(&h, "loss", (unsigned)o->train_opts.loss);
        put_line(&h, "target", o->train_opts.target);
        put_uint(&h, "optimizer", (unsigned)o->train_opts.optimizer);
        put_num(&h, "lr", o->train_opts.lr);
    }
    put_line(&h, "frozen", o->imp.frozen_regex);
    if (o->imp.fuse_decomposed) put_uint(&h, "fuse-decomposed", 1); /* absent: hashes as before */
    for (int i = 0; i < o->imp.n_shapes; i++) {
        char dims[IR_MAX_RANK * 21 + 1] = "";
        size_t len = 0;
        const ir_shape *s = &o->imp.shape_values[i];
        for (int k = 0; k < s->rank && len < sizeof dims; k++)
            len += (size_t)snprintf(dims + len, sizeof dims - len, "%s%lld", k ? "," : "",
                                    (long long)s->dims[k]);
        put_line(&h, "shape-name", o->imp.shape_names[i]);
        put_line(&h, "shape-dims", dims);
    }
    for (int i = 0; i < o->imp.n_data; i++) put_line(&h, "data", o->imp.data_names[i]);
    return ckpt_xxh64_digest(&h);
}
