/*
 * mutate.c: the decision for one review, through the code every front end
 * runs: the config is loaded, merged with the site policy and checked by
 * accel_cfg_load_buffer (as `accelrun check` does), the environment is
 * accel_env_build's for the pod's layout (DESIGN decisions 4 and 5):
 *
 *   nnodes      num_machines (else the Job's completions, else 1)
 *   node_rank   the completion-index annotation
 *   processes   num_processes / nnodes, else the nvidia.com/gpu limit, else 1;
 *               one → the per-process set (local rank 0), more → the
 *               node-level set (PET_*) for `accelrun launch` or torchrun
 *   master      <job>-0.<subdomain>.<namespace>.svc : main_process_port,
 *               else the site's port_base, else 29500
 *
 * Every problem found is collected into one denial, each on its own line
 * (the config's findings located as "annotation accelrun.io/config:3:1:");
 * a pod without an accelrun annotation is allowed untouched, with no call
 * to the API server.  Reading a ConfigMap or the Job goes through the
 * caller's struct wh_fetch; this file does no I/O.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/config.h"
#include "accel/diag.h"
#include "accel/env.h"
#include "webhook.h"

#define DNS_MAX 253 /* bytes of a DNS name (and of a ConfigMap's name and key) */

/* The denial being gathered: lines of at most WH_MAX_MESSAGE bytes in all;
 * the lines that do not fit are counted. */
struct denial {
    struct accel_buf text;
    size_t lines, dropped;
    enum accel_err rc; /* ACCEL_ENOMEM once an append failed that way */
};

static void deny(struct denial *d, const char *fmt, ...) ACCEL_PRINTF(2, 3);
static void deny(struct denial *d, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    size_t need;
    enum accel_err rc;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    need = strlen(line) + (d->lines ? 1 : 0);
    /* keep room for the "(N more)" line */
    if (d->text.len + need + 48 > WH_MAX_MESSAGE) {
        d->dropped++;
        return;
    }
    rc = accel_buf_printf(&d->text, "%s%s", d->lines ? "\n" : "", line);
    if (rc == ACCEL_ENOMEM)
        d->rc = rc;
    else if (rc == ACCEL_OK)
        d->lines++;
}

/* ConfigMap names are DNS subdomains (RFC 1123), keys [-._a-zA-Z0-9]+;
 * checked here because both end up in the API client's URL. */
static bool dns_subdomain(const char *s, size_t n)
{
    if (n == 0 || n > DNS_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !((c == '-' || c == '.') && i > 0 && i + 1 < n))
            return false;
    }
    return true;
}

static bool configmap_key(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > DNS_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_'))
            return false;
    }
    return true;
}

/* The containers to patch: those named by accelrun.io/containers, else
 * every regular one.  Sets want[i] for pod->c[i]. */
static void pick_targets(const struct wh_pod *pod, bool *want, struct denial *d)
{
    const char *s = pod->select;

    if (s == NULL) {
        for (size_t i = 0; i < pod->nregular; i++)
            want[i] = true;
        return;
    }
    while (*s) {
        const char *end = strchr(s, ',');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        size_t i;
        /* "a, b" reads as "a,b" */
        while (n > 0 && (*s == ' ' || *s == '\t'))
            s++, n--;
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        for (i = 0; n > 0 && i < pod->n; i++)
            if (strlen(pod->c[i].name) == n && memcmp(pod->c[i].name, s, n) == 0)
                break;
        if (n == 0)
            ;
        else if (i == pod->n)
            deny(d, "annotation " WH_ANN_CONTAINERS ": the pod has no container named '%.*s'",
                 (int)(n > 64 ? 64 : n), s);
        else if (pod->c[i].init)
            deny(d,
                 "annotation " WH_ANN_CONTAINERS ": '%s' is an init container; accelrun never "
                 "patches init containers",
                 pod->c[i].name);
        else
            want[i] = true;
        s = end ? end + 1 : s + strlen(s);
    }
}

/* The completion index as a number, or -1 with the reason denied. */
static long completion_index(const struct wh_pod *pod, struct denial *d)
{
    char *end;
    long v;

    if (pod->index == NULL) {
        deny(d, "annotation " WH_ANN_INDEX ": missing; accelrun.io/config works on the pods of "
                "an Indexed Job (completionMode: Indexed), whose index is the node rank");
        return -1;
    }
    errno = 0;
    v = strtol(pod->index, &end, 10);
    if (errno != 0 || end == pod->index || *end != '\0' || v < 0 || pod->index[0] == '-' ||
        pod->index[0] == '+' || pod->index[0] == ' ') {
        deny(d, "annotation " WH_ANN_INDEX ": '%.32s' is not a completion index", pod->index);
        return -1;
    }
    return v;
}

