/* json.c - a tiny streaming JSON writer to a FILE*. The writer places commas and colons itself,
 * so callers only say what comes next; it escapes strings per RFC 8259. Names in models are
 * arbitrary bytes, so escaping matters: a quote or a control character in a tensor name must
 * not break the one object that --json promises. */
#include "cli.h"

#include <inttypes.h>
#include <math.h>

void cli_json_init(cli_json *j, FILE *f) {
    j->f = f;
    j->depth = 0;
    j->first[0] = true;
    j->after_key = false;
}

/* Separates a new element from the previous one at this depth (not after a key). */
static void sep(cli_json *j) {
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth]) fputc(',', j->f);
    j->first[j->depth] = false;
}

static void push(cli_json *j, char c) {
    sep(j);
    fputc(c, j->f);
    IR_ASSERT(j->depth + 1 < CLI_JSON_MAX_DEPTH);
    j->first[++j->depth] = true;
}

static void pop(cli_json *j, char c) {
    IR_ASSERT(j->depth > 0 && !j->after_key);
    j->depth--;
    fputc(c, j->f);
}

void cli_json_obj_begin(cli_json *j) {
    push(j, '{');
}
void cli_json_obj_end(cli_json *j) {
    pop(j, '}');
}
void cli_json_arr_begin(cli_json *j) {
    push(j, '[');
}
void cli_json_arr_end(cli_json *j) {
    pop(j, ']');
}

static void put_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void cli_json_key(cli_json *j, const char *key) {
    IR_ASSERT(!j->after_key);
    sep(j);
    put_string(j->f, key);
    fputc(':', j->f);
    j->after_key = true;
}

void cli_json_str(cli_json *j, const char *s) {
    if (!s) {
        cli_json_null(j);
        return;
    }
    sep(j);
    put_string(j->f, s);
}

void cli_json_int(cli_json *j, int64_t v) {
    sep(j);
    fprintf(j->f, "%" PRId64, v);
}

void cli_json_uint(cli_json *j, uint64_t v) {
    sep(j);
    fprintf(j->f, "%" PRIu64, v);
}

void cli_json_num(cli_json *j, double v) {
    if (!isfinite(v)) {
        cli_json_null(j);
        return;
    }
    sep(j);
    /* %.17g round-trips a double; integral values print without an exponent up to 2^53. */
    if (v == floor(v) && fabs(v) < 9007199254740992.0)
        fprintf(j->f, "%.0f", v);
    else
        fprintf(j->f, "%.17g", v);
}

void cli_json_bool(cli_json *j, bool v) {
    sep(j);
    fputs(v ? "true" : "false", j->f);
}

void cli_json_null(cli_json *j) {
    sep(j);
    fputs("null", j->f);
}

void cli_json_shape(cli_json *j, const ir_shape *s) {
    cli_json_arr_begin(j);
    for (int i = 0; i < s->rank; i++) cli_json_int(j, s->dims[i]);
    cli_json_arr_end(j);
}

void cli_json_tensor(cli_json *j, const char *name, ir_dtype t, const ir_shape *s) {
    cli_json_obj_begin(j);
    cli_json_key(j, "name");
    cli_json_str(j, name);
    cli_json_key(j, "dtype");
    cli_json_str(j, ir_dtype_name(t));
    cli_json_key(j, "shape");
    cli_json_shape(j, s);
    cli_json_obj_end(j);
}

void cli_json_finish(cli_json *j) {
    IR_ASSERT(j->depth == 0);
    fputc('\n', j->f);
}

#define KV(type, ctype)                                                                            \
    void cli_json_kv_##type(cli_json *j, const char *key, ctype v) {                               \
        cli_json_key(j, key);                                                                      \
        cli_json_##type(j, v);                                                                     \
    }
KV(str, const char *)
KV(int, int64_t)
KV(uint, uint64_t)
KV(num, double)
KV(bool, bool)
#undef KV
