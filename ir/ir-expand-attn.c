/* ir-expand-attn.c - Attention (opset 23) and RotaryEmbedding (opset 23) expanded at import into
 * ops of the table (MatMul, Softmax, Transpose, Reshape, Concat, Slice, Gather, Mul, Add, Where,
 * Tanh), as their ONNX function bodies allow. Their gradients, dims, float64 reference and costs
 * are then those of the ops they expand to: nothing of their own to get wrong.
 *
 * The expansion runs when shape inference reaches the node (ir-onnx-import.c, infer_and_fold):
 * every input's shape is known then, so the expansion is written with static shapes, like the
 * rest of magpie's graphs, and needs no Shape arithmetic. The new nodes take the node's place in
 * g->nodes (so the order stays topological) and write its output values, whose ids stay.
 *
 * Semantics are onnx 1.22's reference (onnx/reference/ops/op_attention.py, which its node tests
 * were made with): 3-D Q/K/V are split into q_num_heads / kv_num_heads heads; past_key and
 * past_value are concatenated before K and V (present_key / present_value); K and V heads repeat
 * for grouped-query attention (each kv head q_num_heads / kv_num_heads times, interleaved);
 * scale defaults to 1/sqrt(head_size); softcap (> 0) is softcap * tanh(S / softcap) before the
 * mask; a boolean mask keeps True, a float mask is added, a mask shorter than the total sequence
 * is padded with -inf (False); is_causal masks key j > i + past for query i; qk_matmul_output
 * is, by qk_matmul_output_mode, the (soft-capped) scores (0, 1), the scores with the mask (2) or
 * the softmax (3). nonpad_kv_seqlen (opset 24) is refused. RotaryEmbedding: 3-D input with
 * num_heads or 4-D [B, H, S, D], position_ids gathering the caches (else caches are [B, S, d/2]),
 * rotary_embedding_dim, interleaved or split halves. */
#include "ir-expand-build.h"

#include <stdio.h>
#include <stdlib.h>

/* ---------------------------------------------------------------- Attention */

/* 3-D [B, S, H*D] as 4-D [B, H, S, D]. */
static int heads_split(xb *b, int x, int64_t h) {
    ir_shape s = xb_shape(b, x);
    int64_t dims[4] = {s.dims[0], s.dims[1], h, s.dims[2] / h};
    int r = xb_reshape(b, x, 4, dims, -1);
    return xb_transpose(b, r, 4, (int64_t[]){0, 2, 1, 3}, -1);
}

/* [B, kvh, T, D] with each head repeated rep times in place: [B, kvh * rep, T, D]. */
static int heads_repeat(xb *b, int x, int64_t rep) {
    ir_shape s = xb_shape(b, x);
    int64_t d5[5] = {s.dims[0], s.dims[1], 1, s.dims[2], s.dims[3]};
    int r = xb_reshape(b, x, 5, d5, -1);
    d5[2] = rep;
    int e = xb_op2(b, IR_OP_Expand, r, xb_ints(b, 5, d5));
    int64_t d4[4] = {s.dims[0], s.dims[1] * rep, s.dims[2], s.dims[3]};
    return xb_reshape(b, e, 4, d4, -1);
}

