/* test_cli.c - the `magpie` command as users and scripts see it: exit statuses, one-line errors
 * on stderr, exactly one JSON object on stdout with --json, output files that appear all at once
 * or not at all, and `run` results equal to PyTorch's reference outputs.
 *
 * The binary (MAGPIE_BIN, set by ctest) runs as a child process with stdout and stderr sent to
 * files. The JSON writer, formatters and plots are compiled in directly (they are private to
 * cli/) so their edge cases are tested without a process per case. */
#include "test-util.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cli/files.c"
#include "../cli/fmt.c"
#include "../cli/json.c"
#include "../cli/plot.c"

extern char **environ;

#define FIXTURE "tests/fixtures/numeric/mlp"
#define FIXTURE_INPUT_NAME "input" /* the fixture's graph input (meta.json) */

/* ---------------------------------------------------------------- processes and files */

typedef struct proc {
    int rc;
    char *out, *err;
} proc;

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t got; (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static const char *bin(void) {
    const char *b = getenv("MAGPIE_BIN");
    return b ? b : "build/magpie";
}

/* Runs magpie with args (NULL-terminated), capturing stdout and stderr. */
static proc run_magpie(const char *tmp, const char *const *args) {
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s/.stdout", tmp);
    snprintf(err_path, sizeof err_path, "%s/.stderr", tmp);
    const char *argv[64];
    int n = 0;
    argv[n++] = bin();
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    /* fork+exec rather than posix_spawn: <spawn.h> needs the system <sched.h>, which
     * sched/sched.h shadows on this target's include path. */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
        execve(argv[0], (char *const *)argv, environ);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) fail_msg("cannot run %s", argv[0]);
    if (!WIFEXITED(status)) fail_msg("%s did not exit normally (status %d)", argv[0], status);
    proc p = {
        .rc = WEXITSTATUS(status), .out = slurp(out_path, NULL), .err = slurp(err_path, NULL)};
    assert_non_null(p.out);
    assert_non_null(p.err);
    unlink(out_path);
    unlink(err_path);
    return p;
}

static void proc_free(proc *p) {
    free(p->out);
    free(p->err);
}

static int count_char(const char *s, char c) {
    int n = 0;
    for (; *s; s++) n += *s == c;
    return n;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(path);
}

static char *make_tmpdir(void) {
    char *t = strdup("/tmp/magpie-test-cli-XXXXXX");
    assert_non_null(mkdtemp(t));
    return t;
}

static void remove_tree(char *dir) {
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

/* Number of entries in dir (not counting . and ..), -1 if it cannot be opened. */
static int dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static const char *src(const char *rel) {
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    return tu_src_path(rel, buf[k], sizeof buf[k]);
}

/* ---------------------------------------------------------------- a small JSON checker */

/* Validates one JSON value; records the top-level object's keys and raw values. */
typedef struct jcheck {
    const char *p;
    int depth;
    int n_keys;
    char keys[64][64];
    const char *vals[64]; /* start of each top-level value */
} jcheck;

static void ws(jcheck *j) {
    while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r') j->p++;
}

static bool jvalue(jcheck *j);

static bool jstring(jcheck *j, char *out, size_t n) {
    if (*j->p != '"') return false;
    size_t k = 0;
    for (j->p++; *j->p != '"'; j->p++) {
        if ((unsigned char)*j->p < 0x20 || !*j->p) return false;
        if (*j->p == '\\') {
            j->p++;
            if (*j->p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)j->p[i])) return false;
                j->p += 4;
            } else if (!strchr("\"\\/bfnrt", *j->p)) {
                return false;
            }
        }
        if (out && k + 1 < n) out[k++] = *j->p;
    }
    if (out) out[k] = '\0';
    j->p++;
    return true;
}

static bool jcontainer(jcheck *j, char open, char close) {
    j->p++;
    j->depth++;
    ws(j);
    if (*j->p == close) goto done;
    for (;;) {
        ws(j);
        if (open == '{') {
            char key[64];
            if (!jstring(j, key, sizeof key)) return false;
            ws(j);
            if (*j->p++ != ':') return false;
            ws(j);
            if (j->depth == 1 && j->n_keys < 64) {
                snprintf(j->keys[j->n_keys], sizeof j->keys[0], "%s", key);
                j->vals[j->n_keys++] = j->p;
            }
        }
        if (!jvalue(j)) return false;
        ws(j);
        if (*j->p == ',') {
            j->p++;
            continue;
        }
        if (*j->p == close) break;
        return false;
    }
done:
    j->p++;
    j->depth--;
    return true;
}

