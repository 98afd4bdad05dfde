/* optimize-report.c - what `magpie optimize` and `magpie resume` write about a plan:
 * report.json (also printed by --json), schedule.json (docs/schedule-json.md), memory.svg and
 * the text summary. The figures are those of the plan as written (optimized.onnx read back and
 * simulated in file order); the search's own are reported beside them. report.json's
 * "states_*" counters and "resumes" count the whole search, earlier runs of a resumed one
 * included; "checkpoint" describes this run's checkpoints; "pet" the PET table the search
 * built (rebuilt identically by a resume) and the candidates applied in the best state. */
#include "cli-dist.h"
#include "optimize-run.h"

#include <math.h>
#include <string.h>

/* report.json's "pet": the table's counters and every candidate applied in the best state
 * (null without PET). */
static void report_pet(cli_json *j, const xs_result *r) {
    const pet_table *t = r->pet;
    if (!t) {
        cli_json_null(j);
        return;
    }
    cli_json_obj_begin(j);
    cli_json_kv_int(j, "subprograms", t->split ? t->split->n : 0);
    cli_json_kv_int(j, "subprograms_mutated", t->subprogs);
    cli_json_kv_int(j, "mutants", t->mutants);
    cli_json_kv_int(j, "verified", t->verified);
    cli_json_kv_int(j, "rejected", t->rejected);
    cli_json_kv_int(j, "uncorrectable", t->uncorrectable);
    cli_json_kv_int(j, "candidates", t->n);
    cli_json_kv_int(j, "box_tests", t->box_tests);
    /* generate, verify and correct are summed over the threads; total is setup's wall time */
    cli_json_key(j, "seconds");
    cli_json_obj_begin(j);
    cli_json_kv_num(j, "generate", t->gen_seconds);
    cli_json_kv_num(j, "verify", t->verify_seconds);
    cli_json_kv_num(j, "correct", t->correct_seconds);
    cli_json_kv_num(j, "total", r->pet_seconds);
    cli_json_obj_end(j);
    cli_json_key(j, "applied");
    cli_json_arr_begin(j);
    for (int i = 0; i < r->n_pet_applied; i++) {
        const xs_pet_applied *a = &r->pet_applied[i];
        cli_json_obj_begin(j);
        cli_json_kv_str(j, "subprogram", a->first_node);
        cli_json_kv_str(j, "class", pet_mutant_class_name(a->cls));
        cli_json_kv_int(j, "boxes", a->n_boxes);
        cli_json_kv_int(j, "corrections", a->n_failed);
        cli_json_kv_int(j, "fused", a->n_fused);
        cli_json_kv_num(j, "predicted_gain", a->cost > 0 ? a->orig_cost / a->cost : NAN);
        cli_json_kv_num(j, "false_accept_bound", a->false_accept_bound);
        cli_json_obj_end(j);
    }
    cli_json_arr_end(j);
    cli_json_obj_end(j);
}

