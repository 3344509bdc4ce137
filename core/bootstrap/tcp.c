/*
 * tcp.c: the client of the TCP rendezvous store.  One non-blocking socket
 * per handle, driven with poll() so that every step has a deadline: connect
 * is retried with exponential backoff and jitter until the handle's
 * timeout_s (the server may start after its clients), and each request waits
 * at most that long.  A blocking request (get, wait, barrier) carries its
 * time budget, so the server itself answers ACCEL_ETIMEDOUT at the deadline
 * and the connection stays usable; only a server that says nothing at all
 * for a grace period longer costs the connection.
 *
 * Every message starts with "rank R of W" and names rank 0, the address and
 * the time waited, as "rank 3 of 8: no answer from rank 0 at n1:29517 within
 * 60 s".
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/clock.h"
#include "accel/sock.h"
#include "store_int.h"

#define BACKOFF_FIRST_S 0.01 /* first pause between connection attempts */
#define BACKOFF_MAX_S 1.0    /* longest pause: a late server is noticed within a second */
#define ATTEMPT_MAX_S 10.0   /* one connect() waits at most this (a dropped SYN is retried) */
#define GRACE_S 2.0          /* beyond a blocking request's budget, for the server's answer */

/* Gives the connection up: later calls fail with ACCEL_EPEER and `why`. */
static void lose(struct accel_store *s, const char *why)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    snprintf(s->lost, sizeof(s->lost), "%.250s", why);
}

/* Reads exactly `len` bytes by `deadline`: 0, or -1 with errno (ETIMEDOUT;
 * ECONNRESET for a peer that closed).  `poll_first`: a reply just asked for
 * is never there yet, so do not try a read that would fail. */
