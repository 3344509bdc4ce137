/*
 * socket_shm.c: the shared-memory path of the socket backend, for the links
 * between ranks on one host.
 *
 * A link whose two ranks share a host (the same host key: the host name and
 * the kernel's boot id, or ACCELRUN_SOCKET_HOST) keeps its TCP connection,
 * and its collective bytes move through a segment of shared memory instead:
 * one single-producer, single-consumer byte queue per direction used (the
 * ring's links carry bytes one way, the hypercube's both ways).  The TCP
 * connection stays for what TCP does well between two processes: a
 * doorbell (one byte, sent only to a side that said it is going to sleep,
 * so poll() wakes it) and liveness (a rank that dies closes it, and the
 * others name it within the deadline, as on the TCP path).  socket_pump.c
 * moves bytes the same way over both, so the collectives, and the order of
 * their sums, do not change: the results are bit-identical.
 *
 * The queue: head (bytes written, by the producer) and tail (bytes read, by
 * the consumer), each on its own cache line, count up forever; the data
 * wraps in a power-of-two ring.  A side with nothing to do sets its sleep
 * flag, then looks again (a full fence between, and the other side rings
 * after it moved its counter with a fence too: no wake-up is lost), and
 * sleeps in poll() on the TCP connection; the other side rings only when it
 * takes the flag, so a busy queue makes no system calls.
 *
 * Single copy: a span of SOCK_CMA_MIN bytes or more need not go through the
 * queue.  The producer publishes where it is (a region: stream offset,
 * length, address) and moves head past it; the consumer, on reaching it,
 * reads it straight from the producer's memory into its destination
 * (process_vm_readv) and moves tail; the producer counts the span as sent
 * only then, so its buffer is never changed while it is read.  One region
 * at a time.  It needs the consumer to be allowed to read the producer
 * (the same user, no ptrace restriction): each side tries it at set-up on
 * the token, and the queue it consumes says whether it may (cma).
 *
 * Segments: the side that opened the TCP link creates one in /dev/shm
 * (shm_open, O_EXCL, mode 0600, named accelrun.<uid>.<pid>.<n>), writes a
 * random token in it and offers its name through the store; the other side
 * opens it, checks owner, size and token, unlinks the name at once and
 * answers; a side that cannot (another mount namespace, no /dev/shm) says
 * so and the link stays on TCP.  From then on the segment has no name: a
 * crash leaves nothing in /dev/shm.  A crash in the moment between the two
 * is cleaned up by the next communicator of the same user on the host,
 * which removes the segments of processes that no longer exist.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/getenv.h"
#include "../base/random.h"
#include "socket_int.h"

#define SHM_DIR "/dev/shm"
#define SHM_PREFIX "accelrun."
#define CACHE_LINE 64

/* One direction's counters, each on its own cache line. */
struct shmq_ctl {
    _Alignas(CACHE_LINE) _Atomic uint64_t head;    /* bytes written */
    _Alignas(CACHE_LINE) _Atomic uint64_t tail;    /* bytes read */
    _Alignas(CACHE_LINE) _Atomic uint32_t c_sleep; /* the consumer waits for data */
    _Alignas(CACHE_LINE) _Atomic uint32_t p_sleep; /* the producer waits for room */
    /* single copy: the stream's bytes [reg_start, reg_start + reg_len) are
     * at reg_addr in the producer (pid), not in the ring; written before
     * head is released past them.  cma: set by the consumer once it has
     * read the producer's memory at set-up. */
    _Alignas(CACHE_LINE) _Atomic uint64_t reg_start;
    _Atomic uint64_t reg_len, reg_addr;
    _Atomic int32_t pid;
    _Atomic uint32_t cma;
};

/* The head of a segment; the two queues' data follow it. */
struct shm_head {
    uint64_t token;
    uint64_t cap; /* bytes of each queue's data, a power of two */
    uint32_t nq;
    struct shmq_ctl q[2];
};

static size_t seg_bytes(size_t cap, unsigned nq)
{
    return sizeof(struct shm_head) + nq * cap;
}

static void q_bind(struct shmq *q, struct shm_head *h, unsigned i, bool producer)
{
    q->ctl = &h->q[i];
    q->data = (char *)(h + 1) + i * h->cap;
    q->cap = h->cap;
    q->producer = producer;
    q->pos = producer ? atomic_load(&q->ctl->head) : atomic_load(&q->ctl->tail);
    q->reg_end = 0;
    if (producer)
        atomic_store(&q->ctl->pid, (int32_t)getpid());
}

/* ------------------------------------------------------------ the queue */

