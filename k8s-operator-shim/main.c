/*
 * main.c: accelrun-webhook, the Kubernetes admission webhook's program.
 * Parses the options, installs the stderr log hook, blocks the signals
 * before libmicrohttpd starts its threads, and runs the main thread's loop:
 * a tick a second (file reloads, retired daemons), SIGHUP reloads at once,
 * SIGTERM/SIGINT drain and exit 0.  Start-up failures exit 2 with one line.
 * The API server client (--api-*, api.c) is made here, before the server.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accel/err.h"
#include "accel/log.h"
#include "server.h"

#define EXIT_USAGE 2

static const char usage[] =
    "usage: accelrun-webhook --tls-cert FILE --tls-key FILE [--listen ADDR:PORT] [--site FILE]\n"
    "                        [--threads N] [--max-connections N] [--timeout SECONDS]\n"
    "                        [--drain SECONDS] [--reload-interval SECONDS]\n"
    "                        [--api-server URL] [--api-token-file FILE] [--api-ca FILE]\n"
    "                        [--api-timeout MS] [--api-cache SECONDS] [--config-cache N] [-v]\n"
    "\n"
    "The Kubernetes admission webhook: POST /mutate answers AdmissionReview\n"
    "admission.k8s.io/v1 for the pods of Indexed Jobs annotated accelrun.io/config.\n"
    "HTTPS only (TLS 1.2+).\n"
    "\n"
    "  --tls-cert FILE          PEM certificate chain (reloaded when the file changes)\n"
    "  --tls-key FILE           its PEM private key (reloaded with it)\n"
    "  --listen ADDR:PORT       default 0.0.0.0:8443; port 0 picks a free one\n"
    "  --site FILE              site policy, as for the SPANK plugin (reloaded too)\n"
    "  --threads N              request threads (default 2)\n"
    "  --max-connections N      default 256\n"
    "  --timeout SECONDS        idle connections and slow requests are dropped (default 10)\n"
    "  --drain SECONDS          SIGTERM waits this long for requests in flight (default 10)\n"
    "  --reload-interval SECONDS  how often the files are checked (default 5; SIGHUP: now)\n"
    "  --api-server URL         the API server, https:// only, for accelrun.io/config-map\n"
    "                           and the Job check (default: in a cluster, from\n"
    "                           KUBERNETES_SERVICE_HOST/PORT; elsewhere none)\n"
    "  --api-token-file FILE    bearer token, re-read when it changes (default: the\n"
    "                           service account's token)\n"
    "  --api-ca FILE            the API server's CA (default: the service account's ca.crt)\n"
    "  --api-timeout MS         per API request (default 2000)\n"
    "  --api-cache SECONDS      how long a ConfigMap or Job read is reused (default 10; 0: never)\n"
    "  --config-cache N         configs kept loaded for the next pods of their Job (default 64;\n"
    "                           0: each review loads its own)\n"
    "  -v, --verbose            a line per request, libmicrohttpd's messages\n"
    "\n"
    "Endpoints: POST /mutate, GET /healthz, GET /readyz, GET /metrics (Prometheus).\n"
    "Exit status: 0 after SIGTERM/SIGINT, 2 usage or start-up problems.\n"
    "Docs: docs/webhook.md\n";

static int verbose;

static void log_stderr(void *ctx, enum accel_log_level level, const char *line)
{
    static const char *const names[] = {"debug", "info", "warning", "error"};
    char buf[1200];
    int n;

    (void)ctx;
    if (level == ACCEL_LOG_DEBUG && !verbose)
        return;
    /* One write per line, so lines from several threads never interleave. */
    n = snprintf(buf, sizeof(buf), "accelrun-webhook: %s: %s\n",
                 (unsigned)level < 4 ? names[level] : "?", line);
    if (n > 0)
        (void)!write(STDERR_FILENO, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static int parse_uint(const char *opt, const char *s, unsigned lo, unsigned hi, unsigned *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "accelrun-webhook: %s %s: give a whole number from %u to %u\n", opt, s, lo,
                hi);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}

