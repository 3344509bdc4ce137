/*
 * saver_tier.c: a saver's node-local tier (accel/ckpt.h, "savers"): its
 * directory, named after the root and this user's own; the copy up of a
 * rank file to the root, paced and checked at both ends; and the trim to
 * keep_local after a commit.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "accel/alloc.h"
#include "accel/log.h"
#include "saver_int.h"

/* ---------------------------------------------------------------- the tier */

/* The local tier of root under local: a directory named after the root
 * (its last component, at most 64 bytes of it, and the XXH3 of the whole
 * name, trailing slashes aside), so that jobs of other roots that share
 * the local directory never meet; NULL when out of memory. */
char *ckpt__sv_tier_path(const char *local, const char *root)
{
    size_t len = strlen(root), at;
    char *path;

    while (len > 1 && root[len - 1] == '/')
        len--;
    at = len;
    while (at > 0 && root[at - 1] != '/')
        at--;
    path = accel_malloc(strlen(local) + 1 + 64 + 1 + 16 + 1);
    if (path)
        sprintf(path, "%s/%.*s-%016" PRIx64, local, (int)(len - at > 64 ? 64 : len - at), root + at,
                (uint64_t)XXH3_64bits(root, len));
    return path;
}

/* The local tier made: the directory given, then the tier in it, a
 * directory of this user's own (not a link, not another's: the local
 * directory may be one every user shares, as /tmp). */
enum accel_err ckpt__sv_make_tier(const struct accel_ckpt_saver *sv, struct accel_error *err)
{
    struct stat st;
    enum accel_err rc = ckpt__root_dir(sv->o.local, 1, err);

