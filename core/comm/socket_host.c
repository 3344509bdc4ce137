/*
 * socket_host.c: the collectives of a socket communicator whose ranks are
 * all on one host, by single copy from each other's buffers, with no queue
 * and no pipeline.
 *
 * Where every rank is on this host (every link of the ring and of the
 * hypercube is within it), shared memory is on and each rank may read the
 * others' memory (process_vm_readv: the same user, no ptrace restriction),
 * a rank does not pass data along a ring: it reads what it needs straight
 * from the rank that has it.  One segment holds a slot per rank: the
 * operation's header, where its buffers are, and a counter of the phases it
 * has completed.  An operation is two or three phases:
 *
 *   post    each rank writes its header and buffers and waits for every
 *           other rank to have done so; the headers must all be equal
 *           (ranks that call different operations fail with ACCEL_EINVAL);
 *   reduce  rank r reads block r of every rank's input, chunk by chunk,
 *           and sums it in the order the TCP path would (below), into
 *           block r of its result; all_gather and broadcast read what they
 *           need instead;
 *   gather  (all_reduce) rank r reads block j of rank j's result, for
 *           every j;
 *
 * and every phase but the last ends when every rank has finished it, so a
 * buffer is never read after its owner may change it.  A barrier is the
 * post alone.
 *
 * Reduction order: the TCP path's, so that results are bit-identical
 * whichever path runs: where socket_ring.c would sum (a communicator that
 * is not a power of two, or partial sums past cube_mem), block b is
 * ((x[b+1] + x[b+2]) + ...) + x[b]; where socket_cube.c would, the tree of
 * pairs at distance n/2 first, then n/4, ..., then 1.  Sums are fp32, the
 * 16-bit inputs widened exactly, a 16-bit result narrowed once, after the
 * division of avg.
 *
 * Waiting: a rank spins (socket.c's comm__sock_spin) and then sleeps on the
 * other rank's counter (a futex on the shared page: the rank that moves its
 * counter wakes those who said they sleep on it).  It does not spin for a
 * rank that last ran on its own CPU (each slot says where its rank ran):
 * that rank needs the CPU, and the wake-up that ends the sleep puts one of
 * the two on an idle CPU where there is one (forked ranks that started on
 * one CPU were served by turns for ~10 ms, 55 us per all_gather of 1 MiB,
 * until the kernel moved one).  A sleeping rank wakes every HOST_NAP_S
 * to check the deadline and whether the rank it waits for is still alive
 * (a pidfd, readable once the process has exited).  A rank that fails sets
 * the segment's failed flag and wakes everyone, after recording the failure
 * in the store (socket.c), so the others report the first failure at once.
 *
 * Set-up: rank 0 creates the segment (comm__shm_create) and offers it
 * through the store; the others map it (comm__shm_open, which unlinks the
 * name) and fill their slots; an all_gather over TCP says whether every
 * rank did; rank 0 unlinks the name (a crash before that is swept by the
 * next communicator: socket_shm.c).  Then each rank reads a word from every
 * other rank's memory and opens its pidfd, and a second all_gather says
 * whether every rank could.  Anything short of all of it leaves the
 * communicator on its links (socket_shm.c, TCP).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "../base/random.h"
#include "dtype_int.h"
#include "socket_int.h"

#define CACHE_LINE 64
#define HOST_CHUNK (16u << 10) /* elements summed at a time: 64 KiB of fp32 */
#define HOST_NAP_S 0.02        /* a sleeping rank looks at the deadline this often */
/* bytes read across at a time: one call for 32 MiB ran at 8.3 GB/s, calls
 * of 256 KiB to 4 MiB at 9.9 GB/s (the kernel pins the pages of each) */
#define HOST_PIECE (1u << 20)

/* A rank's operation: its header and buffers (in its address space).  A
 * slot holds two, by the parity of the sequence number: a rank that has
 * passed a barrier may post its next operation while another still reads
 * the barrier's header, and can get no further ahead than that. */
struct host_op {
    struct sock_hdr hdr;
    uint64_t send, recv;
};

