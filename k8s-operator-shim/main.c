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

int main(int argc, char **argv)
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
    static struct wh_metrics metrics;
    struct wh_srv_opts o = {
        .listen = "0.0.0.0:8443",
        .threads = 2,
        .max_conns = 256,
        .timeout_s = 10,
        .drain_s = 10,
        .reload_s = 5,
        .metrics = &metrics,
    };
    struct wh_api_opts ao = {.timeout_ms = 2000, .ttl_s = 10};
    struct wh_api *api = NULL;
    unsigned cfg_slots = WH_CFG_CACHE_SLOTS;
    struct wh_fetch fetch;
    struct wh_srv *srv = NULL;
    struct accel_error err;
    sigset_t set;
    int c, idx;

    accel_log_set(log_stderr, NULL);
    while ((c = getopt_long(argc, argv, "vh", longopts, &idx)) != -1) {
        switch (c) {
        case OPT_CERT:
            o.cert = optarg;
            break;
        case OPT_KEY:
            o.key = optarg;
            break;
        case OPT_LISTEN:
            o.listen = optarg;
            break;
        case OPT_SITE:
            o.site = optarg;
            break;
        case OPT_THREADS:
            if (parse_uint("--threads", optarg, 1, 64, &o.threads) != 0)
                return EXIT_USAGE;
            break;
        case OPT_CONNS:
            if (parse_uint("--max-connections", optarg, 1, 65536, &o.max_conns) != 0)
                return EXIT_USAGE;
            break;
        case OPT_TIMEOUT:
            if (parse_uint("--timeout", optarg, 1, 3600, &o.timeout_s) != 0)
                return EXIT_USAGE;
            break;
        case OPT_DRAIN:
            if (parse_uint("--drain", optarg, 0, 3600, &o.drain_s) != 0)
                return EXIT_USAGE;
            break;
        case OPT_RELOAD:
            if (parse_uint("--reload-interval", optarg, 1, 3600, &o.reload_s) != 0)
                return EXIT_USAGE;
            break;
        case OPT_API_SERVER:
            ao.server = optarg;
            break;
        case OPT_API_TOKEN:
            ao.token_file = optarg;
            break;
        case OPT_API_CA:
            ao.ca_file = optarg;
            break;
        case OPT_API_TIMEOUT:
            if (parse_uint("--api-timeout", optarg, 100, 30000, &ao.timeout_ms) != 0)
                return EXIT_USAGE;
            break;
        case OPT_API_CACHE:
            if (parse_uint("--api-cache", optarg, 0, 3600, &ao.ttl_s) != 0)
                return EXIT_USAGE;
            break;
        case OPT_CFG_CACHE:
            if (parse_uint("--config-cache", optarg, 0, WH_CFG_CACHE_MAX_SLOTS, &cfg_slots) != 0)
                return EXIT_USAGE;
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
    if (o.cert == NULL || o.key == NULL) {
        fprintf(stderr,
                "accelrun-webhook: --tls-cert and --tls-key are required (HTTPS only: the API "
                "server calls webhooks over TLS)\n");
        return EXIT_USAGE;
    }

    /* Blocked in every thread libmicrohttpd starts; taken by sigtimedwait. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    accel_error_clear(&err);
    if (wh_api_open(&api, &ao, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun-webhook: %s\n", err.msg);
        return EXIT_USAGE;
    }
    wh_api_fetch(api, &fetch);
    o.fetch = api != NULL ? &fetch : NULL;
    if (wh_cfg_cache_new(&o.cfg_cache, cfg_slots) != ACCEL_OK) {
        fprintf(stderr, "accelrun-webhook: --config-cache %u: out of memory\n", cfg_slots);
        wh_api_close(api);
        return EXIT_USAGE;
    }
    if (wh_srv_start(&srv, &o, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun-webhook: %s\n", err.msg);
        wh_cfg_cache_free(o.cfg_cache);
        wh_api_close(api);
        return EXIT_USAGE;
    }
    accel_log(ACCEL_LOG_INFO, "listening on %s, port %u (site policy: %s)", o.listen,
              wh_srv_port(srv), o.site != NULL ? o.site : "none");
    if (api == NULL)
        accel_log(ACCEL_LOG_WARN,
                  "no API server (no --api-server, not in a cluster): inline configs only; "
                  "accelrun.io/config-map is denied and Jobs are not checked");
    else
        accel_log(ACCEL_LOG_INFO, "API server %s (token %s, CA %s)", wh_api_server(api),
                  wh_api_token_file(api)[0] ? wh_api_token_file(api) : "none",
                  wh_api_ca_file(api)[0] ? wh_api_ca_file(api) : "the system's");
    for (;;) {
        struct timespec tick = {1, 0};
        int sig = sigtimedwait(&set, NULL, &tick);

        if (sig == SIGTERM || sig == SIGINT) {
            accel_log(ACCEL_LOG_INFO, "%s: draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            break;
        }
        wh_srv_tick(srv, sig == SIGHUP);
    }
    wh_srv_stop(srv);
    wh_cfg_cache_free(o.cfg_cache);
    wh_api_close(api);
    accel_log(ACCEL_LOG_INFO, "stopped");
    return 0;
}
