/*
 * socket_cube.c: all_reduce, reduce_scatter and all_gather of the socket
 * backend over the hypercube, for communicators whose size n is a power of
 * two, 4 or more: all_gather always, the reductions where their partial
 * sums (half the message, in fp32) fit in s->cube_mem bytes.
 *
 * Each rank holds one connection per dimension d with rank ^ (1 << d)
 * (socket_conn.c).  all_reduce is a reduce-scatter by recursive halving
 * followed by an all-gather by recursive doubling (Rabenseifner): log2(n)
 * pairwise exchanges each way instead of the ring's 2(n - 1) steps, with the
 * same bytes on the wire per rank, (n - 1)/n of the message each way.  On a
 * machine whose ranks share few CPUs, each step of a ring waits for every
 * rank to be scheduled in turn, and a pairwise step only for its two ranks:
 * that is where the hypercube wins.  Where its partial sums would not fit
 * in cube_mem, the ring (socket_ring.c) is used, whose working memory is a
 * few chunks.
 *
 * The data is cut into n blocks as the ring cuts it (comm__block_off).
 * Reduce-scatter: a rank's range starts as all n blocks; at the step of
 * mask m = n/2, n/4, ..., 1 it keeps the half of its range holding its own
 * block (the upper half when rank & m), sends the other half to rank ^ m
 * and adds what that rank sends for the half it keeps.  After log2(n)
 * steps, rank r holds the sum of block r (reduce_scatter stops there, its
 * blocks being the ranks' slices).  All-gather: at the step of mask
 * m = 1, 2, ..., n/2, it sends the blocks it holds to rank ^ m and receives
 * as many.
 *
 * Reduction order (bit-exact from run to run): element i is the sum of a
 * fixed tree, pairs of ranks at distance n/2 first, then n/4, ..., then 1:
 * for n = 4, (x0 + x2) + (x1 + x3).  fp32 addition is commutative, so
 * whichever rank of a pair adds, the bits are the same; the result depends
 * on (n, count) only.  The first step carries the input in its own type;
 * later steps carry fp32 partial sums; a 16-bit result is rounded once, after
 * the division of avg.  Partial sums of an fp32 all_reduce accumulate in the
 * result buffer itself; the others in s->acc (fp32, half the message).  As
 * all_reduce and reduce_scatter share the order, NO_SHARD and FULL_SHARD
 * training (core/shard) give the same bits.
 *
 * all_reduce of up to SOCK_CUBE_WHOLE bytes (in fp32) skips the halving:
 * every step exchanges the whole vector with rank ^ m, m = n/2, ..., 1, and
 * adds it, so log2(n) exchanges instead of 2 log2(n), with the same tree and
 * the same bits (4 ranks, 4 KiB: 53-88 us -> 25-30 us; at 256 KiB the
 * halving is faster again).
 *
 * Each exchange opens with the operation's header on both sides, so ranks
 * that call different operations fail with ACCEL_EINVAL; a partner that
 * closes or fails gives ACCEL_EPEER, one that stops ACCEL_ETIMEDOUT, each
 * through comm__sock_fail (every rank learns of it).  socket_pump.c moves
 * the bytes, as it does the ring's.
 */
#include <string.h>

#include "accel/alloc.h"
#include "dtype_int.h"
#include "socket_int.h"

bool comm__sock_use_cube(const struct accel_comm *c, uint64_t acc_bytes)
{
    const struct sock *s = c->impl;

    return s->dims > 0 && acc_bytes <= s->cube_mem;
}

/* Pacing.  Both ranks of an exchange send and receive at once.  Left to
 * itself, each would hand the kernel its whole message at once (the socket
 * buffers autotune to megabytes): the bytes sit in socket buffers until the
 * partner, sharing a CPU with another rank, gets to read them, and by then
 * they have left the caches.  Sending at most SOCK_CUBE_WINDOW bytes (one
 * loopback segment) ahead of what has arrived keeps the two ranks in step
 * and the bytes in flight small: measured on 4 ranks over 2 CPUs, all_gather
 * of 4 MiB went from 2.6 ms to 1.4 ms and all_reduce of 16 MiB from 25 ms to
 * 16.5 ms (32 KiB and 128 KiB windows were slower than 64 KiB).  It cannot
 * deadlock: both sides may always send their first window, and each byte
 * received lets one more go. */

/* One pairwise exchange: the header and `sbytes` from `sbuf` out, the
 * partner's header and `rbytes` in.  Without a sink the bytes land in rbuf;
 * with one they land in rbuf by pieces of `piece` bytes (whole elements),
 * and sink(ctx, off, len) takes each piece (bytes [off, off + len) of the
 * message, now at rbuf[0, len)) before the next one overwrites it. */
