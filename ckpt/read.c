/*
 * read.c: committed checkpoints, found, opened and read (accel/ckpt.h).
 *
 * A read of [lo, hi) of a tensor visits the saved pieces that overlap it (a
 * binary search over the tensor's pieces, which tile it in order) and reads
 * each whole, so that its checksum can be checked: straight into the
 * destination when the request covers the piece, else into a scratch buffer
 * from which the overlap is copied.  Loading at another world size reads
 * some pieces twice over (each by every rank that overlaps it): the price
 * of checking every byte that is used.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/log.h"
#include "ckpt_int.h"

unsigned long accel_ckpt_step(const struct accel_ckpt *c)
{
    return c->step;
}

unsigned accel_ckpt_world(const struct accel_ckpt *c)
{
    return c->world;
}

const char *accel_ckpt_dir(const struct accel_ckpt *c)
{
    return c->dir;
}

const char *accel_ckpt_meta(const struct accel_ckpt *c, const char *key)
{
    for (size_t i = 0; i < c->nmeta; i++)
        if (!strcmp(c->meta[i].key, key))
            return c->meta[i].value;
    return NULL;
}

size_t accel_ckpt_ntensors(const struct accel_ckpt *c)
{
    return c->nt;
}

const struct accel_ckpt_tensor *accel_ckpt_tensor_at(const struct accel_ckpt *c, size_t i)
{
    return i < c->nt ? &c->t[i].t : NULL;
}

static int name_vs_tensor(const void *name, const void *t)
{
    return strcmp(name, ((const struct ckpt__tensor *)t)->t.name);
}

static const struct ckpt__tensor *find(const struct accel_ckpt *c, const char *name)
{
    return c->nt ? bsearch(name, c->t, c->nt, sizeof *c->t, name_vs_tensor) : NULL;
}

const struct accel_ckpt_tensor *accel_ckpt_find(const struct accel_ckpt *c, const char *name)
{
    const struct ckpt__tensor *t = find(c, name);
    return t ? &t->t : NULL;
}

void accel_ckpt_close(struct accel_ckpt *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nf; i++) {
        ckpt__close_file(c, (uint32_t)i);
        ckpt__st_header_free(&c->f[i].h);
        accel_free(c->f[i].name);
    }
    for (size_t i = 0; i < c->nt; i++)
        accel_free((char *)c->t[i].t.name);
    for (size_t i = 0; i < c->nmeta; i++) {
        accel_free((char *)c->meta[i].key);
        accel_free((char *)c->meta[i].value);
    }
    accel_free(c->f);
    accel_free(c->t);
    accel_free(c->p);
    accel_free(c->by_file);
    accel_free(c->file_first);
    accel_free(c->meta);
    accel_free(c->scratch);
    accel_free(c->dir);
    accel_free(c->local_dir);
    accel_free(c);
}

static int entry_by_step(const void *a, const void *b)
{
    const struct accel_ckpt_entry *x = a, *y = b;
    return x->step < y->step ? -1 : x->step > y->step;
}

enum accel_err ckpt__list(const char *root, bool load, struct accel_ckpt_entry **out, size_t *n,
                          struct accel_error *err)
{
    DIR *d;
    struct dirent *e;
    struct accel_ckpt_entry *v = NULL;
    size_t cap = 0, len = 0;
    enum accel_err rc = ACCEL_OK;

    *out = NULL;
    *n = 0;
    d = opendir(root);
    if (!d)
        return accel_error_sys(err, errno == ENOENT ? ACCEL_ENOTFOUND : ACCEL_EIO,
                               "checkpoint root %s: couldn't open", root);
    while ((e = readdir(d)) != NULL) {
        unsigned long step;
        char dir[4096];
        struct accel_ckpt *c = NULL;
        struct accel_error ignored;

        struct stat st;

        if (!ckpt__parse_step_name(e->d_name, &step) ||
            !ckpt__path(dir, sizeof dir, root, e->d_name))
            continue;
        /* the entry itself, never what a link names: a link planted in a
         * shared root must not make another directory a checkpoint to
         * load or to clean up (open a linked checkpoint by its own path) */
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* gone since readdir */
        if (!S_ISDIR(st.st_mode)) {
            accel_log(ACCEL_LOG_WARN, "checkpoint: ignored %s: %s", dir,
                      S_ISLNK(st.st_mode) ? "a symbolic link, not a directory" : "not a directory");
            continue;
        }
        if (len == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            void *nv = ncap <= ACCEL_CKPT_MAX_STEP ? accel_realloc(v, ncap * sizeof *v) : NULL;
            if (!nv) {
                rc = accel_error_set(err, ACCEL_ENOMEM,
                                     "checkpoint root %s: out of memory listing it", root);
                break;
            }
            v = nv;
            cap = ncap;
        }
        memset(&v[len], 0, sizeof v[len]);
        v[len].step = step;
        memcpy(v[len].name, e->d_name, 14); /* "step-NNNNNNNN" and its NUL */
        if (!load) {
            /* only "no such file" means no manifest: any other error (a
             * soft NFS mount's EIO, ESTALE) must not make a checkpoint look
             * like an attempt to clean up */
            char m[4200];
            v[len].committed = ckpt__path(m, sizeof m, dir, CK_MANIFEST) &&
                               (access(m, F_OK) == 0 || errno != ENOENT);
        } else if (ckpt__load(&c, dir, &ignored) == ACCEL_OK) {
            v[len].committed = true;
            v[len].world = c->world;
            for (size_t i = 0; i < c->nf; i++)
                v[len].bytes += c->f[i].bytes;
            accel_ckpt_close(c);
        }
        len++;
    }
    closedir(d);
    if (rc != ACCEL_OK) {
        accel_free(v);
        return rc;
    }
    if (len) /* v is NULL when there is none */
        qsort(v, len, sizeof *v, entry_by_step);
    *out = v;
    *n = len;
    return ACCEL_OK;
}

