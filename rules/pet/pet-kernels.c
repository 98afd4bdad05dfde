/* pet-kernels.c - the CPU's Z_p kernels for every step kind of a compiled program (pet.h), in two
 * forms that the CPU back-end (pet-cpu.c) mixes:
 *  - per element: pet_k_elem computes one output element from its inputs and pet_k_mark marks
 *    the input elements it reads, so that a program is evaluated only where tested positions
 *    need it;
 *  - whole tensors: pet_k_dense computes every element a step writes, with an im2col + Z_p GEMM
 *    for convolutions and a Z_p GEMM for matrix products, for values needed (almost) whole.
 * Both forms give the same residues (tests/test_pet_kernels.c checks them against each other and
 * against the float kernels of ir/ on small integers).
 *
 * Invariants: inputs are residues in [0, p); sums of products accumulate in uint64_t, each
 * product first folded below 2^32 (pet_fold1) so that 2^32 terms cannot overflow, or, in the
 * GEMM's inner loop, as raw products folded every 4 terms (4 products < 2^62 plus a folded
 * partial sum < 2^34 stay below 2^64). Dense kernels never allocate inside their loops: one
 * workspace per call. */
#include "pet-impl.h"

/* Hot loops get AVX2 and AVX-512 clones chosen at load time (the build targets baseline
 * x86-64), as ir/ does; not under TSan, whose runtime is not up when ifunc resolvers run. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define PET_HOT_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PET_HOT_CLONES
#endif

static inline const ir_shape *vshape(const pet_prog *p, int v) {
    return &p->values[v].shape;
}

bool pet_k_heavy(pet_step_kind k) {
    return k == PET_MATMUL || k == PET_CONV || k == PET_CONVT || k == PET_AVGPOOL ||
           k == PET_REDUCE || k == PET_CUMSUM;
}

/* ---------------------------------------------------------------- COPY */

static bool copy_covers(const pet_prog *p, const pet_step *s, const int64_t *c) {
    const pet_copy *cp = &s->u.copy;
    for (int i = 0; i < vshape(p, s->out)->rank; i++)
        if (c[i] < cp->ostart[i] || c[i] >= cp->ostart[i] + cp->ext[i]) return false;
    return true;
}

/* The input element output element c (inside the region) reads. */
static int64_t copy_src(const pet_prog *p, const pet_step *s, const int64_t *c) {
    const pet_copy *cp = &s->u.copy;
    int64_t ist[IR_MAX_RANK], off = 0;
    pet_strides(vshape(p, s->in[0]), ist);
    for (int i = 0; i < vshape(p, s->out)->rank; i++) {
        int sd = cp->src_dim[i];
        if (sd < 0) continue;
        int64_t idx = cp->src_start[i] + (c[i] - cp->ostart[i]) * cp->src_step[i];
        if (cp->src_mod[i] > 0) idx %= cp->src_mod[i];
        off += idx * ist[sd];
    }
    return off;
}

static void copy_dense(const pet_prog *p, const pet_step *s, uint32_t *const *buf) {
    const pet_copy *cp = &s->u.copy;
    const ir_shape *os = vshape(p, s->out);
    const uint32_t *in = buf[s->in[0]];
    uint32_t *out = buf[s->out];
    int r = os->rank;
    int64_t ost[IR_MAX_RANK], ist[IR_MAX_RANK], istep[IR_MAX_RANK], c[IR_MAX_RANK];
    bool wrap = false;
    for (int i = 0; i < r; i++) {
        if (cp->ext[i] == 0) return;
        wrap = wrap || cp->src_mod[i] > 0;
    }
    if (r == 0) {
        out[0] = in[0];
        return;
    }
    if (wrap) { /* Tile: element by element */
        int64_t n = 1;
        for (int i = 0; i < r; i++) n *= cp->ext[i];
        pet_strides(os, ost);
        ir_shape reg = ir_shape_make(r, cp->ext);
        for (int64_t e = 0; e < n; e++) {
            pet_unflatten(e, &reg, c);
            int64_t o = 0;
            for (int i = 0; i < r; i++) {
                c[i] += cp->ostart[i];
                o += c[i] * ost[i];
            }
            out[o] = in[copy_src(p, s, c)];
        }
        return;
    }
    pet_strides(os, ost);
    pet_strides(vshape(p, s->in[0]), ist);
    int64_t o = 0, x = 0;
    for (int i = 0; i < r; i++) {
        int sd = cp->src_dim[i];
        istep[i] = sd >= 0 ? cp->src_step[i] * ist[sd] : 0;
        o += cp->ostart[i] * ost[i];
        x += sd >= 0 ? cp->src_start[i] * ist[sd] : 0;
        c[i] = 0;
    }
    const int64_t n = cp->ext[r - 1], os_in = ost[r - 1], is_in = istep[r - 1];
    for (;;) {
        if (os_in == 1 && is_in == 1)
            memcpy(out + o, in + x, sizeof(uint32_t) * (size_t)n);
        else
            for (int64_t j = 0; j < n; j++) out[o + j * os_in] = in[x + j * is_in];
        int dd = r - 2;
        for (; dd >= 0; dd--) {
            o += ost[dd];
            x += istep[dd];
            if (++c[dd] < cp->ext[dd]) break;
            o -= cp->ext[dd] * ost[dd];
            x -= cp->ext[dd] * istep[dd];
            c[dd] = 0;
        }
        if (dd < 0) break;
    }
}

