/* ir-npy.c - NumPy .npy files: read versions 1.0-3.0, write version 1.0 as numpy does.
 *
 * Reading accepts little-endian (or byte-order-free) C-order arrays of the dtypes magpie
 * knows; big-endian data and Fortran order are IR_ERR_UNSUPPORTED. The header is a Python
 * dict literal; it is parsed as one (keys in any order, any spacing, trailing commas).
 * Writing reproduces numpy's bytes (sorted keys, the spare "growth" spaces numpy >= 1.24
 * adds after the shape, padding to 64 bytes) so files diff cleanly against numpy's. bfloat16
 * has no numpy dtype: it is written as ml_dtypes' np.save writes its bfloat16 arrays, the raw
 * 2-byte patterns with descr '<V2' (np.load(f).view(ml_dtypes.bfloat16) gives the values), and
 * '<V2' reads back as bfloat16.
 * Writes are atomic (ir_write_atomic_with): PATH.tmp.<pid>, fsync, rename; on failure no file
 * is left.
 * Every message starts with the file path. */
#include "ir-impl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_ALIGN 64
#define NPY_GROWTH_AXIS_MAX_DIGITS 21
/* numpy refuses headers above 10000 bytes by default; allow more but bound the allocation. */
#define NPY_MAX_HEADER (1u << 20)

/* ---------------------------------------------------------------- dtype strings */

/* Maps a descr's kind and size ("f4", "i8", "b1", ...) to a dtype. */
static ir_dtype descr_dtype(char kind, int size) {
    switch (kind) {
    case 'f': return size == 4 ? IR_F32 : size == 8 ? IR_F64 : size == 2 ? IR_F16 : IR_DTYPE_NONE;
    case 'i':
        return size == 8   ? IR_I64
               : size == 4 ? IR_I32
               : size == 2 ? IR_I16
               : size == 1 ? IR_I8
                           : IR_DTYPE_NONE;
    case 'u':
        return size == 1   ? IR_U8
               : size == 2 ? IR_U16
               : size == 4 ? IR_U32
               : size == 8 ? IR_U64
                           : IR_DTYPE_NONE;
    case 'V': return size == 2 ? IR_BF16 : IR_DTYPE_NONE; /* ml_dtypes' bfloat16 */
    case 'b': return size == 1 ? IR_BOOL : IR_DTYPE_NONE;
    default: return IR_DTYPE_NONE;
    }
}

/* The descr numpy writes for dtype t (bf16: ml_dtypes' '<V2'). */
static const char *dtype_descr(ir_dtype t) {
    switch (t) {
    case IR_F32: return "<f4";
    case IR_BF16: return "<V2";
    case IR_I16: return "<i2";
    case IR_U16: return "<u2";
    case IR_U32: return "<u4";
    case IR_U64: return "<u8";
    case IR_F16: return "<f2";
    case IR_F64: return "<f8";
    case IR_I64: return "<i8";
    case IR_I32: return "<i4";
    case IR_I8: return "|i1";
    case IR_U8: return "|u1";
    case IR_BOOL: return "|b1";
    default: return NULL;
    }
}

/* ---------------------------------------------------------------- header dict parser */

typedef struct hdr_parser {
    const char *p, *end;
    const char *path;
    ir_diag *d;
} hdr_parser;

static void skip_ws(hdr_parser *h) {
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
        h->p++;
}

static bool eat(hdr_parser *h, char c) {
    skip_ws(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return true;
    }
    return false;
}

static ir_status hdr_fail(hdr_parser *h, const char *what) {
    return ir_diag_set(h->d, IR_ERR_PARSE, "%s: malformed .npy header: %s", h->path, what);
}

/* A quoted Python string without escapes (numpy never writes any); copied into buf. */
static ir_status parse_str(hdr_parser *h, char *buf, size_t n) {
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return hdr_fail(h, "expected a string");
    char q = *h->p++;
    size_t len = 0;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\') return hdr_fail(h, "escaped characters are not supported");
        if (len + 1 >= n) return hdr_fail(h, "string too long");
        buf[len++] = *h->p++;
    }
    if (h->p >= h->end) return hdr_fail(h, "unterminated string");
    h->p++;
    buf[len] = 0;
    return IR_OK;
}