struct host_slot {
    _Alignas(CACHE_LINE) _Atomic uint32_t arrive; /* phases this rank has completed */
    _Atomic uint32_t sleepers;                    /* ranks asleep on arrive */
    _Atomic int32_t cpu;                          /* where it ran when it last arrived */
    _Alignas(CACHE_LINE) struct host_op op[2];
    uint64_t probe; /* where it holds the token */
    int64_t pid;
};

struct host_head {
    uint64_t token;
    uint32_t n;
    _Atomic uint32_t failed;
    struct host_slot slot[];
};

struct sock_host {
    struct host_head *h;
    uint64_t probe;  /* the token, read by the others at set-up */
    uint32_t phase;  /* phases this rank has completed */
    unsigned parity; /* of the operation running: its slots' op[] */
    int *pidfd;      /* per rank; -1 for this one */
    float *sums;     /* log2(n) + 2 chunks of fp32 partial sums */
    void *stage;     /* one chunk as read from another rank */
};

static size_t head_bytes(unsigned n)
{
    return sizeof(struct host_head) + (size_t)n * sizeof(struct host_slot);
}

/* ------------------------------------------------------------ waiting */

static void futex_wait(_Atomic uint32_t *word, uint32_t val, double secs)
{
    struct timespec ts;

    if (secs <= 0)
        return;
    ts.tv_sec = (time_t)secs;
    ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
    (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    (void)syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Rank j's process has exited (its pidfd is readable). */
static bool gone(const struct sock_host *hm, unsigned j)
{
    struct pollfd p = {hm->pidfd[j], POLLIN, 0};

    return poll(&p, 1, 0) > 0;
}

static enum accel_err exited(struct accel_comm *c, struct accel_error *err, const char *what,
                             unsigned j)
{
    struct sock *s = c->impl;

    return comm__sock_fail(c, err, what, ACCEL_EPEER, "rank %u (pid %lld on this host) exited", j,
                           (long long)s->onehost->h->slot[j].pid);
}

/* Until rank j has completed this rank's phases too. */
static enum accel_err wait_rank(struct accel_comm *c, unsigned j, const char *what, double deadline,
                                struct accel_error *err)
{
    struct sock *s = c->impl;
    struct sock_host *hm = s->onehost;
    struct host_slot *sl = &hm->h->slot[j];
    double idle = 0, now;

    for (;;) {
        uint32_t a = atomic_load_explicit(&sl->arrive, memory_order_acquire);

        if ((int32_t)(a - hm->phase) >= 0)
            return ACCEL_OK;
        if (atomic_load_explicit(&hm->h->failed, memory_order_relaxed))
            return comm__sock_fail(c, err, what, ACCEL_EPEER, "another rank on this host failed");
        /* spinning only helps when the rank waited for runs elsewhere:
         * on this CPU it needs it, and the wake-up that ends a sleep puts
         * one of the two on an idle CPU where there is one */
        if (atomic_load_explicit(&sl->cpu, memory_order_relaxed) != sched_getcpu() &&
            comm__sock_spin(s, &idle))
            continue;
        if (gone(hm, j))
            return exited(c, err, what, j);
        now = accel_now();
        if (now >= deadline)
            return comm__sock_fail(c, err, what, ACCEL_ETIMEDOUT,
                                   "no progress with rank %u (pid %lld on this host) within %g s",
                                   j, (long long)sl->pid, c->timeout_s);
        /* say we sleep, then look again: the other side moves its counter,
         * then looks for sleepers, so one of us sees the other */
        atomic_fetch_add(&sl->sleepers, 1);
        a = atomic_load(&sl->arrive);
        if ((int32_t)(a - hm->phase) < 0 && !atomic_load(&hm->h->failed))
            futex_wait(&sl->arrive, a, deadline - now < HOST_NAP_S ? deadline - now : HOST_NAP_S);
        atomic_fetch_sub(&sl->sleepers, 1);
    }
}

/* This rank completed a phase: says so, then waits for every other rank to
 * complete it too. */
static enum accel_err phase_done(struct accel_comm *c, const char *what, double deadline,
                                 struct accel_error *err)
{
    struct sock *s = c->impl;
    struct sock_host *hm = s->onehost;
    struct host_slot *mine = &hm->h->slot[c->rank];
    enum accel_err rc = ACCEL_OK;

    atomic_store_explicit(&mine->cpu, sched_getcpu(), memory_order_relaxed);
    atomic_store_explicit(&mine->arrive, ++hm->phase, memory_order_seq_cst);
    if (atomic_load(&mine->sleepers) != 0)
        futex_wake(&mine->arrive);
    for (unsigned k = 1; rc == ACCEL_OK && k < c->size; k++)
        rc = wait_rank(c, (c->rank + k) % c->size, what, deadline, err);
    return rc;
}

void comm__sock_host_abort(struct sock *s)
{
    if (s->onehost == NULL)
        return;
    atomic_store(&s->onehost->h->failed, 1);
    for (unsigned j = 0; j < s->onehost->h->n; j++)
        futex_wake(&s->onehost->h->slot[j].arrive);
}

/* ------------------------------------------------------------ moving */

/* len bytes at addr in rank j's memory into dst. */
static enum accel_err peer_read(struct accel_comm *c, unsigned j, void *dst, uint64_t addr,
                                size_t len, const char *what, struct accel_error *err)
{
    struct sock *s = c->impl;
    pid_t pid = (pid_t)s->onehost->h->slot[j].pid;

    while (len > 0) {
        size_t piece = len < HOST_PIECE ? len : HOST_PIECE;
        struct iovec local = {dst, piece}, remote = {(void *)(uintptr_t)addr, piece};
        ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);

        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == ESRCH)
            return exited(c, err, what, j);
        if (got <= 0)
            return comm__sock_fail(
                c, err, what, ACCEL_EPEER,
                "couldn't read the buffer of rank %u (pid %lld on this host): %s", j,
                (long long)pid, got < 0 ? strerror(errno) : "nothing read");
        dst = (char *)dst + got;
        addr += (uint64_t)got;
        len -= (size_t)got;
    }
    return ACCEL_OK;
}

