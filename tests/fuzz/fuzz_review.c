/*
 * fuzz_review.c: libFuzzer target for the webhook's core
 * (k8s-operator-shim/): AdmissionReview bytes → decision → response.
 *
 * A refused body must leave the review empty, name the field and map to
 * 400 or 413 (500 only for ENOMEM).  An accepted one is decided twice, with
 * no API server and with a fake one (a ConfigMap and an Indexed Job of 2),
 * and every answer must hold the API server's rules: a denial has a message
 * and no patch; a patch is a JSON array of `add` operations on
 * /spec/containers/N/env (N a regular container; the whole array only where
 * the container has none, `.../env/-` only where it has one), never for
 * NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES; the encoded response parses
 * back with the uid echoed and patchType exactly when there is a patch.
 * Then the patch is applied and the review run again: nothing more may be
 * added (reinvocation).  Any broken rule aborts, which libFuzzer reports as
 * a crash.
 *
 * Built two ways (Makefile): `make fuzz` links it with libFuzzer and
 * ASan/UBSan; `make fuzz-replay` links it with tests/fuzz/replay_main.c and
 * replays tests/fuzz/corpus/fuzz_review and tests/fuzz/regressions/fuzz_review.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "../../k8s-operator-shim/webhook.h"
#include "accel/alloc.h"
#include "accel/site.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fake_configmap(void *ctx, const char *ns, const char *name, const char *key, char **data,
                          size_t *len, char *why, size_t whylen)
{
    static const char cfg[] =
        "distributed_type: MULTI_GPU\nnum_machines: 2\nmixed_precision: bf16\n";

    (void)ctx;
    (void)ns;
    (void)key;
    if (strcmp(name, "missing") == 0) {
        snprintf(why, whylen, "404 Not Found");
        return -1;
    }
    *data = strdup(cfg);
    if (*data == NULL)
        return -1;
    *len = strlen(cfg);
    return 0;
}

static int fake_job(void *ctx, const char *ns, const char *name, long *completions,
                    enum wh_job_mode *mode, char *why, size_t whylen)
{
    (void)ctx;
    (void)ns;
    (void)why;
    (void)whylen;
    *completions = 2;
    /* "plain" is not Indexed; "old" is from an API server before v1.21 */
    *mode = strcmp(name, "plain") == 0 ? WH_JOB_NOT_INDEXED
            : strcmp(name, "old") == 0 ? WH_JOB_MODE_UNKNOWN
                                       : WH_JOB_INDEXED;
    return 0;
}

/* Checks the operations against `pod` and applies them to it. */
static void check_and_apply(cJSON *pod, const char *patch, size_t nops)
{
    cJSON *ops = cJSON_Parse(patch), *op;
    cJSON *cs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"),
                                                 "containers");

    if (!cJSON_IsArray(ops) || (size_t)cJSON_GetArraySize(ops) != nops || nops == 0)
        abort();
    cJSON_ArrayForEach(op, ops)
    {
        const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "path"));
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(op, "op"));
        cJSON *value = cJSON_GetObjectItemCaseSensitive(op, "value"), *c, *env, *e;
        unsigned idx;
        int end = 0;

        if (kind == NULL || strcmp(kind, "add") != 0 || path == NULL || value == NULL)
            abort();
        if (sscanf(path, "/spec/containers/%u/env%n", &idx, &end) != 1 || end == 0)
            abort();
        c = cJSON_GetArrayItem(cs, (int)idx);
        if (c == NULL)
            abort(); /* the API server would fail the pod */
        env = cJSON_GetObjectItemCaseSensitive(c, "env");
        if (env != NULL && cJSON_IsNull(env))
            cJSON_DeleteItemFromObjectCaseSensitive(c, "env"), env = NULL;
        if (strcmp(path + end, "") == 0) {
            if (env != NULL || !cJSON_IsArray(value))
                abort(); /* would replace the user's list */
        } else if (strcmp(path + end, "/-") == 0) {
            if (!cJSON_IsArray(env) || !cJSON_IsObject(value))
                abort(); /* "doc is missing path" */
        } else
            abort();
        /* every value a {name, value} of strings, never the GPU binding */
        for (e = cJSON_IsArray(value) ? value->child : value; e != NULL;
             e = cJSON_IsArray(value) ? e->next : NULL) {
            const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
            if (n == NULL || wh_env_reserved(n) ||
                !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "value")))
                abort();
        }
        if (env == NULL)
            cJSON_AddItemToObject(c, "env", cJSON_Duplicate(value, 1));
        else
            cJSON_AddItemToArray(env, cJSON_Duplicate(value, 1));
    }
    cJSON_Delete(ops);
}

/* The response's bytes obey the API server's rules. */
static void check_encoding(const char *uid, const struct wh_response *resp)
{
    struct accel_error err;
    char *out;
    size_t len;
    cJSON *back, *r;

    if (wh_response_encode(uid, resp, &out, &len, &err) != ACCEL_OK)
        abort();
    back = cJSON_ParseWithLength(out, len);
    r = cJSON_GetObjectItemCaseSensitive(back, "response");
    if (back == NULL || r == NULL ||
        strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(back, "apiVersion")),
               "admission.k8s.io/v1") != 0 ||
        strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "uid")), uid) != 0 ||
        cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "allowed")) != resp->allowed ||
        (cJSON_GetObjectItemCaseSensitive(r, "patchType") != NULL) != (resp->patch != NULL) ||
        (cJSON_GetObjectItemCaseSensitive(r, "patch") != NULL) != (resp->patch != NULL) ||
        (cJSON_GetObjectItemCaseSensitive(r, "status") != NULL) == resp->allowed)
        abort();
    cJSON_Delete(back);
    accel_free(out);
}

