/* ckpt-write.c - the checkpoint writer: collects sections (each hashed once, when added), then
 * encodes header + one zstd frame (format in ckpt.h) and hands the bytes to ckpt_write_atomic.
 *
 * The body is streamed into zstd piece by piece (table, then each section) so the uncompressed
 * body is never assembled in one buffer: peak memory is the sections plus the compressed file.
 * The frame's content size is pledged up front, so the frame header declares R, which the
 * reader checks against the file header before it allocates. */
#include "ckpt-impl.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

typedef struct ckpt_wsec {
    uint32_t tag;
    uint8_t *data; /* owned */
    size_t len;
    uint64_t hash; /* XXH64 of data */
} ckpt_wsec;

struct ckpt_writer {
    char *path; /* model path */
    size_t path_len;
    uint64_t model_hash, options_hash;
    int level;
    uint32_t n;
    ckpt_wsec sec[CKPT_MAX_SECTIONS];
};

ckpt_writer *ckpt_writer_init(const ckpt_meta *m, ir_status *st, ir_diag *d) {
    ir_status dummy;
    if (!st) st = &dummy;
    const char *path = m->model_path ? m->model_path : "";
    size_t len = strlen(path);
    if (len > CKPT_MAX_PATH) {
        *st = ir_diag_set(d, IR_ERR_INVALID,
                          "checkpoint: model path of %zu bytes is longer than the %u the format "
                          "holds",
                          len, CKPT_MAX_PATH);
        return NULL;
    }
    ckpt_writer *w = calloc(1, sizeof *w);
    char *copy = malloc(len + 1);
    if (!w || !copy) {
        free(w);
        free(copy);
        *st = ir_diag_set(d, IR_ERR_NOMEM, "checkpoint: out of memory");
        return NULL;
    }
    memcpy(copy, path, len + 1);
    w->path = copy;
    w->path_len = len;
    w->model_hash = m->model_hash;
    w->options_hash = m->options_hash;
    w->level = m->zstd_level ? m->zstd_level : CKPT_ZSTD_LEVEL_DEFAULT;
    *st = IR_OK;
    return w;
}

void ckpt_writer_free(ckpt_writer *w) {
    if (!w) return;
    for (uint32_t i = 0; i < w->n; i++) free(w->sec[i].data);
    free(w->path);
    free(w);
}

/* Takes ownership of data (malloc'd, may be NULL when len is 0). */
static void add(ckpt_writer *w, uint32_t tag, uint8_t *data, size_t len) {
    IR_ASSERT(w->n < CKPT_MAX_SECTIONS);
    for (uint32_t i = 0; i < w->n; i++) IR_ASSERT(w->sec[i].tag != tag);
    w->sec[w->n++] = (ckpt_wsec){tag, data, len, ckpt_xxh64(data, len, 0)};
}

ir_status ckpt_writer_section(ckpt_writer *w, uint32_t tag, const void *bytes, size_t len,
                              ir_diag *d) {
    uint8_t *copy = NULL;
    if (len) {
        copy = malloc(len);
        if (!copy) {
            char t[5];
            return ir_diag_set(d, IR_ERR_NOMEM, "checkpoint: out of memory for section '%s'",
                               ckpt_tag_str(tag, t));
        }
        memcpy(copy, bytes, len);
    }
    add(w, tag, copy, len);
    return IR_OK;
}

ir_status ckpt_writer_section_buf(ckpt_writer *w, uint32_t tag, ckpt_buf *b, ir_diag *d) {
    if (b->oom) {
        char t[5];
        ckpt_buf_free(b);
        return ir_diag_set(d, IR_ERR_NOMEM, "checkpoint: out of memory encoding section '%s'",
                           ckpt_tag_str(tag, t));
    }
    add(w, tag, b->data, b->len);
    memset(b, 0, sizeof *b);
    return IR_OK;
}

/* Feeds in[0..n) to the stream (mode ZSTD_e_end with n = 0 to finish). The output buffer is
 * ZSTD_compressBound of everything, so zstd never runs out of room; an error here is zstd's. */
