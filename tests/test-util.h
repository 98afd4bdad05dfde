/* test-util.h - helpers shared by the unit tests: run one op on given tensors through its
 * shape inference and CPU kernel, build attributes, compare arrays, locate fixtures.
 * Header-only so that each test stays one executable built from one file. */
#ifndef MAGPIE_TEST_UTIL_H
#define MAGPIE_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ir.h"
#include "schedule.h"

/* The analytic rtx3090 cost model (schedule.h includes prof.h) for a group setup; NULL, with
 * the reason printed, on failure. */
static inline prof_model *tu_analytic_cost(void) {
    ir_diag d = {{0}};
    ir_status st;
    prof_model *m = prof_open("analytic:rtx3090", NULL, &st, &d);
    if (!m) print_error("prof_open: %s\n", d.msg);
    return m;
}

/* An input of a one-op test graph. constant=true makes it a graph constant (its data is
 * visible to shape inference, as Reshape's shape must be); otherwise a graph input. data may be
 * NULL for an omitted optional input (then dtype/shape are ignored). */
typedef struct tu_in {
    ir_dtype dtype;
    ir_shape shape;
    const void *data;
    bool constant;
} tu_in;

static inline ir_attr tu_attr_int(const char *name, int64_t v) {
    ir_attr a = {.name = name, .type = IR_ATTR_INT, .i = v};
    return a;
}
static inline ir_attr tu_attr_float(const char *name, float v) {
    ir_attr a = {.name = name, .type = IR_ATTR_FLOAT, .f = v};
    return a;
}
static inline ir_attr tu_attr_str(const char *name, const char *s) {
    ir_attr a = {.name = name, .type = IR_ATTR_STRING, .s = s};
    return a;
}
/* ints must outlive the run (use a static or local array). */
static inline ir_attr tu_attr_ints(const char *name, int n, int64_t *ints) {
    ir_attr a = {.name = name, .type = IR_ATTR_INTS, .n = n, .ints = ints};
    return a;
}

static inline ir_shape tu_shape(int rank, ...) {
    ir_shape s = {0};
    va_list ap;
    va_start(ap, rank);
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.dims[i] = va_arg(ap, int64_t);
    va_end(ap);
    return s;
}
#define TU_SHAPE(...) tu_shape_arr((int64_t[]){__VA_ARGS__}, sizeof((int64_t[]){__VA_ARGS__}) / 8)
static inline ir_shape tu_shape_arr(const int64_t *d, size_t n) {
    return ir_shape_make((int)n, d);
}
#define TU_SCALAR_SHAPE ((ir_shape){0})

/* The training fixtures under tests/fixtures/numeric/ (each with PyTorch's gradients), in the
 * order the fixture tests run them. */
#define TU_NUMERIC_TRAIN_FIXTURES                                                                  \
    "mlp_dropout_train", "cnn_bn_train", "cnn_bn_train_op15", "resnet_small_train",                \
        "transformer_encoder_train", "gpt_small_train", "unet_transpose_train", "vit_small_train", \
        "stn_pad_train"

/* Builds a one-node graph, infers its outputs and runs the CPU kernel. On success out[i] gets
 * dtype, shape and malloc'd data (free with tu_free_outputs). Returns the status of inference
 * or of the kernel; d gets the message. */