ir_status ir_expand_attention(ir_graph *g, const ir_node *n, ir_diag *d) {
    xb b = {.g = g, .base = n->name, .d = d};
    const int q = n->in[0], k = n->in[1], v = n->in[2];
    const int mask = n->n_in > 3 ? n->in[3] : -1, pk = n->n_in > 4 ? n->in[4] : -1,
              pv = n->n_in > 5 ? n->in[5] : -1;
    int out[4] = {-1, -1, -1, -1};
    for (int i = 0; i < n->n_out && i < 4; i++) out[i] = n->out[i];
    if (n->n_in > 6 && n->in[6] >= 0)
        return ir_node_fail(d, IR_ERR_UNSUPPORTED, n, "nonpad_kv_seqlen (opset 24) is not read");
    if (q < 0 || k < 0 || v < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "Q, K and V are required");
    /* copies: adding values moves g->values */
    const ir_value qv_ = g->values[q], kv_ = g->values[k], vv_ = g->values[v];
    const ir_value *qv = &qv_, *kv = &kv_, *vv = &vv_;
    const ir_dtype t = qv->dtype;
    if (!ir_dtype_is_float(t) || kv->dtype != t || vv->dtype != t)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "Q, K and V must share one float dtype");
    const int rank = qv->shape.rank;
    if ((rank != 3 && rank != 4) || kv->shape.rank != rank || vv->shape.rank != rank)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "Q, K and V must all be 3-D or all 4-D");
    if ((pk >= 0) != (pv >= 0))
        return ir_node_fail(d, IR_ERR_INVALID, n, "past_key and past_value go together");
    int64_t qh = ir_attr_int(n, "q_num_heads", 0), kvh = ir_attr_int(n, "kv_num_heads", 0);
    const bool causal = ir_attr_int(n, "is_causal", 0) != 0;
    const int64_t mode = ir_attr_int(n, "qk_matmul_output_mode", 0);
    const double softcap = ir_attr_float(n, "softcap", 0.0f);
    const ir_attr *scale_a = ir_attr_find(n, "scale");
    if (mode < 0 || mode > 3)
        return ir_node_fail(d, IR_ERR_INVALID, n, "qk_matmul_output_mode %lld", (long long)mode);
    int Q4 = q, K4 = k, V4 = v;
    if (rank == 3) {
        if (qh <= 0 || kvh <= 0 || qv->shape.dims[2] % qh || kv->shape.dims[2] % kvh ||
            vv->shape.dims[2] % kvh)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "3-D Q, K, V need q_num_heads and kv_num_heads that divide their "
                                "hidden sizes");
        Q4 = heads_split(&b, q, qh);
        K4 = heads_split(&b, k, kvh);
        V4 = heads_split(&b, v, kvh);
    } else {
        qh = qv->shape.dims[1];
        kvh = kv->shape.dims[1];
    }
    if (b.st) return b.st;
    const ir_shape qs = xb_shape(&b, Q4), ks = xb_shape(&b, K4), vs = xb_shape(&b, V4);
    if (ks.dims[3] != qs.dims[3] || vs.dims[1] != kvh || ks.dims[2] != vs.dims[2] || kvh <= 0 ||
        qh % kvh)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "Q heads %lld and K/V heads %lld, head sizes %lld and %lld do not fit",
                            (long long)qh, (long long)kvh, (long long)qs.dims[3],
                            (long long)ks.dims[3]);
    int PK = pk >= 0 ? xb_concat(&b, pk, K4, 2, out[1])
                     : (out[1] >= 0 ? xb_identity(&b, K4, out[1]) : K4);
    int PV = pv >= 0 ? xb_concat(&b, pv, V4, 2, out[2])
                     : (out[2] >= 0 ? xb_identity(&b, V4, out[2]) : V4);
    if (b.st) return b.st;
    const int64_t past = pk >= 0 ? g->values[pk].shape.dims[2] : 0;
    const int64_t Sq = qs.dims[2], T = xb_shape(&b, PK).dims[2];
    int Kr = qh != kvh ? heads_repeat(&b, PK, qh / kvh) : PK;
    int Vr = qh != kvh ? heads_repeat(&b, PV, qh / kvh) : PV;
    double scale = scale_a ? scale_a->f : 1.0 / sqrt((double)qs.dims[3]);
    int Kt = xb_transpose(&b, Kr, 4, (int64_t[]){0, 1, 3, 2}, -1);
    int S = xb_op2(&b, IR_OP_Mul, xb_op2(&b, IR_OP_MatMul, Q4, Kt), xb_scalar(&b, t, scale));
    if (softcap > 0) {
        int th = xb_op(&b, IR_OP_Tanh, 1,
                       (int[]){xb_op2(&b, IR_OP_Div, S, xb_scalar(&b, t, softcap))}, -1, 0, NULL);
        S = xb_op2(&b, IR_OP_Mul, th, xb_scalar(&b, t, softcap));
    }
    const int S_capped = S;
    /* the additive bias: the mask (padded to T), plus the causal triangle */
    int bias = -1;
    if (mask >= 0) {
        const ir_shape ms = g->values[mask].shape;
        const ir_dtype mt = g->values[mask].dtype;
        const bool is_bool = mt == IR_BOOL;
        if (ms.rank < 1 || ms.dims[ms.rank - 1] > T || (!is_bool && mt != t))
            return ir_node_fail(d, IR_ERR_SHAPE, n,
                                "attn_mask must be bool or Q's dtype, its last dim at most the "
                                "total sequence length %lld",
                                (long long)T);
        int m = mask;
        if (ms.dims[ms.rank - 1] < T) {
            ir_shape ps = ms;
            ps.dims[ps.rank - 1] = T - ms.dims[ms.rank - 1];
            int64_t np = ir_shape_numel(&ps);
            double *fill = malloc(sizeof(double) * (size_t)(np ? np : 1));
            if (!fill) return ir_node_fail(d, IR_ERR_NOMEM, n, "out of memory");
            for (int64_t i = 0; i < np; i++) fill[i] = is_bool ? 0.0 : -INFINITY;
            m = xb_concat(&b, m, xb_const(&b, mt, &ps, fill), ms.rank - 1, -1);
            free(fill);
        }
        if (is_bool)
            m = xb_op(&b, IR_OP_Where, 3,
                      (int[]){m, xb_scalar(&b, t, 0.0), xb_scalar(&b, t, -INFINITY)}, -1, 0, NULL);
        bias = m;
    }
    if (causal) {
        ir_shape cs = {.rank = 2, .dims = {Sq, T}};
        double *tri = malloc(sizeof(double) * (size_t)(Sq * T + 1));
        if (!tri) return ir_node_fail(d, IR_ERR_NOMEM, n, "out of memory");
        for (int64_t i = 0; i < Sq; i++)
            for (int64_t j = 0; j < T; j++)
                tri[i * T + j] = j >= past && j - past > i ? -INFINITY : 0;
        int c = xb_const(&b, t, &cs, tri);
        free(tri);
        bias = bias >= 0 ? xb_op2(&b, IR_OP_Add, bias, c) : c;
    }
    if (bias >= 0) S = xb_op2(&b, IR_OP_Add, S, bias);
    ir_attr ax = {.name = "axis", .type = IR_ATTR_INT, .i = -1};
    int P = xb_op(&b, IR_OP_Softmax, 1, &S, mode == 3 ? out[3] : -1, 1, &ax);
    if (out[3] >= 0 && mode != 3) xb_identity(&b, mode == 2 ? S : S_capped, out[3]);
    if (rank == 4) {
        xb_op(&b, IR_OP_MatMul, 2, (int[]){P, Vr}, out[0], 0, NULL);
    } else {
        int Y4 = xb_op2(&b, IR_OP_MatMul, P, Vr);
        int Yt = xb_transpose(&b, Y4, 4, (int64_t[]){0, 2, 1, 3}, -1);
        int64_t dims[3] = {qs.dims[0], Sq, qh * vs.dims[3]};
        xb_reshape(&b, Yt, 3, dims, out[0]);
    }
    return b.st;
}