/* The config's bytes: the inline annotation (borrowed) or the ConfigMap
 * (*owned set, freed by the caller).  NULL when it cannot be had (denied). */
static const char *config_text(const struct wh_pod *pod, const struct wh_opts *opts, char *name,
                               size_t namesize, size_t *len, char **owned, struct denial *d)
{
    const struct wh_fetch *f = opts->fetch;
    const char *ref = pod->config_map, *slash;
    char cm[DNS_MAX + 1], key[DNS_MAX + 1], why[512] = "";
    size_t n;

    *owned = NULL;
    if (pod->config != NULL) {
        snprintf(name, namesize, "annotation " WH_ANN_CONFIG);
        *len = strlen(pod->config);
        return pod->config;
    }
    slash = strchr(ref, '/');
    n = slash ? (size_t)(slash - ref) : strlen(ref);
    if (!dns_subdomain(ref, n) || (slash && !configmap_key(slash + 1))) {
        deny(d,
             "annotation " WH_ANN_CONFIG_MAP ": '%.80s' is not NAME or NAME/KEY (a ConfigMap name "
             "and one of its keys)",
             ref);
        return NULL;
    }
    snprintf(cm, sizeof(cm), "%.*s", (int)n, ref);
    snprintf(key, sizeof(key), "%s", slash ? slash + 1 : WH_CONFIG_MAP_KEY);
    if (f == NULL || f->configmap == NULL) {
        deny(d,
             "annotation " WH_ANN_CONFIG_MAP ": no API server is configured (--api-server, or an "
             "in-cluster service account), so ConfigMap %s/%s can't be read; put the config "
             "inline in " WH_ANN_CONFIG,
             pod->ns, cm);
        return NULL;
    }
    if (f->configmap(f->ctx, pod->ns, cm, key, owned, len, why, sizeof(why)) != 0 ||
        *owned == NULL) {
        free(*owned);
        *owned = NULL;
        deny(d, "annotation " WH_ANN_CONFIG_MAP ": couldn't read key %s of ConfigMap %s/%s: %s",
             key, pod->ns, cm, why[0] ? why : "no reason given");
        return NULL;
    }
    snprintf(name, namesize, "configmap %s/%s", cm, key);
    return *owned;
}

/* The Job's completions (-1: not known).  Skipped with a warning without
 * an API server; a Job that is not Indexed is denied. */
static enum accel_err job_check(const struct wh_pod *pod, const char *job,
                                const struct wh_opts *opts, long *completions,
                                struct wh_response *resp, struct denial *d)
{
    const struct wh_fetch *f = opts->fetch;
    char why[512] = "";
    enum wh_job_mode mode = WH_JOB_NOT_INDEXED;

    *completions = -1;
    if (f == NULL || f->job == NULL)
        return wh_response_warn(resp,
                                "Job %s/%s not checked (no API server configured): its "
                                "completions and completionMode Indexed are assumed",
                                pod->ns, job);
    if (f->job(f->ctx, pod->ns, job, completions, &mode, why, sizeof(why)) != 0) {
        deny(d, "couldn't read Job %s/%s: %s", pod->ns, job, why[0] ? why : "no reason given");
        *completions = -1;
        return ACCEL_OK;
    }
    if (mode == WH_JOB_MODE_UNKNOWN)
        return wh_response_warn(resp,
                                "Job %s/%s has no spec.completionMode (an API server before "
                                "v1.21): Indexed is assumed from the pod's completion index",
                                pod->ns, job);
    if (mode != WH_JOB_INDEXED) {
        deny(d,
             "Job %s/%s: completionMode is not Indexed; accelrun takes each pod's node rank "
             "from its completion index",
             pod->ns, job);
        *completions = -1;
    }
    return ACCEL_OK;
}

/* The config's findings (sorted: cfgcache.c): errors into the denial,
 * warnings into the response, in file order. */
static enum accel_err report_findings(const struct accel_diags *diags, struct wh_response *resp,
                                      struct denial *d)
{
    char line[1024];
    enum accel_err rc = ACCEL_OK;

