/* pet_gpu_check.c - checks PET's CUDA verification back-end against the CPU one (DESIGN.md:
 * back-ends are checked against each other), for a GPU machine.
 *
 * On the corpus of bench/pet-corpus.h (one program per op PET compiles, and the originals and
 * mutants of figures 1 and 3 and of a planted mutant):
 *  - residues: every output element of every program, for t input sets, evaluated by both
 *    back-ends, must be equal (the positions pet_verify tests are a subset of these);
 *  - verification: pet_verify with either back-end must fail exactly the same cells;
 *  - throughput: box-tests per second of pet_verify on the ResNet-sized figure 1 and figure 3
 *    mutants (64 channels, 56x56, t = 4) on the CPU (lazy, --threads) and on the GPU.
 * Prints one line per check and a summary. Exit status: 0 when everything matched, 1 on a
 * mismatch or an error, 77 when there is no CUDA back-end or no device (a skip).
 *
 * usage: pet_gpu_check [--tests T] [--threads N] [--self]
 *   --self: compare the CPU back-end's lazy evaluation against its whole-tensor one instead of
 *   the GPU (checks this program where there is no GPU) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pet-corpus.h"
#include "pet.h"

static int failures = 0;

static void check(bool ok, const char *fmt, const char *name) {
    printf("%-36s %s\n", name, ok ? "ok" : fmt);
    if (!ok) failures++;
}

/* Every element of every output of g, t sets, on backend be (mode): into *vals (malloc'd). */
static ir_status eval_all(const pet_backend *be, void *ctx, const ir_graph *g, int tests,
                          pet_eval_mode mode, uint32_t **vals, int64_t *n, ir_diag *d) {
    pet_prog *p;
    ir_status st = pet_prog_compile(g, &p, d);
    if (st != IR_OK) return st;
    int64_t np = 0;
    for (int k = 0; k < p->n_outputs; k++) np += p->values[p->outputs[k]].numel;
    pet_probe *pr = malloc(sizeof *pr * (size_t)(np + 1));
    *vals = malloc(sizeof **vals * (size_t)(np * tests + 1));
    if (!pr || !*vals) {
        free(pr);
        pet_prog_free(p);
        return ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    }
    int64_t i = 0;
    for (int k = 0; k < p->n_outputs; k++)
        for (int64_t e = 0; e < p->values[p->outputs[k]].numel; e++)
            pr[i++] = (pet_probe){.output = k, .index = e};
    pet_eval_req rq = {.prog = p, .n_probes = np, .probes = pr, .vals = *vals};
    st = be->eval(ctx, &rq, 1, 12345, tests, mode, NULL, d);
    *n = np * tests;
    free(pr);
    pet_prog_free(p);
    return st;
}

static void compare_program(const char *name, const ir_graph *g, const pet_backend *ba, void *ca,
                            pet_eval_mode ma, const pet_backend *bb, void *cb, pet_eval_mode mb,
                            int tests) {
    uint32_t *va = NULL, *vb = NULL;
    int64_t na = 0, nb = 0;
    ir_diag d = {{0}};
    if (eval_all(ba, ca, g, tests, ma, &va, &na, &d) != IR_OK ||
        eval_all(bb, cb, g, tests, mb, &vb, &nb, &d) != IR_OK) {
        printf("%-36s error: %s\n", name, d.msg);
        failures++;
    } else {
        int64_t bad = 0;
        for (int64_t i = 0; i < na; i++) bad += va[i] != vb[i];
        char msg[96];
        snprintf(msg, sizeof msg, "MISMATCH at %lld of %lld residues", (long long)bad,
                 (long long)na);
        check(bad == 0 && na == nb, msg, name);
    }
    free(va);
    free(vb);
}

static void compare_verify(const char *name, const ir_graph *o, const ir_graph *m,
                           const pet_options *oa, const pet_options *ob) {
    pet_result ra, rb;
    ir_diag d = {{0}};
    if (pet_verify(o, m, oa, &ra, &d) != IR_OK) {
        printf("%-36s error: %s\n", name, d.msg);
        failures++;
        return;
    }
    if (pet_verify(o, m, ob, &rb, &d) != IR_OK) {
        printf("%-36s error: %s\n", name, d.msg);
        failures++;
        pet_result_free(&ra);
        return;
    }
    bool same = ra.box_tests == rb.box_tests && ra.n_outputs == rb.n_outputs;
    for (int k = 0; same && k < ra.n_outputs; k++) {
        same = ra.outputs[k].n_failed == rb.outputs[k].n_failed;
        for (int64_t i = 0; same && i < ra.outputs[k].n_failed; i++)
            same =
                memcmp(&ra.outputs[k].failed[i], &rb.outputs[k].failed[i], sizeof(pet_region)) == 0;
    }
    check(same, "MISMATCH in the failed cells", name);
    pet_result_free(&ra);
    pet_result_free(&rb);
}

