/* prof-impl.h - private declarations shared by the files of profiler/: the profile database
 * (prof-db.c), warnings, and the signatures of calibration entries. Not part of the public API
 * (tests may include it to exercise the database directly).
 *
 * The database file (little-endian; a host of the other byte order sees a checksum mismatch and
 * rebuilds it):
 *   offset 0   8 bytes  magic "MAGPIEDB"
 *          8   u32      version (PROF_DB_VERSION)
 *         12   u32      entry size in bytes (32)
 *         16   u64      n, the number of entries
 *         24   n x 32   entries: u64 device (hash of the device detail string), u64 signature
 *                       (prof_signature or a calibration tag), f64 seconds, u32 runs, u32 zero
 *   24 + 32n   u64      checksum: ir_hash_bytes of every byte before it, seed PROF_DB_SEED
 * The file is exactly 32 + 32n bytes. Anything else (bad magic, another version, a size that
 * does not match n, a checksum mismatch, a negative or non-finite time) is corrupt: the file is
 * moved aside to FILE.corrupt-<unix time> with a warning and the database starts empty. */
#ifndef MAGPIE_PROF_IMPL_H
#define MAGPIE_PROF_IMPL_H

#include "prof.h"

#define PROF_DB_MAGIC "MAGPIEDB"
#define PROF_DB_VERSION 1u
#define PROF_DB_ENTRY_BYTES 32u
#define PROF_DB_HEADER_BYTES 24u
#define PROF_DB_SEED 0x6d61677069656462ULL /* "magpiedb" */

/* ---------------------------------------------------------------- warnings */

typedef struct prof_warner {
    prof_warn_fn fn; /* NULL: stderr */
    void *ctx;
} prof_warner;

/* Formats one line and hands it to w (newlines become spaces). */
void prof_warnf(const prof_warner *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- the database */

typedef struct prof_entry {
    uint64_t device;
    uint64_t sig;
    double seconds;
    uint32_t runs;
    bool used;  /* slot occupied (in memory only) */
    bool fresh; /* measured by this process and not yet saved (in memory only) */
} prof_entry;

/* An open-addressing table of entries keyed by (device, sig). Written only in the profiling
 * phase; concurrent prof_db_find calls are safe while nobody writes. */
typedef struct prof_db {
    prof_entry *slots;
    size_t cap; /* a power of two, or 0 */
    size_t n;
    size_t n_fresh;
} prof_db;

void prof_db_init(prof_db *db);
void prof_db_clear(prof_db *db); /* frees the slots; the db may be reused */
const prof_entry *prof_db_find(const prof_db *db, uint64_t device, uint64_t sig);
/* Inserts or replaces (device, sig) with e's fields (used is set). IR_ERR_NOMEM on failure. */
ir_status prof_db_put(prof_db *db, const prof_entry *e);
size_t prof_db_count_device(const prof_db *db, uint64_t device);

/* Parses a database image into db (which must be empty). IR_ERR_PARSE with the cause in why
 * for a corrupt image; db is then left empty. */
ir_status prof_db_decode(prof_db *db, const void *buf, size_t len, char *why, size_t why_n);
/* Serializes every entry of db (sorted by device, then signature, so equal contents give equal
 * files). *out is malloc'd. */
ir_status prof_db_encode(const prof_db *db, unsigned char **out, size_t *len);

/* Loads path into db: a missing file is an empty database; a corrupt one is moved aside with a
 * warning; an unreadable one gives a warning. Only IR_ERR_NOMEM is returned as an error. */
ir_status prof_db_load(prof_db *db, const char *path, const prof_warner *w);
/* When db has fresh entries: creates the directory, re-reads path (another process may have
 * added entries), merges the fresh entries into what it read, and writes the result atomically
 * (temporary file in the same directory, fsync, rename). An unwritable location is a warning
 * and the entries stay in memory; on success they are no longer fresh. */
void prof_db_save(prof_db *db, const char *path, const prof_warner *w);
/* $XDG_CACHE_HOME/magpie/profile.db, else $HOME/.cache/magpie/profile.db, into buf; NULL when
 * neither variable is usable. */
const char *prof_db_default_path(char *buf, size_t n);

/* ---------------------------------------------------------------- model internals
 * (prof-model.c, for prof-snapshot.c: struct prof_model stays private to prof-model.c) */

/* The key of m's database entries (a hash of its detail string; 0 for analytic models), its
 * table and the overhead added to every measured node. */
uint64_t prof_model_dev(const prof_model *m);
const prof_db *prof_model_db(const prof_model *m);
double prof_model_step_s(const prof_model *m);
/* Installs a snapshot in m, all at once (nothing here can fail): *db becomes m's table (db is
 * left empty), detail m's detail string (a warning when it differs, for a measured model) and,
 * for a measured model, its hash the key of m's entries; fb's figures (m's name and description
 * kept) and step_s replace m's; and m is frozen: prof_profile_graph measures and calibrates
 * nothing any more, so m estimates exactly as the snapshotted model did. */
void prof_model_install(prof_model *m, prof_db *db, const char *detail, const prof_target *fb,
                        double step_s);

/* ---------------------------------------------------------------- signatures */

/* Signature of a calibration measurement that is not an op (the executor's step overhead, a
 * transfer of a given size): a hash of tag in a space apart from prof_signature's. */
uint64_t prof_signature_tag(const char *tag);

/* ---------------------------------------------------------------- the roofline */

/* True for the magpie-domain swap ops, whose cost is a host-link transfer. *bytes receives the
 * bytes moved. */
bool prof_is_transfer(const ir_graph *g, const ir_node *n, size_t *bytes);
/* bytes / host_link_bw + launch_s. */
double prof_roofline_transfer(const prof_target *t, size_t bytes);

#endif
