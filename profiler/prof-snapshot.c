/* prof-snapshot.c - a cost model's snapshot (prof.h, "snapshots"): what a checkpoint keeps so
 * that a resumed search costs every node exactly as the interrupted one did.
 *
 * A model's estimates depend on its database entries under its device key, its fallback figures
 * and its per-step overhead, and on nothing else once profiling is over (prof-model.c). A
 * snapshot holds exactly those; applying one installs them and freezes the model, so that no
 * later prof_profile_graph re-calibrates (which would move the fallback figures) or measures a
 * signature the snapshot lacks (which the snapshotted model costed by its fallback roofline).
 * Invariant of a snapshot: entries sorted by strictly ascending sig. */
#include "prof-impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_sig(const void *a, const void *b) {
    uint64_t x = ((const prof_snapshot_entry *)a)->sig, y = ((const prof_snapshot_entry *)b)->sig;
    return (x > y) - (x < y);
}

ir_status prof_snapshot_take(const prof_model *m, prof_snapshot *s, ir_diag *d) {
    memset(s, 0, sizeof *s);
    snprintf(s->device, sizeof s->device, "%s", prof_device(m));
    snprintf(s->detail, sizeof s->detail, "%s", prof_device_detail(m));
    s->measured = prof_is_measured(m);
    s->fallback = *prof_fallback_target(m);
    s->fallback.name = s->fallback.description = NULL;
    s->step_s = prof_model_step_s(m);
    if (!s->measured) return IR_OK; /* analytic: the figures are everything */

    const prof_db *db = prof_model_db(m);
    uint64_t dev = prof_model_dev(m);
    size_t n = prof_db_count_device(db, dev);
    if (n && !(s->entries = malloc(n * sizeof *s->entries)))
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory for %zu profile entries", n);
    for (size_t i = 0; i < db->cap; i++) {
        const prof_entry *e = &db->slots[i];
        if (e->used && e->device == dev)
            s->entries[s->n_entries++] = (prof_snapshot_entry){e->sig, e->seconds, e->runs};
    }
    /* (device, sig) is the table's key, so the sigs of one device are distinct */
    if (s->n_entries > 1) qsort(s->entries, s->n_entries, sizeof *s->entries, cmp_sig);
    return IR_OK;
}

ir_status prof_snapshot_apply(prof_model *m, const prof_snapshot *s, ir_diag *d) {
    if (strcmp(s->device, prof_device(m)) != 0)
        return ir_diag_set(d, IR_ERR_INVALID,
                           "the cost model snapshot is of device '%s', the model was opened for "
                           "'%s'",
                           s->device, prof_device(m));
    if (s->measured != prof_is_measured(m) || (!s->measured && s->n_entries))
        return ir_diag_set(d, IR_ERR_INVALID,
                           "device '%s': the cost model snapshot is %s with %zu entries, the "
                           "model is %s",
                           s->device, s->measured ? "measured" : "analytic", s->n_entries,
                           prof_is_measured(m) ? "measured" : "analytic");
    /* Build the new table beside the old one so a failure leaves m as it was: every other
     * device's entries, minus those under the old key (replaced) and the new one (which this
     * snapshot defines), plus the snapshot's, not fresh: never saved, they are not this run's
     * measurements. */
    const prof_db *old = prof_model_db(m);
    uint64_t old_dev = prof_model_dev(m);
    uint64_t dev = s->measured ? ir_hash_bytes(s->detail, strlen(s->detail), 0) : 0;
    prof_db db;
    prof_db_init(&db);
    ir_status st = IR_OK;
    for (size_t i = 0; i < old->cap && st == IR_OK; i++) {
        const prof_entry *e = &old->slots[i];
        if (e->used && e->device != old_dev && e->device != dev) st = prof_db_put(&db, e);
    }
    for (size_t i = 0; i < s->n_entries && st == IR_OK; i++) {
        prof_entry e = {.device = dev,
                        .sig = s->entries[i].sig,
                        .seconds = s->entries[i].seconds,
                        .runs = s->entries[i].runs};
        st = prof_db_put(&db, &e);
    }
    if (st != IR_OK) {
        prof_db_clear(&db);
        return ir_diag_set(d, st, "out of memory applying %zu profile entries", s->n_entries);
    }
    prof_model_install(m, &db, s->detail, &s->fallback, s->step_s);
    return IR_OK;
}

void prof_snapshot_free(prof_snapshot *s) {
    if (!s) return;
    free(s->entries);
    memset(s, 0, sizeof *s);
}