struct xchg {
    const char *what;
    unsigned d; /* the dimension: partner rank ^ (1 << d) */
    const struct sock_hdr *hdr;
    const char *sbuf;
    size_t sbytes;
    char *rbuf;
    size_t rbytes;
    size_t piece;
    void (*sink)(void *ctx, size_t off, size_t len);
    void *ctx;
};

/* The pump's view of one exchange: bytes sent and received so far, and how
 * much of the current piece has landed. */
struct xstate {
    const struct xchg *x;
    size_t so, ro, fill;
};

static enum sock_span x_tx_span(void *ctx, struct sock_pump *pump, char **buf, size_t *len)
{
    struct xstate *st = ctx;

    (void)pump;
    if (st->so == st->x->sbytes)
        return SOCK_SPAN_END;
    *buf = (char *)st->x->sbuf + st->so;
    *len = st->x->sbytes - st->so;
    return SOCK_SPAN_DATA;
}

static void x_tx_moved(void *ctx, size_t n)
{
    ((struct xstate *)ctx)->so += n;
}

static enum sock_span x_rx_span(void *ctx, struct sock_pump *pump, char **buf, size_t *len)
{
    struct xstate *st = ctx;
    const struct xchg *x = st->x;
    size_t left = x->rbytes - st->ro;

    (void)pump;
    if (left == 0)
        return SOCK_SPAN_END;
    if (x->sink == NULL) {
        *buf = x->rbuf + st->ro;
        *len = left;
    } else {
        *buf = x->rbuf + st->fill;
        *len = x->piece - st->fill < left ? x->piece - st->fill : left;
    }
    return SOCK_SPAN_DATA;
}

/* With a sink, a piece that is whole (or the message's last) goes to it
 * before the next one overwrites rbuf. */
static void x_rx_moved(void *ctx, size_t n)
{
    struct xstate *st = ctx;
    const struct xchg *x = st->x;

    st->ro += n;
    if (x->sink != NULL && ((st->fill += n) == x->piece || st->ro == x->rbytes)) {
        x->sink(x->ctx, st->ro - st->fill, st->fill);
        st->fill = 0;
    }
}

/* One exchange with rank ^ (1 << x->d), both ways on one connection, paced
 * by s->cube_window (above). */
static enum accel_err exchange(struct accel_comm *c, const struct xchg *x, struct accel_error *err)
{
    struct sock *s = c->impl;
    struct xstate st = {.x = x};
    struct sock_stream end = {
        .fd = s->cube_fd[x->d], .peer = c->rank ^ (1u << x->d), .addr = s->cube_addr[x->d]};
    struct sock_pump pump = {.what = x->what,
                             .hdr = x->hdr,
                             .tx = end,
                             .rx = end,
                             .window = comm__sock_pace(s, s->cube_window, s->cube_same[x->d]),
                             .tx_span = x_tx_span,
                             .tx_moved = x_tx_moved,
                             .rx_span = x_rx_span,
                             .rx_moved = x_rx_moved,
                             .ctx = &st};

    if (s->cube_tx[x->d].ctl != NULL)
        pump.tx.q = &s->cube_tx[x->d];
    if (s->cube_rx[x->d].ctl != NULL)
        pump.rx.q = &s->cube_rx[x->d];
    return comm__sock_pump(c, &pump, err);
}

/* ------------------------------------------------------------ all_reduce */

/* The state of one reduction that the sink of its exchanges sees. */
struct ar {
    const char *in;
    char *out;       /* where the result's first element of this rank goes */
    size_t out_base; /* element index of out[0] */
    enum accel_dtype t;
    size_t es;
    unsigned avg_n;
    bool acc_is_out;   /* fp32 all_reduce: the partial sums live in the result */
    float *acc;        /* fp32 partial sums */
    size_t acc_base;   /* element index of acc[0] */
    const char *stage; /* where the pieces arrive (s->stage_in) */
    float *wide;       /* one chunk of fp32 (s->stage_out), to widen a 16-bit piece */
    /* the exchange under way: element index of its first element, bytes of
     * an element on the wire, and which step it is */
    size_t first, wire;
    bool step0, last;
};

/* A piece of the partner's values for elements first + off / wire onwards:
 * added to this rank's own (its input at the first step, its partial sums
 * later); at the last step divided for avg and narrowed into the result. */