static inline ir_status tu_run_op(ir_op_kind op, int n_in, const tu_in *in, int n_out, int n_attrs,
                                  const ir_attr *attrs, ir_tensor *out, ir_diag *d) {
    ir_graph *g = ir_graph_new();
    int ins[16], outs[16];
    ir_status st = IR_OK;
    for (int i = 0; i < n_in; i++) {
        if (!in[i].data) {
            ins[i] = -1;
            continue;
        }
        char nm[16];
        snprintf(nm, sizeof nm, "in%d", i);
        ins[i] = ir_graph_add_value(g, nm, in[i].dtype, &in[i].shape);
        if (in[i].constant) {
            size_t bytes = (size_t)ir_shape_numel(&in[i].shape) * ir_dtype_size(in[i].dtype);
            ir_blob *b = ir_blob_new(bytes);
            if (bytes) memcpy(ir_blob_data(b), in[i].data, bytes);
            g->values[ins[i]].blob = b;
            g->values[ins[i]].flags |= IR_VF_CONST;
        } else {
            ir_graph_add_input(g, ins[i]);
        }
    }
    for (int i = 0; i < n_out; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "out%d", i);
        outs[i] = ir_graph_add_value(g, nm, IR_F32, NULL);
    }
    int ni = ir_graph_add_node(g, op, "test_node", n_in, ins, n_out, outs, n_attrs, attrs);
    ir_node *n = &g->nodes[ni];
    st = ir_node_infer(g, n, d);
    if (st != IR_OK) goto out;
    ir_tensor tin[16];
    for (int i = 0; i < n_in; i++) {
        tin[i].dtype = in[i].dtype;
        tin[i].shape = in[i].shape;
        tin[i].data = (void *)in[i].data;
    }
    for (int i = 0; i < n_out; i++) {
        ir_value *v = &g->values[outs[i]];
        out[i].dtype = v->dtype;
        out[i].shape = v->shape;
        size_t bytes = ir_value_bytes(v);
        out[i].data = calloc(1, bytes ? bytes : 1);
    }
    size_t ws = ir_node_workspace(g, n);
    void *wsp = ws ? aligned_alloc(64, (ws + 63) & ~(size_t)63) : NULL;
    ir_kernel_ctx k = {.graph = g,
                       .node = n,
                       .n_in = n_in,
                       .n_out = n_out,
                       .in = tin,
                       .out = out,
                       .workspace = wsp,
                       .workspace_bytes = ws,
                       .seed = 1,
                       .diag = d};
    st = ir_node_run(&k);
    free(wsp);
out:
    ir_graph_free(g);
    return st;
}

static inline void tu_free_outputs(int n, ir_tensor *out) {
    for (int i = 0; i < n; i++) {
        free(out[i].data);
        out[i].data = NULL;
    }
}

/* Runs an op expected to fail (in inference or in its kernel) and returns the status; frees the
 * outputs a failing kernel leaves allocated. n_out <= 8. */
static inline ir_status tu_run_err(ir_op_kind op, int n_in, const tu_in *in, int n_out, int n_attrs,
                                   const ir_attr *attrs, ir_diag *d) {
    ir_tensor out[8] = {{0}};
    ir_status st = tu_run_op(op, n_in, in, n_out, n_attrs, attrs, out, d);
    tu_free_outputs(n_out, out);
    return st;
}

/* A graph input of dtype t and shape s with data p. */
static inline tu_in tu_data_in(ir_dtype t, ir_shape s, const void *p) {
    return (tu_in){.dtype = t, .shape = s, .data = p};
}
/* A constant 1-D int64 input of n values (shape-like inputs: shapes, axes, pads). */
static inline tu_in tu_ints_in(int n, const int64_t *v) {
    return (tu_in){.dtype = IR_I64, .shape = {.rank = 1, .dims = {n}}, .data = v, .constant = true};
}

/* Fails the test, naming both shapes, unless t has shape s. */
static inline void tu_expect_shape(const ir_tensor *t, ir_shape s) {
    char a[128], b[128];
    if (!ir_shape_eq(&t->shape, &s))
        fail_msg("shape %s, expected %s", ir_shape_str(&t->shape, a, sizeof a),
                 ir_shape_str(&s, b, sizeof b));
}

/* Relative error as DESIGN.md defines it: ||a-b||2 / max(||b||2, 1e-12), in float64. For op
 * tests against a reference computed by hand in double; a rewritten graph is judged against the
 * original's float64 run with test-check.h instead. */
static inline double tu_rel_err_f32(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = (double)a[i] - (double)b[i];
        num += e * e;
        den += (double)b[i] * (double)b[i];
    }
    return sqrt(num) / fmax(sqrt(den), 1e-12);
}

