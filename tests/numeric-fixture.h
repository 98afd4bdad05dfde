/* numeric-fixture.h - loading one model of tests/fixtures/numeric/ as test_fixtures_numeric.c
 * does: input_<i>.npy bound to the inputs meta.json names, whose shapes also resolve symbolic
 * dims. For tests that run the fixtures for another purpose (test_f64_*.c). */
#ifndef MAGPIE_TEST_NUMERIC_FIXTURE_H
#define MAGPIE_TEST_NUMERIC_FIXTURE_H

#include "test-util.h"

#include <dirent.h>
#include <unistd.h>

#include "rt.h"

#define NF_MAX_IO 8
#define NF_MAX_FIXTURES 256

typedef struct nf_fixture {
    char name[128];
    ir_graph *g;
    int n_in;
    ir_blob *blobs[NF_MAX_IO];
    rt_binding bind[NF_MAX_IO]; /* into g, data in blobs */
} nf_fixture;

/* The sorted names of the fixtures' directories into names (each malloc'd); returns the count. */
static inline int nf_list(char **names, int max) {
    char dir[1024];
    tu_src_path("tests/fixtures/numeric", dir, sizeof dir);
    DIR *dp = opendir(dir);
    if (!dp) fail_msg("no fixtures at %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && n < max) {
        char p[1400];
        snprintf(p, sizeof p, "%s/%s/model.onnx", dir, e->d_name);
        if (e->d_name[0] != '.' && access(p, F_OK) == 0) names[n++] = strdup(e->d_name);
    }
    closedir(dp);
    for (int i = 1; i < n; i++) /* insertion sort: a few dozen names */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    return n;
}

/* The strings of meta.json's "inputs" array (a flat list of names), at most max. */
static inline int nf_meta_inputs(const char *path, char names[][128], int max) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strstr(buf, "\"inputs\"");
    if (!p || !(p = strchr(p, '['))) return 0;
    int cnt = 0;
    for (p++; *p && *p != ']' && cnt < max;) {
        if (*p != '"') {
            p++;
            continue;
        }
        const char *e = strchr(p + 1, '"');
        if (!e) break;
        snprintf(names[cnt++], 128, "%.*s", (int)(e - p - 1), p + 1);
        p = e + 1;
    }
    return cnt;
}

/* Loads fixture name into *f, failing the test on any error. */
static inline void nf_load(const char *name, nf_fixture *f) {
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    char dir[1024], path[1400], names[NF_MAX_IO][128];
    const char *shape_names[NF_MAX_IO];
    ir_shape shapes[NF_MAX_IO];
    ir_dtype dtypes[NF_MAX_IO];
    ir_diag d = {{0}};
    ir_status st;
    tu_src_path("tests/fixtures/numeric", dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s/meta.json", dir, name);
    int n_meta = nf_meta_inputs(path, names, NF_MAX_IO);
    for (; f->n_in < NF_MAX_IO; f->n_in++) {
        snprintf(path, sizeof path, "%s/%s/input_%d.npy", dir, name, f->n_in);
        if (access(path, F_OK) != 0) break;
        int i = f->n_in;
        if (ir_npy_read(path, &dtypes[i], &shapes[i], &f->blobs[i], &d) != IR_OK)
            fail_msg("%s: %s", name, d.msg);
        shape_names[i] = i < n_meta ? names[i] : NULL;
    }
    int n_named = n_meta < f->n_in ? n_meta : f->n_in;
    ir_import_opts opts = {.n_shapes = n_named,
                           .shape_names = shape_names,
                           .shape_values = shapes,
                           .n_data = n_named,
                           .data_names = shape_names};
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, name);
    if (!(f->g = ir_onnx_load(path, &opts, &st, &d))) fail_msg("import %s: %s", name, d.msg);
    for (int i = 0; i < f->n_in; i++) {
        int v = i < n_named ? ir_graph_find_value(f->g, names[i])
                            : (i < f->g->n_inputs ? f->g->inputs[i] : -1);
        if (v < 0) fail_msg("%s: input %d is not in the graph", name, i);
        f->bind[i] = (rt_binding){
            .value = v, .dtype = dtypes[i], .shape = shapes[i], .data = ir_blob_data(f->blobs[i])};
    }
}

static inline void nf_free(nf_fixture *f) {
    ir_graph_free(f->g);
    for (int i = 0; i < NF_MAX_IO; i++) ir_blob_unref(f->blobs[i]);
    memset(f, 0, sizeof *f);
}

#endif
