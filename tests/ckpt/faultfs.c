/*
 * tests/ckpt/faultfs.c: a fault injector for the checkpoint fault tests
 * (tests/ckpt/faults.sh), loaded with LD_PRELOAD.  It counts the calls
 * that change a file system under FAULTFS_ROOT (a list of prefixes,
 * ':'-separated): open with O_CREAT or for writing, write/pwrite, fsync,
 * fdatasync, ftruncate, rename, unlink, rmdir, mkdir and their *at forms
 * (a descriptor counts when it was opened under a prefix), and at the
 * FAULTFS_AT-th (1-based, over every thread of the process) does
 * FAULTFS_ACTION instead of the call:
 *
 *   kill     SIGKILL this process (a crash: nothing after it runs)
 *   eio      fail the call with EIO
 *   enospc   fail the call with ENOSPC
 *
 * FAULTFS_OPS limits the calls that count ("fsync,write"; default all).
 * Only a process with RANK in its environment (a rank, not the launcher)
 * takes part, and with FAULTFS_RANK=R only rank R.  FAULTFS_COUNT=FILE: at
 * exit, the number of calls counted is written to FILE.RANK (how many
 * points a run has).  Without FAULTFS_ROOT it does nothing.
 * Test code only: it is never part of accelrun.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define MAX_FD 65536
#define MAX_ROOTS 8

static char roots[MAX_ROOTS][1024];
static size_t nroots;
static unsigned long at;
static int action; /* 0 kill, 1 eio, 2 enospc */
static char ops[256] = "";
static const char *count_file;
static atomic_ulong counted;
static atomic_bool tracked[MAX_FD];
static bool ready;

static void report(void)
{
    FILE *f;

    if (count_file && (f = fopen(count_file, "w"))) {
        fprintf(f, "%lu\n", atomic_load(&counted));
        fclose(f);
    }
}

__attribute__((constructor)) static void faultfs_init(void)
{
    const char *r = getenv("FAULTFS_ROOT"), *a = getenv("FAULTFS_AT"),
               *act = getenv("FAULTFS_ACTION"), *o = getenv("FAULTFS_OPS");
    char copy[8192], *save = NULL;

    const char *want = getenv("FAULTFS_RANK"), *rank = getenv("RANK");
    static char count_path[4096];

    /* only the processes of a job's ranks (not the launcher), or of one */
    if (!r || !*r || !rank || (want && *want && strcmp(want, rank) != 0))
        return;
    snprintf(copy, sizeof copy, "%s", r);
    for (char *p = strtok_r(copy, ":", &save); p && nroots < MAX_ROOTS;
         p = strtok_r(NULL, ":", &save))
        snprintf(roots[nroots++], sizeof roots[0], "%s", p);
    at = a ? strtoul(a, NULL, 10) : 0;
    action = act && !strcmp(act, "eio") ? 1 : act && !strcmp(act, "enospc") ? 2 : 0;
    if (o)
        snprintf(ops, sizeof ops, ",%s,", o);
    if (getenv("FAULTFS_COUNT")) { /* one file per rank: FAULTFS_COUNT.RANK */
        snprintf(count_path, sizeof count_path, "%s.%s", getenv("FAULTFS_COUNT"), rank);
        count_file = count_path;
        atexit(report);
    }
    ready = true;
}

static bool under(const char *path)
{
    for (size_t i = 0; path && i < nroots; i++) {
        size_t n = strlen(roots[i]);
        if (!strncmp(path, roots[i], n) && (path[n] == '/' || path[n] == '\0'))
            return true;
    }
    return false;
}

static bool fd_under(int fd)
{
    return fd >= 0 && fd < MAX_FD && atomic_load(&tracked[fd]);
}

static void track(int fd, bool on)
{
    if (fd >= 0 && fd < MAX_FD)
        atomic_store(&tracked[fd], on);
}

/* The counted call `op`: -1 (errno set) when it is the one to fail; kills
 * the process when that is the action; else 0. */