/* Rank j's operation, the one this rank runs. */
static const struct host_op *op_of(const struct sock *s, unsigned j)
{
    return &s->onehost->h->slot[j].op[s->onehost->parity];
}

/* Every rank's header and buffers: written, then waited for and compared. */
static enum accel_err post(struct accel_comm *c, const struct sock_hdr *h, const void *send,
                           const void *recv, const char *what, double deadline,
                           struct accel_error *err)
{
    struct sock *s = c->impl;
    struct host_op *mine;
    enum accel_err rc;

    s->onehost->parity = h->seq & 1u;
    mine = &s->onehost->h->slot[c->rank].op[s->onehost->parity];
    mine->hdr = *h;
    mine->send = (uint64_t)(uintptr_t)send;
    mine->recv = (uint64_t)(uintptr_t)recv;
    if ((rc = phase_done(c, what, deadline, err)) != ACCEL_OK)
        return rc;
    for (unsigned j = 0; j < c->size; j++) {
        struct sock_hdr in = op_of(s, j)->hdr;
        if (memcmp(&in, h, sizeof(in)) != 0)
            return comm__sock_mismatch(c, err, what, j, &in, h);
    }
    return ACCEL_OK;
}

/* ------------------------------------------------------------ sums */

/* m elements of rank j's input at byte offset off, widened into dst. */
static enum accel_err load(struct accel_comm *c, unsigned j, const char *own, size_t off, size_t m,
                           enum accel_dtype t, float *dst, const char *what,
                           struct accel_error *err)
{
    struct sock *s = c->impl;
    struct sock_host *hm = s->onehost;
    enum accel_err rc;

    if (j == c->rank) {
        comm__to_f32(dst, own + off, m, t);
        return ACCEL_OK;
    }
    if (t == ACCEL_F32)
        return peer_read(c, j, dst, op_of(s, j)->send + off, m * sizeof(float), what, err);
    rc = peer_read(c, j, hm->stage, op_of(s, j)->send + off, m * accel_dtype_size(t), what, err);
    if (rc == ACCEL_OK)
        comm__to_f32(dst, hm->stage, m, t);
    return rc;
}

/* The ring's order (socket_ring.c): ranks r+1, r+2, ..., r-1 summed into
 * hm->sums; the caller adds r itself. */
static enum accel_err sum_chain(struct accel_comm *c, const char *own, size_t off, size_t m,
                                enum accel_dtype t, const char *what, struct accel_error *err)
{
    struct sock *s = c->impl;
    struct sock_host *hm = s->onehost;
    float *acc = hm->sums;
    size_t es = accel_dtype_size(t);
    enum accel_err rc = load(c, (c->rank + 1) % c->size, own, off, m, t, acc, what, err);