static void ar_sink(void *ctx, size_t off, size_t len)
{
    struct ar *a = ctx;
    size_t i0 = a->first + off / a->wire, n = len / a->wire;
    float *acc = a->acc + (i0 - a->acc_base);
    const float *part = (const float *)(const void *)a->stage;

    if (a->step0) {
        if (a->t != ACCEL_F32) {
            comm__to_f32(a->wide, a->stage, n, a->t);
            part = a->wide;
        }
        comm__reduce_f32(acc, part, a->in + i0 * a->es, n, a->t);
        return;
    }
    if (a->last && a->acc_is_out) {
        comm__reduce_final(acc, part, acc, n, ACCEL_F32, a->avg_n);
        return;
    }
    comm__reduce_f32(acc, part, acc, n, ACCEL_F32);
    if (!a->last)
        return;
    if (a->avg_n > 0)
        for (size_t i = 0; i < n; i++)
            acc[i] /= (float)a->avg_n; /* as comm__reduce_final divides */
    comm__from_f32(a->out + (i0 - a->out_base) * a->es, acc, n, a->t);
}

static enum accel_err acc_reserve(struct accel_comm *c, const char *what, size_t n,
                                  struct accel_error *err)
{
    struct sock *s = c->impl;

    if (s->acc != NULL && s->acc_len >= n)
        return ACCEL_OK;
    accel_free(s->acc);
    s->acc = accel_malloc((n ? n : 1) * sizeof(float));
    s->acc_len = s->acc != NULL ? n : 0;
    if (s->acc == NULL)
        return accel_error_set(err, ACCEL_ENOMEM,
                               "rank %u of %u: %s: out of memory for %zu partial sums", c->rank,
                               c->size, what, n);
    return ACCEL_OK;
}

/* Block b's first element: the all_reduce cut (count elements in n blocks)
 * or the all_gather one (blocks of `count`). */
static size_t boff(bool ar, size_t count, unsigned n, unsigned b)
{
    return ar ? comm__block_off(count, n, b) : b * count;
}

/* The all-gather by recursive doubling: rank r holds its block of out (type
 * es bytes an element); at the step of dimension d it sends the 2^d blocks
 * it holds to rank ^ 2^d and receives that rank's 2^d. */
static enum accel_err doubling(struct accel_comm *c, const char *what, const struct sock_hdr *h,
                               char *out, bool ar, size_t count, size_t es, struct accel_error *err)
{
    struct sock *s = c->impl;
    unsigned n = c->size;

    for (unsigned d = 0; d < s->dims; d++) {
        unsigned m = 1u << d, lo = c->rank & ~(m - 1), plo = lo ^ m;
        size_t a = boff(ar, count, n, lo), b = boff(ar, count, n, lo + m);
        size_t pa = boff(ar, count, n, plo), pb = boff(ar, count, n, plo + m);
        struct xchg x = {.what = what,
                         .d = d,
                         .hdr = h,
                         .sbuf = out + a * es,
                         .sbytes = (b - a) * es,
                         .rbuf = out + pa * es,
                         .rbytes = (pb - pa) * es};
        enum accel_err rc = exchange(c, &x, err);
        if (rc != ACCEL_OK)
            return rc;
    }
    return ACCEL_OK;
}

/* The reduce-scatter by recursive halving of `count` elements in n blocks
 * (the all_reduce cut, or blocks of count / n for reduce_scatter: `ar`):
 * at the step of mask m = n/2, ..., 1 this rank keeps the half of its range
 * that holds its block, sends the other half to rank ^ m and adds what that
 * rank sends.  The result (block r) goes to a->out. */
static enum accel_err halving(struct accel_comm *c, struct ar *a, const struct sock_hdr *h,
                              const char *what, bool ar, bool whole, size_t count,
                              struct accel_error *err)
{
    struct sock *s = c->impl;
    unsigned n = c->size, lo = 0, hi = n;
    size_t bc = ar ? count : count / n; /* boff's count */
    enum accel_err rc = comm__sock_stages(c, what, err);