/* After moving our counter: rings the other side if it said it sleeps. */
static bool take_flag(_Atomic uint32_t *flag)
{
    atomic_thread_fence(memory_order_seq_cst);
    return atomic_load_explicit(flag, memory_order_relaxed) != 0 && atomic_exchange(flag, 0) != 0;
}

/* Single copy: the bytes stay where they are (src, in this process) and
 * the consumer reads them across (process_vm_readv); the span counts as
 * sent once it has.  Returns 0 until then. */
static size_t write_region(struct shmq *q, const void *src, size_t len, bool *ring)
{
    uint64_t tail = atomic_load_explicit(&q->ctl->tail, memory_order_acquire);

    if (q->reg_end != 0) { /* ours is out: read yet? */
        if (tail < q->reg_end)
            return 0;
        q->reg_end = 0;
        atomic_store_explicit(&q->ctl->reg_len, 0, memory_order_relaxed);
        return q->reg_len;
    }
    (void)tail; /* ring bytes before it are read first: the consumer meets them in order */
    atomic_store_explicit(&q->ctl->reg_start, q->pos, memory_order_relaxed);
    atomic_store_explicit(&q->ctl->reg_addr, (uint64_t)(uintptr_t)src, memory_order_relaxed);
    atomic_store_explicit(&q->ctl->reg_len, len, memory_order_relaxed);
    q->pos += len;
    q->reg_end = q->pos;
    q->reg_len = len;
    atomic_store_explicit(&q->ctl->head, q->pos, memory_order_release);
    *ring = take_flag(&q->ctl->c_sleep);
    return 0;
}

size_t comm__shmq_write(struct shmq *q, const void *src, size_t len, bool *ring)
{
    uint64_t tail;
    size_t room, n, at, first;

    *ring = false;
    if (q->reg_end != 0 ||
        (len >= SOCK_CMA_MIN && atomic_load_explicit(&q->ctl->cma, memory_order_relaxed) != 0))
        return write_region(q, src, len, ring);
    tail = atomic_load_explicit(&q->ctl->tail, memory_order_acquire);
    room = q->cap - (size_t)(q->pos - tail);
    n = len < room ? len : room;
    at = (size_t)(q->pos & (q->cap - 1));
    first = q->cap - at < n ? q->cap - at : n;
    if (n == 0)
        return 0;
    memcpy(q->data + at, src, first);
    memcpy(q->data, (const char *)src + first, n - first);
    q->pos += n;
    atomic_store_explicit(&q->ctl->head, q->pos, memory_order_release);
    *ring = take_flag(&q->ctl->c_sleep);
    return n;
}

/* The consumer's side of write_region: reads the producer's bytes across.
 * -1 with errno when it cannot (the producer is gone: ESRCH). */
static ssize_t read_region(struct shmq *q, void *dst, size_t len)
{
    uint64_t start = atomic_load_explicit(&q->ctl->reg_start, memory_order_relaxed);
    uint64_t rlen = atomic_load_explicit(&q->ctl->reg_len, memory_order_relaxed);
    uint64_t addr = atomic_load_explicit(&q->ctl->reg_addr, memory_order_relaxed);
    size_t n = len < start + rlen - q->pos ? len : (size_t)(start + rlen - q->pos);
    struct iovec local = {dst, n};
    struct iovec remote = {(void *)(uintptr_t)(addr + (q->pos - start)), n};
    ssize_t got = process_vm_readv(atomic_load(&q->ctl->pid), &local, 1, &remote, 1, 0);

    if (got < 0 && errno == ESRCH)
        errno = ECONNRESET;
    return got;
}

ssize_t comm__shmq_read(struct shmq *q, void *dst, size_t len, bool *ring)
{
    uint64_t head = atomic_load_explicit(&q->ctl->head, memory_order_acquire);
    uint64_t start = atomic_load_explicit(&q->ctl->reg_start, memory_order_relaxed);
    uint64_t rlen = atomic_load_explicit(&q->ctl->reg_len, memory_order_relaxed);
    size_t avail, n, at, first;
    ssize_t got;

    *ring = false;
    if (head == q->pos)
        return 0;
    if (rlen > 0 && q->pos >= start && q->pos < start + rlen) {
        got = read_region(q, dst, len);
        if (got <= 0)
            return got < 0 ? -1 : 0;
        n = (size_t)got;
    } else {
        /* ring bytes, up to a region that starts further on */
        avail = (size_t)((rlen > 0 && start > q->pos && start < head ? start : head) - q->pos);
        n = len < avail ? len : avail;
        at = (size_t)(q->pos & (q->cap - 1));
        first = q->cap - at < n ? q->cap - at : n;
        memcpy(dst, q->data + at, first);
        memcpy((char *)dst + first, q->data, n - first);
    }
    q->pos += n;
    atomic_store_explicit(&q->ctl->tail, q->pos, memory_order_release);
    *ring = take_flag(&q->ctl->p_sleep);
    return (ssize_t)n;
}