static bool jvalue(jcheck *j) {
    ws(j);
    if (*j->p == '{') return jcontainer(j, '{', '}');
    if (*j->p == '[') return jcontainer(j, '[', ']');
    if (*j->p == '"') return jstring(j, NULL, 0);
    for (const char *lit[] = {"true", "false", "null"}, **l = lit; l < lit + 3; l++)
        if (!strncmp(j->p, *l, strlen(*l))) {
            j->p += strlen(*l);
            return true;
        }
    char *end;
    strtod(j->p, &end);
    if (end == j->p) return false;
    j->p = end;
    return true;
}

/* stdout must be exactly one object (and a trailing newline). */
static void json_parse_object(const char *s, jcheck *j) {
    memset(j, 0, sizeof *j);
    j->p = s;
    ws(j);
    assert_int_equal(*j->p, '{');
    assert_true(jvalue(j));
    ws(j);
    if (*j->p) fail_msg("trailing text after the JSON object: '%s'", j->p);
}

static const char *json_get(const jcheck *j, const char *key) {
    for (int i = 0; i < j->n_keys; i++)
        if (!strcmp(j->keys[i], key)) return j->vals[i];
    fail_msg("JSON key '%s' missing", key);
    return NULL;
}

/* ---------------------------------------------------------------- help, usage */

static void test_help(void **state) {
    char *tmp = make_tmpdir();
    proc p = run_magpie(tmp, (const char *[]){"--help", NULL});
    assert_int_equal(p.rc, 0);
    assert_non_null(strstr(p.out, "usage"));
    assert_non_null(strstr(p.out, "inspect"));
    assert_string_equal(p.err, "");
    proc_free(&p);

    p = run_magpie(tmp, (const char *[]){"--version", NULL});
    assert_int_equal(p.rc, 0);
    assert_string_equal(p.out, "magpie 0.1.0\n");
    proc_free(&p);

    p = run_magpie(tmp, (const char *[]){"help", "run", NULL});
    assert_int_equal(p.rc, 0);
    assert_non_null(strstr(p.out, "magpie run"));
    assert_non_null(strstr(p.out, "--seed"));
    proc_free(&p);

    p = run_magpie(tmp, (const char *[]){"inspect", "--help", NULL});
    assert_int_equal(p.rc, 0);
    assert_non_null(strstr(p.out, "--plot"));
    assert_null(strstr(p.out, "--seed")); /* inspect does not take --seed */
    proc_free(&p);
    remove_tree(tmp);
}

static void expect_usage_error(const char *tmp, const char *const *args, const char *needle) {
    proc p = run_magpie(tmp, args);
    assert_int_equal(p.rc, 2);
    assert_string_equal(p.out, "");
    assert_int_equal(count_char(p.err, '\n'), 1);
    if (!strstr(p.err, needle)) fail_msg("stderr '%s' does not name '%s'", p.err, needle);
    proc_free(&p);
}

static void test_usage_errors(void **state) {
    char *tmp = make_tmpdir();
    expect_usage_error(tmp, (const char *[]){"frobnicate", NULL}, "frobnicate");
    expect_usage_error(tmp, (const char *[]){"--frobnicate", NULL}, "--frobnicate");
    expect_usage_error(tmp, (const char *[]){NULL}, "--help");
    expect_usage_error(tmp, (const char *[]){"help", "frobnicate", NULL}, "frobnicate");
    expect_usage_error(tmp, (const char *[]){"run", "m.onnx", "--bogus", NULL}, "--bogus");
    expect_usage_error(tmp, (const char *[]){"inspect", "m.onnx", "--seed", "1", NULL}, "--seed");
    expect_usage_error(tmp, (const char *[]){"run", NULL}, "MODEL.onnx");
    expect_usage_error(tmp, (const char *[]){"run", "m.onnx", "--seed", NULL}, "--seed");
    expect_usage_error(tmp, (const char *[]){"run", "m.onnx", "--seed", "x1", NULL}, "x1");
    expect_usage_error(tmp, (const char *[]){"run", "m.onnx", "--shape", "x=2,a", NULL}, "x=2,a");
    expect_usage_error(tmp, (const char *[]){"run", "m.onnx", "--json=1", NULL}, "--json");
    remove_tree(tmp);
}

