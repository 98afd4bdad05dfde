/* test_mpi_units.c - the distributed search's pure parts (ctest label mpi): ownership by hash
 * (explorer/xd.h: deterministic, in range, balanced over the ranks) and the checkpoint set's
 * manifest (checkpoints/ckpt.h: a round trip, part names by generation, an ordinary checkpoint
 * told apart, a torn manifest refused). No MPI call is made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "xd.h"

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void test_owner_balanced(void **st) {
    (void)st;
    static const int ks[] = {1, 2, 3, 4, 7, 16};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        int k = ks[i], count[16] = {0};
        uint64_t seed = 42;
        const int n = 200000;
        for (int j = 0; j < n; j++) {
            uint64_t fp = splitmix(&seed);
            int o = xd_owner(fp, k);
            assert_true(o >= 0 && o < k);
            assert_int_equal(o, xd_owner(fp, k)); /* a function of the fingerprint alone */
            count[o]++;
        }
        for (int r = 0; r < k; r++) {
            double share = (double)count[r] / n * k;
            assert_true(share > 0.97 && share < 1.03);
        }
    }
    /* fingerprints that differ in their low bits only (table slots) still spread */
    int count[2] = {0};
    for (uint64_t fp = 0; fp < 1000; fp++) count[xd_owner(fp, 2)]++;
    assert_true(count[0] > 400 && count[1] > 400);
}

static void test_manifest_round_trip(void **st) {
    (void)st;
    char dir[] = "/tmp/magpie-set-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/ck", dir);
    uint64_t hash[3] = {1, UINT64_C(0xfedcba9876543210), 0};
    ckpt_set s = {.ranks = 3, .generation = 7, .hash = hash}, t;
    ir_diag d = {{0}};
    assert_int_equal(ckpt_set_write(path, &s, &d), IR_OK);
    bool is_set = false;
    assert_int_equal(ckpt_set_read(path, &t, &is_set, &d), IR_OK);
    assert_true(is_set);
    assert_int_equal(t.ranks, 3);
    assert_int_equal(t.generation, 7);
    assert_memory_equal(t.hash, hash, sizeof hash);
    ckpt_set_free(&t);
    char *part = ckpt_set_part_path(path, 7, 2);
    char want[300];
    snprintf(want, sizeof want, "%s.g7.r2", path);
    assert_string_equal(part, want);
    free(part);
    /* a torn manifest (a part missing) is refused, naming the file */
    FILE *f = fopen(path, "w");
    fputs("magpie checkpoint set 1\nranks 3\ngeneration 7\npart 0 01\n", f);
    fclose(f);
    assert_int_equal(ckpt_set_read(path, &t, &is_set, &d), IR_ERR_PARSE);
    assert_non_null(strstr(d.msg, "part 1 missing"));
    /* anything else is not a set: an ordinary checkpoint's reader takes it */
    f = fopen(path, "w");
    fputs("MAGPIECK", f);
    fclose(f);
    assert_int_equal(ckpt_set_read(path, &t, &is_set, &d), IR_OK);
    assert_false(is_set);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_owner_balanced),
        cmocka_unit_test(test_manifest_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