    for (unsigned k = 2; rc == ACCEL_OK && k < c->size; k++) {
        unsigned j = (c->rank + k) % c->size;
        rc = peer_read(c, j, hm->stage, op_of(s, j)->send + off, m * es, what, err);
        if (rc == ACCEL_OK)
            comm__reduce_f32(acc, acc, hm->stage, m, t);
    }
    return rc;
}

/* The hypercube's tree (socket_cube.c): pairs at distance n/2 first, then
 * n/4, ..., 1.  Leaf y is rank r ^ y; taking the leaves in bit-reversed
 * order, each pair completes on a stack of partial sums, so the result
 * lands in hm->sums with log2(n) + 1 chunks of room. */
static enum accel_err sum_tree(struct accel_comm *c, const char *own, size_t off, size_t m,
                               enum accel_dtype t, const char *what, struct accel_error *err)
{
    struct sock *s = c->impl;
    struct sock_host *hm = s->onehost;
    unsigned top = 0;

    for (unsigned i = 0; i < c->size; i++) {
        unsigned y = 0;
        enum accel_err rc;

        for (unsigned b = 0; b < s->dims; b++) /* the tree's levels */
            y |= ((i >> b) & 1u) << (s->dims - 1 - b);
        rc = load(c, c->rank ^ y, own, off, m, t, hm->sums + (size_t)top * HOST_CHUNK, what, err);
        if (rc != ACCEL_OK)
            return rc;
        top++;
        for (unsigned k = i + 1; (k & 1u) == 0; k >>= 1, top--) {
            float *a = hm->sums + (size_t)(top - 2) * HOST_CHUNK;
            comm__reduce_f32(a, a, a + HOST_CHUNK, m, ACCEL_F32);
        }
    }
    return ACCEL_OK;
}

/* Elements [first, first + nel) of every rank's input (first counted from
 * the start of `send`), summed in the TCP path's order, divided for avg and
 * narrowed into out. */
static enum accel_err reduce_range(struct accel_comm *c, const char *send, size_t first, size_t nel,
                                   enum accel_dtype t, unsigned avg_n, bool tree, char *out,
                                   const char *what, struct accel_error *err)
{
    struct sock *s = c->impl;
    float *acc = s->onehost->sums;
    size_t es = accel_dtype_size(t);

    for (size_t lo = 0; lo < nel; lo += HOST_CHUNK) {
        size_t m = nel - lo < HOST_CHUNK ? nel - lo : HOST_CHUNK, off = (first + lo) * es;
        enum accel_err rc = tree ? sum_tree(c, send, off, m, t, what, err)
                                 : sum_chain(c, send, off, m, t, what, err);
        if (rc != ACCEL_OK)
            return rc;
        if (!tree) { /* the ring's last hop: this rank's own values */
            comm__reduce_final(out + lo * es, acc, send + off, m, t, avg_n);
            continue;
        }
        if (avg_n > 0)
            for (size_t i = 0; i < m; i++)
                acc[i] /= (float)avg_n; /* as comm__reduce_final divides */
        comm__from_f32(out + lo * es, acc, m, t);
    }
    return ACCEL_OK;
}

enum accel_err comm__sock_host_reduce(struct accel_comm *c, unsigned kind, const void *send,
                                      void *recv, size_t count, enum accel_dtype t,
                                      enum accel_redop op, struct accel_error *err)
{
    struct sock *s = c->impl;
    const char *what = kind == SOCK_K_ALL_REDUCE ? "all_reduce" : "reduce_scatter";
    double deadline = accel_now() + c->timeout_s;
    size_t es = accel_dtype_size(t), first, nel;
    unsigned n = c->size, r = c->rank, avg_n = op == ACCEL_AVG ? n : 0;
    struct sock_hdr h;
    bool tree;
    enum accel_err rc;

