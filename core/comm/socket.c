/*
 * socket.c: the `socket` backend's entry points (accel_comm_ops), its split,
 * what happens when a collective fails, and how its connections close.
 *
 * A failure is made visible everywhere and named once.  The rank that sees it
 * first (a neighbour's connection closed or reset, or no progress by the
 * deadline) claims "<prefix>abort.n" in the store with an atomic add and, if
 * it was first, records "<prefix>abort" = "<code>|<what happened>"; a rank
 * that comes later reports that record instead of its own view.  Then the
 * rank closes both of its ring connections, so its neighbours fail at once,
 * and theirs, until the whole ring has stopped: nobody waits for the
 * deadline because of a rank that is dead.  Since a rank claims before it
 * closes, a rank that fails because of that close always finds the claim
 * made, so the record names the first failure, not a cascade.  The store
 * calls are the store client's, bounded by its own timeout; if the store is
 * gone too, the rank reports what it saw itself.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/getenv.h"
#include "socket_int.h"

enum accel_err comm__sock_fail(struct accel_comm *c, struct accel_error *err, const char *what,
                               enum accel_err code, const char *fmt, ...)
{
    struct sock *s = c->impl;
    struct accel_error serr; /* the store's own problems are not the caller's error */
    char local[512], rec[640], key[160];
    const char *msg = local; /* the first failure's, where one was kept */
    void *val = NULL;
    size_t len = 0;
    int64_t k = 0;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(local, sizeof(local), fmt, ap);
    va_end(ap);
    c->failed = true;
    snprintf(key, sizeof(key), "%sabort.n", c->prefix);
    if (c->store != NULL && accel_store_add(c->store, key, 1, &k, &serr) == ACCEL_OK) {
        snprintf(key, sizeof(key), "%sabort", c->prefix);
        if (k == 1) {
            int n = snprintf(rec, sizeof(rec), "%d|%s (seen first by rank %u)", (int)code, local,
                             c->rank);
            if (n > 0 && accel_store_set(c->store, key, rec, strlen(rec), &serr) == ACCEL_OK)
                msg = strchr(rec, '|') + 1;
        } else if (accel_store_get(c->store, key, &val, &len, &serr) == ACCEL_OK) {
            char *bar = memchr(val, '|', len);
            if (bar != NULL) {
                long first = strtol(val, NULL, 10);
                if (first > 0 && first < ACCEL_ERR__LAST)
                    code = (enum accel_err)first;
                snprintf(rec, sizeof(rec), "%s", bar + 1);
                msg = rec;
            }
            accel_free(val);
        }
    }
    if (s != NULL) {
        comm__sock_host_abort(s);
        comm__sock_close(s);
    }
    return accel_error_set(err, code, "rank %u of %u: %s: %s", c->rank, c->size, what, msg);
}

#define HDR_MAGIC 0x41435231u /* "ACR1" */

void comm__sock_hdr(struct accel_comm *c, struct sock_hdr *h, unsigned kind, enum accel_dtype t,
                    unsigned op, unsigned root, uint64_t count)
{
    struct sock *s = c->impl;

    memset(h, 0, sizeof(*h));
    h->magic = HDR_MAGIC;
    h->seq = s->seq++;
    h->kind = kind;
    h->dtype = (uint32_t)t;
    h->op = op;
    h->root = root;
    h->count = count;
}

static const char *kind_name(uint32_t kind)
{
    static const char *const names[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                        "barrier"};
    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "?";
}

/* The stream cannot be trusted past this header. */
enum accel_err comm__sock_mismatch(struct accel_comm *c, struct accel_error *err, const char *what,
                                   unsigned peer, const struct sock_hdr *in,
                                   const struct sock_hdr *mine)
{
    return comm__sock_fail(c, err, what, ACCEL_EINVAL,
                           "ranks called different operations: rank %u called #%u %s(%s, count "
                           "%llu, root %u), rank %u called #%u %s(%s, count %llu, root %u)",
                           peer, in->seq, kind_name(in->kind),
                           accel_dtype_name((enum accel_dtype)in->dtype),
                           (unsigned long long)in->count, in->root, c->rank, mine->seq,
                           kind_name(mine->kind), accel_dtype_name((enum accel_dtype)mine->dtype),
                           (unsigned long long)mine->count, mine->root);
}