enum accel_err accel_ckpt_list(const char *root, struct accel_ckpt_entry **out, size_t *n,
                               struct accel_error *err)
{
    return ckpt__list(root, true, out, n, err);
}

enum accel_err accel_ckpt_open(struct accel_ckpt **out, const char *path, struct accel_error *err)
{
    struct accel_ckpt_entry *e = NULL;
    size_t n = 0, incomplete = 0;
    char dir[4096], manifest[4200];
    enum accel_err rc;

    *out = NULL;
    if (!path || !ckpt__path(manifest, sizeof manifest, path, CK_MANIFEST))
        return accel_error_set(err, ACCEL_EINVAL, "checkpoint open: no path, or one too long");
    if (access(manifest, F_OK) == 0) /* a checkpoint directory */
        return ckpt__load(out, path, err);
    rc = ckpt__list(path, false, &e, &n, err);
    if (rc != ACCEL_OK)
        return rc;
    for (size_t i = n; i-- > 0;) {
        if (!e[i].committed) {
            incomplete++;
            continue;
        }
        /* the newest with a manifest: its error if it does not load, never
         * an older one in its place */
        ckpt__path(dir, sizeof dir, path, e[i].name);
        accel_free(e);
        return ckpt__load(out, dir, err);
    }
    accel_free(e);
    if (n == 0)
        return accel_error_set(err, ACCEL_ENOTFOUND,
                               "%s: holds no checkpoint (no %s nor step-NNNNNNNN directory)", path,
                               CK_MANIFEST);
    return accel_error_set(err, ACCEL_ENOTFOUND,
                           "%s: holds no committed checkpoint (%zu attempt%s without a %s)", path,
                           incomplete, incomplete == 1 ? "" : "s", CK_MANIFEST);
}

