/* fuzz_ckpt_reader.c - libFuzzer entry point for the checkpoint reader: arbitrary bytes must
 * give a reader or a status with a message, never a crash, a leak, an abort or a read out of
 * bounds. A checkpoint that opens is taken further: every section goes through the decoders
 * the integrator uses (fingerprint set, varints, strings), and the sections re-encoded by the
 * writer must open again to the same bytes (reader and writer agree on the format).
 *
 * Checksums would stop a mutating fuzzer at the header, so each input is tried three ways:
 * as is; as a file whose header and body checksums are recomputed (reaching zstd and the size
 * checks); and as an uncompressed body, its table and section checksums made right where the
 * table allows, compressed and wrapped in a valid header (reaching the section table parser
 * and the section decoders). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "ckpt.h"
#include "ckpt-impl.h"

static void decode_section(const uint8_t *p, size_t n) {
    ckpt_cur c = ckpt_cur_make(p, n);
    uint64_t *fps = NULL;
    size_t m = 0;
    if (ckpt_get_fpset(&c, &fps, &m)) {
        for (size_t i = 1; i < m; i++)
            if (fps[i] < fps[i - 1]) __builtin_trap(); /* decoded sets are ascending */
    } else if (fps || m) {
        __builtin_trap(); /* a failed decode hands nothing out */
    }
    free(fps);
    c = ckpt_cur_make(p, n);
    while (!c.bad && c.pos < c.len) {
        uint64_t v;
        const char *s;
        size_t sn;
        if (ckpt_get_varint(&c, &v) && (v & 1)) ckpt_get_str(&c, &s, &sn);
        if (c.pos > c.len) __builtin_trap();
    }
}

static void try_bytes(const uint8_t *data, size_t size) {
    ir_diag d;
    ir_status st = IR_OK;
    ckpt_reader *r = ckpt_open_mem(data, size, "fuzz.mpck", &st, &d);
    if (!r) {
        if (st == IR_OK || !d.msg[0]) __builtin_trap();
        return;
    }
    const ckpt_info *h = ckpt_header(r);
    ckpt_meta m = {.model_path = h->model_path,
                   .model_hash = h->model_hash,
                   .options_hash = h->options_hash,
                   .zstd_level = 1};
    ckpt_writer *w = ckpt_writer_init(&m, &st, &d);
    if (!w) __builtin_trap();
    for (uint32_t i = 0; i < h->n_sections; i++) {
        uint32_t tag;
        const uint8_t *p;
        size_t n;
        ckpt_section_at(r, i, &tag, &p, &n);
        decode_section(p, n);
        if (ckpt_writer_section(w, tag, p, n, &d) != IR_OK) __builtin_trap();
    }
    uint8_t *again = NULL;
    size_t again_n = 0;
    if (ckpt_writer_encode(w, &again, &again_n, &d) != IR_OK) __builtin_trap();
    ckpt_reader *r2 = ckpt_open_mem(again, again_n, "re-encoded", &st, &d);
    if (!r2 || ckpt_header(r2)->n_sections != h->n_sections) __builtin_trap();
    for (uint32_t i = 0; i < h->n_sections; i++) {
        uint32_t t1, t2;
        const uint8_t *p1, *p2;
        size_t n1, n2;
        ckpt_section_at(r, i, &t1, &p1, &n1);
        ckpt_section_at(r2, i, &t2, &p2, &n2);
        if (t1 != t2 || n1 != n2 || (n1 && memcmp(p1, p2, n1) != 0)) __builtin_trap();
    }
    ckpt_close(r2);
    free(again);
    ckpt_writer_free(w);
    ckpt_close(r);
}

/* The input as a file with its body and header checksums made right. */
static void try_resealed(const uint8_t *data, size_t size) {
    if (size < CKPT_HEADER_FIXED) return;
    size_t hlen = CKPT_HEADER_FIXED + ckpt_ld16(data + CKPT_OFF_PATH_LEN);
    if (size < hlen) return;
    uint8_t *f = malloc(size);
    if (!f) return;
    memcpy(f, data, size);
    uint8_t *t = f + hlen - CKPT_HEADER_FIXED + CKPT_OFF_PATH;
    ckpt_st64(t + CKPT_TAIL_BODYSUM, ckpt_xxh64(f + hlen, size - hlen, 0));
    ckpt_st64(f + hlen - 8, ckpt_xxh64(f, hlen - 8, 0));
    try_bytes(f, size);
    free(f);
}

/* The input as an uncompressed body: table and section checksums fixed, then framed. */
static void try_as_body(const uint8_t *data, size_t size) {
    uint8_t *raw = malloc(size ? size : 1);
    if (!raw) return;
    if (size) memcpy(raw, data, size);
    if (size >= 4) {
        uint32_t n = ckpt_ld32(raw);
        uint64_t tb = CKPT_TABLE_BYTES(n);
        if (n <= CKPT_MAX_SECTIONS && tb <= size) {
            uint64_t off = tb;
            for (uint32_t i = 0; i < n; i++) {
                uint8_t *e = raw + 4 + CKPT_ENTRY_BYTES * i;
                uint64_t len = ckpt_ld64(e + 4);
                if (len > size - off) break;
                ckpt_st64(e + 12, ckpt_xxh64(raw + off, (size_t)len, 0));
                off += len;
            }
            ckpt_st64(raw + tb - 8, ckpt_xxh64(raw, (size_t)tb - 8, 0));
        }
    }
    size_t cap = ZSTD_compressBound(size), hlen = CKPT_HEADER_FIXED;
    uint8_t *f = malloc(hlen + cap);
    size_t z = f ? ZSTD_compress(f + hlen, cap, raw, size, 1) : 0;
    if (f && !ZSTD_isError(z)) {
        memset(f, 0, hlen);
        memcpy(f, CKPT_MAGIC, 8);
        ckpt_st32(f + 8, CKPT_VERSION);
        uint8_t *t = f + CKPT_OFF_PATH;
        ckpt_st64(t + CKPT_TAIL_RAW, size);
        ckpt_st64(t + CKPT_TAIL_ZSIZE, z);
        ckpt_st64(t + CKPT_TAIL_BODYSUM, ckpt_xxh64(f + hlen, z, 0));
        ckpt_st64(t + CKPT_TAIL_CHECKSUM, ckpt_xxh64(f, hlen - 8, 0));
        try_bytes(f, hlen + z);
    }
    free(f);
    free(raw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try_bytes(data, size);
    try_resealed(data, size);
    try_as_body(data, size);
    return 0;
}
