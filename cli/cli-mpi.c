/* cli-mpi.c - cli-dist.h with MPI (MAGPIE_MPI builds): MPI's start and end, the distributed
 * search's layer (xd.h), checkpoint sets (a part per rank, then rank 0's manifest) and the ranks'
 * figures in report.json. Only the main thread calls MPI. */
#define _POSIX_C_SOURCE 200809L
#include "cli-dist.h"
#include "ckpt.h"
#include "optimize-run.h"
#include "xd.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool mpi_on;
static int rank, size = 1;
static struct xs_dist *dist;
/* checkpoint sets: the next generation to write, and the last one committed (a resumed set's) */
static uint64_t next_gen = 1, last_gen;
static bool have_last;

static bool launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK") ||
           getenv("PMI_SIZE");
}

void cli_dist_init(int *argc, char ***argv, const char *cmd) {
    if (!cmd || (strcmp(cmd, "optimize") != 0 && strcmp(cmd, "resume") != 0)) return;
    if (!launched_by_mpi()) return;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return;
    mpi_on = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
}

int cli_dist_rank(void) {
    return rank;
}

int cli_dist_size(void) {
    return size;
}

struct xs_dist *cli_dist_search(void) {
    if (size <= 1) return NULL;
    if (!dist) dist = xd_create(MPI_COMM_WORLD);
    return dist;
}

int cli_dist_check(const cli_opts *o, bool pet, bool refine) {
    (void)o;
    if (size <= 1) return CLI_EXIT_OK;
    if ((pet || refine) && rank != 0) return CLI_EXIT_USAGE; /* rank 0 says why, once */
    if (pet)
        return cli_fail(CLI_EXIT_USAGE,
                        "--pet is not supported under MPI (%d ranks): run it in "
                        "one process",
                        size);
    if (refine)
        return cli_fail(CLI_EXIT_USAGE,
                        "--refine is not supported under MPI (%d ranks): run it "
                        "in one process",
                        size);
    /* never K independent searches each writing the outputs: no layer, no search */
    if (!cli_dist_search()) return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    return CLI_EXIT_OK;
}

ir_status cli_dist_ckpt_write(void *arg, const xs_snapshot *s, bool final, ir_diag *d) {
    cli_ckpt *c = arg;
    const char *manifest = c->path;
    uint64_t gen = next_gen;
    char *part = ckpt_set_part_path(manifest, gen, rank);
    ir_status st = IR_OK;
    uint64_t mine[2] = {0, 0}; /* ok, the part's hash */
    if (!part) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "out of memory");
    } else {
        c->path = part;
        st = cli_ckpt_write(c, s, final, d);
        c->path = manifest;
        if (st == IR_OK && (st = ckpt_file_hash(part, &mine[1], d)) == IR_OK) mine[0] = 1;
    }
    /* every rank takes part whatever happened to its own part */
    uint64_t *all = rank == 0 ? calloc((size_t)size * 2, sizeof *all) : NULL;
    MPI_Gather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    int committed = 0, bad_rank = -1;
    if (rank == 0 && all) {
        ckpt_set set = {.ranks = (uint32_t)size, .generation = gen};
        set.hash = malloc(sizeof *set.hash * (size_t)size);
        for (int r = 0; r < size && bad_rank < 0; r++)
            if (!all[2 * r]) bad_rank = r;
        if (set.hash && bad_rank < 0) {
            for (int r = 0; r < size; r++) set.hash[r] = all[2 * r + 1];
            ir_diag md = {{0}};
            committed = ckpt_set_write(manifest, &set, &md) == IR_OK;
            if (!committed && st == IR_OK) {
                st = IR_ERR_IO;
                if (d) *d = md;
            }
        }
        free(set.hash);
    }
    free(all);
    int info[2] = {committed, bad_rank};
    MPI_Bcast(info, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (info[0]) {
        /* the set of gen is complete: the previous one is not needed any more */
        if (have_last) {
            char *old = ckpt_set_part_path(manifest, last_gen, rank);
            if (old) unlink(old);
            free(old);
        }
        last_gen = gen;
        have_last = true;
        next_gen = gen + 1;
    } else {
        if (part) unlink(part); /* not part of any complete set */
        if (st == IR_OK)
            st = ir_diag_set(d, IR_ERR_IO,
                             "rank %d could not write its part of the checkpoint "
                             "set; the previous set stays",
                             info[1] >= 0 ? info[1] : 0);
    }
    free(part);
    return st;
}