bool comm__shmq_sleep(struct shmq *q)
{
    _Atomic uint32_t *flag = q->producer ? &q->ctl->p_sleep : &q->ctl->c_sleep;
    uint64_t other;
    bool moved;

    atomic_store(flag, 1);
    atomic_thread_fence(memory_order_seq_cst);
    other = q->producer ? atomic_load(&q->ctl->tail) : atomic_load(&q->ctl->head);
    if (!q->producer)
        moved = other != q->pos;
    else if (q->reg_end != 0)
        moved = other >= q->reg_end; /* our region was read */
    else
        moved = q->pos - other < q->cap;
    if (moved) {
        /* it moved meanwhile; if the other side took the flag, its doorbell
         * is on its way and the next poll() drains it */
        atomic_store(flag, 0);
        return false;
    }
    return true;
}

void comm__shmq_awake(struct shmq *q)
{
    atomic_store(q->producer ? &q->ctl->p_sleep : &q->ctl->c_sleep, 0);
}

/* ------------------------------------------------------------ segments */

/* The host key: ranks with the same one share memory. */
void comm__sock_host_key(char *out, size_t size)
{
    const char *env = getenv("ACCELRUN_SOCKET_HOST");
    char host[64] = "?", boot[40] = "";
    FILE *f;

    if (env != NULL && *env != '\0') {
        snprintf(out, size, "env:%.48s", env);
    } else {
        if (gethostname(host, sizeof(host)) != 0)
            host[0] = '\0';
        host[sizeof(host) - 1] = '\0';
        f = fopen("/proc/sys/kernel/random/boot_id", "re");
        if (f != NULL) {
            if (fgets(boot, sizeof(boot), f) == NULL)
                boot[0] = '\0';
            fclose(f);
        }
        boot[strcspn(boot, "\n")] = '\0';
        snprintf(out, size, "%.40s/%.36s", host, boot);
    }
    for (char *p = out; *p; p++) /* one word in the store's value */
        if (*p <= ' ' || *p > '~')
            *p = '_';
}

/* Removes the segments of this user's processes that are gone (a crash
 * between creating a segment and its peer's unlink). */
void comm__shm_sweep(void)
{
    DIR *d = opendir(SHM_DIR);
    struct dirent *e;
    char mine[32];
    size_t ml;

    if (d == NULL)
        return;
    ml = (size_t)snprintf(mine, sizeof(mine), SHM_PREFIX "%u.", (unsigned)getuid());
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid;

        if (strncmp(e->d_name, mine, ml) != 0)
            continue;
        pid = strtol(e->d_name + ml, &end, 10);
        if (end == e->d_name + ml || *end != '.' || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            char name[300];
            snprintf(name, sizeof(name), "/%s", e->d_name);
            (void)shm_unlink(name);
        }
    }
    closedir(d);
}

void *comm__shm_create(size_t bytes, char *name, size_t size)
{
    static _Atomic unsigned seq;
    void *h;
    int fd;

    snprintf(name, size, "/" SHM_PREFIX "%u.%ld.%u", (unsigned)getuid(), (long)getpid(),
             atomic_fetch_add(&seq, 1));
    fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        (void)shm_unlink(name);
        return NULL;
    }
    h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (h == MAP_FAILED) {
        (void)shm_unlink(name);
        return NULL;
    }
    return h;
}

void *comm__shm_open(const char *name, size_t bytes, bool unlink_it)
{
    void *h = NULL;
    struct stat st;
    int fd;

    if (strncmp(name, "/" SHM_PREFIX, strlen("/" SHM_PREFIX)) != 0 || strchr(name + 1, '/') != NULL)
        return NULL;
    fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    if (unlink_it)
        (void)shm_unlink(name);
    if (fstat(fd, &st) == 0 && st.st_uid == getuid() && (size_t)st.st_size == bytes)
        h = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return h == MAP_FAILED ? NULL : h;
}

/* Creates and maps a segment of nq queues; *name gets its name. */
static struct shm_head *seg_create(size_t cap, unsigned nq, char *name, size_t size)
{
    struct shm_head *h = comm__shm_create(seg_bytes(cap, nq), name, size);

    if (h == NULL)
        return NULL;
    h->token = base__random_id();
    h->cap = cap;
    h->nq = nq;
    return h;
}