void cli_optimize_report_json(cli_json *j, const cli_opt_report *p) {
    const xs_result *r = p->r;
    const xp_worker_stats *t = &r->stats.total;
    char buf[32];
    cli_json_obj_begin(j);
    cli_json_kv_str(j, "model", p->model);
    cli_json_kv_str(j, "device", p->device);
    cli_json_kv_str(j, "output_dir", p->out_dir);
    cli_json_key(j, "limit");
    cli_json_obj_begin(j);
    cli_json_kv_str(j, "kind", p->a->xs.mode == XS_MODE_MEM ? "memory" : "latency");
    cli_json_kv_str(j, "given", p->a->limit_text);
    cli_json_kv_num(j, p->a->xs.mode == XS_MODE_MEM ? "bytes" : "seconds", p->limit_abs);
    cli_json_kv_bool(j, "met", p->met);
    cli_json_obj_end(j);
    cli_json_kv_uint(j, "baseline_peak_bytes", r->eager_peak_bytes);
    cli_json_kv_num(j, "baseline_latency_seconds", r->eager_latency_s);
    cli_json_kv_uint(j, "start_peak_bytes", r->start_peak_bytes);
    cli_json_kv_num(j, "start_latency_seconds", r->start_latency_s);
    cli_json_kv_uint(j, "best_peak_bytes", p->sim->peak_device_bytes);
    cli_json_kv_num(j, "best_latency_seconds", p->sim->latency_s);
    cli_json_kv_uint(j, "search_best_peak_bytes", r->best_peak_bytes);
    cli_json_kv_num(j, "search_best_latency_seconds", r->best_latency_s);
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)r->best_fingerprint);
    cli_json_kv_str(j, "best_fingerprint", buf);
    cli_json_kv_uint(j, "best_peak_host_bytes", p->sim->peak_host_bytes);
    cli_json_kv_num(j, "peak_ratio",
                    r->eager_peak_bytes
                        ? (double)p->sim->peak_device_bytes / (double)r->eager_peak_bytes
                        : NAN);
    cli_json_kv_num(j, "latency_ratio",
                    r->eager_latency_s > 0 ? p->sim->latency_s / r->eager_latency_s : NAN);
    cli_measure_report(j, p->measure, p->sim->latency_s);
    cli_json_kv_int(j, "nodes", p->best->n_nodes);
    cli_json_key(j, "states_explored"); /* children scheduled and simulated, plus the start */
    cli_json_uint(j, t->generated + 1);
    cli_json_kv_uint(j, "states_expanded", t->expanded);
    cli_json_kv_uint(j, "states_duplicate", t->duplicates);
    cli_json_kv_uint(j, "states_rejected", t->rejected);
    cli_json_kv_uint(j, "states_failed", r->failed_children);
    /* the states count the whole search: so must the seconds of a resumed one (stats.seconds;
     * this run's alone is wall_seconds.search) */
    double search_s = r->resumes ? r->stats.seconds : r->search_seconds;
    cli_json_kv_num(j, "states_per_second",
                    search_s > 0 ? (double)(t->generated + 1) / search_s : NAN);
    cli_json_kv_num(j, "search_seconds_total", r->stats.seconds);
    /* where the workers' time went in this run (xp_pool_stats): the 2-thread scaling's
     * evidence (an idle worker, or CPU time a loaded machine did not give) */
    cli_json_key(j, "workers");
    cli_json_obj_begin(j);
    cli_json_kv_num(j, "expand_seconds", r->stats.expand_seconds);
    cli_json_kv_num(j, "idle_seconds", r->stats.idle_seconds);
    cli_json_kv_num(j, "cpu_seconds", r->stats.cpu_seconds);
    cli_json_kv_num(j, "states_per_cpu_second",
                    r->stats.cpu_seconds > 0 ? (double)(t->generated + 1) / r->stats.cpu_seconds
                                             : NAN);
    cli_json_obj_end(j);
    cli_json_kv_str(j, "stop_reason", xp_stop_reason_to_string(r->stats.reason));
    cli_json_kv_bool(j, "interrupted", r->interrupted);
    cli_json_kv_uint(j, "resumes", r->resumes);
    if (p->a->refine) {
        cli_json_key(j, "refine");
        cli_json_obj_begin(j);
        cli_json_kv_int(j, "rounds", r->refine_rounds);
        cli_json_kv_int(j, "improved", r->refine_improved);
        cli_json_kv_num(j, "bound_seconds", r->refine_bound_s);
        cli_json_obj_end(j);
    }
    cli_json_key(j, "checkpoint");
    cli_ckpt_report(j, p->ckpt, r);
    cli_json_key(j, "mpi");
    cli_dist_report(j, r);
    cli_json_key(j, "frontier");
    cli_json_obj_begin(j);
    cli_json_kv_uint(j, "max", p->a->xs.max_frontier);
    cli_json_kv_uint(j, "peak", t->frontier_peak); /* summed over the workers: a bound */
    cli_json_kv_uint(j, "left", r->stats.frontier);
    cli_json_kv_uint(j, "evicted", t->evicted);
    cli_json_kv_uint(j, "dropped", t->dropped);
    cli_json_obj_end(j);
    cli_json_key(j, "cache");
    cli_json_obj_begin(j);
    cli_json_kv_uint(j, "hits", r->cache_hits);
    cli_json_kv_uint(j, "misses", r->cache_misses);
    cli_json_kv_uint(j, "replayed_rewrites", r->replay_steps);
    cli_json_kv_uint(j, "replay_mismatches", r->replay_mismatches);
    cli_json_obj_end(j);
    /* the rewrites on the best state's chain */
    cli_json_key(j, "rules");
    cli_json_obj_begin(j);
    for (int k = 0; k < RW_KIND_COUNT; k++) cli_json_kv_int(j, rw_kind_name(k), r->applied[k]);
    cli_json_obj_end(j);
    cli_json_key(j, "subst_rules");
    cli_json_obj_begin(j);
    for (int k = 0; k < RW_SUBST_RULE_COUNT; k++)
        cli_json_kv_int(j, rw_subst_rule_name(k), r->subst_applied[k]);
    cli_json_obj_end(j);
    cli_json_kv_int(j, "ftree_nodes", r->ftree_nodes);
    cli_json_key(j, "fissions");
    cli_json_arr_begin(j);
    for (int i = 0; i < r->n_fissions; i++) {
        cli_json_obj_begin(j);
        cli_json_kv_int(j, "ftree_node", r->fissions[i].tree_node);
        cli_json_kv_int(j, "nodes", r->fissions[i].n_ids);
        cli_json_kv_int(j, "dimension_length", r->fissions[i].dim_len);
        cli_json_kv_int(j, "parts", r->fissions[i].parts);
        cli_json_obj_end(j);
    }
    cli_json_arr_end(j);
    cli_json_key(j, "pet");
    report_pet(j, r);
    cli_json_kv_int(j, "store_nodes", p->n_store);
    cli_json_kv_int(j, "load_nodes", p->n_load);
    cli_json_kv_int(j, "fission_nodes", p->n_fission_ops);
    cli_json_key(j, "rule_families");
    cli_json_arr_begin(j);
    for (int k = 0; k < cli_n_rule_families; k++)
        if (p->a->xs.rules & cli_rule_families[k].flag) cli_json_str(j, cli_rule_families[k].name);
    cli_json_arr_end(j);
    cli_json_kv_int(j, "threads", p->threads);
    cli_json_kv_uint(j, "seed", p->a->xs.seed);
    cli_json_kv_num(j, "delta", p->a->xs.delta);
    /* the workers' time by phase, summed over the workers */
    cli_json_key(j, "phase_seconds");
    cli_json_obj_begin(j);
    for (int k = 0; k < XS_PHASE_COUNT; k++)
        cli_json_kv_num(j, xs_phase_name(k), r->phase_seconds[k]);
    cli_json_obj_end(j);
    /* the command's wall time by step */
    cli_json_key(j, "wall_seconds");
    cli_json_obj_begin(j);
    cli_json_kv_num(j, "load", p->t_load);
    cli_json_kv_num(j, "profile", p->t_profile);
    cli_json_kv_num(j, "start", r->start_seconds);
    cli_json_kv_num(j, "search", r->search_seconds);
    cli_json_kv_num(j, "write", p->t_write);
    cli_json_obj_end(j);
    cli_json_obj_end(j);
}

