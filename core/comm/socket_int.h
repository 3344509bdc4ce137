/*
 * socket_int.h (private to core/comm): the state of the `socket` backend and
 * what its three files share.
 *
 *   socket.c       the backend's ops, split, and what a failure does (the
 *                  first culprit recorded in the store, the ring closed so
 *                  that the failure reaches every rank); closing
 *   socket_conn.c  setting the ring up: listen, publish, connect, hello
 *   socket_ring.c  the pipelined ring that runs every collective
 *   socket_cube.c  the hypercube: the collectives of power-of-two sizes
 *   socket_pump.c  the loop that moves the bytes of both
 *   socket_shm.c   shared memory for the links within a host
 *   socket_host.c  the collectives of a communicator all on one host
 *
 * Every rank holds two TCP connections: one to its next rank (rank + 1 mod
 * size), which it only writes, and one from its previous rank, which it only
 * reads (two ranks on two hosts share one, both ways: s->pair).  Both are
 * non-blocking; every wait is a poll() bounded by the operation's deadline.
 */
#ifndef ACCEL_COMM_SOCKET_INT_H
#define ACCEL_COMM_SOCKET_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "accel/clock.h"
#include "comm_int.h"

#define SOCK_ADDR_MAX 80                /* "[v6 address]:port" and a NUL */
#define SOCK_DEFAULT_CHUNK (512u << 10) /* bytes of a pipeline chunk */
#define SOCK_MIN_CHUNK 4096u
#define SOCK_MAX_CHUNK (64u << 20)
#define SOCK_ROUND_CHUNKS 4u      /* chunks of a block in flight per step */
#define SOCK_MIN_PIPE (64u << 10) /* smallest piece a mid-size block is cut into */
#define SOCK_SPIN_US 20           /* retry before poll() sleeps: ranks sharing CPUs */
#define SOCK_SPIN_US_OWN_CPU 200  /* the same, ranks with a CPU each */
/* The hypercube (socket_cube.c): power-of-two communicators of 4 ranks or
 * more run all_reduce, reduce_scatter and all_gather over log2(size) direct
 * connections, one per dimension: all_gather always, the reductions when
 * their fp32 partial sums (half the message in fp32) fit in cube_mem bytes.  A rank sends at most
 * s->cube_window bytes ahead of what it has received in an exchange. */
#define SOCK_MAX_DIMS 16                  /* up to 65536 ranks */
#define SOCK_DEFAULT_CUBE_MEM (16u << 20) /* ACCELRUN_SOCKET_CUBE_MEM */
/* all_reduce messages up to this many bytes exchange the whole vector at
 * every step (socket_cube.c) */
#define SOCK_CUBE_WHOLE (64u << 10)
/* bytes of a shared-memory queue (socket_shm.c): ACCELRUN_SOCKET_SHM_BYTES,
 * a power of two (the default: socket_tune.c); 0 turns the path off */
#define SOCK_SHM_MIN (64u << 10)
#define SOCK_SHM_MAX (256u << 20)
#define SOCK_HOST_MAX 96 /* a host key and its NUL */
/* a span of this many bytes or more goes across in one copy, where the
 * consumer may read the producer's memory (socket_shm.c) */
#define SOCK_CMA_MIN (32u << 10)

/* socket_shm.c: one direction of a link within a host; ctl == NULL: the
 * link moves its bytes over TCP. */
struct shmq_ctl;
struct shmq {
    struct shmq_ctl *ctl;
    char *data;
    size_t cap;
    bool producer;
    uint64_t pos;     /* ours: head (producer) or tail (consumer) */
    uint64_t reg_end; /* producer: the end of our region being read; 0 = none */
    size_t reg_len;
};
struct sock_seg {
    void *base;
    size_t bytes;
};

