/* ops-pet.c - PetPatch, the magpie-domain op that applies a PET correction (PET paper §5.2 step
 * 3): PetPatch(out, patch) -> out', out' = out with the box of patch's shape at attribute
 * `starts` (one int per dim of out) overwritten by patch. The corrector (rules/pet-correct.c)
 * computes the original program on a failed box of a mutant's output and writes it there.
 *
 * Invariants:
 *  - patch has out's dtype and rank, and starts[i] + patch.dims[i] <= out.dims[i] with
 *    starts[i] >= 0 in every dim (the box lies inside out);
 *  - it is IR_OPF_INPLACE, as FissionAssemble: out' takes over out's buffer (ir.h) and only the
 *    box is written; the kernel also works when out' is a separate buffer (constant folding,
 *    profiling) by copying out first;
 *  - its byte count is what it touches on the device: the patch read and its box written. */
#include "ir-impl.h"

/* The starts attribute, checked against out and patch; starts[] gets one value per dim. */
static ir_status patch_starts(const ir_node *n, const ir_value *o, const ir_value *p,
                              int64_t *starts, ir_diag *d) {
    const int64_t *s = NULL;
    int cnt = ir_attr_ints(n, "starts", &s);
    if (cnt != o->shape.rank)
        return ir_node_fail(d, IR_ERR_INVALID, n, "attribute starts has %d values, expected %d",
                            cnt < 0 ? 0 : cnt, o->shape.rank);
    if (p->shape.rank != o->shape.rank || p->dtype != o->dtype) {
        char s1[128], s2[128];
        return ir_node_fail(d, IR_ERR_SHAPE, n, "patch '%s' is %s %s, out '%s' is %s %s", p->name,
                            ir_dtype_name(p->dtype), ir_shape_str(&p->shape, s1, sizeof s1),
                            o->name, ir_dtype_name(o->dtype),
                            ir_shape_str(&o->shape, s2, sizeof s2));
    }
    for (int i = 0; i < cnt; i++) {
        starts[i] = s[i];
        if (s[i] < 0 || s[i] + p->shape.dims[i] > o->shape.dims[i])
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "patch '%s' of %lld at %lld does not fit in dim %d (%lld) of '%s'",
                                p->name, (long long)p->shape.dims[i], (long long)s[i], i,
                                (long long)o->shape.dims[i], o->name);
    }
    return IR_OK;
}

static ir_status patch_infer(ir_graph *g, ir_node *n, ir_diag *d) {
    const ir_value *o = ir_node_in(g, n, 0), *p = ir_node_in(g, n, 1);
    int64_t starts[IR_MAX_RANK];
    if (ir_dtype_size(o->dtype) == 0)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "input '%s' has no dtype", o->name);
    ir_status st = patch_starts(n, o, p, starts, d);
    if (st != IR_OK) return st;
    ir_set_out(g, n, 0, o->dtype, &o->shape);
    return IR_OK;
}

static ir_status patch_kernel(const ir_kernel_ctx *k) {
    const ir_tensor *o = &k->in[0], *p = &k->in[1];
    ir_tensor *y = &k->out[0];
    const int64_t *starts = NULL;
    int r = ir_attr_ints(k->node, "starts", &starts); /* inference checked it */
    size_t es = ir_dtype_size(o->dtype);
    int64_t on = ir_tensor_numel(o), pn = ir_tensor_numel(p);
    /* Not in place (folding, profiling): the rest of out comes from the input. */
    if (y->data != o->data && on > 0) memcpy(y->data, o->data, (size_t)on * es);
    if (pn == 0) return IR_OK;
    int64_t ost[IR_MAX_RANK], base = 0;
    ir_shape_strides(&o->shape, ost);
    for (int i = 0; i < r; i++) base += starts[i] * ost[i];
    /* Rows of the patch's last dim are contiguous in both buffers. */
    int64_t row = r ? p->shape.dims[r - 1] : 1, rows = pn / row;
    char *dst = (char *)y->data + (size_t)base * es;
    const char *src = p->data;
    IR_PARALLEL_FOR(rows > 1 && pn > IR_PAR_MIN)
    for (int64_t q = 0; q < rows; q++) {
        int64_t rem = q, off = 0;
        for (int i = r - 2; i >= 0; i--) {
            off += (rem % p->shape.dims[i]) * ost[i];
            rem /= p->shape.dims[i];
        }
        memcpy(dst + (size_t)off * es, src + (size_t)(q * row) * es, (size_t)row * es);
    }
    return IR_OK;
}

/* Reads the patch and writes its box; the rest of out stays where it is. */
static double patch_bytes(const ir_graph *g, const ir_node *n) {
    const ir_value *p = ir_node_in(g, n, 1);
    return p ? 2.0 * (double)ir_value_bytes(p) : 0.0;
}

/* Dims (the D-graph's view). Splitting out' along dim i into parts splits out the same way, but
 * splits the patch the same way only when the patch spans the whole dim: otherwise part j of
 * out' needs the patch rows that fall in part j, which are no equal part of the patch, and an
 * unlinked patch would be handed whole to every part (ir-impl.h: links are all or nothing per
 * axis). So a dim links, from both inputs, only where the patch covers it whole; the dims the
 * box cuts link nothing. (Fission refuses in-place ops anyway; these links keep the D-graph
 * honest where it is built over such a node.) */
static int patch_dims(const ir_graph *g, const ir_node *n, ir_dimlink *l) {
    const ir_value *o = ir_node_in(g, n, 0), *p = ir_node_in(g, n, 1);
    ir_dims_out out = ir_dims_begin(l);
    if (!o || !p || p->shape.rank != o->shape.rank) return 0;
    for (int i = 0; i < o->shape.rank; i++)
        if (p->shape.dims[i] == o->shape.dims[i]) {
            ir_dims_keep(&out, 0, i, 0, i);
            ir_dims_keep(&out, 1, i, 0, i);
        }
    return ir_dims_end(&out);
}

IR_MAGPIE_OP_DEF(PetPatch, 2, 2, 1, 1, .flags = IR_OPF_INPLACE | IR_OPF_FLOAT16,
                 .infer = patch_infer, .kernel = patch_kernel, .dims = patch_dims,
                 .bytes = patch_bytes);
