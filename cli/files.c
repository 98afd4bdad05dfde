/* files.c - output files that are all-or-nothing: names derived from graph outputs, directories
 * created on demand (and removed again on failure), and atomic writes through a temporary file
 * in the target's directory (rename is only atomic within one file system). */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void cli_sanitize_name(const char *name, char *buf, size_t n) {
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < n; p++) {
        char c = *p;
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        buf[k++] = ok ? c : '_';
    }
    if (k == 0 && n > 1) buf[k++] = '_';
    if (n) buf[k] = '\0';
}

ir_status cli_mkdirs(const char *dir, char ***created, int *n_created, ir_diag *d) {
    ir_status st = IR_OK;
    char *path = strdup(dir);
    size_t len = strlen(dir);
    /* At most one created directory per '/' plus the last component. */
    char **made = calloc(len + 1, sizeof *made);
    int n_made = 0;
    if (!path || !made) {
        st = ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory", dir);
        goto out;
    }
    for (size_t i = 1; i <= len; i++) {
        if (path[i] != '/' && path[i] != '\0') continue;
        char saved = path[i];
        path[i] = '\0';
        if (mkdir(path, 0777) == 0) {
            made[n_made] = strdup(path);
            if (!made[n_made]) {
                st = ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory", dir);
                goto out;
            }
            n_made++;
        } else if (errno != EEXIST) {
            st = ir_diag_set(d, IR_ERR_IO, "%s: cannot create directory '%s': %s", dir, path,
                             strerror(errno));
            goto out;
        }
        path[i] = saved;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        st = ir_diag_set(d, IR_ERR_IO, "%s: not a directory", dir);
out:
    free(path);
    if (st != IR_OK || !created) {
        if (st != IR_OK) {
            cli_rmdirs(made, n_made);
        } else {
            for (int i = 0; i < n_made; i++) free(made[i]);
            free(made);
        }
        made = NULL;
        n_made = 0;
    }
    if (created) {
        *created = made;
        *n_created = n_made;
    }
    return st;
}

void cli_rmdirs(char **created, int n_created) {
    for (int i = n_created - 1; i >= 0; i--) {
        if (created[i]) rmdir(created[i]);
        free(created[i]);
    }
    free(created);
}

ir_status cli_write_atomic(const char *path, bool (*write)(FILE *f, void *arg, ir_diag *d),
                           void *arg, ir_diag *d) {
    ir_status st = IR_OK;
    FILE *f = NULL;
    size_t len = strlen(path);
    char *tmp = malloc(len + 16);
    if (!tmp) return ir_diag_set(d, IR_ERR_NOMEM, "%s: out of memory", path);
    snprintf(tmp, len + 16, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = ir_diag_set(d, IR_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        goto out_free;
    }
    /* mkstemp creates 0600; a plot or a model is an ordinary file, readable like any other. */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        st = ir_diag_set(d, IR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        goto out_unlink;
    }
    if (!write(f, arg, d)) {
        st = IR_ERR_IO;
        ir_diag_prefix(d, path);
        fclose(f);
        goto out_unlink;
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || ferror(f)) {
        st = ir_diag_set(d, IR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        fclose(f);
        goto out_unlink;
    }
    if (fclose(f) != 0) {
        st = ir_diag_set(d, IR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        goto out_unlink;
    }
    if (rename(tmp, path) != 0) {
        st = ir_diag_set(d, IR_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
        goto out_unlink;
    }
    goto out_free;
out_unlink:
    unlink(tmp);
out_free:
    free(tmp);
    return st;
}
