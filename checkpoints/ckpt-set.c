/* ckpt-set.c - the manifest of a checkpoint set (ckpt.h, "checkpoint sets"): a few lines of
 * text that tie the parts of a distributed search's checkpoint together, one part per rank, each
 * a whole ordinary checkpoint. Written atomically (ckpt_write_atomic), last, by rank 0, once
 * every rank has committed its part: a set is complete exactly when its manifest names it. A
 * part's generation is in its name, so writing generation G+1 never touches the files of G,
 * which stay whole until G+1's manifest has replaced G's; a rank killed meanwhile leaves G. */
#define _POSIX_C_SOURCE 200809L
#include "ckpt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SET_MAGIC "magpie checkpoint set 1\n"

char *ckpt_set_part_path(const char *path, uint64_t generation, int rank) {
    size_t n = strlen(path) + 64;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s.g%" PRIu64 ".r%d", path, generation, rank);
    return p;
}

ir_status ckpt_set_write(const char *path, const ckpt_set *s, ir_diag *d) {
    size_t cap = 128 + (size_t)s->ranks * 48, n = 0;
    char *t = malloc(cap);
    if (!t) return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    n += (size_t)snprintf(t + n, cap - n, "%sranks %u\ngeneration %" PRIu64 "\n", SET_MAGIC,
                          s->ranks, s->generation);
    for (uint32_t r = 0; r < s->ranks; r++)
        n += (size_t)snprintf(t + n, cap - n, "part %u %016" PRIx64 "\n", r, s->hash[r]);
    ir_status st = ckpt_write_atomic(path, t, n, d);
    free(t);
    return st;
}

void ckpt_set_free(ckpt_set *s) {
    if (!s) return;
    free(s->hash);
    memset(s, 0, sizeof *s);
}

ir_status ckpt_set_read(const char *path, ckpt_set *s, bool *is_set, ir_diag *d) {
    memset(s, 0, sizeof *s);
    *is_set = false;
    FILE *f = fopen(path, "rb");
    if (!f) return IR_OK; /* the checkpoint reader names the cause */
    char line[256];
    if (!fgets(line, sizeof line, f) || strcmp(line, SET_MAGIC) != 0) {
        fclose(f);
        return IR_OK; /* not a set: an ordinary checkpoint (or not one at all) */
    }
    *is_set = true;
    ir_status st = IR_OK;
    unsigned ranks = 0;
    uint64_t gen = 0;
    if (!fgets(line, sizeof line, f) || sscanf(line, "ranks %u", &ranks) != 1 || ranks == 0 ||
        ranks > 1u << 20 || !fgets(line, sizeof line, f) ||
        sscanf(line, "generation %" SCNu64, &gen) != 1) {
        st = ir_diag_set(d, IR_ERR_PARSE, "%s: checkpoint set: bad header", path);
        goto out;
    }
    if (!(s->hash = calloc(ranks, sizeof *s->hash))) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
        goto out;
    }
    s->ranks = ranks;
    s->generation = gen;
    for (unsigned r = 0; r < ranks; r++) {
        unsigned k;
        uint64_t h;
        if (!fgets(line, sizeof line, f) || sscanf(line, "part %u %" SCNx64, &k, &h) != 2 ||
            k != r) {
            st = ir_diag_set(d, IR_ERR_PARSE, "%s: checkpoint set: part %u missing", path, r);
            goto out;
        }
        s->hash[r] = h;
    }
out:
    fclose(f);
    if (st != IR_OK) ckpt_set_free(s);
    return st;
}
