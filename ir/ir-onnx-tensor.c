/* ir-onnx-tensor.c - TensorProto <-> (dtype, shape, blob), shared by ONNX import and export.
 *
 * Blobs hold tensors in the host's byte order, which raw_data shares only on little-endian
 * hosts: magpie supports those alone (checked at compile time below). The typed fields follow
 * the ONNX spec: int32_data also carries int8/uint8/int16/uint16/bool and the bit patterns of
 * float16/bfloat16; uint64_data carries uint32/uint64. */
#include "ir-onnx.h"

#include <stdio.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ONNX raw_data is little-endian; magpie supports little-endian hosts only"
#endif

const char *ir_onnx_dtype_name(int onnx_type) {
    static const char *const names[] = {
        "undefined",      "float32",    "uint8",          "int8",       "uint16",   "int16",
        "int32",          "int64",      "string",         "bool",       "float16",  "float64",
        "uint32",         "uint64",     "complex64",      "complex128", "bfloat16", "float8e4m3fn",
        "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "uint4",      "int4",     "float4e2m1",
        "float8e8m0",     "uint2",      "int2",
    };
    if (onnx_type >= 0 && onnx_type < (int)(sizeof names / sizeof names[0]))
        return names[onnx_type];
    return "unknown";
}

const char *ir_onnx_dtype_scope_note(int onnx_type) {
    /* FLOAT8E4M3FN (17) .. FLOAT4E2M1 (23), FLOAT8E8M0 (24), and the 2-bit types after them */
    return onnx_type >= 17 && onnx_type <= 26
               ? " (float8, int4, float4 and e8m0 types are out of scope)"
               : "";
}

ir_status ir_onnx_check_dims(int rank, const int64_t *dims, ir_dtype t, const char *what,
                             ir_diag *d) {
    if (rank > IR_MAX_RANK)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s has rank %d; at most %d is supported", what,
                           rank, IR_MAX_RANK);
    /* Multiplying by a zero dimension first would hide an overflow of the others, so the
     * bound is checked on the non-zero product. */
    int64_t bytes = (int64_t)(ir_dtype_size(t) ? ir_dtype_size(t) : 1);
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return ir_diag_set(d, IR_ERR_INVALID, "%s has negative dimension %lld", what,
                               (long long)dims[i]);
        if (dims[i] == 0) continue;
        if (__builtin_mul_overflow(bytes, dims[i], &bytes) || bytes > IR_ONNX_MAX_TENSOR_BYTES)
            return ir_diag_set(d, IR_ERR_INVALID, "%s is too large (dimension %d is %lld)", what, i,
                               (long long)dims[i]);
    }
    return IR_OK;
}

/* Number of values in the typed field that carries dtype dt. */
static size_t typed_count(const Onnx__TensorProto *t, ir_dtype dt) {
    switch (dt) {
    case IR_F32: return t->n_float_data;
    case IR_F64: return t->n_double_data;
    case IR_I64: return t->n_int64_data;
    case IR_U32:
    case IR_U64: return t->n_uint64_data;
    default: return t->n_int32_data;
    }
}

/* Copies n typed values (the ONNX field of the dtype, n = typed_count) into dst, converting as
 * the spec says. */
static void decode_typed(const Onnx__TensorProto *t, ir_dtype dt, size_t n, void *dst) {
    if (n == 0) return; /* the fields may then be NULL, which memcpy must not see */
    switch (dt) {
    case IR_F32: memcpy(dst, t->float_data, n * sizeof(float)); break;
    case IR_F64: memcpy(dst, t->double_data, n * sizeof(double)); break;
    case IR_I64: memcpy(dst, t->int64_data, n * sizeof(int64_t)); break;
    case IR_I32: memcpy(dst, t->int32_data, n * sizeof(int32_t)); break;
    case IR_F16:
    case IR_BF16:
    case IR_U16:
        for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = (uint16_t)t->int32_data[i];
        break;
    case IR_I16:
        for (size_t i = 0; i < n; i++) ((int16_t *)dst)[i] = (int16_t)t->int32_data[i];
        break;
    case IR_U32:
        for (size_t i = 0; i < n; i++) ((uint32_t *)dst)[i] = (uint32_t)t->uint64_data[i];
        break;
    case IR_U64: memcpy(dst, t->uint64_data, n * sizeof(uint64_t)); break;
    case IR_BOOL:
        for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = t->int32_data[i] != 0;
        break;
    default: /* int8, uint8: the low byte */
        for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)t->int32_data[i];
        break;
    }
}