/* ---------------------------------------------------------------- BINARY */

/* Offsets of output element c in a and b. */
static void binary_src(const pet_prog *p, const pet_step *s, const int64_t *c, int64_t *ia,
                       int64_t *ib) {
    int64_t as[IR_MAX_RANK], bs[IR_MAX_RANK], a = 0, b = 0;
    pet_strides(vshape(p, s->in[0]), as);
    pet_strides(vshape(p, s->in[1]), bs);
    for (int i = 0; i < vshape(p, s->out)->rank; i++) {
        if (s->u.bin.a_dim[i] >= 0) a += c[i] * as[s->u.bin.a_dim[i]];
        if (s->u.bin.b_dim[i] >= 0) b += c[i] * bs[s->u.bin.b_dim[i]];
    }
    *ia = a;
    *ib = b;
}

static inline uint32_t binop(int op, uint32_t a, uint32_t b) {
    return op == PET_OP_ADD ? pet_add(a, b) : op == PET_OP_SUB ? pet_sub(a, b) : pet_mul(a, b);
}

static void binary_dense(const pet_prog *p, const pet_step *s, uint32_t *const *buf) {
    const ir_shape *os = vshape(p, s->out);
    const uint32_t *A = buf[s->in[0]], *B = buf[s->in[1]];
    uint32_t *out = buf[s->out];
    const int op = s->u.bin.op, r = os->rank;
    int64_t n = ir_shape_numel(os);
    if (ir_shape_numel(vshape(p, s->in[0])) == n && ir_shape_numel(vshape(p, s->in[1])) == n) {
        for (int64_t e = 0; e < n; e++) out[e] = binop(op, A[e], B[e]);
        return;
    }
    if (n == 0) return;
    if (r == 0) {
        out[0] = binop(op, A[0], B[0]);
        return;
    }
    int64_t as[IR_MAX_RANK], bs[IR_MAX_RANK], sa[IR_MAX_RANK], sb[IR_MAX_RANK], c[IR_MAX_RANK];
    pet_strides(vshape(p, s->in[0]), as);
    pet_strides(vshape(p, s->in[1]), bs);
    for (int i = 0; i < r; i++) {
        sa[i] = s->u.bin.a_dim[i] >= 0 ? as[s->u.bin.a_dim[i]] : 0;
        sb[i] = s->u.bin.b_dim[i] >= 0 ? bs[s->u.bin.b_dim[i]] : 0;
        c[i] = 0;
    }
    const int64_t w = os->dims[r - 1], xa = sa[r - 1], xb = sb[r - 1];
    int64_t o = 0, ia = 0, ib = 0;
    for (;;) {
        for (int64_t j = 0; j < w; j++) out[o + j] = binop(op, A[ia + j * xa], B[ib + j * xb]);
        o += w;
        int dd = r - 2;
        for (; dd >= 0; dd--) {
            ia += sa[dd];
            ib += sb[dd];
            if (++c[dd] < os->dims[dd]) break;
            ia -= os->dims[dd] * sa[dd];
            ib -= os->dims[dd] * sb[dd];
            c[dd] = 0;
        }
        if (dd < 0) break;
    }
}

/* ---------------------------------------------------------------- MATMUL */

