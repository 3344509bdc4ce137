/*
 * server.c: the rendezvous server's sockets.  One thread runs one epoll loop
 * over the listening socket, an eventfd that asks it to stop, and every
 * client connection (non-blocking, level-triggered).  Bytes read are handed
 * to the state machine in serve.c; the replies it queues are sent here.  No
 * thread per client, no blocking call but epoll_wait itself, so one slow or
 * silent client never holds up the others.
 *
 * Flow control: a connection whose replies pile up (it sends but does not
 * read) or that is parked stops being read once 64 KiB of its requests wait,
 * so its memory stays bounded; the kernel's socket buffers push back on it.
 * Connections are freed only after each epoll batch, never while a later
 * event of the same batch may still point at them.
 *
 * Deadlines: a connection must send a request with the job's nonce within
 * bootstrap__hello_timeout_s of its accept, and each request must arrive whole
 * within bootstrap__frame_timeout_s of its first byte, or it is refused with
 * ACCEL_ETIMEDOUT; a full server closes the oldest connection that has not
 * yet sent such a request to make room, so that silent sockets never keep
 * a client of the job out.  Warnings are rate-limited per kind.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/log.h"
#include "store_int.h"

#define EVENTS 512               /* epoll events taken per wake-up */
#define READ_CHUNK (64u << 10)   /* bytes read per call */
#define READ_BUDGET (256u << 10) /* bytes read from one connection per event, for fairness */
#define IN_HIGH (64u << 10)      /* queued request bytes that stop reading a blocked connection */
#define EXPIRE_MS 50             /* granularity of the deadlines of parked requests */
#define MAX_LISTEN 8             /* listening sockets sharing the port */
#define LINGER_S 2.0             /* a refused client has this long to read why and close */
#define ACCEPT_BATCH 128         /* connections accepted per wake-up, so reads come between */

double bootstrap__hello_timeout_s = 10.0;
double bootstrap__frame_timeout_s = 60.0;
double bootstrap__warn_interval_s = 10.0;

struct accel_store_server {
    int lfds[MAX_LISTEN]; /* all on the same port */
    unsigned nlfd;
    int efd, stopfd, reserve_fd;
    unsigned port;
    size_t max_clients, nconns, nlinger;
    struct bootstrap__core core;
    struct bootstrap__conn *conns;
    uint8_t *rbuf; /* READ_CHUNK bytes */
    pthread_t thread;
    bool started;
    double hello_s, frame_s, sweep_s, warn_s, last_sweep;
    size_t nevicted; /* marked dead to make room, not yet closed */
    struct bootstrap__warn w_fd, w_evict, w_hello, w_frame;
};

static void warn_flush_all(struct accel_store_server *s, double now, bool force)
{
    bootstrap__warn_flush(&s->w_fd, s->warn_s, now, force);
    bootstrap__warn_flush(&s->w_evict, s->warn_s, now, force);
    bootstrap__warn_flush(&s->w_hello, s->warn_s, now, force);
    bootstrap__warn_flush(&s->w_frame, s->warn_s, now, force);
}

/* epoll tag of the eventfd; a listener's tag is its slot in lfds */
static char stop_tag;

/* Closes c's socket now (its struct is freed later, by close_conn). */
static void release_fd(struct accel_store_server *s, struct bootstrap__conn *c)
{
    if (c->fd < 0)
        return;
    /* Leave the epoll set explicitly: a forked child may still hold the
     * socket, and epoll forgets a descriptor only when every copy is closed. */
    epoll_ctl(s->efd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
}

static void close_conn(struct accel_store_server *s, struct bootstrap__conn *c)
{
    bootstrap__core_drop(&s->core, c);
    if (c->shut)
        s->nlinger--;
    if (c->evicted)
        s->nevicted--;
    release_fd(s, c);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    __atomic_sub_fetch(&s->nconns, 1, __ATOMIC_RELAXED); /* read by accel_store_server_clients */
    accel_free(c);
}

static void flush(struct bootstrap__conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            c->dead = true;
            return;
        }
        c->out_off += (size_t)n;
    }
    c->out_off = c->out_len = 0;
    if (c->out_cap > (64u << 10)) { /* a big value went out: give the memory back */
        accel_free(c->out);
        c->out = NULL;
        c->out_cap = 0;
    }
}

