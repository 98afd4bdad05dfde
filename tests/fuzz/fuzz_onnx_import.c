/* fuzz_onnx_import.c - libFuzzer entry point for the ONNX importer: arbitrary bytes must give a
 * graph or a status with a message, never a crash, a leak or an abort. Both the strict and the
 * allow_opaque paths run on every input; a graph that loads is also validated. */
#include <stddef.h>
#include <stdint.h>

#include "ir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int opaque = 0; opaque < 2; opaque++) {
        ir_import_opts o = {.allow_opaque = opaque != 0};
        ir_diag d;
        ir_status st;
        ir_graph *g = ir_onnx_load_buffer(data, size, "fuzz.onnx", &o, &st, &d);
        if (g && ir_graph_validate(g, &d) != IR_OK) __builtin_trap();
        if (!g && st == IR_OK) __builtin_trap();
        ir_graph_free(g);
    }
    return 0;
}
