/*
 * socket_conn.c: sets up the connections of the socket backend.
 *
 * Each rank listens on an ephemeral TCP port of one address (opts->ifaddr,
 * else the local address the kernel would use to reach MASTER_ADDR, else the
 * loopback), publishes "host:port" and its host key (socket_shm.c) under
 * the communicator's prefix in the store and reads its peers' addresses.  Its links: channel 0, the
 * ring (it connects to the next rank and accepts the previous one), and where the hypercube is used
 * (s->dims > 0), channel 1 + d for each dimension d, one connection with rank ^ (1 << d) that the
 * lower of the two ranks opens. The connecting side opens with a hello (job nonce, communicator,
 * channel, ranks, size, hypercube limit); the accepting side answers with a verdict and keeps only
 * the links it expects: a stranger (another job, another communicator, a wrong rank) is refused and
 * the wait goes on.  Every rank sends its hellos before it waits for anything, so the set-up cannot
 * deadlock, and every wait is a poll() bounded by the deadline.  This file
 * does not move collective data (socket_pump.c does).
 */
#define _GNU_SOURCE /* accept4, POLLRDHUP */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/log.h"
#include "accel/sock.h"
#include "socket_int.h"

#define HELLO_MAGIC 0x41435248u /* "ACRH" */
#define REPLY_MAGIC 0x4143524bu /* "ACRK" */
#define HELLO_VERSION 2u
#define MAX_PENDING 32 /* connections whose hello is read at once */
#define MAX_LINKS (1 + SOCK_MAX_DIMS)

struct hello {
    uint32_t magic, version;
    uint64_t nonce, comm;
    uint32_t from, to, size, channel; /* 0 the ring, 1 + d the cube's dimension d */
    uint64_t cube_mem;
};

enum verdict { V_OK, V_NONCE, V_COMM, V_RANK, V_PROTO, V_CUBE };

struct reply {
    uint32_t magic, verdict;
};

/* FNV-1a 64 of the prefix: names the communicator in the hello. */
static uint64_t comm_id(const char *prefix)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (const unsigned char *p = (const unsigned char *)prefix; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

/* Non-blocking, no Nagle (a ring step's small last segment must not wait for
 * an acknowledgement), and socket buffers large enough to keep a chunk in
 * flight.  The buffer sizes are a request; the kernel caps them. */
static void tune(const struct sock *s, int fd)
{
    int one = 1, buf = s->sockbuf;

    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (buf > 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void format_addr(const struct sockaddr *sa, socklen_t len, char *out, size_t size)
{
    char host[NI_MAXHOST], port[NI_MAXSERV];

    if (getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, size, "?");
        return;
    }
    snprintf(out, size, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

/* The address to listen on: opts' ifaddr, else the source address of a route
 * to MASTER_ADDR (a UDP connect sends nothing), else the IPv4 loopback. */
static enum accel_err local_addr(struct accel_comm *c, const struct sock *s,
                                 struct sockaddr_storage *ss, socklen_t *len,
                                 struct accel_error *err)
{
    struct addrinfo hints, *ai = NULL;
    const char *master = getenv("MASTER_ADDR");
    int rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    if (s->ifaddr[0] != '\0') {
        hints.ai_socktype = SOCK_STREAM;
        rc = getaddrinfo(s->ifaddr, NULL, &hints, &ai);
        if (rc != 0 || ai == NULL)
            return accel_error_set(err, ACCEL_EINVAL, "rank %u of %u: init: bad address %s: %s",
                                   c->rank, c->size, s->ifaddr, gai_strerror(rc));
        memcpy(ss, ai->ai_addr, ai->ai_addrlen);
        *len = ai->ai_addrlen;
        freeaddrinfo(ai);
        return ACCEL_OK;
    }
    if (master != NULL && master[0] != '\0') {
        hints.ai_socktype = SOCK_DGRAM;
        if (getaddrinfo(master, "9", &hints, &ai) == 0 && ai != NULL) {
            int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            *len = sizeof(*ss);
            if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
                getsockname(fd, (struct sockaddr *)ss, len) == 0) {
                close(fd);
                freeaddrinfo(ai);
                return ACCEL_OK;
            }
            if (fd >= 0)
                close(fd);
            freeaddrinfo(ai);
        }
    }
    {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        memset(ss, 0, sizeof(*ss));
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        *len = sizeof(*in);
    }
    return ACCEL_OK;
}

static enum accel_err listen_on(struct accel_comm *c, struct sock *s, int *out,
                                struct accel_error *err)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    enum accel_err rc;
    int fd;

    rc = local_addr(c, s, &ss, &len, err);
    if (rc != ACCEL_OK)
        return rc;
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = 0;
    else if (ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&ss)->sin6_port = 0;
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return accel_error_sys(err, ACCEL_EIO, "rank %u of %u: init: couldn't open a socket",
                               c->rank, c->size);
    tune(s, fd); /* accepted connections inherit the buffer sizes */
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, MAX_PENDING) != 0) {
        char a[SOCK_ADDR_MAX];
        format_addr((struct sockaddr *)&ss, len, a, sizeof(a));
        rc = accel_error_sys(err, ACCEL_EIO, "rank %u of %u: init: couldn't listen on %s", c->rank,
                             c->size, a);
        close(fd);
        return rc;
    }
    len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        rc = accel_error_sys(err, ACCEL_EIO,
                             "rank %u of %u: init: couldn't read the address it listens on",
                             c->rank, c->size);
        close(fd);
        return rc;
    }
    format_addr((struct sockaddr *)&ss, len, s->addr, sizeof(s->addr));
    *out = fd;
    return ACCEL_OK;
}