/* Offsets of row m of A and column n of B for output element c, and the k strides. */
static void mm_src(const pet_prog *p, const pet_step *s, const int64_t *c, int64_t *a0, int64_t *b0,
                   int64_t *ak, int64_t *bk) {
    const pet_matmul *mm = &s->u.mm;
    int64_t as[IR_MAX_RANK], bs[IR_MAX_RANK], a = 0, b = 0;
    pet_strides(vshape(p, s->in[0]), as);
    pet_strides(vshape(p, s->in[1]), bs);
    for (int i = 0; i < mm->nb; i++) {
        if (mm->a_bdim[i] >= 0) a += c[i] * as[mm->a_bdim[i]];
        if (mm->b_bdim[i] >= 0) b += c[i] * bs[mm->b_bdim[i]];
    }
    if (mm->a_mdim >= 0) a += c[mm->o_mdim] * as[mm->a_mdim];
    if (mm->b_ndim >= 0) b += c[mm->o_ndim] * bs[mm->b_ndim];
    *a0 = a;
    *b0 = b;
    *ak = as[mm->a_kdim];
    *bk = bs[mm->b_kdim];
}

/* C[i * ldc + j] = sum_k A[i * ars + k * acs] * B[k * N + j] for a contiguous K x N matrix B;
 * acc holds GEMM_JB uint64_t. Columns in blocks of GEMM_JB so that the block of B stays in cache
 * while every row of A passes over it. */
#define GEMM_JB 512
PET_HOT_CLONES static void zp_gemm(int64_t M, int64_t N, int64_t K, const uint32_t *A, int64_t ars,
                                   int64_t acs, const uint32_t *B, uint32_t *C, int64_t ldc,
                                   uint64_t *restrict acc) {
    for (int64_t j0 = 0; j0 < N; j0 += GEMM_JB) {
        const int64_t jn = N - j0 < GEMM_JB ? N - j0 : GEMM_JB;
        for (int64_t i = 0; i < M; i++) {
            const uint32_t *a = A + i * ars;
            for (int64_t j = 0; j < jn; j++) acc[j] = 0;
            for (int64_t k = 0; k < K; k++) {
                const uint64_t av = a[k * acs];
                const uint32_t *restrict b = B + k * N + j0;
                for (int64_t j = 0; j < jn; j++) acc[j] += av * b[j];
                if ((k & 3) == 3)
                    for (int64_t j = 0; j < jn; j++) acc[j] = pet_fold1(acc[j]);
            }
            uint32_t *cr = C + i * ldc + j0;
            for (int64_t j = 0; j < jn; j++) cr[j] = pet_fold(acc[j]);
        }
    }
}

static ir_status ws_fail(ir_diag *d) {
    return ir_diag_set(d, IR_ERR_NOMEM, "PET: out of memory for a kernel's workspace");
}

static ir_status matmul_dense(const pet_prog *p, const pet_step *s, uint32_t *const *buf,
                              ir_diag *d) {
    const pet_matmul *mm = &s->u.mm;
    const int64_t M = mm->M, N = mm->N, K = mm->K;
    int64_t as[IR_MAX_RANK], bs[IR_MAX_RANK], c[IR_MAX_RANK] = {0}, nbatch = 1;
    pet_strides(vshape(p, s->in[0]), as);
    pet_strides(vshape(p, s->in[1]), bs);
    for (int i = 0; i < mm->nb; i++) nbatch *= mm->batch[i];
    const int64_t ars = mm->a_mdim >= 0 ? as[mm->a_mdim] : 0, acs = as[mm->a_kdim];
    const int64_t brs = bs[mm->b_kdim], bcs = mm->b_ndim >= 0 ? bs[mm->b_ndim] : 0;
    uint32_t *bp = malloc(sizeof(uint32_t) * (size_t)(K * N > 0 ? K * N : 1));
    uint64_t *acc = malloc(sizeof(uint64_t) * GEMM_JB);
    if (!bp || !acc) {
        free(bp);
        free(acc);
        return ws_fail(d);
    }
    const uint32_t *A = buf[s->in[0]], *B = buf[s->in[1]];
    uint32_t *out = buf[s->out];
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t a0 = 0, b0 = 0, rem = bi;
        for (int i = mm->nb - 1; i >= 0; i--) {
            c[i] = rem % mm->batch[i];
            rem /= mm->batch[i];
            if (mm->a_bdim[i] >= 0) a0 += c[i] * as[mm->a_bdim[i]];
            if (mm->b_bdim[i] >= 0) b0 += c[i] * bs[mm->b_bdim[i]];
        }
        for (int64_t k = 0; k < K; k++) /* B's block as a contiguous K x N matrix */
            for (int64_t j = 0; j < N; j++) bp[k * N + j] = B[b0 + k * brs + j * bcs];
        zp_gemm(M, N, K, A + a0, ars, acs, bp, out + bi * M * N, N, acc);
    }
    free(bp);
    free(acc);
    return IR_OK;
}

