/*
 * server.c: accelrun-webhook's HTTPS server.  One listening socket, bound
 * here (so "address in use" is reported as such), served by a libmicrohttpd
 * daemon over GnuTLS (TLS 1.2 and 1.3 only), with a thread pool, a
 * connection limit, an idle timeout and a cap on each request's body
 * (WH_MAX_BODY: checked against Content-Length before reading, and while
 * reading).  Routes: POST /mutate (the core of webhook.h), GET /healthz,
 * /readyz, /metrics.
 *
 * Reload: a new certificate/key pair is checked with GnuTLS, then a second
 * daemon is started on a dup() of the same socket; once it runs, the old one
 * is quiesced (stops accepting; the kernel's backlog is never closed, so no
 * connection is refused), answers its remaining requests with
 * Connection: close, and is stopped when its last connection is gone (or
 * after the idle timeout).  A new site file is swapped in under a reference
 * count, so a request keeps the policy it started with.  Anything bad is
 * logged and the old material kept.
 *
 * The API server is reached through o.fetch (api.c's client, made by
 * main.c).  No HTTP/2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>

#include "accel/alloc.h"
#include "accel/clock.h"
#include "accel/diag.h"
#include "accel/fsutil.h"
#include "accel/log.h"
#include "accel/site.h"
#include "accel/value.h"
#include "server.h"
#include "webhook.h"

/* TLS 1.2 and 1.3 only, GnuTLS's NORMAL ciphers otherwise. */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define HEADER_MEMORY (64u << 10) /* libmicrohttpd's per-connection pool: headers, buffers */

/* One libmicrohttpd daemon; two live at once during a certificate reload. */
struct daemon_rec {
    struct MHD_Daemon *d;
    struct wh_srv *srv;
    int fd;                 /* its dup() of the listening socket */
    atomic_uint conns;      /* its open connections */
    atomic_bool closing;    /* quiesced: answer with Connection: close */
    double retire_deadline; /* accel_now() after which it is stopped anyway */
    struct daemon_rec *next;
};

struct wh_srv {
    struct wh_srv_opts o;
    int lfd; /* the listening socket */
    unsigned port;
    bool ipv6;
    struct wh_metrics *m;
    struct daemon_rec *cur;     /* accepting */
    struct daemon_rec *retired; /* quiesced, finishing */
    struct wh_fsig sig_cert, sig_key, sig_site;
    double next_check;

    pthread_mutex_t mu;  /* guards site, inflight */
    pthread_cond_t idle; /* inflight reached 0 */
    struct wh_site_ref *site;
    unsigned inflight;    /* requests between their first handler call and completion */
    atomic_bool draining; /* SIGTERM: /readyz 503, Connection: close */
};

/* One HTTP request's state, from its headers to its completion. */
struct req {
    struct daemon_rec *dr;
    double t0;
    bool mutate;    /* POST /mutate, reading the body */
    bool other;     /* any other path: answered once the request is in */
    bool too_big;   /* the body passed WH_MAX_BODY: discarding the rest */
    size_t dropped; /* bytes discarded after that */
    char *body;
    size_t len, cap;
};

