/* ckpt-read.c - the strict checkpoint reader: validates every field and checksum of the format
 * in ckpt.h, in file order, before it hands out anything.
 *
 * Order of checks, so that each corruption gets the most telling message: length of the fixed
 * header, magic, version, flags (a newer file is "unsupported", not "corrupt"), path length,
 * header checksum (before trusting R and Z), file size against 66+L+Z, the body checksum, R
 * against what Z bytes of zstd could hold (before allocating R), zstd's own frame, the section
 * table and its checksum, then every section's checksum. Sizes read from the file are 64-bit and
 * compared by subtraction from known-good sizes, never added, so no forged value can overflow a
 * bound.
 *
 * The reader holds the decompressed body; sections point into it. It never writes its input. */
#include "ckpt-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

typedef struct ckpt_rsec {
    uint32_t tag;
    size_t off, len; /* within body */
} ckpt_rsec;

struct ckpt_reader {
    ckpt_info info;
    char *path;
    uint8_t *body; /* R bytes */
    ckpt_rsec *sec;
};

void ckpt_close(ckpt_reader *r) {
    if (!r) return;
    free(r->path);
    free(r->body);
    free(r->sec);
    free(r);
}

const ckpt_info *ckpt_header(const ckpt_reader *r) {
    return &r->info;
}

bool ckpt_section(const ckpt_reader *r, uint32_t tag, const uint8_t **p, size_t *len) {
    for (uint32_t i = 0; i < r->info.n_sections; i++)
        if (r->sec[i].tag == tag) {
            *p = r->body + r->sec[i].off;
            *len = r->sec[i].len;
            return true;
        }
    *p = NULL;
    *len = 0;
    return false;
}

void ckpt_section_at(const ckpt_reader *r, uint32_t i, uint32_t *tag, const uint8_t **p,
                     size_t *len) {
    IR_ASSERT(i < r->info.n_sections);
    *tag = r->sec[i].tag;
    *p = r->body + r->sec[i].off;
    *len = r->sec[i].len;
}

#define FAIL(code, ...)                                                                            \
    do {                                                                                           \
        st = ir_diag_set(d, code, __VA_ARGS__);                                                    \
        goto fail;                                                                                 \
    } while (0)

/* Validates the decompressed body (R bytes at r->body) and fills r->sec. */
static ir_status parse_body(ckpt_reader *r, ir_diag *d) {
    ir_status st = IR_OK;
    const uint8_t *b = r->body;
    uint64_t raw = r->info.body_raw_size;
    char t[5];
    if (raw < CKPT_TABLE_BYTES(0))
        FAIL(IR_ERR_PARSE, "section table malformed: body of %llu bytes cannot hold it",
             (unsigned long long)raw);
    uint32_t n = ckpt_ld32(b);
    if (n > CKPT_MAX_SECTIONS)
        FAIL(IR_ERR_PARSE, "section table malformed: %u sections (at most %u)", n,
             CKPT_MAX_SECTIONS);
    uint64_t tb = CKPT_TABLE_BYTES(n);
    if (raw < tb)
        FAIL(IR_ERR_PARSE, "section table malformed: %u entries need %llu bytes, body has %llu", n,
             (unsigned long long)tb, (unsigned long long)raw);
    if (ckpt_xxh64(b, (size_t)tb - 8, 0) != ckpt_ld64(b + tb - 8))
        FAIL(IR_ERR_PARSE, "section table checksum mismatch (body byte %llu)",
             (unsigned long long)(tb - 8));
    r->sec = calloc(n ? n : 1, sizeof *r->sec);
    if (!r->sec) FAIL(IR_ERR_NOMEM, "out of memory");
    uint64_t off = tb, left = raw - tb;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = b + 4 + CKPT_ENTRY_BYTES * i;
        uint32_t tag = ckpt_ld32(e);
        uint64_t len = ckpt_ld64(e + 4);
        for (uint32_t j = 0; j < i; j++)
            if (r->sec[j].tag == tag)
                FAIL(IR_ERR_PARSE, "section table malformed: section '%s' appears twice",
                     ckpt_tag_str(tag, t));
        if (len > left)
            FAIL(IR_ERR_PARSE,
                 "section table malformed: section '%s' of %llu bytes overruns the body (%llu "
                 "bytes left)",
                 ckpt_tag_str(tag, t), (unsigned long long)len, (unsigned long long)left);
        if (ckpt_xxh64(b + off, (size_t)len, 0) != ckpt_ld64(e + 12))
            FAIL(IR_ERR_PARSE, "section '%s' checksum mismatch (%llu bytes at body byte %llu)",
                 ckpt_tag_str(tag, t), (unsigned long long)len, (unsigned long long)off);
        r->sec[i] = (ckpt_rsec){tag, (size_t)off, (size_t)len};
        off += len;
        left -= len;
    }
    if (left != 0)
        FAIL(IR_ERR_PARSE, "section table malformed: %llu body bytes belong to no section",
             (unsigned long long)left);
    r->info.n_sections = n;
    return IR_OK;