/* ---------------------------------------------------------------- convolutions */

/* Output element c as (n, channel, spatial padded to 3). */
static void conv_coords(const pet_conv *cg, const int64_t *c, int64_t *n, int64_t *m, int64_t *o) {
    *n = c[0];
    *m = c[1];
    o[0] = o[1] = o[2] = 0;
    for (int i = 0; i < cg->S; i++) o[3 - cg->S + i] = c[2 + i];
}

/* The taps [*lo, *hi) of a window starting at start with dilation d that land in [0, in). */
static inline void taps(int64_t start, int64_t k, int64_t d, int64_t in, int64_t *lo, int64_t *hi) {
    int64_t l = start < 0 ? (-start + d - 1) / d : 0;
    int64_t h = in - start <= 0 ? 0 : (in - start + d - 1) / d;
    if (h > k) h = k;
    *lo = l;
    *hi = h > l ? h : l;
}

/* Visits the (X offset, W offset) pairs output element c of a convolution sums: VISIT(xo, wo). */
#define CONV_TERMS(cg, c, VISIT)                                                                   \
    do {                                                                                           \
        int64_t n_, m_, o_[3], st_[3], lo_[3], hi_[3];                                             \
        conv_coords(cg, c, &n_, &m_, o_);                                                          \
        const int64_t Cg_ = (cg)->C / (cg)->group, Mg_ = (cg)->M / (cg)->group, g_ = m_ / Mg_;     \
        const int64_t IS_ = (cg)->in[0] * (cg)->in[1] * (cg)->in[2];                               \
        const int64_t KS_ = (cg)->k[0] * (cg)->k[1] * (cg)->k[2];                                  \
        for (int q_ = 0; q_ < 3; q_++) {                                                           \
            st_[q_] = o_[q_] * (cg)->s[q_] - (cg)->pb[q_];                                         \
            taps(st_[q_], (cg)->k[q_], (cg)->d[q_], (cg)->in[q_], &lo_[q_], &hi_[q_]);             \
        }                                                                                          \
        const int64_t xb_ = (n_ * (cg)->C + g_ * Cg_) * IS_, wb_ = m_ * Cg_ * KS_;                 \
        for (int64_t ch_ = 0; ch_ < Cg_; ch_++)                                                    \
            for (int64_t a_ = lo_[0]; a_ < hi_[0]; a_++)                                           \
                for (int64_t b_ = lo_[1]; b_ < hi_[1]; b_++) {                                     \
                    int64_t xr_ =                                                                  \
                        xb_ + ch_ * IS_ +                                                          \
                        ((st_[0] + a_ * (cg)->d[0]) * (cg)->in[1] + st_[1] + b_ * (cg)->d[1]) *    \
                            (cg)->in[2] +                                                          \
                        st_[2];                                                                    \
                    int64_t wr_ = wb_ + ch_ * KS_ + (a_ * (cg)->k[1] + b_) * (cg)->k[2];           \
                    for (int64_t e_ = lo_[2]; e_ < hi_[2]; e_++)                                   \
                        VISIT(xr_ + e_ * (cg)->d[2], wr_ + e_);                                    \
                }                                                                                  \
    } while (0)