/* Decides once more on the patched pod: allowed, nothing to add. */
static void rerun(const struct wh_review *rv, cJSON *pod, const struct wh_opts *opts)
{
    cJSON *root = cJSON_Duplicate(rv->root, 1);
    cJSON *req = cJSON_GetObjectItemCaseSensitive(root, "request");
    struct wh_review again;
    struct wh_response resp;
    struct accel_error err;
    char *text;

    if (root == NULL)
        abort();
    cJSON_ReplaceItemInObjectCaseSensitive(req, "object", pod);
    text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (text == NULL)
        abort();
    /* printing may grow the text past the caps: then there is nothing to compare */
    if (wh_review_decode(&again, text, strlen(text), &err) == ACCEL_OK) {
        if (wh_mutate(&again, opts, &resp, &err) != ACCEL_OK || !resp.allowed || resp.patch != NULL)
            abort();
        wh_response_free(&resp);
    }
    wh_review_free(&again);
    cJSON_free(text);
}

/* The response's bytes under opts, NULL when the review is not decided. */
static char *answer(const struct wh_review *rv, const struct wh_opts *opts)
{
    struct wh_response resp;
    struct accel_error err;
    char *out = NULL;
    size_t len;

    if (wh_mutate(rv, opts, &resp, &err) == ACCEL_OK &&
        wh_response_encode(rv->uid, &resp, &out, &len, &err) != ACCEL_OK)
        out = NULL;
    wh_response_free(&resp);
    return out;
}

/* With the config cache (one for the whole run, so earlier inputs' configs
 * are in it), twice: the same bytes as without.  `gen` names the site. */
static void check_cached(const struct wh_review *rv, const struct wh_opts *plain, unsigned long gen)
{
    static struct wh_cfg_cache *cache;
    struct wh_opts cached = *plain;
    char *want, *got;

    if (cache == NULL && wh_cfg_cache_new(&cache, 4) != ACCEL_OK)
        abort();
    cached.cache = cache;
    cached.site_gen = gen;
    want = answer(rv, plain);
    for (int i = 0; i < 2; i++) {
        got = answer(rv, &cached);
        if ((want == NULL) != (got == NULL) || (want != NULL && strcmp(want, got) != 0))
            abort();
        accel_free(got);
    }
    accel_free(want);
}

static struct accel_site site;
static int site_state; /* 1 once loaded */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wh_fetch api = {fake_configmap, fake_job, NULL};
    const struct wh_opts opts[2] = {{NULL, 0, NULL, NULL, 0}, {NULL, 0, &api, NULL, 0}};
    struct wh_review rv;
    struct accel_error err;
    enum accel_err rc;

    accel_error_clear(&err);
    rc = wh_review_decode(&rv, (const char *)data, size, &err);
    if (rc != ACCEL_OK) {
        int st = wh_http_status(rc);
        if (rv.root != NULL || err.code != rc || err.msg[0] == '\0')
            abort();
        if (st != 400 && st != 413 && rc != ACCEL_ENOMEM)
            abort();
        wh_review_free(&rv);
        return 0;
    }
    if (rv.uid == NULL || rv.uid[0] == '\0' || strlen(rv.uid) > WH_MAX_UID)
        abort();
    for (size_t k = 0; k < 2; k++) {
        struct wh_response resp;
        rc = wh_mutate(&rv, &opts[k], &resp, &err);
        if (rc != ACCEL_OK) {
            if (rc != ACCEL_EINVAL && rc != ACCEL_ETOOBIG && rc != ACCEL_ENOMEM)
                abort();
            wh_response_free(&resp);
            continue;
        }
        if (!resp.allowed && (resp.message == NULL || resp.patch != NULL))
            abort();
        if (resp.nwarnings > WH_MAX_WARNINGS)
            abort();
        for (size_t i = 0; i < resp.nwarnings; i++)
            if (strlen(resp.warnings[i]) > WH_MAX_WARNING)
                abort();
        check_encoding(rv.uid, &resp);
        if (resp.patch != NULL) {
            cJSON *pod = cJSON_Duplicate(rv.pod, 1);
            if (pod == NULL)
                abort();
            check_and_apply(pod, resp.patch, resp.nops);
            rerun(&rv, pod, &opts[k]);
        }
        wh_response_free(&resp);
    }
    /* without a site policy, and with one (defaults, an enforced key, a port) */
    if (site_state == 0) {
        static const char text[] = "defaults:\n  mixed_precision: fp16\nenforce:\n"
                                   "  dynamo_config:\n    dynamo_backend: 'NO'\n"
                                   "accelrun:\n  port_base: 23456\n";
        struct accel_diags d;
        accel_diags_init(&d);
        accel_site_init(&site);
        if (accel_site_load_buffer(&site, "site.yaml", text, strlen(text), 0, &d, &err) != ACCEL_OK)
            abort(); /* the fixed site policy must load */
        site_state = 1;
        accel_diags_free(&d);
    }
    check_cached(&rv, &opts[1], 1);
    {
        struct wh_opts with_site = opts[1];
        with_site.site = &site;
        check_cached(&rv, &with_site, 2);
    }
    wh_review_free(&rv);
    return 0;
}
