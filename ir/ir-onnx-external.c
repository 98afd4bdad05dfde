/* ir-onnx-external.c - tensors whose bytes live outside the model file (ONNX "external data":
 * data_location = EXTERNAL, with external_data entries `location`, `offset`, `length`).
 *
 * Reading: `location` is a path relative to the folder of the model file (absolute paths and
 * `..` components are refused, as onnx.checker refuses them: a model must not read files outside
 * its folder). offset (default 0) and length (default: the tensor's bytes) must lie within the
 * file, and length must be what the dims and dtype need. Each tensor is read with pread straight
 * into its blob.
 *
 * Writing (ir_onnx_save_ext): the initializers of at least IR_ONNX_EXTERNAL_MIN_BYTES go, in
 * file order and 64-byte aligned, to one data file beside the model, named after it
 * ("m.onnx" -> "m.onnx.data", as torch.onnx.export names it). */
#include "ir-onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

bool ir_onnx_tensor_is_external(const Onnx__TensorProto *t) {
    return (t->has_data_location &&
            t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL);
}

/* Parses a non-negative decimal integer (the spec stores offset and length as strings). */
static bool parse_u64(const char *s, int64_t *out) {
    if (!s || !*s) return false;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *s - '0', &v))
            return false;
    }
    *out = v;
    return true;
}

static bool has_dotdot(const char *p) {
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 2 && s[0] == '.' && s[1] == '.') return true;
        if (!e) break;
        s = e + 1;
    }
    return false;
}

/* The folder part of path, with its trailing '/', into buf ("" when path has none). */
static void folder_of(const char *path, char *buf, size_t n) {
    const char *slash = strrchr(path, '/');
    size_t len = slash ? (size_t)(slash - path) + 1 : 0;
    if (len >= n) len = n - 1;
    memcpy(buf, path, len);
    buf[len] = 0;
}

ir_status ir_onnx_external_decode(const Onnx__TensorProto *t, const char *model_path,
                                  const char *what, ir_dtype *dtype, ir_shape *shape,
                                  ir_blob **blob, ir_diag *d) {
    *blob = NULL;
    int onnx_type = t->has_data_type ? t->data_type : 0;
    ir_dtype dt = ir_dtype_from_onnx(onnx_type);
    if (dt == IR_DTYPE_NONE)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s has unsupported dtype %s (%d)%s", what,
                           ir_onnx_dtype_name(onnx_type), onnx_type,
                           ir_onnx_dtype_scope_note(onnx_type));
    if (t->n_dims > IR_MAX_RANK)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s has rank %zu; at most %d is supported", what,
                           t->n_dims, IR_MAX_RANK);
    ir_status st = ir_onnx_check_dims((int)t->n_dims, t->dims, dt, what, d);
    if (st != IR_OK) return st;
    ir_shape s = ir_shape_make((int)t->n_dims, t->dims);
    const int64_t need = ir_shape_numel(&s) * (int64_t)ir_dtype_size(dt);

    const char *location = NULL;
    int64_t offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
        if (!strcmp(k, "location")) {
            location = v;
        } else if (!strcmp(k, "offset") || !strcmp(k, "length")) {
            int64_t x;
            if (!parse_u64(v, &x))
                return ir_diag_set(d, IR_ERR_INVALID,
                                   "%s: external data %s '%s' is not a non-negative integer", what,
                                   k, v);
            *(!strcmp(k, "offset") ? &offset : &length) = x;
        } /* "checksum" and unknown keys are informative only */
    }
    if (!location || !*location)
        return ir_diag_set(d, IR_ERR_INVALID, "%s: external data has no location", what);
    if (location[0] == '/' || has_dotdot(location))
        return ir_diag_set(d, IR_ERR_INVALID,
                           "%s: external data location '%s' must be a path inside the model's "
                           "folder",
                           what, location);
    if (length >= 0 && length != need)
        return ir_diag_set(
            d, IR_ERR_INVALID,
            "%s: external data length %" PRId64 " does not match dims %s of %s (%" PRId64 " bytes)",
            what, length, ir_shape_str(&s, (char[128]){0}, 128), ir_dtype_name(dt), need);
    char path[4096];
    folder_of(model_path ? model_path : "", path, sizeof path);
    size_t fl = strlen(path);
    if (fl + strlen(location) >= sizeof path)
        return ir_diag_set(d, IR_ERR_INVALID, "%s: external data location is too long", what);
    memcpy(path + fl, location, strlen(location) + 1);

    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ir_diag_set(d, IR_ERR_IO, "%s: cannot open its external data file %s: %s", what,
                           path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ir_diag_set(d, IR_ERR_IO, "%s: external data file %s is not a regular file", what,
                           path);
    }
    int64_t end;
    if (__builtin_add_overflow(offset, need, &end) || end > (int64_t)sb.st_size) {
        close(fd);
        return ir_diag_set(d, IR_ERR_INVALID,
                           "%s: external data file %s has %lld bytes; offset %" PRId64
                           " + length %" PRId64 " passes its end",
                           what, path, (long long)sb.st_size, offset, need);
    }
    ir_blob *b = ir_blob_new((size_t)need);
    if (!b) {
        close(fd);
        return ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory (%" PRId64 " bytes)", what, need);
    }
    char *dst = ir_blob_data(b);
    for (int64_t got = 0; got < need;) {
        ssize_t r = pread(fd, dst + got, (size_t)(need - got), (off_t)(offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int err = r < 0 ? errno : 0;
            close(fd);
            ir_blob_unref(b);
            return ir_diag_set(d, IR_ERR_IO, "%s: cannot read external data file %s: %s", what,
                               path, err ? strerror(err) : "unexpected end of file");
        }
        got += r;
    }
    close(fd);
    *dtype = dt;
    *shape = s;
    *blob = b;
    return IR_OK;
}

/* ---------------------------------------------------------------- writing */

/* "m.onnx" -> "m.onnx.data": the data file's name (no folder), in buf. */
void ir_onnx_external_name(const char *model_path, char *buf, size_t n) {
    const char *slash = strrchr(model_path, '/');
    snprintf(buf, n, "%s.data", slash ? slash + 1 : model_path);
}

static int emit_data(int fd, void *ctx) {
    const ir_onnx_external_plan *p = ctx;
    static const char zeros[IR_ONNX_EXTERNAL_ALIGN];
    int64_t at = 0;
    for (int i = 0; i < p->n; i++) {
        int err;
        if (p->offsets[i] > at &&
            (err = ir_write_all(fd, zeros, (size_t)(p->offsets[i] - at))) != 0)
            return err;
        if ((err = ir_write_all(fd, p->data[i], p->lengths[i])) != 0) return err;
        at = p->offsets[i] + (int64_t)p->lengths[i];
    }
    return 0;
}

ir_status ir_onnx_external_write(const char *data_path, const ir_onnx_external_plan *p,
                                 ir_diag *d) {
    return ir_write_atomic_with(data_path, emit_data, (void *)p, d);
}
