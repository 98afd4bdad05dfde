/* ir-train.h - private state shared by ir-autodiff.c (the builder helpers) and ir-train.c (the
 * driver: losses, the reverse sweep, optimizer updates). Builders see it only through
 * ir-autodiff.h. */
#ifndef MAGPIE_IR_TRAIN_H
#define MAGPIE_IR_TRAIN_H

#include "ir-autodiff.h"
#include "ir-impl.h"

typedef struct ir_ad ir_ad;

struct ir_ad {
    ir_graph *g;
    int n_fwd;            /* values of the forward graph (loss included): grad/needs entries */
    int *grad;            /* per forward value: its accumulated gradient's value id, or -1 */
    unsigned char *needs; /* per forward value: a float value that leads to a parameter */
    int *gout;            /* the current node's output gradients (lazily zero-filled) */
    int n_gout, cap_gout;
    ir_node node_copy; /* the current forward node, as the builder sees it */
    int *const_tab;    /* open addressing: value ids of constants, -1 empty */
    int const_cap, n_consts;
    int n_names; /* counter that makes the names of emitted values and nodes unique */
    ir_status st;
    ir_diag d;
};

ir_status ir_ad_init(struct ir_ad *ad, ir_graph *g);
void ir_ad_free(struct ir_ad *ad);
/* Adds grad (unbroadcast to the value's shape) to the gradient of forward value v. */
ir_status ir_ad_add_grad(ir_grad_ctx *c, int v, int grad);

#endif
