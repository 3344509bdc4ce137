/*
 * socket_ring.c: every collective of the socket backend as one pipelined
 * ring over the two connections of socket_conn.c.
 *
 * The data is cut into `size` blocks (the first count % size of them one
 * element longer), each block into rounds of up to SOCK_ROUND_CHUNKS chunks
 * of chunk_bytes.  A round runs the reduce-scatter steps (rank r sends block
 * r-s-1 at step s and receives block r-s-2, adding its own values) and then
 * the all-gather steps (it sends block r-s and receives block r-s-1), chunk
 * by chunk.  Sends and receives are two ordered streams of such units that
 * run at once (socket_pump.c moves their bytes): a send waits only
 * for the unit it forwards to have arrived, a reduce-scatter receive only for
 * the scratch slot it overwrites to have been sent, so neither big messages nor a slow
 * neighbour can deadlock the ring, and each rank keeps at most
 * 2 x SOCK_ROUND_CHUNKS chunks of partial sums whatever the message size.
 *
 * Reduction order (what makes results bit-exact from run to run): element i
 * of block b is summed in fp32 in ring order starting at rank b+1:
 * ((x[b+1] + x[b+2]) + ...) + x[b], ranks mod size.  The blocks depend only
 * on (size, count), so the result does too; chunking changes nothing.  The
 * partial sums travel as fp32 whatever the type, so a bf16 or fp16 result
 * is rounded once, at the last hop, after the division of avg.
 *
 * all_gather is paced: a rank sends at most s->ring_window bytes beyond
 * what it has received, as the hypercube does (socket_cube.c), which keeps
 * the bytes in flight in the caches (measured at 2 ranks: 16 MiB 4.1 ms ->
 * 2.6 ms; the reductions got slower with it, so they are not paced).  It
 * cannot deadlock: a rank that is blocked has sent more than its previous
 * rank, by the window or by its own block, and that cannot hold all around
 * the ring.
 *
 * A rank that finds nothing to do retries for s->spin_s (default 20 us),
 * yielding the CPU, before it sleeps in poll() (socket_pump.c): waking a
 * sleeping process costs more than the usual wait for a neighbour's next
 * piece.
 *
 * Broadcast is a pipelined chain root, root+1, ..., root-1 over the same
 * connections; barrier is an all-gather of one byte per rank.  Each
 * operation starts with a header (sequence number, operation, type, count,
 * root) that the receiver compares with its own, so ranks that call
 * different operations fail with ACCEL_EINVAL instead of mixing data.
 */
#include <stdbool.h>
#include <string.h>

#include "accel/alloc.h"
#include "dtype_int.h"
#include "socket_int.h"

enum ring_kind {
    RING_ALL_REDUCE = SOCK_K_ALL_REDUCE,
    RING_REDUCE_SCATTER = SOCK_K_REDUCE_SCATTER,
    RING_ALL_GATHER = SOCK_K_ALL_GATHER,
    RING_BROADCAST = SOCK_K_BROADCAST
};

struct plan {
    enum ring_kind kind;
    const char *what; /* operation name, for messages */
    const char *in;
    char *out;
    size_t count; /* all_reduce, broadcast: all elements; others: one block */
    enum accel_dtype t;
    size_t es;      /* bytes of an element of the result (1 for barrier) */
    unsigned avg_n; /* divide the sum by this; 0 = sum */
    unsigned root;
    unsigned n, r;
    /* ring geometry (not broadcast) */
    unsigned nrs;   /* reduce-scatter steps of a round: 0 or n - 1 */
    unsigned steps; /* all steps of a round */
    size_t lc;      /* elements of a chunk */
    size_t nc;      /* chunks of a block in one step of a round */
    size_t nunits;  /* units of each stream */
    size_t chunk;   /* broadcast: bytes of a unit */
    /* all_gather: this rank's own block, still to be copied from its send
     * buffer into the result (own_done of own_bytes done); it is sent from
     * there, and copied while the ring waits */
    const char *own_src;
    size_t own_bytes, own_done;
    float *scratch;
    char *stage_in, *stage_out;
};