fail:
    return st;
}

/* Validates data[0..n) and builds the reader (or NULL, message without the file name). */
static ckpt_reader *open_bytes(const uint8_t *data, size_t n, ir_status *st_out, ir_diag *d) {
    ir_status st = IR_OK;
    ckpt_reader *r = calloc(1, sizeof *r);
    ZSTD_DCtx *z = NULL;
    if (!r) FAIL(IR_ERR_NOMEM, "out of memory");
    r->info.file_size = n;
    /* the magic first, over what there is: a short file of something else is not a
     * truncated checkpoint */
    if (n && memcmp(data, CKPT_MAGIC, n < 8 ? n : 8) != 0)
        FAIL(IR_ERR_PARSE, "not a magpie checkpoint: bad magic at byte 0 (expected \"%s\")",
             CKPT_MAGIC);
    if (n < CKPT_HEADER_FIXED)
        FAIL(IR_ERR_PARSE, "truncated at byte %zu: the header needs at least %u bytes", n,
             CKPT_HEADER_FIXED);
    r->info.version = ckpt_ld32(data + 8);
    if (r->info.version != CKPT_VERSION)
        FAIL(IR_ERR_UNSUPPORTED, "unsupported checkpoint version %u (this build reads version %u)",
             r->info.version, CKPT_VERSION);
    r->info.flags = ckpt_ld32(data + 12);
    if (r->info.flags != 0)
        FAIL(IR_ERR_UNSUPPORTED,
             "unsupported checkpoint flags 0x%x at byte 12 (version %u has none)", r->info.flags,
             CKPT_VERSION);
    size_t plen = ckpt_ld16(data + CKPT_OFF_PATH_LEN);
    size_t hlen = CKPT_HEADER_FIXED + plen;
    if (n < hlen)
        FAIL(IR_ERR_PARSE,
             "truncated at byte %zu: the header with its %zu-byte model path needs %zu bytes", n,
             plen, hlen);
    const uint8_t *tail = data + CKPT_OFF_PATH + plen;
    uint64_t sum = ckpt_ld64(tail + CKPT_TAIL_CHECKSUM);
    if (ckpt_xxh64(data, hlen - 8, 0) != sum)
        FAIL(IR_ERR_PARSE, "header checksum mismatch (checksum at byte %zu)", hlen - 8);
    r->info.model_hash = ckpt_ld64(data + 16);
    r->info.options_hash = ckpt_ld64(tail + CKPT_TAIL_OPTIONS);
    r->info.body_raw_size = ckpt_ld64(tail + CKPT_TAIL_RAW);
    r->info.body_zsize = ckpt_ld64(tail + CKPT_TAIL_ZSIZE);
    uint64_t zsize = r->info.body_zsize, raw = r->info.body_raw_size;
    if (zsize > n - hlen)
        FAIL(IR_ERR_PARSE,
             "truncated at byte %zu: the header declares %llu body bytes from byte %zu, the file "
             "ends %llu bytes short",
             n, (unsigned long long)zsize, hlen, (unsigned long long)(zsize - (n - hlen)));
    if (zsize < n - hlen)
        FAIL(IR_ERR_PARSE,
             "body size mismatch: %llu bytes after the declared end of the body at byte %llu",
             (unsigned long long)(n - hlen - zsize), (unsigned long long)(hlen + zsize));
    if (ckpt_xxh64(data + hlen, (size_t)zsize, 0) != ckpt_ld64(tail + CKPT_TAIL_BODYSUM))
        FAIL(IR_ERR_PARSE, "body checksum mismatch (%llu compressed bytes from byte %zu)",
             (unsigned long long)zsize, hlen);
    r->path = malloc(plen + 1);
    if (!r->path) FAIL(IR_ERR_NOMEM, "out of memory");
    memcpy(r->path, data + CKPT_OFF_PATH, plen);
    r->path[plen] = 0;
    r->info.model_path = r->path;

    const uint8_t *zb = data + hlen;
    unsigned long long fcs = ZSTD_getFrameContentSize(zb, (size_t)zsize);
    if (fcs == ZSTD_CONTENTSIZE_ERROR)
        FAIL(IR_ERR_PARSE, "zstd error: no valid zstd frame header at byte %zu", hlen);
    if (fcs == ZSTD_CONTENTSIZE_UNKNOWN || fcs != raw)
        FAIL(IR_ERR_PARSE,
             "body size mismatch: the header says %llu uncompressed bytes, the zstd frame %s",
             (unsigned long long)raw,
             fcs == ZSTD_CONTENTSIZE_UNKNOWN ? "does not say" : "says otherwise");
    if (raw / CKPT_ZSTD_MAX_RATIO > zsize || raw > (uint64_t)SIZE_MAX / 2)
        FAIL(IR_ERR_PARSE, "body size mismatch: %llu compressed bytes cannot hold %llu",
             (unsigned long long)zsize, (unsigned long long)raw);
    size_t fsz = ZSTD_findFrameCompressedSize(zb, (size_t)zsize);
    if (ZSTD_isError(fsz))
        FAIL(IR_ERR_PARSE, "zstd error in the body at byte %zu: %s", hlen, ZSTD_getErrorName(fsz));
    if (fsz != zsize)
        FAIL(IR_ERR_PARSE, "body size mismatch: the zstd frame ends at byte %zu, the body at %llu",
             hlen + fsz, (unsigned long long)(hlen + zsize));
    r->body = malloc(raw ? (size_t)raw : 1);
    z = ZSTD_createDCtx();
    if (!r->body || !z)
        FAIL(IR_ERR_NOMEM, "out of memory for a body of %llu bytes", (unsigned long long)raw);
    size_t got = ZSTD_decompressDCtx(z, r->body, (size_t)raw, zb, (size_t)zsize);
    if (ZSTD_isError(got))
        FAIL(IR_ERR_PARSE, "zstd error in the body at byte %zu: %s", hlen, ZSTD_getErrorName(got));
    if (got != raw)
        FAIL(IR_ERR_PARSE, "body size mismatch: %zu bytes decompressed, %llu declared", got,
             (unsigned long long)raw);
    ZSTD_freeDCtx(z);
    z = NULL;
    st = parse_body(r, d);
    if (st != IR_OK) goto fail;
    if (st_out) *st_out = IR_OK;
    return r;
fail:
    ZSTD_freeDCtx(z);
    ckpt_close(r);
    if (st_out) *st_out = st;
    return NULL;
}

