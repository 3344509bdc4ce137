/*
 * files.c: the system calls of reading checkpoints: a rank file's bytes
 * read back and checked (from a local tier's copy first, when there is
 * one), a checkpoint directory removed.  Nothing here decides what goes
 * where (save.c, read.c do); writing is out.c's.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "accel/log.h"
#include "ckpt_int.h"

DIR *ckpt__opendir_nofollow(int at, const char *name)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d;

    if (fd < 0)
        return NULL;
    if (!(d = fdopendir(fd))) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

enum accel_err ckpt__remove_dir(const char *root, const char *name, struct accel_error *err)
{
    int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), saved = 0;
    enum accel_err rc = ACCEL_OK;
    DIR *d = NULL;
    struct dirent *e;
    struct stat st;

    if (rfd < 0)
        return accel_error_sys(err, ACCEL_EIO, "%s: couldn't open", root);
    /* the entry itself, by its descriptor from here on: a link (or a
     * directory swapped in after the listing) is never followed, and what
     * is emptied is what was checked */
    if (!(d = ckpt__opendir_nofollow(rfd, name))) {
        rc = accel_error_sys(err, ACCEL_EIO, "%s/%s: couldn't open%s", root, name,
                             errno == ELOOP || errno == ENOTDIR ? " (not a directory: left alone)"
                                                                : "");
        goto out;
    }
    if (fstat(dirfd(d), &st) != 0) {
        rc = accel_error_sys(err, ACCEL_EIO, "%s/%s: couldn't stat", root, name);
        goto out;
    }
    if (st.st_uid != geteuid()) {
        rc = accel_error_set(err, ACCEL_EPERM,
                             "%s/%s belongs to uid %u, not to this process's uid %u: left alone",
                             root, name, (unsigned)st.st_uid, (unsigned)geteuid());
        goto out;
    }
    /* the manifest first, made durable: a removal cut short leaves an
     * attempt (which the next clean-up finishes), never a checkpoint with
     * files missing */
    if ((unlinkat(dirfd(d), CK_MANIFEST, 0) != 0 && errno != ENOENT) || fsync(dirfd(d)) != 0) {
        rc = accel_error_sys(err, ACCEL_EIO, "%s/%s: couldn't remove its %s", root, name,
                             CK_MANIFEST);
        goto out;
    }
    while ((e = readdir(d)) != NULL)
        /* unlinkat never follows a link: a link is removed, not its target;
         * a subdirectory is not ours to empty (EISDIR) */
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            unlinkat(dirfd(d), e->d_name, 0) != 0 && !saved)
            saved = errno;
    if (saved) {
        errno = saved;
        rc = accel_error_sys(err, ACCEL_EIO, "%s/%s: couldn't empty", root, name);
    } else if (unlinkat(rfd, name, AT_REMOVEDIR) != 0)
        rc = accel_error_sys(err, ACCEL_EIO, "%s/%s: couldn't remove", root, name);
out:
    if (d)
        closedir(d);
    close(rfd);
    return rc;
}

void ckpt__close_file(struct accel_ckpt *c, uint32_t f)
{
    if (c->f[f].fd >= 0) {
        close(c->f[f].fd);
        c->f[f].fd = -1;
        c->nopen--;
    }
}

/* Opens file f, closing another first when CK_OPEN_FILES are open (the
 * next open one after the last closed: a clock over the files). */