/* One unit of a stream.  For a receive, `buf` is where the bytes land and
 * `act` what happens when they are all there. */
enum unit_act { ACT_NONE, ACT_REDUCE, ACT_FINAL };
struct unit {
    char *buf;
    size_t bytes;
    enum unit_act act;
    const char *own; /* this rank's input for the same elements */
    void *dst;       /* ACT_REDUCE: fp32 scratch; ACT_FINAL: the result */
    size_t nel;
};

static unsigned mod(long long v, unsigned n)
{
    long long m = v % (long long)n;
    return (unsigned)(m < 0 ? m + n : m);
}

static size_t block_len(const struct plan *p, unsigned b)
{
    if (p->kind == RING_ALL_REDUCE)
        return p->count / p->n + (b < p->count % p->n ? 1 : 0);
    return p->count;
}

static size_t block_off(const struct plan *p, unsigned b)
{
    if (p->kind == RING_ALL_REDUCE)
        return comm__block_off(p->count, p->n, b);
    return b * p->count;
}

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Describes unit u of the send (is_send) or receive stream.  Preparing a
 * send of this rank's own data in a 16-bit type widens it into stage_out. */
static void unit_at(const struct plan *p, size_t u, bool is_send, struct unit *x)
{
    size_t per_round, j, rem, k, lo, hi, len, off, L, g;
    unsigned s, b;
    bool rs;

    memset(x, 0, sizeof(*x));
    if (p->kind == RING_BROADCAST) {
        size_t total = p->count * p->es;
        lo = u * p->chunk;
        x->bytes = min_sz(p->chunk, total - lo);
        x->buf = (is_send && p->r == p->root ? (char *)p->in : p->out) + lo;
        return;
    }
    per_round = (size_t)p->steps * p->nc;
    j = u / per_round;
    rem = u % per_round;
    s = (unsigned)(rem / p->nc);
    k = rem % p->nc;
    g = j * p->steps + s; /* global step, for the scratch slots */
    rs = s < p->nrs;
    if (is_send)
        b = rs ? mod((long long)p->r - s - 1, p->n) : mod((long long)p->r - (s - p->nrs), p->n);
    else
        b = rs ? mod((long long)p->r - s - 2, p->n) : mod((long long)p->r - (s - p->nrs) - 1, p->n);
    L = p->nc * p->lc;
    len = block_len(p, b);
    lo = j * L + k * p->lc;
    hi = min_sz(min_sz(lo + p->lc, (j + 1) * L), len);
    x->nel = hi > lo ? hi - lo : 0;
    off = block_off(p, b) + lo;
    if (!rs) {
        x->bytes = x->nel * p->es;
        x->buf = p->out + off * p->es;
        if (is_send && b == p->r && p->own_src != NULL) /* not copied yet, maybe */
            x->buf = (char *)p->own_src + (off - block_off(p, b)) * p->es;
        return;
    }
    x->bytes = x->nel * sizeof(float);
    if (is_send) {
        if (s > 0) {
            x->buf = (char *)(p->scratch + (((g - 1) % 2) * p->nc + k) * p->lc);
        } else if (p->t == ACCEL_F32) {
            x->buf = (char *)p->in + off * p->es;
        } else {
            comm__to_f32((float *)p->stage_out, p->in + off * p->es, x->nel, p->t);
            x->buf = p->stage_out;
        }
        return;
    }
    x->buf = p->stage_in;
    x->own = p->in + off * p->es;
    if (s + 1 == p->nrs) {
        x->act = ACT_FINAL;
        x->dst = p->kind == RING_ALL_REDUCE ? p->out + off * p->es : p->out + lo * p->es;
    } else {
        x->act = ACT_REDUCE;
        x->dst = p->scratch + ((g % 2) * p->nc + k) * p->lc;
    }
}

