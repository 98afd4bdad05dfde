/* cli-dist.h - `magpie optimize` and `magpie resume` started by mpirun or srun with K > 1 ranks:
 * one search across them (explorer/xd.h). cli-mpi.c implements this with MPI (MAGPIE_MPI builds);
 * cli-nompi.c, in the other builds, answers "one process" and refuses checkpoint sets.
 *
 *  - cli_dist_init (main, before the command): MPI_Init_thread (MPI_THREAD_FUNNELED: only the
 *    control thread talks to MPI) when an MPI launcher started this process (its environment
 *    says so) for optimize or resume; K = 1 is an ordinary one-process search.
 *  - Rank 0 alone prints, writes the plan and report.json (with the ranks' figures); every rank
 *    exits with rank 0's status (cli_dist_exit), after MPI_Finalize.
 *  - --checkpoint PATH: a checkpoint set (checkpoints/ckpt.h): each rank commits its part, rank 0
 *    the manifest at PATH once all have (cli_dist_ckpt_write); `magpie resume PATH` under the same
 *    K continues it, another K is refused (cli_dist_resume_part). */
#ifndef MAGPIE_CLI_DIST_H
#define MAGPIE_CLI_DIST_H

#include "cli.h"
#include "explorer.h"

void cli_dist_init(int *argc, char ***argv, const char *cmd);
int cli_dist_rank(void); /* 0 without MPI */
int cli_dist_size(void); /* 1 without MPI */
/* This process's part of the search (NULL for a one-process search). */
struct xs_dist *cli_dist_search(void);
/* Usage errors of a distributed search (--pet, --refine): reported, CLI_EXIT_USAGE; the layer
 * created (cli_dist_search), else CLI_EXIT_INTERNAL. */
int cli_dist_check(const cli_opts *o, bool pet, bool refine);
/* xs_options.checkpoint of a distributed search (arg: the cli_ckpt). */
ir_status cli_dist_ckpt_write(void *arg, const xs_snapshot *s, bool final, ir_diag *d);
/* The checkpoint file this rank resumes from FILE: *part NULL for FILE itself (a one-process
 * search of a plain checkpoint), else this rank's part of the set FILE names (malloc'd). A set
 * with another K, or a plain checkpoint under K > 1, is refused (reported, exit 2). */
int cli_dist_resume_part(const char *file, char **part);
/* report.json's "mpi" value (null for a one-process search). */
void cli_dist_report(cli_json *j, const xs_result *r);
/* Every rank's exit status: rank 0's; then MPI_Finalize. */
int cli_dist_exit(int code);

#endif
