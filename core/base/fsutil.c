/*
 * fsutil.c: bounded file reads and crash-safe writes (temp file, fsync,
 * rename, fsync of the directory, as redis writes its RDB file).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"

static enum accel_err open_errno_code(int e)
{
    if (e == ENOENT || e == ENOTDIR)
        return ACCEL_ENOTFOUND;
    if (e == EACCES || e == EPERM)
        return ACCEL_EPERM;
    return ACCEL_EIO;
}

enum accel_err accel_read_file(const char *path, size_t max, char **out, size_t *len,
                               struct accel_error *err)
{
    enum accel_err rc = ACCEL_EIO;
    struct stat st;
    char *data = NULL;
    size_t got = 0;
    int fd;

    *out = NULL;
    *len = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return accel_error_sys(err, open_errno_code(errno), "%s: couldn't open", path);
    if (fstat(fd, &st) != 0) {
        rc = accel_error_sys(err, ACCEL_EIO, "%s: couldn't stat", path);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = accel_error_set(err, ACCEL_EINVAL, "%s: not a regular file", path);
        goto out;
    }
    if ((unsigned long long)st.st_size > max) {
        rc = accel_error_set(err, ACCEL_ETOOBIG, "%s: %lld bytes; the limit is %zu bytes", path,
                             (long long)st.st_size, max);
        goto out;
    }
    data = accel_malloc(max + 1 < (size_t)st.st_size + 1 ? max + 1 : (size_t)st.st_size + 1);
    if (data == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory reading it", path);
        goto out;
    }
    /* Read what fstat promised; a file that grows meanwhile is cut at that size
     * and then checked for more, so the cap holds even for a racing writer. */
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, data + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = accel_error_sys(err, ACCEL_EIO, "%s: couldn't read", path);
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (st.st_size == 0) { /* /proc and /sys files say 0 and have data */
        char extra;
        if (read(fd, &extra, 1) == 1) {
            rc = accel_error_set(err, ACCEL_EINVAL,
                                 "%s: reports a size of 0 but has data (a /proc or /sys file?); "
                                 "copy it to a regular file first",
                                 path);
            goto out;
        }
    }
    if (got == (size_t)st.st_size && got == max) {
        char extra;
        if (read(fd, &extra, 1) == 1) {
            rc = accel_error_set(err, ACCEL_ETOOBIG, "%s: grew past the limit of %zu bytes", path,
                                 max);
            goto out;
        }
    }
    data[got] = '\0';
    *out = data;
    *len = got;
    data = NULL;
    rc = ACCEL_OK;
out:
    accel_free(data);
    close(fd);
    return rc;
}

enum accel_err accel_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc, saved;

    if (fd < 0)
        return ACCEL_EIO;
    rc = fsync(fd);
    saved = errno;
    close(fd);
    errno = saved;
    return rc == 0 ? ACCEL_OK : ACCEL_EIO;
}

static int fsync_dir_of(const char *path)
{
    char tmp[4096];

    if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return accel_fsync_dir(dirname(tmp)) == ACCEL_OK ? 0 : -1;
}

enum accel_err accel_write_durable(const char *path, const void *data, size_t len, mode_t mode,
                                   struct accel_error *err)
{
    enum accel_err rc = ACCEL_EIO;
    const char *p = data;
    char tmp[4096];
    size_t done = 0;
    int fd = -1;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return accel_error_set(err, ACCEL_EINVAL, "%s: path too long", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return accel_error_sys(err, open_errno_code(errno), "%s: couldn't create", tmp);
    while (done < len) {
        ssize_t n = write(fd, p + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = accel_error_sys(err, ACCEL_EIO, "%s: couldn't write", tmp);
            goto fail;
        }
        done += (size_t)n;
    }
    if (fsync(fd) != 0) {
        rc = accel_error_sys(err, ACCEL_EIO, "%s: couldn't fsync", tmp);
        goto fail;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = accel_error_sys(err, ACCEL_EIO, "%s: couldn't close", tmp);
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        rc = accel_error_sys(err, ACCEL_EIO, "%s: couldn't rename it to %s", tmp, path);
        goto fail;
    }
    if (fsync_dir_of(path) != 0)
        return accel_error_sys(err, ACCEL_EIO, "%s: couldn't fsync its directory", path);
    return ACCEL_OK;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return rc;
}