static void unit_finish(const struct plan *p, const struct unit *x)
{
    switch (x->act) {
    case ACT_NONE:
        return;
    case ACT_REDUCE:
        comm__reduce_f32(x->dst, (const float *)x->buf, x->own, x->nel, p->t);
        return;
    case ACT_FINAL:
        comm__reduce_final(x->dst, (const float *)x->buf, x->own, x->nel, p->t, p->avg_n);
        return;
    }
}

/* A send may start once the unit it forwards has arrived (nrecv units have);
 * a receive once the scratch slot it overwrites has been sent. */
static bool send_ready(const struct plan *p, size_t u, size_t nrecv)
{
    if (p->kind == RING_BROADCAST)
        return p->r == p->root || nrecv > u;
    if ((u % ((size_t)p->steps * p->nc)) < p->nc) /* step 0 of a round: own data */
        return true;
    return nrecv + p->nc > u;
}

static bool recv_ready(const struct plan *p, size_t v, size_t nsent)
{
    size_t s;

    if (p->kind == RING_BROADCAST)
        return true;
    /* An all-gather unit lands in the result, which no pending send reads
     * before the data it depends on has been sent (the value of a block
     * arriving here includes what this rank sent for it), so it may run
     * ahead; a reduce-scatter unit must wait for its scratch slot. */
    s = (v % ((size_t)p->steps * p->nc)) / p->nc;
    if (s >= p->nrs)
        return true;
    return v < p->nc || nsent + p->nc > v;
}

/* The ring's state for the pump: where each stream is in its units. */
struct side {
    size_t u;      /* units done */
    size_t off;    /* bytes of unit u done */
    bool prepared; /* cur describes unit u */
    struct unit cur;
};
struct ring {
    struct plan *p;
    struct side tx, rx;
};

/* The next bytes to send: unit by unit, each once its data is there. */
static enum sock_span ring_tx_span(void *ctx, struct sock_pump *pump, char **buf, size_t *len)
{
    struct ring *g = ctx;
    struct side *tx = &g->tx;

    for (;;) {
        if (tx->u == g->p->nunits)
            return SOCK_SPAN_END;
        if (!tx->prepared) {
            /* an empty unit sends nothing and waits for nothing: done at
             * once, or a next rank that needed nothing more from us could
             * finish and half-close (its graceful free) while we wait, and
             * that FIN would read as a failure */
            unit_at(g->p, tx->u, true, &tx->cur);
            if (tx->cur.bytes > 0 && !send_ready(g->p, tx->u, g->rx.u))
                return SOCK_SPAN_BLOCKED;
            tx->prepared = true;
            tx->off = 0;
        }
        if (tx->off < tx->cur.bytes)
            break;
        tx->u++;
        tx->prepared = false;
        pump->moved = true;
    }
    *buf = tx->cur.buf + tx->off;
    *len = tx->cur.bytes - tx->off;
    return SOCK_SPAN_DATA;
}

static void ring_tx_moved(void *ctx, size_t n)
{
    ((struct ring *)ctx)->tx.off += n;
}

/* Where the next bytes land: unit by unit, each once its slot is free; a
 * unit all there is reduced (or stored) before the next. */
static enum sock_span ring_rx_span(void *ctx, struct sock_pump *pump, char **buf, size_t *len)
{
    struct ring *g = ctx;
    struct side *rx = &g->rx;

    for (;;) {
        if (rx->u == g->p->nunits)
            return SOCK_SPAN_END;
        if (!rx->prepared) {
            if (!recv_ready(g->p, rx->u, g->tx.u))
                return SOCK_SPAN_BLOCKED;
            unit_at(g->p, rx->u, false, &rx->cur);
            rx->prepared = true;
            rx->off = 0;
        }
        if (rx->off < rx->cur.bytes)
            break;
        unit_finish(g->p, &rx->cur);
        rx->u++;
        rx->prepared = false;
        pump->moved = true;
    }
    *buf = rx->cur.buf + rx->off;
    *len = rx->cur.bytes - rx->off;
    return SOCK_SPAN_DATA;
}

