/*
 * api.c: the webhook's client of the Kubernetes API server, with libcurl:
 * GET a ConfigMap's key and a Job's completions and completionMode for
 * mutate.c, through the struct wh_fetch callbacks.
 *
 * Every request: HTTPS only, the cluster CA (--api-ca) checked, the bearer
 * token of --api-token-file (re-read when the file changes: the kubelet
 * rotates projected tokens), a 2 s limit, a 1 MiB cap on the answer, no
 * redirects.  Connections and TLS sessions are shared between the request
 * threads (a curl share handle under one mutex).  Answers are kept for
 * ttl_s seconds in a small table, so the pods of one Job cost one GET.
 *
 * Failures come back as one line for the denial: what could not be read,
 * from where, and the fix (a 403 names the RBAC rule to add).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "accel/alloc.h"
#include "accel/buf.h"
#include "accel/clock.h"
#include "accel/fsutil.h"
#include "accel/log.h"
#include "server.h"
#include "webhook.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define ANSWER_MAX (1u << 20) /* bytes of a GET's body: a ConfigMap's own limit */
#define TOKEN_MAX (64u << 10)
#define CACHE_SLOTS 64
#define NAME_MAX_LEN 253 /* a DNS subdomain, the longest object name */

struct cached {
    char *key;  /* "configmap/NS/NAME/KEY" or "job/NS/NAME" (names hold no '/') */
    char *data; /* ConfigMap: the value; Job: NULL */
    size_t len;
    long completions;
    enum wh_job_mode mode;
    double at; /* monotonic seconds */
};

struct wh_api {
    char server[512]; /* https://host:port, no trailing slash */
    char token_file[512], ca_file[512];
    unsigned timeout_ms, ttl_s;
    CURLSH *share;
    pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST]; /* one per kind: libcurl nests them */

    pthread_mutex_t lock; /* the token and the cache */
    struct wh_fsig token_sig;
    char *token; /* NULL: none sent */
    struct cached cache[CACHE_SLOTS];
};

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *ctx)
{
    (void)h, (void)a;
    pthread_mutex_lock(&((struct wh_api *)ctx)->share_lock[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *ctx)
{
    (void)h;
    pthread_mutex_unlock(&((struct wh_api *)ctx)->share_lock[d]);
}

static bool readable(const char *path)
{
    FILE *f = fopen(path, "r");

    if (f == NULL)
        return false;
    fclose(f);
    return true;
}

/* ---------------------------------------------------------------- set-up */

/* Where the API server is: --api-server, else the in-cluster service's
 * KUBERNETES_SERVICE_HOST/PORT; "" when neither. */
static enum accel_err server_url(const struct wh_api_opts *o, char *url, size_t size,
                                 struct accel_error *err)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    size_t n;

    url[0] = '\0';
    if (o->server == NULL || o->server[0] == '\0') {
        if (host == NULL || host[0] == '\0')
            return ACCEL_OK;
        if (strspn(host, "0123456789abcdefABCDEF.:-") != strlen(host) ||
            (port != NULL && strspn(port, "0123456789") != strlen(port)))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "KUBERNETES_SERVICE_HOST/PORT '%.64s:%.8s' is not an address "
                                   "and port; give --api-server https://HOST:PORT",
                                   host, port ? port : "");
        snprintf(url, size, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
                 port != NULL && port[0] ? port : "443");
        return ACCEL_OK;
    }
    if (strncmp(o->server, "https://", 8) != 0 || o->server[8] == '\0' ||
        strpbrk(o->server, " \t\r\n?#") != NULL)
        return accel_error_set(err, ACCEL_EINVAL,
                               "--api-server %.200s: give an https:// URL (https://HOST:PORT); "
                               "the webhook never talks to the API server in the clear",
                               o->server);
    n = strlen(o->server);
    while (n > 8 && o->server[n - 1] == '/')
        n--;
    if (n >= size)
        return accel_error_set(err, ACCEL_EINVAL, "--api-server: longer than %zu bytes", size - 1);
    memcpy(url, o->server, n);
    url[n] = '\0';
    return ACCEL_OK;
}

/* A file option: as given (it must be readable), else the service
 * account's file when present, else "". */
static enum accel_err sa_file(const char *opt, const char *given, const char *dflt, char *out,
                              size_t size, struct accel_error *err)
{
    out[0] = '\0';
    if (given != NULL && given[0] != '\0') {
        if (!readable(given))
            return accel_error_set(err, ACCEL_ENOTFOUND, "%s %.200s: can't be read (%m)", opt,
                                   given);
        if (strlen(given) >= size)
            return accel_error_set(err, ACCEL_EINVAL, "%s: longer than %zu bytes", opt, size - 1);
        snprintf(out, size, "%s", given);
    } else if (readable(dflt)) {
        snprintf(out, size, "%s", dflt);
    }
    return ACCEL_OK;
}

