/* cli-train.c - the training options (--train, --loss, --target, --optimizer, --lr, --frozen)
 * and cli_load_graph, the one function through which every sub-command gets the graph it works
 * on: the model, or with --train its training graph (ir_build_training: forward, loss,
 * backward in PyTorch's order, optional optimizer step). --frozen works without --train too
 * (it changes which initializers count as parameters). */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Index of val in names (n entries), -1 when absent. */
static int pick(const char *val, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(val, names[i]) == 0) return i;
    return -1;
}

int cli_train_opt(const cli_cmd *cmd, cli_opts *o, const char *name, const char *val) {
    static const char *const losses[] = {"sum", "mse", "ce"};
    static const char *const optims[] = {"none", "sgd", "momentum", "adam"};
    if (strcmp(name, "train") == 0) {
        o->train = true;
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "frozen") == 0) {
        if (!*val) return cli_fail(CLI_EXIT_USAGE, "%s: --frozen: empty expression", cmd->name);
        o->imp.frozen_regex = val;
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "fuse-decomposed") == 0) {
        o->imp.fuse_decomposed = true;
        return CLI_EXIT_OK;
    }
    if (!o->train_only) o->train_only = name;
    if (strcmp(name, "loss") == 0) {
        int k = pick(val, losses, 3);
        if (k < 0)
            return cli_fail(CLI_EXIT_USAGE, "%s: --loss '%s': expected sum, mse or ce", cmd->name,
                            val);
        o->train_opts.loss = (ir_loss_kind)k;
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "optimizer") == 0) {
        int k = pick(val, optims, 4);
        if (k < 0)
            return cli_fail(CLI_EXIT_USAGE,
                            "%s: --optimizer '%s': expected none, sgd, momentum or adam", cmd->name,
                            val);
        o->train_opts.optimizer = (ir_optimizer_kind)k;
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "lr") == 0) {
        char *end = NULL;
        errno = 0;
        double lr = strtod(val, &end);
        if (!*val || *end || errno || !isfinite(lr) || lr <= 0)
            return cli_fail(CLI_EXIT_USAGE, "%s: --lr '%s': expected a positive number", cmd->name,
                            val);
        o->train_opts.lr = lr;
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "target") == 0) {
        if (!*val) return cli_fail(CLI_EXIT_USAGE, "%s: --target: empty input name", cmd->name);
        o->train_opts.target = val;
        return CLI_EXIT_OK;
    }
    return cli_fail(CLI_EXIT_INTERNAL, "training option table out of date");
}

ir_graph *cli_load_graph(const char *path, const cli_opts *o, bool allow_opaque, int *code) {
    if (!o->train && o->train_only) {
        *code = cli_fail(CLI_EXIT_USAGE, "--%s needs --train", o->train_only);
        return NULL;
    }
    if (o->train_opts.target && o->train_opts.loss != IR_LOSS_MSE) {
        *code = cli_fail(CLI_EXIT_USAGE, "--target %s needs --loss mse", o->train_opts.target);
        return NULL;
    }
    ir_graph *g = cli_load_model(path, o, allow_opaque, code);
    if (!g || !o->train) return g;
    ir_status st = IR_ERR_INTERNAL;
    ir_diag d = {{0}};
    ir_graph *tg = ir_build_training(g, &o->train_opts, &st, &d);
    ir_graph_free(g);
    if (!tg) {
        *code = cli_fail_ir(st, &d, path);
        return NULL;
    }
    *code = CLI_EXIT_OK;
    return tg;
}