/* The same for a transposed convolution: output o receives input i where o + pb - t*d = i*s. */
#define CONVT_TERMS(cg, c, VISIT)                                                                  \
    do {                                                                                           \
        int64_t n_, m_, o_[3];                                                                     \
        conv_coords(cg, c, &n_, &m_, o_);                                                          \
        const int64_t Cg_ = (cg)->C / (cg)->group, Mg_ = (cg)->M / (cg)->group, g_ = m_ / Mg_;     \
        const int64_t mg_ = m_ % Mg_, IS_ = (cg)->in[0] * (cg)->in[1] * (cg)->in[2];               \
        const int64_t KS_ = (cg)->k[0] * (cg)->k[1] * (cg)->k[2];                                  \
        for (int64_t ch_ = g_ * Cg_; ch_ < (g_ + 1) * Cg_; ch_++)                                  \
            for (int64_t t_ = 0; t_ < KS_; t_++) {                                                 \
                int64_t tt_[3] = {t_ / ((cg)->k[1] * (cg)->k[2]), (t_ / (cg)->k[2]) % (cg)->k[1],  \
                                  t_ % (cg)->k[2]},                                                \
                        xo_ = 0;                                                                   \
                bool ok_ = true;                                                                   \
                for (int q_ = 0; q_ < 3 && ok_; q_++) {                                            \
                    int64_t num_ = o_[q_] + (cg)->pb[q_] - tt_[q_] * (cg)->d[q_];                  \
                    ok_ =                                                                          \
                        num_ >= 0 && num_ % (cg)->s[q_] == 0 && num_ / (cg)->s[q_] < (cg)->in[q_]; \
                    xo_ = xo_ * (cg)->in[q_] + (ok_ ? num_ / (cg)->s[q_] : 0);                     \
                }                                                                                  \
                if (ok_) VISIT((n_ * (cg)->C + ch_) * IS_ + xo_, (ch_ * Mg_ + mg_) * KS_ + t_);    \
            }                                                                                      \
    } while (0)

/* Average pooling: the window's X offsets, and its divisor into *div. */
#define POOL_TERMS(cg, c, div, VISIT)                                                              \
    do {                                                                                           \
        int64_t n_, m_, o_[3], st_[3], lo_[3], hi_[3], cp_ = 1, cr_ = 1;                           \
        conv_coords(cg, c, &n_, &m_, o_);                                                          \
        const int64_t IS_ = (cg)->in[0] * (cg)->in[1] * (cg)->in[2];                               \
        for (int q_ = 0; q_ < 3; q_++) {                                                           \
            st_[q_] = o_[q_] * (cg)->s[q_] - (cg)->pb[q_];                                         \
            taps(st_[q_], (cg)->k[q_], 1, (cg)->in[q_], &lo_[q_], &hi_[q_]);                       \
            int64_t e_ = st_[q_] + (cg)->k[q_], lim_ = (cg)->in[q_] + (cg)->pe[q_];                \
            cp_ *= (e_ > lim_ ? lim_ : e_) - st_[q_];                                              \
            cr_ *= hi_[q_] - lo_[q_];                                                              \
        }                                                                                          \
        *(div) = (cg)->count_pad ? cp_ : cr_;                                                      \
        const int64_t xb_ = (n_ * (cg)->C + m_) * IS_;                                             \
        for (int64_t a_ = lo_[0]; a_ < hi_[0]; a_++)                                               \
            for (int64_t b_ = lo_[1]; b_ < hi_[1]; b_++) {                                         \
                int64_t xr_ =                                                                      \
                    xb_ + ((st_[0] + a_) * (cg)->in[1] + st_[1] + b_) * (cg)->in[2] + st_[2];      \
                for (int64_t e_ = lo_[2]; e_ < hi_[2]; e_++) VISIT(xr_ + e_);                      \
            }                                                                                      \
    } while (0)

/* col[(c, kd, kh, kw), (od, oh, ow)] = X[c, od*s - pb + kd*d, ...] (0 outside), for the Cg
 * channels starting at x. */
static void zp_im2col(const pet_conv *cg, const uint32_t *x, int64_t Cg, uint32_t *col) {
    const int64_t IS = cg->in[0] * cg->in[1] * cg->in[2], OS = cg->out[0] * cg->out[1] * cg->out[2];
    int64_t row = 0;
    for (int64_t ch = 0; ch < Cg; ch++)
        for (int64_t a = 0; a < cg->k[0]; a++)
            for (int64_t b = 0; b < cg->k[1]; b++)
                for (int64_t e = 0; e < cg->k[2]; e++, row++) {
                    uint32_t *cr = col + row * OS;
                    for (int64_t od = 0; od < cg->out[0]; od++) {
                        int64_t id = od * cg->s[0] - cg->pb[0] + a * cg->d[0];
                        for (int64_t oh = 0; oh < cg->out[1]; oh++) {
                            int64_t ih = oh * cg->s[1] - cg->pb[1] + b * cg->d[1];
                            uint32_t *cw = cr + (od * cg->out[1] + oh) * cg->out[2];
                            if (id < 0 || id >= cg->in[0] || ih < 0 || ih >= cg->in[1]) {
                                memset(cw, 0, sizeof(uint32_t) * (size_t)cg->out[2]);
                                continue;
                            }
                            const uint32_t *xr = x + ch * IS + (id * cg->in[1] + ih) * cg->in[2];
                            for (int64_t ow = 0; ow < cg->out[2]; ow++) {
                                int64_t iw = ow * cg->s[2] - cg->pb[2] + e * cg->d[2];
                                cw[ow] = iw >= 0 && iw < cg->in[2] ? xr[iw] : 0;
                            }
                        }
                    }
                }
}

