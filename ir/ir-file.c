/* ir-file.c - atomic file writes for the writers of ir/ (.npy, ONNX export): the bytes go to
 * PATH.tmp.<pid>, which is fsync'ed and renamed over PATH, so PATH is either the old file or the
 * complete new one; on failure the temporary is removed. Declared in ir-impl.h. */
#include "ir-impl.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <unistd.h>

int ir_write_all(int fd, const void *buf, size_t len) {
    const unsigned char *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno != EINTR) return errno;
        if (w > 0) done += (size_t)w;
    }
    return 0;
}

ir_status ir_write_atomic_with(const char *path, int (*emit)(int fd, void *ctx), void *ctx,
                               ir_diag *d) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return ir_diag_set(d, IR_ERR_IO, "%s: path too long", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return ir_diag_set(d, IR_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    int err = emit(fd, ctx);
    if (!err && fsync(fd) != 0) err = errno;
    if (close(fd) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        unlink(tmp);
        return ir_diag_set(d, IR_ERR_IO, "%s: cannot write: %s", path, strerror(err));
    }
    /* Make the rename itself durable; failing here loses nothing already written. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return IR_OK;
}

typedef struct bytes_ctx {
    const void *buf;
    size_t len;
} bytes_ctx;

static int emit_bytes(int fd, void *ctx) {
    const bytes_ctx *b = ctx;
    return ir_write_all(fd, b->buf, b->len);
}

ir_status ir_write_atomic(const char *path, const void *buf, size_t len, ir_diag *d) {
    bytes_ctx b = {buf, len};
    return ir_write_atomic_with(path, emit_bytes, &b, d);
}