enum accel_err comm__sock_peer_error(struct accel_comm *c, struct accel_error *err,
                                     const char *what, unsigned peer, const char *addr, int e)
{
    if (e == 0 || e == ECONNRESET || e == EPIPE)
        return comm__sock_fail(c, err, what, ACCEL_EPEER, "rank %u (%s) closed its connection",
                               peer, addr);
    return comm__sock_fail(c, err, what, ACCEL_EPEER, "the connection with rank %u (%s) failed: %s",
                           peer, addr, strerror(e));
}

enum accel_err comm__sock_stages(struct accel_comm *c, const char *what, struct accel_error *err)
{
    struct sock *s = c->impl;

    if (s->stage_in == NULL)
        s->stage_in = accel_malloc(s->chunk_bytes);
    if (s->stage_out == NULL)
        s->stage_out = accel_malloc(s->chunk_bytes);
    if (s->stage_in == NULL || s->stage_out == NULL)
        return accel_error_set(err, ACCEL_ENOMEM,
                               "rank %u of %u: %s: out of memory for %zu-byte chunks", c->rank,
                               c->size, what, s->chunk_bytes);
    return ACCEL_OK;
}

/* Retry for a few microseconds, yielding the CPU, before sleeping in poll():
 * the neighbour's data is usually a moment away, and waking a sleeping
 * process costs more than that (most on a virtual machine).  Bounded by
 * s->spin_s, not a wait. */
bool comm__sock_spin(const struct sock *s, double *idle_since)
{
    double t;

    if (s->spin_s <= 0)
        return false;
    t = accel_now();
    if (*idle_since == 0)
        *idle_since = t;
    if (t - *idle_since >= s->spin_s)
        return false;
    sched_yield();
    return true;
}

static enum accel_err sock_sync(struct accel_comm *c, struct accel_error *err)
{
    (void)c;
    (void)err;
    return ACCEL_OK;
}

/* ------------------------------------------------------------ closing */

void comm__sock_close(struct sock *s)
{
    if (s->prev_fd == s->next_fd) /* a pair's one connection */
        s->prev_fd = -1;
    if (s->next_fd >= 0)
        close(s->next_fd);
    if (s->prev_fd >= 0)
        close(s->prev_fd);
    s->next_fd = s->prev_fd = -1;
    for (unsigned d = 0; d < s->dims; d++) {
        if (s->cube_fd[d] >= 0)
            close(s->cube_fd[d]);
        s->cube_fd[d] = -1;
    }
}

void comm__sock_close_graceful(struct sock *s, double grace_s)
{
    double deadline = accel_now() + grace_s;
    int *fds[2 + SOCK_MAX_DIMS];
    unsigned nfds = 0, open_fds = 0;
    char trash[4096];

    if (s->prev_fd == s->next_fd) /* a pair's one connection, closed once */
        s->prev_fd = -1;
    fds[nfds++] = &s->next_fd;
    fds[nfds++] = &s->prev_fd;
    for (unsigned d = 0; d < s->dims; d++)
        fds[nfds++] = &s->cube_fd[d];
    /* FIN after the last byte this rank sent; then read what the peers
     * still send until they close as well (or the grace ends).  A plain
     * close() with unread bytes in the receive buffer sends a reset, and a
     * reset can destroy data a slower peer has not read yet: it would see
     * ACCEL_EPEER at the end of a job that went well. */
    for (unsigned i = 0; i < nfds; i++)
        if (*fds[i] >= 0) {
            (void)shutdown(*fds[i], SHUT_WR);
            open_fds++;
        }
    while (open_fds > 0) {
        struct pollfd p[2 + SOCK_MAX_DIMS];
        unsigned which[2 + SOCK_MAX_DIMS];
        nfds_t n = 0;

        for (unsigned i = 0; i < nfds; i++) {
            if (*fds[i] < 0)
                continue;
            p[n].fd = *fds[i];
            p[n].events = POLLIN;
            which[n++] = i;
        }
        if (poll(p, n, accel_ms_left(deadline)) <= 0)
            break; /* the grace is over, or poll failed: close as it is */
        for (nfds_t k = 0; k < n; k++) {
            ssize_t got;
            if (p[k].revents == 0)
                continue;
            got = read(*fds[which[k]], trash, sizeof(trash));
            if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
                close(*fds[which[k]]);
                *fds[which[k]] = -1;
                open_fds--;
            }
        }
    }
    comm__sock_close(s);
}