/* ---------------------------------------------------------------- inspect, export */

static void test_inspect_json(void **state) {
    char *tmp = make_tmpdir();
    proc p =
        run_magpie(tmp, (const char *[]){"inspect", src(FIXTURE "/model.onnx"), "--json", NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    jcheck j;
    json_parse_object(p.out, &j);
    static const char *keys[] = {"model",          "opset",
                                 "nodes",          "values",
                                 "params",         "param_bytes",
                                 "buffer_bytes",   "activation_bytes",
                                 "flops",          "eager_peak_bytes",
                                 "resident_bytes", "ops",
                                 "inputs",         "outputs",
                                 "opaque_nodes"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) json_get(&j, keys[i]);
    assert_true(atoi(json_get(&j, "nodes")) > 0);
    /* The MLP has 16*64+64 + ... parameters: any non-zero count in f32 is 4 bytes each. */
    long long params = atoll(json_get(&j, "params"));
    assert_true(params > 0);
    assert_int_equal(atoll(json_get(&j, "param_bytes")), 4 * params);
    assert_true(atof(json_get(&j, "flops")) > 0);
    assert_true(atoll(json_get(&j, "eager_peak_bytes")) >= atoll(json_get(&j, "resident_bytes")));
    assert_int_equal(atoi(json_get(&j, "opaque_nodes")), 0);
    assert_int_equal(*json_get(&j, "ops"), '{');
    assert_int_equal(*json_get(&j, "inputs"), '[');
    proc_free(&p);
    remove_tree(tmp);
}

static void test_inspect_text_and_plot(void **state) {
    char *tmp = make_tmpdir();
    char svg[512];
    snprintf(svg, sizeof svg, "%s/mem.svg", tmp);
    proc p = run_magpie(
        tmp, (const char *[]){"inspect", src(FIXTURE "/model.onnx"), "--plot", svg, NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    assert_non_null(strstr(p.out, "eager peak"));
    assert_non_null(strstr(p.out, "\xe2\x96")); /* a block character of the sparkline */
    proc_free(&p);
    char *s = slurp(svg, NULL);
    assert_non_null(s);
    assert_non_null(strstr(s, "<svg"));
    assert_non_null(strstr(s, "peak"));
    assert_non_null(strstr(s, "MiB"));
    assert_non_null(strstr(s, "</svg>"));
    free(s);
    assert_int_equal(dir_entries(tmp), 1); /* no temporary file left beside it */

    /* An SVG in a directory that does not exist: exit 2 naming it, nothing on stdout. */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/mem.svg", tmp);
    p = run_magpie(tmp, (const char *[]){"inspect", src(FIXTURE "/model.onnx"), "--plot", bad,
                                         "--json", NULL});
    assert_int_equal(p.rc, 2);
    assert_string_equal(p.out, "");
    assert_int_equal(count_char(p.err, '\n'), 1);
    assert_non_null(strstr(p.err, "mem.svg"));
    proc_free(&p);
    remove_tree(tmp);
}

/* inspect --fission: the dimension graph, the F-Tree and the node that stops the batch, in the
 * fission checker's words. cnn_bn_train's training graph is stopped by its first training-mode
 * BatchNormalization (its statistics are a mean over the batch); the plain MLP's is not stopped,
 * nor is the dropout MLP's, whose training-mode Dropout(0) draws nothing. */
static void test_inspect_fission(void **state) {
    char *tmp = make_tmpdir();
    const char *bn = src("tests/fixtures/numeric/cnn_bn_train/model.onnx");
    proc p = run_magpie(tmp, (const char *[]){"inspect", bn, "--train", "--fission", NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    assert_non_null(strstr(p.out, "dimensions"));
    assert_non_null(strstr(p.out, "graph inputs split"));
    assert_non_null(strstr(p.out, "F-Tree"));
    assert_non_null(strstr(p.out, "batch        input[0] (length 2)"));
    assert_non_null(strstr(p.out, "first break: node '/features/features.1/BatchNormalization' "
                                  "(BatchNormalization): fission: a batch norm in training mode, "
                                  "whose batch statistics are a reduction over D (dim 0 of "
                                  "'/features/features.0/Conv_output_0'): no part can compute "
                                  "them alone"));
    assert_null(strstr(p.out, "eager peak")); /* --fission replaces the summary */
    assert_string_equal(p.err, "");
    proc_free(&p);

    p = run_magpie(tmp, (const char *[]){"inspect", bn, "--train", "--fission", "--json", NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    jcheck j;
    json_parse_object(p.out, &j);
    assert_int_equal(*json_get(&j, "components"), '[');
    assert_non_null(
        strstr(json_get(&j, "components"), "{\"name\":\"features.4.weight\",\"dim\":0}"));
    assert_int_equal(*json_get(&j, "ftree"), '[');
    assert_non_null(strstr(json_get(&j, "ftree"), "\"heat\":"));
    assert_non_null(strstr(json_get(&j, "ftree"), "\"score\":"));
    const char *batch = json_get(&j, "batch");
    assert_non_null(strstr(batch, "\"input\":\"input\""));
    assert_non_null(strstr(batch, "\"first_break\":{\"node\":\"/features/features.1/"
                                  "BatchNormalization\",\"op\":\"BatchNormalization\",\"reason\":"
                                  "\"fission: a batch norm in training mode, whose batch "
                                  "statistics"));
    assert_non_null(strstr(batch, "\"breaks\":2,"));
    proc_free(&p);

    const char *drop = src("tests/fixtures/numeric/mlp_dropout_train/model.onnx");
    p = run_magpie(tmp, (const char *[]){"inspect", drop, "--train", "--fission", NULL});
    assert_int_equal(p.rc, 0);
    assert_non_null(strstr(p.out, "batch        input[0] (length 4)"));
    assert_non_null(strstr(p.out, "no node breaks it"));
    proc_free(&p);

    p = run_magpie(tmp, (const char *[]){"inspect", src(FIXTURE "/model.onnx"), "--train",
                                         "--fission", "--json", NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    json_parse_object(p.out, &j);
    batch = json_get(&j, "batch");
    assert_non_null(strstr(batch, "\"breaks\":0,\"first_break\":null}"));
    proc_free(&p);
    p = run_magpie(
        tmp, (const char *[]){"inspect", src(FIXTURE "/model.onnx"), "--train", "--fission", NULL});
    assert_int_equal(p.rc, 0);
    assert_non_null(strstr(p.out, "no node breaks it"));
    proc_free(&p);
    p = run_magpie(tmp, (const char *[]){"inspect",
                                         src("tests/fixtures/numeric/mlp_dropout_train/model.onnx"),
                                         "--train", "--fission", NULL});
    assert_int_equal(p.rc, 0);
    assert_non_null(strstr(p.out, "no node breaks it"));
    proc_free(&p);

    /* a sequence-first encoder ([S, B, E]): the batch is src's dimension 1, which nothing breaks;
     * the sequence (dimension 0, as many ops) is broken by every attention */
    const char *seq = src("tests/fixtures/numeric/transformer_encoder_seqfirst_op17/model.onnx");
    p = run_magpie(tmp, (const char *[]){"inspect", seq, "--shape", "batch=2", "--train", "--loss",
                                         "mse", "--fission", NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    assert_non_null(strstr(p.out, "batch        src[1] (length 2)"));
    assert_non_null(strstr(p.out, "no node breaks it"));
    proc_free(&p);
    p = run_magpie(tmp, (const char *[]){"inspect", seq, "--shape", "batch=2", "--train", "--loss",
                                         "mse", "--fission", "--json", NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    json_parse_object(p.out, &j);
    batch = json_get(&j, "batch");
    assert_non_null(strstr(batch, "\"input\":\"src\",\"dim\":1,"));
    assert_non_null(strstr(batch, "\"length\":2,"));
    proc_free(&p);
    remove_tree(tmp);
}

static void test_export(void **state) {
    char *tmp = make_tmpdir();
    char out[512];
    snprintf(out, sizeof out, "%s/re.onnx", tmp);
    proc p = run_magpie(
        tmp, (const char *[]){"export", src(FIXTURE "/model.onnx"), out, "--json", NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    jcheck j;
    json_parse_object(p.out, &j);
    json_get(&j, "input");
    json_get(&j, "output");
    assert_true(atoi(json_get(&j, "nodes")) > 0);
    proc_free(&p);
    p = run_magpie(tmp, (const char *[]){"inspect", out, "--json", NULL});
    if (p.rc != 0) fail_msg("re-import rc %d: %s", p.rc, p.err);
    proc_free(&p);
    remove_tree(tmp);
}

/* ---------------------------------------------------------------- run */

static double rel_err_file(const char *a_path, const char *b_path) {
    ir_dtype ta, tb;
    ir_shape sa, sb;
    ir_blob *a = NULL, *b = NULL;
    ir_diag d = {{0}};
    if (ir_npy_read(a_path, &ta, &sa, &a, &d) != IR_OK) fail_msg("%s", d.msg);
    if (ir_npy_read(b_path, &tb, &sb, &b, &d) != IR_OK) fail_msg("%s", d.msg);
    assert_int_equal(ta, tb);
    assert_true(ir_shape_eq(&sa, &sb));
    int64_t n = ir_shape_numel(&sa);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = ir_load_f64(ir_blob_data(a), ta, i), y = ir_load_f64(ir_blob_data(b), tb, i);
        num += (x - y) * (x - y);
        den += y * y;
    }
    ir_blob_unref(a);
    ir_blob_unref(b);
    return sqrt(num) / fmax(sqrt(den), 1e-12);
}

/* Path of the only file in dir. */
static void only_file(const char *dir, char *buf, size_t n) {
    assert_int_equal(dir_entries(dir), 1);
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(buf, n, "%s/%s", dir, e->d_name);
    closedir(d);
}

static void test_run_outputs(void **state) {
    char *tmp = make_tmpdir();
    char odir[512], file[1024];
    snprintf(odir, sizeof odir, "%s/out/nested", tmp); /* created on demand */
    proc p =
        run_magpie(tmp, (const char *[]){"run", src(FIXTURE "/model.onnx"), "-i",
                                         src(FIXTURE "/input_0.npy"), "-o", odir, "--json", NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    jcheck j;
    json_parse_object(p.out, &j);
    static const char *keys[] = {"model", "peak_bytes", "resident_bytes", "wall_seconds",
                                 "outputs"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) json_get(&j, keys[i]);
    assert_true(atoll(json_get(&j, "peak_bytes")) > 0);
    proc_free(&p);
    only_file(odir, file, sizeof file);
    assert_non_null(strstr(file, ".npy"));
    double e = rel_err_file(file, src(FIXTURE "/output_0.npy"));
    if (!(e <= 1e-4)) fail_msg("relative error %g", e);

    /* The same binding by name, human output, into an existing directory: same result. */
    char odir2[512];
    snprintf(odir2, sizeof odir2, "%s/byname", tmp);
    assert_int_equal(mkdir(odir2, 0777), 0);
    char bind[1024];
    snprintf(bind, sizeof bind, "%s=%s", FIXTURE_INPUT_NAME, src(FIXTURE "/input_0.npy"));
    p = run_magpie(
        tmp, (const char *[]){"run", src(FIXTURE "/model.onnx"), "-i", bind, "-o", odir2, NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    assert_non_null(strstr(p.out, "peak memory"));
    proc_free(&p);
    only_file(odir2, file, sizeof file);
    e = rel_err_file(file, src(FIXTURE "/output_0.npy"));
    if (!(e <= 1e-4)) fail_msg("relative error %g", e);
    remove_tree(tmp);
}

/* A failing run: exit 2, nothing on stdout, one line on stderr naming `needle`, and nothing
 * written to the output directory. */
static void expect_run_failure(const char *tmp, const char *model, const char *input,
                               const char *needle) {
    char odir[512];
    snprintf(odir, sizeof odir, "%s/out", tmp);
    mkdir(odir, 0777);
    proc p =
        run_magpie(tmp, (const char *[]){"run", model, "-i", input, "-o", odir, "--json", NULL});
    if (p.rc != 2) fail_msg("expected exit 2 for %s / %s, got %d: %s", model, input, p.rc, p.err);
    assert_string_equal(p.out, "");
    if (count_char(p.err, '\n') != 1 || p.err[strlen(p.err) - 1] != '\n')
        fail_msg("stderr is not one line: '%s'", p.err);
    if (!strstr(p.err, needle)) fail_msg("stderr '%s' does not name '%s'", p.err, needle);
    assert_int_equal(dir_entries(odir), 0);
    proc_free(&p);
}

static void test_run_bad_models(void **state) {
    char *tmp = make_tmpdir();
    const char *input = src(FIXTURE "/input_0.npy");
    char path[512];

    snprintf(path, sizeof path, "%s/empty.onnx", tmp);
    write_bytes(path, "", 0);
    expect_run_failure(tmp, path, input, "empty.onnx");

    size_t len = 0;
    char *model = slurp(src(FIXTURE "/model.onnx"), &len);
    assert_non_null(model);
    snprintf(path, sizeof path, "%s/truncated.onnx", tmp);
    write_bytes(path, model, len / 2);
    free(model);
    expect_run_failure(tmp, path, input, "truncated.onnx");

    unsigned char noise[4096];
    for (size_t i = 0; i < sizeof noise; i++) noise[i] = (unsigned char)(ir_mix64(i + 7) >> 56);
    snprintf(path, sizeof path, "%s/random.onnx", tmp);
    write_bytes(path, noise, sizeof noise);
    expect_run_failure(tmp, path, input, "random.onnx");

    /* A well-formed protobuf that is not a model: field 1000 (varint) and field 1001 (bytes),
     * numbers ModelProto does not use, so a parser skips them and finds no graph. */
    static const unsigned char proto[] = {0xc0, 0x3e, 0x01, 0xca, 0x3e, 0x03, 'a', 'b', 'c'};
    snprintf(path, sizeof path, "%s/other.pb", tmp);
    write_bytes(path, proto, sizeof proto);
    expect_run_failure(tmp, path, input, "other.pb");

    snprintf(path, sizeof path, "%s/does-not-exist.onnx", tmp);
    expect_run_failure(tmp, path, input, "does-not-exist.onnx");
    remove_tree(tmp);
}

static void test_run_bad_inputs(void **state) {
    char *tmp = make_tmpdir();
    const char *model = src(FIXTURE "/model.onnx");
    char path[512], arg[1024];
    ir_diag d = {{0}};

    snprintf(path, sizeof path, "%s/missing.npy", tmp);
    expect_run_failure(tmp, model, path, "missing.npy");

    snprintf(path, sizeof path, "%s/garbage.npy", tmp);
    write_bytes(path, "\x93NUMPY garbage", 14);
    expect_run_failure(tmp, model, path, "garbage.npy");

    /* The fixture's input is float32 [2,16] (meta.json). */
    float data[3 * 16] = {0};
    ir_shape wrong_shape = TU_SHAPE(3, 16);
    snprintf(path, sizeof path, "%s/wrong-shape.npy", tmp);
    assert_int_equal(ir_npy_write(path, IR_F32, &wrong_shape, data, &d), IR_OK);
    expect_run_failure(tmp, model, path, "wrong-shape.npy");

    double ddata[2 * 16] = {0};
    ir_shape right_shape = TU_SHAPE(2, 16);
    snprintf(path, sizeof path, "%s/wrong-dtype.npy", tmp);
    assert_int_equal(ir_npy_write(path, IR_F64, &right_shape, ddata, &d), IR_OK);
    expect_run_failure(tmp, model, path, "wrong-dtype.npy");

    snprintf(arg, sizeof arg, "nosuchinput=%s", src(FIXTURE "/input_0.npy"));
    expect_run_failure(tmp, model, arg, "nosuchinput");

    /* The data input left unbound: one line naming it. */
    char odir[512];
    snprintf(odir, sizeof odir, "%s/out", tmp);
    proc p = run_magpie(tmp, (const char *[]){"run", model, "-o", odir, NULL});
    assert_int_equal(p.rc, 2);
    assert_int_equal(count_char(p.err, '\n'), 1);
    assert_non_null(strstr(p.err, "missing input '" FIXTURE_INPUT_NAME "'"));
    assert_int_equal(dir_entries(odir), 0);
    proc_free(&p);
    remove_tree(tmp);
}

/* A hand-encoded ONNX model (protobuf wire format) whose three outputs "a/b", "a:b" and "a_b"
 * all sanitize to "a_b": Relu(x), Add(x, x) and Mul(x, x) of an input x: float32 [2]. */
typedef struct pb {
    unsigned char b[1024];
    size_t n;
} pb;

static void pb_varint(pb *p, uint64_t v) {
    do {
        assert_true(p->n < sizeof p->b);
        p->b[p->n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}
static void pb_uint(pb *p, int field, uint64_t v) {
    pb_varint(p, (uint64_t)field << 3);
    pb_varint(p, v);
}
static void pb_bytes(pb *p, int field, const void *data, size_t n) {
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, n);
    assert_true(p->n + n <= sizeof p->b);
    memcpy(p->b + p->n, data, n);
    p->n += n;
}
static void pb_str(pb *p, int field, const char *s) {
    pb_bytes(p, field, s, strlen(s));
}
static void pb_msg(pb *p, int field, const pb *m) {
    pb_bytes(p, field, m->b, m->n);
}

static void pb_value_info(pb *g, int field, const char *name) {
    pb dim = {0}, shape = {0}, tensor = {0}, type = {0}, vi = {0};
    pb_uint(&dim, 1, 2);        /* Dimension.dim_value */
    pb_msg(&shape, 1, &dim);    /* TensorShapeProto.dim */
    pb_uint(&tensor, 1, 1);     /* TypeProto.Tensor.elem_type = FLOAT */
    pb_msg(&tensor, 2, &shape); /* .shape */
    pb_msg(&type, 1, &tensor);  /* TypeProto.tensor_type */
    pb_str(&vi, 1, name);
    pb_msg(&vi, 2, &type);
    pb_msg(g, field, &vi);
}

static void pb_node(pb *g, const char *op, int n_in, const char *out) {
    pb node = {0};
    for (int i = 0; i < n_in; i++) pb_str(&node, 1, "x");
    pb_str(&node, 2, out);
    pb_str(&node, 3, out);
    pb_str(&node, 4, op);
    pb_msg(g, 1, &node);
}

static void write_colliding_model(const char *path) {
    pb graph = {0}, opset = {0}, model = {0};
    pb_node(&graph, "Relu", 1, "a/b");
    pb_node(&graph, "Add", 2, "a:b");
    pb_node(&graph, "Mul", 2, "a_b");
    pb_str(&graph, 2, "collide");
    pb_value_info(&graph, 11, "x");
    pb_value_info(&graph, 12, "a/b");
    pb_value_info(&graph, 12, "a:b");
    pb_value_info(&graph, 12, "a_b");
    pb_uint(&opset, 2, 13);
    pb_uint(&model, 1, 7); /* ir_version */
    pb_msg(&model, 8, &opset);
    pb_msg(&model, 7, &graph);
    write_bytes(path, model.b, model.n);
}

static void expect_npy(const char *dir, const char *name, float v0, float v1) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ir_dtype t;
    ir_shape s;
    ir_blob *b = NULL;
    ir_diag d = {{0}};
    if (ir_npy_read(path, &t, &s, &b, &d) != IR_OK) fail_msg("%s", d.msg);
    assert_int_equal(t, IR_F32);
    assert_int_equal(ir_shape_numel(&s), 2);
    const float *f = ir_blob_data(b);
    assert_true(f[0] == v0 && f[1] == v1);
    ir_blob_unref(b);
}

static void test_run_output_names(void **state) {
    char *tmp = make_tmpdir();
    char model[512], input[512], odir[512];
    snprintf(model, sizeof model, "%s/collide.onnx", tmp);
    snprintf(input, sizeof input, "%s/x.npy", tmp);
    snprintf(odir, sizeof odir, "%s/out", tmp);
    write_colliding_model(model);
    float x[2] = {-1, 2};
    ir_shape s = TU_SHAPE(2);
    ir_diag d = {{0}};
    assert_int_equal(ir_npy_write(input, IR_F32, &s, x, &d), IR_OK);
    proc p = run_magpie(tmp, (const char *[]){"run", model, "-i", input, "-o", odir, NULL});
    if (p.rc != 0) fail_msg("rc %d: %s", p.rc, p.err);
    proc_free(&p);
    assert_int_equal(dir_entries(odir), 3);
    expect_npy(odir, "a_b.npy", 0, 2);
    expect_npy(odir, "a_b_1.npy", -2, 4);
    expect_npy(odir, "a_b_2.npy", 1, 4);
    remove_tree(tmp);
}

/* ---------------------------------------------------------------- the pieces, in-process */

static char *capture(void (*fn)(FILE *f, void *arg), void *arg) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    fn(f, arg);
    fclose(f);
    return buf;
}

static void write_escapes(FILE *f, void *arg) {
    cli_json j;
    cli_json_init(&j, f);
    cli_json_obj_begin(&j);
    cli_json_key(&j, "a\"b\\c");
    cli_json_str(&j, "line\nnext\ttab\x01\x1f end/\xc3\xa9");
    cli_json_key(&j, "list");
    cli_json_arr_begin(&j);
    cli_json_int(&j, -3);
    cli_json_num(&j, 0.5);
    cli_json_num(&j, NAN);
    cli_json_bool(&j, true);
    cli_json_str(&j, NULL);
    cli_json_obj_begin(&j);
    cli_json_obj_end(&j);
    cli_json_arr_end(&j);
    cli_json_key(&j, "big");
    cli_json_uint(&j, UINT64_MAX);
    cli_json_obj_end(&j);
    cli_json_finish(&j);
}

static void test_json_writer(void **state) {
    char *s = capture(write_escapes, NULL);
    assert_string_equal(s, "{\"a\\\"b\\\\c\":\"line\\nnext\\ttab\\u0001\\u001f end/\xc3\xa9\","
                           "\"list\":[-3,0.5,null,true,null,{}],\"big\":18446744073709551615}\n");
    jcheck j;
    json_parse_object(s, &j);
    assert_int_equal(j.n_keys, 3);
    free(s);
}

static void test_formatting(void **state) {
    char b[32];
    assert_string_equal(cli_fmt_bytes(0, b, sizeof b), "0 B");
    assert_string_equal(cli_fmt_bytes(1023, b, sizeof b), "1023 B");
    assert_string_equal(cli_fmt_bytes(1024, b, sizeof b), "1.0 KiB");
    assert_string_equal(cli_fmt_bytes(12897490, b, sizeof b), "12.3 MiB");
    assert_string_equal(cli_fmt_bytes(1048575, b, sizeof b), "1.0 MiB");
    assert_string_equal(cli_fmt_bytes(3ull << 30, b, sizeof b), "3.0 GiB");
    assert_string_equal(cli_fmt_si(812, b, sizeof b), "812");
    assert_string_equal(cli_fmt_si(1234567, b, sizeof b), "1.23 M");
    char n[64];
    cli_sanitize_name("a/b:c d.e-f_g", n, sizeof n);
    assert_string_equal(n, "a_b_c_d.e-f_g");
    cli_sanitize_name("", n, sizeof n);
    assert_string_equal(n, "_");
}

typedef struct spark_arg {
    const size_t *v;
    int n;
} spark_arg;

static void write_spark(FILE *f, void *arg) {
    const spark_arg *a = arg;
    cli_sparkline(f, a->v, a->n, 60);
}

static void test_sparkline(void **state) {
    size_t v[4] = {0, 10, 20, 70};
    spark_arg a = {v, 4};
    char *s = capture(write_spark, &a);
    assert_string_equal(s, "\u2581\u2582\u2583\u2588");
    free(s);
    /* 600 steps fold into 60 columns by max: the single spike must survive. */
    size_t *w = calloc(600, sizeof *w);
    w[317] = 1000;
    a = (spark_arg){w, 600};
    s = capture(write_spark, &a);
    assert_int_equal(strlen(s), 60 * 3); /* each block is 3 bytes of UTF-8 */
    assert_non_null(strstr(s, "\u2588"));
    assert_int_equal(memcmp(s + 31 * 3, "\u2588", 3), 0);
    free(s);
    free(w);
}

static void test_mkdirs_cleanup(void **state) {
    char *tmp = make_tmpdir();
    char dir[512];
    snprintf(dir, sizeof dir, "%s/a/b/c", tmp);
    char **made;
    int n_made;
    ir_diag d = {{0}};
    assert_int_equal(cli_mkdirs(dir, &made, &n_made, &d), IR_OK);
    assert_int_equal(n_made, 3);
    assert_int_equal(dir_entries(dir), 0);
    cli_rmdirs(made, n_made);
    assert_int_equal(dir_entries(tmp), 0);
    remove_tree(tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_writer),
        cmocka_unit_test(test_formatting),
        cmocka_unit_test(test_sparkline),
        cmocka_unit_test(test_mkdirs_cleanup),
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_inspect_json),
        cmocka_unit_test(test_inspect_text_and_plot),
        cmocka_unit_test(test_inspect_fission),
        cmocka_unit_test(test_export),
        cmocka_unit_test(test_run_outputs),
        cmocka_unit_test(test_run_output_names),
        cmocka_unit_test(test_run_bad_models),
        cmocka_unit_test(test_run_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