static void set_interest(struct accel_store_server *s, struct bootstrap__conn *c)
{
    size_t pending = c->out_len - c->out_off;
    bool blocked = c->park_on != NULL || pending >= STORE_OUT_HIGH;
    uint32_t want = EPOLLRDHUP;
    struct epoll_event ev;

    if (c->closing || !(blocked && c->in_len >= IN_HIGH))
        want |= EPOLLIN; /* a closing client is read only to see it leave */
    if (pending > 0)
        want |= EPOLLOUT;
    if (want == c->events)
        return;
    ev.events = want;
    ev.data.ptr = c;
    if (epoll_ctl(s->efd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        c->dead = true;
    else
        c->events = want;
}

static bool append_in(struct bootstrap__conn *c, const uint8_t *p, size_t n)
{
    if (c->in_len + n > c->in_cap) {
        size_t cap = c->in_cap ? c->in_cap : 512; /* most requests are small */
        uint8_t *q;
        while (cap < c->in_len + n)
            cap *= 2;
        if (c->reserved >= c->in_len + n && cap > c->reserved)
            cap = c->reserved; /* the admitted request's size, not twice it */
        q = accel_realloc(c->in, cap);
        if (q == NULL)
            return false;
        c->in = q;
        c->in_cap = cap;
    }
    memcpy(c->in + c->in_len, p, n);
    c->in_len += n;
    return true;
}

/* Keeps c->partial_since: when the request now at the head of c->in began.
 * `before` is how many bytes c->in held before bootstrap__core_input ran. */
static void note_partial(struct bootstrap__conn *c, size_t before, double now)
{
    if (c->in_len == 0)
        c->partial_since = 0;
    else if (c->in_len < before || c->partial_since == 0)
        c->partial_since = now; /* a request was served: the next one starts now */
}

static void read_conn(struct accel_store_server *s, struct bootstrap__conn *c, double now)
{
    size_t got = 0;

    while (got < READ_BUDGET) {
        ssize_t n = recv(c->fd, s->rbuf, READ_CHUNK, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n > 0 && c->closing) { /* refused: what it still sends is dropped */
            got += (size_t)n;
            continue;
        }
        if (n <= 0 || !append_in(c, s->rbuf, (size_t)n)) {
            c->dead = true; /* closed, reset or out of memory */
            break;
        }
        got += (size_t)n;
    }
    if (!c->dead) {
        size_t before = c->in_len;
        bootstrap__core_input(&s->core, c, now);
        note_partial(c, before, now);
    }
    bootstrap__core_touch(&s->core, c); /* drain() sends, or closes a dead one */
}

/* Makes room for the new connection `fresh` (NULL: one not accepted yet,
 * for want of a descriptor) in a full server: the oldest connection that has
 * not yet sent a request with the job's nonce is closed, its descriptor at
 * once (the struct after the batch).  False when every other connection is a
 * client of the job. */
static bool evict_one(struct accel_store_server *s, struct bootstrap__conn *fresh, double now)
{
    struct bootstrap__conn *victim = NULL;

    for (struct bootstrap__conn *c = s->conns; c != NULL; c = c->next)
        if (c != fresh && !c->dead && !c->authed &&
            (victim == NULL || c->accepted_at < victim->accepted_at))
            victim = c;
    if (victim == NULL)
        return false;
    victim->dead = true;
    victim->evicted = true;
    s->nevicted++;
    release_fd(s, victim);
    bootstrap__core_touch(&s->core, victim);
    if (fresh != NULL)
        bootstrap__warn(&s->w_evict, s->warn_s, now,
                        "store server: full at %zu clients; a connection idle for %.3g s without a "
                        "request of this job was closed to make room",
                        s->max_clients, now - victim->accepted_at);
    else
        bootstrap__warn(&s->w_evict, s->warn_s, now,
                        "store server: out of file descriptors at %zu clients; a connection idle "
                        "for %.3g s without a request of this job was closed to make room (raise "
                        "`ulimit -n`)",
                        s->nconns - s->nevicted, now - victim->accepted_at);
    return true;
}

/* Out of descriptors, where accept fails even with nobody waiting: the
 * spare descriptor takes the next client off the queue, and the oldest
 * silent connection gives its descriptor back for the spare; with none to
 * give, the client is turned away (or the listener would wake the loop
 * forever).  The client's socket, or -1: errno EAGAIN when nobody was
 * waiting, *turned when one was turned away. */
static int accept_spare(struct accel_store_server *s, int lfd, double now, bool *turned)
{
    int fd, saved;

    close(s->reserve_fd);
    fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    saved = errno;
    if (fd >= 0 && !evict_one(s, NULL, now)) {
        close(fd);
        fd = -1;
        *turned = true;
        bootstrap__warn(&s->w_fd, s->warn_s, now,
                        "store server: out of file descriptors at %zu clients; "
                        "a client was turned away (raise `ulimit -n`)",
                        s->nconns);
    }
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    errno = saved;
    return fd;
}

static void accept_all(struct accel_store_server *s, int lfd, double now)
{
    for (unsigned k = 0; k < ACCEPT_BATCH; k++) {
        struct epoll_event ev;
        struct bootstrap__conn *c;
        int one = 1;
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && s->reserve_fd >= 0) {
            bool turned = false;
            fd = accept_spare(s, lfd, now, &turned);
            if (turned)
                continue;
        }
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return; /* EAGAIN: the queue is empty */
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c = accel_calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->accepted_at = now;
        c->events = EPOLLIN | EPOLLRDHUP;
        ev.events = c->events;
        ev.data.ptr = c;
        if (epoll_ctl(s->efd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            accel_free(c);
            continue;
        }
        c->next = s->conns;
        if (s->conns != NULL)
            s->conns->prev = c;
        s->conns = c;
        __atomic_add_fetch(&s->nconns, 1, __ATOMIC_RELAXED);
        if (s->nconns - s->nevicted > s->max_clients && !evict_one(s, c, now)) {
            char msg[128];
            snprintf(msg, sizeof(msg), "the server holds %zu clients, its limit", s->max_clients);
            bootstrap__core_refuse(&s->core, c, ACCEL_ETOOBIG, msg);
        }
    }
}

/* Sends, reads what was held back and closes, for every touched connection. */
static void drain(struct accel_store_server *s, double now)
{
    struct bootstrap__conn *c;

    while ((c = bootstrap__core_next_touched(&s->core)) != NULL) {
        for (;;) {
            size_t before = c->in_len;
            if (!c->dead)
                flush(c);
            if (c->dead || c->closing || c->park_on != NULL || c->in_len < STORE_HDR)
                break;
            bootstrap__core_input(&s->core, c, now);
            note_partial(c, before, now);
            if (c->in_len == before)
                break; /* a partial request, or replies still queued */
        }
        if (c->dead) {
            close_conn(s, c);
            continue;
        }
        if (c->closing && c->out_off == c->out_len && !c->shut) {
            /* Closing at once would turn the client's unread request into a
             * reset that can destroy our reply in flight; send FIN instead
             * and close when the client has read it and gone. */
            shutdown(c->fd, SHUT_WR);
            c->shut = true;
            c->linger_until = now + LINGER_S;
            s->nlinger++;
        }
        set_interest(s, c);
        if (c->dead)
            close_conn(s, c);
    }
}

/* Closes, with a reply saying why, every connection past the deadline of
 * its first request or of its request in progress. */
static void sweep(struct accel_store_server *s, double now)
{
    for (struct bootstrap__conn *c = s->conns; c != NULL; c = c->next) {
        char msg[160];
        bool blocked = c->park_on != NULL || c->out_len - c->out_off >= STORE_OUT_HIGH;
        if (c->dead || c->closing)
            continue;
        if (!c->authed && now - c->accepted_at > s->hello_s) {
            snprintf(msg, sizeof(msg), "no request of this job within %.3g s of connecting",
                     s->hello_s);
            bootstrap__warn(&s->w_hello, s->warn_s, now,
                            "store server: a connection sent %s; closed", msg);
        } else if (!blocked && c->partial_since > 0 && now - c->partial_since > s->frame_s) {
            snprintf(msg, sizeof(msg), "a request still incomplete after %.3g s (%zu bytes)",
                     s->frame_s, c->in_len);
            bootstrap__warn(&s->w_frame, s->warn_s, now,
                            "store server: rank %u of %u sent %s; closed", c->rank, c->world, msg);
        } else {
            continue;
        }
        bootstrap__core_refuse(&s->core, c, ACCEL_ETIMEDOUT, msg);
        bootstrap__core_input(&s->core, c,
                              now); /* drops its partial request and the room it held */
    }
    s->last_sweep = now;
}

static void *loop(void *arg)
{
    struct accel_store_server *s = arg;
    struct epoll_event ev[EVENTS];
    double last_expire = accel_now();
    bool stop = false;

    while (!stop) {
        int n = epoll_wait(s->efd, ev, EVENTS,
                           s->core.nparked > 0 || s->nlinger > 0 ? EXPIRE_MS
                                                                 : (int)(s->sweep_s * 1000));
        double now = accel_now();

        if (n < 0 && errno != EINTR) {
            accel_log(ACCEL_LOG_ERROR, "store server: epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            void *tag = ev[i].data.ptr;
            if (tag == &stop_tag) {
                stop = true;
            } else if ((uintptr_t)tag >= (uintptr_t)s->lfds &&
                       (uintptr_t)tag < (uintptr_t)(s->lfds + s->nlfd)) {
                accept_all(s, *(int *)tag, now);
            } else {
                struct bootstrap__conn *c = tag;
                if (c->dead)
                    continue;
                if (ev[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                    read_conn(s, c, now);
                if (ev[i].events & EPOLLOUT)
                    bootstrap__core_touch(&s->core, c);
            }
        }
        if ((s->core.nparked > 0 || s->nlinger > 0) && now - last_expire >= EXPIRE_MS * 1e-3) {
            bootstrap__core_expire(&s->core, now);
            if (s->nlinger > 0)
                for (struct bootstrap__conn *c = s->conns; c != NULL; c = c->next)
                    if (c->shut && now > c->linger_until) {
                        c->dead = true;
                        bootstrap__core_touch(&s->core, c);
                    }
            last_expire = now;
        }
        if (now - s->last_sweep >= s->sweep_s)
            sweep(s, now);
        warn_flush_all(s, now, false);
        drain(s, now);
    }
    return NULL;
}

/* Raises the soft RLIMIT_NOFILE towards the hard limit so that `want`
 * connections fit; a lower limit is not an error (accept says so later). */
static void raise_nofile(size_t want)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want + 64)
        return;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want + 64 ? want + 64 : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

static unsigned bound_port(int fd);

/* How many listening sockets `max_clients` need: the kernel caps each one's
 * queue of connections not yet accepted at net.core.somaxconn, and a
 * connection past it is dropped and retried by its client a second later. */
static unsigned listeners_for(size_t max_clients)
{
    unsigned long somaxconn = 4096;
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "re");
    size_t n;

    if (f != NULL) {
        if (fscanf(f, "%lu", &somaxconn) != 1 || somaxconn == 0)
            somaxconn = 4096;
        fclose(f);
    }
    n = (max_clients + somaxconn - 1) / somaxconn;
    return n < 1 ? 1 : n > MAX_LISTEN ? MAX_LISTEN : (unsigned)n;
}

static int listen_socket(const struct addrinfo *ai, const struct sockaddr *sa, bool wildcard,
                         bool reuseport, int backlog)
{
    int one = 1, zero = 0;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (ai->ai_family == AF_INET6 && wildcard) /* IPv4 clients too */
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, sa, ai->ai_addrlen) == 0 && (backlog < 0 || listen(fd, backlog) == 0))
        return fd;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* Listening sockets bound to `addr` (NULL = every IPv6 and IPv4 address)
 * and `port`: `n` of them sharing the port (SO_REUSEPORT) when one queue is
 * too short for max_clients.  The port is first bound alone, so that a port
 * in use is still an error and never silently shared with another server. */
static enum accel_err bind_listen(struct accel_store_server *s, const char *addr, unsigned port,
                                  int backlog, unsigned n, struct accel_error *err)
{
    struct addrinfo hints = {0}, *res = NULL, *ai;
    char service[16];
    int gai, fd = -1, saved = 0;
    const char *shown = addr ? addr : "*";

    snprintf(service, sizeof(service), "%u", port);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    hints.ai_family = addr ? AF_UNSPEC : AF_INET6;
    gai = getaddrinfo(addr, service, &hints, &res);
    if (gai != 0 && addr == NULL) { /* no IPv6 on this host */
        hints.ai_family = AF_INET;
        gai = getaddrinfo(NULL, service, &hints, &res);
    }
    if (gai != 0)
        return accel_error_set(err, ACCEL_EINVAL, "store server: couldn't resolve %s: %s", shown,
                               gai_strerror(gai));
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        if (n > 1 && port != 0) { /* is the port free? */
            int probe = listen_socket(ai, ai->ai_addr, addr == NULL, false, -1);
            if (probe < 0) {
                saved = errno;
                continue;
            }
            close(probe);
        }
        fd = listen_socket(ai, ai->ai_addr, addr == NULL, n > 1, backlog);
        if (fd >= 0)
            break;
        saved = errno;
    }
    if (fd < 0) {
        freeaddrinfo(res);
        errno = saved;
        return accel_error_sys(err, ACCEL_EIO, "store server: couldn't listen on %s:%u", shown,
                               port);
    }
    s->lfds[s->nlfd++] = fd;
    s->port = bound_port(fd);
    while (s->nlfd < n) { /* more queues; fewer is slower, not wrong */
        struct sockaddr_storage ss;
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        if (ss.ss_family == AF_INET6)
            ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)s->port);
        else
            ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)s->port);
        fd = listen_socket(ai, (struct sockaddr *)&ss, addr == NULL, true, backlog);
        if (fd < 0)
            break;
        s->lfds[s->nlfd++] = fd;
    }
    freeaddrinfo(res);
    return ACCEL_OK;
}