/* How long a finished rank waits for its neighbours to finish too. */
#define CLOSE_GRACE_S 5.0

static void sock_free(struct accel_comm *c)
{
    struct sock *s = c->impl;

    if (s == NULL)
        return;
    if (c->failed)
        comm__sock_close(s); /* the others learn of it at once */
    else
        comm__sock_close_graceful(s, CLOSE_GRACE_S);
    accel_free(s->scratch);
    accel_free(s->stage_in);
    accel_free(s->stage_out);
    accel_free(s->acc);
    comm__sock_shm_free(s);
    comm__sock_host_free(s);
    accel_free(s);
    c->impl = NULL;
}

static enum accel_err sock_split(struct accel_comm *c, int color, int key, struct accel_comm **out,
                                 struct accel_error *err);

static const struct accel_comm_ops sock_ops = {
    .name = "socket",
    .all_reduce = comm__sock_all_reduce,
    .reduce_scatter = comm__sock_reduce_scatter,
    .all_gather = comm__sock_all_gather,
    .broadcast = comm__sock_broadcast,
    .barrier = comm__sock_barrier,
    .sync = sock_sync,
    .split = sock_split,
    .free = sock_free,
};

/* The tuning variables (docs/comm.md, ENVIRONMENT), each checked. */
static enum accel_err read_knobs(const struct accel_comm *c, struct sock *s, size_t opts_chunk,
                                 struct accel_error *err)
{
    char who[64];
    unsigned chunk = (unsigned)opts_chunk, buf, cube_mem;
    enum accel_err rc = ACCEL_OK;

    snprintf(who, sizeof(who), "rank %u of %u: init", c->rank, c->size);
    if (opts_chunk == 0)
        rc = accel_getenv_uint_or(who, "ACCELRUN_SOCKET_CHUNK", SOCK_MIN_CHUNK, SOCK_MAX_CHUNK,
                                  SOCK_DEFAULT_CHUNK, &chunk, err);
    else if (opts_chunk < SOCK_MIN_CHUNK || opts_chunk > SOCK_MAX_CHUNK)
        rc = accel_error_set(err, ACCEL_EINVAL, "%s: chunk of %zu bytes; it must be %u to %u", who,
                             opts_chunk, SOCK_MIN_CHUNK, SOCK_MAX_CHUNK);
    if (rc == ACCEL_OK)
        rc = accel_getenv_uint_or(who, "ACCELRUN_SOCKET_BUF", 0, SOCK_MAX_CHUNK, 0, &buf, err);
    if (rc == ACCEL_OK)
        rc = accel_getenv_uint_or(who, "ACCELRUN_SOCKET_CUBE_MEM", 0, UINT_MAX,
                                  SOCK_DEFAULT_CUBE_MEM, &cube_mem, err);
    if (rc == ACCEL_OK)
        rc = comm__sock_tune(s, who, err); /* what this rank chooses alone */
    if (rc != ACCEL_OK)
        return rc;
    s->chunk_bytes = chunk & ~(size_t)7; /* whole fp32 and 16-bit elements */
    s->sockbuf = (int)buf;
    s->cube_mem = cube_mem;
    /* the hypercube where the size is a power of two, 4 or more */
    if (s->cube_mem > 0 && c->size >= 4 && c->size <= (1u << SOCK_MAX_DIMS) &&
        (c->size & (c->size - 1)) == 0)
        while ((1u << s->dims) < c->size)
            s->dims++;
    return ACCEL_OK;
}

enum accel_err comm__socket_init(struct accel_comm *c, const struct accel_comm_opts *opts,
                                 struct accel_error *err)
{
    struct sock *s;
    enum accel_err rc;
    const char *ifaddr = opts != NULL && opts->ifaddr != NULL ? opts->ifaddr : "";

