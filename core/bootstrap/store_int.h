/*
 * store_int.h: what the files of core/bootstrap share and nothing outside
 * uses: the wire frame (frame.c), the server's state machine without sockets
 * (serve.c, driven by server.c and by the fuzz target), and the client
 * handle with one set of operations per method (tcp.c, file.c; store.c
 * dispatches).
 *
 * The wire: every message is a 40-byte header, then `klen` bytes of key, then
 * `vlen` bytes of value, all integers little-endian:
 *
 *   off size field
 *     0    4 magic "ACST"
 *     4    1 version (1)
 *     5    1 op (request) or op | 0x80 (reply)
 *     6    2 status: an enum accel_err (replies), 0 in requests
 *     8    8 nonce of the job
 *    16    4 klen   (0 in replies)
 *    20    4 vlen   (a reply's value, or its error message)
 *    24    8 arg    (add: delta / new value; barrier: count / arrived; hello: rank<<32|world)
 *    32    4 timeout_ms of a blocking request (the server answers ETIMEDOUT then)
 *    36    4 reserved, 0
 */
#ifndef ACCEL_STORE_INT_H
#define ACCEL_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/clock.h"
#include "accel/store.h"

#define STORE_MAGIC 0x54534341u /* the bytes "ACST" read as a little-endian u32 */
#define STORE_VERSION 1
#define STORE_HDR 40
#define STORE_REPLY 0x80
#define STORE_MAX_MSG 512 /* bytes of an error message in a reply */

enum bootstrap__op {
    STORE_HELLO = 1, /* nonce check and who is calling; no key, no value */
    STORE_SET,       /* key, value */
    STORE_GET,       /* key; parks until set; reply carries the value */
    STORE_WAIT,      /* key; parks until set; reply carries no value */
    STORE_ADD,       /* key, arg = delta; reply arg = new value */
    STORE_BARRIER,   /* key = name, arg = count; parks until count arrived */
    STORE_OP_END
};

struct bootstrap__frame {
    uint8_t version;
    uint8_t op;
    uint16_t status;
    uint64_t nonce;
    uint32_t klen, vlen;
    int64_t arg;
    uint32_t timeout_ms;
};

/* frame.c ------------------------------------------------------------- */

/* Writes the 40-byte header of `f` (magic and version filled in). */
void bootstrap__frame_encode(uint8_t out[STORE_HDR], const struct bootstrap__frame *f);

/* Decodes the header at `in` (at least STORE_HDR bytes) and checks it against
 * the caps: magic, version, reserved bytes, a known op, the direction
 * (`reply` says which is expected), klen and vlen within store.h's caps and
 * consistent with the op.  ACCEL_OK, or ACCEL_EPARSE / ACCEL_EUNSUPPORTED /
 * ACCEL_ETOOBIG / ACCEL_EINVAL with a message.  Pure: no allocation, no I/O. */
enum accel_err bootstrap__frame_decode(const uint8_t *in, bool reply, struct bootstrap__frame *f,
                                       struct accel_error *err);

/* "set", "get", ...; "?" for an unknown op (the reply bit is ignored). */
const char *bootstrap__op_name(unsigned op);

/* serve.c: the server without sockets --------------------------------- */

struct bootstrap__entry;

/* One client connection as the state machine sees it.  The socket layer
 * appends received bytes to `in` and sends `out[out_off, out_len)`. */
struct bootstrap__conn {
    int fd;
    uint8_t *in;
    size_t in_len, in_cap;
    uint8_t *out;
    size_t out_off, out_len, out_cap;
    bool closing;      /* send what is queued, then close (a refused client) */
    bool dead;         /* close now, dropping output (out of memory) */
    bool authed;       /* a request with the job's nonce was seen: a client of the job */
    uint64_t reserved; /* bytes of the partial request counted in core->inflight */
    unsigned rank, world;
    /* at most one parked request: a connection is answered in order */
    struct bootstrap__entry *park_on;
    uint8_t park_op;
    int64_t park_n;
    double park_deadline;
    struct bootstrap__conn *wprev, *wnext; /* the entry's waiters */
    struct bootstrap__conn *pprev, *pnext; /* all parked connections */
    bool touched;                          /* on the touched list */
    struct bootstrap__conn *tnext, *tprev;
    /* the socket layer's own */
    struct bootstrap__conn *prev, *next;
    uint32_t events;
    bool shut;            /* closing: our side is shut down, waiting for the client's end */
    double linger_until;  /* ... at most until then */
    bool evicted;         /* closed to make room for a new client */
    double accepted_at;   /* when it was accepted: the hello's deadline counts from there */
    double partial_since; /* when the partial request at the head of in began; 0 = none */
};

