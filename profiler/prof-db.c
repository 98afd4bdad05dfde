/* prof-db.c - the persistent profile database: an in-memory table of (device, signature) ->
 * seconds, its file format (prof-impl.h spells it out field by field), and loading and saving
 * so that magpie processes sharing one file never tear it.
 *
 * Saving re-reads the file, merges this process's fresh entries into what it finds and writes
 * the result to a temporary file in the same directory, fsync'ed and renamed over the old one
 * (ir_write_atomic). Two processes saving at once may each miss the other's entries (a lost
 * update, acceptable for a cache), but a reader only ever sees a complete file. A file that does
 * not parse is never an error: it is moved aside and rebuilt, with one warning. */
#include "prof-impl.h"

#include "ir-impl.h" /* ir_write_atomic */

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_DB_BYTES ((size_t)1 << 30) /* 33 million entries: anything larger is not ours */

/* ---------------------------------------------------------------- warnings */

void prof_warnf(const prof_warner *w, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    if (w && w->fn) {
        w->fn(w->ctx, msg);
        return;
    }
    fprintf(stderr, "magpie: warning: %s\n", msg);
    fflush(stderr);
}

/* ---------------------------------------------------------------- the table */

static size_t slot_of(uint64_t device, uint64_t sig, size_t cap) {
    return (size_t)(ir_mix64(device ^ ir_mix64(sig)) & (uint64_t)(cap - 1));
}

void prof_db_init(prof_db *db) {
    memset(db, 0, sizeof *db);
}

void prof_db_clear(prof_db *db) {
    free(db->slots);
    prof_db_init(db);
}

const prof_entry *prof_db_find(const prof_db *db, uint64_t device, uint64_t sig) {
    if (!db->cap) return NULL;
    for (size_t i = slot_of(device, sig, db->cap);; i = (i + 1) & (db->cap - 1)) {
        const prof_entry *e = &db->slots[i];
        if (!e->used) return NULL;
        if (e->device == device && e->sig == sig) return e;
    }
}

static prof_entry *find_slot(prof_entry *slots, size_t cap, uint64_t device, uint64_t sig) {
    for (size_t i = slot_of(device, sig, cap);; i = (i + 1) & (cap - 1))
        if (!slots[i].used || (slots[i].device == device && slots[i].sig == sig)) return &slots[i];
}

/* Keeps the load at most one half so that probes stay short and a free slot always exists. */
static ir_status grow(prof_db *db) {
    size_t cap = db->cap ? db->cap * 2 : 64;
    prof_entry *slots = calloc(cap, sizeof *slots);
    if (!slots) return IR_ERR_NOMEM;
    for (size_t i = 0; i < db->cap; i++)
        if (db->slots[i].used)
            *find_slot(slots, cap, db->slots[i].device, db->slots[i].sig) = db->slots[i];
    free(db->slots);
    db->slots = slots;
    db->cap = cap;
    return IR_OK;
}

ir_status prof_db_put(prof_db *db, const prof_entry *e) {
    if ((db->n + 1) * 2 > db->cap && grow(db) != IR_OK) return IR_ERR_NOMEM;
    prof_entry *s = find_slot(db->slots, db->cap, e->device, e->sig);
    if (!s->used) db->n++;
    if (s->used && s->fresh) db->n_fresh--;
    *s = *e;
    s->used = true;
    if (s->fresh) db->n_fresh++;
    return IR_OK;
}

size_t prof_db_count_device(const prof_db *db, uint64_t device) {
    size_t c = 0;
    for (size_t i = 0; i < db->cap; i++) c += db->slots[i].used && db->slots[i].device == device;
    return c;
}

/* ---------------------------------------------------------------- the format */