enum {
    OPT_CERT = 256,
    OPT_KEY,
    OPT_LISTEN,
    OPT_SITE,
    OPT_THREADS,
    OPT_CONNS,
    OPT_TIMEOUT,
    OPT_DRAIN,
    OPT_RELOAD,
    OPT_API_SERVER,
    OPT_API_TOKEN,
    OPT_API_CA,
    OPT_API_TIMEOUT,
    OPT_API_CACHE,
    OPT_CFG_CACHE,
};

/* The command line: the server's options, the API client's, the number of
 * configs cached. */
struct args {
    struct wh_srv_opts o;
    struct wh_api_opts ao;
    unsigned cfg_slots;
};

#define GO_ON (-1) /* parse: the command line is good, start */

/* A numeric option: 1 when `c` is one (its value stored), 0 when it is
 * not, -1 for a bad value (said). */
static int number_option(int c, const char *arg, struct args *a)
{
    const struct {
        int c;
        const char *name;
        unsigned lo, hi;
        unsigned *out;
    } nums[] = {
        {OPT_THREADS, "--threads", 1, 64, &a->o.threads},
        {OPT_CONNS, "--max-connections", 1, 65536, &a->o.max_conns},
        {OPT_TIMEOUT, "--timeout", 1, 3600, &a->o.timeout_s},
        {OPT_DRAIN, "--drain", 0, 3600, &a->o.drain_s},
        {OPT_RELOAD, "--reload-interval", 1, 3600, &a->o.reload_s},
        {OPT_API_TIMEOUT, "--api-timeout", 100, 30000, &a->ao.timeout_ms},
        {OPT_API_CACHE, "--api-cache", 0, 3600, &a->ao.ttl_s},
        {OPT_CFG_CACHE, "--config-cache", 0, WH_CFG_CACHE_MAX_SLOTS, &a->cfg_slots},
    };

    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++)
        if (nums[i].c == c)
            return parse_uint(nums[i].name, arg, nums[i].lo, nums[i].hi, nums[i].out) == 0 ? 1 : -1;
    return 0;
}

/* The options into `a`.  Returns GO_ON, or the exit status: 0 after
 * --help, EXIT_USAGE (said on stderr). */
static int parse(int argc, char **argv, struct args *a)
{
    static const struct option longopts[] = {
        {"tls-cert", required_argument, NULL, OPT_CERT},
        {"tls-key", required_argument, NULL, OPT_KEY},
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"site", required_argument, NULL, OPT_SITE},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"max-connections", required_argument, NULL, OPT_CONNS},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"drain", required_argument, NULL, OPT_DRAIN},
        {"reload-interval", required_argument, NULL, OPT_RELOAD},
        {"api-server", required_argument, NULL, OPT_API_SERVER},
        {"api-token-file", required_argument, NULL, OPT_API_TOKEN},
        {"api-ca", required_argument, NULL, OPT_API_CA},
        {"api-timeout", required_argument, NULL, OPT_API_TIMEOUT},
        {"api-cache", required_argument, NULL, OPT_API_CACHE},
        {"config-cache", required_argument, NULL, OPT_CFG_CACHE},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, idx, num;

    while ((c = getopt_long(argc, argv, "vh", longopts, &idx)) != -1) {
        num = number_option(c, optarg, a);
        if (num < 0)
            return EXIT_USAGE;
        if (num > 0)
            continue;
        switch (c) {
        case OPT_CERT:
            a->o.cert = optarg;
            break;
        case OPT_KEY:
            a->o.key = optarg;
            break;
        case OPT_LISTEN:
            a->o.listen = optarg;
            break;
        case OPT_SITE:
            a->o.site = optarg;
            break;
        case OPT_API_SERVER:
            a->ao.server = optarg;
            break;
        case OPT_API_TOKEN:
            a->ao.token_file = optarg;
            break;
        case OPT_API_CA:
            a->ao.ca_file = optarg;
            break;
        case 'v':
            verbose = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "accelrun-webhook: %s: unexpected argument\n%s", argv[optind], usage);
        return EXIT_USAGE;
    }
    if (a->o.cert == NULL || a->o.key == NULL) {
        fprintf(stderr,
                "accelrun-webhook: --tls-cert and --tls-key are required (HTTPS only: the API "
                "server calls webhooks over TLS)\n");
        return EXIT_USAGE;
    }
    return GO_ON;
}

