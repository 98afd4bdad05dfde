/* ckpt-search.h - the sections of a search checkpoint: how `magpie optimize --checkpoint` lays
 * an explorer snapshot (explorer.h, xs_snapshot), the command's arguments and the cost model's
 * snapshot (prof.h, prof_snapshot) into the container of ckpt.h, and how `magpie resume` reads
 * them back. Symbols carry the prefix ckpt_.
 *
 * ================================================================ sections, version 1
 *
 * Every section begins with a u32 section version (1); a reader refuses any other. Integers are
 * little-endian (ckpt_put_*), counts and indices are varints unless a width is given, f64 is the
 * IEEE-754 bit pattern. "states" below are xs_snapshot.states.
 *
 *   OPTS  u32 version; varint argc; argc x str: the arguments of the `optimize` command that
 *         started the search, after the sub-command's name, exactly as given (the model path
 *         among them). resume re-parses them, so options mean the same on resume.
 *   GRPH  u32 version; varint start_nodes; u64 eager_peak; f64 eager_lat; u64 start_peak;
 *         f64 start_lat; u64 fingerprint of states[0]. The graph is rebuilt from the model (its
 *         content hash is in the header) and OPTS; these figures prove the rebuild exact.
 *   FRNT  u32 version; varint n_states; n_states-1 records for states 1.. (states[0] is the start
 *         state: nothing to record), each: varint parent, u8 rewrite kind, varint node_id,
 *         varint zigzag(value), varint user_id, u64 peak, f64 lat, u64 fp; then varint
 *         n_frontier; n_frontier records: varint state, varint seq, varint worker, u8 flags
 *         (bit 0: unfinished; other bits must be 0).
 *   FPST  u32 version; the fingerprint set as ckpt_put_fpset encodes it.
 *   BEST  u32 version; varint best (an index into states).
 *   RNGS  u32 version; varint n_workers; n_workers x (u64 next sequence number, u64 RNG state).
 *   TIME  u32 version; f64 elapsed search seconds; varint resumes.
 *   CNTR  u32 version; the xp_worker_stats fields in declaration order as varints (expanded,
 *         generated, duplicates, rejected, pushed, exposed, steals, steal_attempts, improvements,
 *         evicted, dropped, frontier_peak); varints cache_hits, cache_misses, replay_steps,
 *         replay_mismatches, failed_children; XS_PHASE_COUNT x f64 phase seconds.
 *   PROF  u32 version; str device; str detail; u8 measured; 7 x f64 fallback figures (mm_f32,
 *         mm_f16, other_f32, mem_bw, host_link_bw, launch_s, knee_s); f64 step_s; varint n; n x
 *         (u64 sig, f64 seconds, varint runs), sigs strictly ascending.
 *
 * A reader checks every section's version, that it is consumed exactly (no trailing bytes),
 * every count against the bytes left before allocating, every field against the type it lands
 * in, times and figures (f64) finite and >= 0, and the decoded snapshot with xs_snapshot_check; a
 * failure is IR_ERR_PARSE naming the section and the field ("section FRNT: state 17: parent 20 is
 * not below 17"). The reader does not know the file's name: the caller prefixes it. */
#ifndef MAGPIE_CKPT_SEARCH_H
#define MAGPIE_CKPT_SEARCH_H

#include "ckpt.h"
#include "explorer.h"
#include "prof.h"

#define CKPT_SECTION_VERSION 1u

/* Adds GRPH, FRNT, FPST, BEST, RNGS, TIME and CNTR for s. states[0] is not recorded: its peak and
 * lat must be start_peak and start_lat (asserted), as a decoder rebuilds it from GRPH. IR_ERR_NOMEM
 * only (the writer may then hold some of the sections: free it). */
ir_status ckpt_put_snapshot(ckpt_writer *w, const xs_snapshot *s, ir_diag *d);
/* Decodes those sections into *s (zeroed first; xs_snapshot_free it). IR_ERR_PARSE (a section
 * missing or malformed, named in d) or IR_ERR_NOMEM; *s is then empty. */
ir_status ckpt_get_snapshot(const ckpt_reader *r, xs_snapshot *s, ir_diag *d);

/* OPTS. */
ir_status ckpt_put_args(ckpt_writer *w, int argc, const char *const *argv, ir_diag *d);
/* *argv: a malloc'd array of argc + 1 pointers (the last NULL) to malloc'd NUL-terminated copies;
 * free with ckpt_args_free. An argument holding a NUL byte is malformed. */
ir_status ckpt_get_args(const ckpt_reader *r, int *argc, char ***argv, ir_diag *d);
void ckpt_args_free(int argc, char **argv); /* NULL-safe */

/* PROF. */
ir_status ckpt_put_profile(ckpt_writer *w, const prof_snapshot *p, ir_diag *d);
/* *p zeroed first; prof_snapshot_free it. Strings too long for prof_snapshot's arrays, or holding
 * a NUL byte, are malformed. */
ir_status ckpt_get_profile(const ckpt_reader *r, prof_snapshot *p, ir_diag *d);

#endif
