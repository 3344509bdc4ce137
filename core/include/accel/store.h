/*
 * accel/store.h: the rendezvous store every rank of a job meets in before
 * anything else (DESIGN core/bootstrap).
 *
 * Two methods behind one client interface:
 *
 *   tcp   rank 0 serves the store at MASTER_ADDR:MASTER_PORT from a thread of
 *         its own (epoll, one event loop, no thread per client); every rank,
 *         rank 0 included, is a client.
 *   file  a folder on shared storage: one file per key, written to a temporary
 *         name and renamed into place; readers poll until it appears.
 *
 * Every request carries the job nonce (accel_store_nonce: the job and step
 * ids hashed), and the server refuses a client of another job or of an
 * earlier step with ACCEL_ENONCE and a message naming the nonce it presented
 * (never the job's), from the request's header, before any of its body is
 * read.  Every call is
 * bounded in time: the client's `timeout_s` is the deadline of connecting
 * (retried with backoff) and of each blocking call (get, wait, barrier); a
 * failure names the rank, the peer, the address and the time waited, as in
 * "rank 3 of 8: no answer from rank 0 at n1:29517 within 60 s".
 *
 * Values are bytes.  Caps (a larger request is ACCEL_ETOOBIG, on the client
 * before anything is sent, and on the server, which also closes that client):
 * key length, value length, keys, bytes held (values being received count
 * too), clients.  The server closes a connection that presents no request
 * with the job's nonce within 10 s, or leaves a request incomplete for 60 s;
 * when full (clients or file descriptors) it closes the oldest connection
 * that has not presented the nonce to let a new one in.
 *
 * Ownership: a server or client is created by its start, connect or open
 * function and released by its stop/close function.  One client handle is
 * used by one thread at a time; the server's thread is its own.
 */
#ifndef ACCEL_STORE_H
#define ACCEL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACCEL_STORE_MAX_KEY 256             /* bytes of a key, NUL not counted */
#define ACCEL_STORE_MAX_VALUE (16u << 20)   /* bytes of one value */
#define ACCEL_STORE_MAX_BYTES (1ull << 30)  /* bytes of keys and values held by a server */
#define ACCEL_STORE_MAX_KEYS (1u << 20)     /* keys held by a server */
#define ACCEL_STORE_MAX_CLIENTS 65536       /* connections a server accepts at once */
#define ACCEL_STORE_DEFAULT_TIMEOUT_S 300.0 /* when ACCELRUN_TIMEOUT is not set */

/* The job nonce: FNV-1a 64 of "job.step".  NULL or "" ids hash as "". */
uint64_t accel_store_nonce(const char *job_id, const char *step_id);

/* ---------------------------------------------------------------- server */

struct accel_store_server;

struct accel_store_server_opts {
    const char *bind_addr; /* numeric address or host name to listen on; NULL = all */
    unsigned port;         /* 0 = an ephemeral port (accel_store_server_port tells) */
    uint64_t nonce;        /* clients must present this */
    size_t max_clients;    /* 0 = ACCEL_STORE_MAX_CLIENTS */
    uint64_t max_bytes;    /* 0 = ACCEL_STORE_MAX_BYTES */
};

/* Binds, listens and starts the server's thread.  Raises RLIMIT_NOFILE's soft
 * limit towards the hard limit so max_clients connections fit, and listens on
 * several sockets sharing the port (SO_REUSEPORT, at most 8) where one
 * kernel accept queue (net.core.somaxconn) is shorter than max_clients; a
 * port in use is still an error.  A client past max_clients is refused with
 * ACCEL_ETOOBIG.  Errors: ACCEL_EIO (cannot listen, e.g. the address is in
 * use: the message names address and port), ACCEL_EINVAL, ACCEL_ENOMEM. */
enum accel_err accel_store_server_start(struct accel_store_server **out,
                                        const struct accel_store_server_opts *opts,
                                        struct accel_error *err) ACCEL_WUR;

/* The port the server listens on. */
unsigned accel_store_server_port(const struct accel_store_server *s);

/* Connections the server holds now (any thread may ask). */
size_t accel_store_server_clients(const struct accel_store_server *s);

/* Stops the thread (an eventfd wakes it; it returns within one batch of
 * events), closes every connection, so parked clients get ACCEL_EPEER at
 * once, and frees everything.  NULL is allowed. */
void accel_store_server_stop(struct accel_store_server *s);

/* ---------------------------------------------------------------- clients */

struct accel_store;

struct accel_store_opts {
    const char *host; /* tcp: the server (MASTER_ADDR) */
    unsigned port;    /* tcp: its port (MASTER_PORT) */
    const char *dir;  /* file: the shared folder (created if missing, mode 0700) */
    uint64_t nonce;   /* accel_store_nonce() of the job */
    unsigned rank;    /* this client, for messages (and the file method's names) */
    unsigned world;   /* ranks in the job, for messages */
    double timeout_s; /* deadline of connect and of each blocking call; 0 = default */
};

