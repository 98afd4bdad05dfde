/* test_emit_coverage.c - every op of magpie's table has a PyTorch form in `magpie emit --torch`:
 * the op families of cli/emit-torch*.c (compiled into this test) answer for every op kind, so an
 * op added to ir/ir-ops.def without an emitted form fails here, by name, instead of being refused
 * at emit time only when some plan contains it. (Configurations without a form, such as a read
 * MaxPool Indices output or a 5-D cubic GridSample, are refused by their family functions; the
 * emit_torch_errors test checks two of them.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "emit-torch.h"

/* The prelude that the build embeds into magpie; the lookups never read it. */
const char et_prelude_src[] = "";

static void test_every_op_has_a_form(void **state) {
    (void)state;
    int missing = 0;
    for (int k = 0; k < IR_OP_COUNT; k++) {
        ir_op_kind op = (ir_op_kind)k;
        if (et_op_lookup(op) || et_nn_lookup(op) || et_train_lookup(op) || et_grid_lookup(op) ||
            et_more_lookup(op))
            continue;
        fprintf(stderr, "no PyTorch form in emit: %s\n", ir_op_name(op));
        missing++;
    }
    assert_int_equal(missing, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_op_has_a_form)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