/* Deterministic pseudo-random fill in [-1, 1). */
static inline void tu_fill(float *x, int64_t n, uint64_t seed) {
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)((double)(ir_mix64(seed * 0x9e3779b97f4a7c15ULL + (uint64_t)i) >> 11) /
                           (double)(1ULL << 53) * 2.0 -
                       1.0);
}

/* Adds node `op` over in[0..n_in) with outputs out[0..n_out) and infers them, failing the test
 * where inference fails; returns the node's index. */
static inline int tu_infer_node(ir_graph *g, ir_op_kind op, const char *name, int n_in,
                                const int *in, int n_out, int *out, int n_attrs,
                                const ir_attr *attrs) {
    int ni = ir_graph_add_node(g, op, name, n_in, in, n_out, out, n_attrs, attrs);
    ir_diag d = {{0}};
    if (ir_node_infer(g, &g->nodes[ni], &d) != IR_OK) fail_msg("infer %s: %s", name, d.msg);
    return ni;
}

/* tu_infer_node with n_out fresh float32 outputs named NAME.0, NAME.1, ... (their ids in out). */
static inline int tu_add_node(ir_graph *g, ir_op_kind op, const char *name, int n_in, const int *in,
                              int n_out, int *out, int n_attrs, const ir_attr *attrs) {
    for (int i = 0; i < n_out; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%.48s.%d", name, i);
        out[i] = ir_graph_add_value(g, nm, IR_F32, NULL);
    }
    return tu_infer_node(g, op, name, n_in, in, n_out, out, n_attrs, attrs);
}

/* tu_infer_node with one fresh float32 output named NAME.out, its id in *out (unless NULL).
 * *out may alias an input. */
static inline int tu_add_node1(ir_graph *g, ir_op_kind op, const char *name, int n_in,
                               const int *in, int n_attrs, const ir_attr *attrs, int *out) {
    char nm[64];
    snprintf(nm, sizeof nm, "%.56s.out", name);
    int v = ir_graph_add_value(g, nm, IR_F32, NULL);
    int ni = tu_infer_node(g, op, name, n_in, in, 1, &v, n_attrs, attrs);
    if (out) *out = v; /* only now: out may alias in */
    return ni;
}

/* The peak memory of g run in `order`, failing the test where it cannot be computed. */
static inline size_t tu_peak(const ir_graph *g, const int *order) {
    sched_memory m;
    ir_diag d = {{0}};
    if (sched_memory_compute(g, order, &m, &d) != IR_OK) fail_msg("memory: %s", d.msg);
    size_t p = m.peak_bytes;
    sched_memory_free(&m);
    return p;
}

/* A fresh directory /tmp/magpie-<tag>-XXXXXX, its path into dir (n bytes). */
static inline void tu_make_dir(char *dir, size_t n, const char *tag) {
    snprintf(dir, n, "/tmp/magpie-%s-XXXXXX", tag);
    assert_non_null(mkdtemp(dir));
}

/* dir and all it holds removed. */
static inline void tu_remove_dir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static inline bool tu_exists(const char *path) {
    return access(path, F_OK) == 0;
}

/* Path of a file under the source tree (tests run with MAGPIE_SOURCE_DIR set by ctest). */
static inline const char *tu_src_path(const char *rel, char *buf, size_t n) {
    const char *root = getenv("MAGPIE_SOURCE_DIR");
    snprintf(buf, n, "%s/%s", root ? root : ".", rel);
    return buf;
}

/* ---------------------------------------------------------------- running the magpie binary */

/* What `magpie ARGS` printed and returned. */
typedef struct tu_proc {
    int rc; /* exit status, -1 when it did not exit normally */
    char out[1 << 16];
    char err[8192];
} tu_proc;

/* The binary under test: MAGPIE_BIN (set by ctest), else build/magpie. */
static inline const char *tu_magpie_bin(void) {
    const char *b = getenv("MAGPIE_BIN");
    return b ? b : "build/magpie";
}

/* Runs `magpie ARGS` through the shell from the source tree (ARGS are fixed test strings),
 * capturing stdout and stderr. */
