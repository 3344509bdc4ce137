/*
 * file.c: the rendezvous store on shared storage, for clusters where the
 * ranks share a file system but rank 0 cannot be reached by TCP first.
 *
 * One file per key in the folder.  A writer writes a temporary name and
 * renames it into place, so a reader sees the old file or the new one, never
 * half of one (rename is atomic on POSIX and NFS file systems).  Each file
 * starts with the header "ACCELSTORE1 <nonce> <klen> <vlen>\n", then the key,
 * then the value; a file of another job is ACCEL_ENONCE.  A key becomes a
 * file name by keeping [A-Za-z0-9._-] and writing every other byte as %XX
 * behind a fixed prefix, so no key can name a path outside the folder; a key
 * whose name would be too long is named by its hash (the key inside the file
 * is compared on read).
 *
 * Readers poll with backoff (1 ms, growing to POLL_MAX_S) until the deadline:
 * a shared file system offers nothing to wait on.  add takes a lock file
 * (O_CREAT|O_EXCL); a barrier is an add on its counter plus a wait for the
 * counter to reach n.  On close every rank but 0 leaves an exit file; rank 0
 * waits briefly for them, then removes this job's files and the folder if
 * it is empty.
 *
 * Prefixes of the names: k. keys, c. barrier counters, l. locks, x. exits,
 * .t. temporary files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "store_int.h"

#define POLL_FIRST_S 0.001
#define POLL_MAX_S 0.1    /* a reader notices a new file within this */
#define NAME_MAX_ENC 200  /* longer encoded names are replaced by a hash */
#define HEADER_MAX 64     /* bytes of the header line */
#define CLOSE_WAIT_S 10.0 /* rank 0 waits at most this for the other ranks to leave */
#define FILE_MAX (HEADER_MAX + ACCEL_STORE_MAX_KEY + (size_t)ACCEL_STORE_MAX_VALUE)

static void pause_s(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Sleeps the next backoff step, never past `deadline`. */
static void poll_pause(double *step, double deadline)
{
    double left = deadline - accel_now();
    pause_s(*step < left ? *step : left > 0 ? left : 0);
    *step = *step * 2 > POLL_MAX_S ? POLL_MAX_S : *step * 2;
}

/* The path of `key` under prefix `kind` ("k", "c", "l"). */
static void key_path(const struct accel_store *s, const char *kind, const char *key, char *out,
                     size_t size)
{
    static const char hex[] = "0123456789ABCDEF";
    char enc[NAME_MAX_ENC + 4];
    size_t n = 0;

    for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++) {
        if (n + 3 >= NAME_MAX_ENC) {
            n = (size_t)snprintf(enc, sizeof(enc), "#%016" PRIx64,
                                 bootstrap__fnv1a(STORE_FNV_OFFSET, key, strlen(key)));
            break;
        }
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '.' || *p == '_' || *p == '-') {
            enc[n++] = (char)*p;
        } else {
            enc[n++] = '%';
            enc[n++] = hex[*p >> 4];
            enc[n++] = hex[*p & 15];
        }
    }
    enc[n] = '\0';
    snprintf(out, size, "%s/%s.%s", s->dir, kind, enc);
}