static int open_file(struct accel_ckpt *c, uint32_t f, const char *path)
{
    while (c->nopen >= CK_OPEN_FILES) {
        c->hand = (c->hand + 1) % c->nf;
        if (c->hand != f)
            ckpt__close_file(c, (uint32_t)c->hand);
    }
    c->f[f].fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (c->f[f].fd >= 0) {
        c->nopen++;
        /* pieces are read front to back: a larger readahead window keeps
         * the device busy while each chunk is hashed */
        (void)posix_fadvise(c->f[f].fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    return c->f[f].fd;
}

static enum accel_err open_checked(struct accel_ckpt *c, uint32_t f, struct accel_error *err)
{
    struct ckpt__file *file = &c->f[f];
    char path[4096];
    struct stat st;
    enum accel_err rc;
    size_t expect = 0;

    if (file->loaded && file->fd >= 0)
        return ACCEL_OK;
    ckpt__close_file(c, f); /* an earlier try failed: the same checks again */
    if (!file->loaded && !file->parsed)
        ckpt__st_header_free(&file->h);
    /* the local tier's copy when it is there with the manifest's size (its
     * bytes are checked as the root's are: header here, checksums on read) */
    file->local = false;
    if (c->local_dir && !file->no_local &&
        ckpt__path(path, sizeof path, c->local_dir, file->name) && open_file(c, f, path) >= 0) {
        if (fstat(file->fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == file->bytes)
            file->local = true;
        else
            ckpt__close_file(c, f);
    }
    if (!file->local && !ckpt__path(path, sizeof path, c->dir, file->name))
        return accel_error_set(err, ACCEL_EINVAL, "%s: path too long", c->dir);
    if (!file->local && open_file(c, f, path) < 0)
        return accel_error_sys(err, ACCEL_EIO, "%s: couldn't open (the manifest lists it)", path);
    if (fstat(file->fd, &st) != 0)
        return accel_error_sys(err, ACCEL_EIO, "%s: couldn't stat", path);
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != file->bytes)
        return accel_error_set(
            err, ACCEL_EIO, "%s: %lld bytes, the manifest says %" PRIu64 " (truncated or replaced)",
            path, (long long)st.st_size, file->bytes);
    if (file->loaded) /* opened again after being closed: its header was checked */
        return ACCEL_OK;
    /* the header the commit read already (the size just checked is the
     * one it was read at), else read now; checked against the model either
     * way, and read again after a failed check */
    rc = file->parsed ? ACCEL_OK
                      : ckpt__st_read(file->fd, file->bytes, ST_MAX_HEADER, path, &file->h, err);
    file->parsed = false;
    if (rc != ACCEL_OK)
        return rc;
    for (size_t j = c->file_first[f]; j < c->file_first[f + 1]; j++) {
        const struct ckpt__piece *p = &c->p[c->by_file[j]];
        const struct ckpt__tensor *t = &c->t[p->tensor];
        const struct ckpt__st_tensor *s = ckpt__st_find(&file->h, t->t.name);

        expect++;
        if (!s || s->ndim != 1 || s->shape[0] != p->hi - p->lo ||
            strcmp(s->dtype, accel_dtype_st_name(t->t.dtype)) != 0)
            return accel_error_set(err, ACCEL_EPARSE,
                                   "%s: tensor '%s' is not the 1-D %s of %" PRIu64
                                   " elements the manifest says",
                                   path, t->t.name, accel_dtype_st_name(t->t.dtype), p->hi - p->lo);
    }
    if (file->h.nt != expect)
        return accel_error_set(err, ACCEL_EPARSE, "%s: %zu tensors, the manifest puts %zu there",
                               path, file->h.nt, expect);
    file->loaded = true;
    return ACCEL_OK;
}

/* The local copy failed a check: from now on the root's file (its header
 * read again). */
static void drop_local(struct accel_ckpt *c, uint32_t f, const struct accel_error *why)
{
    struct ckpt__file *file = &c->f[f];

    accel_log(ACCEL_LOG_WARN,
              "checkpoint: the local copy is not the committed one: %s; reading "
              "%s/%s instead",
              why->msg, c->dir, file->name);
    ckpt__close_file(c, f);
    file->no_local = true;
    file->local = false;
    file->loaded = false;
    file->parsed = false;
    ckpt__st_header_free(&file->h);
}

enum accel_err ckpt__open_file(struct accel_ckpt *c, uint32_t f, struct accel_error *err)
{
    /* whether open_checked may pick the local copy: known before it runs
     * (it sets `local` itself) */
    const bool may_local = c->local_dir && !c->f[f].no_local;
    struct accel_error e;
    enum accel_err rc;

    accel_error_clear(&e);
    rc = open_checked(c, f, may_local ? &e : err);
    if (rc != ACCEL_OK && may_local && !c->f[f].local) /* failed before choosing it */
        return accel_error_set(err, rc, "%s", e.msg);
    if (rc != ACCEL_OK && c->f[f].local) {
        drop_local(c, f, &e);
        rc = open_checked(c, f, err);
    }
    return rc;
}

enum accel_err ckpt__piece_at(struct accel_ckpt *c, const struct ckpt__tensor *t, size_t k,
                              uint64_t *off, uint64_t *len, struct accel_error *err)
{
    const struct ckpt__piece *p = &c->p[t->first + k];
    struct ckpt__file *file = &c->f[p->file];
    const struct ckpt__st_tensor *s;

    enum accel_err rc = ckpt__open_file(c, p->file, err);

    if (rc != ACCEL_OK)
        return rc;
    s = ckpt__st_find(&file->h, t->t.name);
    *off = file->h.data_start + s->begin;
    *len = s->end - s->begin;
    return ACCEL_OK;
}

static enum accel_err pread_checked(struct accel_ckpt *c, uint32_t f, void *dst, uint64_t off,
                                    uint64_t len, uint64_t sum, const char *tensor,
                                    struct accel_error *err)
{
    XXH3_state_t *h = XXH3_createState();
    enum accel_err rc = ACCEL_OK;
    uint64_t left = len;
    size_t want = len > CK_CHUNK ? CK_CHUNK : (size_t)len;

    if (!h)
        return accel_error_set(err, ACCEL_ENOMEM, "%s/%s: out of memory reading it", c->dir,
                               c->f[f].name);
    XXH3_64bits_reset(h);
    if (!dst && c->scratch_len < want) {
        void *s = accel_realloc(c->scratch, want);
        if (!s) {
            XXH3_freeState(h);
            return accel_error_set(err, ACCEL_ENOMEM, "%s/%s: out of memory reading it", c->dir,
                                   c->f[f].name);
        }
        c->scratch = s;
        c->scratch_len = want;
    }
    while (rc == ACCEL_OK && left > 0) {
        /* into dst, or chunk by chunk through the scratch buffer */
        char *p = dst ? (char *)dst + (len - left) : c->scratch;
        size_t chunk = left > CK_READ_CHUNK ? CK_READ_CHUNK : (size_t)left;
        ssize_t n = pread(c->f[f].fd, p, chunk, (off_t)off);

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = accel_error_sys(err, ACCEL_EIO, "%s/%s: couldn't read", c->dir, c->f[f].name);
        else if (n == 0)
            rc = accel_error_set(err, ACCEL_EIO, "%s/%s: unexpected end of file", c->dir,
                                 c->f[f].name);
        else {
            off += (uint64_t)n;
            left -= (uint64_t)n;
            /* the device fetches the next chunk while this one is hashed */
            if (left > 0)
                (void)readahead(c->f[f].fd, (off_t)off,
                                left > CK_READ_CHUNK ? CK_READ_CHUNK : (size_t)left);
            XXH3_64bits_update(h, p, (size_t)n);
        }
    }
    if (rc == ACCEL_OK && XXH3_64bits_digest(h) != sum)
        rc = accel_error_set(err, ACCEL_EIO,
                             "%s/%s: tensor '%s': checksum mismatch (the data changed after it "
                             "was saved)",
                             c->f[f].local ? c->local_dir : c->dir, c->f[f].name, tensor);
    XXH3_freeState(h);
    return rc;
}

enum accel_err ckpt__pread(struct accel_ckpt *c, uint32_t f, void *dst, uint64_t off, uint64_t len,
                           uint64_t sum, const char *tensor, struct accel_error *err)
{
    const struct ckpt__st_tensor *s;
    struct accel_error e;
    enum accel_err rc;

    if (!c->f[f].local)
        return pread_checked(c, f, dst, off, len, sum, tensor, err);
    accel_error_clear(&e);
    rc = pread_checked(c, f, dst, off, len, sum, tensor, &e);
    if (rc == ACCEL_OK || rc == ACCEL_ENOMEM)
        return rc == ACCEL_OK ? rc : accel_error_set(err, rc, "%s", e.msg);
    drop_local(c, f, &e);
    rc = ckpt__open_file(c, f, err);
    if (rc != ACCEL_OK)
        return rc;
    /* the root's copy, at the offsets its own header gives (checked against
     * the manifest: the piece's length is the same) */
    s = ckpt__st_find(&c->f[f].h, tensor);
    if (!s || s->end - s->begin != len)
        return accel_error_set(err, ACCEL_EPARSE, "%s/%s: no tensor '%s' of %" PRIu64 " bytes",
                               c->dir, c->f[f].name, tensor, len);
    return pread_checked(c, f, dst, c->f[f].h.data_start + s->begin, len, sum, tensor, err);
}
