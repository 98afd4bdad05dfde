/* ir-kernel-util.c - helpers that several op files (ops-*.c) share: reading shape-like inputs and
 * attributes, dtype checks, exact stores and fills. Declared in ir-impl.h. */
#include "ir-impl.h"

ir_status ir_attr_ints_n(const ir_node *n, const char *name, int cnt, int64_t def, int64_t *out,
                         ir_diag *d) {
    const int64_t *v;
    int m = ir_attr_ints(n, name, &v);
    if (m < 0) {
        for (int i = 0; i < cnt; i++) out[i] = def;
        return IR_OK;
    }
    if (m != cnt)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute %s has %d values, expected %d", name,
                            m, cnt);
    for (int i = 0; i < cnt; i++) out[i] = v[i];
    return IR_OK;
}

ir_status ir_check_sizes(const ir_node *n, const char *what, const int64_t *v, int cnt,
                         ir_diag *d) {
    for (int i = 0; i < cnt; i++)
        if (v[i] < 0)
            return ir_node_fail(d, IR_ERR_INVALID, n, "%s[%d] = %lld is negative", what, i,
                                (long long)v[i]);
    return IR_OK;
}

int ir_tensor_ints(const ir_kernel_ctx *k, int i, int64_t *out, int max) {
    if (i >= k->n_in || !k->in[i].data) return -2;
    int64_t cnt = ir_tensor_numel(&k->in[i]);
    if (cnt > max) return -1;
    for (int64_t j = 0; j < cnt; j++) out[j] = ir_load_i64(k->in[i].data, k->in[i].dtype, j);
    return (int)cnt;
}

ir_status ir_check_f32(const ir_kernel_ctx *k) {
    for (int i = 0; i < k->n_in; i++)
        if (k->in[i].data && k->in[i].dtype != IR_F32 && ir_dtype_is_float(k->in[i].dtype))
            return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                                "the CPU kernel runs float32 only, not %s",
                                ir_dtype_name(k->in[i].dtype));
    return IR_OK;
}

ir_status ir_kernel_float(const ir_kernel_ctx *k, ir_dtype *t) {
    ir_dtype found = IR_DTYPE_NONE;
    for (int i = 0; i < k->n_in + k->n_out; i++) {
        const ir_tensor *x = i < k->n_in ? &k->in[i] : &k->out[i - k->n_in];
        if (!x->data || !ir_dtype_is_float(x->dtype)) continue;
        if (x->dtype != IR_F32 && x->dtype != IR_F64)
            return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                                "the CPU kernel runs float32 and float64, not %s",
                                ir_dtype_name(x->dtype));
        if (found != IR_DTYPE_NONE && x->dtype != found)
            return ir_node_fail(k->diag, IR_ERR_UNSUPPORTED, k->node,
                                "the CPU kernel needs one float dtype, not both %s and %s",
                                ir_dtype_name(found), ir_dtype_name(x->dtype));
        found = x->dtype;
    }
    *t = found == IR_DTYPE_NONE ? IR_F32 : found;
    return IR_OK;
}

void ir_fill_elems(void *dst, int64_t n, const void *elem, size_t es) {
    size_t total = (size_t)n * es;
    if (!total) return;
    bool zero = true;
    for (size_t b = 0; b < es; b++) zero = zero && ((const unsigned char *)elem)[b] == 0;
    if (zero) {
        memset(dst, 0, total);
        return;
    }
    memcpy(dst, elem, es);
    for (size_t done = es; done < total;) {
        size_t c = done < total - done ? done : total - done;
        memcpy((char *)dst + done, dst, c);
        done += c;
    }
}

void ir_store_i64(void *buf, ir_dtype t, int64_t i, int64_t v) {
    switch (t) {
    case IR_I64: ((int64_t *)buf)[i] = v; break;
    case IR_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case IR_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case IR_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case IR_I16: ((int16_t *)buf)[i] = (int16_t)v; break;
    case IR_U16: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case IR_U32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case IR_U64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case IR_BOOL: ((uint8_t *)buf)[i] = v != 0; break;
    default: ir_store_f64(buf, t, i, (double)v); break;
    }
}