    for (size_t i = 0; i < diags->n && rc == ACCEL_OK; i++) {
        const struct accel_diag *g = &diags->v[i];
        /* "no main_process_ip": the webhook gives MASTER_ADDR itself, as
         * the warning says; on every pod it would only be noise */
        if (g->sev == ACCEL_SEV_NOTE ||
            (g->sev == ACCEL_SEV_WARNING && strcmp(g->key, "main_process_ip") == 0))
            continue;
        accel_diag_format(g, line, sizeof(line));
        if (g->sev == ACCEL_SEV_ERROR)
            deny(d, "%s", line);
        else
            rc = wh_response_warn(resp, "%s", line);
    }
    if (diags->n < diags->errors + diags->warnings)
        deny(d, "%zu more findings not shown", diags->errors + diags->warnings - diags->n);
    return rc;
}

/* The largest GPU limit of the containers to patch (0: none). */
static long target_gpus(const struct wh_pod *pod, const bool *want)
{
    long g = 0;

    for (size_t i = 0; i < pod->n; i++)
        if (want[i] && pod->c[i].gpus > g)
            g = pod->c[i].gpus;
    return g;
}

/* The patch of every target container's env; resp->patch stays NULL when
 * there is nothing to add. */
static enum accel_err build_patch(const struct wh_pod *pod, const bool *want,
                                  const struct accel_env *env, const struct accel_site *site,
                                  struct wh_response *resp)
{
    struct accel_buf ops;
    size_t nops = 0;
    enum accel_err rc;

    /* its base64 must fit the response */
    accel_buf_init(&ops, WH_MAX_RESPONSE / 4 * 3);
    rc = accel_buf_reserve(&ops, 64 * env->n + 64);
    if (rc == ACCEL_OK)
        rc = accel_buf_add(&ops, "[", 1);
    for (size_t i = 0; i < pod->n && rc == ACCEL_OK; i++)
        if (want[i])
            rc = wh_patch_env(&ops, &nops, &pod->c[i], env->v, env->n, site, resp);
    if (rc == ACCEL_OK && nops > 0 && (rc = accel_buf_add(&ops, "]", 1)) == ACCEL_OK) {
        resp->patch = accel_buf_take(&ops);
        resp->nops = nops;
    }
    accel_buf_free(&ops);
    return rc;
}

/* The pod's own fields: one of the two config annotations, the containers
 * to patch (want), the Job's label against its owner, the completion index
 * (*index, -1 when denied), spec.subdomain.  Returns the Job's name, or
 * NULL (denied). */
static const char *check_pod(const struct wh_pod *pod, bool *want, long *index, struct denial *d)
{
    const char *job = pod->job;

    if (pod->config != NULL && pod->config_map != NULL)
        deny(d, "annotations " WH_ANN_CONFIG " and " WH_ANN_CONFIG_MAP ": give one, not both");
    pick_targets(pod, want, d);
    if (job == NULL)
        job = pod->owner_job;
    if (job == NULL)
        deny(d, "label " WH_LABEL_JOB ": missing; accelrun.io/config works on the pods of an "
                "Indexed Job");
    else if (pod->owner_job != NULL && strcmp(job, pod->owner_job) != 0)
        deny(d, "label " WH_LABEL_JOB ": '%.64s', but the pod's controlling Job is '%.64s'", job,
             pod->owner_job);
    *index = completion_index(pod, d);
    if (pod->subdomain == NULL)
        deny(d, "spec.subdomain: missing; set it to the name of a headless Service "
                "(publishNotReadyAddresses: true) so that MASTER_ADDR <job>-0.<subdomain> "
                "resolves");
    return job;
}

/* The pod's place in the job: nodes, node rank, processes per node, and
 * which environment (one process: the per-process set; more: the
 * node-level set).  Returns false to stop: *rc an error, or ACCEL_OK with
 * the reason denied. */
static bool plan_layout(const struct accel_cfg *cfg, unsigned job_nodes, long gpus, long index,
                        struct accel_layout *lay, struct wh_response *resp, struct denial *d,
                        enum accel_err *rc)
{
    bool has_machines = accel_map_find(&cfg->tree, "num_machines") != NULL;
    long per_node = 0;