    comm__sock_hdr(c, &h, kind, t, (unsigned)op, 0, count);
    if ((rc = post(c, &h, send, recv, what, deadline, err)) != ACCEL_OK)
        return rc;
    /* the ring or the hypercube, as socket_ring.c would choose */
    if (kind == SOCK_K_ALL_REDUCE) {
        first = comm__block_off(count, n, r);
        nel = comm__block_off(count, n, r + 1) - first;
        tree = comm__sock_use_cube(c, (uint64_t)count * sizeof(float) / 2);
        rc =
            reduce_range(c, send, first, nel, t, avg_n, tree, (char *)recv + first * es, what, err);
    } else {
        tree = comm__sock_use_cube(c, (uint64_t)n * count * sizeof(float) / 2);
        rc = reduce_range(c, send, (size_t)r * count, count, t, avg_n, tree, recv, what, err);
    }
    if (rc == ACCEL_OK && kind == SOCK_K_ALL_REDUCE) {
        rc = phase_done(c, what, deadline, err);
        for (unsigned k = 1; rc == ACCEL_OK && k < n; k++) {
            unsigned j = (r + k) % n;
            first = comm__block_off(count, n, j);
            nel = comm__block_off(count, n, j + 1) - first;
            rc = peer_read(c, j, (char *)recv + first * es, op_of(s, j)->recv + first * es,
                           nel * es, what, err);
        }
    }
    if (rc == ACCEL_OK)
        rc = phase_done(c, what, deadline, err);
    return rc;
}

enum accel_err comm__sock_host_move(struct accel_comm *c, unsigned kind, const void *send,
                                    void *recv, size_t count, size_t es, enum accel_dtype t,
                                    unsigned root, struct accel_error *err)
{
    struct sock *s = c->impl;
    const char *what = kind == SOCK_K_BARRIER     ? "barrier"
                       : kind == SOCK_K_BROADCAST ? "broadcast"
                                                  : "all_gather";
    double deadline = accel_now() + c->timeout_s;
    size_t bytes = count * es;
    char *own = (char *)recv + (size_t)c->rank * bytes;
    struct sock_hdr h;
    enum accel_err rc;

    comm__sock_hdr(c, &h, kind, t, 0, root, count);
    if ((rc = post(c, &h, send, recv, what, deadline, err)) != ACCEL_OK || kind == SOCK_K_BARRIER)
        return rc;
    if (kind == SOCK_K_BROADCAST && c->rank != root)
        rc = peer_read(c, root, recv, op_of(s, root)->send, bytes, what, err);
    for (unsigned k = 1; kind == SOCK_K_ALL_GATHER && rc == ACCEL_OK && k < c->size; k++) {
        unsigned j = (c->rank + k) % c->size;
        rc = peer_read(c, j, (char *)recv + j * bytes, op_of(s, j)->send, bytes, what, err);
    }
    /* this rank's own part last: the others read its send buffer, not this */
    if (rc == ACCEL_OK && kind == SOCK_K_ALL_GATHER && (const char *)send != own)
        memmove(own, send, bytes);
    if (rc == ACCEL_OK && kind == SOCK_K_BROADCAST && c->rank == root && send != recv)
        memcpy(recv, send, bytes);
    if (rc == ACCEL_OK)
        rc = phase_done(c, what, deadline, err);
    return rc;
}

/* ------------------------------------------------------------ set-up */

/* Whether every link of this rank stays on this host with shared memory
 * and single copy on. */
static bool wanted(const struct sock *s)
{
    if (s->shm_cap == 0 || !s->cma || !s->next_same || !s->prev_same)
        return false;
    for (unsigned d = 0; d < s->dims; d++)
        if (!s->cube_same[d])
            return false;
    return true;
}

/* Every rank says yes or no; *all: every rank said yes. */
static enum accel_err vote(struct accel_comm *c, bool yes, bool *all, struct accel_error *err)
{
    uint16_t *v = accel_calloc(c->size, sizeof(*v));
    enum accel_err rc;

    *all = false;
    if (v == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "rank %u of %u: init: out of memory", c->rank,
                               c->size);
    v[c->rank] = yes ? 1 : 0;
    rc = comm__sock_all_gather(c, v + c->rank, v, 1, ACCEL_BF16, err);
    *all = rc == ACCEL_OK;
    for (unsigned j = 0; *all && j < c->size; j++)
        *all = v[j] == 1;
    accel_free(v);
    return rc;
}