static size_t feed(ZSTD_CCtx *z, ZSTD_outBuffer *ob, const void *p, size_t n, ZSTD_EndDirective e) {
    ZSTD_inBuffer ib = {p, n, 0};
    for (;;) {
        size_t r = ZSTD_compressStream2(z, ob, &ib, e);
        if (ZSTD_isError(r)) return r;
        if (e == ZSTD_e_end ? r == 0 : ib.pos == ib.size) return 0;
        if (ob->pos == ob->size) return (size_t)-1; /* cannot happen with compressBound room */
    }
}

ir_status ckpt_writer_encode(const ckpt_writer *w, uint8_t **out, size_t *out_n, ir_diag *d) {
    *out = NULL;
    *out_n = 0;
    /* the section table */
    uint8_t table[CKPT_TABLE_BYTES(CKPT_MAX_SECTIONS)];
    size_t tb = (size_t)CKPT_TABLE_BYTES(w->n);
    uint64_t raw = tb;
    ckpt_st32(table, w->n);
    for (uint32_t i = 0; i < w->n; i++) {
        uint8_t *e = table + 4 + CKPT_ENTRY_BYTES * i;
        ckpt_st32(e, w->sec[i].tag);
        ckpt_st64(e + 4, w->sec[i].len);
        ckpt_st64(e + 12, w->sec[i].hash);
        raw += w->sec[i].len;
    }
    ckpt_st64(table + tb - 8, ckpt_xxh64(table, tb - 8, 0));

    size_t hlen = CKPT_HEADER_FIXED + w->path_len;
    size_t zcap = ZSTD_compressBound((size_t)raw);
    uint8_t *buf = malloc(hlen + zcap);
    ZSTD_CCtx *z = ZSTD_createCCtx();
    ir_status st = IR_OK;
    if (!buf || !z || ZSTD_isError(zcap)) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "checkpoint: out of memory for %llu body bytes",
                         (unsigned long long)raw);
        goto out;
    }
    size_t r = ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, w->level);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(z, ZSTD_c_contentSizeFlag, 1);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setPledgedSrcSize(z, raw);
    ZSTD_outBuffer ob = {buf + hlen, zcap, 0};
    if (!ZSTD_isError(r)) r = feed(z, &ob, table, tb, ZSTD_e_continue);
    for (uint32_t i = 0; i < w->n && !ZSTD_isError(r) && r == 0; i++)
        r = feed(z, &ob, w->sec[i].data, w->sec[i].len, ZSTD_e_continue);
    if (!ZSTD_isError(r) && r == 0) r = feed(z, &ob, NULL, 0, ZSTD_e_end);
    if (ZSTD_isError(r) || r != 0) {
        st = ir_diag_set(d, IR_ERR_INTERNAL, "checkpoint: zstd compression failed: %s",
                         ZSTD_isError(r) ? ZSTD_getErrorName(r) : "output buffer too small");
        goto out;
    }

    uint8_t *h = buf;
    memcpy(h, CKPT_MAGIC, 8);
    ckpt_st32(h + 8, CKPT_VERSION);
    ckpt_st32(h + 12, 0); /* flags */
    ckpt_st64(h + 16, w->model_hash);
    ckpt_st16(h + CKPT_OFF_PATH_LEN, (uint16_t)w->path_len);
    memcpy(h + CKPT_OFF_PATH, w->path, w->path_len);
    uint8_t *t = h + CKPT_OFF_PATH + w->path_len;
    ckpt_st64(t + CKPT_TAIL_OPTIONS, w->options_hash);
    ckpt_st64(t + CKPT_TAIL_RAW, raw);
    ckpt_st64(t + CKPT_TAIL_ZSIZE, ob.pos);
    ckpt_st64(t + CKPT_TAIL_BODYSUM, ckpt_xxh64(buf + hlen, ob.pos, 0));
    ckpt_st64(t + CKPT_TAIL_CHECKSUM, ckpt_xxh64(h, (size_t)(t + CKPT_TAIL_CHECKSUM - h), 0));
    *out = buf;
    *out_n = hlen + ob.pos;
    buf = NULL;
out:
    ZSTD_freeCCtx(z);
    free(buf);
    return st;
}

ir_status ckpt_writer_commit(const ckpt_writer *w, const char *path, ir_diag *d) {
    uint8_t *bytes;
    size_t n;
    ir_status st = ckpt_writer_encode(w, &bytes, &n, d);
    if (st != IR_OK) return st;
    st = ckpt_write_atomic(path, bytes, n, d);
    free(bytes);
    return st;
}
