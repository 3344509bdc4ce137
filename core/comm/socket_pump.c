/*
 * socket_pump.c: the one loop that moves the bytes of every socket
 * collective, the ring's (socket_ring.c) and the hypercube's exchanges
 * (socket_cube.c).
 *
 * An operation is two streams: what this rank sends and what it receives,
 * each on its own connection (the ring: to the next rank, from the previous
 * one) or both on one (a hypercube exchange with rank ^ 2^d).  Each stream
 * starts with the operation's header (sock_hdr); the one received is
 * compared with ours, so ranks that call different operations fail with
 * ACCEL_EINVAL instead of mixing data.  Then the caller's span callbacks say
 * which bytes can go, or land, now; the pump moves as many as the
 * non-blocking sockets take, tells the caller how many moved, and goes on
 * until both streams end.  What the bytes mean (units, blocks, reductions)
 * is the caller's; how they move, pace, wait and fail is here only.
 *
 * Pacing: with a window, a rank sends at most that many data bytes beyond
 * what it has received, while something is still to come (the reasons and
 * figures are at the heads of socket_ring.c and socket_cube.c).
 *
 * A stream may go through a shared-memory queue instead of its socket
 * (socket_shm.c, for ranks on one host): the same bytes, the same order;
 * its socket then carries only doorbells and hang-ups.
 *
 * Waiting: a round in which nothing moved retries for s->spin_s, yielding
 * the CPU, before it sleeps in poll() until the operation's deadline.
 * Hang-ups: a partner shuts its side of a connection only after an
 * operation, so one that hangs up while this operation still needs it has
 * failed.  On a connection we only read, buffered bytes can still be read
 * after a hang-up (recv then says 0: the failure); on one we only write, or
 * whose reading is done, a hang-up fails at once.  Every failure goes
 * through comm__sock_fail, naming the rank and address at fault.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "socket_int.h"

static int sock_error(int fd)
{
    int e = 0;
    socklen_t len = sizeof(e);

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
        return errno;
    return e;
}

static enum accel_err stream_error(struct accel_comm *c, const struct sock_pump *p,
                                   const struct sock_stream *st, int e, struct accel_error *err)
{
    return comm__sock_peer_error(c, err, p->what, st->peer, st->addr, e);
}

/* One byte on the link's TCP connection wakes the other side (shared
 * memory); if the socket is full of them, it is awake anyway. */
static void doorbell(int fd)
{
    char b = 0;

    (void)send(fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* send() and recv() of a stream, over TCP or through its shared queue (the
 * same contract: -1 with EAGAIN when it would block, 0 from recv at the
 * end). */
static ssize_t stream_send(struct sock_stream *st, const void *buf, size_t len)
{
    bool ring;
    size_t n;

    if (st->q == NULL)
        return send(st->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    n = comm__shmq_write(st->q, buf, len, &ring);
    if (ring)
        doorbell(st->fd);
    if (n == 0) {
        errno = EAGAIN;
        return -1;
    }
    return (ssize_t)n;
}

static ssize_t stream_recv(struct sock_stream *st, void *buf, size_t len)
{
    bool ring;
    ssize_t got;

    if (st->q == NULL)
        return recv(st->fd, buf, len, MSG_DONTWAIT);
    got = comm__shmq_read(st->q, buf, len, &ring);
    if (ring)
        doorbell(st->fd);
    if (got == 0 && !st->hup) {
        errno = EAGAIN;
        return -1;
    }
    return got; /* 0 after a hang-up: nothing more will come */
}

/* Reads the doorbells that woke us. */
static void drain(int fd)
{
    char b[256];

    while (recv(fd, b, sizeof(b), MSG_DONTWAIT) > 0)
        ;
}

/* The data bytes that may go now, after the window. */
static size_t paced(const struct sock_pump *p, size_t len)
{
    size_t room;

    /* shared memory: the queue bounds what is in flight, and a span
     * offered for a single copy must be offered again unchanged */
    if (p->window == 0 || p->rx.ended || p->tx.q != NULL)
        return len;
    room = p->rx.bytes + p->window > p->tx.bytes ? p->rx.bytes + p->window - p->tx.bytes : 0;
    return len < room ? len : room;
}

/* Sends what can go now: the header, then the spans the caller gives. */
static enum accel_err pump_send(struct accel_comm *c, struct sock_pump *p, struct accel_error *err)
{
    struct sock_stream *tx = &p->tx;
    const size_t hl = sizeof(*p->hdr);

    while (!tx->ended) {
        const char *src;
        size_t len;
        ssize_t got;

        if (tx->hdr < hl) {
            src = (const char *)p->hdr + tx->hdr;
            len = hl - tx->hdr;
        } else {
            enum sock_span sp = p->tx_span(p->ctx, p, (char **)&src, &len);

            if (sp == SOCK_SPAN_END) {
                tx->ended = true;
                break;
            }
            if (sp == SOCK_SPAN_BLOCKED || (len = paced(p, len)) == 0)
                break;
        }
        got = stream_send(tx, src, len);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                tx->wait = true;
                break;
            }
            return stream_error(c, p, tx, errno, err);
        }
        p->moved = true;
        if (tx->hdr < hl) {
            tx->hdr += (size_t)got;
        } else {
            tx->bytes += (size_t)got;
            p->tx_moved(p->ctx, (size_t)got);
        }
    }
    return ACCEL_OK;
}

/* Receives what has come: the header, checked, then the spans the caller
 * gives. */
static enum accel_err pump_recv(struct accel_comm *c, struct sock_pump *p, struct accel_error *err)
{
    struct sock_stream *rx = &p->rx;
    const size_t hl = sizeof(p->hin);

    while (!rx->ended) {
        char *dst;
        size_t len;
        ssize_t got;

        if (rx->hdr < hl) {
            dst = (char *)&p->hin + rx->hdr;
            len = hl - rx->hdr;
        } else {
            enum sock_span sp = p->rx_span(p->ctx, p, &dst, &len);

            if (sp == SOCK_SPAN_END) {
                rx->ended = true;
                break;
            }
            if (sp == SOCK_SPAN_BLOCKED)
                break;
        }
        got = stream_recv(rx, dst, len);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                rx->wait = true;
                break;
            }
            return stream_error(c, p, rx, errno, err);
        }
        if (got == 0)
            return stream_error(c, p, rx, 0, err);
        p->moved = true;
        if (rx->hdr < hl) {
            rx->hdr += (size_t)got;
            if (rx->hdr == hl && memcmp(&p->hin, p->hdr, hl) != 0)
                return comm__sock_mismatch(c, err, p->what, rx->peer, &p->hin, p->hdr);
        } else {
            rx->bytes += (size_t)got;
            p->rx_moved(p->ctx, (size_t)got);
        }
    }
    return ACCEL_OK;
}