static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_le32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get_le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static uint32_t get_le32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t double_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}
static double bits_double(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static ir_status corrupt(char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ir_status corrupt(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return IR_ERR_PARSE;
}

ir_status prof_db_decode(prof_db *db, const void *buf, size_t len, char *why, size_t why_n) {
    const unsigned char *b = buf;
    if (len < PROF_DB_HEADER_BYTES + 8)
        return corrupt(why, why_n, "truncated (%zu bytes, a header needs %u)", len,
                       PROF_DB_HEADER_BYTES + 8);
    if (memcmp(b, PROF_DB_MAGIC, 8) != 0) return corrupt(why, why_n, "bad magic");
    uint32_t version = get_le32(b + 8), esize = get_le32(b + 12);
    if (version != PROF_DB_VERSION)
        return corrupt(why, why_n, "version %u, this magpie reads version %u", version,
                       PROF_DB_VERSION);
    if (esize != PROF_DB_ENTRY_BYTES)
        return corrupt(why, why_n, "entry size %u, expected %u", esize, PROF_DB_ENTRY_BYTES);
    uint64_t n = get_le64(b + 16);
    if (n > (len - PROF_DB_HEADER_BYTES - 8) / PROF_DB_ENTRY_BYTES ||
        PROF_DB_HEADER_BYTES + 8 + n * PROF_DB_ENTRY_BYTES != len)
        return corrupt(why, why_n, "%zu bytes do not hold the %llu entries the header announces",
                       len, (unsigned long long)n);
    size_t body = len - 8;
    if (ir_hash_bytes(b, body, PROF_DB_SEED) != get_le64(b + body))
        return corrupt(why, why_n, "checksum mismatch");
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *p = b + PROF_DB_HEADER_BYTES + i * PROF_DB_ENTRY_BYTES;
        prof_entry e = {.device = get_le64(p),
                        .sig = get_le64(p + 8),
                        .seconds = bits_double(get_le64(p + 16)),
                        .runs = get_le32(p + 24)};
        if (!isfinite(e.seconds) || e.seconds < 0) {
            prof_db_clear(db);
            return corrupt(why, why_n, "entry %llu has an invalid time", (unsigned long long)i);
        }
        if (prof_db_put(db, &e) != IR_OK) {
            prof_db_clear(db);
            return IR_ERR_NOMEM;
        }
    }
    return IR_OK;
}

static int cmp_entry(const void *a, const void *b) {
    const prof_entry *x = a, *y = b;
    if (x->device != y->device) return x->device < y->device ? -1 : 1;
    if (x->sig != y->sig) return x->sig < y->sig ? -1 : 1;
    return 0;
}

ir_status prof_db_encode(const prof_db *db, unsigned char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    size_t total = PROF_DB_HEADER_BYTES + db->n * PROF_DB_ENTRY_BYTES + 8;
    unsigned char *b = calloc(1, total);
    prof_entry *sorted = malloc(sizeof *sorted * (db->n ? db->n : 1));
    if (!b || !sorted) {
        free(b);
        free(sorted);
        return IR_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < db->cap; i++)
        if (db->slots[i].used) sorted[k++] = db->slots[i];
    qsort(sorted, k, sizeof *sorted, cmp_entry);
    memcpy(b, PROF_DB_MAGIC, 8);
    put_le32(b + 8, PROF_DB_VERSION);
    put_le32(b + 12, PROF_DB_ENTRY_BYTES);
    put_le64(b + 16, (uint64_t)k);
    for (size_t i = 0; i < k; i++) {
        unsigned char *p = b + PROF_DB_HEADER_BYTES + i * PROF_DB_ENTRY_BYTES;
        put_le64(p, sorted[i].device);
        put_le64(p + 8, sorted[i].sig);
        put_le64(p + 16, double_bits(sorted[i].seconds));
        put_le32(p + 24, sorted[i].runs);
    }
    put_le64(b + total - 8, ir_hash_bytes(b, total - 8, PROF_DB_SEED));
    free(sorted);
    *out = b;
    *len = total;
    return IR_OK;
}

/* ---------------------------------------------------------------- files */

/* Reads the whole file. 0, ENOENT, or another errno value; EFBIG for an absurd size. */
static int read_file(const char *path, unsigned char **buf, size_t *len) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    int err = 0;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        err = errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        err = EISDIR;
        goto out;
    }
    if ((size_t)st.st_size > MAX_DB_BYTES) {
        err = EFBIG;
        goto out;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    unsigned char *b = malloc(cap);
    if (!b) {
        err = ENOMEM;
        goto out;
    }
    /* Read to EOF rather than trusting st_size: the file may change under us (it is replaced
     * by rename, never rewritten in place, so what we read is one version). */
    for (;;) {
        if (n == cap) {
            if (cap > MAX_DB_BYTES) {
                free(b);
                err = EFBIG;
                goto out;
            }
            unsigned char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                err = ENOMEM;
                goto out;
            }
            b = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            err = errno;
            free(b);
            goto out;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    *buf = b;
    *len = n;
out:
    close(fd);
    return err;
}

/* Moves a corrupt file to PATH.corrupt-<unix time>[-k] so that it can be inspected. */
static void move_aside(const char *path, const char *why, const prof_warner *w) {
    char dst[4200];
    long long now = (long long)time(NULL);
    snprintf(dst, sizeof dst, "%s.corrupt-%lld", path, now);
    for (int k = 1; k < 100 && access(dst, F_OK) == 0; k++)
        snprintf(dst, sizeof dst, "%s.corrupt-%lld-%d", path, now, k);
    if (rename(path, dst) == 0)
        prof_warnf(w, "profile database %s is corrupt (%s): moved to %s, starting a new one", path,
                   why, dst);
    else
        prof_warnf(w,
                   "profile database %s is corrupt (%s) and cannot be moved aside (%s): it "
                   "will be replaced",
                   path, why, strerror(errno));
}

ir_status prof_db_load(prof_db *db, const char *path, const prof_warner *w) {
    unsigned char *buf;
    size_t len;
    int err = read_file(path, &buf, &len);
    if (err == ENOENT) return IR_OK;
    if (err == ENOMEM) return IR_ERR_NOMEM;
    if (err == EFBIG) {
        move_aside(path, "larger than any database magpie writes", w);
        return IR_OK;
    }
    if (err) {
        prof_warnf(w, "cannot read profile database %s (%s): starting with an empty one", path,
                   strerror(err));
        return IR_OK;
    }
    char why[256];
    prof_db tmp;
    prof_db_init(&tmp);
    ir_status st = prof_db_decode(&tmp, buf, len, why, sizeof why);
    free(buf);
    if (st == IR_ERR_NOMEM) return st;
    if (st != IR_OK) {
        move_aside(path, why, w);
        return IR_OK;
    }
    /* Entries already in db (fresh measurements) win over the file's. */
    for (size_t i = 0; i < tmp.cap && st == IR_OK; i++) {
        const prof_entry *e = &tmp.slots[i];
        if (e->used && !prof_db_find(db, e->device, e->sig)) st = prof_db_put(db, e);
    }
    prof_db_clear(&tmp);
    return st;
}

/* Creates dir and its missing parents (mode 0755 before the umask). 0 or an errno value. */
static int mkdirs(const char *dir) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) return n ? ENAMETOOLONG : 0;
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return errno;
        buf[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

void prof_db_save(prof_db *db, const char *path, const prof_warner *w) {
    if (!db->n_fresh) return;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        int err = mkdirs(dir);
        if (err) {
            prof_warnf(w,
                       "cannot create %s for the profile database (%s): %zu new measurements "
                       "stay in memory",
                       dir, strerror(err), db->n_fresh);
            return;
        }
    }
    prof_db merged;
    prof_db_init(&merged);
    unsigned char *img = NULL;
    size_t len = 0;
    ir_diag d = {{0}};
    ir_status st = prof_db_load(&merged, path, w);
    for (size_t i = 0; i < db->cap && st == IR_OK; i++) {
        prof_entry e = db->slots[i];
        if (!e.used || !e.fresh) continue;
        e.fresh = false;
        st = prof_db_put(&merged, &e);
    }
    if (st == IR_OK) st = prof_db_encode(&merged, &img, &len);
    if (st != IR_OK) {
        prof_warnf(w, "out of memory saving the profile database %s", path);
        goto out;
    }
    st = ir_write_atomic(path, img, len, &d);
    if (st != IR_OK) {
        prof_warnf(w, "cannot write the profile database: %s: %zu new measurements stay in memory",
                   d.msg, db->n_fresh);
        goto out;
    }
    for (size_t i = 0; i < db->cap; i++) db->slots[i].fresh = false;
    db->n_fresh = 0;
out:
    free(img);
    prof_db_clear(&merged);
}

const char *prof_db_default_path(char *buf, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    /* The XDG spec says relative paths are invalid and must be ignored. */
    if (xdg && xdg[0] == '/') {
        snprintf(buf, n, "%s/magpie/profile.db", xdg);
        return buf;
    }
    const char *home = getenv("HOME");
    if (home && home[0]) {
        snprintf(buf, n, "%s/.cache/magpie/profile.db", home);
        return buf;
    }
    return NULL;
}