struct sock {
    int next_fd, prev_fd;     /* -1 once closed; one connection where pair */
    bool pair;                /* two ranks on two hosts: one connection both ways */
    unsigned next, prev;      /* their ranks */
    char addr[SOCK_ADDR_MAX]; /* ours, as published */
    char next_addr[SOCK_ADDR_MAX], prev_addr[SOCK_ADDR_MAX];
    uint64_t nonce; /* presented in the hello and required of the previous rank */
    size_t chunk_bytes;
    int sockbuf;                /* SO_SNDBUF/SO_RCVBUF to request; 0 = the kernel's autotuning */
    char ifaddr[SOCK_ADDR_MAX]; /* opts->ifaddr, kept for the communicators of a split */
    uint32_t seq;               /* operations run so far; in every operation's header */
    double spin_s;              /* retry this long before sleeping in poll() */
    /* the hypercube: dims = log2(size) where it is used, else 0; cube_fd[d]
     * connects to rank ^ (1 << d) both ways (-1 once closed) */
    unsigned dims;
    uint64_t cube_mem; /* bytes of partial sums; 0 = the ring only; the same on every rank */
    int cube_fd[SOCK_MAX_DIMS];
    char cube_addr[SOCK_MAX_DIMS][SOCK_ADDR_MAX];
    /* working memory, grown on demand, kept between operations */
    void *scratch;              /* 2 x SOCK_ROUND_CHUNKS chunks of fp32 partial sums */
    void *stage_in, *stage_out; /* one chunk each */
    float *acc;                 /* cube: fp32 partial sums of a 16-bit all_reduce */
    size_t acc_len;             /* elements allocated */
    /* shared memory (socket_shm.c): the host key published with the address,
     * which links stay within the host, their queues and segments */
    char host[SOCK_HOST_MAX];
    bool next_same, prev_same, cube_same[SOCK_MAX_DIMS];
    size_t shm_cap; /* bytes of a queue; 0 = off */
    bool cma;       /* single copy across processes where it works */
    /* pacing (socket_tune.c): bytes a stream may run ahead of what it
     * received, the ring's all_gather and a hypercube exchange */
    size_t ring_window, cube_window;
    bool windows_set; /* by ACCELRUN_SOCKET_WINDOW or _CUBE_WINDOW: links to other hosts too */
    struct shmq next_q, prev_q, cube_tx[SOCK_MAX_DIMS], cube_rx[SOCK_MAX_DIMS];
    struct sock_seg seg[2 + SOCK_MAX_DIMS];
    unsigned nseg;
    /* socket_host.c: every rank on this host, single copy between all of
     * them: the collectives go there and no link carries their bytes */
    struct sock_host *onehost;
};

/* What every rank of an operation must agree on; sent first on each
 * connection an operation uses and compared byte for byte. */
struct sock_hdr {
    uint32_t magic, seq, kind, dtype, op, root;
    uint64_t count;
};
/* kinds in a header */
enum {
    SOCK_K_ALL_REDUCE,
    SOCK_K_REDUCE_SCATTER,
    SOCK_K_ALL_GATHER,
    SOCK_K_BROADCAST,
    SOCK_K_BARRIER
};

/* Fills h for this rank's next operation (and counts it). */
void comm__sock_hdr(struct accel_comm *c, struct sock_hdr *h, unsigned kind, enum accel_dtype t,
                    unsigned op, unsigned root, uint64_t count);
/* Ranks that called different operations: `in` came from rank `peer`.
 * Fails the communicator (comm__sock_fail) with both calls named. */
enum accel_err comm__sock_mismatch(struct accel_comm *c, struct accel_error *err, const char *what,
                                   unsigned peer, const struct sock_hdr *in,
                                   const struct sock_hdr *mine);
/* The connection with rank `peer` (`addr`) failed with errno e (0: closed). */
enum accel_err comm__sock_peer_error(struct accel_comm *c, struct accel_error *err,
                                     const char *what, unsigned peer, const char *addr, int e);
/* Nothing moved since *idle_since (0 = just now): true while the caller
 * should retry at once (yielding the CPU) rather than sleep in poll(). */
bool comm__sock_spin(const struct sock *s, double *idle_since);
/* s->stage_in and s->stage_out, one chunk each, allocated on first use. */
enum accel_err comm__sock_stages(struct accel_comm *c, const char *what, struct accel_error *err);

/* Block b of `count` elements cut in n blocks, the first count % n of them one
 * element longer: its first element (b = n gives count). */
static inline size_t comm__block_off(size_t count, unsigned n, unsigned b)
{
    size_t q = count / n, rem = count % n;
    return b * q + (b < rem ? b : rem);
}

/* socket_pump.c: one stream of an operation, what this rank sends or what it
 * receives. */
struct sock_stream {
    int fd;
    unsigned peer;    /* the rank at the other end */
    const char *addr; /* its address, for messages */
    size_t hdr;       /* header bytes moved */
    size_t bytes;     /* data bytes moved */
    bool ended;       /* header and data all moved (set it for a stream not used) */
    bool wait;        /* this round: the socket would block */
    bool hup;         /* rx: the other end hung up; what it sent may still be read */
    struct shmq *q;   /* the bytes go through shared memory; fd rings and watches */
};

/* What a span callback says: bytes to move now, nothing until the other
 * stream has moved on, or the stream's end. */
enum sock_span { SOCK_SPAN_DATA, SOCK_SPAN_BLOCKED, SOCK_SPAN_END };