static ir_status conv_dense(const pet_prog *p, const pet_step *s, uint32_t *const *buf,
                            ir_diag *d) {
    const pet_conv *cg = &s->u.conv;
    const int64_t Cg = cg->C / cg->group, Mg = cg->M / cg->group;
    const int64_t IS = cg->in[0] * cg->in[1] * cg->in[2], OS = cg->out[0] * cg->out[1] * cg->out[2];
    const int64_t KS = cg->k[0] * cg->k[1] * cg->k[2], K = Cg * KS;
    uint32_t *col = malloc(sizeof(uint32_t) * (size_t)(K * OS > 0 ? K * OS : 1));
    uint64_t *acc = malloc(sizeof(uint64_t) * GEMM_JB);
    if (!col || !acc) {
        free(col);
        free(acc);
        return ws_fail(d);
    }
    const uint32_t *X = buf[s->in[0]], *W = buf[s->in[1]];
    uint32_t *Y = buf[s->out];
    for (int64_t n = 0; n < cg->N; n++)
        for (int64_t g = 0; g < cg->group; g++) {
            zp_im2col(cg, X + (n * cg->C + g * Cg) * IS, Cg, col);
            zp_gemm(Mg, OS, K, W + g * Mg * K, K, 1, col, Y + (n * cg->M + g * Mg) * OS, OS, acc);
        }
    (void)p;
    free(col);
    free(acc);
    return IR_OK;
}

/* ---------------------------------------------------------------- REDUCE, CUMSUM */

/* The kept-dim offset of output element c in the input, and the reduced dims' extents and
 * strides (nr of them). */
static int64_t reduce_base(const pet_prog *p, const pet_step *s, const int64_t *c, int *nr,
                           int64_t *rext, int64_t *rstr) {
    const pet_reduce *rd = &s->u.red;
    const ir_shape *is = vshape(p, s->in[0]);
    int64_t ist[IR_MAX_RANK], base = 0;
    pet_strides(is, ist);
    *nr = 0;
    for (int i = 0; i < rd->rank; i++) {
        if (rd->reduced[i]) {
            rext[*nr] = is->dims[i];
            rstr[(*nr)++] = ist[i];
        } else if (rd->out_dim[i] >= 0) {
            base += c[rd->out_dim[i]] * ist[i];
        }
    }
    return base;
}