static bool parse_word(hdr_parser *h, const char *w) {
    skip_ws(h);
    size_t n = strlen(w);
    if ((size_t)(h->end - h->p) >= n && memcmp(h->p, w, n) == 0) {
        h->p += n;
        return true;
    }
    return false;
}

/* "(2, 3)", "(3,)", "()"; Python 2 files may carry an "L" suffix on each integer. */
static ir_status parse_shape(hdr_parser *h, ir_shape *s) {
    if (!eat(h, '(')) return hdr_fail(h, "shape must be a tuple");
    int rank = 0;
    int64_t dims[IR_MAX_RANK];
    for (;;) {
        if (eat(h, ')')) break;
        skip_ws(h);
        if (h->p >= h->end || *h->p < '0' || *h->p > '9')
            return hdr_fail(h, "shape entries must be non-negative integers");
        int64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            if (v > (INT64_MAX - 9) / 10) return hdr_fail(h, "shape entry too large");
            v = v * 10 + (*h->p++ - '0');
        }
        if (h->p < h->end && *h->p == 'L') h->p++;
        if (rank >= IR_MAX_RANK)
            return ir_diag_set(h->d, IR_ERR_UNSUPPORTED,
                               "%s: array rank exceeds magpie's maximum of %d", h->path,
                               IR_MAX_RANK);
        dims[rank++] = v;
        if (eat(h, ')')) break;
        if (!eat(h, ',')) return hdr_fail(h, "expected ',' or ')' in shape");
    }
    *s = ir_shape_make(rank, dims);
    return IR_OK;
}

/* Skips a value of a key we do not know (strings, words, numbers, flat tuples). */
static ir_status skip_value(hdr_parser *h) {
    skip_ws(h);
    if (h->p < h->end && (*h->p == '\'' || *h->p == '"')) {
        char tmp[256];
        return parse_str(h, tmp, sizeof tmp);
    }
    int depth = 0;
    while (h->p < h->end) {
        char c = *h->p;
        if (c == '(' || c == '[') depth++;
        if ((c == ')' || c == ']') && depth-- == 0) break;
        if ((c == ',' || c == '}') && depth == 0) break;
        h->p++;
    }
    return depth == 0 ? IR_OK : hdr_fail(h, "unbalanced brackets");
}

typedef struct npy_header {
    ir_dtype dtype;
    ir_shape shape;
} npy_header;

static ir_status parse_header(const char *path, const char *txt, size_t len, npy_header *out,
                              ir_diag *d) {
    hdr_parser h = {.p = txt, .end = txt + len, .path = path, .d = d};
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    char descr[64] = "";
    ir_status st;
    if (!eat(&h, '{')) return hdr_fail(&h, "expected '{'");
    while (!eat(&h, '}')) {
        char key[64];
        if ((st = parse_str(&h, key, sizeof key)) != IR_OK) return st;
        if (!eat(&h, ':')) return hdr_fail(&h, "expected ':' after a key");
        if (strcmp(key, "descr") == 0) {
            skip_ws(&h);
            if (h.p < h.end && *h.p == '[')
                return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s: structured dtypes are not supported",
                                   path);
            if ((st = parse_str(&h, descr, sizeof descr)) != IR_OK) return st;
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (parse_word(&h, "True"))
                fortran = true;
            else if (parse_word(&h, "False"))
                fortran = false;
            else
                return hdr_fail(&h, "fortran_order must be True or False");
            have_order = true;
        } else if (strcmp(key, "shape") == 0) {
            if ((st = parse_shape(&h, &out->shape)) != IR_OK) return st;
            have_shape = true;
        } else if ((st = skip_value(&h)) != IR_OK) {
            return st;
        }
        if (eat(&h, '}')) break;
        if (!eat(&h, ',')) return hdr_fail(&h, "expected ',' or '}'");
    }
    if (!have_descr || !have_order || !have_shape)
        return hdr_fail(&h, !have_descr   ? "missing key 'descr'"
                            : !have_order ? "missing key 'fortran_order'"
                                          : "missing key 'shape'");
    if (fortran)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                           "%s: Fortran-order arrays are not supported (save with C order)", path);
    /* descr: byte order ('<' little, '|' not applicable, '=' native: little on every host
     * magpie builds for, '>' big), kind letter, item size. */
    const char *p = descr;
    char order = '=';
    if (*p == '<' || *p == '>' || *p == '|' || *p == '=') order = *p++;
    char kind = *p ? *p++ : 0;
    char *endp;
    long size = strtol(p, &endp, 10);
    if (*endp || p == endp) size = -1;
    ir_dtype t = descr_dtype(kind, (int)size);
    if (t == IR_DTYPE_NONE)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s: unsupported dtype '%s'", path, descr);
    if (order == '>' && size > 1)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s: big-endian data ('%s') is not supported",
                           path, descr);
    out->dtype = t;
    return IR_OK;
}