/* A stream through shared memory that would block says it sleeps; false if
 * its queue moved meanwhile (then this round does not sleep). */
static bool announce(struct sock_stream *st)
{
    return st->q == NULL || !st->wait || st->ended || comm__shmq_sleep(st->q);
}

static void awake(struct sock_stream *st)
{
    if (st->q != NULL && st->wait && !st->ended)
        comm__shmq_awake(st->q);
}

/* What poll() waits for on a stream's connection, as data or room: on TCP,
 * the socket itself; through shared memory, the doorbell (bytes in). */
static short want(const struct sock_stream *st, short tcp_event)
{
    if (!st->wait)
        return 0;
    return st->q != NULL ? POLLIN : tcp_event;
}

/* Nothing moved: waits for room, data or a hang-up until the deadline (see
 * the head of the file for what a hang-up means where). */
static enum accel_err pump_wait(struct accel_comm *c, struct sock_pump *p, double deadline,
                                struct accel_error *err)
{
    struct sock_stream *tx = &p->tx, *rx = &p->rx;
    bool one = tx->fd == rx->fd;
    bool poll_rx = !rx->ended && (rx->wait || !rx->hup);
    struct pollfd pfd[2];
    int nfd = 0, ti = -1, ri = -1, n;

    if (accel_now() >= deadline) {
        const struct sock_stream *who = !rx->ended && (rx->wait || tx->ended) ? rx : tx;
        return comm__sock_fail(c, err, p->what, ACCEL_ETIMEDOUT,
                               "no progress with rank %u (%s) within %g s", who->peer, who->addr,
                               c->timeout_s);
    }
    if (!tx->ended) {
        ti = nfd++;
        pfd[ti].fd = tx->fd;
        pfd[ti].events = (short)(POLLRDHUP | want(tx, POLLOUT));
    }
    if (poll_rx) {
        if (one && ti >= 0) {
            ri = ti;
        } else {
            ri = nfd++;
            pfd[ri].fd = rx->fd;
            pfd[ri].events = 0;
        }
        /* after a hang-up, only the bytes before it are still of interest */
        pfd[ri].events =
            (short)((pfd[ri].events & ~POLLRDHUP) | want(rx, POLLIN) | (rx->hup ? 0 : POLLRDHUP));
    }
    for (int i = 0; i < nfd; i++)
        pfd[i].revents = 0;
    if (!announce(tx) || !announce(rx)) {
        awake(tx);
        awake(rx);
        return ACCEL_OK;
    }
    n = poll(pfd, (nfds_t)nfd, accel_ms_left(deadline));
    awake(tx);
    awake(rx);
    if (n < 0 && errno != EINTR)
        return comm__sock_fail(c, err, p->what, ACCEL_EIO, "couldn't wait for the other ranks: %s",
                               strerror(errno));
    for (int i = 0; i < nfd; i++) {
        short ev = pfd[i].revents;
        /* reading is still to do on this connection: a hang-up waits until
         * what came before it is read */
        bool draining = i == ri && !rx->ended;
        bool shm = (i == ti && tx->q != NULL) || (i == ri && rx->q != NULL);

        if (ev & (POLLERR | POLLNVAL))
            return stream_error(c, p, i == ti ? tx : rx, sock_error(pfd[i].fd), err);
        if ((ev & (POLLHUP | POLLRDHUP)) && !draining)
            return stream_error(c, p, i == ti ? tx : rx, sock_error(pfd[i].fd), err);
        if (ev & (POLLHUP | POLLRDHUP))
            rx->hup = true;
        if (shm && (ev & POLLIN))
            drain(pfd[i].fd);
    }
    return ACCEL_OK;
}

enum accel_err comm__sock_pump(struct accel_comm *c, struct sock_pump *p, struct accel_error *err)
{
    struct sock *s = c->impl;
    double deadline = accel_now() + c->timeout_s, idle_since = 0;
    enum accel_err rc;

    for (;;) {
        p->moved = p->tx.wait = p->rx.wait = false;
        if ((rc = pump_send(c, p, err)) != ACCEL_OK || (rc = pump_recv(c, p, err)) != ACCEL_OK)
            return rc;
        if (p->tx.ended && p->rx.ended)
            return ACCEL_OK;
        if (p->moved) {
            idle_since = 0;
            continue;
        }
        if (p->idle != NULL && p->idle(p->ctx))
            continue;
        if (comm__sock_spin(s, &idle_since))
            continue;
        if ((rc = pump_wait(c, p, deadline, err)) != ACCEL_OK)
            return rc;
    }
}
