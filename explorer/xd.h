/* xd.h - one search across the processes of an MPI job (HDA*: hash-distributed A*, Kishimoto,
 * Fukunaga and Botea, "Scalable, Parallel Best-First Search for Optimal Sequential Planning",
 * ICAPS 2009), on Open MPI. Built only with MAGPIE_MPI (xd-mpi.c); the explorer reaches it
 * through xs_options.dist and the xs_dist_ops of explorer-impl.h alone.
 *
 * Design:
 *  - Ownership. A state's fingerprint names its owner rank (xd_owner: a mix of the fingerprint,
 *    modulo K). A worker that emits a child owned elsewhere does not insert it into its own
 *    fingerprint set: it appends the child to the outbox of the owner (xp_pool_opts.route) and
 *    goes on expanding. The owner alone deduplicates it (xp_pool_inject) and keeps it.
 *  - A state travels as its rewrite path from the start state: per step the rw_rewrite, and the
 *    fingerprint, peak and latency the search computed (40 bytes), so the receiver rebuilds it by
 *    replay (xs_materialize) and checks every step's figures (replay_mismatches). The receiver
 *    interns the steps by (parent, rewrite) into its own state tree: a child's siblings and
 *    cousins, which arrive together, share their ancestors, so the replay starts at the nearest
 *    ancestor whose materialization is cached (often the parent: one derive). Not by
 *    fingerprint: two states of one fingerprint may number their nodes differently, and the
 *    rewrites further down a path name node ids.
 *  - Batching. Each destination's outbox is one byte buffer (a mutex each: workers append, the
 *    control thread swaps it out); it is sent with MPI_Isend when it holds XD_BATCH_BYTES or has
 *    waited XD_FLUSH_S, or at once when this rank is idle. Only the control thread calls MPI
 *    (MPI_THREAD_FUNNELED); workers never wait on the network.
 *  - Waves. The control thread keeps one MPI_Iallgather in flight on a communicator of its own:
 *    each rank's messages sent and received, whether it is idle (no state anywhere in its pool
 *    and an empty outbox), its pool's stop reason, its distinct states, its checkpoint wish and
 *    its best key. Every rank sees the same gathered wave and takes the same decision from it:
 *    the best key of all becomes every pool's bound (xp_pool_set_bound: relaxed acceptance
 *    against the global best); a stop reason on any rank, or distinct states summing to
 *    --max-states, stops all; a checkpoint wish anywhere checkpoints all.
 *  - Termination (double counting, Mattern 1987): the search is over when two consecutive waves
 *    both find every rank idle and the same sums of messages sent and received, equal to each
 *    other. Counters only grow, so equal sums mean that no rank sent or received anything between
 *    the two samples; an idle rank becomes active only by receiving; so no rank was active and
 *    no message was in flight in between: nothing is lost.
 *  - Quiesce (checkpoints, the end): with every pool paused no new message is made, so each rank
 *    sends its outboxes and then receives until the sums of sent and received messages agree
 *    (MPI_Allreduce): then nothing is in flight, and each rank's frontier plus its received
 *    states is a consistent part of one global cut.
 *  - The result: rank 0 gathers every rank's best path and figures (MPI_Gatherv) and rebuilds
 *    the best of all by replay. */
#ifndef MAGPIE_XD_H
#define MAGPIE_XD_H

#include "explorer.h"

#include <mpi.h>

/* Outbox thresholds and the wave period. */
#define XD_BATCH_BYTES (64 * 1024)
#define XD_FLUSH_S 0.002
#define XD_WAVE_S 0.002

/* This process's part of a search over comm (duplicated: the layer's messages never meet the
 * caller's). NULL when out of memory. */
struct xs_dist *xd_create(MPI_Comm comm);
void xd_free(struct xs_dist *x); /* NULL-safe; after the search */
/* The owner rank of fingerprint fp among k. */
int xd_owner(uint64_t fp, int k);

#endif