/* Visits every input offset output element c of a REDUCE sums: VISIT(offset). */
#define REDUCE_TERMS(p, s, c, VISIT)                                                               \
    do {                                                                                           \
        int nr_;                                                                                   \
        int64_t rext_[IR_MAX_RANK], rstr_[IR_MAX_RANK], idx_[IR_MAX_RANK] = {0}, tot_ = 1;         \
        int64_t off_ = reduce_base(p, s, c, &nr_, rext_, rstr_);                                   \
        for (int q_ = 0; q_ < nr_; q_++) tot_ *= rext_[q_];                                        \
        for (int64_t t_ = 0; t_ < tot_; t_++) {                                                    \
            VISIT(off_);                                                                           \
            for (int q_ = nr_ - 1; q_ >= 0; q_--) {                                                \
                off_ += rstr_[q_];                                                                 \
                if (++idx_[q_] < rext_[q_]) break;                                                 \
                off_ -= rext_[q_] * rstr_[q_];                                                     \
                idx_[q_] = 0;                                                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static void reduce_dense(const pet_prog *p, const pet_step *s, uint32_t *const *buf) {
    const pet_reduce *rd = &s->u.red;
    const ir_shape *is = vshape(p, s->in[0]), *os = vshape(p, s->out);
    int64_t ost[IR_MAX_RANK], str[IR_MAX_RANK], c[IR_MAX_RANK] = {0};
    pet_strides(os, ost);
    for (int i = 0; i < rd->rank; i++)
        str[i] = !rd->reduced[i] && rd->out_dim[i] >= 0 ? ost[rd->out_dim[i]] : 0;
    const uint32_t *x = buf[s->in[0]];
    uint32_t *y = buf[s->out];
    memset(y, 0, sizeof(uint32_t) * (size_t)ir_shape_numel(os));
    int64_t n = ir_shape_numel(is), o = 0;
    for (int64_t e = 0; e < n; e++) {
        y[o] = pet_add(y[o], x[e]);
        for (int i = rd->rank - 1; i >= 0; i--) {
            o += str[i];
            if (++c[i] < is->dims[i]) break;
            o -= is->dims[i] * str[i];
            c[i] = 0;
        }
    }
}

/* Output element c of a CUMSUM: its line's first offset, stride and the range [lo, hi) of
 * positions summed. */
static void cumsum_range(const pet_prog *p, const pet_step *s, const int64_t *c, int64_t *base,
                         int64_t *stride, int64_t *lo, int64_t *hi) {
    const pet_cumsum *cs = &s->u.cum;
    const ir_shape *is = vshape(p, s->in[0]);
    int64_t ist[IR_MAX_RANK], b = 0;
    pet_strides(is, ist);
    for (int i = 0; i < is->rank; i++)
        if (i != cs->axis) b += c[i] * ist[i];
    int64_t j = c[cs->axis], len = is->dims[cs->axis];
    if (!cs->reverse) {
        *lo = 0;
        *hi = cs->exclusive ? j : j + 1;
    } else {
        *lo = cs->exclusive ? j + 1 : j;
        *hi = len;
    }
    *base = b;
    *stride = ist[cs->axis];
}

/* ---------------------------------------------------------------- per element */

void pet_k_mark(const pet_prog *p, const pet_step *s, const int64_t *c, uint64_t *const *dem) {
    uint64_t *da = s->in[0] >= 0 ? dem[s->in[0]] : NULL, *db = s->in[1] >= 0 ? dem[s->in[1]] : NULL;
    switch (s->kind) {
    case PET_ZERO: break;
    case PET_COPY: pet_bm_set(da, copy_src(p, s, c)); break;
    case PET_RESHAPE:
    case PET_SCALE: {
        int64_t st[IR_MAX_RANK], e = 0;
        const ir_shape *os = vshape(p, s->out);
        pet_strides(os, st);
        for (int i = 0; i < os->rank; i++) e += c[i] * st[i];
        pet_bm_set(da, e);
        break;
    }
    case PET_BINARY: {
        int64_t ia, ib;
        binary_src(p, s, c, &ia, &ib);
        pet_bm_set(da, ia);
        pet_bm_set(db, ib);
        break;
    }
    case PET_MATMUL: {
        int64_t a0, b0, ak, bk;
        mm_src(p, s, c, &a0, &b0, &ak, &bk);
        for (int64_t k = 0; k < s->u.mm.K; k++) {
            pet_bm_set(da, a0 + k * ak);
            pet_bm_set(db, b0 + k * bk);
        }
        break;
    }
#define MARK2(xo, wo) (pet_bm_set(da, xo), pet_bm_set(db, wo))
#define MARK1(xo) pet_bm_set(da, xo)
    case PET_CONV: CONV_TERMS(&s->u.conv, c, MARK2); break;
    case PET_CONVT: CONVT_TERMS(&s->u.conv, c, MARK2); break;
    case PET_AVGPOOL: {
        int64_t div;
        POOL_TERMS(&s->u.conv, c, &div, MARK1);
        break;
    }
    case PET_REDUCE: REDUCE_TERMS(p, s, c, MARK1); break;
    case PET_CUMSUM: {
        int64_t b, st, lo, hi;
        cumsum_range(p, s, c, &b, &st, &lo, &hi);
        for (int64_t j = lo; j < hi; j++) pet_bm_set(da, b + j * st);
        break;
    }
#undef MARK1
#undef MARK2
    default: IR_ASSERT(!"unknown step kind");
    }
}

uint32_t pet_k_elem(const pet_prog *p, const pet_step *s, uint32_t *const *buf, const int64_t *c) {
    const uint32_t *A = s->in[0] >= 0 ? buf[s->in[0]] : NULL,
                   *B = s->in[1] >= 0 ? buf[s->in[1]] : NULL;
    uint64_t acc = 0;
    switch (s->kind) {
    case PET_ZERO: return 0;
    case PET_COPY: return A[copy_src(p, s, c)];
    case PET_RESHAPE:
    case PET_SCALE: {
        int64_t st[IR_MAX_RANK], e = 0;
        const ir_shape *os = vshape(p, s->out);
        pet_strides(os, st);
        for (int i = 0; i < os->rank; i++) e += c[i] * st[i];
        return s->kind == PET_SCALE ? pet_mul(A[e], s->u.scale) : A[e];
    }
    case PET_BINARY: {
        int64_t ia, ib;
        binary_src(p, s, c, &ia, &ib);
        return binop(s->u.bin.op, A[ia], B[ib]);
    }
    case PET_MATMUL: {
        int64_t a0, b0, ak, bk;
        mm_src(p, s, c, &a0, &b0, &ak, &bk);
        for (int64_t k = 0; k < s->u.mm.K; k++)
            acc += pet_fold1((uint64_t)A[a0 + k * ak] * B[b0 + k * bk]);
        return pet_fold(acc);
    }
#define MAC(xo, wo) (acc += pet_fold1((uint64_t)A[xo] * B[wo]))
#define ADD1(xo) (acc += A[xo])
    case PET_CONV: CONV_TERMS(&s->u.conv, c, MAC); return pet_fold(acc);
    case PET_CONVT: CONVT_TERMS(&s->u.conv, c, MAC); return pet_fold(acc);
    case PET_AVGPOOL: {
        int64_t div;
        POOL_TERMS(&s->u.conv, c, &div, ADD1);
        return div > 0 ? pet_mul(pet_fold(acc), s->u.conv.inv[div]) : 0;
    }
    case PET_REDUCE: REDUCE_TERMS(p, s, c, ADD1); return pet_fold(acc);
    case PET_CUMSUM: {
        int64_t b, st, lo, hi;
        cumsum_range(p, s, c, &b, &st, &lo, &hi);
        for (int64_t j = lo; j < hi; j++) acc += A[b + j * st];
        return pet_fold(acc);
    }
#undef MAC
#undef ADD1
    default: IR_ASSERT(!"unknown step kind");
    }
    return 0;
}

/* Every element through pet_k_elem (the kinds whose dense form is no faster). */
static void elem_dense(const pet_prog *p, const pet_step *s, uint32_t *const *buf) {
    const ir_shape *os = vshape(p, s->out);
    int64_t n = ir_shape_numel(os), c[IR_MAX_RANK] = {0};
    uint32_t *out = buf[s->out];
    for (int64_t e = 0; e < n; e++) {
        out[e] = pet_k_elem(p, s, buf, c);
        for (int i = os->rank - 1; i >= 0; i--) {
            if (++c[i] < os->dims[i]) break;
            c[i] = 0;
        }
    }
}

ir_status pet_k_dense(const pet_prog *p, const pet_step *s, uint32_t *const *buf, ir_diag *d) {
    const ir_shape *os = vshape(p, s->out);
    int64_t n = ir_shape_numel(os);
    uint32_t *out = buf[s->out];
    switch (s->kind) {
    case PET_ZERO: memset(out, 0, sizeof(uint32_t) * (size_t)n); return IR_OK;
    case PET_COPY: copy_dense(p, s, buf); return IR_OK;
    case PET_RESHAPE: memcpy(out, buf[s->in[0]], sizeof(uint32_t) * (size_t)n); return IR_OK;
    case PET_SCALE: {
        const uint32_t *x = buf[s->in[0]];
        for (int64_t e = 0; e < n; e++) out[e] = pet_mul(x[e], s->u.scale);
        return IR_OK;
    }
    case PET_BINARY: binary_dense(p, s, buf); return IR_OK;
    case PET_MATMUL: return matmul_dense(p, s, buf, d);
    case PET_CONV: return conv_dense(p, s, buf, d);
    case PET_REDUCE: reduce_dense(p, s, buf); return IR_OK;
    case PET_CONVT:
    case PET_AVGPOOL:
    case PET_CUMSUM: elem_dense(p, s, buf); return IR_OK;
    default: IR_ASSERT(!"unknown step kind");
    }
    return IR_OK;
}

bool pet_k_covers(const pet_prog *p, const pet_step *s, const int64_t *c) {
    return s->kind != PET_COPY || copy_covers(p, s, c);
}