/* Opens the segment a peer offered, checks it and unlinks its name; NULL
 * (the link stays on TCP) if it cannot. */
static struct shm_head *seg_attach(const char *name, uint64_t token, size_t cap, unsigned nq)
{
    struct shm_head *h = comm__shm_open(name, seg_bytes(cap, nq), true);

    if (h != NULL && (h->token != token || h->cap != cap || h->nq != nq)) {
        munmap(h, seg_bytes(cap, nq));
        return NULL;
    }
    return h;
}

/* ------------------------------------------------------------ set-up */

/* One link of this rank: its peer, channel and whether this rank opened it
 * (and so creates the segment), and the queues it binds. */
struct shm_link {
    unsigned peer, channel;
    bool opener, same_host;
    bool cma;             /* this rank may read the other's memory (ACCELRUN_SOCKET_CMA) */
    struct shmq *tx, *rx; /* NULL where the link carries nothing that way */
    struct shm_head *h;
    char name[80];
};

static unsigned links_of(const struct accel_comm *c, struct sock *s, struct shm_link *l)
{
    unsigned n = 0;

    l[n++] = (struct shm_link){
        .peer = s->next, .channel = 0, .opener = true, .same_host = s->next_same, .tx = &s->next_q};
    l[n++] = (struct shm_link){.peer = s->prev,
                               .channel = 0,
                               .opener = false,
                               .same_host = s->prev_same,
                               .rx = &s->prev_q};
    for (unsigned d = 0; d < s->dims; d++) {
        unsigned p = c->rank ^ (1u << d);
        l[n++] = (struct shm_link){.peer = p,
                                   .channel = 1 + d,
                                   .opener = c->rank < p,
                                   .same_host = s->cube_same[d],
                                   .tx = &s->cube_tx[d],
                                   .rx = &s->cube_rx[d]};
    }
    return n;
}

/* The store key of the offer (`ack`: of the answer) for the link that rank
 * `opener` opened on `channel`. */
static void offer_key(const struct accel_comm *c, char *k, size_t size, bool ack, unsigned opener,
                      unsigned channel)
{
    snprintf(k, size, "%sshm%s/%u.%u", c->prefix, ack ? "ok" : "", opener, channel);
}

/* Binds the queues of a mapped link: queue 0 carries the opener's bytes. */
static void link_bind(struct shm_link *l)
{
    if (l->tx != NULL)
        q_bind(l->tx, l->h, l->opener ? 0 : 1, true);
    if (l->rx != NULL)
        q_bind(l->rx, l->h, l->opener ? 1 : 0, false);
}

enum accel_err comm__sock_get_word(struct accel_comm *c, const char *key, char *out, size_t size,
                                   struct accel_error *err)
{
    void *val = NULL;
    size_t len = 0;
    enum accel_err rc = accel_store_get(c->store, key, &val, &len, err);

    if (rc != ACCEL_OK)
        return rc;
    snprintf(out, size, "%.*s", (int)(len < size ? len : size - 1), (const char *)val);
    accel_free(val);
    return ACCEL_OK;
}

/* Single copy from the other side: whether this process can read `pid`'s
 * mapping of the segment at `base` (process_vm_readv: the same user, and no
 * ptrace restriction in the way), checked on the token both hold.  Where it
 * can, the queue it consumes says so (cma), and the producer may leave its
 * bytes where they are. */
static void try_cma(struct shm_link *l, bool opener, long pid, unsigned long long base)
{
    unsigned i = opener ? 1 : 0; /* the queue this side consumes */

    if (!l->cma || i >= l->h->nq || pid <= 0 || pid == (long)getpid())
        return;
    if (comm__sock_can_read(pid, base + offsetof(struct shm_head, token), l->h->token))
        atomic_store(&l->h->q[i].cma, 1);
}

bool comm__sock_can_read(long pid, uint64_t addr, uint64_t token)
{
    uint64_t t = 0;
    struct iovec local = {&t, sizeof(t)}, remote = {(void *)(uintptr_t)addr, sizeof(t)};

    return process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(t) &&
           t == token;
}

/* The opener's offer: "name token cap queues pid base", or "-" (no
 * segment: the link stays on TCP). */
static enum accel_err offer(struct accel_comm *c, struct sock *s, struct shm_link *l,
                            struct accel_error *err)
{
    char k[200], v[200] = "-";
    unsigned nq = l->channel == 0 ? 1 : 2;