bool cli_optimize_write_report(FILE *f, void *arg, ir_diag *d) {
    (void)d;
    cli_json j;
    cli_json_init(&j, f);
    cli_optimize_report_json(&j, arg);
    cli_json_finish(&j);
    return !ferror(f);
}

/* The format is docs/schedule-json.md's; change both together. */
bool cli_optimize_write_schedule(FILE *f, void *arg, ir_diag *d) {
    (void)d;
    const cli_opt_report *p = arg;
    cli_json j;
    cli_json_init(&j, f);
    cli_json_obj_begin(&j);
    cli_json_kv_int(&j, "version", 1);
    cli_json_kv_str(&j, "model", p->model);
    cli_json_kv_str(&j, "device", p->device);
    cli_json_kv_uint(&j, "peak_bytes", p->sim->peak_device_bytes);
    cli_json_kv_uint(&j, "peak_host_bytes", p->sim->peak_host_bytes);
    cli_json_kv_num(&j, "latency_seconds", p->sim->latency_s);
    cli_json_key(&j, "steps");
    cli_json_arr_begin(&j);
    for (int s = 0; s < p->best->n_nodes; s++) {
        const ir_node *n = &p->best->nodes[s];
        cli_json_obj_begin(&j);
        cli_json_kv_int(&j, "step", s);
        cli_json_kv_str(&j, "node", n->name);
        cli_json_kv_str(&j, "op", n->op_type ? n->op_type : ir_op_name(n->op));
        cli_json_kv_str(&j, "domain", n->domain ? n->domain : "");
        cli_json_kv_num(&j, "start_seconds", p->sim->start_s[s]);
        cli_json_kv_num(&j, "end_seconds", p->sim->end_s[s]);
        cli_json_kv_uint(&j, "device_bytes", p->sim->device_bytes[s]);
        cli_json_kv_uint(&j, "host_bytes", p->sim->host_bytes[s]);
        cli_json_obj_end(&j);
    }
    cli_json_arr_end(&j);
    cli_json_obj_end(&j);
    cli_json_finish(&j);
    return !ferror(f);
}

static int peak_step(const size_t *v, int n) {
    int best = n > 0 ? 0 : -1;
    for (int s = 1; s < n; s++)
        if (v[s] > v[best]) best = s;
    return best;
}