    if (strlen(ifaddr) >= SOCK_ADDR_MAX)
        return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: init: address too long: %s",
                               c->rank, c->size, ifaddr);
    s = accel_calloc(1, sizeof(*s));
    if (s == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "rank %u of %u: init: out of memory", c->rank,
                               c->size);
    s->next_fd = s->prev_fd = -1;
    for (unsigned d = 0; d < SOCK_MAX_DIMS; d++)
        s->cube_fd[d] = -1;
    s->nonce = opts != NULL ? opts->nonce : 0;
    rc = read_knobs(c, s, opts != NULL ? opts->chunk_bytes : 0, err);
    if (rc != ACCEL_OK) {
        accel_free(s);
        return rc;
    }
    snprintf(s->ifaddr, sizeof(s->ifaddr), "%s", ifaddr);
    comm__sock_host_key(s->host, sizeof(s->host));
    c->ops = &sock_ops;
    c->impl = s;
    if (c->size > 1) {
        rc = comm__sock_connect(c, s, err);
        if (rc == ACCEL_OK)
            rc = comm__sock_host_setup(c, s, err);
        if (rc == ACCEL_OK && s->onehost == NULL)
            rc = comm__sock_shm_setup(c, s, err);
        if (rc != ACCEL_OK) {
            sock_free(c);
            return rc;
        }
    }
    return ACCEL_OK;
}

/* The split: every rank publishes (color, key) under "<prefix>split<g>/",
 * reads everyone's, and the members of its color build a ring of their own
 * under the prefix "<prefix>s<g>.<color>/". */
static enum accel_err sock_split(struct accel_comm *c, int color, int key, struct accel_comm **out,
                                 struct accel_error *err)
{
    struct sock *s = c->impl;
    struct accel_comm_opts o;
    struct accel_comm *child = NULL;
    unsigned g = c->generation++, members = 0, newrank = 0;
    char k[160], v[48];
    enum accel_err rc;

    *out = NULL;
    snprintf(k, sizeof(k), "%ssplit%u/%u", c->prefix, g, c->rank);
    snprintf(v, sizeof(v), "%d %d", color, key);
    rc = accel_store_set(c->store, k, v, strlen(v), err);
    if (rc != ACCEL_OK)
        return rc;
    for (unsigned i = 0; i < c->size; i++) {
        void *val = NULL;
        size_t len = 0;
        int ci, ki;

        snprintf(k, sizeof(k), "%ssplit%u/%u", c->prefix, g, i);
        rc = accel_store_get(c->store, k, &val, &len, err);
        if (rc != ACCEL_OK)
            return rc;
        if (sscanf(val, "%d %d", &ci, &ki) != 2) {
            accel_free(val);
            return accel_error_set(err, ACCEL_EPEER, "rank %u of %u: split: bad entry of rank %u",
                                   c->rank, c->size, i);
        }
        accel_free(val);
        if (color < 0 || ci != color)
            continue;
        members++;
        if (ki < key || (ki == key && i < c->rank))
            newrank++;
    }
    if (color < 0)
        return ACCEL_OK;
    child = accel_calloc(1, sizeof(*child));
    if (child == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "rank %u of %u: split: out of memory", c->rank,
                               c->size);
    if (snprintf(child->prefix, sizeof(child->prefix), "%ss%u.%d/", c->prefix, g, color) >=
        (int)sizeof(child->prefix)) {
        accel_free(child);
        return accel_error_set(err, ACCEL_ETOOBIG,
                               "rank %u of %u: split: communicators nested too deep (%s)", c->rank,
                               c->size, c->prefix);
    }
    child->rank = newrank;
    child->size = members;
    child->timeout_s = c->timeout_s;
    child->store = c->store;
    memset(&o, 0, sizeof(o));
    o.ifaddr = s->ifaddr;
    o.chunk_bytes = s->chunk_bytes;
    o.nonce = s->nonce;
    rc = comm__socket_init(child, &o, err);
    if (rc != ACCEL_OK) {
        accel_free(child);
        return rc;
    }
    *out = child;
    return ACCEL_OK;
}