static void site_unref(struct wh_srv *s, struct wh_site_ref *r)
{
    bool last;

    if (r == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    last = --r->refs == 0;
    pthread_mutex_unlock(&s->mu);
    if (last) {
        if (r->have)
            accel_site_free(&r->site);
        accel_free(r);
    }
}

static struct wh_site_ref *site_get(struct wh_srv *s)
{
    struct wh_site_ref *r;

    pthread_mutex_lock(&s->mu);
    r = s->site;
    r->refs++;
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* ---------------------------------------------------------------- responses */

static enum MHD_Result respond(struct req *r, struct MHD_Connection *c, unsigned status,
                               const char *ctype, const char *body, size_t len)
{
    struct MHD_Response *resp;
    enum MHD_Result ret;

    resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->mutate ? "POST" : "GET, HEAD");
    if (atomic_load(&r->dr->closing) || atomic_load(&r->dr->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    ret = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static enum MHD_Result respond_text(struct req *r, struct MHD_Connection *c, unsigned status,
                                    const char *text)
{
    return respond(r, c, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* {"code":N,"message":"..."}: what a request that is no review gets. */
static enum MHD_Result respond_error(struct req *r, struct MHD_Connection *c, unsigned status,
                                     const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    char *s = NULL;
    enum MHD_Result ret;

    if (o != NULL && cJSON_AddNumberToObject(o, "code", status) != NULL &&
        cJSON_AddStringToObject(o, "message", msg) != NULL)
        s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (s == NULL)
        return respond_text(r, c, status, msg);
    ret = respond(r, c, status, "application/json", s, strlen(s));
    cJSON_free(s);
    return ret;
}

static void count(struct req *r, enum wh_outcome o, bool patched, unsigned status)
{
    double dt = accel_now() - r->t0;

    wh_metrics_request(r->dr->srv->m, o, dt, patched);
    accel_log(ACCEL_LOG_DEBUG, "POST /mutate %u %s %.3f ms", status,
              o == WH_OUTCOME_ALLOWED  ? "allowed"
              : o == WH_OUTCOME_DENIED ? "denied"
              : o == WH_OUTCOME_ERROR  ? "error"
                                       : "bad request",
              dt * 1e3);
}

static enum MHD_Result fail(struct req *r, struct MHD_Connection *c, unsigned status,
                            const char *msg)
{
    count(r, status >= 500 ? WH_OUTCOME_ERROR : WH_OUTCOME_BAD_REQUEST, false, status);
    return respond_error(r, c, status, msg);
}

/* The body is all there: decode, decide, encode. */
static enum MHD_Result mutate(struct req *r, struct MHD_Connection *c)
{
    struct wh_srv *s = r->dr->srv;
    struct wh_review rv = {0};
    struct wh_response resp;
    struct accel_error err;
    struct wh_site_ref *site;
    struct wh_opts opts = {0};
    char *out = NULL;
    size_t outlen = 0;
    enum accel_err rc;
    enum MHD_Result ret;

    accel_error_clear(&err);
    wh_response_init(&resp);
    rc = wh_review_decode(&rv, r->body != NULL ? r->body : "", r->len, &err);
    if (rc != ACCEL_OK) {
        wh_review_free(&rv);
        return fail(r, c, (unsigned)wh_http_status(rc), err.msg);
    }
    site = site_get(s);
    opts.site = site->have ? &site->site : NULL;
    opts.fetch = s->o.fetch;
    opts.cache = s->o.cfg_cache;
    opts.site_gen = site->gen;
    rc = wh_mutate(&rv, &opts, &resp, &err);
    if (rc == ACCEL_OK)
        rc = wh_response_encode(rv.uid, &resp, &out, &outlen, &err);
    site_unref(s, site);
    if (rc != ACCEL_OK) {
        ret = fail(r, c, (unsigned)wh_http_status(rc), err.msg);
    } else {
        count(r, resp.allowed ? WH_OUTCOME_ALLOWED : WH_OUTCOME_DENIED, resp.patch != NULL, 200);
        ret = respond(r, c, MHD_HTTP_OK, "application/json", out, outlen);
    }
    accel_free(out);
    wh_response_free(&resp);
    wh_review_free(&rv);
    return ret;
}

static bool is_get(const char *method)
{
    return strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
}

/* The paths but /mutate, answered once the request is complete: a response
 * queued before that makes libmicrohttpd close the connection, and probes
 * and scrapers keep theirs alive. */
static enum MHD_Result answer_other(struct req *r, struct MHD_Connection *c, const char *url,
                                    const char *method)
{
    struct wh_srv *s = r->dr->srv;

    if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0 ||
        strcmp(url, "/metrics") == 0) {
        if (!is_get(method))
            return respond_text(r, c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
        if (strcmp(url, "/healthz") == 0)
            return respond_text(r, c, MHD_HTTP_OK, "ok\n");
        if (strcmp(url, "/readyz") == 0)
            return atomic_load(&s->draining)
                       ? respond_text(r, c, MHD_HTTP_SERVICE_UNAVAILABLE, "draining\n")
                       : respond_text(r, c, MHD_HTTP_OK, "ok\n");
        {
            struct accel_buf b;
            enum MHD_Result ret;

            accel_buf_init(&b, 64u << 10);
            if (wh_metrics_render(s->m, s->o.cfg_cache, &b) != ACCEL_OK) {
                accel_buf_free(&b);
                return respond_text(r, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
            }
            ret = respond(r, c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                          accel_buf_str(&b), b.len);
            accel_buf_free(&b);
            return ret;
        }
    }
    return respond_text(r, c, MHD_HTTP_NOT_FOUND,
                        "not found (POST /mutate, GET /healthz, "
                        "/readyz, /metrics)\n");
}

/* The request's headers are in: route it.  Only an error of /mutate is
 * answered at once (with a body still to come, the connection is closed). */
static enum MHD_Result first_call(struct req *r, struct MHD_Connection *c, const char *url,
                                  const char *method)
{
    if (strcmp(url, "/mutate") == 0) {
        const char *cl;

        r->mutate = true;
        if (strcmp(method, MHD_HTTP_METHOD_POST) != 0)
            return fail(r, c, MHD_HTTP_METHOD_NOT_ALLOWED, "/mutate takes POST");
        cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl != NULL) {
            char *end;
            unsigned long long n;

            errno = 0;
            n = strtoull(cl, &end, 10);
            if (errno != 0 || end == cl || *end != '\0' || n > WH_MAX_BODY) {
                char msg[128];

                snprintf(msg, sizeof(msg), "request body: over %u bytes (Content-Length %.40s)",
                         WH_MAX_BODY, cl);
                return fail(r, c, MHD_HTTP_CONTENT_TOO_LARGE, msg);
            }
            if (n > 0) {
                r->body = accel_malloc((size_t)n);
                if (r->body == NULL)
                    return fail(r, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
                r->cap = (size_t)n;
            }
        }
        return MHD_YES;
    }
    r->other = true;
    return MHD_YES;
}

/* A piece of the body: kept while under the cap, then discarded up to as
 * much again (so that the 413 can be sent), past that the connection is
 * closed. */
static enum MHD_Result body_chunk(struct req *r, const char *data, size_t n)
{
    if (accel_now() - r->t0 > r->dr->srv->o.timeout_s) {
        count(r, WH_OUTCOME_BAD_REQUEST, false, 408);
        accel_log(ACCEL_LOG_DEBUG, "a request body took over %u s; connection closed",
                  r->dr->srv->o.timeout_s);
        return MHD_NO;
    }
    if (r->too_big || n > WH_MAX_BODY - r->len) {
        if (!r->too_big) {
            accel_free(r->body);
            r->body = NULL;
            r->len = r->cap = 0;
            r->too_big = true;
        }
        r->dropped += n;
        if (r->dropped > WH_MAX_BODY) {
            count(r, WH_OUTCOME_BAD_REQUEST, false, 413);
            return MHD_NO;
        }
        return MHD_YES;
    }
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 16384;
        char *p;

        while (cap < r->len + n)
            cap = cap > WH_MAX_BODY / 2 ? WH_MAX_BODY : cap * 2;
        p = accel_realloc(r->body, cap);
        if (p == NULL)
            return MHD_NO;
        r->body = p;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
    struct daemon_rec *dr = cls;
    struct req *r = *con_cls;
    enum MHD_Result ret;

    (void)version;
    if (r == NULL) {
        r = accel_calloc(1, sizeof(*r));
        if (r == NULL)
            return MHD_NO;
        r->dr = dr;
        r->t0 = accel_now();
        pthread_mutex_lock(&dr->srv->mu);
        dr->srv->inflight++;
        pthread_mutex_unlock(&dr->srv->mu);
        *con_cls = r;
        return first_call(r, c, url, method);
    }
    if (r->other) {
        if (*size == 0) /* the request is complete */
            return answer_other(r, c, url, method);
        r->dropped += *size; /* a body there is dropped, within the cap */
        *size = 0;
        return r->dropped > WH_MAX_BODY ? MHD_NO : MHD_YES;
    }
    if (*size > 0) {
        ret = body_chunk(r, data, *size);
        *size = 0;
        return ret;
    }
    if (r->too_big) {
        char msg[96];

        snprintf(msg, sizeof(msg), "request body: over %u bytes", WH_MAX_BODY);
        return fail(r, c, MHD_HTTP_CONTENT_TOO_LARGE, msg);
    }
    return mutate(r, c);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct daemon_rec *dr = cls;
    struct req *r = *con_cls;

    (void)c;
    (void)toe;
    if (r == NULL)
        return;
    accel_free(r->body);
    accel_free(r);
    *con_cls = NULL;
    pthread_mutex_lock(&dr->srv->mu);
    if (--dr->srv->inflight == 0)
        pthread_cond_broadcast(&dr->srv->idle);
    pthread_mutex_unlock(&dr->srv->mu);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct daemon_rec *dr = cls;

    (void)c;
    (void)socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&dr->conns, 1);
        atomic_fetch_add_explicit(&dr->srv->m->connections, 1, memory_order_relaxed);
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        atomic_fetch_sub(&dr->conns, 1);
    }
}

/* libmicrohttpd's own messages: TLS handshakes that failed (plain HTTP on
 * the port, TLS 1.1), timeouts.  A client's doing, so debug level. */
__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char line[512];
    size_t n;

    (void)cls;
    vsnprintf(line, sizeof(line), fmt, ap);
    n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    accel_log(ACCEL_LOG_DEBUG, "libmicrohttpd: %s", line);
}

/* ---------------------------------------------------------------- daemons */

/* Starts a daemon on a dup() of the listening socket with this PEM pair. */
static enum accel_err daemon_start(struct wh_srv *s, const char *cert, const char *key,
                                   struct daemon_rec **out, struct accel_error *err)
{
    struct daemon_rec *dr;
    unsigned flags =
        MHD_USE_TLS | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    struct MHD_OptionItem ops[16];
    size_t n = 0;

    *out = NULL;
    dr = accel_calloc(1, sizeof(*dr));
    if (dr == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "out of memory");
    dr->srv = s;
    dr->fd = fcntl(s->lfd, F_DUPFD_CLOEXEC, 0);
    if (dr->fd < 0) {
        accel_free(dr);
        return accel_error_sys(err, ACCEL_EIO, "couldn't duplicate the listening socket");
    }
    flags |= MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? MHD_USE_EPOLL : MHD_USE_AUTO;
    if (s->ipv6)
        flags |= MHD_USE_IPv6;
    /* first, so that every message of the daemon goes through it */
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, NULL};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, dr->fd, NULL};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)cert};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, s->o.max_conns, NULL};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, s->o.timeout_s, NULL};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, HEADER_MEMORY, NULL};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, dr};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, dr};
    if (s->o.threads > 1)
        ops[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, s->o.threads, NULL};
    ops[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    dr->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, dr, MHD_OPTION_ARRAY, ops,
                             MHD_OPTION_END);
    if (dr->d == NULL) {
        close(dr->fd);
        accel_free(dr);
        return accel_error_set(err, ACCEL_EIO,
                               "couldn't start the HTTPS daemon (libmicrohttpd %s with "
                               "GnuTLS; run with -v for its reason)",
                               MHD_get_version());
    }
    *out = dr;
    return ACCEL_OK;
}