enum accel_err wh_api_open(struct wh_api **out, const struct wh_api_opts *o,
                           struct accel_error *err)
{
    struct wh_api *a;
    char url[sizeof(a->server)];
    enum accel_err rc;

    *out = NULL;
    rc = server_url(o, url, sizeof(url), err);
    if (rc != ACCEL_OK || url[0] == '\0')
        return rc; /* no API server: inline configs only */
    a = accel_calloc(1, sizeof(*a));
    if (a == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "the API client: out of memory");
    snprintf(a->server, sizeof(a->server), "%s", url);
    a->timeout_ms = o->timeout_ms ? o->timeout_ms : 2000;
    a->ttl_s = o->ttl_s;
    rc = sa_file("--api-token-file", o->token_file, SA_DIR "/token", a->token_file,
                 sizeof(a->token_file), err);
    if (rc == ACCEL_OK)
        rc = sa_file("--api-ca", o->ca_file, SA_DIR "/ca.crt", a->ca_file, sizeof(a->ca_file), err);
    if (rc != ACCEL_OK) {
        accel_free(a);
        return rc;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        accel_free(a);
        return accel_error_set(err, ACCEL_EIO, "the API client: curl_global_init failed");
    }
    pthread_mutex_init(&a->lock, NULL);
    for (size_t i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&a->share_lock[i], NULL);
    a->share = curl_share_init();
    if (a->share != NULL) {
        curl_share_setopt(a->share, CURLSHOPT_LOCKFUNC, share_lock);
        curl_share_setopt(a->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
        curl_share_setopt(a->share, CURLSHOPT_USERDATA, a);
        curl_share_setopt(a->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
        curl_share_setopt(a->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
        curl_share_setopt(a->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    }
    *out = a;
    return ACCEL_OK;
}

const char *wh_api_server(const struct wh_api *a)
{
    return a != NULL ? a->server : "";
}

const char *wh_api_token_file(const struct wh_api *a)
{
    return a != NULL ? a->token_file : "";
}

const char *wh_api_ca_file(const struct wh_api *a)
{
    return a != NULL ? a->ca_file : "";
}

void wh_api_close(struct wh_api *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        accel_free(a->cache[i].key);
        accel_free(a->cache[i].data);
    }
    if (a->share != NULL)
        curl_share_cleanup(a->share);
    accel_free(a->token);
    pthread_mutex_destroy(&a->lock);
    for (size_t i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&a->share_lock[i]);
    accel_free(a);
    curl_global_cleanup();
}

/* ---------------------------------------------------------------- the token and the cache */

/* The "Authorization: Bearer ..." header line, or "" without a token;
 * re-reads the file when its signature changed.  Under a->lock. */
static void auth_header(struct wh_api *a, char *hdr, size_t size)
{
    struct wh_fsig sig;
    struct accel_error e;
    char *tok = NULL;
    size_t len = 0;

    hdr[0] = '\0';
    if (a->token_file[0] == '\0')
        return;
    wh_fsig_read(&sig, a->token_file);
    if (a->token == NULL || !wh_fsig_same(&sig, &a->token_sig)) {
        accel_error_clear(&e);
        if (accel_read_file(a->token_file, TOKEN_MAX, &tok, &len, &e) == ACCEL_OK) {
            while (len > 0 && (tok[len - 1] == '\n' || tok[len - 1] == '\r' || tok[len - 1] == ' '))
                tok[--len] = '\0';
            accel_free(a->token);
            a->token = tok;
            a->token_sig = sig;
        } else if (a->token == NULL) {
            accel_log(ACCEL_LOG_WARN, "--api-token-file %s: %s; asking without a token",
                      a->token_file, e.msg);
        }
    }
    if (a->token != NULL && a->token[0] != '\0' && strpbrk(a->token, "\r\n") == NULL)
        snprintf(hdr, size, "Authorization: Bearer %s", a->token);
}

/* The entry for `key` still within its TTL, else NULL.  Under a->lock. */
static struct cached *cache_find(struct wh_api *a, const char *key)
{
    double t = accel_now();

    for (size_t i = 0; i < CACHE_SLOTS; i++)
        if (a->cache[i].key != NULL && strcmp(a->cache[i].key, key) == 0)
            return t - a->cache[i].at < (double)a->ttl_s ? &a->cache[i] : NULL;
    return NULL;
}

/* Stores a copy (the same key's slot, else a free one, else the oldest).
 * Under a->lock; out of memory just leaves it uncached. */
static void cache_put(struct wh_api *a, const char *key, const char *data, size_t len,
                      long completions, enum wh_job_mode mode)
{
    struct cached *slot = &a->cache[0];
    char *k, *d = NULL;

    if (a->ttl_s == 0)
        return;
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        struct cached *c = &a->cache[i];
        if (c->key != NULL && strcmp(c->key, key) == 0) {
            slot = c;
            break;
        }
        if (slot->key != NULL && (c->key == NULL || c->at < slot->at))
            slot = c;
    }
    k = accel_strdup(key);
    if (data != NULL && (d = accel_malloc(len + 1)) != NULL) {
        memcpy(d, data, len);
        d[len] = '\0';
    }
    if (k == NULL || (data != NULL && d == NULL)) {
        accel_free(k);
        accel_free(d);
        return;
    }
    accel_free(slot->key);
    accel_free(slot->data);
    *slot = (struct cached){k, d, len, completions, mode, accel_now()};
}

/* ---------------------------------------------------------------- one GET */

struct answer {
    struct accel_buf body;
    bool over;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct answer *ans = ctx;

    if (accel_buf_add(&ans->body, p, size * n) != ACCEL_OK) {
        ans->over = true;
        return 0; /* libcurl stops: CURLE_WRITE_ERROR */
    }
    return size * n;
}

/* What a transport failure says, with the fix where there is one. */
static void curl_why(const struct wh_api *a, CURLcode cc, const char *detail, char *why,
                     size_t whylen)
{
    if (cc == CURLE_OPERATION_TIMEDOUT)
        snprintf(why, whylen, "timed out after %g s (API server %s)", a->timeout_ms / 1000.0,
                 a->server);
    else if (cc == CURLE_PEER_FAILED_VERIFICATION || cc == CURLE_SSL_CACERT_BADFILE)
        snprintf(why, whylen,
                 "the API server %s: its certificate does not verify against %s (%s); give "
                 "--api-ca the cluster's CA",
                 a->server, a->ca_file[0] ? a->ca_file : "the system's CAs", detail);
    else if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST)
        snprintf(why, whylen, "couldn't connect to the API server %s: %s", a->server, detail);
    else
        snprintf(why, whylen, "the API server %s: %s", a->server, detail);
}

/* GETs `path` (already escaped: names are DNS subdomains) into ans.
 * Returns the HTTP status, or 0 with the reason in why. */
static long get(struct wh_api *a, const char *path, struct answer *ans, char *why, size_t whylen)
{
    char url[1024], auth[TOKEN_MAX + 32], detail[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdrs = NULL, *h;
    long status = 0;
    CURLcode cc;
    CURL *c;

    snprintf(url, sizeof(url), "%s%s", a->server, path);
    pthread_mutex_lock(&a->lock);
    auth_header(a, auth, sizeof(auth));
    pthread_mutex_unlock(&a->lock);
    c = curl_easy_init();
    if (c == NULL) {
        snprintf(why, whylen, "the API client: out of memory");
        return 0;
    }
    h = curl_slist_append(hdrs, "Accept: application/json");
    if (h != NULL && auth[0] != '\0')
        h = curl_slist_append(h, auth);
    hdrs = h;
    curl_easy_setopt(c, CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS);
#endif
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)a->timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)a->timeout_ms);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (a->ca_file[0] != '\0')
        curl_easy_setopt(c, CURLOPT_CAINFO, a->ca_file);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "accelrun-webhook");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, ans);
    if (a->share != NULL)
        curl_easy_setopt(c, CURLOPT_SHARE, a->share);
    cc = curl_easy_perform(c);
    if (cc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else if (ans->over)
        snprintf(why, whylen, "the API server %s answered %s with more than %u bytes", a->server,
                 path, ANSWER_MAX);
    else
        curl_why(a, cc, detail[0] ? detail : curl_easy_strerror(cc), why, whylen);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    return status;
}