static unsigned bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static enum accel_err add_tag(struct accel_store_server *s, int fd, void *tag,
                              struct accel_error *err)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};

    if (epoll_ctl(s->efd, EPOLL_CTL_ADD, fd, &ev) != 0)
        return accel_error_sys(err, ACCEL_EIO, "store server: couldn't watch a socket");
    return ACCEL_OK;
}

enum accel_err accel_store_server_start(struct accel_store_server **out,
                                        const struct accel_store_server_opts *opts,
                                        struct accel_error *err)
{
    struct accel_store_server *s;
    enum accel_err rc;
    sigset_t all, old;
    int perr;

    *out = NULL;
    if (opts == NULL || opts->port > 65535)
        return accel_error_set(err, ACCEL_EINVAL, "store server: port %u is not 0..65535",
                               opts ? opts->port : 0);
    s = accel_calloc(1, sizeof(*s));
    if (s == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "store server: out of memory");
    s->efd = s->stopfd = s->reserve_fd = -1;
    s->hello_s = bootstrap__hello_timeout_s > 0 ? bootstrap__hello_timeout_s : 10.0;
    s->frame_s = bootstrap__frame_timeout_s > 0 ? bootstrap__frame_timeout_s : 60.0;
    s->warn_s = bootstrap__warn_interval_s >= 0 ? bootstrap__warn_interval_s : 10.0;
    s->sweep_s = (s->hello_s < s->frame_s ? s->hello_s : s->frame_s) / 4;
    s->sweep_s = s->sweep_s < 0.02 ? 0.02 : s->sweep_s > 1.0 ? 1.0 : s->sweep_s;
    s->last_sweep = accel_now();
    s->max_clients = opts->max_clients ? opts->max_clients : ACCEL_STORE_MAX_CLIENTS;
    if (s->max_clients > ACCEL_STORE_MAX_CLIENTS)
        s->max_clients = ACCEL_STORE_MAX_CLIENTS;
    if (bootstrap__core_init(&s->core, opts->nonce, opts->max_bytes) != ACCEL_OK ||
        (s->rbuf = accel_malloc(READ_CHUNK)) == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "store server: out of memory");
        goto fail;
    }
    raise_nofile(s->max_clients);
    rc = bind_listen(s, opts->bind_addr, opts->port,
                     s->max_clients > 65535 ? 65535 : (int)s->max_clients,
                     listeners_for(s->max_clients), err);
    if (rc != ACCEL_OK)
        goto fail;
    s->efd = epoll_create1(EPOLL_CLOEXEC);
    s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0 || s->stopfd < 0) {
        rc = accel_error_sys(err, ACCEL_EIO, "store server: couldn't create its event loop");
        goto fail;
    }
    for (unsigned i = 0; i < s->nlfd; i++)
        if ((rc = add_tag(s, s->lfds[i], &s->lfds[i], err)) != ACCEL_OK)
            goto fail;
    if ((rc = add_tag(s, s->stopfd, &stop_tag, err)) != ACCEL_OK)
        goto fail;
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* The thread takes no signals: they belong to the application's threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    perr = pthread_create(&s->thread, NULL, loop, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (perr != 0) {
        errno = perr;
        rc = accel_error_sys(err, ACCEL_EIO, "store server: couldn't start its thread");
        goto fail;
    }
    s->started = true;
    *out = s;
    return ACCEL_OK;
fail:
    accel_store_server_stop(s);
    return rc;
}

size_t accel_store_server_clients(const struct accel_store_server *s)
{
    return s != NULL ? __atomic_load_n(&s->nconns, __ATOMIC_RELAXED) : 0;
}

unsigned accel_store_server_port(const struct accel_store_server *s)
{
    return s ? s->port : 0;
}

void accel_store_server_stop(struct accel_store_server *s)
{
    if (s == NULL)
        return;
    if (s->started) {
        uint64_t one = 1;
        /* The loop wakes on this at once, finishes its batch and returns. */
        while (write(s->stopfd, &one, sizeof(one)) < 0 && errno == EINTR)
            ;
        pthread_join(s->thread, NULL);
        warn_flush_all(s, accel_now(), true); /* the counts of a burst cut short */
    }
    while (s->conns != NULL)
        close_conn(s, s->conns);
    bootstrap__core_free(&s->core);
    for (unsigned i = 0; i < s->nlfd; i++)
        close(s->lfds[i]);
    if (s->efd >= 0)
        close(s->efd);
    if (s->stopfd >= 0)
        close(s->stopfd);
    if (s->reserve_fd >= 0)
        close(s->reserve_fd);
    accel_free(s->rbuf);
    accel_free(s);
}