/* Writes `key` = `len` bytes to `path` through a temporary name. */
static enum accel_err write_file(struct accel_store *s, const char *path, const char *key,
                                 const void *val, size_t len, struct accel_error *err)
{
    char tmp[4096], hdr[HEADER_MAX];
    size_t klen = strlen(key);
    int hlen, fd;
    enum accel_err rc = ACCEL_EIO;

    hlen = snprintf(hdr, sizeof(hdr), "ACCELSTORE1 %016" PRIx64 " %zu %zu\n", s->nonce, klen, len);
    snprintf(tmp, sizeof(tmp), "%s/.t.%u.%ld.%lu", s->dir, s->rank, (long)getpid(), s->tmp_seq++);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return accel_error_sys(err, ACCEL_EIO, STORE_WHO ": store: couldn't create %s", s->rank,
                               s->world, tmp);
    struct {
        const void *p;
        size_t n;
    } parts[3] = {{hdr, (size_t)hlen}, {key, klen}, {val, len}};
    for (int i = 0; i < 3; i++) {
        const char *p = parts[i].p;
        size_t left = parts[i].n;
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = accel_error_sys(err, ACCEL_EIO, STORE_WHO ": store: couldn't write %s",
                                     s->rank, s->world, tmp);
                goto out;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (close(fd) != 0) { /* NFS reports write errors here */
        fd = -1;
        rc = accel_error_sys(err, ACCEL_EIO, STORE_WHO ": store: couldn't write %s", s->rank,
                             s->world, tmp);
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        rc = accel_error_sys(err, ACCEL_EIO, STORE_WHO ": store: couldn't rename %s to %s", s->rank,
                             s->world, tmp, path);
        goto out;
    }
    return ACCEL_OK;
out:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return rc;
}

/* Reads the value of `key` from `path`.  ACCEL_ENOTFOUND while the file is
 * not there (nothing set in err); ACCEL_ENONCE for another job's file. */
static enum accel_err read_file(const struct accel_store *s, const char *path, const char *key,
                                void **val, size_t *len, struct accel_error *err)
{
    struct accel_error rerr;
    char *data, *nl;
    size_t n, klen = strlen(key), flen, fvlen;
    uint64_t nonce;
    enum accel_err rc = accel_read_file(path, FILE_MAX, &data, &n, &rerr);

    if (rc == ACCEL_ENOTFOUND)
        return rc;
    if (rc != ACCEL_OK)
        return accel_error_set(err, rc, STORE_WHO ": store: %s", s->rank, s->world, rerr.msg);
    nl = memchr(data, '\n', n < HEADER_MAX ? n : HEADER_MAX);
    if (nl == NULL || sscanf(data, "ACCELSTORE1 %" SCNx64 " %zu %zu", &nonce, &flen, &fvlen) != 3 ||
        (size_t)(nl + 1 - data) + flen + fvlen != n) {
        rc = accel_error_set(err, ACCEL_EPARSE,
                             STORE_WHO ": store: %s is not a store file of this version", s->rank,
                             s->world, path);
        goto out;
    }
    if (nonce != s->nonce) {
        rc = accel_error_set(err, ACCEL_ENONCE,
                             STORE_WHO ": store: %s belongs to another job or an earlier step "
                                       "(nonce %016" PRIx64 ", this job %016" PRIx64
                                       "); remove it or use a fresh folder",
                             s->rank, s->world, path, nonce, s->nonce);
        goto out;
    }
    if (flen != klen || memcmp(nl + 1, key, klen) != 0) {
        rc = accel_error_set(err, ACCEL_EIO, STORE_WHO ": store: %s holds another key", s->rank,
                             s->world, path);
        goto out;
    }
    if (val != NULL) {
        memmove(data, nl + 1 + klen, fvlen); /* the buffer becomes the value */
        data[fvlen] = '\0';
        *val = data;
        *len = fvlen;
        data = NULL;
    }
    rc = ACCEL_OK;
out:
    accel_free(data);
    return rc;
}

static enum accel_err file_set(struct accel_store *s, const char *key, const void *val, size_t len,
                               struct accel_error *err)
{
    char path[4096];
    key_path(s, "k", key, path, sizeof(path));
    return write_file(s, path, key, val, len, err);
}

/* Waits for the file of `key` until `deadline`; `what` words the timeout. */
static enum accel_err wait_file(struct accel_store *s, const char *kind, const char *key,
                                double deadline, void **val, size_t *len, struct accel_error *err)
{
    char path[4096];
    double step = POLL_FIRST_S;

    key_path(s, kind, key, path, sizeof(path));
    for (;;) {
        enum accel_err rc = read_file(s, path, key, val, len, err);
        if (rc != ACCEL_ENOTFOUND)
            return rc;
        if (accel_now() >= deadline)
            return ACCEL_ETIMEDOUT; /* the caller words it */
        poll_pause(&step, deadline);
    }
}

static enum accel_err file_get(struct accel_store *s, const char *key, void **val, size_t *len,
                               struct accel_error *err)
{
    enum accel_err rc = wait_file(s, "k", key, accel_now() + s->timeout_s, val, len, err);

    if (rc == ACCEL_ETIMEDOUT)
        return accel_error_set(err, rc, STORE_WHO ": get '%s': not set in %s within %g s", s->rank,
                               s->world, key, s->dir, s->timeout_s);
    return rc;
}

static enum accel_err file_wait(struct accel_store *s, const char *const *keys, size_t n,
                                struct accel_error *err)
{
    double deadline = accel_now() + s->timeout_s;

    for (size_t i = 0; i < n; i++) {
        enum accel_err rc = wait_file(s, "k", keys[i], deadline, NULL, NULL, err);
        if (rc == ACCEL_ETIMEDOUT)
            return accel_error_set(err, rc,
                                   STORE_WHO ": wait '%s': not set in %s within %g s (%zu of %zu "
                                             "keys were there)",
                                   s->rank, s->world, keys[i], s->dir, s->timeout_s, i, n);
        if (rc != ACCEL_OK)
            return rc;
    }
    return ACCEL_OK;
}

/* Adds `delta` to the integer in the file `kind`.`key`, under its lock. */
static enum accel_err add_locked(struct accel_store *s, const char *kind, const char *key,
                                 int64_t delta, int64_t *result, struct accel_error *err)
{
    char path[4096], lock[4096], lname[4200];
    double deadline = accel_now() + s->timeout_s, step = POLL_FIRST_S;
    enum accel_err rc;
    void *val = NULL;
    size_t len = 0;
    int64_t v = 0;
    char text[24], *end;
    int fd, n;

    key_path(s, kind, key, path, sizeof(path));
    snprintf(lname, sizeof(lname), "%s.%s", kind, key);
    key_path(s, "l", lname, lock, sizeof(lock));
    for (;;) {
        fd = open(lock, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0)
            break;
        if (errno != EEXIST)
            return accel_error_sys(err, ACCEL_EIO, STORE_WHO ": add '%s': couldn't create %s",
                                   s->rank, s->world, key, lock);
        if (accel_now() >= deadline)
            return accel_error_set(err, ACCEL_ETIMEDOUT,
                                   STORE_WHO ": add '%s': %s stayed locked for %g s (remove "
                                             "the lock if no job uses the folder)",
                                   s->rank, s->world, key, lock, s->timeout_s);
        poll_pause(&step, deadline);
    }
    /* the lock names its job, so that close can tell it is ours */
    n = snprintf(text, sizeof(text), "%016" PRIx64 "\n", s->nonce);
    if (write(fd, text, (size_t)n) != n) {
        rc = accel_error_sys(err, ACCEL_EIO, STORE_WHO ": add '%s': couldn't write %s", s->rank,
                             s->world, key, lock);
        close(fd);
        goto out;
    }
    close(fd);
    rc = read_file(s, path, key, &val, &len, err);
    if (rc == ACCEL_OK) {
        errno = 0;
        v = strtoll(val, &end, 10);
        if (len == 0 || *end != '\0' || errno != 0) {
            rc = accel_error_set(err, ACCEL_EINVAL,
                                 STORE_WHO ": add '%s': the value is not an integer", s->rank,
                                 s->world, key);
            goto out;
        }
    } else if (rc != ACCEL_ENOTFOUND) {
        goto out;
    }
    if ((delta > 0 && v > INT64_MAX - delta) || (delta < 0 && v < INT64_MIN - delta)) {
        rc = accel_error_set(err, ACCEL_EINVAL, STORE_WHO ": add '%s': would overflow", s->rank,
                             s->world, key);
        goto out;
    }
    v += delta;
    n = snprintf(text, sizeof(text), "%" PRId64, v);
    rc = write_file(s, path, key, text, (size_t)n, err);
    if (rc == ACCEL_OK && result != NULL)
        *result = v;
out:
    accel_free(val);
    unlink(lock);
    return rc;
}

static enum accel_err file_add(struct accel_store *s, const char *key, int64_t delta,
                               int64_t *result, struct accel_error *err)
{
    return add_locked(s, "k", key, delta, result, err);
}

/* The counter of barrier `name`, 0 when unreadable. */
static int64_t counter(struct accel_store *s, const char *name)
{
    char path[4096];
    void *val = NULL;
    size_t len;
    int64_t v = 0;

    key_path(s, "c", name, path, sizeof(path));
    if (read_file(s, path, name, &val, &len, NULL) == ACCEL_OK)
        v = strtoll(val, NULL, 10);
    accel_free(val);
    return v;
}

static enum accel_err file_barrier(struct accel_store *s, const char *name, unsigned n,
                                   struct accel_error *err)
{
    double deadline = accel_now() + s->timeout_s, step = POLL_FIRST_S;
    enum accel_err rc = add_locked(s, "c", name, 1, NULL, err);

    if (rc != ACCEL_OK)
        return rc;
    for (;;) {
        int64_t arrived = counter(s, name);
        if (arrived >= (int64_t)n)
            return ACCEL_OK;
        if (accel_now() >= deadline)
            return accel_error_set(err, ACCEL_ETIMEDOUT,
                                   STORE_WHO ": barrier '%s': %" PRId64
                                             " of %u arrived in %s within %g s",
                                   s->rank, s->world, name, arrived, n, s->dir, s->timeout_s);
        poll_pause(&step, deadline);
    }
}

/* True when the file at `path` carries this job's nonce (a store file's
 * header or a lock's first line). */
static bool ours(const struct accel_store *s, const char *path)
{
    char buf[HEADER_MAX], want[24];
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

    if (fd < 0)
        return false;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    snprintf(want, sizeof(want), "%016" PRIx64, s->nonce);
    return strstr(buf, want) != NULL;
}

/* Rank 0: removes this job's files, then the folder if nothing else is in
 * it.  Files of other jobs and temporary files of live writers stay. */
static void cleanup(struct accel_store *s)
{
    DIR *d = opendir(s->dir);
    struct dirent *e;
    char path[4096];

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name;
        if (strncmp(nm, "k.", 2) != 0 && strncmp(nm, "c.", 2) != 0 && strncmp(nm, "l.", 2) != 0 &&
            strncmp(nm, "x.", 2) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", s->dir, nm);
        if (ours(s, path))
            unlink(path);
    }
    closedir(d);
    rmdir(s->dir); /* fails, as it should, when anything is left */
}

static void file_close(struct accel_store *s)
{
    char name[32], path[4096];

    if (s->dir == NULL)
        return;
    if (s->rank != 0) {
        /* tell rank 0 this rank no longer reads the folder */
        snprintf(name, sizeof(name), "%u", s->rank);
        key_path(s, "x", name, path, sizeof(path));
        if (write_file(s, path, name, "", 0, NULL) != ACCEL_OK)
            return;
        return;
    }
    double deadline = accel_now() + (s->timeout_s < CLOSE_WAIT_S ? s->timeout_s : CLOSE_WAIT_S);
    for (unsigned r = 1; r < s->world; r++) {
        snprintf(name, sizeof(name), "%u", r);
        if (wait_file(s, "x", name, deadline, NULL, NULL, NULL) != ACCEL_OK)
            break; /* a rank that died: clean up anyway */
    }
    cleanup(s);
}

enum accel_err accel_store_open_dir(struct accel_store **out, const struct accel_store_opts *opts,
                                    struct accel_error *err)
{
    struct accel_store *s;
    struct stat st;

    *out = NULL;
    if (opts == NULL || opts->dir == NULL || opts->dir[0] == '\0')
        return accel_error_set(err, ACCEL_EINVAL, "store: no folder to open");
    if (strlen(opts->dir) > 3000)
        return accel_error_set(err, ACCEL_EINVAL, "store: folder name '%.64s...' is too long",
                               opts->dir);
    if (mkdir(opts->dir, 0700) != 0 && errno != EEXIST)
        return accel_error_sys(err, ACCEL_EIO, "rank %u of %u: store: couldn't create %s",
                               opts->rank, opts->world, opts->dir);
    if (stat(opts->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: store: %s is not a folder",
                               opts->rank, opts->world, opts->dir);
    s = accel_calloc(1, sizeof(*s));
    if (s == NULL || (s->dir = accel_strdup(opts->dir)) == NULL) {
        accel_free(s);
        return accel_error_set(err, ACCEL_ENOMEM, "store: out of memory");
    }
    s->ops = &bootstrap__file_ops;
    s->fd = -1;
    s->nonce = opts->nonce;
    s->rank = opts->rank;
    s->world = opts->world;
    s->timeout_s = opts->timeout_s > 0 ? opts->timeout_s : ACCEL_STORE_DEFAULT_TIMEOUT_S;
    snprintf(s->where, sizeof(s->where), "%.290s", opts->dir);
    *out = s;
    return ACCEL_OK;
}

const struct bootstrap__ops bootstrap__file_ops = {
    .set = file_set,
    .get = file_get,
    .wait = file_wait,
    .add = file_add,
    .barrier = file_barrier,
    .close = file_close,
};