/* Reads the published address of rank r into out. */
/* Rank r's "address host-key", as it published them: the address into out,
 * and *same: whether its host key is ours. */
static enum accel_err peer_addr(struct accel_comm *c, struct sock *s, unsigned r, char *out,
                                size_t size, bool *same, struct accel_error *err)
{
    char key[160];
    void *val = NULL;
    size_t len = 0, alen;
    const char *sp;
    enum accel_err rc;

    snprintf(key, sizeof(key), "%ssock/%u", c->prefix, r);
    rc = accel_store_get(c->store, key, &val, &len, err);
    if (rc == ACCEL_ETIMEDOUT && err != NULL) {
        char why[sizeof(err->msg)];
        snprintf(why, sizeof(why), "%s", err->msg);
        return accel_error_set(err, rc, "rank %u of %u: init: rank %u never joined (%s)", c->rank,
                               c->size, r, why);
    }
    if (rc != ACCEL_OK)
        return rc;
    sp = memchr(val, ' ', len);
    alen = sp != NULL ? (size_t)(sp - (const char *)val) : len;
    if (alen == 0 || alen >= size) {
        accel_free(val);
        return accel_error_set(err, ACCEL_EPEER, "rank %u of %u: init: bad address for rank %u",
                               c->rank, c->size, r);
    }
    memcpy(out, val, alen);
    out[alen] = '\0';
    *same = sp != NULL && strcmp(sp + 1, s->host) == 0;
    accel_free(val);
    return ACCEL_OK;
}

/* Starts a non-blocking connect to "host:port" or "[v6]:port". */
static enum accel_err start_connect(struct accel_comm *c, const char *addr, int *out,
                                    struct accel_error *err)
{
    char host[SOCK_ADDR_MAX];
    const char *colon = strrchr(addr, ':');
    struct addrinfo hints, *ai = NULL;
    size_t hl;
    int fd, rc;

    if (colon == NULL)
        return accel_error_set(err, ACCEL_EPEER, "rank %u of %u: init: bad address %s", c->rank,
                               c->size, addr);
    hl = (size_t)(colon - addr);
    if (hl >= 2 && addr[0] == '[' && addr[hl - 1] == ']') {
        memcpy(host, addr + 1, hl - 2);
        host[hl - 2] = '\0';
    } else {
        memcpy(host, addr, hl);
        host[hl] = '\0';
    }
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc != 0 || ai == NULL)
        return accel_error_set(err, ACCEL_EPEER, "rank %u of %u: init: bad address %s: %s", c->rank,
                               c->size, addr, gai_strerror(rc));
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(ai);
        return accel_error_sys(err, ACCEL_EIO, "rank %u of %u: init: couldn't open a socket",
                               c->rank, c->size);
    }
    tune(c->impl, fd);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
        enum accel_err e =
            accel_error_sys(err, ACCEL_EPEER, "rank %u of %u: init: couldn't connect to %s",
                            c->rank, c->size, addr);
        freeaddrinfo(ai);
        close(fd);
        return e;
    }
    freeaddrinfo(ai);
    *out = fd;
    return ACCEL_OK;
}