/* An answer other than 200, as the denial says it: `what` is "get
 * configmaps" etc., `rule` the RBAC rule a 403 needs. */
static void http_why(const struct wh_api *a, long status, const struct accel_buf *body,
                     const char *what, const char *ns, const char *name, const char *rule,
                     char *why, size_t whylen)
{
    char msg[320];

    wh_status_message(body->data, body->len, msg, sizeof(msg));
    if (status == 403)
        snprintf(why, whylen,
                 "403 Forbidden: the webhook's service account may not %s in namespace %s; add "
                 "%s to its ClusterRole (the chart's has it)%s%s",
                 what, ns, rule, msg[0] ? ": " : "", msg);
    else if (status == 401)
        snprintf(why, whylen,
                 "401 Unauthorized: the API server %s refused the token of %s; check "
                 "--api-token-file%s%s",
                 a->server, a->token_file[0] ? a->token_file : "(none: no --api-token-file)",
                 msg[0] ? ": " : "", msg);
    else if (status == 404)
        snprintf(why, whylen, "404 Not Found: no %s/%s%s%s", ns, name, msg[0] ? ": " : "", msg);
    else
        snprintf(why, whylen, "HTTP %ld from the API server %s%s%s", status, a->server,
                 msg[0] ? ": " : "", msg);
}