static void daemon_stop(struct daemon_rec *dr)
{
    if (dr == NULL)
        return;
    /* Quiesced first, so that libmicrohttpd never closes the socket itself;
     * our dup is closed after the threads are gone. */
    MHD_quiesce_daemon(dr->d);
    MHD_stop_daemon(dr->d);
    close(dr->fd);
    accel_free(dr);
}

/* Moves the accepting daemon to the retired list. */
static void daemon_retire(struct wh_srv *s, struct daemon_rec *dr)
{
    MHD_quiesce_daemon(dr->d);
    atomic_store(&dr->closing, true);
    dr->retire_deadline = accel_now() + s->o.timeout_s + 2;
    dr->next = s->retired;
    s->retired = dr;
}

/* ---------------------------------------------------------------- life cycle */

/* Reads and checks the pair, then starts a daemon with it. */
static enum accel_err load_tls(struct wh_srv *s, struct daemon_rec **out, struct accel_error *err)
{
    char *cert = NULL, *key = NULL;
    size_t certlen = 0, keylen = 0;
    enum accel_err rc;

    *out = NULL;
    wh_fsig_read(&s->sig_cert, s->o.cert);
    wh_fsig_read(&s->sig_key, s->o.key);
    rc = wh_read_opt_file("--tls-cert", s->o.cert, &cert, &certlen, err);
    if (rc == ACCEL_OK)
        rc = wh_read_opt_file("--tls-key", s->o.key, &key, &keylen, err);
    if (rc == ACCEL_OK)
        rc = wh_tls_check(&s->o, cert, certlen, key, keylen, err);
    if (rc == ACCEL_OK)
        rc = daemon_start(s, cert, key, out, err);
    if (key != NULL) {
        explicit_bzero(key, keylen);
        accel_free(key);
    }
    accel_free(cert);
    return rc;
}