/* A connection accepted, its hello being read. */
struct pending {
    int fd;
    size_t got;
    struct hello h;
};

/* A connection this rank opens: hello out, verdict in. */
struct link {
    unsigned peer, channel;
    const char *addr;
    int fd;
    bool hello_sent, answered; /* answered: the verdict is in (ok or not) */
    size_t reply_got;
    struct reply rep;
};

static const char *verdict_text(uint32_t v)
{
    switch (v) {
    case V_NONCE:
        return "the job nonce differs (another job or step)";
    case V_COMM:
        return "it belongs to another communicator";
    case V_RANK:
        return "wrong rank or size";
    case V_CUBE:
        return "ACCELRUN_SOCKET_CUBE_MEM differs between the ranks";
    default:
        return "bad hello";
    }
}

/* The partner of dimension d. */
static unsigned partner(const struct accel_comm *c, unsigned d)
{
    return c->rank ^ (1u << d);
}

/* Where an accepted link of `channel` from rank `from` goes; NULL when this
 * rank expects no such link. */
static int *slot_of(const struct accel_comm *c, struct sock *s, uint32_t channel, uint32_t from)
{
    if (channel == 0)
        return from == s->prev && !(s->pair && c->rank == 0) ? &s->prev_fd : NULL;
    if (channel - 1 < s->dims && from == partner(c, channel - 1) && from < c->rank)
        return &s->cube_fd[channel - 1];
    return NULL;
}

/* Checks a stranger's hello; returns the verdict. */
static enum verdict judge(const struct accel_comm *c, struct sock *s, const struct hello *h)
{
    int *slot;

    if (h->magic != HELLO_MAGIC || h->version != HELLO_VERSION)
        return V_PROTO;
    if (h->nonce != s->nonce)
        return V_NONCE;
    if (h->comm != comm_id(c->prefix))
        return V_COMM;
    if (h->to != c->rank || h->size != c->size)
        return V_RANK;
    if (h->cube_mem != s->cube_mem)
        return V_CUBE;
    slot = slot_of(c, s, h->channel, h->from);
    if (slot == NULL || *slot >= 0)
        return V_RANK;
    return V_OK;
}

/* Reads the addresses of every peer this rank links with. */
static enum accel_err read_addrs(struct accel_comm *c, struct sock *s, struct accel_error *err)
{
    enum accel_err rc =
        peer_addr(c, s, s->next, s->next_addr, sizeof(s->next_addr), &s->next_same, err);

    if (rc == ACCEL_OK)
        rc = peer_addr(c, s, s->prev, s->prev_addr, sizeof(s->prev_addr), &s->prev_same, err);
    for (unsigned d = 0; rc == ACCEL_OK && d < s->dims; d++)
        rc = peer_addr(c, s, partner(c, d), s->cube_addr[d], sizeof(s->cube_addr[d]),
                       &s->cube_same[d], err);
    return rc;
}

/* The links this rank opens: the ring's to the next rank, then one per
 * dimension where this rank is the lower one. */
static size_t plan_links(const struct accel_comm *c, struct sock *s, struct link *out)
{
    size_t n = 0;

    out[n++] = (struct link){.peer = s->next, .channel = 0, .addr = s->next_addr, .fd = -1};
    for (unsigned d = 0; d < s->dims; d++)
        if (c->rank < partner(c, d))
            out[n++] = (struct link){
                .peer = partner(c, d), .channel = 1 + d, .addr = s->cube_addr[d], .fd = -1};
    return n;
}

/* The first expected link that has not come in, as its fd slot; with
 * `unjudged_only`, only those whose rank has sent no hello at all. */
static int *missing_in(const struct accel_comm *c, struct sock *s, const bool *judged,
                       bool unjudged_only, unsigned *peer, const char **addr)
{
    if (s->prev_fd < 0 && !(s->pair && c->rank == 0) && !(unjudged_only && judged[0])) {
        *peer = s->prev;
        *addr = s->prev_addr;
        return &s->prev_fd;
    }
    for (unsigned d = 0; d < s->dims; d++)
        if (partner(c, d) < c->rank && s->cube_fd[d] < 0 && !(unjudged_only && judged[1 + d])) {
            *peer = partner(c, d);
            *addr = s->cube_addr[d];
            return &s->cube_fd[d];
        }
    return NULL;
}