/* ---------------------------------------------------------------- reading */

static uint32_t rd_le(const unsigned char *b, int n) {
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

ir_status ir_npy_read(const char *path, ir_dtype *dtype, ir_shape *shape, ir_blob **blob,
                      ir_diag *d) {
    ir_status st = IR_OK;
    char *hdr = NULL;
    ir_blob *b = NULL;
    *blob = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ir_diag_set(d, IR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));

    unsigned char pre[12];
    size_t got = fread(pre, 1, 8, f);
    if (got < 8 || memcmp(pre, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
        st = ir_diag_set(d, IR_ERR_PARSE, "%s: not a .npy file (bad magic)", path);
        goto out;
    }
    int major = pre[6], minor = pre[7];
    if ((major != 1 && major != 2 && major != 3) || minor != 0) {
        st = ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s: unsupported .npy format version %d.%d", path,
                         major, minor);
        goto out;
    }
    int lenbytes = major == 1 ? 2 : 4;
    if (fread(pre + 8, 1, (size_t)lenbytes, f) != (size_t)lenbytes) {
        st = ir_diag_set(d, IR_ERR_PARSE, "%s: truncated .npy header", path);
        goto out;
    }
    uint32_t hlen = rd_le(pre + 8, lenbytes);
    if (hlen > NPY_MAX_HEADER) {
        st = ir_diag_set(d, IR_ERR_PARSE, "%s: .npy header of %" PRIu32 " bytes is too large", path,
                         hlen);
        goto out;
    }
    hdr = malloc(hlen + 1);
    if (!hdr) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory reading the header", path);
        goto out;
    }
    if (fread(hdr, 1, hlen, f) != hlen) {
        st = ir_diag_set(d, IR_ERR_PARSE, "%s: truncated .npy header", path);
        goto out;
    }
    hdr[hlen] = 0;
    if (memchr(hdr, 0, hlen)) {
        st = ir_diag_set(d, IR_ERR_PARSE, "%s: malformed .npy header: NUL byte", path);
        goto out;
    }
    npy_header h = {0};
    if ((st = parse_header(path, hdr, hlen, &h, d)) != IR_OK) goto out;

    size_t esize = ir_dtype_size(h.dtype);
    int64_t numel = 1;
    for (int i = 0; i < h.shape.rank; i++) {
        int64_t dim = h.shape.dims[i];
        if (dim != 0 && numel > INT64_MAX / (int64_t)esize / dim) {
            st = ir_diag_set(d, IR_ERR_PARSE, "%s: array size overflows", path);
            goto out;
        }
        numel *= dim;
    }
    size_t need = (size_t)numel * esize;
    /* Check the size before allocating, so a lying header cannot ask for terabytes. */
    struct stat sb;
    long pos = ftell(f);
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && pos >= 0) {
        size_t avail = sb.st_size > pos ? (size_t)(sb.st_size - pos) : 0;
        if (avail < need) {
            st =
                ir_diag_set(d, IR_ERR_PARSE, "%s: truncated: expected %zu bytes of data, found %zu",
                            path, need, avail);
            goto out;
        }
    }
    b = ir_blob_new(need);
    if (!b) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory for %zu bytes of data", path, need);
        goto out;
    }
    got = need ? fread(ir_blob_data(b), 1, need, f) : 0;
    if (got != need) {
        st = ferror(f) ? ir_diag_set(d, IR_ERR_IO, "%s: read error: %s", path, strerror(errno))
                       : ir_diag_set(d, IR_ERR_PARSE,
                                     "%s: truncated: expected %zu bytes of data, found %zu", path,
                                     need, got);
        goto out;
    }
    *dtype = h.dtype;
    *shape = h.shape;
    *blob = b;
    b = NULL;