/* One operation for comm__sock_pump.  The caller fills what, hdr, tx and rx
 * (fd, peer, addr; ended for a stream it does not use), window, the
 * callbacks and ctx; the rest starts zeroed.  tx_span / rx_span give the
 * next bytes to send or the place for the next bytes to land (*len > 0 with
 * SOCK_SPAN_DATA); tx_moved / rx_moved say how many of them moved.  A
 * callback that makes progress without moving bytes (an empty unit done)
 * sets p->moved. */
struct sock_pump {
    const char *what;           /* the operation, for messages */
    const struct sock_hdr *hdr; /* ours, sent first on tx */
    struct sock_hdr hin;        /* the partner's, received first on rx */
    struct sock_stream tx, rx;
    size_t window; /* data bytes tx may run ahead of rx while rx has not ended; 0 = no limit */
    enum sock_span (*tx_span)(void *ctx, struct sock_pump *p, char **buf, size_t *len);
    void (*tx_moved)(void *ctx, size_t n);
    enum sock_span (*rx_span)(void *ctx, struct sock_pump *p, char **buf, size_t *len);
    void (*rx_moved)(void *ctx, size_t n);
    /* optional: work to do while neither stream can move (true: some was
     * done), before the pump spins or sleeps */
    bool (*idle)(void *ctx);
    void *ctx;
    bool moved; /* this round: progress */
};

/* Runs both streams of p to their ends, or fails the communicator (through
 * comm__sock_fail) at c->timeout_s from now, on a hang-up, a socket error or
 * a header that differs from ours. */
enum accel_err comm__sock_pump(struct accel_comm *c, struct sock_pump *p, struct accel_error *err);

/* socket_shm.c.  The queue: write and read move up to len bytes (0: full,
 * empty; read: -1 with errno when a single copy fails, ECONNRESET for a
 * producer that is gone) and set *ring when the other side sleeps and must
 * be rung (one byte on the link's TCP connection).  A write of
 * SOCK_CMA_MIN bytes or more may leave them where they are for the
 * consumer to read across: it then returns 0 until they have been read,
 * and the same span must be offered again until it returns its length.  comm__shmq_sleep announces
 * that this side will sleep in poll(); false if the queue moved meanwhile (do not sleep).
 * comm__shmq_awake takes the announcement back after poll(). */
size_t comm__shmq_write(struct shmq *q, const void *src, size_t len, bool *ring);
ssize_t comm__shmq_read(struct shmq *q, void *dst, size_t len, bool *ring);
bool comm__shmq_sleep(struct shmq *q);
void comm__shmq_awake(struct shmq *q);
/* This host's key (ACCELRUN_SOCKET_HOST, else the host name and boot id),
 * one word. */
void comm__sock_host_key(char *out, size_t size);
/* After comm__sock_connect: a segment for each link within the host that
 * both ends can map; the others stay on TCP.  Fails only with the store. */
enum accel_err comm__sock_shm_setup(struct accel_comm *c, struct sock *s, struct accel_error *err);
/* Unmaps the segments (the names are gone already). */
void comm__sock_shm_free(struct sock *s);
/* Segments in /dev/shm: comm__shm_create makes one of `bytes` (mode 0600,
 * named after this user and process: *name gets the name) and maps it;
 * comm__shm_open maps one of ours by its name, after checking the name, its
 * owner and its size, and unlinks the name if asked; comm__shm_sweep removes those
 * of this user's processes that are gone.  NULL where it cannot. */
void *comm__shm_create(size_t bytes, char *name, size_t size);
void *comm__shm_open(const char *name, size_t bytes, bool unlink_it);
void comm__shm_sweep(void);
/* Whether this process may read process `pid`'s memory (process_vm_readv:
 * the same user, no ptrace restriction in the way): the 8 bytes at `addr`
 * there hold `token`. */
bool comm__sock_can_read(long pid, uint64_t addr, uint64_t token);
/* The store's value at `key` (waited for) as a string, cut to size. */
enum accel_err comm__sock_get_word(struct accel_comm *c, const char *key, char *out, size_t size,
                                   struct accel_error *err);

/* socket_host.c.  After comm__sock_connect: where every rank of the
 * communicator is on this host and may read the others' memory, one
 * segment for them all, and s->onehost set on every rank (all or none: they
 * vote).  Fails only with the store or the vote's all_gather. */