    if (rc != ACCEL_OK)
        return rc;
    a->stage = s->stage_in;
    a->wide = s->stage_out;
    if (!a->acc_is_out) {
        /* the half kept at the first step (whole: everything), the largest
         * range summed here */
        unsigned klo = whole ? 0 : (c->rank & (n / 2)) ? n / 2 : 0;
        a->acc_base = boff(ar, bc, n, klo);
        rc = acc_reserve(c, what, boff(ar, bc, n, whole ? n : klo + n / 2) - a->acc_base, err);
        if (rc != ACCEL_OK)
            return rc;
        a->acc = s->acc;
    }
    for (unsigned k = 0; k < s->dims; k++) {
        unsigned d = s->dims - 1 - k, m = 1u << d, mid = lo + (hi - lo) / 2;
        bool upper = (c->rank & m) != 0;
        unsigned klo = upper ? mid : lo, khi = upper ? hi : mid;
        unsigned slo = upper ? lo : mid, shi = upper ? mid : hi;

        if (whole) { /* small messages: both send and keep everything */
            klo = slo = 0;
            khi = shi = n;
        }
        size_t ka = boff(ar, bc, n, klo), kb = boff(ar, bc, n, khi);
        size_t sa = boff(ar, bc, n, slo), sb = boff(ar, bc, n, shi);
        struct xchg x;

        a->step0 = k == 0;
        a->last = k + 1 == s->dims;
        a->first = ka;
        a->wire = a->step0 ? a->es : sizeof(float);
        memset(&x, 0, sizeof(x));
        x.what = what;
        x.d = d;
        x.hdr = h;
        if (a->step0) {
            x.sbuf = a->in + sa * a->es;
            x.sbytes = (sb - sa) * a->es;
        } else {
            x.sbuf = (const char *)(a->acc + (sa - a->acc_base));
            x.sbytes = (sb - sa) * sizeof(float);
        }
        x.rbuf = s->stage_in;
        x.rbytes = (kb - ka) * a->wire;
        /* a piece widens into one chunk of fp32 */
        x.piece = s->chunk_bytes / sizeof(float) * a->wire;
        /* whole: what is sent is what is summed into, so the sum waits
         * for the exchange to end (the message fits the stage) */
        x.sink = whole ? NULL : ar_sink;
        x.ctx = a;
        rc = exchange(c, &x, err);
        if (rc != ACCEL_OK)
            return rc;
        if (whole)
            ar_sink(a, 0, x.rbytes);
        lo = klo;
        hi = khi;
    }
    return ACCEL_OK;
}

static void ar_init(struct ar *a, const struct accel_comm *c, const void *send, void *recv,
                    enum accel_dtype t, enum accel_redop op)
{
    memset(a, 0, sizeof(*a));
    a->in = send;
    a->out = recv;
    a->t = t;
    a->es = accel_dtype_size(t);
    a->avg_n = op == ACCEL_AVG ? c->size : 0;
}

enum accel_err comm__sock_cube_all_reduce(struct accel_comm *c, const void *send, void *recv,
                                          size_t count, enum accel_dtype t, enum accel_redop op,
                                          struct accel_error *err)
{
    struct sock *s = c->impl;
    struct sock_hdr h;
    struct ar a;
    enum accel_err rc;

    ar_init(&a, c, send, recv, t, op);
    if (t == ACCEL_F32) {
        a.acc_is_out = true;
        a.acc = recv;
    }
    comm__sock_hdr(c, &h, SOCK_K_ALL_REDUCE, t, (unsigned)op, 0, count);
    /* Small messages: every step exchanges the whole vector (log2 n steps,
     * not 2 log2 n); the tree, and so the bits, are the same. */
    if (count * sizeof(float) <= SOCK_CUBE_WHOLE && count * sizeof(float) <= s->chunk_bytes)
        return halving(c, &a, &h, "all_reduce", true, true, count, err);
    rc = halving(c, &a, &h, "all_reduce", true, false, count, err);
    if (rc != ACCEL_OK)
        return rc;
    return doubling(c, "all_reduce", &h, recv, true, count, a.es, err);
}

enum accel_err comm__sock_cube_reduce_scatter(struct accel_comm *c, const void *send, void *recv,
                                              size_t recvcount, enum accel_dtype t,
                                              enum accel_redop op, struct accel_error *err)
{
    struct sock_hdr h;
    struct ar a;

    ar_init(&a, c, send, recv, t, op);
    a.out_base = (size_t)c->rank * recvcount;
    comm__sock_hdr(c, &h, SOCK_K_REDUCE_SCATTER, t, (unsigned)op, 0, recvcount);
    return halving(c, &a, &h, "reduce_scatter", false, false, (size_t)c->size * recvcount, err);
}

enum accel_err comm__sock_cube_all_gather(struct accel_comm *c, void *recv, size_t sendcount,
                                          enum accel_dtype t, struct accel_error *err)
{
    struct sock_hdr h;

    comm__sock_hdr(c, &h, SOCK_K_ALL_GATHER, t, 0, 0, sendcount);
    return doubling(c, "all_gather", &h, recv, false, sendcount, accel_dtype_size(t), err);
}
