/* emit-torch-grid.c - the PyTorch statements of GridSample and its two gradients (emit-torch.h),
 * with the semantics of ir/ops-gridsample.c (ONNX's GridSample, which magpie's kernels follow).
 *
 * GridSample is F.grid_sample; GridSampleGrad and GridSampleGridGrad are PyTorch's own sampler
 * backward (aten::grid_sampler_2d_backward / _3d_backward) with its output mask asking for dX or
 * for the grid's gradient alone, so each allocates its own output as magpie's kernel does. The
 * prelude's _gs_grid hands PyTorch a grid already padded ONNX's way where the two differ (cubic
 * with border or reflection, nearest with reflection), and a 1-D sampler (3-D X) runs as a 2-D one
 * of height 1. PyTorch has no 3-D cubic sampler: a 5-D X in cubic mode is refused. */
#include "emit-torch.h"

#include <string.h>

/* The sampler's attributes as Python arguments: "mode", "padding_mode", align_corners. Refuses a
 * mode or padding the kernels do not know and a 5-D cubic sampler. */
static ir_status gs_args(et_ctx *e, const ir_node *n, int rank, const char **mode, const char **pad,
                         const char **align) {
    *mode = ir_attr_str(n, "mode", "linear");
    *pad = ir_attr_str(n, "padding_mode", "zeros");
    *align = ir_attr_int(n, "align_corners", 0) ? "True" : "False";
    bool cubic = !strcmp(*mode, "cubic") || !strcmp(*mode, "bicubic");
    if (!cubic && strcmp(*mode, "linear") && strcmp(*mode, "bilinear") && strcmp(*mode, "nearest"))
        return et_refuse(e, n, "mode '%s'", *mode);
    if (strcmp(*pad, "zeros") && strcmp(*pad, "border") && strcmp(*pad, "reflection"))
        return et_refuse(e, n, "padding_mode '%s'", *pad);
    if (rank < 3 || rank > 5) return et_refuse(e, n, "a rank-%d X (3 to 5 are emitted)", rank);
    if (cubic && rank == 5)
        return et_refuse(e, n, "cubic mode on a 5-D X (PyTorch's grid sampler has no 3-D cubic)");
    return IR_OK;
}

static ir_status emit_grid_sample(et_ctx *e, const ir_node *n) {
    const ir_graph *g = et_graph(e);
    const char *mode, *pad, *align;
    ir_status st;
    et_use(e, "grid_sample");
    switch (n->op) {
    case IR_OP_GridSample:
        if ((st = gs_args(e, n, ir_node_in(g, n, 0)->shape.rank, &mode, &pad, &align))) return st;
        et_line(e, "%s = _grid_sample(%s, %s, \"%s\", \"%s\", %s)", et_out(e, n, 0), et_in(e, n, 0),
                et_in(e, n, 1), mode, pad, align);
        return IR_OK;
    case IR_OP_GridSampleGrad: {
        const ir_value *dx = ir_node_out(g, n, 0);
        if ((st = gs_args(e, n, dx->shape.rank, &mode, &pad, &align))) return st;
        et_line(e, "%s = _grid_sample_grad(%s, %s, %s, \"%s\", \"%s\", %s)", et_out(e, n, 0),
                et_in(e, n, 0), et_in(e, n, 1), et_shape(e, &dx->shape), mode, pad, align);
        return IR_OK;
    }
    case IR_OP_GridSampleGridGrad:
        if ((st = gs_args(e, n, ir_node_in(g, n, 1)->shape.rank, &mode, &pad, &align))) return st;
        et_line(e, "%s = _grid_sample_grid_grad(%s, %s, %s, \"%s\", \"%s\", %s)", et_out(e, n, 0),
                et_in(e, n, 0), et_in(e, n, 1), et_in(e, n, 2), mode, pad, align);
        return IR_OK;
    default: return et_refuse(e, n, "not a grid sampler");
    }
}

et_op_fn et_grid_lookup(ir_op_kind k) {
    switch (k) {
    case IR_OP_GridSample:
    case IR_OP_GridSampleGrad:
    case IR_OP_GridSampleGridGrad: return emit_grid_sample;
    default: return NULL;
    }
}
