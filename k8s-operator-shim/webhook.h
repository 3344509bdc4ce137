/*
 * webhook.h: the admission webhook's pure core, internal to k8s-operator-shim/.
 *
 *   body bytes --review.c--> struct wh_review (request.uid, the Pod object)
 *              --pod.c-----> struct wh_pod (the fields accelrun reads)
 *              --mutate.c--> struct wh_response (allowed / denied, warnings)
 *                            through core/config and core/env, the code the
 *                            SPANK plugin and `accelrun env` run (the loaded
 *                            config kept for the Job's next pods: cfgcache.c)
 *              --patch.c---> the RFC 6902 JSON Patch of the env lists
 *              --review.c--> the AdmissionReview response bytes
 *
 * Nothing here does I/O: the HTTPS server (libmicrohttpd), the API client
 * (libcurl) and the site file's loading are the caller's, and reach this core
 * only as bytes, a loaded struct accel_site and the struct wh_fetch
 * callbacks.  Facts behind the rules: shared/reference/kubernetes.md §1-§3.
 *
 * Errors: every fallible function returns an enum accel_err and fills a
 * caller-owned struct accel_error whose message names the field
 * ("request.uid: missing"); wh_http_status maps the code to the HTTP status
 * the server answers a request it could not decode with.  A denial is not an
 * error: wh_mutate returns ACCEL_OK with resp->allowed false.
 *
 * Ownership: each struct owns what its *_free releases; const char * fields
 * documented as "into the review" point into the review's cJSON tree and live
 * as long as it.
 *
 * Threads: every function may run on several threads at once on different
 * reviews; the one shared object, struct wh_cfg_cache, locks itself.
 */
#ifndef WH_WEBHOOK_H
#define WH_WEBHOOK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "accel/buf.h"
#include "accel/config.h"
#include "accel/diag.h"
#include "accel/err.h"
#include "accel/site.h"

/* The API server's own cap on a request body, MaxRequestBodyBytes in
 * k8s.io/apiserver/pkg/server/config.go: twice etcd's 1.5 MiB request limit
 * (shared/reference/kubernetes.md §5.3), so every Pod it can store fits. */
#define WH_MAX_BODY (3u << 20)
/* Nested objects and arrays in the body; a Pod with managedFields nests
 * about 15 deep. */
#define WH_MAX_DEPTH 64
/* Bytes in one JSON string: the API server's cap on all of an object's
 * annotations together (TotalAnnotationSizeLimitB, 256 KiB), which bounds
 * the inline config too. */
#define WH_MAX_STRING (256u << 10)
#define WH_MAX_UID 128                /* bytes of request.uid (a UUID has 36) */
#define WH_MAX_CONTAINERS 256         /* spec.containers + spec.initContainers */
#define WH_MAX_WARNINGS 32            /* entries of response.warnings; more are counted */
#define WH_MAX_WARNING 256            /* bytes of one warning (the API server truncates longer) */
#define WH_MAX_MESSAGE 4096           /* bytes of a denial's status.message */
#define WH_MAX_RESPONSE (WH_MAX_BODY) /* bytes of the encoded response */

/* The annotations and labels accelrun reads. */
#define WH_ANN_CONFIG "accelrun.io/config"
#define WH_ANN_CONFIG_MAP "accelrun.io/config-map"
#define WH_ANN_CONTAINERS "accelrun.io/containers"
#define WH_ANN_INDEX "batch.kubernetes.io/job-completion-index"
#define WH_LABEL_JOB "batch.kubernetes.io/job-name"
#define WH_LABEL_JOB_LEGACY "job-name"
#define WH_GPU_RESOURCE "nvidia.com/gpu"
#define WH_CONFIG_MAP_KEY "config.yaml" /* accelrun.io/config-map: NAME without /KEY */

/* 400 for a body that is not a review we can read, 413 for one over a cap,
 * 500 for anything else (out of memory). */
int wh_http_status(enum accel_err code);

/* ---------------------------------------------------------------- review.c */

struct wh_review {
    cJSON *root;           /* the parsed body, owned */
    const char *uid;       /* request.uid, into the review */
    const char *operation; /* request.operation ("CREATE", ...) */
    const char *ns;        /* request.namespace, "" when absent */
    bool dry_run;          /* request.dryRun */
    /* request.object when the request is the CREATE of a v1 Pod, else NULL
     * (then `skip` says why, for a warning) */
    const cJSON *pod;
    char skip[256];
};

