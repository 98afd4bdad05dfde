/* limits.c - the one parser of limits (DESIGN.md "Limits"): a plain number is a ratio of the
 * unoptimized value, a number with a unit is absolute, in bytes (binary units) or seconds. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct unit {
    const char *name;
    cli_limit_kind kind;
    double scale;
} unit;

static const unit units[] = {
    {"B", CLI_LIMIT_BYTES, 1.0},
    {"KiB", CLI_LIMIT_BYTES, 1024.0},
    {"MiB", CLI_LIMIT_BYTES, 1024.0 * 1024.0},
    {"GiB", CLI_LIMIT_BYTES, 1024.0 * 1024.0 * 1024.0},
    {"TiB", CLI_LIMIT_BYTES, 1024.0 * 1024.0 * 1024.0 * 1024.0},
    {"us", CLI_LIMIT_SECONDS, 1e-6},
    {"ms", CLI_LIMIT_SECONDS, 1e-3},
    {"s", CLI_LIMIT_SECONDS, 1.0},
};

bool cli_parse_limit(const char *s, cli_limit *out) {
    if (!s || !*s || *s == '+' || *s == '-' || *s == ' ') return false;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v <= 0) return false;
    /* strtod also reads "inf", "nan" and hex floats: allow plain decimals only */
    for (const char *p = s; p < end; p++)
        if (!strchr("0123456789.eE+-", *p)) return false;
    if (!*end) {
        *out = (cli_limit){CLI_LIMIT_RATIO, v};
        return true;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].name) == 0) {
            double x = v * units[i].scale;
            if (!isfinite(x)) return false;
            *out = (cli_limit){units[i].kind, x};
            return true;
        }
    }
    return false;
}

double cli_limit_resolve(const cli_limit *l, double base) {
    return l->kind == CLI_LIMIT_RATIO ? l->value * base : l->value;
}