/* Our side of link l after poll: the hello out, then the verdict in.
 * Returns ACCEL_OK, or an error (with *refused set for a verdict). */
static enum accel_err link_step(struct accel_comm *c, struct sock *s, struct link *l, short revents,
                                double deadline, bool *refused, struct accel_error *err)
{
    if (!l->hello_sent && (revents & (POLLOUT | POLLERR | POLLHUP))) {
        struct hello mine;
        int e = 0;
        socklen_t el = sizeof(e);

        memset(&mine, 0, sizeof(mine));
        mine.magic = HELLO_MAGIC;
        mine.version = HELLO_VERSION;
        mine.nonce = s->nonce;
        mine.comm = comm_id(c->prefix);
        mine.from = c->rank;
        mine.to = l->peer;
        mine.size = c->size;
        mine.channel = l->channel;
        mine.cube_mem = s->cube_mem;
        (void)getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &e, &el);
        if (e != 0 || accel_send_all(l->fd, &mine, sizeof(mine), deadline) != 0) {
            if (e != 0)
                errno = e;
            return accel_error_sys(err, ACCEL_EPEER,
                                   "rank %u of %u: init: couldn't reach rank %u at %s", c->rank,
                                   c->size, l->peer, l->addr);
        }
        l->hello_sent = true;
    } else if (l->hello_sent && (revents & (POLLIN | POLLERR | POLLHUP))) {
        ssize_t n = recv(l->fd, (char *)&l->rep + l->reply_got, sizeof(l->rep) - l->reply_got, 0);
        if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) {
            if (n == 0)
                errno = ECONNRESET;
            return accel_error_sys(err, ACCEL_EPEER,
                                   "rank %u of %u: init: couldn't read the answer of rank %u (%s)",
                                   c->rank, c->size, l->peer, l->addr);
        }
        if (n > 0 && (l->reply_got += (size_t)n) == sizeof(l->rep)) {
            l->answered = true;
            if (l->rep.magic != REPLY_MAGIC || l->rep.verdict != V_OK) {
                *refused = true;
                return accel_error_set(
                    err, l->rep.verdict == V_NONCE ? ACCEL_ENONCE : ACCEL_EPEER,
                    "rank %u of %u: init: refused by rank %u (%s): %s (our nonce %016llx)", c->rank,
                    c->size, l->peer, l->addr, verdict_text(l->rep.verdict),
                    (unsigned long long)s->nonce);
            }
        }
    }
    return ACCEL_OK;
}

/* An accepted connection's hello, once whole: judged, answered, and kept in
 * its slot or closed.  Returns false while it is still incomplete. */
static void pending_step(struct accel_comm *c, struct sock *s, struct pending *q, bool *judged,
                         unsigned *refused, double deadline)
{
    enum verdict v;
    struct reply r;
    ssize_t n;

    n = recv(q->fd, (char *)&q->h + q->got, sizeof(q->h) - q->got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        close(q->fd);
        q->fd = -1;
        return;
    }
    if ((q->got += (size_t)n) < sizeof(q->h))
        return;
    v = judge(c, s, &q->h);
    if (q->h.channel < MAX_LINKS && slot_of(c, s, q->h.channel, q->h.from) != NULL)
        judged[q->h.channel] = true;
    r.magic = REPLY_MAGIC;
    r.verdict = v;
    if (accel_send_all(q->fd, &r, sizeof(r), deadline) == 0 && v == V_OK) {
        *slot_of(c, s, q->h.channel, q->h.from) = q->fd;
        tune(s, q->fd);
    } else {
        (*refused)++;
        accel_log(ACCEL_LOG_WARN, "rank %u of %u: init: refused a connection claiming rank %u: %s",
                  c->rank, c->size, q->h.from, verdict_text(v));
        close(q->fd);
    }
    q->fd = -1;
}

/* The handshake of comm__sock_connect: the links this rank opens, the
 * connections it has accepted and not yet judged, and the refusals so far. */