/* Decodes an AdmissionReview admission.k8s.io/v1 from `len` bytes (no NUL
 * needed).  ACCEL_ETOOBIG past WH_MAX_BODY, WH_MAX_DEPTH or WH_MAX_STRING;
 * ACCEL_EPARSE for bytes that are not one JSON value; ACCEL_EINVAL for a
 * JSON value that is not a v1 review with a request and a uid; ACCEL_ENOMEM.
 * The message names the field.  On error `rv` holds nothing; always
 * wh_review_free it. */
enum accel_err wh_review_decode(struct wh_review *rv, const char *body, size_t len,
                                struct accel_error *err) ACCEL_WUR;
/* Releases the tree; the review's pointers die with it.  NULL and a freed
 * review are fine. */
void wh_review_free(struct wh_review *rv);

struct wh_response {
    bool allowed;
    int code;                        /* status.code of a denial (403) */
    char *message;                   /* status.message of a denial, owned */
    char *patch;                     /* the JSON Patch array as JSON text, owned; NULL = no patch */
    size_t nops;                     /* operations in it */
    char *warnings[WH_MAX_WARNINGS]; /* owned */
    size_t nwarnings;
    size_t warnings_dropped; /* past WH_MAX_WARNINGS (the last entry says how many) */
};

/* An allowed response with nothing in it. */
void wh_response_init(struct wh_response *r);
/* Releases message, patch and warnings; NULL and a freed response are fine. */
void wh_response_free(struct wh_response *r);
/* Appends a warning, cut to WH_MAX_WARNING bytes on a UTF-8 boundary.
 * ACCEL_ENOMEM only. */
enum accel_err wh_response_warn(struct wh_response *r, const char *fmt, ...)
    ACCEL_PRINTF(2, 3) ACCEL_WUR;
/* Makes `r` a denial with the formatted message (code 403), cut to
 * WH_MAX_MESSAGE bytes. */
enum accel_err wh_response_deny(struct wh_response *r, const char *fmt, ...)
    ACCEL_PRINTF(2, 3) ACCEL_WUR;

/* The AdmissionReview admission.k8s.io/v1 answering `uid`: response.uid,
 * allowed, patchType "JSONPatch" and the base64 patch when r->patch is set,
 * status {code, message} when denied, warnings when any, as compact JSON.
 * *out (caller frees with accel_free) is NUL-terminated, *len bytes without
 * the NUL.  ACCEL_ETOOBIG past WH_MAX_RESPONSE, ACCEL_ENOMEM. */
enum accel_err wh_response_encode(const char *uid, const struct wh_response *r, char **out,
                                  size_t *len, struct accel_error *err) ACCEL_WUR;

/* Standard base64 with padding (RFC 4648 §4) of `n` bytes, appended to b.
 * ACCEL_ETOOBIG past b's cap, ACCEL_ENOMEM. */
enum accel_err wh_base64(struct accel_buf *b, const unsigned char *data, size_t n) ACCEL_WUR;

/* Appends `s` as a JSON string literal, quotes included, escaped as cJSON's
 * printer escapes it (", \, \b \f \n \r \t, other bytes below 0x20 as
 * \u00xx; every other byte as it is): the patch and the response are
 * written straight into one buffer, not built as cJSON trees and printed.
 * ACCEL_ETOOBIG past b's cap, ACCEL_ENOMEM. */
enum accel_err wh_json_quote(struct accel_buf *b, const char *s) ACCEL_WUR;

/* obj[key] when present and not null (else *out NULL); ACCEL_EINVAL naming
 * `field` when it is not of the type `want` (cJSON_Object, cJSON_Array or
 * cJSON_String).  wh_json_string: the same for a string, its value. */
enum accel_err wh_json_member(const cJSON *obj, const char *key, int want, const char *field,
                              const cJSON **out, struct accel_error *err) ACCEL_WUR;
enum accel_err wh_json_string(const cJSON *obj, const char *key, const char *field,
                              const char **out, struct accel_error *err) ACCEL_WUR;

/* ---------------------------------------------------------------- pod.c */

struct wh_container {
    const char *name; /* into the review */
    unsigned index;   /* in spec.containers (or spec.initContainers) */
    bool init;        /* an init container: never patched */
    const cJSON *env; /* the "env" array, NULL when absent */
    long gpus;        /* resources.limits["nvidia.com/gpu"], -1 when absent */
};