static void ring_rx_moved(void *ctx, size_t n)
{
    ((struct ring *)ctx)->rx.off += n;
}

/* all_gather's own block, copied into the result a piece at a time while
 * the ring waits (its first send reads it from the send buffer), instead
 * of before anything is sent: a pair's all_gather of 64 MiB across the lab
 * went from 13.8-14.4 ms to 13.0-13.3 ms; pieces of 256 KiB held up the
 * replies to what arrived meanwhile (1 MiB: 127-145 us -> 155-175 us). */
#define OWN_PIECE (64u << 10)
static bool copy_own(struct plan *p, size_t most)
{
    size_t n = p->own_bytes - p->own_done;

    if (n == 0)
        return false;
    n = n < most ? n : most;
    memcpy(p->out + (size_t)p->r * p->own_bytes + p->own_done, p->own_src + p->own_done, n);
    p->own_done += n;
    return true;
}

static bool ring_idle(void *ctx)
{
    return copy_own(((struct ring *)ctx)->p, OWN_PIECE);
}

/* Runs the two streams of plan p to the end or to the deadline: sends go to
 * the next rank, receives come from the previous one. */
static enum accel_err ring_run(struct accel_comm *c, struct plan *p, const struct sock_hdr *hdr,
                               struct accel_error *err)
{
    struct sock *s = c->impl;
    struct ring g = {.p = p};
    struct sock_pump pump = {
        .what = p->what,
        .hdr = hdr,
        .tx = {.fd = s->next_fd, .peer = s->next, .addr = s->next_addr},
        .rx = {.fd = s->prev_fd, .peer = s->prev, .addr = s->prev_addr},
        /* see the head of the file */
        .window = p->kind == RING_ALL_GATHER ? comm__sock_pace(s, s->ring_window, s->next_same) : 0,
        .tx_span = ring_tx_span,
        .tx_moved = ring_tx_moved,
        .rx_span = ring_rx_span,
        .rx_moved = ring_rx_moved,
        .idle = ring_idle,
        .ctx = &g};
    enum accel_err rc;

    if (s->next_q.ctl != NULL)
        pump.tx.q = &s->next_q;
    if (s->prev_q.ctl != NULL)
        pump.rx.q = &s->prev_q;
    if (p->kind == RING_BROADCAST) {
        /* a chain: the root receives nothing, the last rank sends nothing */
        pump.tx.ended = mod((long long)p->r - p->root, p->n) + 1 == p->n;
        pump.rx.ended = p->r == p->root;
    }
    rc = comm__sock_pump(c, &pump, err);
    if (rc == ACCEL_OK)
        copy_own(p, p->own_bytes);
    return rc;
}

/* Sets up the geometry of a ring plan and the working memory it needs. */
static enum accel_err plan_ring(struct accel_comm *c, struct plan *p, struct accel_error *err)
{
    struct sock *s = c->impl;
    size_t maxlen = p->kind == RING_ALL_REDUCE ? (p->count + p->n - 1) / p->n : p->count;
    size_t wire = p->nrs > 0 ? sizeof(float) : p->es; /* widest element on the wire */
    size_t rounds;