static int hit(const char *op)
{
    char key[64];
    unsigned long n;

    if (ops[0]) {
        snprintf(key, sizeof key, ",%s,", op);
        if (!strstr(ops, key))
            return 0;
    }
    n = atomic_fetch_add(&counted, 1) + 1;
    if (at == 0 || n != at)
        return 0;
    if (action == 0) {
        report();
        raise(SIGKILL);
    }
    errno = action == 1 ? EIO : ENOSPC;
    return -1;
}

#define REAL(name, ret, ...)                                                                      \
    static ret (*real_##name)(__VA_ARGS__);                                                        \
    if (!real_##name)                                                                              \
        real_##name = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name);

static bool writes(int flags)
{
    return (flags & O_CREAT) || (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

static int do_open(const char *fn, int dirfd, const char *path, int flags, mode_t mode)
{
    bool in = ready && (dirfd == AT_FDCWD || path[0] == '/' ? under(path) : fd_under(dirfd));
    int fd;

    if (in && writes(flags) && hit("open") < 0)
        return -1;
    if (!strcmp(fn, "openat")) {
        REAL(openat, int, int, const char *, int, ...)
        fd = real_openat(dirfd, path, flags, mode);
    } else {
        REAL(open, int, const char *, int, ...)
        fd = real_open(path, flags, mode);
    }
    if (fd >= 0)
        track(fd, in);
    return fd;
}

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    return do_open("open", AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    return do_open("openat", dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...) __attribute__((alias("openat")));

int close(int fd)
{
    REAL(close, int, int)
    track(fd, false);
    return real_close(fd);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    REAL(write, ssize_t, int, const void *, size_t)
    if (ready && fd_under(fd) && hit("write") < 0)
        return -1;
    return real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    REAL(pwrite, ssize_t, int, const void *, size_t, off_t)
    if (ready && fd_under(fd) && hit("write") < 0)
        return -1;
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) __attribute__((alias("pwrite")));

int fsync(int fd)
{
    REAL(fsync, int, int)
    if (ready && fd_under(fd) && hit("fsync") < 0)
        return -1;
    return real_fsync(fd);
}

int fdatasync(int fd)
{
    REAL(fdatasync, int, int)
    if (ready && fd_under(fd) && hit("fsync") < 0)
        return -1;
    return real_fdatasync(fd);
}

int ftruncate(int fd, off_t len)
{
    REAL(ftruncate, int, int, off_t)
    if (ready && fd_under(fd) && hit("ftruncate") < 0)
        return -1;
    return real_ftruncate(fd, len);
}

int rename(const char *a, const char *b)
{
    REAL(rename, int, const char *, const char *)
    if (ready && (under(a) || under(b)) && hit("rename") < 0)
        return -1;
    return real_rename(a, b);
}

int renameat(int da, const char *a, int db, const char *b)
{
    REAL(renameat, int, int, const char *, int, const char *)
    if (ready && (fd_under(da) || fd_under(db) || under(a) || under(b)) && hit("rename") < 0)
        return -1;
    return real_renameat(da, a, db, b);
}

int unlink(const char *p)
{
    REAL(unlink, int, const char *)
    if (ready && under(p) && hit("unlink") < 0)
        return -1;
    return real_unlink(p);
}

int unlinkat(int d, const char *p, int flags)
{
    REAL(unlinkat, int, int, const char *, int)
    if (ready && (p[0] == '/' ? under(p) : fd_under(d)) && hit("unlink") < 0)
        return -1;
    return real_unlinkat(d, p, flags);
}

int rmdir(const char *p)
{
    REAL(rmdir, int, const char *)
    if (ready && under(p) && hit("unlink") < 0)
        return -1;
    return real_rmdir(p);
}

int mkdir(const char *p, mode_t m)
{
    REAL(mkdir, int, const char *, mode_t)
    if (ready && under(p) && hit("mkdir") < 0)
        return -1;
    return real_mkdir(p, m);
}
