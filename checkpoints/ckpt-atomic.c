/* ckpt-atomic.c - crash-safe file replacement and the cleanup of what crashes leave.
 *
 * Invariant: at every instant PATH is either absent, the complete previous file, or the
 * complete new one. The new bytes go to PATH.tmp.<pid> in the same directory (rename(2) is
 * atomic only within one file system), are fsync'ed before the rename (otherwise a crash after
 * the rename could expose a file whose data blocks never reached the disk), and the directory is
 * fsync'ed after it (otherwise the rename itself may be lost, bringing back the old file: still
 * whole, but the caller was told the new one was durable). The <pid> suffix keeps two processes
 * that checkpoint to the same path from writing into each other's temporary file, and tells
 * ckpt_cleanup_stale whose file it is. */
#include "ckpt-impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Splits path into its directory ("." when it has none) and its base name; false when they do
 * not fit (dir_n/base_n bytes each). */
static bool split_path(const char *path, char *dir, size_t dir_n, char *base, size_t base_n) {
    const char *slash = strrchr(path, '/');
    int a, b;
    if (!slash) {
        a = snprintf(dir, dir_n, ".");
        b = snprintf(base, base_n, "%s", path);
    } else if (slash == path) {
        a = snprintf(dir, dir_n, "/");
        b = snprintf(base, base_n, "%s", slash + 1);
    } else {
        a = snprintf(dir, dir_n, "%.*s", (int)(slash - path), path);
        b = snprintf(base, base_n, "%s", slash + 1);
    }
    return a >= 0 && (size_t)a < dir_n && b > 0 && (size_t)b < base_n;
}

static ir_status write_all(int fd, const uint8_t *p, size_t n, const char *tmp, ir_diag *d) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, p + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0)
            return ir_diag_set(d, IR_ERR_IO, "%s: write failed at byte %zu: %s", tmp, done,
                               strerror(errno));
        done += (size_t)w;
    }
    return IR_OK;
}

static ir_status fsync_dir(const char *dir, ir_diag *d) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return ir_diag_set(d, IR_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    /* EINVAL: a file system that cannot sync directories (some network and pseudo file
     * systems); nothing more can be done there, and the rename did happen */
    if (rc != 0 && err != EINVAL)
        return ir_diag_set(d, IR_ERR_IO, "%s: fsync of the directory failed: %s", dir,
                           strerror(err));
    return IR_OK;
}

ir_status ckpt_write_atomic(const char *path, const void *data, size_t n, ir_diag *d) {
    char dir[4096], base[1024], tmp[4096 + 64];
    if (!split_path(path, dir, sizeof dir, base, sizeof base))
        return ir_diag_set(d, IR_ERR_IO, "%s: path too long or without a file name", path);
    int len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (len < 0 || (size_t)len >= sizeof tmp)
        return ir_diag_set(d, IR_ERR_IO, "%s: path too long", path);

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ir_diag_set(d, IR_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    ir_status st = write_all(fd, data, n, tmp, d);
    if (st == IR_OK && fsync(fd) != 0)
        st = ir_diag_set(d, IR_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    /* close can report a deferred write error (NFS): it counts */
    if (close(fd) != 0 && st == IR_OK)
        st = ir_diag_set(d, IR_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    if (st != IR_OK) {
        unlink(tmp);
        return st;
    }

    /* the test hook: stop where a crash between fsync and rename would, temp file left */
    const char *fail = getenv(CKPT_FAIL_ENV);
    if (fail && strcmp(fail, "1") == 0)
        return ir_diag_set(d, IR_ERR_IO,
                           "%s: failure injected before rename (%s=1); %s left as a "
                           "crash would leave it",
                           path, CKPT_FAIL_ENV, tmp);

    if (rename(tmp, path) != 0) {
        st = ir_diag_set(d, IR_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp,
                         strerror(errno));
        unlink(tmp);
        return st;
    }
    return fsync_dir(dir, d);
}

/* The pid of "BASE.tmp.<digits>", or -1 when name is not of that form. */
static long stale_pid(const char *name, const char *base, size_t base_len) {
    if (strncmp(name, base, base_len) != 0 || strncmp(name + base_len, ".tmp.", 5) != 0) return -1;
    const char *digits = name + base_len + 5;
    if (!*digits) return -1;
    long pid = 0;
    for (const char *p = digits; *p; p++) {
        if (*p < '0' || *p > '9' || pid > 100000000L) return -1; /* pids are far below 10^8 */
        pid = pid * 10 + (*p - '0');
    }
    return pid > 0 ? pid : -1;
}

ir_status ckpt_cleanup_stale(const char *path, int *removed, ir_diag *d) {
    char dir[4096], base[1024];
    int count = 0;
    if (removed) *removed = 0;
    if (!split_path(path, dir, sizeof dir, base, sizeof base))
        return ir_diag_set(d, IR_ERR_IO, "%s: path too long or without a file name", path);
    DIR *dh = opendir(dir);
    if (!dh)
        return ir_diag_set(d, IR_ERR_IO, "%s: cannot read directory: %s", dir, strerror(errno));
    size_t base_len = strlen(base);
    long self = (long)getpid();
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        long pid = stale_pid(e->d_name, base, base_len);
        if (pid < 0) continue;
        /* alive (0) or alive but not ours to signal (EPERM): maybe writing right now, keep */
        if (pid != self && (kill((pid_t)pid, 0) == 0 || errno != ESRCH)) continue;
        char full[4096 + 1024 + 2];
        int len = snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (len < 0 || (size_t)len >= sizeof full) continue;
        if (unlink(full) == 0) count++;
    }
    closedir(dh);
    if (removed) *removed = count;
    return IR_OK;
}