    p->steps = p->nrs + (p->kind == RING_REDUCE_SCATTER ? 0 : p->n - 1);
    p->lc = s->chunk_bytes / wire;
    /* A block smaller than a round still goes in SOCK_ROUND_CHUNKS pieces
     * (of SOCK_MIN_PIPE bytes at least), so that a rank forwards the first
     * piece of a step while the rest of it is still arriving. */
    if (maxlen < p->lc * SOCK_ROUND_CHUNKS) {
        size_t piece = (maxlen + SOCK_ROUND_CHUNKS - 1) / SOCK_ROUND_CHUNKS;
        size_t floor = min_sz(SOCK_MIN_PIPE / wire, p->lc); /* never past a chunk */
        p->lc = piece > floor ? piece : floor;
        if (p->lc > maxlen)
            p->lc = maxlen;
    }
    if (p->lc == 0)
        p->lc = 1;
    p->nc = (maxlen + p->lc - 1) / p->lc;
    if (p->nc > SOCK_ROUND_CHUNKS)
        p->nc = SOCK_ROUND_CHUNKS;
    if (p->nc == 0)
        p->nc = 1;
    rounds = (maxlen + p->nc * p->lc - 1) / (p->nc * p->lc);
    if (rounds == 0)
        rounds = 1;
    p->nunits = rounds * p->steps * p->nc;
    if (p->nrs > 0) {
        enum accel_err rc;

        if (s->scratch == NULL)
            s->scratch = accel_malloc(2 * SOCK_ROUND_CHUNKS * s->chunk_bytes);
        if (s->scratch == NULL)
            return accel_error_set(err, ACCEL_ENOMEM,
                                   "rank %u of %u: %s: out of memory for %zu-byte chunks", c->rank,
                                   c->size, p->what, s->chunk_bytes);
        if ((rc = comm__sock_stages(c, p->what, err)) != ACCEL_OK)
            return rc;
        p->scratch = s->scratch;
        p->stage_in = s->stage_in;
        p->stage_out = s->stage_out;
    }
    return ACCEL_OK;
}

static void plan_init(struct accel_comm *c, struct plan *p, enum ring_kind kind, const char *what,
                      const void *send, void *recv, size_t count, enum accel_dtype t)
{
    memset(p, 0, sizeof(*p));
    p->kind = kind;
    p->what = what;
    p->in = send;
    p->out = recv;
    p->count = count;
    p->t = t;
    p->es = accel_dtype_size(t);
    p->n = c->size;
    p->r = c->rank;
}

/* all_reduce and reduce_scatter: the same ring, with or without its
 * all-gather half (`count` is the whole count, or the count per rank). */
static enum accel_err reducing(struct accel_comm *c, enum ring_kind kind, const char *what,
                               const void *send, void *recv, size_t count, enum accel_dtype t,
                               enum accel_redop op, struct accel_error *err)
{
    struct plan p;
    struct sock_hdr h;
    struct sock *s = c->impl;
    enum accel_err rc;

    plan_init(c, &p, kind, what, send, recv, count, t);
    if (c->size == 1) {
        if (send != recv)
            memcpy(recv, send, count * p.es);
        return ACCEL_OK;
    }
    if (s->onehost != NULL)
        return comm__sock_host_reduce(c, (unsigned)kind, send, recv, count, t, op, err);
    /* the hypercube's partial sums: half the message in fp32 (an fp32
     * all_reduce keeps them in the result, but decides as reduce_scatter
     * does, so that both always sum in the same order) */
    if (kind == RING_ALL_REDUCE && comm__sock_use_cube(c, (uint64_t)count * sizeof(float) / 2))
        return comm__sock_cube_all_reduce(c, send, recv, count, t, op, err);
    if (kind == RING_REDUCE_SCATTER &&
        comm__sock_use_cube(c, (uint64_t)c->size * count * sizeof(float) / 2))
        return comm__sock_cube_reduce_scatter(c, send, recv, count, t, op, err);
    p.avg_n = op == ACCEL_AVG ? c->size : 0;
    p.nrs = c->size - 1;
    rc = plan_ring(c, &p, err);
    if (rc != ACCEL_OK)
        return rc;
    comm__sock_hdr(c, &h, (unsigned)kind, t, (unsigned)op, 0, count);
    return ring_run(c, &p, &h, err);
}

enum accel_err comm__sock_all_reduce(struct accel_comm *c, const void *send, void *recv,
                                     size_t count, enum accel_dtype t, enum accel_redop op,
                                     struct accel_error *err)
{
    return reducing(c, RING_ALL_REDUCE, "all_reduce", send, recv, count, t, op, err);
}