ckpt_reader *ckpt_open_mem(const void *data, size_t n, const char *name, ir_status *st,
                           ir_diag *d) {
    ckpt_reader *r = open_bytes(data, n, st, d);
    if (!r && d && name) ir_diag_prefix(d, name);
    return r;
}

ckpt_reader *ckpt_open(const char *path, ir_status *st_out, ir_diag *d) {
    ir_status st = IR_OK;
    uint8_t *buf = NULL;
    ckpt_reader *r = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        st = ir_diag_set(d, IR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = ir_diag_set(d, IR_ERR_IO, "%s: not a regular file", path);
        goto out;
    }
    size_t n = (size_t)sb.st_size, done = 0;
    /* a large file of something else (a model given by mistake) is refused on its first bytes,
     * before it is read whole */
    uint8_t magic[8];
    ssize_t got8 = n >= 8 ? pread(fd, magic, 8, 0) : 0;
    if (got8 == 8 && memcmp(magic, CKPT_MAGIC, 8) != 0) {
        r = ckpt_open_mem(magic, 8, path, &st, d);
        goto out;
    }
    buf = malloc(n ? n : 1);
    if (!buf) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory for %zu bytes", path, n);
        goto out;
    }
    while (done < n) {
        ssize_t got = read(fd, buf + done, n - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            st = ir_diag_set(d, IR_ERR_IO, "%s: read error at byte %zu: %s", path, done,
                             strerror(errno));
            goto out;
        }
        if (got == 0) break; /* shrank under us: validation reports the truncation */
        done += (size_t)got;
    }
    r = ckpt_open_mem(buf, done, path, &st, d);
out:
    if (fd >= 0) close(fd);
    free(buf);
    if (st_out) *st_out = st;
    return r;
}

ir_status ckpt_check_model(const ckpt_reader *r, const char *model_path, uint64_t model_hash,
                           ir_diag *d) {
    if (r->info.model_hash == model_hash) return IR_OK;
    return ir_diag_set(d, IR_ERR_INVALID,
                       "checkpoint was made from a different model file: '%s' (content hash "
                       "%016llx), not '%s' (content hash %016llx)",
                       r->info.model_path, (unsigned long long)r->info.model_hash,
                       model_path ? model_path : "?", (unsigned long long)model_hash);
}

ir_status ckpt_check_options(const ckpt_reader *r, uint64_t options_hash, ir_diag *d) {
    if (r->info.options_hash == options_hash) return IR_OK;
    return ir_diag_set(d, IR_ERR_INVALID,
                       "checkpoint was made with different search options (options hash "
                       "%016llx, now %016llx)",
                       (unsigned long long)r->info.options_hash, (unsigned long long)options_hash);
}