struct wh_pod {
    const char *ns;            /* request.namespace, else metadata.namespace; never NULL */
    const char *name;          /* metadata.name, NULL when absent (Job pods) */
    const char *generate_name; /* metadata.generateName, NULL when absent */
    const char *job;           /* the job-name label (or its legacy key), NULL when absent */
    const char *owner_job;     /* the controlling ownerReference of kind Job, NULL when none */
    const char *index;         /* the completion-index annotation as written, NULL when absent */
    const char *config;        /* accelrun.io/config, NULL when absent */
    const char *config_map;    /* accelrun.io/config-map */
    const char *select;        /* accelrun.io/containers */
    const char *subdomain;     /* spec.subdomain, NULL when absent or "" */
    bool host_network;         /* spec.hostNetwork */
    const char *dns_policy;    /* spec.dnsPolicy, NULL when absent */
    struct wh_container *c;    /* spec.containers then spec.initContainers, owned */
    size_t n;                  /* entries of c */
    size_t nregular;           /* the first nregular are spec.containers */
};

/* Reads the fields above from the Pod object; `req_ns` is request.namespace
 * ("" when absent).  ACCEL_EINVAL, naming the field, when one has the wrong
 * JSON type or a container has no name; ACCEL_ETOOBIG past
 * WH_MAX_CONTAINERS.  Always wh_pod_free it. */
enum accel_err wh_pod_read(struct wh_pod *pod, const cJSON *object, const char *req_ns,
                           struct accel_error *err) ACCEL_WUR;
/* Releases the container array (the strings belong to the review). */
void wh_pod_free(struct wh_pod *pod);

/* The entry named `name` of a container's env array, or NULL. */
const cJSON *wh_container_env(const struct wh_container *c, const char *name);

/* ---------------------------------------------------------------- patch.c */

/* Appends `seg` as one JSON Pointer segment (RFC 6901: "~" as "~0", then
 * "/" as "~1"), without the leading "/". */
enum accel_err wh_pointer_escape(struct accel_buf *b, const char *seg) ACCEL_WUR;

/* True for the variables the webhook never sets: the GPU binding belongs to
 * the device plugin (NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES). */
bool wh_env_reserved(const char *name);

/* Appends to `ops` (the text of a JSON array being written, after its "["),
 * and counts in *nops, the operations that give container `c` the
 * "NAME=VALUE" entries of vars[0..n): one `add .../env` with them all when
 * the container has no env, else one `add .../env/-` per name it lacks.  A
 * name the container already has is kept; when its value differs (or comes
 * from valueFrom) a warning naming the container and the variable goes to
 * `resp`, unless a launcher keeps the user's value anyway
 * (accel_env_user_wins with `site`, may be NULL: OMP_NUM_THREADS...).
 * Reserved names are skipped.  ACCEL_ETOOBIG past ops's cap, ACCEL_ENOMEM. */
enum accel_err wh_patch_env(struct accel_buf *ops, size_t *nops, const struct wh_container *c,
                            char *const *vars, size_t n, const struct accel_site *site,
                            struct wh_response *resp) ACCEL_WUR;

/* ---------------------------------------------------------------- mutate.c */

/* ---------------------------------------------------------------- objects.c */

/* A Job's spec.completionMode as read: an API server before v1.21 has no
 * such field and drops it, so its absence is "unknown", not "NonIndexed". */
enum wh_job_mode { WH_JOB_NOT_INDEXED, WH_JOB_INDEXED, WH_JOB_MODE_UNKNOWN };

/* data[key] of a ConfigMap's JSON (`body`, len bytes; ns/name for the
 * messages) into *value (malloc'd, NUL-terminated) and *vlen.  0, or -1
 * with the reason in why (not an object, no such key). */
int wh_configmap_value(const char *body, size_t len, const char *ns, const char *name,
                       const char *key, char **value, size_t *vlen, char *why, size_t whylen);

/* spec.completions (-1 when absent or not a count) and spec.completionMode
 * of a Job's JSON.  0, or -1 with the reason in why (not an object). */
int wh_job_spec(const char *body, size_t len, const char *ns, const char *name, long *completions,
                enum wh_job_mode *mode, char *why, size_t whylen);

/* The `message` of an error answer's Status object (at most 300 bytes of
 * it), or "" when the body is not one. */
void wh_status_message(const char *body, size_t len, char *msg, size_t size);