/* server.c's deadlines, read when a server starts (tests shorten them). */
extern double bootstrap__hello_timeout_s; /* a new connection's first request, from its accept */
extern double bootstrap__frame_timeout_s; /* one request, from its first byte to its last */
extern double bootstrap__warn_interval_s; /* at most one warning line of a kind per interval */

struct bootstrap__core {
    uint64_t nonce;
    uint64_t max_bytes;
    struct bootstrap__entry **buckets;
    size_t nbuckets, nkeys;
    uint64_t bytes;
    uint64_t inflight; /* bytes of partial requests being buffered, counted with bytes */
    struct bootstrap__conn *parked; /* every parked connection, for deadlines */
    size_t nparked;
    struct bootstrap__conn *touched; /* new output, or unparked with input left */
};

/* Output above this many bytes pauses reading a connection's requests. */
#define STORE_OUT_HIGH (1u << 20)

enum accel_err bootstrap__core_init(struct bootstrap__core *core, uint64_t nonce,
                                    uint64_t max_bytes) ACCEL_WUR;
void bootstrap__core_free(struct bootstrap__core *core);

/* Answers the complete requests in c->in (consuming them) until c parks,
 * closes or has STORE_OUT_HIGH bytes queued.  Woken connections and c go on
 * core->touched.  `now` is seconds on a monotonic clock. */
void bootstrap__core_input(struct bootstrap__core *core, struct bootstrap__conn *c, double now);

/* Answers ETIMEDOUT to every parked request past its deadline. */
void bootstrap__core_expire(struct bootstrap__core *core, double now);

/* Puts c on core->touched (the socket layer has something to send or close). */
void bootstrap__core_touch(struct bootstrap__core *core, struct bootstrap__conn *c);

/* Pops one connection off core->touched; NULL when empty. */
struct bootstrap__conn *bootstrap__core_next_touched(struct bootstrap__core *core);

/* Forgets c (unparks it, takes it off the touched list) before it is freed;
 * frees its buffers but not c. */
void bootstrap__core_drop(struct bootstrap__core *core, struct bootstrap__conn *c);

/* Queues a refusal reply of `status` with a message on a fresh connection and
 * marks it closing (a server full of clients). */
void bootstrap__core_refuse(struct bootstrap__core *core, struct bootstrap__conn *c,
                            enum accel_err status, const char *msg);

/* the client handle ----------------------------------------------------- */

/* A warning of one kind, printed at most once per `interval` seconds with
 * the count of those suppressed since the last one printed (warn.c).  The
 * last one suppressed is kept, so that a burst that ends still gets its
 * count printed an interval later (bootstrap__warn_flush), not forgotten. */
struct bootstrap__warn {
    double last;
    unsigned long suppressed;
    char held[512];
};

void bootstrap__warn(struct bootstrap__warn *w, double interval, double now, const char *fmt, ...)
    ACCEL_PRINTF(4, 5);
/* Prints the last warning w suppressed, with the count of the others, once
 * `interval` has passed since w's last line (or at once: `force`). */
void bootstrap__warn_flush(struct bootstrap__warn *w, double interval, double now, bool force);

struct bootstrap__ops {
    enum accel_err (*set)(struct accel_store *s, const char *key, const void *val, size_t len,
                          struct accel_error *err);
    enum accel_err (*get)(struct accel_store *s, const char *key, void **val, size_t *len,
                          struct accel_error *err);
    enum accel_err (*wait)(struct accel_store *s, const char *const *keys, size_t n,
                           struct accel_error *err);
    enum accel_err (*add)(struct accel_store *s, const char *key, int64_t delta, int64_t *result,
                          struct accel_error *err);
    enum accel_err (*barrier)(struct accel_store *s, const char *name, unsigned n,
                              struct accel_error *err);
    void (*close)(struct accel_store *s);
};

struct accel_store {
    const struct bootstrap__ops *ops;
    uint64_t nonce;
    unsigned rank, world;
    double timeout_s;
    /* tcp */
    int fd; /* -1 once the connection is lost: every later call fails */
    char host[256];
    unsigned port;
    char where[300]; /* "n1:29517" for messages */
    char lost[256];  /* why the connection was given up */
    /* file */
    char *dir;
    unsigned long tmp_seq; /* temporary file names of this handle */
};

extern const struct bootstrap__ops bootstrap__tcp_ops;
extern const struct bootstrap__ops bootstrap__file_ops;

/* The "rank 3 of 8" every client message starts with. */
#define STORE_WHO "rank %u of %u"

/* Client-side checks shared by both methods: key non-empty and within caps,
 * value within caps. */
enum accel_err bootstrap__check_key(const struct accel_store *s, const char *key,
                                    struct accel_error *err) ACCEL_WUR;

/* The 64-bit FNV-1a of `len` bytes, continuing from `h`. */
uint64_t bootstrap__fnv1a(uint64_t h, const void *data, size_t len);
#define STORE_FNV_OFFSET 14695981039346656037ull

#endif
