/*
 * server.h: the HTTPS server around the webhook's core, internal to
 * k8s-operator-shim/ (server.c, metrics.c, main.c).
 *
 *   main.c     options, the stderr log hook, signals, the 1 s tick
 *   server.c   libmicrohttpd daemons over GnuTLS, routing (/mutate,
 *              /healthz, /readyz, /metrics), the body cap,
 *              certificate/key/site reload, the drain on shutdown
 *   inputs.c   the files' signatures, reading and checking the TLS pair,
 *              loading the site file, the listening socket
 *   metrics.c  the counters and the latency histogram, Prometheus text
 *   api.c      the API server client (libcurl): ConfigMaps and Jobs for
 *              the core's struct wh_fetch
 *
 * The core (webhook.h) does the deciding; nothing here looks inside a
 * review.
 *
 * Threads: libmicrohttpd's pool threads run the request handler and the
 * wh_fetch callbacks of api.c (which lock what they share); the main thread
 * alone calls wh_srv_start, wh_srv_tick, wh_srv_stop, wh_api_open and
 * wh_api_close.
 */
#ifndef WH_SERVER_H
#define WH_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "accel/buf.h"
#include "accel/err.h"
#include "accel/site.h"
#include "webhook.h"

/* ---------------------------------------------------------------- metrics.c */

/* How a POST /mutate ended, the label of accelrun_webhook_requests_total. */
enum wh_outcome {
    WH_OUTCOME_ALLOWED,     /* 200, allowed (with or without a patch) */
    WH_OUTCOME_DENIED,      /* 200, allowed false */
    WH_OUTCOME_ERROR,       /* 5xx: out of memory, an encoding failure */
    WH_OUTCOME_BAD_REQUEST, /* 4xx: not a review, over a cap, wrong method, too slow */
    WH_OUTCOME__N
};

/* Upper bounds (seconds) of the latency histogram's buckets, +Inf apart. */
#define WH_METRICS_BUCKETS 10

/* Process-wide counters, updated with relaxed atomics from any thread.
 * Zero-initialised storage is a valid empty set. */
struct wh_metrics {
    atomic_ullong requests[WH_OUTCOME__N];
    atomic_ullong patches;                        /* responses carrying a patch */
    atomic_ullong bucket[WH_METRICS_BUCKETS + 1]; /* per bucket, not cumulative; last = +Inf */
    atomic_ullong duration_us;                    /* sum of latencies, microseconds */
    atomic_ullong reloads_ok, reloads_failed;     /* certificate/key/site reloads */
    atomic_ullong connections;                    /* TLS connections accepted */
};

/* Counts one /mutate request that took `seconds` (first byte of the headers
 * handled to the response queued). */
void wh_metrics_request(struct wh_metrics *m, enum wh_outcome o, double seconds, bool patched);

/* Appends the Prometheus text format 0.0.4 of `m`, and of the config
 * cache's lookups when `cache` is not NULL, to `b`.  ACCEL_ETOOBIG past b's
 * cap, ACCEL_ENOMEM. */
enum accel_err wh_metrics_render(struct wh_metrics *m, struct wh_cfg_cache *cache,
                                 struct accel_buf *b) ACCEL_WUR;

/* ---------------------------------------------------------------- server.c */

/* ---------------------------------------------------------------- api.c */

struct wh_api_opts {
    const char *server;     /* --api-server https://HOST:PORT; NULL: in-cluster
                               KUBERNETES_SERVICE_HOST/PORT, or none */
    const char *token_file; /* --api-token-file; NULL: the service account's, if any */
    const char *ca_file;    /* --api-ca; NULL: the service account's ca.crt, if any */
    unsigned timeout_ms;    /* per request, connect included (0: 2000) */
    unsigned ttl_s;         /* seconds an answer is reused (0: never) */
};

struct wh_api;

/* The client of the API server o names, or *out NULL (and ACCEL_OK) when
 * none is configured: no --api-server and not in a cluster.  ACCEL_EINVAL
 * for a URL that is not https://, ACCEL_ENOTFOUND for a given token or CA
 * file that can't be read; the message names the option.  Nothing is
 * contacted here. */
enum accel_err wh_api_open(struct wh_api **out, const struct wh_api_opts *o,
                           struct accel_error *err) ACCEL_WUR;

/* What the client uses ("" for none, or with a NULL client). */
const char *wh_api_server(const struct wh_api *a);
const char *wh_api_token_file(const struct wh_api *a);
const char *wh_api_ca_file(const struct wh_api *a);