enum accel_err wh_srv_start(struct wh_srv **out, const struct wh_srv_opts *o,
                            struct accel_error *err)
{
    struct wh_srv *s;
    enum accel_err rc;

    *out = NULL;
    s = accel_calloc(1, sizeof(*s));
    if (s == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "out of memory");
    s->o = *o;
    s->m = o->metrics;
    s->lfd = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    wh_fsig_read(&s->sig_site, o->site);
    rc = wh_site_load(o, &s->site, err);
    if (rc == ACCEL_OK)
        rc = wh_listen(s->o.listen, &s->lfd, &s->port, &s->ipv6, err);
    if (rc == ACCEL_OK)
        rc = load_tls(s, &s->cur, err);
    if (rc != ACCEL_OK) {
        wh_srv_stop(s);
        return rc;
    }
    s->next_check = accel_now() + o->reload_s;
    *out = s;
    return ACCEL_OK;
}

unsigned wh_srv_port(const struct wh_srv *s)
{
    return s->port;
}

static void reload_tls(struct wh_srv *s)
{
    struct daemon_rec *dr = NULL;
    struct accel_error err;

    accel_error_clear(&err);
    if (load_tls(s, &dr, &err) != ACCEL_OK) {
        atomic_fetch_add(&s->m->reloads_failed, 1);
        accel_log(ACCEL_LOG_WARN, "reload: %s; still serving the previous certificate", err.msg);
        return;
    }
    /* Both accept until the old one is quiesced: no gap. */
    daemon_retire(s, s->cur);
    s->cur = dr;
    atomic_fetch_add(&s->m->reloads_ok, 1);
    accel_log(ACCEL_LOG_INFO, "reload: serving the certificate of %s", s->o.cert);
}