    if (rc != ACCEL_OK)
        return rc;
    if (mkdir(sv->local, 0700) != 0 && errno != EEXIST)
        return accel_error_sys(err, errno == EACCES ? ACCEL_EPERM : ACCEL_EIO,
                               "checkpoint local tier %s: couldn't create", sv->local);
    if (lstat(sv->local, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return accel_error_set(err, ACCEL_EPERM,
                               "checkpoint local tier %s: not a directory of uid %u (a link, or "
                               "another user's): remove it, or give another --ckpt-local",
                               sv->local, (unsigned)geteuid());
    return ACCEL_OK;
}

/* ---------------------------------------------------------------- the copy up */

/* Sleeps so that `done` bytes since t0 keep to `rate` bytes/s. */
static void pace(uint64_t rate, const struct timespec *t0, uint64_t done)
{
    struct timespec now, wait;
    double due, spent;

    if (rate == 0)
        return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    due = (double)done / (double)rate;
    spent = (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
    if (due <= spent)
        return;
    wait.tv_sec = (time_t)(due - spent);
    wait.tv_nsec = (long)((due - spent - (double)wait.tv_sec) * 1e9);
    while (nanosleep(&wait, &wait) != 0 && errno == EINTR)
        ;
}

/* XXH3-64 of the file at path, read from the device where the file system
 * allows (O_DIRECT, else with the page cache dropped first), into *sum. */
static enum accel_err read_back(const char *path, void *buf, size_t bufsize, uint64_t *sum,
                                struct accel_error *err)
{
    XXH3_state_t *h = XXH3_createState();
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_DIRECT);
    enum accel_err rc = ACCEL_OK;
    ssize_t n;

    if (fd < 0) {
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0)
            (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    if (!h || fd < 0) {
        rc = fd < 0 ? accel_error_sys(err, ACCEL_EIO, "%s: couldn't open it to read it back", path)
                    : accel_error_set(err, ACCEL_ENOMEM, "checkpoint: out of memory");
        goto out;
    }
    XXH3_64bits_reset(h);
    while ((n = read(fd, buf, bufsize)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = accel_error_sys(err, ACCEL_EIO, "%s: couldn't read it back", path);
            goto out;
        }
        XXH3_64bits_update(h, buf, (size_t)n);
    }
    *sum = XXH3_64bits_digest(h);
out:
    if (fd >= 0)
        close(fd);
    XXH3_freeState(h);
    return rc;
}

/* Copies this rank's file of `step` from the local tier to the root's step
 * directory durably, at copy_rate, and checks both ends: every piece read
 * from the local disk against the checksum its header declares (as the
 * bytes stream past: the local file is read once), and the root's copy,
 * read back, against what was written to it.  On failure *local_bad says
 * whether the local copy was at fault (unreadable or damaged), rather than
 * the root or this process. */
enum accel_err ckpt__sv_copy_up(struct accel_ckpt_saver *sv, unsigned long step, bool *local_bad,
                                struct accel_error *err)
{
    char name[64], step_name[32], ldir[4096], from[4200], rdir[4096];
    struct ckpt__out f = {.fd = -1, .hashing = true};
    struct ckpt__check v;
    struct timespec t0;
    uint64_t wrote = 0, back = 0, done = 0;
    void *buf = NULL;
    enum accel_err rc;
    int fd = -1;

    memset(&v, 0, sizeof v);
    *local_bad = false;
    ckpt__rank_name(name, sizeof name, sv->o.rank, sv->o.world);
    ckpt__step_name(step_name, sizeof step_name, step);
    if (posix_memalign(&buf, CK_DIRECT_ALIGN, CK_DIRECT_BUF) != 0) {
        buf = NULL;
        rc = accel_error_set(err, ACCEL_ENOMEM, "checkpoint: out of memory");
        goto out;
    }
    if (!ckpt__path(ldir, sizeof ldir, sv->local, step_name) ||
        !ckpt__path(from, sizeof from, ldir, name)) {
        rc = accel_error_set(err, ACCEL_EINVAL, "%s: path too long", sv->local);
        goto out;
    }
    /* the local side: its header and declared pieces, then its bytes */
    rc = ckpt__check_open(&v, ldir, step, sv->o.rank, sv->o.world, err);
    if (rc == ACCEL_OK && (fd = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
        rc = accel_error_sys(err, ACCEL_EIO, "local copy %s: couldn't open", from);
    *local_bad = rc != ACCEL_OK && rc != ACCEL_ENOMEM;
    if (rc != ACCEL_OK)
        goto out;
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    rc = ckpt__step_dir(sv->o.root, step, sv->o.rank, rdir, sizeof rdir, err);
    f.total = v.c->f[sv->o.rank].bytes;
    if (rc == ACCEL_OK)
        rc = ckpt__out_open(&f, rdir, name, err);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (rc == ACCEL_OK) {
        ssize_t n = read(fd, buf, CK_DIRECT_BUF);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = accel_error_sys(err, ACCEL_EIO, "local copy %s: couldn't read", from);
        if (n > 0)
            rc = ckpt__check_feed(&v, buf, (size_t)n, err);
        *local_bad = rc != ACCEL_OK;
        if (n <= 0 || rc != ACCEL_OK)
            break;
        rc = ckpt__out_write(&f, buf, (uint64_t)n, err);
        done += (uint64_t)n;
        pace(sv->o.copy_rate, &t0, done);
    }
    if (rc == ACCEL_OK && (rc = ckpt__check_end(&v, err)) != ACCEL_OK)
        *local_bad = true;
    rc = ckpt__out_close(&f, rc, &wrote, err);
    if (rc == ACCEL_OK)
        rc = read_back(f.path, buf, CK_DIRECT_BUF, &back, err);
    if (rc == ACCEL_OK && back != wrote)
        rc = accel_error_set(err, ACCEL_EIO,
                             "%s: reads back other bytes than were written to it (the shared "
                             "storage changed them)",
                             f.path);
out:
    if (fd >= 0)
        close(fd);
    free(buf); /* posix_memalign's */
    ckpt__check_free(&v);
    return rc;
}

/* ---------------------------------------------------------------- the trim */

/* Removes the local tier's steps older than step but the keep_local - 1
 * newest of them, and, with `past`, those newer than step (attempts that
 * did not finish).  Failures are logged. */
void ckpt__sv_trim_local(struct accel_ckpt_saver *sv, unsigned long step, bool past)
{
    struct accel_ckpt_entry *e = NULL;
    struct accel_error err;
    char path[4096];
    size_t n = 0, kept = 1;

    if (!sv->local || ckpt__list(sv->local, false, &e, &n, &err) != ACCEL_OK)
        return;
    for (size_t i = n; i-- > 0;) {
        if (e[i].step == step || (e[i].step > step && !past))
            continue;
        if (e[i].step < step && kept < sv->o.keep_local) {
            kept++;
            continue;
        }
        /* the ranks of a node share its local tier: another may be removing
         * the same directory, and only one that stays is worth a word */
        if (ckpt__remove_dir(sv->local, e[i].name, &err) != ACCEL_OK &&
            ckpt__path(path, sizeof path, sv->local, e[i].name) && access(path, F_OK) == 0)
            accel_log(ACCEL_LOG_WARN, "checkpoint: local tier: %s", err.msg);
    }
    accel_free(e);
}