/* True for a name that may go into a URL path as it is: lowercase
 * letters, digits, '-' and '.', 1 to 253 bytes (namespaces and the names
 * mutate.c passes are DNS labels or subdomains; this is the last guard). */
static bool path_safe(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n <= NAME_MAX_LEN && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") == n &&
           strstr(s, "..") == NULL && s[0] != '.';
}

/* GETs `path`: 0 with the 200 answer in *body (the caller frees it with
 * accel_buf_free), -1 with why set otherwise. */
static int get_ok(struct wh_api *a, const char *path, const char *what, const char *ns,
                  const char *name, const char *rule, struct accel_buf *body, char *why,
                  size_t whylen)
{
    struct answer ans = {0};
    long status;

    accel_buf_init(&ans.body, ANSWER_MAX);
    status = get(a, path, &ans, why, whylen);
    if (status != 200) {
        if (status != 0)
            http_why(a, status, &ans.body, what, ns, name, rule, why, whylen);
        accel_buf_free(&ans.body);
        return -1;
    }
    *body = ans.body;
    return 0;
}

/* ---------------------------------------------------------------- the callbacks */

static int get_configmap(void *ctx, const char *ns, const char *name, const char *key, char **data,
                         size_t *len, char *why, size_t whylen)
{
    struct wh_api *a = ctx;
    char path[600], ckey[600];
    struct accel_buf body;
    struct cached *hit;
    int rc;

    *data = NULL;
    if (!path_safe(ns) || !path_safe(name)) {
        snprintf(why, whylen, "'%.64s/%.64s' is not a namespace and ConfigMap name", ns, name);
        return -1;
    }
    snprintf(ckey, sizeof(ckey), "configmap/%s/%s/%s", ns, name, key);
    pthread_mutex_lock(&a->lock);
    hit = cache_find(a, ckey);
    if (hit != NULL && (*data = accel_strdup(hit->data)) != NULL)
        *len = hit->len;
    pthread_mutex_unlock(&a->lock);
    if (*data != NULL)
        return 0;
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps/%s", ns, name);
    if (get_ok(a, path, "get configmaps", ns, name,
               "{apiGroups: [\"\"], resources: [configmaps], verbs: [get]}", &body, why,
               whylen) != 0)
        return -1;
    rc = wh_configmap_value(body.data, body.len, ns, name, key, data, len, why, whylen);
    accel_buf_free(&body);
    if (rc == 0) {
        pthread_mutex_lock(&a->lock);
        cache_put(a, ckey, *data, *len, -1, WH_JOB_MODE_UNKNOWN);
        pthread_mutex_unlock(&a->lock);
    }
    return rc;
}

static int get_job(void *ctx, const char *ns, const char *name, long *completions,
                   enum wh_job_mode *mode, char *why, size_t whylen)
{
    struct wh_api *a = ctx;
    char path[600], ckey[600];
    struct accel_buf body;
    struct cached *hit;
    bool found = false;
    int rc;

    if (!path_safe(ns) || !path_safe(name)) {
        snprintf(why, whylen, "'%.64s/%.64s' is not a namespace and Job name", ns, name);
        return -1;
    }
    snprintf(ckey, sizeof(ckey), "job/%s/%s", ns, name);
    pthread_mutex_lock(&a->lock);
    if ((hit = cache_find(a, ckey)) != NULL) {
        *completions = hit->completions;
        *mode = hit->mode;
        found = true;
    }
    pthread_mutex_unlock(&a->lock);
    if (found)
        return 0;
    snprintf(path, sizeof(path), "/apis/batch/v1/namespaces/%s/jobs/%s", ns, name);
    if (get_ok(a, path, "get jobs", ns, name,
               "{apiGroups: [batch], resources: [jobs], verbs: [get]}", &body, why, whylen) != 0)
        return -1;
    rc = wh_job_spec(body.data, body.len, ns, name, completions, mode, why, whylen);
    accel_buf_free(&body);
    if (rc == 0) {
        pthread_mutex_lock(&a->lock);
        cache_put(a, ckey, NULL, 0, *completions, *mode);
        pthread_mutex_unlock(&a->lock);
    }
    return rc;
}

void wh_api_fetch(struct wh_api *a, struct wh_fetch *f)
{
    memset(f, 0, sizeof(*f));
    if (a == NULL)
        return;
    f->configmap = get_configmap;
    f->job = get_job;
    f->ctx = a;
}