static void reload_site(struct wh_srv *s)
{
    struct wh_site_ref *r = NULL, *old;
    struct accel_error err;

    accel_error_clear(&err);
    wh_fsig_read(&s->sig_site, s->o.site);
    if (wh_site_load(&s->o, &r, &err) != ACCEL_OK) {
        atomic_fetch_add(&s->m->reloads_failed, 1);
        accel_log(ACCEL_LOG_WARN, "reload: %s; still using the previous site policy", err.msg);
        return;
    }
    pthread_mutex_lock(&s->mu);
    old = s->site;
    s->site = r;
    pthread_mutex_unlock(&s->mu);
    site_unref(s, old);
    atomic_fetch_add(&s->m->reloads_ok, 1);
    accel_log(ACCEL_LOG_INFO, "reload: site policy from %s", s->o.site);
}

void wh_srv_tick(struct wh_srv *s, bool force)
{
    double now = accel_now();
    struct daemon_rec **p = &s->retired;

    while (*p != NULL) {
        struct daemon_rec *dr = *p;

        if (atomic_load(&dr->conns) == 0 || now > dr->retire_deadline) {
            *p = dr->next;
            daemon_stop(dr);
        } else {
            p = &dr->next;
        }
    }
    if (force || now >= s->next_check) {
        struct wh_fsig c, k, st;

        s->next_check = now + s->o.reload_s;
        wh_fsig_read(&c, s->o.cert);
        wh_fsig_read(&k, s->o.key);
        if (force || !wh_fsig_same(&c, &s->sig_cert) || !wh_fsig_same(&k, &s->sig_key))
            reload_tls(s);
        if (s->o.site != NULL) {
            wh_fsig_read(&st, s->o.site);
            if (force || !wh_fsig_same(&st, &s->sig_site))
                reload_site(s);
        }
    }
}

void wh_srv_stop(struct wh_srv *s)
{
    struct timespec until;
    double deadline;

    if (s == NULL)
        return;
    atomic_store(&s->draining, true);
    if (s->cur != NULL)
        MHD_quiesce_daemon(s->cur->d);
    deadline = accel_now() + s->o.drain_s;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += s->o.drain_s;
    pthread_mutex_lock(&s->mu);
    while (s->inflight > 0 && accel_now() < deadline)
        if (pthread_cond_timedwait(&s->idle, &s->mu, &until) == ETIMEDOUT)
            break;
    if (s->inflight > 0)
        accel_log(ACCEL_LOG_WARN, "shutdown: %u requests still in flight after %u s; closing",
                  s->inflight, s->o.drain_s);
    pthread_mutex_unlock(&s->mu);
    daemon_stop(s->cur);
    while (s->retired != NULL) {
        struct daemon_rec *dr = s->retired;

        s->retired = dr->next;
        daemon_stop(dr);
    }
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->site != NULL)
        site_unref(s, s->site);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    accel_free(s);
}