/* The API server, as the caller reaches it (libcurl in api.c; a table
 * in tests).  Each returns 0, or -1 with the reason in why ("403 Forbidden:
 * ..."); the namespace is always the pod's.  NULL functions (or a NULL
 * struct) mean "no API server configured". */
struct wh_fetch {
    /* data of key `key` of ConfigMap ns/name: *data (malloc'd, the caller
     * of the callback frees it with free) and *len */
    int (*configmap)(void *ctx, const char *ns, const char *name, const char *key, char **data,
                     size_t *len, char *why, size_t whylen);
    /* Job ns/name: spec.completions (-1 when unset) and its completionMode */
    int (*job)(void *ctx, const char *ns, const char *name, long *completions,
               enum wh_job_mode *mode, char *why, size_t whylen);
    void *ctx;
};

/* ---------------------------------------------------------------- cfgcache.c */

/* A config loaded once for the reviews that carry it (the pods of a Job):
 * accel_cfg_load_buffer's result for exactly this key. */
struct wh_cfg_key {
    const char *name; /* the source, as findings locate it */
    const char *text; /* the config's bytes */
    size_t len;
    const struct accel_cfg_opts *opts; /* version, site, nodes, gpus_per_node */
    unsigned long site_gen;            /* changes whenever opts->site's content may have */
};

#define WH_CFG_CACHE_SLOTS 64             /* entries by default (--config-cache) */
#define WH_CFG_CACHE_MAX_SLOTS 1024       /* --config-cache's cap */
#define WH_CFG_CACHE_MAX_TEXT (64u << 10) /* larger configs are loaded every time */
#define WH_CFG_CACHE_MAX_BYTES (8u << 20) /* of the texts kept, in all */

struct wh_cfg_entry {
    struct accel_cfg cfg;     /* when rc is ACCEL_OK */
    struct accel_diags diags; /* its findings, sorted */
    enum accel_err rc;        /* accel_cfg_load_buffer's */
    /* the cache's: the key (copies), references, last use */
    uint64_t hash;
    char *name, *text;
    size_t len;
    unsigned version, nodes, gpus;
    const struct accel_site *site;
    unsigned long site_gen;
    atomic_uint refs;
    uint64_t used; /* under the cache's lock */
    bool cached;   /* under the cache's lock */
};

struct wh_cfg_cache;

/* A cache of `slots` entries (0: *out NULL, which every function takes as
 * "no cache").  ACCEL_ENOMEM. */
enum accel_err wh_cfg_cache_new(struct wh_cfg_cache **out, size_t slots) ACCEL_WUR;
/* Frees the cache; entries still held are freed by their wh_cfg_release,
 * which may come later. */
void wh_cfg_cache_free(struct wh_cfg_cache *c);

/* The loaded config for k, from c when it is there, else loaded now (and
 * kept in c); *out is the caller's until wh_cfg_release(*out), read-only
 * (other reviews may hold it too).  A config with errors is an entry too
 * (its rc and findings).  ACCEL_ENOMEM only. */
enum accel_err wh_cfg_get(struct wh_cfg_cache *c, const struct wh_cfg_key *k,
                          const struct wh_cfg_entry **out) ACCEL_WUR;
void wh_cfg_release(const struct wh_cfg_entry *e);

/* Lookups answered from the cache, and those that loaded. */
void wh_cfg_cache_stats(struct wh_cfg_cache *c, unsigned long long *hits,
                        unsigned long long *misses);

struct wh_opts {
    const struct accel_site *site; /* NULL: no site policy */
    unsigned version;              /* accelerate version (0 = newest) */
    const struct wh_fetch *fetch;  /* NULL: no API server */
    struct wh_cfg_cache *cache;    /* NULL: every config loaded for its review */
    unsigned long site_gen;        /* with cache: a new number for every site loaded */
};

/* Decides one review: allowed with no patch (no accelrun annotation, not a
 * Pod CREATE, nothing left to add), allowed with a patch and warnings, or
 * denied with every located finding.  `resp` is initialised here.
 * ACCEL_EINVAL (400) when the Pod's fields have the wrong types,
 * ACCEL_ETOOBIG (413) for a patch over the response's cap, ACCEL_ENOMEM;
 * otherwise ACCEL_OK. */
enum accel_err wh_mutate(const struct wh_review *rv, const struct wh_opts *opts,
                         struct wh_response *resp, struct accel_error *err) ACCEL_WUR;

#endif
