/* bench_conv_tiles.c - the executor's Conv, ConvGradWeight and ConvTranspose kernels with their
 * column buffer tiled (ir_conv_col_bytes, ir-geom.h: at most 256 KiB by default) against one
 * whole buffer per (sample, group) as before tiling (a bound no layer reaches), side by side in
 * one process: each round runs every bound once, in turn, and the medians over rounds are
 * reported with their ratio, with the run's peak (the workspace is part of it).
 *
 * Usage: bench_conv_tiles [--rounds R] [--bytes B,...]
 * The layers are those where tiling bites: U-Net's output stage (the emitted-step benchmark's
 * unet_transpose), ResNet-50's 3x3 stages and its stem, and a U-Net decoder's transposed conv.
 * Times are the kernel's CPU seconds on one thread (run it with OMP_NUM_THREADS=1 and
 * OPENBLAS_NUM_THREADS=1), which a busy machine's waits for a core do not inflate. */
#include "ir-geom.h"
#include "bench-median.h"
#include "rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct layer {
    const char *name;
    ir_op_kind op;
    int64_t N, C, M, H, W, k, s, p;
} layer;

static const layer layers[] = {
    {"unet out 16->8 3x3 @32", IR_OP_ConvGradWeight, 2, 16, 8, 32, 32, 3, 1, 1},
    {"unet out 16->8 3x3 @32", IR_OP_Conv, 2, 16, 8, 32, 32, 3, 1, 1},
    {"r50 stem 3->64 7x7/2 @224", IR_OP_Conv, 1, 3, 64, 224, 224, 7, 2, 3},
    {"r50 stem 3->64 7x7/2 @224", IR_OP_ConvGradWeight, 1, 3, 64, 224, 224, 7, 2, 3},
    {"r50 64 3x3 @56", IR_OP_Conv, 1, 64, 64, 56, 56, 3, 1, 1},
    {"r50 64 3x3 @56", IR_OP_ConvGradWeight, 1, 64, 64, 56, 56, 3, 1, 1},
    {"r50 128 3x3 @28", IR_OP_Conv, 2, 128, 128, 28, 28, 3, 1, 1},
    {"r50 128 3x3 @28", IR_OP_ConvGradWeight, 2, 128, 128, 28, 28, 3, 1, 1},
    {"r50 256 3x3 @14", IR_OP_Conv, 4, 256, 256, 14, 14, 3, 1, 1},
    {"r50 256 3x3 @14", IR_OP_ConvGradWeight, 4, 256, 256, 14, 14, 3, 1, 1},
    {"r50 512 3x3 @7", IR_OP_Conv, 8, 512, 512, 7, 7, 3, 1, 1},
    {"r50 512 3x3 @7", IR_OP_ConvGradWeight, 8, 512, 512, 7, 7, 3, 1, 1},
    {"dX of 64->64 3x3 @56", IR_OP_ConvTranspose, 1, 64, 64, 56, 56, 3, 1, 1},
    {"unet up 64->32 2x2/2 @28", IR_OP_ConvTranspose, 2, 64, 32, 28, 28, 2, 2, 0},
};
#define N_LAYERS ((int)(sizeof layers / sizeof layers[0]))

static int64_t *ints(ir_graph *g, int n, int64_t v) {
    int64_t *p = ir_graph_alloc(g, sizeof(int64_t) * (size_t)n);
    for (int i = 0; p && i < n; i++) p[i] = v;
    return p;
}

/* One node of the layer: Conv(X, W), ConvGradWeight(X, dY) or ConvTranspose(X, W), its inputs
 * graph inputs that rt_run fills with seeded values. */