static double throughput(const ir_graph *o, const ir_graph *m, const pet_options *opt,
                         int64_t *box_tests) {
    pet_result r;
    ir_diag d = {{0}};
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        if (pet_verify(o, m, opt, &r, &d) != IR_OK) {
            printf("throughput: %s\n", d.msg);
            failures++;
            return 0;
        }
        double rate = (double)r.box_tests / r.seconds;
        if (rate > best) best = rate;
        *box_tests = r.box_tests;
        pet_result_free(&r);
    }
    return best;
}

int main(int argc, char **argv) {
    int tests = 4, threads = 0;
    bool self = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tests") && i + 1 < argc)
            tests = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--self"))
            self = true;
        else {
            fprintf(stderr, "usage: pet_gpu_check [--tests T] [--threads N] [--self]\n");
            return 2;
        }
    }
    const pet_backend *cpu = pet_cpu_backend(), *gpu = self ? cpu : pet_cuda_backend();
    char why[256] = "";
    if (!gpu) {
        printf("pet_gpu_check: skipped: magpie was built without CUDA\n");
        return 77;
    }
    if (gpu->available && !gpu->available(why, sizeof why)) {
        printf("pet_gpu_check: skipped: %s\n", why);
        return 77;
    }
    void *cc = NULL, *gc = NULL;
    ir_diag d = {{0}};
    if (cpu->open(&cc, threads, &d) != IR_OK || gpu->open(&gc, threads, &d) != IR_OK) {
        fprintf(stderr, "pet_gpu_check: open: %s\n", d.msg);
        return 1;
    }
    pet_eval_mode gm = self ? PET_EVAL_DENSE : PET_EVAL_AUTO;
    printf("PET residues, %s (lazy) against %s%s, t = %d\n", cpu->name, gpu->name,
           self ? " (whole-tensor)" : "", tests);
    ir_graph *gs[32];
    const char *names[32];
    int n = pc_single_ops(gs, names, 32);
    for (int i = 0; i < n; i++) {
        compare_program(names[i], gs[i], cpu, cc, PET_EVAL_AUTO, gpu, gc, gm, tests);
        ir_graph_free(gs[i]);
    }
    struct {
        const char *name;
        ir_graph *o, *m;
    } pairs[3];
    pc_figure1(8, 12, 10, &pairs[0].o, &pairs[0].m);
    pc_figure3(8, 12, 10, &pairs[1].o, &pairs[1].m);
    pc_planted(8, 9, 9, 0, 1, 1, 8, &pairs[2].o, &pairs[2].m);
    pairs[0].name = "figure1";
    pairs[1].name = "figure3";
    pairs[2].name = "planted";
    pet_options oc = {.tests = tests, .seed = 99, .threads = threads, .backend_ctx = cc};
    pet_options og = oc;
    og.backend = gpu;
    og.backend_ctx = gc;
    og.dense = self;
    for (int i = 0; i < 3; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s original", pairs[i].name);
        compare_program(nm, pairs[i].o, cpu, cc, PET_EVAL_AUTO, gpu, gc, gm, tests);
        snprintf(nm, sizeof nm, "%s mutant", pairs[i].name);
        compare_program(nm, pairs[i].m, cpu, cc, PET_EVAL_AUTO, gpu, gc, gm, tests);
        snprintf(nm, sizeof nm, "%s verify", pairs[i].name);
        compare_verify(nm, pairs[i].o, pairs[i].m, &oc, &og);
        ir_graph_free(pairs[i].o);
        ir_graph_free(pairs[i].m);
    }
    printf("\nbox-tests per second (pet_verify, best of 3), 64 channels, 56x56, t = %d\n", tests);
    printf("%-8s %10s %14s %14s %8s\n", "case", "box-tests", cpu->name, gpu->name, "ratio");
    for (int c = 0; c < 2; c++) {
        ir_graph *o, *m;
        (c == 0 ? pc_figure1 : pc_figure3)(64, 56, 56, &o, &m);
        int64_t bt = 0;
        double rc = throughput(o, m, &oc, &bt), rg = throughput(o, m, &og, &bt);
        printf("%-8s %10lld %14.0f %14.0f %8.2f\n", c == 0 ? "figure1" : "figure3", (long long)bt,
               rc, rg, rc > 0 ? rg / rc : 0);
        ir_graph_free(o);
        ir_graph_free(m);
    }
    cpu->close(cc);
    gpu->close(gc);
    printf("\npet_gpu_check: %s\n", failures ? "FAILED" : "all residues match");
    return failures ? 1 : 0;
}
