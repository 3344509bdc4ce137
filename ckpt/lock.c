/*
 * lock.c: one job per checkpoint root.  The job that saves holds an
 * exclusive flock(2) on ROOT/accelrun.lock for as long as its saver is open
 * (rank 0's process takes it for the job), with a line naming the holder in
 * the file: a second job's saver is refused with that line, before any of
 * its ranks writes a byte.  A job that died holds nothing (the kernel drops
 * a dead process's locks; on NFS, the lock manager does, once the client's
 * host is back or declared gone), so its successor takes the lock over and
 * says whose it was.  Linux's NFS client turns flock into a POSIX lock the
 * server knows, so the lock holds across nodes.  The file is never removed:
 * removing a lock file races with the next job opening it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "accel/log.h"
#include "ckpt_int.h"

/* the holder line: at most this much is read back from another holder */
#define LOCK_LINE 512

/* The file's first line (its holder), without the newline, into buf. */
static void read_holder(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);

    buf[n > 0 ? (size_t)n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

enum accel_err ckpt__lock_take(const char *root, const char *owner, int *fd_out,
                               struct accel_error *err)
{
    char path[4096], was[LOCK_LINE], line[LOCK_LINE + 128], host[256] = "", when[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    int fd;

    *fd_out = -1;
    if (!ckpt__path(path, sizeof path, root, CK_LOCK))
        return accel_error_set(err, ACCEL_EINVAL, "checkpoint root %s: path too long", root);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return accel_error_sys(err, errno == EACCES ? ACCEL_EPERM : ACCEL_EIO,
                               "checkpoint root %s: couldn't open its lock %s", root, CK_LOCK);
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        if (errno == EWOULDBLOCK) {
            read_holder(fd, was, sizeof was);
            close(fd);
            return accel_error_set(err, ACCEL_EBUSY,
                                   "checkpoint root %s: in use by another job (%s, holding %s): "
                                   "one job saves into a root at a time; give this one another "
                                   "checkpoint directory, or stop that job",
                                   root, was[0] ? was : "no holder written yet", path);
        }
        close(fd);
        return accel_error_sys(err, ACCEL_EIO, "checkpoint root %s: couldn't take its lock %s",
                               root, CK_LOCK);
    }
    read_holder(fd, was, sizeof was);
    if (was[0])
        accel_log(ACCEL_LOG_INFO, "checkpoint: took over %s from %s (no longer held)", path, was);
    (void)gethostname(host, sizeof host - 1);
    if (localtime_r(&now, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S%z", &tm);
    snprintf(line, sizeof line, "%s, pid %ld on %s, since %s\n", owner && *owner ? owner : "a job",
             (long)getpid(), host[0] ? host : "?", when);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, strlen(line), 0) != (ssize_t)strlen(line))
        accel_log(ACCEL_LOG_WARN, "checkpoint: couldn't write the holder into %s: %s", path,
                  strerror(errno));
    *fd_out = fd;
    return ACCEL_OK;
}

void ckpt__lock_drop(int fd)
{
    if (fd >= 0)
        close(fd); /* the lock goes with the descriptor */
}
