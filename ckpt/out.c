/*
 * out.c: a file written durably from parts (struct ckpt__out, ckpt_int.h):
 * created as NAME.tmp, written, fsynced, renamed to NAME; on any failure
 * removed.  The directory's fsync is the caller's.
 *
 * Written with O_DIRECT where the file system allows it (here 1.5-2.0
 * GB/s against 0.3-1.4 GB/s through the page cache with fsync: dd, 512 MiB,
 * reference/checkpoint.md §7.6; and no page cache filled with data nobody
 * reads back soon), through two aligned buffers: while one is written (a
 * thread of its own per buffer, one at a time, so the file is written in
 * order), the caller fills the other, so copying (and the caller's
 * checksums) overlaps the device's work.  The tail that is not a whole
 * block, and the head (a header written last, at offset 0, over the space
 * left for it), go through the page cache; fsync makes everything durable.
 * Without O_DIRECT (tmpfs, some network file systems) everything goes
 * through the page cache, CK_WRITE_CHUNK bytes a call.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ckpt_int.h"

/* Leaves O_DIRECT for the rest of the file. */
static bool buffered(struct ckpt__out *o)
{
    int fl = fcntl(o->fd, F_GETFL);

    o->direct = false;
    return fl >= 0 && fcntl(o->fd, F_SETFL, fl & ~O_DIRECT) == 0;
}

/* pwrite of all n bytes at p to offset off: with O_DIRECT, p and n are a
 * buffer's, a multiple of CK_DIRECT_ALIGN; else CK_WRITE_CHUNK bytes a
 * call.  Counts o->written.  errno and false on failure (a short direct
 * write that leaves the alignment is a failure: EIO). */
static bool put(struct ckpt__out *o, const char *p, size_t n, uint64_t off)
{
    while (n > 0) {
        ssize_t w =
            pwrite(o->fd, p, o->direct || n < CK_WRITE_CHUNK ? n : CK_WRITE_CHUNK, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w == 0)
            errno = EIO;
        if (w <= 0)
            return false;
        __atomic_add_fetch(&o->written, (uint64_t)w, __ATOMIC_RELAXED);
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
        if (o->direct && n > 0 && (size_t)w % CK_DIRECT_ALIGN != 0) {
            errno = EIO;
            return false;
        }
    }
    return true;
}

/* The error of a failed write, fsync or close of o: ACCEL_ENOSPC for a
 * full file system or quota, naming the file, what of it is left to write
 * and the space free; else ACCEL_EIO.  e is the call's errno. */
static enum accel_err out_fail(struct ckpt__out *o, const char *what, int e,
                               struct accel_error *err)
{
    char dir[sizeof o->tmp];
    struct statvfs fs;
    uint64_t written = __atomic_load_n(&o->written, __ATOMIC_RELAXED);
    unsigned long long left = o->total > written ? o->total - written : 0;

    errno = e;
    if (e != ENOSPC && e != EDQUOT)
        return accel_error_sys(err, ACCEL_EIO, "%s: couldn't %s", o->tmp, what);
    snprintf(dir, sizeof dir, "%s", o->tmp);
    if (strrchr(dir, '/'))
        *strrchr(dir, '/') = '\0';
    if (statvfs(dir, &fs) != 0)
        fs.f_bavail = 0, fs.f_frsize = 0;
    errno = e;
    return accel_error_sys(err, ACCEL_ENOSPC,
                           "%s: couldn't %s: the file system is full%s (the file is %llu bytes, "
                           "%llu of them not written yet; %llu bytes free in %s): free space "
                           "there, or lower keep",
                           o->tmp, what, e == EDQUOT ? " (quota)" : "",
                           (unsigned long long)o->total, left,
                           (unsigned long long)fs.f_bavail * fs.f_frsize, dir);
}

/* ---------------------------------------------------------------- the writing thread */

static void *write_job(void *arg)
{
    struct ckpt__out *o = arg;

    if (!put(o, o->buf[o->busy], o->busy_len, o->busy_off))
        o->io_errno = errno ? errno : EIO;
    return NULL;
}

/* Waits for the buffer in writing, if any: false (o->io_errno) when it failed. */
static bool drain(struct ckpt__out *o)
{
    if (o->busy >= 0) {
        pthread_join(o->io, NULL);
        o->busy = -1;
    }
    return o->io_errno == 0;
}

/* The full buffer o->cur to offset o->off, in a thread of its own while the
 * caller fills the other one (in line when no thread can be had). */
static bool flush_full(struct ckpt__out *o)
{
    if (!drain(o))
        return false;
    o->busy = o->cur;
    o->busy_len = o->fill;
    o->busy_off = o->off;
    o->off += o->fill;
    o->cur ^= 1;
    o->fill = 0;
    if (pthread_create(&o->io, NULL, write_job, o) == 0)
        return true; /* its failure is the next drain's to see (io_errno is
                        the thread's until joined) */
    o->busy = -1;
    if (!put(o, o->buf[o->cur ^ 1], o->busy_len, o->busy_off))
        o->io_errno = errno ? errno : EIO;
    return o->io_errno == 0;
}

/* ---------------------------------------------------------------- the interface */