static inline void tu_magpie(tu_proc *p, const char *args) {
    char err_path[64], cmd[4096], src[1024];
    snprintf(err_path, sizeof err_path, "/tmp/magpie-test-%d.err", (int)getpid());
    int len = snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>'%s'",
                       tu_src_path("", src, sizeof src), tu_magpie_bin(), args, err_path);
    assert_true(len > 0 && (size_t)len < sizeof cmd); /* a cut command would run something else */
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(p->out, 1, sizeof p->out - 1, f);
    p->out[n] = 0;
    int status = pclose(f);
    p->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    FILE *e = fopen(err_path, "r");
    size_t m = e ? fread(p->err, 1, sizeof p->err - 1, e) : 0;
    p->err[m] = 0;
    if (e) fclose(e);
    unlink(err_path);
}

/* The string value after the first "key": in json (no escapes), into buf; fails the test when
 * absent. */
static inline const char *tu_json_str(const char *json, const char *key, char *buf, size_t n) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(json, pat);
    if (!p) fail_msg("key '%s' missing in %s", key, json);
    p += strlen(pat);
    size_t len = strcspn(p, "\"");
    if (len >= n) len = n - 1;
    memcpy(buf, p, len);
    buf[len] = 0;
    return buf;
}

/* The number after the first "key": in json (the keys checked occur once); fails when absent. */
static inline double tu_json_num(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    if (!p) fail_msg("key '%s' missing in %s", key, json);
    return strtod(p + strlen(pat), NULL);
}

/* ---------------------------------------------------------------- magpie in the background */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>

static inline void tu_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Starts `magpie ARGS` (split at spaces: fixed test strings without quoting) in the source tree
 * as a child process, its stdout and stderr sent to out_path and err_path (may be NULL:
 * /dev/null), and returns its pid: signals sent to it reach magpie itself. */
static inline pid_t tu_magpie_spawn(const char *args, const char *out_path, const char *err_path) {
    char *copy = strdup(args), *argv[128], src[1024];
    int argc = 0;
    argv[argc++] = (char *)tu_magpie_bin();
    for (char *t = strtok(copy, " "); t && argc < 127; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    tu_src_path("", src, sizeof src);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int o = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0 || chdir(src) != 0) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    free(copy);
    return pid;
}

/* Waits up to timeout_s for pid to end; returns its exit status, -1 when a signal ended it, or
 * -2 on timeout (the process is then still running). */
static inline int tu_wait_pid(pid_t pid, double timeout_s) {
    double end = ir_now_seconds() + timeout_s;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        assert_int_equal(r, 0);
        if (ir_now_seconds() > end) return -2;
        tu_sleep(0.005);
    }
}

/* Waits up to timeout_s until path exists; false on timeout. */
static inline bool tu_wait_file(const char *path, double timeout_s) {
    double end = ir_now_seconds() + timeout_s;
    while (access(path, F_OK) != 0) {
        if (ir_now_seconds() > end) return false;
        tu_sleep(0.005);
    }
    return true;
}

/* The whole file, malloc'd (a NUL after the bytes), its size in *n; NULL when it cannot be
 * read. */
static inline char *tu_read_all(const char *path, size_t *n) {
    if (n) *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += got;
        if (len == cap) buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    if (buf) buf[len] = 0;
    if (n) *n = len;
    return buf;
}

/* The training graph (default options) of numeric fixture `name`'s model, failing the test where
 * it cannot be built. *fwd (may be NULL) receives the forward graph, else it is freed. */
static inline ir_graph *tu_load_training(const char *name, ir_graph **fwd) {
    char rel[256], path[1024];
    snprintf(rel, sizeof rel, "tests/fixtures/numeric/%s/model.onnx", name);
    ir_diag d = {{0}};
    ir_status st;
    ir_graph *f = ir_onnx_load(tu_src_path(rel, path, sizeof path), NULL, &st, &d);
    if (!f) fail_msg("import %s: %s", name, d.msg);
    ir_graph *g = ir_build_training(f, &(ir_train_opts){0}, &st, &d);
    if (!g) fail_msg("training graph of %s: %s", name, d.msg);
    if (fwd)
        *fwd = f;
    else
        ir_graph_free(f);
    return g;
}

#endif