ir_status cli_optimize_write_plot(const char *path, const sched_sim *eager, const sched_sim *plan,
                                  size_t resident, ir_diag *d) {
    char a[32], b[32], la[96], lb[96];
    snprintf(la, sizeof la, "optimized plan (peak %s)",
             cli_fmt_bytes(plan->peak_device_bytes, a, sizeof a));
    snprintf(lb, sizeof lb, "eager order (peak %s)",
             cli_fmt_bytes(eager->peak_device_bytes, b, sizeof b));
    cli_mem_plot pl = {.title = "magpie optimize: live memory, eager order vs optimized plan",
                       .step_bytes = plan->device_bytes,
                       .n_steps = plan->n_steps,
                       .resident_bytes = resident,
                       .peak_step = peak_step(plan->device_bytes, plan->n_steps),
                       .ref_bytes = eager->device_bytes,
                       .ref_n_steps = eager->n_steps,
                       .label = la,
                       .ref_label = lb};
    return cli_plot_svg(path, &pl, d);
}

void cli_optimize_print_text(const cli_opt_report *p, const char *const files[4]) {
    const xs_result *r = p->r;
    const sched_sim *s = p->sim;
    char b1[32], b2[32], b3[32], b4[32];
    printf("model        %s\n", p->model);
    printf("device       %s\n", p->device);
    printf("peak         %s -> %s (%.1f%%)\n", cli_fmt_bytes(r->eager_peak_bytes, b1, sizeof b1),
           cli_fmt_bytes(s->peak_device_bytes, b2, sizeof b2),
           r->eager_peak_bytes
               ? 100.0 * ((double)s->peak_device_bytes / (double)r->eager_peak_bytes - 1)
               : 0.0);
    printf("latency      %s -> %s (%.1f%%)\n", cli_fmt_seconds(r->eager_latency_s, b3, sizeof b3),
           cli_fmt_seconds(s->latency_s, b4, sizeof b4),
           r->eager_latency_s > 0 ? 100.0 * (s->latency_s / r->eager_latency_s - 1) : 0.0);
    const cli_measure *mz = p->measure;
    if (mz->on && mz->chosen < 0)
        printf("measured     %s -> the original order (%d rounds): the fastest plan ran slower\n",
               cli_fmt_seconds(mz->base_measured_s, b1, sizeof b1), mz->rounds);
    else if (mz->on)
        printf("measured     %s -> %s (%.3fx, median of %d alternating rounds; plan %d of %d)\n",
               cli_fmt_seconds(mz->base_measured_s, b1, sizeof b1),
               cli_fmt_seconds(mz->plans[mz->chosen].measured_s, b2, sizeof b2),
               mz->plans[mz->chosen].ratio, mz->rounds, mz->chosen + 1, mz->n_plans);
    else
        printf("measured     no (%s)\n", mz->why_not);
    printf("rewrites    ");
    for (int k = 0; k < RW_KIND_COUNT; k++)
        printf(" %s %d%s", rw_kind_name(k), r->applied[k], k + 1 < RW_KIND_COUNT ? "," : "\n");
    printf("fissions     %d enabled (F-Tree of %d nodes)\n", r->n_fissions, r->ftree_nodes);
    if (r->pet)
        printf("pet          %d applied of %d candidates (%d mutants of %d sub-programs: %d "
               "rejected, %d uncorrectable), %s\n",
               r->n_pet_applied, r->pet->n, r->pet->mutants, r->pet->subprogs, r->pet->rejected,
               r->pet->uncorrectable, cli_fmt_seconds(r->pet_seconds, b1, sizeof b1));
    printf("search       %llu states, %s, %s", (unsigned long long)r->stats.total.generated + 1,
           cli_fmt_seconds(r->search_seconds, b1, sizeof b1),
           xp_stop_reason_to_string(r->stats.reason));
    if (r->resumes) printf(", resumed %u time%s", r->resumes, r->resumes == 1 ? "" : "s");
    printf("\n");
    if (p->a->refine && r->refine_improved)
        printf("refine       %d latency-bounded searches, the plan from the one bounded at %s\n",
               r->refine_rounds, cli_fmt_seconds(r->refine_bound_s, b1, sizeof b1));
    else if (p->a->refine)
        printf("refine       %d latency-bounded searches, none faster within the limit\n",
               r->refine_rounds);
    if (p->ckpt)
        printf("checkpoint   %s, %u written (%s each on average)\n", p->ckpt->path,
               p->ckpt->written,
               cli_fmt_seconds(p->ckpt->written ? r->checkpoint_write_s / p->ckpt->written : 0, b1,
                               sizeof b1));
    printf("plan         %s, %s, %s, %s\n", files[0], files[1], files[2], files[3]);
}
