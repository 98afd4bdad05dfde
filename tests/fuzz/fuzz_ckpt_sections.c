/* fuzz_ckpt_sections.c - libFuzzer entry point for the section decoders of a search checkpoint
 * (checkpoints/ckpt-search.h): ckpt_get_snapshot, ckpt_get_args and ckpt_get_profile must give a
 * result or IR_ERR_PARSE with a message, never a crash, a leak, an abort or a read out of bounds,
 * and must hand nothing out when they fail.
 *
 * A mutated checkpoint file would stop at its checksums, so the input is not a file: it is a list
 * of sections, each a u8 tag selector (an index into the nine tags below, modulo 9), a u16
 * little-endian length and that many bytes (fewer when the input ends first). A tag seen twice
 * keeps its first section. The sections are put into a valid container (ckpt_writer_encode, zstd
 * level 1) that is opened with ckpt_open_mem, so every input reaches the decoders.
 *
 * What decodes must also survive a round trip: re-encoded by the writers and decoded again, it
 * re-encodes to the same bytes (inputs may use overlong varints, so the first encoding is
 * compared with the second, not with the input). The seed corpus (corpus_ckpt_sections/) holds
 * valid sections; test_ckpt_search regenerates it (MAGPIE_CKPT_SECTIONS_CORPUS=DIR). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt-search.h"

static const uint32_t tags[9] = {CKPT_TAG_OPTIONS, CKPT_TAG_GRAPH, CKPT_TAG_FRONTIER,
                                 CKPT_TAG_FPSET,   CKPT_TAG_BEST,  CKPT_TAG_PROFILE,
                                 CKPT_TAG_RNG,     CKPT_TAG_TIME,  CKPT_TAG_COUNTERS};

static ckpt_writer *new_writer(void) {
    ckpt_meta m = {.model_path = "fuzz.onnx", .zstd_level = 1};
    ir_status st;
    ir_diag d;
    ckpt_writer *w = ckpt_writer_init(&m, &st, &d);
    if (!w) __builtin_trap();
    return w;
}

static ckpt_reader *reopen(const ckpt_writer *w) {
    uint8_t *buf = NULL;
    size_t n = 0;
    ir_status st;
    ir_diag d;
    if (ckpt_writer_encode(w, &buf, &n, &d) != IR_OK) __builtin_trap();
    ckpt_reader *r = ckpt_open_mem(buf, n, "fuzz.mpck", &st, &d);
    free(buf);
    if (!r) __builtin_trap(); /* the writer's own container always opens */
    return r;
}

/* The sections of r, in tag order of the table, concatenated: what a writer made of them. */
static uint8_t *section_bytes(const ckpt_reader *r, size_t *n) {
    ckpt_buf b = {0};
    for (int i = 0; i < 9; i++) {
        const uint8_t *p;
        size_t len;
        if (ckpt_section(r, tags[i], &p, &len)) {
            ckpt_put_u32(&b, tags[i]);
            ckpt_put_varint(&b, len);
            ckpt_put_bytes(&b, p, len);
        }
    }
    if (b.oom) __builtin_trap();
    *n = b.len;
    return b.data;
}

/* Whatever decoded from r, written again by the writers. */
static ckpt_reader *reencode(const xs_snapshot *s, int argc, char **argv, const prof_snapshot *p) {
    ckpt_writer *w = new_writer();
    ir_diag d;
    if (s && ckpt_put_snapshot(w, s, &d) != IR_OK) __builtin_trap();
    if (argv && ckpt_put_args(w, argc, (const char *const *)argv, &d) != IR_OK) __builtin_trap();
    if (p && ckpt_put_profile(w, p, &d) != IR_OK) __builtin_trap();
    ckpt_reader *r = reopen(w);
    ckpt_writer_free(w);
    return r;
}

/* Decodes r; the results that succeeded are handed out (zeroed/NULL otherwise). */
static void decode(const ckpt_reader *r, xs_snapshot *s, bool *has_s, int *argc, char ***argv,
                   prof_snapshot *p, bool *has_p) {
    ir_diag d;
    ir_status st = ckpt_get_snapshot(r, s, &d);
    *has_s = st == IR_OK;
    if (st != IR_OK && (!d.msg[0] || s->states || s->frontier || s->fps || s->worker_seq ||
                        s->worker_rng || s->n_states))
        __builtin_trap();
    st = ckpt_get_args(r, argc, argv, &d);
    if (st != IR_OK && (!d.msg[0] || *argv || *argc)) __builtin_trap();
    if (st == IR_OK && (*argv == NULL || (*argv)[*argc] != NULL)) __builtin_trap();
    st = ckpt_get_profile(r, p, &d);
    *has_p = st == IR_OK;
    if (st != IR_OK && (!d.msg[0] || p->entries || p->n_entries)) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ckpt_writer *w = new_writer();
    bool seen[9] = {false};
    ir_diag d;
    for (size_t pos = 0; pos + 3 <= size;) {
        unsigned k = data[pos] % 9u;
        size_t len = (size_t)data[pos + 1] | (size_t)data[pos + 2] << 8;
        pos += 3;
        if (len > size - pos) len = size - pos;
        if (!seen[k] && ckpt_writer_section(w, tags[k], data + pos, len, &d) != IR_OK)
            __builtin_trap();
        seen[k] = true;
        pos += len;
    }
    ckpt_reader *r = reopen(w);
    ckpt_writer_free(w);

    xs_snapshot s;
    prof_snapshot p;
    int argc;
    char **argv;
    bool has_s, has_p;
    decode(r, &s, &has_s, &argc, &argv, &p, &has_p);
    ckpt_close(r);

    if (has_s || argv || has_p) {
        /* round trip: encode, decode, encode again: the two encodings agree */
        ckpt_reader *r1 = reencode(has_s ? &s : NULL, argc, argv, has_p ? &p : NULL);
        xs_snapshot s1;
        prof_snapshot p1;
        int argc1;
        char **argv1;
        bool has_s1, has_p1;
        decode(r1, &s1, &has_s1, &argc1, &argv1, &p1, &has_p1);
        if (has_s1 != has_s || has_p1 != has_p || !argv1 != !argv) __builtin_trap();
        ckpt_reader *r2 = reencode(has_s1 ? &s1 : NULL, argc1, argv1, has_p1 ? &p1 : NULL);
        size_t n1, n2;
        uint8_t *b1 = section_bytes(r1, &n1), *b2 = section_bytes(r2, &n2);
        if (n1 != n2 || (n1 && memcmp(b1, b2, n1) != 0)) __builtin_trap();
        free(b1);
        free(b2);
        ckpt_close(r1);
        ckpt_close(r2);
        xs_snapshot_free(&s1);
        ckpt_args_free(argc1, argv1);
        prof_snapshot_free(&p1);
    }
    xs_snapshot_free(&s);
    ckpt_args_free(argc, argv);
    prof_snapshot_free(&p);
    return 0;
}