out:
    ir_blob_unref(b);
    free(hdr);
    fclose(f);
    return st;
}

/* ---------------------------------------------------------------- writing */

/* Builds numpy's version-1.0 preamble + header into buf; returns its length (a multiple of 64)
 * or 0 when it does not fit. */
static size_t build_header(ir_dtype t, const ir_shape *s, char *buf, size_t n) {
    char dict[512];
    size_t off = 0;
    off += (size_t)snprintf(dict + off, sizeof dict - off,
                            "{'descr': '%s', 'fortran_order': False, 'shape': (", dtype_descr(t));
    for (int i = 0; i < s->rank; i++)
        off += (size_t)snprintf(dict + off, sizeof dict - off, i ? ", %" PRId64 : "%" PRId64,
                                s->dims[i]);
    off += (size_t)snprintf(dict + off, sizeof dict - off, s->rank == 1 ? ",), }" : "), }");
    /* numpy >= 1.24 leaves room to grow the first axis in place. */
    if (s->rank > 0) {
        char first[24];
        int len = snprintf(first, sizeof first, "%" PRId64, s->dims[0]);
        for (int i = len; i < NPY_GROWTH_AXIS_MAX_DIGITS && off + 1 < sizeof dict; i++)
            dict[off++] = ' ';
        dict[off] = 0;
    }
    size_t hlen = off + 1; /* + '\n' */
    size_t pad = NPY_ALIGN - ((NPY_MAGIC_LEN + 4 + hlen) % NPY_ALIGN);
    size_t total = NPY_MAGIC_LEN + 4 + hlen + pad;
    if (total > n || hlen + pad > 0xffff) return 0;
    memcpy(buf, NPY_MAGIC, NPY_MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)((hlen + pad) & 0xff);
    buf[9] = (char)((hlen + pad) >> 8);
    memcpy(buf + 10, dict, off);
    memset(buf + 10 + off, ' ', pad);
    buf[total - 1] = '\n';
    return total;
}

typedef struct npy_out {
    const char *hdr;
    size_t hn;
    ir_dtype dtype;
    int64_t numel;
    const void *data;
} npy_out;

static int npy_emit(int fd, void *ctx) {
    const npy_out *o = ctx;
    int err = ir_write_all(fd, o->hdr, o->hn);
    if (!err && o->numel > 0) {
        err = ir_write_all(fd, o->data, (size_t)o->numel * ir_dtype_size(o->dtype));
    }
    return err;
}

ir_status ir_npy_write(const char *path, ir_dtype dtype, const ir_shape *shape, const void *data,
                       ir_diag *d) {
    if (!dtype_descr(dtype))
        return ir_diag_set(d, IR_ERR_INVALID, "%s: cannot write dtype %s", path,
                           ir_dtype_name(dtype));
    char hdr[1024];
    size_t hn = build_header(dtype, shape, hdr, sizeof hdr);
    if (!hn) return ir_diag_set(d, IR_ERR_INTERNAL, "%s: .npy header too long", path);
    npy_out o = {hdr, hn, dtype, ir_shape_numel(shape), data};
    return ir_write_atomic_with(path, npy_emit, &o, d);
}