/* Blocked in every thread libmicrohttpd starts; taken by sigtimedwait. */
static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* The API client (*api NULL: none), the config cache and the server.
 * Returns 0, or EXIT_USAGE (said) with nothing left made. */
static int start(struct args *a, struct wh_fetch *fetch, struct wh_api **api, struct wh_srv **srv)
{
    struct accel_error err;

    accel_error_clear(&err);
    if (wh_api_open(api, &a->ao, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun-webhook: %s\n", err.msg);
        return EXIT_USAGE;
    }
    wh_api_fetch(*api, fetch);
    a->o.fetch = *api != NULL ? fetch : NULL;
    if (wh_cfg_cache_new(&a->o.cfg_cache, a->cfg_slots) != ACCEL_OK) {
        fprintf(stderr, "accelrun-webhook: --config-cache %u: out of memory\n", a->cfg_slots);
        goto fail;
    }
    if (wh_srv_start(srv, &a->o, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun-webhook: %s\n", err.msg);
        goto fail;
    }
    return 0;
fail:
    wh_cfg_cache_free(a->o.cfg_cache);
    wh_api_close(*api);
    return EXIT_USAGE;
}

static void log_started(const struct wh_srv_opts *o, const struct wh_srv *srv,
                        const struct wh_api *api)
{
    accel_log(ACCEL_LOG_INFO, "listening on %s, port %u (site policy: %s)", o->listen,
              wh_srv_port(srv), o->site != NULL ? o->site : "none");
    if (api == NULL)
        accel_log(ACCEL_LOG_WARN,
                  "no API server (no --api-server, not in a cluster): inline configs only; "
                  "accelrun.io/config-map is denied and Jobs are not checked");
    else
        accel_log(ACCEL_LOG_INFO, "API server %s (token %s, CA %s)", wh_api_server(api),
                  wh_api_token_file(api)[0] ? wh_api_token_file(api) : "none",
                  wh_api_ca_file(api)[0] ? wh_api_ca_file(api) : "the system's");
}

/* The main thread's loop: a tick a second, SIGHUP reloads at once, until
 * SIGTERM or SIGINT. */
static void serve(struct wh_srv *srv, const sigset_t *set)
{
    for (;;) {
        struct timespec tick = {1, 0};
        int sig = sigtimedwait(set, NULL, &tick);

        if (sig == SIGTERM || sig == SIGINT) {
            accel_log(ACCEL_LOG_INFO, "%s: draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            break;
        }
        wh_srv_tick(srv, sig == SIGHUP);
    }
}

int main(int argc, char **argv)
{
    static struct wh_metrics metrics;
    struct args a = {
        .o = {.listen = "0.0.0.0:8443",
              .threads = 2,
              .max_conns = 256,
              .timeout_s = 10,
              .drain_s = 10,
              .reload_s = 5,
              .metrics = &metrics},
        .ao = {.timeout_ms = 2000, .ttl_s = 10},
        .cfg_slots = WH_CFG_CACHE_SLOTS,
    };
    struct wh_api *api = NULL;
    struct wh_fetch fetch;
    struct wh_srv *srv = NULL;
    sigset_t set;
    int status;

    accel_log_set(log_stderr, NULL);
    status = parse(argc, argv, &a);
    if (status != GO_ON)
        return status;
    block_signals(&set);
    status = start(&a, &fetch, &api, &srv);
    if (status != 0)
        return status;
    log_started(&a.o, srv, api);
    serve(srv, &set);
    wh_srv_stop(srv);
    wh_cfg_cache_free(a.o.cfg_cache);
    wh_api_close(api);
    accel_log(ACCEL_LOG_INFO, "stopped");
    return 0;
}