/* The first piece of t whose range ends after element lo. */
static size_t first_piece(const struct accel_ckpt *c, const struct ckpt__tensor *t, uint64_t lo)
{
    size_t a = 0, b = t->n;

    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (c->p[t->first + mid].hi <= lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

static enum accel_err read_range(struct accel_ckpt *c, const struct ckpt__tensor *t, uint64_t lo,
                                 uint64_t hi, char *dst, struct accel_error *err)
{
    size_t esz = accel_dtype_size(t->t.dtype);

    if (lo == hi) /* nothing asked: nothing read */
        return ACCEL_OK;

    for (size_t k = first_piece(c, t, lo); k < t->n && c->p[t->first + k].lo < hi; k++) {
        const struct ckpt__piece *p = &c->p[t->first + k];
        uint64_t off, len, a = p->lo > lo ? p->lo : lo, b = p->hi < hi ? p->hi : hi;
        enum accel_err rc = ckpt__piece_at(c, t, k, &off, &len, err);

        if (rc != ACCEL_OK)
            return rc;
        if (a == p->lo && b == p->hi) { /* the whole piece: straight in */
            rc = ckpt__pread(c, p->file, dst + (a - lo) * esz, off, len, p->xxh3, t->t.name, err);
        } else { /* part of it: the piece is read whole (for its checksum) */
            if (c->scratch_len < len) {
                void *s = accel_realloc(c->scratch, (size_t)len);
                if (!s)
                    return accel_error_set(err, ACCEL_ENOMEM,
                                           "%s: tensor '%s': out of memory for a piece of %" PRIu64
                                           " bytes",
                                           c->dir, t->t.name, len);
                c->scratch = s;
                c->scratch_len = (size_t)len;
            }
            rc = ckpt__pread(c, p->file, c->scratch, off, len, p->xxh3, t->t.name, err);
            if (rc == ACCEL_OK)
                memcpy(dst + (a - lo) * esz, (char *)c->scratch + (a - p->lo) * esz,
                       (size_t)((b - a) * esz));
        }
        if (rc != ACCEL_OK)
            return rc;
    }
    return ACCEL_OK;
}

enum accel_err accel_ckpt_read(struct accel_ckpt *c, const char *name, enum accel_dtype dtype,
                               uint64_t lo, uint64_t hi, void *dst, struct accel_error *err)
{
    const struct ckpt__tensor *t = name ? find(c, name) : NULL;

    if (!t)
        return accel_error_set(err, ACCEL_ENOTFOUND, "%s: no tensor '%s' in the checkpoint", c->dir,
                               name ? name : "(null)");
    if (dtype != t->t.dtype || lo > hi || hi > t->numel || (lo < hi && !dst))
        return accel_error_set(err, ACCEL_EINVAL,
                               "%s: tensor '%s' holds %" PRIu64
                               " elements of %s; asked for [%" PRIu64 ", %" PRIu64 ") of %s",
                               c->dir, name, t->numel, accel_dtype_st_name(t->t.dtype), lo, hi,
                               accel_dtype_st_name(dtype) ? accel_dtype_st_name(dtype) : "?");
    return read_range(c, t, lo, hi, dst, err);
}

enum accel_err accel_ckpt_check_files(struct accel_ckpt *c, struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;

    for (uint32_t f = 0; rc == ACCEL_OK && f < c->nf; f++) {
        rc = ckpt__open_file(c, f, err);
        ckpt__close_file(c, f); /* a listing of thousands of ranks holds none open */
    }
    return rc;
}

enum accel_err accel_ckpt_verify(struct accel_ckpt *c, struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;

    for (size_t i = 0; rc == ACCEL_OK && i < c->nt; i++)
        for (size_t k = 0; rc == ACCEL_OK && k < c->t[i].n; k++) {
            const struct ckpt__piece *p = &c->p[c->t[i].first + k];
            uint64_t off, len;

            rc = ckpt__piece_at(c, &c->t[i], k, &off, &len, err);
            if (rc == ACCEL_OK) /* through the scratch buffer, chunk by chunk */
                rc = ckpt__pread(c, p->file, NULL, off, len, p->xxh3, c->t[i].t.name, err);
        }
    /* and the files that hold no piece (a rank whose slices were all padding) */
    for (uint32_t f = 0; rc == ACCEL_OK && f < c->nf; f++)
        rc = ckpt__open_file(c, f, err);
    return rc;
}