/* Fills `f` with the callbacks that read through `a` (all NULL for a NULL
 * client: mutate.c then says no API server is configured). */
void wh_api_fetch(struct wh_api *a, struct wh_fetch *f);

/* Frees the client; NULL is fine.  No request may be in flight. */
void wh_api_close(struct wh_api *a);

/* ---------------------------------------------------------------- server.c */

struct wh_srv_opts {
    const char *cert;   /* --tls-cert: PEM certificate chain */
    const char *key;    /* --tls-key: PEM private key */
    const char *site;   /* --site, NULL: no site policy */
    const char *listen; /* --listen ADDR:PORT ("[::]:8443" for IPv6; port 0: any free one) */
    unsigned threads;   /* --threads: libmicrohttpd's pool (1: its one polling thread) */
    unsigned max_conns; /* --max-connections */
    unsigned timeout_s; /* --timeout: idle seconds before a connection is dropped */
    unsigned drain_s;   /* seconds SIGTERM waits for requests in flight */
    unsigned reload_s;  /* seconds between checks of the three files */
    struct wh_metrics *metrics;
    const struct wh_fetch *fetch;   /* the API server; NULL: none */
    struct wh_cfg_cache *cfg_cache; /* --config-cache; NULL: none */
};

struct wh_srv;

/* Reads the certificate, key and site (each with accel_read_file's cap),
 * checks them, binds the socket and starts serving.  On failure *out is NULL
 * and err->msg is one line that names the option or file and the fix:
 * ACCEL_ENOTFOUND/EPERM/EIO (a file), ACCEL_EINVAL (a bad certificate, key,
 * address), ACCEL_ECONFIG (the site file), ACCEL_EIO (bind, listen, the
 * daemon).  The caller owns *out and ends it with wh_srv_stop. */
enum accel_err wh_srv_start(struct wh_srv **out, const struct wh_srv_opts *o,
                            struct accel_error *err) ACCEL_WUR;

/* The port the server listens on (useful with port 0). */
unsigned wh_srv_port(const struct wh_srv *s);

/* Called about once a second from the main thread: every reload_s seconds
 * (at once when `force`, on SIGHUP) reloads the files whose inode, size or
 * mtime changed, keeping the old material when the new one is bad (a
 * warning says why); stops retired daemons whose connections are gone. */
void wh_srv_tick(struct wh_srv *s, bool force);

/* Stops accepting, waits up to drain_s for the requests in flight (their
 * responses carry Connection: close), stops every daemon and frees `s`.
 * NULL is fine. */
void wh_srv_stop(struct wh_srv *s);

/* ---------------------------------------------------------------- inputs.c */

/* What a file looked like when last read: a change of any field (a
 * kubelet's symlink swap changes the inode) triggers a reload. */
struct wh_fsig {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    bool ok; /* stat succeeded */
};

/* The site policy a request uses, shared by reference count. */
struct wh_site_ref {
    struct accel_site site;
    bool have; /* --site given */
    unsigned refs;
    unsigned long gen; /* a new number for every load (the config cache's key) */
};

void wh_fsig_read(struct wh_fsig *s, const char *path);
bool wh_fsig_same(const struct wh_fsig *a, const struct wh_fsig *b);

/* Reads `path` for option `opt` (at most 1 MiB); the message names both
 * and the fix. */
enum accel_err wh_read_opt_file(const char *opt, const char *path, char **data, size_t *len,
                                struct accel_error *err) ACCEL_WUR;

/* Checks that `cert` and `key` are PEM and that the key is the
 * certificate's, with the TLS stack libmicrohttpd uses; o names the files. */
enum accel_err wh_tls_check(const struct wh_srv_opts *o, const char *cert, size_t certlen,
                            const char *key, size_t keylen, struct accel_error *err) ACCEL_WUR;

/* Loads o->site (none: an empty policy) into a new reference (refs 1); the
 * message is the first finding, located, and says whether there are more. */
enum accel_err wh_site_load(const struct wh_srv_opts *o, struct wh_site_ref **out,
                            struct accel_error *err) ACCEL_WUR;

/* A listening TCP socket (non-blocking, close-on-exec) on --listen's
 * numeric ADDR:PORT ([v6]:PORT); *bound_port is the port it got (for :0). */
enum accel_err wh_listen(const char *addr, int *fd, unsigned *bound_port, bool *ipv6,
                         struct accel_error *err) ACCEL_WUR;

#endif
