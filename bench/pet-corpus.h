/* pet-corpus.h - PET programs shared by the verifier's benchmark (bench_pet_verify.c) and the
 * CPU/GPU residue check (pet_gpu_check.c): the paper's mutant pairs at a chosen size, and one
 * small program per op the verifier compiles, so that every step kind of rules/pet.h runs.
 * Graphs are built with shapes inferred; the caller frees them (ir_graph_free). Building
 * aborts with a message on an inference failure (a bug in the corpus, not an input error). */
#ifndef MAGPIE_PET_CORPUS_H
#define MAGPIE_PET_CORPUS_H

#include "ir.h"

/* Figure 1: a 3x3 conv (C -> C channels, pads 1) over a batch of 2 images of H x W; the mutant
 * lays the two images side by side along the width (reshape, transpose, reshape, conv, back). */
void pc_figure1(int64_t C, int64_t H, int64_t W, ir_graph **orig, ir_graph **mutant);
/* Figure 3: a 3x3 conv with dilation 2 and pads 2 (C -> C, H and W even); the mutant is a
 * regular conv on the input rearranged phase-major along height and width. */
void pc_figure3(int64_t C, int64_t H, int64_t W, ir_graph **orig, ir_graph **mutant);
/* A 3x3 conv (C -> C, pads 1, batch 1) and a mutant adding a slice of the input on the box
 * [h0, h1) x [w0, w1) only. */
void pc_planted(int64_t C, int64_t H, int64_t W, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                ir_graph **orig, ir_graph **mutant);

/* Single-op (or few-op) programs covering every op PET compiles; at most max into g[] and their
 * names into names[]; returns how many. */
int pc_single_ops(ir_graph **g, const char **names, int max);

#endif