/* ---------------------------------------------------------------- RotaryEmbedding */

ir_status ir_expand_rotary(ir_graph *g, const ir_node *n, ir_diag *d) {
    xb b = {.g = g, .base = n->name, .d = d};
    const int x = n->in[0], cc = n->in[1], sc = n->in[2], pos = n->n_in > 3 ? n->in[3] : -1;
    const int out = n->out[0];
    if (x < 0 || cc < 0 || sc < 0)
        return ir_node_fail(d, IR_ERR_INVALID, n, "X, cos_cache and sin_cache are required");
    const ir_shape xs = g->values[x].shape;
    const ir_dtype t = g->values[x].dtype;
    if (!ir_dtype_is_float(t) || g->values[cc].dtype != t || g->values[sc].dtype != t)
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X and the caches must share one float dtype");
    const int64_t nh = ir_attr_int(n, "num_heads", 0);
    const bool inter = ir_attr_int(n, "interleaved", 0) != 0;
    int X4;
    if (xs.rank == 4) {
        X4 = xb_transpose(&b, x, 4, (int64_t[]){0, 2, 1, 3}, -1);
    } else if (xs.rank == 3) {
        if (nh <= 0 || xs.dims[2] % nh)
            return ir_node_fail(d, IR_ERR_INVALID, n,
                                "a 3-D input needs num_heads dividing its hidden size");
        X4 = xb_reshape(&b, x, 4, (int64_t[]){xs.dims[0], xs.dims[1], nh, xs.dims[2] / nh}, -1);
    } else {
        return ir_node_fail(d, IR_ERR_SHAPE, n, "X must be 3-D or 4-D");
    }
    if (b.st) return b.st;
    const ir_shape s4 = xb_shape(&b, X4); /* [B, S, H, D] */
    const int64_t B = s4.dims[0], S = s4.dims[1], H = s4.dims[2], D = s4.dims[3];
    int64_t rd = ir_attr_int(n, "rotary_embedding_dim", 0);
    if (rd == 0) rd = D;
    if (rd < 2 || rd > D || rd % 2)
        return ir_node_fail(d, IR_ERR_INVALID, n, "rotary_embedding_dim %lld for head size %lld",
                            (long long)rd, (long long)D);
    const int64_t half = rd / 2;
    int cs = cc, sn = sc;
    if (pos >= 0) {
        ir_attr ax = {.name = "axis", .type = IR_ATTR_INT, .i = 0};
        cs = xb_op(&b, IR_OP_Gather, 2, (int[]){cc, pos}, -1, 1, &ax);
        sn = xb_op(&b, IR_OP_Gather, 2, (int[]){sc, pos}, -1, 1, &ax);
    }
    if (b.st) return b.st;
    const ir_shape css = xb_shape(&b, cs);
    if (css.rank != 3 || css.dims[0] != B || css.dims[1] != S || css.dims[2] != half)
        return ir_node_fail(d, IR_ERR_SHAPE, n,
                            "the cos cache (after position_ids) must be [%lld, %lld, %lld]",
                            (long long)B, (long long)S, (long long)half);
    const int64_t c4[4] = {B, S, 1, half};
    cs = xb_reshape(&b, cs, 4, c4, -1);
    sn = xb_reshape(&b, sn, 4, c4, -1);
    int xr = rd < D ? xb_slice(&b, X4, 3, 0, rd) : X4;
    int x1, x2;
    if (inter) {
        int r5 = xb_reshape(&b, xr, 5, (int64_t[]){B, S, H, half, 2}, -1);
        const int64_t h4[4] = {B, S, H, half};
        x1 = xb_reshape(&b, xb_slice(&b, r5, 4, 0, 1), 4, h4, -1);
        x2 = xb_reshape(&b, xb_slice(&b, r5, 4, 1, 2), 4, h4, -1);
    } else {
        x1 = xb_slice(&b, xr, 3, 0, half);
        x2 = xb_slice(&b, xr, 3, half, rd);
    }
    int real = xb_op2(&b, IR_OP_Sub, xb_op2(&b, IR_OP_Mul, cs, x1), xb_op2(&b, IR_OP_Mul, sn, x2));
    int imag = xb_op2(&b, IR_OP_Add, xb_op2(&b, IR_OP_Mul, sn, x1), xb_op2(&b, IR_OP_Mul, cs, x2));
    int rot;
    if (inter) {
        const int64_t h5[5] = {B, S, H, half, 1};
        int c =
            xb_concat(&b, xb_reshape(&b, real, 5, h5, -1), xb_reshape(&b, imag, 5, h5, -1), 4, -1);
        rot = xb_reshape(&b, c, 4, (int64_t[]){B, S, H, rd}, -1);
    } else {
        rot = xb_concat(&b, real, imag, 3, -1);
    }
    if (rd < D) rot = xb_concat(&b, rot, xb_slice(&b, X4, 3, rd, D), 3, -1);
    if (xs.rank == 4)
        xb_transpose(&b, rot, 4, (int64_t[]){0, 2, 1, 3}, out);
    else
        xb_reshape(&b, rot, 3, xs.dims, out);
    return b.st;
}