ir_status ir_onnx_tensor_decode(const Onnx__TensorProto *t, const char *what, ir_dtype *dtype,
                                ir_shape *shape, ir_blob **blob, ir_diag *d) {
    *blob = NULL;
    int onnx_type = t->has_data_type ? t->data_type : 0;
    ir_dtype dt = ir_dtype_from_onnx(onnx_type);
    if (dt == IR_DTYPE_NONE)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s has unsupported dtype %s (%d)%s", what,
                           ir_onnx_dtype_name(onnx_type), onnx_type,
                           ir_onnx_dtype_scope_note(onnx_type));
    if ((t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
        t->n_external_data > 0)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED,
                           "%s keeps its data in an external file (external data is not "
                           "supported)",
                           what);
    if (t->segment)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s is segmented (not supported)", what);
    if (t->n_dims > IR_MAX_RANK)
        return ir_diag_set(d, IR_ERR_UNSUPPORTED, "%s has rank %zu; at most %d is supported", what,
                           t->n_dims, IR_MAX_RANK);
    ir_status st = ir_onnx_check_dims((int)t->n_dims, t->dims, dt, what, d);
    if (st != IR_OK) return st;
    ir_shape s = ir_shape_make((int)t->n_dims, t->dims);
    int64_t numel = ir_shape_numel(&s);
    size_t bytes = (size_t)numel * ir_dtype_size(dt);
    if (t->has_raw_data && t->raw_data.len != bytes)
        return ir_diag_set(
            d, IR_ERR_INVALID, "%s has %zu bytes of raw_data; dims %s of %s need %zu", what,
            t->raw_data.len, ir_shape_str(&s, (char[128]){0}, 128), ir_dtype_name(dt), bytes);
    /* lengths are checked before allocating: the dims alone may claim terabytes */
    if (!t->has_raw_data && typed_count(t, dt) != (size_t)numel)
        return ir_diag_set(d, IR_ERR_INVALID, "%s has %zu values; dims %s need %lld", what,
                           typed_count(t, dt), ir_shape_str(&s, (char[128]){0}, 128),
                           (long long)numel);
    ir_blob *b = ir_blob_new(bytes);
    if (!b) return ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory (%zu bytes)", what, bytes);
    if (t->has_raw_data) {
        if (bytes) memcpy(ir_blob_data(b), t->raw_data.data, bytes);
    } else {
        decode_typed(t, dt, (size_t)numel, ir_blob_data(b));
    }
    *dtype = dt;
    *shape = s;
    *blob = b;
    return IR_OK;
}

bool ir_onnx_tensor_encode(Onnx__TensorProto *t, ir_arena *a, const char *name, ir_dtype dtype,
                           const ir_shape *shape, ir_blob *blob) {
    t->name = (char *)name;
    t->has_data_type = 1;
    t->data_type = ir_dtype_to_onnx(dtype);
    t->n_dims = (size_t)shape->rank;
    if (shape->rank) {
        t->dims = ir_arena_alloc(a, sizeof(int64_t) * (size_t)shape->rank);
        if (!t->dims) return false;
        memcpy(t->dims, shape->dims, sizeof(int64_t) * (size_t)shape->rank);
    }
    t->has_raw_data = 1;
    t->raw_data.len = (size_t)ir_shape_numel(shape) * ir_dtype_size(dtype);
    if (t->raw_data.len && (!blob || ir_blob_bytes(blob) < t->raw_data.len)) return false;
    t->raw_data.data = blob ? ir_blob_data(blob) : NULL;
    return true;
}