/* tcp: connects to opts->host:port, retrying with exponential backoff and
 * jitter (10 ms doubling to 1 s) until the deadline, then says hello so that
 * a server of another job is refused at once.  Errors: ACCEL_ETIMEDOUT (no
 * server in time: "rank 3 of 8: no answer from rank 0 at n1:29517 within
 * 60 s (last attempt: ...)"), ACCEL_ENONCE, ACCEL_ETOOBIG (the server is
 * full), ACCEL_EINVAL, ACCEL_ENOMEM. */
enum accel_err accel_store_connect(struct accel_store **out, const struct accel_store_opts *opts,
                                   struct accel_error *err) ACCEL_WUR;

/* file: opens the shared folder opts->dir (created with mode 0700 when
 * missing; its parent must exist).  Errors: ACCEL_EIO, ACCEL_EINVAL,
 * ACCEL_ENOMEM.  Later calls return ACCEL_ENONCE for a file of another job
 * and ACCEL_EIO when a file cannot be written or renamed. */
enum accel_err accel_store_open_dir(struct accel_store **out, const struct accel_store_opts *opts,
                                    struct accel_error *err) ACCEL_WUR;

/* Sets `key` to `len` bytes at `val` (replacing an earlier value).  Every
 * call below may also fail with ACCEL_EPEER (tcp: the server closed, or the
 * connection was given up by an earlier call: every later call says why),
 * ACCEL_ETOOBIG (a cap: on the client before sending, or the server's, which
 * then closes the connection) and ACCEL_EINVAL (an empty key). */
enum accel_err accel_store_set(struct accel_store *s, const char *key, const void *val, size_t len,
                               struct accel_error *err) ACCEL_WUR;

/* Waits until `key` is set, then returns its value in a new buffer *val
 * (accel_free it; NUL-terminated one byte past *len for convenience).
 * ACCEL_ETIMEDOUT after the deadline; tcp: the server answers the deadline,
 * so the handle stays usable. */
enum accel_err accel_store_get(struct accel_store *s, const char *key, void **val, size_t *len,
                               struct accel_error *err) ACCEL_WUR;

/* Waits until every one of `n` keys is set. */
enum accel_err accel_store_wait(struct accel_store *s, const char *const *keys, size_t n,
                                struct accel_error *err) ACCEL_WUR;

/* Adds `delta` to the integer held by `key` (0 when unset) and returns the
 * new value in *result (may be NULL).  Atomic across clients.  The value is
 * held as decimal text ("42"), as TCPStore holds it; a value that is not an
 * integer, or an overflow, is ACCEL_EINVAL. */
enum accel_err accel_store_add(struct accel_store *s, const char *key, int64_t delta,
                               int64_t *result, struct accel_error *err) ACCEL_WUR;

/* Returns when `n` clients have called it with the same `name` (each name is
 * used once per job: add a generation number to reuse it; names do not
 * collide with keys).  n is 1..ACCEL_STORE_MAX_CLIENTS.  ACCEL_ETIMEDOUT
 * names how many arrived. */
enum accel_err accel_store_barrier(struct accel_store *s, const char *name, unsigned n,
                                   struct accel_error *err) ACCEL_WUR;

/* Sets the deadline of this client's later blocking calls (connecting is
 * over) to `timeout_s` seconds (> 0) and returns the one it had, so a caller
 * can bound a phase by its own deadline and restore the old one after.  NULL
 * is allowed (returns 0). */
double accel_store_set_timeout(struct accel_store *s, double timeout_s);

/* Closes the connection.  file method: a rank other than 0 leaves an exit
 * file; rank 0 waits for those (at most 10 s or the timeout), then removes
 * this job's files and the folder if nothing else is in it.  NULL is
 * allowed. */
void accel_store_close(struct accel_store *s);

/* ---------------------------------------------------------------- from the env */

/* What a rank learns from its environment (the accelerate/torchrun contract
 * the plugin and `accelrun launch` set): RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT; the nonce from SLURM_JOB_ID and SLURM_STEP_ID, else
 * TORCHELASTIC_RUN_ID, else MASTER_ADDR:MASTER_PORT; ACCELRUN_TIMEOUT
 * (seconds); ACCELRUN_STORE=tcp (default) or file:/shared/folder. */
struct accel_bootstrap {
    unsigned rank, world;
    struct accel_store_server *server; /* rank 0 with tcp, else NULL */
    struct accel_store *store;
    double timeout_s;
    uint64_t nonce; /* the job nonce, for accel_comm_opts.nonce */
    bool failed;    /* set by the caller after a peer failed: free skips the closing barrier */
};

/* Reads the environment, starts the server on rank 0 (tcp) and connects.
 * Every missing or malformed variable is named in the error. */
enum accel_err accel_bootstrap_init(struct accel_bootstrap *b, struct accel_error *err) ACCEL_WUR;

/* Meets every rank in a closing barrier (at most 10 s; a failure is logged,
 * not returned) so that rank 0 does not stop the server under a rank still
 * using it, closes the client, then (rank 0) stops the server.  With
 * `failed` set there is no barrier: rank 0 serves until every other rank
 * has closed (they may still read who failed first), at most 10 s or the
 * timeout.  Zeroed is allowed. */
void accel_bootstrap_free(struct accel_bootstrap *b);

#ifdef __cplusplus
}
#endif

#endif
