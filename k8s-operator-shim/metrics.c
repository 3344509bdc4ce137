/*
 * metrics.c: the webhook's counters and its latency histogram, rendered in
 * the Prometheus text exposition format 0.0.4 for GET /metrics.  Counters
 * are relaxed atomics: a scrape may see one request counted in the total and
 * not yet in the histogram, never a torn value.  It does not time anything
 * itself (server.c passes the duration) and keeps no label but the outcome.
 */
#include <stdio.h>

#include "server.h"

/* Seconds; a review without a ConfigMap takes well under a millisecond, the
 * API server's timeoutSeconds is 1-30 s. */
static const double bounds[WH_METRICS_BUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                  0.025,  0.05,  0.1,    0.5,   1.0};

static const char *const outcome_names[WH_OUTCOME__N] = {
    [WH_OUTCOME_ALLOWED] = "allowed",
    [WH_OUTCOME_DENIED] = "denied",
    [WH_OUTCOME_ERROR] = "error",
    [WH_OUTCOME_BAD_REQUEST] = "bad_request",
};

void wh_metrics_request(struct wh_metrics *m, enum wh_outcome o, double seconds, bool patched)
{
    size_t i = 0;

    if (m == NULL || (unsigned)o >= WH_OUTCOME__N)
        return;
    if (seconds < 0)
        seconds = 0;
    while (i < WH_METRICS_BUCKETS && seconds > bounds[i])
        i++;
    atomic_fetch_add_explicit(&m->requests[o], 1, memory_order_relaxed);
    if (patched)
        atomic_fetch_add_explicit(&m->patches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->duration_us, (unsigned long long)(seconds * 1e6 + 0.5),
                              memory_order_relaxed);
}

static unsigned long long get(atomic_ullong *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

enum accel_err wh_metrics_render(struct wh_metrics *m, struct wh_cfg_cache *cache,
                                 struct accel_buf *b)
{
    unsigned long long cum = 0, hits, misses;
    enum accel_err rc;

    rc = accel_buf_puts(b, "# HELP accelrun_webhook_requests_total POST /mutate requests by "
                           "outcome.\n"
                           "# TYPE accelrun_webhook_requests_total counter\n");
    for (int o = 0; o < WH_OUTCOME__N && rc == ACCEL_OK; o++)
        rc = accel_buf_printf(b, "accelrun_webhook_requests_total{outcome=\"%s\"} %llu\n",
                              outcome_names[o], get(&m->requests[o]));
    if (rc == ACCEL_OK)
        rc = accel_buf_printf(b,
                              "# HELP accelrun_webhook_patches_total Responses carrying a JSON "
                              "Patch.\n"
                              "# TYPE accelrun_webhook_patches_total counter\n"
                              "accelrun_webhook_patches_total %llu\n"
                              "# HELP accelrun_webhook_reloads_total Reloads of the "
                              "certificate, key or site file.\n"
                              "# TYPE accelrun_webhook_reloads_total counter\n"
                              "accelrun_webhook_reloads_total{result=\"ok\"} %llu\n"
                              "accelrun_webhook_reloads_total{result=\"failed\"} %llu\n"
                              "# HELP accelrun_webhook_connections_total TLS connections "
                              "accepted.\n"
                              "# TYPE accelrun_webhook_connections_total counter\n"
                              "accelrun_webhook_connections_total %llu\n"
                              "# HELP accelrun_webhook_request_duration_seconds Time from "
                              "the request's headers to its response.\n"
                              "# TYPE accelrun_webhook_request_duration_seconds histogram\n",
                              get(&m->patches), get(&m->reloads_ok), get(&m->reloads_failed),
                              get(&m->connections));
    for (int i = 0; i < WH_METRICS_BUCKETS && rc == ACCEL_OK; i++) {
        cum += get(&m->bucket[i]);
        rc = accel_buf_printf(b,
                              "accelrun_webhook_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                              bounds[i], cum);
    }
    cum += get(&m->bucket[WH_METRICS_BUCKETS]);
    if (rc == ACCEL_OK)
        rc = accel_buf_printf(b,
                              "accelrun_webhook_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
                              "accelrun_webhook_request_duration_seconds_sum %.6f\n"
                              "accelrun_webhook_request_duration_seconds_count %llu\n",
                              cum, (double)get(&m->duration_us) / 1e6, cum);
    if (rc == ACCEL_OK && cache != NULL) {
        wh_cfg_cache_stats(cache, &hits, &misses);
        rc = accel_buf_printf(b,
                              "# HELP accelrun_webhook_config_cache_total Configs found loaded "
                              "(hit) or loaded for the review (miss).\n"
                              "# TYPE accelrun_webhook_config_cache_total counter\n"
                              "accelrun_webhook_config_cache_total{result=\"hit\"} %llu\n"
                              "accelrun_webhook_config_cache_total{result=\"miss\"} %llu\n",
                              hits, misses);
    }
    return rc;
}
