/* ir-einsum.h - Einsum's parsed equation: one definition of its index map, read by the CPU kernel,
 * its gradient and dims (ops-einsum.c) and by PET's prime-field compiler and box propagation
 * (rules/pet/), so that every consumer agrees on which index is which. Part of ir's public
 * interface, like ir-geom.h.
 *
 * Every index of the equation, letter or one of the dims "..." stands for, is a label 0..n_labels:
 * the letters in order of first appearance, then the ellipsis dims (right-aligned across the
 * operands, numpy's rule). An operand dim of size 1 broadcasts against the label's size. */
#ifndef MAGPIE_IR_EINSUM_H
#define MAGPIE_IR_EINSUM_H

#include "ir.h"

#define IR_EINSUM_MAX_OPS 8
#define IR_EINSUM_MAX_LABELS 64

typedef struct ir_einsum {
    int n_ops, n_labels, n_out;
    int rank[IR_EINSUM_MAX_OPS];
    int8_t label[IR_EINSUM_MAX_OPS][IR_MAX_RANK]; /* operand k's dim i is label label[k][i] */
    int8_t out[IR_MAX_RANK];                      /* the output's dims, as labels */
    int64_t size[IR_EINSUM_MAX_LABELS];           /* each label's extent */
    char letter[IR_EINSUM_MAX_LABELS];            /* the letter, 0 for an ellipsis dim */
    bool in_out[IR_EINSUM_MAX_LABELS];            /* the label is an output dim */
    /* some operand names the label twice (a diagonal, "ii->i") */
    bool repeated[IR_EINSUM_MAX_LABELS];
} ir_einsum;

/* Parses eq for operands of shapes s[0..n) (explicit "->" output or numpy's implicit one: the
 * ellipsis dims, then the letters used once, in alphabetical order). IR_ERR_INVALID with a
 * message naming n for a malformed equation or operand shapes that do not fit it. */
ir_status ir_einsum_parse(const char *eq, int n, const ir_shape *const *s, const ir_node *node,
                          ir_einsum *e, ir_diag *d);
/* The same for Einsum node n of g, from its attribute and its inputs' shapes. */
ir_status ir_einsum_of(const ir_graph *g, const ir_node *n, ir_einsum *e, ir_diag *d);
/* Element stride of each label in operand k of shape sh (the sum over the dims that name it; 0
 * along a broadcast size-1 dim). */
void ir_einsum_strides(const ir_einsum *e, int k, const ir_shape *sh, int64_t *st);

#endif