int cli_dist_resume_part(const char *file, char **part) {
    *part = NULL;
    ckpt_set set;
    bool is_set = false;
    ir_diag d = {{0}};
    ir_status st = ckpt_set_read(file, &set, &is_set, &d);
    if (st != IR_OK) return cli_fail_ir(st, &d, NULL);
    if (!is_set) {
        if (size <= 1) return CLI_EXIT_OK;
        if (rank != 0) return CLI_EXIT_USAGE; /* rank 0 says why, once */
        return cli_fail(CLI_EXIT_USAGE,
                        "%s: a checkpoint of a one-process search; this job has %d ranks: "
                        "resume it without mpirun (or with -np 1)",
                        file, size);
    }
    unsigned k = set.ranks;
    uint64_t gen = set.generation, want = rank < (int)k ? set.hash[rank] : 0;
    ckpt_set_free(&set);
    if ((int)k != size && rank != 0) return CLI_EXIT_USAGE; /* rank 0 says why, once */
    if ((int)k != size)
        return cli_fail(CLI_EXIT_USAGE,
                        "%s: a checkpoint set of %u ranks; this job has %d: resume it with "
                        "'mpirun -np %u magpie resume %s' (re-partitioning is not supported)",
                        file, k, size, k, file);
    char *p = ckpt_set_part_path(file, gen, rank);
    if (!p) return cli_fail(CLI_EXIT_INTERNAL, "out of memory");
    uint64_t h = 0;
    if ((st = ckpt_file_hash(p, &h, &d)) != IR_OK) {
        free(p);
        return cli_fail_ir(st, &d, file);
    }
    if (h != want) {
        int code = cli_fail(CLI_EXIT_USAGE,
                            "%s: part %s of rank %d does not match the manifest (hash %016llx, "
                            "recorded %016llx)",
                            file, p, rank, (unsigned long long)h, (unsigned long long)want);
        free(p);
        return code;
    }
    last_gen = gen;
    have_last = true;
    next_gen = gen + 1;
    *part = p;
    return CLI_EXIT_OK;
}

void cli_dist_report(cli_json *j, const xs_result *r) {
    if (r->n_ranks <= 1 || !r->per_rank) {
        cli_json_null(j);
        return;
    }
    cli_json_obj_begin(j);
    cli_json_kv_int(j, "ranks", r->n_ranks);
    cli_json_kv_str(j, "ownership", "hash of the fingerprint (HDA*)");
    cli_json_key(j, "per_rank");
    cli_json_arr_begin(j);
    for (int i = 0; i < r->n_ranks; i++) {
        const xs_rank_stats *s = &r->per_rank[i];
        cli_json_obj_begin(j);
        cli_json_kv_int(j, "rank", i);
        cli_json_kv_uint(j, "distinct_states", s->distinct);
        cli_json_kv_num(j, "distinct_states_per_second",
                        s->search_s > 0 ? (double)s->distinct / s->search_s : 0);
        cli_json_kv_uint(j, "expanded", s->expanded);
        cli_json_kv_uint(j, "generated", s->generated);
        cli_json_kv_uint(j, "messages_sent", s->msgs_sent);
        cli_json_kv_uint(j, "bytes_sent", s->bytes_sent);
        cli_json_kv_uint(j, "states_sent", s->states_sent);
        cli_json_kv_uint(j, "states_received", s->states_recv);
        cli_json_kv_uint(j, "replay_steps", s->replay_steps);
        cli_json_kv_num(j, "replay_seconds", s->replay_s);
        cli_json_kv_num(j, "search_seconds", s->search_s);
        cli_json_kv_num(j, "idle_seconds", s->idle_s);
        cli_json_kv_num(j, "blocked_seconds", s->blocked_s);
        cli_json_obj_end(j);
    }
    cli_json_arr_end(j);
    cli_json_obj_end(j);
}

int cli_dist_exit(int code) {
    if (!mpi_on) return code;
    if (size > 1) MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    xd_free(dist);
    dist = NULL;
    MPI_Finalize();
    return code;
}
