/* randwire.h - randomly wired networks (Xie et al. 2019, "Exploring randomly wired neural
 * networks for image recognition") built directly as magpie graphs, the irregular benchmark of
 * Serenity and HMCOS for memory-aware scheduling; and the reverse post-order baseline.
 *
 * A cell is a Watts-Strogatz graph WS(nodes, k, p) made a DAG by node index, generated as
 * HMCOS's script/randwire.py does (ring of k/2 neighbours each side, each of the k/2 forward
 * edges of node i rewired with probability p to a uniformly chosen node not yet adjacent to i),
 * with our own deterministic generator (splitmix64 from the seed). Each DAG node is
 *   [Sum of its predecessors' outputs, when it has several] -> Relu -> 3x3 conv -> [BatchNorm]
 * where the 3x3 conv is separable by default (depthwise 3x3 + pointwise 1x1, as HMCOS's Keras
 * SeparableConv2D; neither needs workspace) or one dense 3x3 Conv (im2col workspace). Nodes
 * without predecessors read the cell input with stride 2; the outputs of nodes without
 * successors are summed into the cell output (HMCOS averages them; the scale does not change
 * any memory). Cell s (from 0) has channels << s filters and runs at size >> (s + 1); the graph
 * input is 1 x channels x size x size (HMCOS's stem output, 1x78x56x56), cells are chained,
 * and the last cell's output is the graph output. Weights are graph inputs without values
 * (filled from a seed by `magpie run`), so a saved model stays small. */
#ifndef MAGPIE_RANDWIRE_H
#define MAGPIE_RANDWIRE_H

#include "ir.h"

typedef struct rw_config {
    int stages;     /* cells chained (1 or 3 in the benchmark) */
    int nodes;      /* DAG nodes per cell (32) */
    int k;          /* ring degree, even (4) */
    double p;       /* rewiring probability (0.75) */
    uint64_t seed;  /* with stages and the cell index, picks each cell's random graph */
    int channels;   /* input channels and first cell's filters (78) */
    int size;       /* input spatial size (56) */
    bool dense;     /* one dense 3x3 Conv instead of depthwise + pointwise */
    bool batchnorm; /* BatchNormalization after each conv */
} rw_config;

/* The defaults above for `stages` cells of `nodes` nodes and a seed. */
rw_config rw_default(int stages, int nodes, uint64_t seed);

/* Builds the network with inferred shapes. NULL with a message in d on failure (bad config). */
ir_graph *rw_build(const rw_config *c, ir_diag *d);

/* Builds the network and writes it as ONNX (opset 13) to path. */
ir_status rw_save_onnx(const rw_config *c, const char *path, ir_diag *d);

/* HMCOS's baseline order (its ReversePostOrder, RpoIter from the graph outputs): a depth-first
 * search that starts at the producers of the graph outputs, in output order, walks from each
 * node to the distinct producers of its inputs in input order, and emits a node once all of
 * them have been emitted (post-order of the reversed graph, which is a topological order).
 * Nodes that reach no output follow in index order. Returns g->n_nodes indices (malloc'd) or
 * NULL on out of memory. */
int *rw_reverse_post_order(const ir_graph *g);

/* Bytes of the graph inputs flagged IR_VF_PARAM (the weights): constant in every order. */
size_t rw_param_bytes(const ir_graph *g);

#endif