/* Rank 0's offer "name token", or "-"; the others' segment, checked. */
static enum accel_err share_segment(struct accel_comm *c, bool want, struct host_head **out,
                                    char *name, size_t size, struct accel_error *err)
{
    size_t bytes = head_bytes(c->size);
    unsigned long long token = 0;
    char k[200], v[200] = "-";
    struct host_head *h = NULL;
    enum accel_err rc;

    snprintf(k, sizeof(k), "%shost", c->prefix);
    if (c->rank == 0) {
        if (want) {
            comm__shm_sweep();
            h = comm__shm_create(bytes, name, size);
        }
        if (h != NULL) {
            h->token = base__random_id();
            h->n = c->size;
            snprintf(v, sizeof(v), "%s %016llx", name, (unsigned long long)h->token);
        }
        rc = accel_store_set(c->store, k, v, strlen(v), err);
    } else {
        rc = comm__sock_get_word(c, k, v, sizeof(v), err);
        if (rc == ACCEL_OK && want && sscanf(v, "%79s %llx", name, &token) == 2)
            h = comm__shm_open(name, bytes, false);
        if (h != NULL && (h->token != token || h->n != c->size)) {
            munmap(h, bytes);
            h = NULL;
        }
    }
    *out = h;
    return rc;
}

/* Whether this rank can read every other rank's memory and watch it. */
static bool reach_all(struct accel_comm *c, struct sock_host *hm)
{
    for (unsigned j = 0; j < c->size; j++) {
        struct host_slot *sl = &hm->h->slot[j];

        if (j == c->rank)
            continue;
        hm->pidfd[j] = (int)syscall(SYS_pidfd_open, (pid_t)sl->pid, 0);
        if (hm->pidfd[j] < 0 || !comm__sock_can_read((long)sl->pid, sl->probe, hm->h->token))
            return false;
    }
    return true;
}

static void host_free(struct sock_host *hm)
{
    if (hm == NULL)
        return;
    for (unsigned j = 0; hm->pidfd != NULL && j < hm->h->n; j++)
        if (hm->pidfd[j] >= 0)
            close(hm->pidfd[j]);
    munmap(hm->h, head_bytes(hm->h->n));
    accel_free(hm->pidfd);
    accel_free(hm->sums);
    accel_free(hm->stage);
    accel_free(hm);
}

void comm__sock_host_free(struct sock *s)
{
    host_free(s->onehost);
    s->onehost = NULL;
}

enum accel_err comm__sock_host_setup(struct accel_comm *c, struct sock *s, struct accel_error *err)
{
    struct sock_host *hm = NULL;
    struct host_head *h = NULL;
    char name[80] = "";
    bool all = false, ok;
    enum accel_err rc;

    /* s->onehost stays NULL until every rank is in: the votes go over the
     * links */
    rc = share_segment(c, wanted(s), &h, name, sizeof(name), err);
    if (h != NULL && (hm = accel_calloc(1, sizeof(*hm))) == NULL)
        munmap(h, head_bytes(c->size));
    if (hm != NULL) {
        hm->h = h;
        hm->probe = h->token;
        hm->pidfd = accel_malloc(c->size * sizeof(int));
        for (unsigned j = 0; hm->pidfd != NULL && j < c->size; j++)
            hm->pidfd[j] = -1;
        h->slot[c->rank].pid = (int64_t)getpid();
        h->slot[c->rank].probe = (uint64_t)(uintptr_t)&hm->probe;
    }
    if (rc == ACCEL_OK)
        rc = vote(c, hm != NULL && hm->pidfd != NULL, &all, err);
    if (c->rank == 0 && name[0] != '\0')
        (void)shm_unlink(name); /* every rank has mapped it, or will not */
    if (rc != ACCEL_OK || !all) {
        host_free(hm);
        return rc;
    }
    hm->sums = accel_malloc((size_t)(s->dims + 2) * HOST_CHUNK * sizeof(float));
    hm->stage = accel_malloc(HOST_CHUNK * sizeof(float));
    ok = hm->sums != NULL && hm->stage != NULL && reach_all(c, hm);
    rc = vote(c, ok, &all, err);
    if (rc != ACCEL_OK || !all)
        host_free(hm);
    else
        s->onehost = hm;
    return rc;
}