struct handshake {
    double deadline;
    struct pending pend[MAX_PENDING];
    size_t npend;
    struct link out[MAX_LINKS];
    size_t nout;
    bool judged[MAX_LINKS]; /* the expected links in, by slot */
    int lfd;
    enum accel_err refused_rc; /* the first refusal of one of our links */
    unsigned refused;          /* strangers refused */
};

/* Every link out answered and every link in judged (a rank that was refused
 * waits only for the links in it must still answer). */
static bool hs_done(struct accel_comm *c, struct sock *s, struct handshake *h)
{
    unsigned who = 0;
    const char *addr = "";

    for (size_t i = 0; i < h->nout; i++)
        if (!h->out[i].answered)
            return false;
    return missing_in(c, s, h->judged, h->refused_rc != ACCEL_OK, &who, &addr) == NULL;
}

/* The deadline passed: names the rank that did not connect, or did not
 * answer. */
static enum accel_err hs_timeout(struct accel_comm *c, struct sock *s, struct handshake *h,
                                 struct accel_error *err)
{
    unsigned who = 0;
    const char *addr = "";

    if (missing_in(c, s, h->judged, false, &who, &addr) != NULL)
        return accel_error_set(err, ACCEL_ETIMEDOUT,
                               "rank %u of %u: init: rank %u (%s) did not connect within "
                               "%g s (%u strangers refused)",
                               c->rank, c->size, who, addr, c->timeout_s, h->refused);
    for (size_t i = 0; i < h->nout; i++)
        if (!h->out[i].answered) {
            who = h->out[i].peer;
            addr = h->out[i].addr;
            break;
        }
    return accel_error_set(err, ACCEL_ETIMEDOUT,
                           "rank %u of %u: init: rank %u (%s) did not answer within %g s", c->rank,
                           c->size, who, addr, c->timeout_s);
}

/* Our links, after a poll: hello out, verdict in.  A refusal is kept (the
 * first one's error in err) and the handshake goes on; any other failure
 * ends it. */
static enum accel_err hs_links(struct accel_comm *c, struct sock *s, struct handshake *h,
                               const struct pollfd *pfd, struct accel_error *err)
{
    for (size_t i = 0; i < h->nout; i++) {
        bool was_refused = false;
        struct accel_error lerr;
        enum accel_err rc;

        if (h->out[i].answered || pfd[i].revents == 0)
            continue;
        rc = link_step(c, s, &h->out[i], pfd[i].revents, h->deadline, &was_refused, &lerr);
        if (rc != ACCEL_OK && !was_refused) {
            if (err != NULL)
                *err = lerr;
            return rc;
        }
        if (was_refused && h->refused_rc == ACCEL_OK) {
            h->refused_rc = rc;
            if (err != NULL)
                *err = lerr;
        }
    }
    return ACCEL_OK;
}

/* The connections in, after a poll (pfd: the listener, then the pending
 * ones): the hellos read and judged, a new connection accepted (its hello is
 * read from the next round on), the finished ones dropped. */
static void hs_accept(struct accel_comm *c, struct sock *s, struct handshake *h,
                      const struct pollfd *pfd, size_t npolled)
{
    size_t k = 0;

    for (size_t i = 0; i < npolled; i++)
        if (h->pend[i].fd >= 0 && (pfd[1 + i].revents & (POLLIN | POLLERR | POLLHUP)))
            pending_step(c, s, &h->pend[i], h->judged, &h->refused, h->deadline);
    if (pfd[0].revents & POLLIN) {
        int fd = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0)
            h->pend[h->npend++] = (struct pending){fd, 0, {0}};
    }
    for (size_t i = 0; i < h->npend; i++)
        if (h->pend[i].fd >= 0)
            h->pend[k++] = h->pend[i];
    h->npend = k;
}

/* One round: a poll over our links, the listener and the pending
 * connections, until the deadline. */
static enum accel_err hs_round(struct accel_comm *c, struct sock *s, struct handshake *h,
                               struct accel_error *err)
{
    struct pollfd pfd[MAX_LINKS + 1 + MAX_PENDING];
    size_t np = 0, npolled = h->npend;
    unsigned who = 0;
    const char *addr = "";
    int ms = accel_ms_left(h->deadline);
    enum accel_err rc;
    bool want_more = missing_in(c, s, h->judged, false, &who, &addr) != NULL;