static int read_all(int fd, void *buf, size_t len, double deadline, bool poll_first)
{
    uint8_t *p = buf;

    while (len > 0) {
        ssize_t n = -1;
        errno = EAGAIN;
        if (!poll_first)
            n = recv(fd, p, len, MSG_DONTWAIT);
        poll_first = false;
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, accel_ms_left(deadline));
        if (r == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        if (r < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

struct reply {
    struct bootstrap__frame f;
    uint8_t *val; /* the value or the error message, NUL-terminated; accel_free */
};

/* Sends one request and reads its reply.  On a transport failure the
 * connection is lost and the error names `what` and the time waited. */
static enum accel_err roundtrip(struct accel_store *s, const char *what, unsigned op,
                                const char *key, const void *val, size_t vlen, int64_t arg,
                                double budget, struct reply *r, struct accel_error *err)
{
    size_t klen = key ? strlen(key) : 0;
    double start = accel_now();
    double deadline =
        start + budget + (op == STORE_GET || op == STORE_WAIT || op == STORE_BARRIER ? GRACE_S : 0);
    struct bootstrap__frame f = {0};
    uint8_t hdr[STORE_HDR];
    struct accel_error derr;
    char why[256];

    r->val = NULL;
    if (s->fd < 0)
        return accel_error_set(
            err, ACCEL_EPEER, STORE_WHO ": %s: the connection to rank 0 at %s was lost earlier: %s",
            s->rank, s->world, what, s->where, s->lost);
    f.op = (uint8_t)op;
    f.nonce = s->nonce;
    f.klen = (uint32_t)klen;
    f.vlen = (uint32_t)vlen;
    f.arg = arg;
    f.timeout_ms = budget <= 0                   ? 0
                   : budget * 1000 >= UINT32_MAX ? UINT32_MAX
                                                 : (uint32_t)(budget * 1000);
    bootstrap__frame_encode(hdr, &f);
    if (accel_send_all(s->fd, hdr, STORE_HDR, deadline) != 0 ||
        (klen > 0 && accel_send_all(s->fd, key, klen, deadline) != 0) ||
        (vlen > 0 && accel_send_all(s->fd, val, vlen, deadline) != 0) ||
        read_all(s->fd, hdr, STORE_HDR, deadline, true) != 0)
        goto transport;
    if (bootstrap__frame_decode(hdr, true, &r->f, &derr) != ACCEL_OK) {
        snprintf(why, sizeof(why), "a bad reply: %.200s", derr.msg);
        lose(s, why);
        return accel_error_set(err, ACCEL_EPEER, STORE_WHO ": %s: rank 0 at %s sent %s", s->rank,
                               s->world, what, s->where, why);
    }
    r->val = accel_malloc((size_t)r->f.vlen + 1);
    if (r->val == NULL) {
        lose(s, "out of memory reading a reply");
        return accel_error_set(err, ACCEL_ENOMEM, STORE_WHO ": %s: out of memory for %u bytes",
                               s->rank, s->world, what, r->f.vlen);
    }
    if (r->f.vlen > 0 && read_all(s->fd, r->val, r->f.vlen, deadline, false) != 0) {
        accel_free(r->val);
        r->val = NULL;
        goto transport;
    }
    r->val[r->f.vlen] = '\0';
    /* A hello never waits, so ACCEL_ETIMEDOUT in its place is the server's
     * own deadline (a hello or a request too late), not an answer: the
     * server has closed, and a connect retries as for a closed connection. */
    bool late =
        r->f.status == ACCEL_ETIMEDOUT && (op == STORE_HELLO || (r->f.op & ~STORE_REPLY) != op);
    if (r->f.status == ACCEL_ENONCE || late ||
        (r->f.status != ACCEL_OK && r->f.status != ACCEL_ETIMEDOUT &&
         (r->f.op & ~STORE_REPLY) != op)) {
        /* the server closes after such a refusal */
        enum accel_err code = late ? ACCEL_EPEER : (enum accel_err)r->f.status;
        snprintf(why, sizeof(why), "refused: %s", (char *)r->val);
        lose(s, why);
        accel_error_set(err, code, STORE_WHO ": %s: refused by rank 0 at %s: %s", s->rank, s->world,
                        what, s->where, (char *)r->val);
        accel_free(r->val);
        r->val = NULL;
        return code;
    }
    if ((r->f.op & ~STORE_REPLY) != op) {
        lose(s, "a reply out of order");
        accel_free(r->val);
        r->val = NULL;
        return accel_error_set(err, ACCEL_EPEER,
                               STORE_WHO ": %s: rank 0 at %s answered out of order", s->rank,
                               s->world, what, s->where);
    }
    if (r->f.status != ACCEL_OK && r->f.status != ACCEL_ETIMEDOUT) {
        enum accel_err code = (enum accel_err)r->f.status;
        accel_error_set(err, code, STORE_WHO ": %s: rank 0 at %s: %s", s->rank, s->world, what,
                        s->where, (char *)r->val);
        if (code == ACCEL_ETOOBIG || code == ACCEL_EPARSE || code == ACCEL_EUNSUPPORTED)
            lose(s, err ? err->msg : "refused");
        accel_free(r->val);
        r->val = NULL;
        return code;
    }
    return ACCEL_OK; /* ETIMEDOUT is the caller's to word */
transport:
    if (errno == ETIMEDOUT) {
        snprintf(why, sizeof(why), "no answer within %g s", accel_now() - start);
        lose(s, why);
        return accel_error_set(err, ACCEL_ETIMEDOUT,
                               STORE_WHO ": %s: no answer from rank 0 at %s within %.3g s", s->rank,
                               s->world, what, s->where, accel_now() - start);
    }
    snprintf(why, sizeof(why), "%s",
             errno == ECONNRESET ? "it closed the connection" : strerror(errno));
    lose(s, why);
    return accel_error_set(err, ACCEL_EPEER, STORE_WHO ": %s: rank 0 at %s: %s (after %.3g s)",
                           s->rank, s->world, what, s->where, why, accel_now() - start);
}

/* ---------------------------------------------------------------- connect */

/* One attempt at a TCP connection by `deadline`: the socket, or -1 with
 * `why` filled. */
static int try_connect(const struct accel_store *s, double deadline, char *why, size_t whylen)
{
    struct addrinfo hints = {0}, *res = NULL, *ai;
    char service[16];
    int gai, fd = -1, one = 1;

    snprintf(service, sizeof(service), "%u", s->port);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    gai = getaddrinfo(s->host, service, &hints, &res);
    if (gai != 0) { /* the name may not resolve yet (a pod that is starting) */
        snprintf(why, whylen, "couldn't resolve %.100s: %.100s", s->host, gai_strerror(gai));
        return -1;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        double attempt = accel_now() + ATTEMPT_MAX_S;
        struct pollfd pfd;
        int soerr = 0;
        socklen_t sl = sizeof(soerr);

        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(why, whylen, "socket: %s", strerror(errno));
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        if (errno != EINPROGRESS) {
            snprintf(why, whylen, "%s", strerror(errno));
            close(fd);
            fd = -1;
            continue;
        }
        pfd.fd = fd;
        pfd.events = POLLOUT;
        if (poll(&pfd, 1, accel_ms_left(attempt < deadline ? attempt : deadline)) == 1 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
            break;
        snprintf(why, whylen, "%s", soerr ? strerror(soerr) : "connect timed out");
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* A pseudo-random factor in [0.5, 1.5) so that thousands of clients do not
 * retry in step. */
static double jitter(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return 0.5 + (double)(*state >> 11) / 9007199254740992.0;
}

static void pause_s(double s)
{
    struct timespec ts;
    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void tcp_close(struct accel_store *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

enum accel_err accel_store_connect(struct accel_store **out, const struct accel_store_opts *opts,
                                   struct accel_error *err)
{
    struct accel_store *s;
    double start, deadline, backoff = BACKOFF_FIRST_S;
    uint64_t rng;
    char why[256] = "no attempt";
    enum accel_err rc;

    *out = NULL;
    if (opts == NULL || opts->host == NULL || opts->host[0] == '\0' || opts->port == 0 ||
        opts->port > 65535)
        return accel_error_set(err, ACCEL_EINVAL,
                               "store: connect needs a host and a port 1..65535");
    if (strlen(opts->host) >= sizeof(s->host))
        return accel_error_set(err, ACCEL_EINVAL, "store: host name '%.64s...' is too long",
                               opts->host);
    s = accel_calloc(1, sizeof(*s));
    if (s == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "store: out of memory");
    s->ops = &bootstrap__tcp_ops;
    s->fd = -1;
    s->nonce = opts->nonce;
    s->rank = opts->rank;
    s->world = opts->world;
    s->timeout_s = opts->timeout_s > 0 ? opts->timeout_s : ACCEL_STORE_DEFAULT_TIMEOUT_S;
    s->port = opts->port;
    snprintf(s->host, sizeof(s->host), "%s", opts->host);
    snprintf(s->where, sizeof(s->where), strchr(s->host, ':') ? "[%s]:%u" : "%s:%u", s->host,
             s->port);
    snprintf(s->lost, sizeof(s->lost), "not connected");
    start = accel_now();
    deadline = start + s->timeout_s;
    rng = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)(start * 1e9) ^
          ((uint64_t)s->rank << 32) ^ (uint64_t)(uintptr_t)s;
    rng |= 1;
    for (;;) {
        struct reply r;
        s->fd = try_connect(s, deadline, why, sizeof(why));
        if (s->fd >= 0) {
            /* The hello checks the nonce at once, so a foreign server (or a
             * server of another job) is refused here, not at the first get. */
            rc = roundtrip(s, "connect", STORE_HELLO, NULL, NULL, 0,
                           (int64_t)((uint64_t)s->rank << 32 | s->world), deadline - accel_now(),
                           &r, err);
            accel_free(r.val);
            if (rc == ACCEL_OK) {
                *out = s;
                return ACCEL_OK;
            }
            if (rc == ACCEL_ETIMEDOUT) {
                /* roundtrip timed only the hello; say how long the connect took */
                rc = accel_error_set(err, ACCEL_ETIMEDOUT,
                                     STORE_WHO ": connect: no answer from rank 0 at %s within "
                                               "%.3g s (connected, but the hello went unanswered)",
                                     s->rank, s->world, s->where, accel_now() - start);
                goto fail;
            }
            if (rc != ACCEL_EPEER)
                goto fail;
            /* closed before answering (a server still starting, or full): retry */
            snprintf(why, sizeof(why), "%s", s->lost);
        }
        if (accel_now() >= deadline)
            break;
        double left = deadline - accel_now();
        double p = backoff * jitter(&rng);
        pause_s(p < left ? p : left);
        if (accel_now() >= deadline)
            break; /* not one more attempt with no time left for its hello */
        backoff = backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : backoff * 2;
    }
    rc = accel_error_set(err, ACCEL_ETIMEDOUT,
                         STORE_WHO ": no answer from rank 0 at %s within %g s (last attempt: %s)",
                         s->rank, s->world, s->where, s->timeout_s, why);
fail:
    tcp_close(s);
    accel_free(s);
    return rc;
}

/* ---------------------------------------------------------------- requests */

static enum accel_err tcp_set(struct accel_store *s, const char *key, const void *val, size_t len,
                              struct accel_error *err)
{
    struct reply r;
    enum accel_err rc;
    char what[300];

    snprintf(what, sizeof(what), "set '%s'", key);
    rc = roundtrip(s, what, STORE_SET, key, val, len, 0, s->timeout_s, &r, err);
    accel_free(r.val);
    return rc;
}

static enum accel_err tcp_get(struct accel_store *s, const char *key, void **val, size_t *len,
                              struct accel_error *err)
{
    struct reply r;
    enum accel_err rc;
    char what[300];

    snprintf(what, sizeof(what), "get '%s'", key);
    rc = roundtrip(s, what, STORE_GET, key, NULL, 0, 0, s->timeout_s, &r, err);
    if (rc != ACCEL_OK)
        return rc;
    if (r.f.status == ACCEL_ETIMEDOUT) {
        accel_free(r.val);
        return accel_error_set(err, ACCEL_ETIMEDOUT,
                               STORE_WHO ": %s: not set at rank 0 (%s) within %g s", s->rank,
                               s->world, what, s->where, s->timeout_s);
    }
    *val = r.val;
    *len = r.f.vlen;
    return ACCEL_OK;
}

static enum accel_err tcp_wait(struct accel_store *s, const char *const *keys, size_t n,
                               struct accel_error *err)
{
    double deadline = accel_now() + s->timeout_s;

    /* One key at a time, each with what is left of the one deadline. */
    for (size_t i = 0; i < n; i++) {
        struct reply r;
        enum accel_err rc;
        char what[300];
        double left = deadline - accel_now();

        snprintf(what, sizeof(what), "wait '%s'", keys[i]);
        rc = roundtrip(s, what, STORE_WAIT, keys[i], NULL, 0, 0, left > 0 ? left : 0, &r, err);
        accel_free(r.val);
        if (rc != ACCEL_OK)
            return rc;
        if (r.f.status == ACCEL_ETIMEDOUT)
            return accel_error_set(err, ACCEL_ETIMEDOUT,
                                   STORE_WHO ": %s: not set at rank 0 (%s) within %g s (%zu of "
                                             "%zu keys were there)",
                                   s->rank, s->world, what, s->where, s->timeout_s, i, n);
    }
    return ACCEL_OK;
}

static enum accel_err tcp_add(struct accel_store *s, const char *key, int64_t delta,
                              int64_t *result, struct accel_error *err)
{
    struct reply r;
    enum accel_err rc;
    char what[300];

    snprintf(what, sizeof(what), "add '%s'", key);
    rc = roundtrip(s, what, STORE_ADD, key, NULL, 0, delta, s->timeout_s, &r, err);
    accel_free(r.val);
    if (rc == ACCEL_OK && result != NULL)
        *result = r.f.arg;
    return rc;
}

static enum accel_err tcp_barrier(struct accel_store *s, const char *name, unsigned n,
                                  struct accel_error *err)
{
    struct reply r;
    enum accel_err rc;
    char what[300];

    snprintf(what, sizeof(what), "barrier '%s'", name);
    if (n == 0 || n > ACCEL_STORE_MAX_CLIENTS)
        return accel_error_set(err, ACCEL_EINVAL, STORE_WHO ": %s: %u clients is not 1..%d",
                               s->rank, s->world, what, n, ACCEL_STORE_MAX_CLIENTS);
    rc = roundtrip(s, what, STORE_BARRIER, name, NULL, 0, n, s->timeout_s, &r, err);
    accel_free(r.val);
    if (rc == ACCEL_OK && r.f.status == ACCEL_ETIMEDOUT)
        return accel_error_set(err, ACCEL_ETIMEDOUT,
                               STORE_WHO ": %s: %" PRId64
                                         " of %u arrived at rank 0 (%s) within %g s",
                               s->rank, s->world, what, r.f.arg, n, s->where, s->timeout_s);
    return rc;
}

const struct bootstrap__ops bootstrap__tcp_ops = {
    .set = tcp_set,
    .get = tcp_get,
    .wait = tcp_wait,
    .add = tcp_add,
    .barrier = tcp_barrier,
    .close = tcp_close,
};
