/* prof-targets.c - the one table of named analytic targets. Figures are the vendors' datasheet
 * numbers (dense, no sparsity); rtx3090 is the MAGIS paper's GPU and magpie's default device.
 * Changing a figure is never a way to reach a benchmark goal.
 *
 * The last column, knee_s, is not a datasheet figure but the small-op ramp of the roofline
 * (prof.h): an op that would take knee_s at the peak rate reaches half of it, because a kernel
 * that fills fewer than one wave of thread blocks leaves SMs idle and pays its prologue and tail
 * unhidden. 1 us (a few thousand cycles at ~1.7 GHz) is the order of one wave of a tiled GEMM on
 * every GPU listed; in FLOPs the knee therefore grows with the peak rate, so bigger GPUs need
 * bigger ops to be efficient, as they do. */
#include "prof.h"

#include <stdio.h>
#include <string.h>

#define T 1e12
#define G 1e9

static const prof_target targets[] = {
    /* GeForce RTX 3090 (GA102): 35.6 TFLOP/s FP32 and TF32 tensor (dense), 71 TFLOP/s FP16
     * tensor with FP32 accumulate, 936 GB/s GDDR6X, PCIe 4.0 x16 */
    {"rtx3090", "NVIDIA GeForce RTX 3090 (Ampere GA102, 24 GB GDDR6X, PCIe 4.0 x16)", 35.6 * T,
     71 * T, 35.6 * T, 936 * G, 25 * G, 5e-6, 1e-6},
    /* A100 SXM4 80 GB: TF32 156 TFLOP/s dense, FP16 312, FP32 19.5, HBM2e 2039 GB/s, PCIe 4.0 */
    {"a100", "NVIDIA A100 SXM4 80 GB (Ampere GA100, HBM2e, PCIe 4.0 x16)", 156 * T, 312 * T,
     19.5 * T, 2039 * G, 25 * G, 5e-6, 1e-6},
    /* H100 SXM5: TF32 494.7 TFLOP/s dense, FP16 989.4, FP32 66.9, HBM3 3.35 TB/s, PCIe 5.0 */
    {"h100", "NVIDIA H100 SXM5 80 GB (Hopper GH100, HBM3, PCIe 5.0 x16)", 494.7 * T, 989.4 * T,
     66.9 * T, 3350 * G, 50 * G, 5e-6, 1e-6},
    /* H200 SXM: H100's compute with 141 GB HBM3e at 4.8 TB/s */
    {"h200", "NVIDIA H200 SXM 141 GB (Hopper GH100, HBM3e, PCIe 5.0 x16)", 494.7 * T, 989.4 * T,
     66.9 * T, 4800 * G, 50 * G, 5e-6, 1e-6},
};

const prof_target *prof_targets(int *n) {
    *n = (int)(sizeof targets / sizeof targets[0]);
    return targets;
}

const prof_target *prof_target_find(const char *name) {
    int n;
    const prof_target *t = prof_targets(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return &t[i];
    return NULL;
}

const char *prof_target_names(char *buf, size_t n) {
    int cnt;
    const prof_target *t = prof_targets(&cnt);
    size_t len = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < cnt && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "", t[i].name);
        if (w < 0) break;
        len += (size_t)w;
    }
    return buf;
}