enum accel_err ckpt__out_open(struct ckpt__out *o, const char *dir, const char *name,
                              struct accel_error *err)
{
    const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW;

    o->fd = -1;
    o->direct = false;
    o->buf[0] = o->buf[1] = NULL;
    o->cur = 0;
    o->busy = -1;
    o->io_errno = 0;
    o->fill = 0;
    o->written = 0;
    o->off = o->head_len; /* the data follows the space left for the head */
    o->hash = NULL;
    if (!ckpt__path(o->path, sizeof o->path, dir, name))
        return accel_error_set(err, ACCEL_EINVAL, "%s/%s: path too long", dir, name);
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp", o->path);
    if (o->head_len % CK_DIRECT_ALIGN != 0)
        return accel_error_set(err, ACCEL_EINVAL, "%s: a head of %zu bytes is not aligned", o->tmp,
                               o->head_len);
    if (o->hashing && (!(o->hash = XXH3_createState()) || XXH3_64bits_reset(o->hash) != XXH_OK)) {
        XXH3_freeState(o->hash);
        o->hash = NULL;
        return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory for its checksum", o->tmp);
    }
    /* O_DIRECT where the file system takes it (not tmpfs: EINVAL) and the
     * two buffers can be had; else through the page cache */
    o->fd = open(o->tmp, flags | O_DIRECT, 0666);
    if (o->fd >= 0 && posix_memalign((void **)&o->buf[0], CK_DIRECT_ALIGN, CK_DIRECT_BUF) == 0 &&
        posix_memalign((void **)&o->buf[1], CK_DIRECT_ALIGN, CK_DIRECT_BUF) == 0)
        o->direct = true;
    else if (o->fd >= 0)
        (void)buffered(o);
    else
        o->fd = open(o->tmp, flags, 0666);
    if (o->fd < 0) {
        int e = errno;
        free(o->buf[0]);
        free(o->buf[1]);
        o->buf[0] = o->buf[1] = NULL;
        XXH3_freeState(o->hash);
        o->hash = NULL;
        errno = e;
        return accel_error_sys(err,
                               e == EACCES                  ? ACCEL_EPERM
                               : e == ENOSPC || e == EDQUOT ? ACCEL_ENOSPC
                                                            : ACCEL_EIO,
                               "%s: couldn't create", o->tmp);
    }
    return ACCEL_OK;
}

enum accel_err ckpt__out_write(struct ckpt__out *o, const void *data, uint64_t len,
                               struct accel_error *err)
{
    const char *p = data;

    if (o->hash)
        XXH3_64bits_update(o->hash, data, (size_t)len);
    if (!o->direct) {
        if (!put(o, p, (size_t)len, o->off))
            return out_fail(o, "write", errno, err);
        o->off += len;
        return ACCEL_OK;
    }
    while (len > 0) {
        size_t n = CK_DIRECT_BUF - o->fill < len ? CK_DIRECT_BUF - o->fill : (size_t)len;
        memcpy(o->buf[o->cur] + o->fill, p, n);
        o->fill += n;
        p += n;
        len -= n;
        if (o->fill == CK_DIRECT_BUF && !flush_full(o))
            return out_fail(o, "write", o->io_errno, err);
    }
    return ACCEL_OK;
}

enum accel_err ckpt__out_close(struct ckpt__out *o, enum accel_err rc, uint64_t *sum,
                               struct accel_error *err)
{
    if (o->fd < 0)
        return rc;
    if (!drain(o) && rc == ACCEL_OK)
        rc = out_fail(o, "write", o->io_errno, err);
    if (rc == ACCEL_OK && o->fill > 0) { /* the aligned part directly, the tail buffered */
        size_t aligned = o->direct ? o->fill / CK_DIRECT_ALIGN * CK_DIRECT_ALIGN : 0;
        if ((aligned && !put(o, o->buf[o->cur], aligned, o->off)) ||
            (o->fill > aligned && (!buffered(o) || !put(o, o->buf[o->cur] + aligned,
                                                        o->fill - aligned, o->off + aligned))))
            rc = out_fail(o, "write", errno, err);
    }
    /* the head, over the space left for it at offset 0 */
    if (rc == ACCEL_OK && o->head_len > 0 &&
        ((o->direct && !buffered(o)) || !put(o, o->head, o->head_len, 0)))
        rc = out_fail(o, "write", errno, err);
    free(o->buf[0]); /* posix_memalign's */
    free(o->buf[1]);
    o->buf[0] = o->buf[1] = NULL;
    o->fill = 0;
    if (rc == ACCEL_OK && fsync(o->fd) != 0)
        rc = out_fail(o, "fsync", errno, err);
    if (close(o->fd) != 0 && rc == ACCEL_OK)
        rc = out_fail(o, "close", errno, err);
    o->fd = -1;
    if (rc == ACCEL_OK && rename(o->tmp, o->path) != 0)
        rc = accel_error_sys(err, ACCEL_EIO, "%s: couldn't rename it to %s", o->tmp, o->path);
    if (rc != ACCEL_OK)
        unlink(o->tmp);
    if (rc == ACCEL_OK && sum && o->hash)
        *sum = XXH3_64bits_digest(o->hash);
    XXH3_freeState(o->hash);
    o->hash = NULL;
    return rc;
}