    if (ms == 0)
        return hs_timeout(c, s, h, err);
    for (size_t i = 0; i < h->nout; i++)
        pfd[np++] = (struct pollfd){h->out[i].answered ? -1 : h->out[i].fd,
                                    (short)(h->out[i].hello_sent ? POLLIN : POLLOUT), 0};
    pfd[np++] = (struct pollfd){want_more && h->npend < MAX_PENDING ? h->lfd : -1, POLLIN, 0};
    for (size_t i = 0; i < h->npend; i++)
        pfd[np++] = (struct pollfd){h->pend[i].fd, POLLIN, 0};
    if (poll(pfd, np, ms) < 0) {
        if (errno == EINTR)
            return ACCEL_OK;
        return accel_error_sys(err, ACCEL_EIO, "rank %u of %u: init: couldn't wait for connections",
                               c->rank, c->size);
    }
    rc = hs_links(c, s, h, pfd, err);
    if (rc != ACCEL_OK)
        return rc;
    hs_accept(c, s, h, pfd + h->nout, npolled);
    return ACCEL_OK;
}

/* Publishes this rank's address, reads the others' and opens its links. */
static enum accel_err hs_start(struct accel_comm *c, struct sock *s, struct handshake *h,
                               struct accel_error *err)
{
    char key[160], val[SOCK_ADDR_MAX + SOCK_HOST_MAX + 1];
    enum accel_err rc;

    s->next = (c->rank + 1) % c->size;
    s->prev = (c->rank + c->size - 1) % c->size;
    h->nout = plan_links(c, s, h->out);
    rc = listen_on(c, s, &h->lfd, err);
    if (rc != ACCEL_OK)
        return rc;
    snprintf(key, sizeof(key), "%ssock/%u", c->prefix, c->rank);
    snprintf(val, sizeof(val), "%s %s", s->addr, s->host);
    rc = accel_store_set(c->store, key, val, strlen(val), err);
    if (rc == ACCEL_OK)
        rc = read_addrs(c, s, err);
    /* two ranks on two hosts: one connection, opened by rank 0, both ways
     * (the data of each way and the other's acknowledgements share its
     * segments; two one-way connections were 5-20% slower across a veth
     * link).  Within a host the ring keeps two (socket_shm.c's queues). */
    s->pair = rc == ACCEL_OK && c->size == 2 && !s->next_same;
    if (s->pair && c->rank == 1)
        h->nout = 0; /* no hypercube at 2 ranks: the ring's link was the only one */
    for (size_t i = 0; rc == ACCEL_OK && i < h->nout; i++)
        rc = start_connect(c, h->out[i].addr, &h->out[i].fd, err);
    return rc;
}

enum accel_err comm__sock_connect(struct accel_comm *c, struct sock *s, struct accel_error *err)
{
    struct handshake h = {.deadline = accel_now() + c->timeout_s, .lfd = -1};
    enum accel_err rc = hs_start(c, s, &h, err);

    /* Until every link this rank opens is answered and every link it expects
     * is in.  A rank that was refused still answers the hellos of the ranks
     * that link to it before it gives up, so that both sides of a mismatch
     * learn why. */
    while (rc == ACCEL_OK && !hs_done(c, s, &h))
        rc = hs_round(c, s, &h, err);
    if (rc == ACCEL_OK && h.refused_rc != ACCEL_OK)
        rc = h.refused_rc;
    if (rc == ACCEL_OK) { /* the links opened here take their places */
        for (size_t i = 0; i < h.nout; i++) {
            if (h.out[i].channel == 0)
                s->next_fd = h.out[i].fd;
            else
                s->cube_fd[h.out[i].channel - 1] = h.out[i].fd;
            h.out[i].fd = -1;
        }
        if (s->pair && c->rank == 0)
            s->prev_fd = s->next_fd;
        else if (s->pair)
            s->next_fd = s->prev_fd;
    }
    for (size_t i = 0; i < h.npend; i++)
        close(h.pend[i].fd);
    for (size_t i = 0; i < h.nout; i++)
        if (h.out[i].fd >= 0)
            close(h.out[i].fd);
    if (h.lfd >= 0)
        close(h.lfd);
    if (rc != ACCEL_OK)
        comm__sock_close(s);
    return rc;
}