enum accel_err comm__sock_reduce_scatter(struct accel_comm *c, const void *send, void *recv,
                                         size_t recvcount, enum accel_dtype t, enum accel_redop op,
                                         struct accel_error *err)
{
    return reducing(c, RING_REDUCE_SCATTER, "reduce_scatter", send, recv, recvcount, t, op, err);
}

/* The all-gather of `count` elements of type t, or, for the barrier, of one
 * byte per rank. */
static enum accel_err all_gather_bytes(struct accel_comm *c, bool barrier, const void *send,
                                       void *recv, size_t count, enum accel_dtype t,
                                       struct accel_error *err)
{
    struct plan p;
    struct sock_hdr h;
    struct sock *s = c->impl;
    enum accel_err rc;
    size_t es = barrier ? 1 : accel_dtype_size(t);
    char *own = (char *)recv + (size_t)c->rank * count * es;

    plan_init(c, &p, RING_ALL_GATHER, barrier ? "barrier" : "all_gather", send, recv, count, t);
    p.es = es;
    if (s->onehost != NULL && c->size > 1) /* it copies this rank's own part itself */
        return comm__sock_host_move(c, barrier ? SOCK_K_BARRIER : SOCK_K_ALL_GATHER, send, recv,
                                    count, es, t, 0, err);
    if (c->size > 1 && !barrier && !comm__sock_use_cube(c, 0) &&
        ((const char *)send + count * es <= (char *)recv ||
         (const char *)send >= (char *)recv + (size_t)c->size * count * es)) {
        p.own_src = send; /* apart from the result: the ring copies it while it waits */
        p.own_bytes = count * es;
    } else if (send != own) {
        memmove(own, send, count * es);
    }
    if (c->size == 1)
        return ACCEL_OK;
    if (!barrier && comm__sock_use_cube(c, 0))
        return comm__sock_cube_all_gather(c, recv, count, t, err);
    rc = plan_ring(c, &p, err);
    if (rc != ACCEL_OK)
        return rc;
    comm__sock_hdr(c, &h, barrier ? SOCK_K_BARRIER : SOCK_K_ALL_GATHER, t, 0, 0, count);
    return ring_run(c, &p, &h, err);
}

enum accel_err comm__sock_all_gather(struct accel_comm *c, const void *send, void *recv,
                                     size_t sendcount, enum accel_dtype t, struct accel_error *err)
{
    return all_gather_bytes(c, false, send, recv, sendcount, t, err);
}

enum accel_err comm__sock_broadcast(struct accel_comm *c, const void *send, void *recv,
                                    size_t count, enum accel_dtype t, unsigned root,
                                    struct accel_error *err)
{
    struct plan p;
    struct sock_hdr h;
    struct sock *s = c->impl;
    size_t total;

    plan_init(c, &p, RING_BROADCAST, "broadcast", send, recv, count, t);
    p.root = root;
    total = count * p.es;
    if (s->onehost != NULL && c->size > 1) /* the root copies its own itself */
        return comm__sock_host_move(c, SOCK_K_BROADCAST, send, recv, count, p.es, t, root, err);
    if (c->rank == root && send != recv)
        memcpy(recv, send, total);
    if (c->size == 1)
        return ACCEL_OK;
    p.chunk = s->chunk_bytes;
    p.nunits = (total + p.chunk - 1) / p.chunk;
    comm__sock_hdr(c, &h, SOCK_K_BROADCAST, t, 0, root, count);
    return ring_run(c, &p, &h, err);
}

enum accel_err comm__sock_barrier(struct accel_comm *c, struct accel_error *err)
{
    char token = 1, all[256];
    char *buf = c->size <= sizeof(all) ? all : accel_malloc(c->size);
    enum accel_err rc;

    if (buf == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "rank %u of %u: barrier: out of memory", c->rank,
                               c->size);
    rc = all_gather_bytes(c, true, &token, buf, 1, ACCEL_F32, err);
    if (buf != all)
        accel_free(buf);
    return rc;
}