    /* nodes: the config's count, else the Job's */
    lay->nnodes = has_machines ? (unsigned)cfg->num_machines : job_nodes > 0 ? job_nodes : 1;
    if (index >= (long)lay->nnodes) {
        deny(d, "annotation " WH_ANN_INDEX ": %ld is not below num_machines (%u)%s", index,
             lay->nnodes, has_machines ? "" : "; the config does not set it");
        return false;
    }
    lay->node_rank = (unsigned)index;
    if (cfg->num_processes > 0)
        per_node = cfg->num_processes / (long)lay->nnodes;
    /* the GPU limit counts processes only for a config that runs one per
     * GPU: not 'NO' (one process) nor a CPU job */
    if (cfg->dist == ACCEL_DIST_NO || cfg->dist == ACCEL_DIST_MULTI_CPU || cfg->use_cpu)
        gpus = 0;
    lay->nproc_per_node = per_node > 0 ? (unsigned)per_node : gpus > 0 ? (unsigned)gpus : 1;
    if (gpus > 0 && per_node > 0 && per_node < gpus &&
        (*rc = wh_response_warn(resp,
                                "num_processes %ld over %u machines runs %ld process%s per pod; "
                                "the pod asks for %ld GPUs (" WH_GPU_RESOURCE ")",
                                cfg->num_processes, lay->nnodes, per_node,
                                per_node == 1 ? "" : "es", gpus)) != ACCEL_OK)
        return false;
    /* one process: the full per-process set; more: the node-level set */
    lay->local_rank = lay->nproc_per_node == 1 ? 0 : -1;
    return true;
}

/* MASTER_ADDR <job>-0.<subdomain>.<namespace>.svc (into master, DNS_MAX +
 * 2 bytes) and the port.  Returns false to stop, as plan_layout. */
static bool rendezvous(const struct wh_pod *pod, const struct wh_opts *opts,
                       const struct accel_cfg *cfg, const char *job, const char *name, char *master,
                       struct accel_layout *lay, struct wh_response *resp, struct denial *d,
                       enum accel_err *rc)
{
    if ((size_t)snprintf(master, DNS_MAX + 2, "%s-0.%s.%s.svc", job, pod->subdomain, pod->ns) >
        DNS_MAX) {
        deny(d, "MASTER_ADDR %.64s-0.%.64s.%.64s.svc: longer than a DNS name's %u bytes", job,
             pod->subdomain, pod->ns, DNS_MAX);
        return false;
    }
    lay->master_addr = master;
    /* with the node's DNS the Service name never resolves
     * (shared/reference/kubernetes.md §2.8) */
    if (pod->host_network &&
        (pod->dns_policy == NULL || strcmp(pod->dns_policy, "ClusterFirstWithHostNet") != 0) &&
        (*rc = wh_response_warn(resp,
                                "spec.hostNetwork with dnsPolicy %.32s: %s resolves only with "
                                "dnsPolicy: ClusterFirstWithHostNet",
                                pod->dns_policy ? pod->dns_policy : "ClusterFirst", master)) !=
            ACCEL_OK)
        return false;
    if (cfg->main_process_ip != NULL &&
        (*rc = wh_response_warn(resp,
                                "%s: main_process_ip is not used on Kubernetes: MASTER_ADDR is %s",
                                name, master)) != ACCEL_OK)
        return false;
    /* each pod has its own network namespace: no port hashing as on Slurm */
    if (cfg->main_process_port < 0)
        lay->master_port = opts->site ? opts->site->port_base : ACCEL_DEFAULT_PORT;
    return true;
}

/* The environment for the layout, patched into the target containers. */
static enum accel_err env_patch(const struct wh_pod *pod, const struct wh_opts *opts,
                                const struct accel_cfg *cfg, const struct accel_layout *lay,
                                const bool *want, const char *name, struct wh_response *resp,
                                struct denial *d)
{
    struct accel_env_opts eopts = {NULL, opts->site, false};
    struct accel_env env = {NULL, 0};
    struct accel_error cerr;
    enum accel_err rc;

    accel_error_clear(&cerr);
    rc = accel_env_build(cfg, lay, &eopts, &env, &cerr);
    if (rc == ACCEL_ENOMEM)
        goto out;
    if (rc != ACCEL_OK) {
        deny(d, "%s: error: %s", name, cerr.msg);
        rc = ACCEL_OK;
        goto out;
    }
    if (accel_env_get(&env, "CUDA_VISIBLE_DEVICES") != NULL &&
        (rc = wh_response_warn(resp,
                               "%s: gpu_ids is not used on Kubernetes: the device plugin "
                               "decides the pod's GPUs (CUDA_VISIBLE_DEVICES not set)",
                               name)) != ACCEL_OK)
        goto out;
    rc = build_patch(pod, want, &env, opts->site, resp);
out:
    accel_env_free(&env);
    return rc;
}

/* Everything after the pod was read.  Returns ACCEL_OK, ACCEL_ENOMEM, or
 * ACCEL_ETOOBIG for a patch over its cap; problems go to the denial. */