enum accel_err comm__sock_host_setup(struct accel_comm *c, struct sock *s, struct accel_error *err);
void comm__sock_host_free(struct sock *s);
/* This rank failed: the others, asleep or not, stop waiting for it. */
void comm__sock_host_abort(struct sock *s);
/* The collectives there, as socket_ring.c's (kind: SOCK_K_*; `count` is
 * the whole count of all_reduce and broadcast, else the count per rank);
 * the results are bit-identical to the ring's and the hypercube's. */
enum accel_err comm__sock_host_reduce(struct accel_comm *c, unsigned kind, const void *send,
                                      void *recv, size_t count, enum accel_dtype t,
                                      enum accel_redop op, struct accel_error *err);
enum accel_err comm__sock_host_move(struct accel_comm *c, unsigned kind, const void *send,
                                    void *recv, size_t count, size_t es, enum accel_dtype t,
                                    unsigned root, struct accel_error *err);

/* socket_tune.c: sets what this rank chooses alone, s's spin, pacing
 * windows, shared-memory queue size and single copy: defaults from the
 * machine, or ACCELRUN_SOCKET_SPIN_US, _WINDOW, _CUBE_WINDOW, _SHM_BYTES,
 * _CMA, each checked (an error names it after `who`).  0 for a window: no
 * pacing. */
enum accel_err comm__sock_tune(struct sock *s, const char *who, struct accel_error *err);
/* The window of a link (s->ring_window or s->cube_window): as tuned within
 * a host, none to another host unless the variables set it. */
size_t comm__sock_pace(const struct sock *s, size_t window, bool same_host);

/* socket_conn.c: listens, publishes this rank's address under c->prefix,
 * connects to the next rank and accepts the previous one, each checked with
 * a hello carrying s->nonce and the communicator.  Fills s->*_fd and the
 * addresses. */
enum accel_err comm__sock_connect(struct accel_comm *c, struct sock *s, struct accel_error *err);

/* socket.c: closes every connection (the failure cascade); -1 is allowed. */
void comm__sock_close(struct sock *s);
/* The end of a communicator that did not fail: shutdown, drain until the
 * neighbours close too or `grace_s` passes, close. */
void comm__sock_close_graceful(struct sock *s, double grace_s);

/* socket_cube.c: all_reduce, reduce_scatter and all_gather over the
 * hypercube.  comm__sock_use_cube tells whether an operation whose partial
 * sums take `acc_bytes` runs there (s->dims > 0, acc_bytes <= cube_mem). */
bool comm__sock_use_cube(const struct accel_comm *c, uint64_t acc_bytes);
enum accel_err comm__sock_cube_all_reduce(struct accel_comm *c, const void *send, void *recv,
                                          size_t count, enum accel_dtype t, enum accel_redop op,
                                          struct accel_error *err);
enum accel_err comm__sock_cube_reduce_scatter(struct accel_comm *c, const void *send, void *recv,
                                              size_t recvcount, enum accel_dtype t,
                                              enum accel_redop op, struct accel_error *err);
enum accel_err comm__sock_cube_all_gather(struct accel_comm *c, void *recv, size_t sendcount,
                                          enum accel_dtype t, struct accel_error *err);

/* socket_ring.c: the collectives.  Each returns through comm__sock_fail on
 * a transport failure. */
enum accel_err comm__sock_all_reduce(struct accel_comm *c, const void *send, void *recv,
                                     size_t count, enum accel_dtype t, enum accel_redop op,
                                     struct accel_error *err);
enum accel_err comm__sock_reduce_scatter(struct accel_comm *c, const void *send, void *recv,
                                         size_t recvcount, enum accel_dtype t, enum accel_redop op,
                                         struct accel_error *err);
enum accel_err comm__sock_all_gather(struct accel_comm *c, const void *send, void *recv,
                                     size_t sendcount, enum accel_dtype t, struct accel_error *err);
enum accel_err comm__sock_broadcast(struct accel_comm *c, const void *send, void *recv,
                                    size_t count, enum accel_dtype t, unsigned root,
                                    struct accel_error *err);
enum accel_err comm__sock_barrier(struct accel_comm *c, struct accel_error *err);

/* socket.c: operation `what` failed here for the reason `fmt` (which names
 * the rank and address at fault: "rank 3 (10.0.0.2:41234) closed its
 * connection").  Unless an earlier failure of this communicator is recorded in
 * the store, records this one there, once; then reports the first one, which
 * names the rank that failed first.  Closes the ring so that the failure
 * reaches every rank, sets c->failed, fills err and returns the code
 * reported. */
enum accel_err comm__sock_fail(struct accel_comm *c, struct accel_error *err, const char *what,
                               enum accel_err code, const char *fmt, ...) ACCEL_PRINTF(5, 6);

#endif