    if (s->shm_cap > 0)
        l->h = seg_create(s->shm_cap, nq, l->name, sizeof(l->name));
    if (l->h != NULL)
        snprintf(v, sizeof(v), "%s %016llx %zu %u %ld %llx", l->name,
                 (unsigned long long)l->h->token, s->shm_cap, nq, (long)getpid(),
                 (unsigned long long)(uintptr_t)l->h);
    offer_key(c, k, sizeof(k), false, c->rank, l->channel);
    return accel_store_set(c->store, k, v, strlen(v), err);
}

/* The other side: attaches to what was offered (a name of ours, a queue
 * size in bounds), and answers "1 pid base" or "0". */
static enum accel_err answer(struct accel_comm *c, struct sock *s, struct shm_link *l,
                             struct accel_error *err)
{
    char k[200], v[200], name[80];
    unsigned long long token, base;
    size_t cap;
    unsigned nq;
    long pid;
    enum accel_err rc;

    offer_key(c, k, sizeof(k), false, l->peer, l->channel);
    if ((rc = comm__sock_get_word(c, k, v, sizeof(v), err)) != ACCEL_OK)
        return rc;
    if (s->shm_cap > 0 &&
        sscanf(v, "%79s %llx %zu %u %ld %llx", name, &token, &cap, &nq, &pid, &base) == 6 &&
        nq == (l->channel == 0 ? 1u : 2u) && cap >= SOCK_SHM_MIN && cap <= SOCK_SHM_MAX &&
        (cap & (cap - 1)) == 0)
        l->h = seg_attach(name, token, cap, nq);
    if (l->h != NULL) {
        link_bind(l);
        try_cma(l, false, pid, base);
        snprintf(v, sizeof(v), "1 %ld %llx", (long)getpid(), (unsigned long long)(uintptr_t)l->h);
    } else {
        snprintf(v, sizeof(v), "0");
    }
    offer_key(c, k, sizeof(k), true, l->peer, l->channel);
    return accel_store_set(c->store, k, v, strlen(v), err);
}

/* The opener again: binds if the other side took the segment, else drops it. */
static enum accel_err settle(struct accel_comm *c, struct shm_link *l, struct accel_error *err)
{
    char k[200], v[64];
    unsigned long long base;
    long pid;
    enum accel_err rc;

    if (l->h == NULL)
        return ACCEL_OK;
    offer_key(c, k, sizeof(k), true, c->rank, l->channel);
    rc = comm__sock_get_word(c, k, v, sizeof(v), err);
    (void)shm_unlink(l->name); /* the other side's job; gone already if it did it */
    if (rc == ACCEL_OK && sscanf(v, "1 %ld %llx", &pid, &base) == 2) {
        link_bind(l);
        try_cma(l, true, pid, base);
        return ACCEL_OK;
    }
    munmap(l->h, seg_bytes(l->h->cap, l->h->nq));
    l->h = NULL;
    return rc;
}

enum accel_err comm__sock_shm_setup(struct accel_comm *c, struct sock *s, struct accel_error *err)
{
    struct shm_link l[2 + SOCK_MAX_DIMS];
    unsigned n = links_of(c, s, l), k = 0;
    enum accel_err rc = ACCEL_OK;

    /* only the links within a host (both ends see the same), whatever this
     * rank's ACCELRUN_SOCKET_SHM: a side that has it off says no */
    for (unsigned i = 0; i < n; i++)
        if (l[i].same_host) {
            l[k] = l[i];
            l[k++].cma = s->cma;
        }
    if (k == 0)
        return ACCEL_OK;
    comm__shm_sweep();
    /* offers first, then answers, then the openers settle: no rank waits
     * for a key before it has set every key others wait for */
    for (unsigned i = 0; rc == ACCEL_OK && i < k; i++)
        if (l[i].opener)
            rc = offer(c, s, &l[i], err);
    for (unsigned i = 0; rc == ACCEL_OK && i < k; i++)
        if (!l[i].opener)
            rc = answer(c, s, &l[i], err);
    for (unsigned i = 0; rc == ACCEL_OK && i < k; i++)
        if (l[i].opener)
            rc = settle(c, &l[i], err);
    for (unsigned i = 0; i < k; i++) {
        if (l[i].h == NULL)
            continue;
        if (rc != ACCEL_OK && l[i].opener)
            (void)shm_unlink(l[i].name);
        s->seg[s->nseg++] = (struct sock_seg){l[i].h, seg_bytes(l[i].h->cap, l[i].h->nq)};
    }
    return rc;
}

void comm__sock_shm_free(struct sock *s)
{
    for (unsigned i = 0; i < s->nseg; i++)
        munmap(s->seg[i].base, s->seg[i].bytes);
    s->nseg = 0;
}