static ir_graph *build(const layer *l, ir_diag *d) {
    ir_graph *g = ir_graph_new();
    if (!g) return NULL;
    const int64_t o = (l->H + 2 * l->p - l->k) / l->s + 1;
    ir_shape xs = {.rank = 4, .dims = {l->N, l->C, l->H, l->W}};
    ir_shape ws = {.rank = 4, .dims = {l->M, l->C, l->k, l->k}};
    ir_shape ys = {.rank = 4, .dims = {l->N, l->M, o, o}};
    if (l->op == IR_OP_ConvTranspose) ws = (ir_shape){.rank = 4, .dims = {l->C, l->M, l->k, l->k}};
    int x = ir_graph_add_value(g, "x", IR_F32, &xs);
    int w = ir_graph_add_value(g, l->op == IR_OP_ConvGradWeight ? "dy" : "w", IR_F32,
                               l->op == IR_OP_ConvGradWeight ? &ys : &ws);
    int y = ir_graph_add_value(g, "y", IR_F32, NULL);
    ir_graph_add_input(g, x);
    ir_graph_add_input(g, w);
    g->values[x].flags |= IR_VF_DATA;
    g->values[w].flags |= IR_VF_DATA;
    ir_attr at[3] = {
        {.name = "strides", .type = IR_ATTR_INTS, .n = 2, .ints = ints(g, 2, l->s)},
        {.name = "pads", .type = IR_ATTR_INTS, .n = 4, .ints = ints(g, 4, l->p)},
        {.name = "kernel_shape", .type = IR_ATTR_INTS, .n = 2, .ints = ints(g, 2, l->k)}};
    int in[2] = {x, w};
    int ni = ir_graph_add_node(g, l->op, "n", 2, in, 1, &y, 3, at);
    if (ni < 0 || ir_node_infer(g, &g->nodes[ni], d) != IR_OK) {
        ir_graph_free(g);
        return NULL;
    }
    ir_graph_add_output(g, y);
    return g;
}

int main(int argc, char **argv) {
    int rounds = 15, nb = 0;
    int64_t bytes[8];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--bytes") && i + 1 < argc) {
            for (char *t = strtok(argv[++i], ","); t && nb < 8; t = strtok(NULL, ","))
                bytes[nb++] = strtoll(t, NULL, 10);
        } else {
            fprintf(stderr, "usage: bench_conv_tiles [--rounds R] [--bytes B,...]\n");
            return 2;
        }
    }
    if (rounds < 1) rounds = 1;
    if (nb == 0) bytes[nb++] = IR_CONV_COL_BYTES;
    const char *omp = getenv("OMP_NUM_THREADS"), *blas = getenv("OPENBLAS_NUM_THREADS");
    if (!omp || strcmp(omp, "1") || !blas || strcmp(blas, "1")) {
        fprintf(stderr, "bench_conv_tiles: run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "
                        "(the times are one thread's CPU seconds)\n");
        return 2;
    }
    const int64_t whole = INT64_MAX / 4; /* one buffer per (sample, group): the untiled kernel */
    printf("| layer | op | whole buffer: ms, peak B |");
    for (int b = 0; b < nb; b++)
        printf(" tiles <= %lld B: ms, peak B, / whole |", (long long)bytes[b]);
    printf("\n| --- | --- | ---: |");
    for (int b = 0; b < nb; b++) printf(" ---: |");
    printf("\n");
    double *t = malloc(sizeof(double) * (size_t)rounds * (size_t)(nb + 1));
    for (int li = 0; li < N_LAYERS; li++) {
        const layer *l = &layers[li];
        ir_diag d = {{0}};
        ir_graph *g = build(l, &d);
        if (!g || !t) {
            fprintf(stderr, "bench_conv_tiles: %s: %s\n", l->name, d.msg);
            return 1;
        }
        size_t peak[9] = {0};
        rt_options o = {.fill_missing_data = true};
        for (int r = -1; r < rounds; r++) /* one warm-up round */
            for (int b = 0; b <= nb; b++) {
                ir_conv_col_bytes = b == 0 ? whole : bytes[b - 1];
                rt_result rr;
                if (rt_run(g, NULL, 0, &o, &rr, &d) != IR_OK) {
                    fprintf(stderr, "bench_conv_tiles: %s\n", d.msg);
                    return 1;
                }
                if (r >= 0) t[b * rounds + r] = rr.cpu_seconds;
                peak[b] = rr.peak_bytes;
                rt_result_free(&rr);
            }
        ir_conv_col_bytes = IR_CONV_COL_BYTES;
        double m0 = median(t, rounds);
        printf("| %s | %s | %.3f, %zu |", l->name, ir_op_get(l->op)->name, 1e3 * m0, peak[0]);
        for (int b = 1; b <= nb; b++) {
            double mb = median(t + b * rounds, rounds);
            printf(" %.3f, %zu, %.3f |", 1e3 * mb, peak[b], mb / m0);
        }
        printf("\n");
        fflush(stdout);
        ir_graph_free(g);
    }
    free(t);
    return 0;
}