static enum accel_err decide(const struct wh_pod *pod, const struct wh_opts *opts,
                             struct wh_response *resp, struct denial *d)
{
    struct accel_cfg_opts copts = {opts->version, opts->site, 0, 0};
    struct accel_layout lay = {0, 0, 0, -1, -1, 0, NULL, 0, 0};
    struct wh_cfg_key key = {NULL, NULL, 0, &copts, opts->site_gen};
    const struct wh_cfg_entry *loaded = NULL;
    bool *want = NULL;
    char name[2 * DNS_MAX + 16], master[DNS_MAX + 2];
    char *owned = NULL;
    const char *job;
    long index, completions = -1, gpus;
    enum accel_err rc = ACCEL_OK;

    want = accel_calloc(pod->n ? pod->n : 1, sizeof(*want));
    if (want == NULL)
        return ACCEL_ENOMEM;
    job = check_pod(pod, want, &index, d);
    /* the config is still checked, so that one denial says everything */
    key.text = config_text(pod, opts, name, sizeof(name), &key.len, &owned, d);
    if (key.text == NULL)
        goto out;
    if (job != NULL && (rc = job_check(pod, job, opts, &completions, resp, d)) != ACCEL_OK)
        goto out;
    /* cluster fit as `accelrun check --nodes`: located at num_machines */
    copts.nodes = completions > 0 && completions <= 1000000 ? (unsigned)completions : 0;
    gpus = target_gpus(pod, want);
    copts.gpus_per_node = gpus > 0 ? (unsigned)gpus : 0;
    key.name = name;
    rc = wh_cfg_get(opts->cache, &key, &loaded);
    if (rc != ACCEL_OK)
        goto out;
    rc = report_findings(&loaded->diags, resp, d);
    if (rc != ACCEL_OK || d->lines > 0 || d->dropped > 0)
        goto out;
    if (!plan_layout(&loaded->cfg, copts.nodes, gpus, index, &lay, resp, d, &rc) ||
        !rendezvous(pod, opts, &loaded->cfg, job, name, master, &lay, resp, d, &rc))
        goto out;
    rc = env_patch(pod, opts, &loaded->cfg, &lay, want, name, resp, d);
out:
    wh_cfg_release(loaded);
    free(owned);
    accel_free(want);
    return rc;
}

enum accel_err wh_mutate(const struct wh_review *rv, const struct wh_opts *opts,
                         struct wh_response *resp, struct accel_error *err)
{
    static const struct wh_opts none = {NULL, 0, NULL, NULL, 0};
    struct wh_pod pod;
    struct denial d = {{NULL, 0, 0, 0}, 0, 0, ACCEL_OK};
    enum accel_err rc;

    wh_response_init(resp);
    if (opts == NULL)
        opts = &none;
    if (rv->pod == NULL) {
        if (rv->skip[0] != '\0' && rv->operation != NULL && strcmp(rv->operation, "CREATE") == 0)
            return wh_response_warn(resp, "%s", rv->skip) == ACCEL_OK
                       ? ACCEL_OK
                       : accel_error_set(err, ACCEL_ENOMEM, "out of memory");
        return ACCEL_OK;
    }
    rc = wh_pod_read(&pod, rv->pod, rv->ns, err);
    if (rc != ACCEL_OK)
        goto out;
    if (pod.config == NULL && pod.config_map == NULL)
        goto out; /* not ours: allowed, untouched, no API call */
    accel_buf_init(&d.text, WH_MAX_MESSAGE);
    rc = decide(&pod, opts, resp, &d);
    if (rc == ACCEL_OK)
        rc = d.rc;
    if (rc == ACCEL_OK && (d.lines > 0 || d.dropped > 0)) {
        if (d.dropped > 0 &&
            accel_buf_printf(&d.text, "\n(%zu more problems not shown)", d.dropped) != ACCEL_OK)
            rc = ACCEL_ENOMEM;
        if (rc == ACCEL_OK)
            rc = wh_response_deny(resp, "%s", accel_buf_str(&d.text));
    }
    if (rc == ACCEL_ENOMEM)
        accel_error_set(err, rc, "out of memory");
    else if (rc == ACCEL_ETOOBIG)
        accel_error_set(err, rc, "response.patch: over the cap of %u bytes of JSON (%u as base64)",
                        WH_MAX_RESPONSE / 4 * 3, WH_MAX_RESPONSE);
out:
    accel_buf_free(&d.text);
    wh_pod_free(&pod);
    return rc;
}
