/*
 * test_webhook.c: the admission webhook's core (k8s-operator-shim/), from
 * AdmissionReview bytes to the response the API server reads.
 *
 * Fixtures are built here with cJSON as the API server sends them for a Pod
 * of an Indexed Job (shared/reference/kubernetes.md §2.7: generateName and
 * no name, the completion-index annotation and label, the job-name labels,
 * the controlling ownerReference, JOB_COMPLETION_INDEX in every container).
 * Each patch is applied by the small RFC 6902 `add` applier below (which
 * fails on a missing parent, as the API server's does), the patched
 * container's env compared with accel_env_build's for the same layout, and
 * the webhook run again on the patched pod: it must add nothing.  Then the
 * denials (invalid configs with their line:column, layout problems, the
 * ConfigMap and Job through a table of fake API answers), the bad requests
 * with their HTTP class and the field named, and the response encoding.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "accel/alloc.h"
#include "accel/config.h"
#include "accel/env.h"
#include "accel/site.h"
#include "../../k8s-operator-shim/webhook.h"
#include "../harness/test.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------- fixtures */

static const char cfg_1x2[] = "compute_environment: LOCAL_MACHINE\n"
                              "distributed_type: MULTI_GPU\n"
                              "num_machines: 2\n"
                              "num_processes: 2\n"
                              "mixed_precision: bf16\n";

static const char cfg_fsdp_4x2[] = "distributed_type: FSDP\n"
                                   "num_machines: 2\n"
                                   "num_processes: 8\n"
                                   "mixed_precision: bf16\n"
                                   "fsdp_config:\n"
                                   "  fsdp_version: 2\n"
                                   "  fsdp_state_dict_type: SHARDED_STATE_DICT\n";

/* A container: name, GPU limit (-1: none), env NULL (absent), "" (an empty
 * array) or "A=1,B=2" (literal values). */
static cJSON *container(const char *name, int gpus, const char *env)
{
    cJSON *c = cJSON_CreateObject();

    cJSON_AddStringToObject(c, "name", name);
    cJSON_AddStringToObject(c, "image", "ghcr.io/example/train:1");
    if (env != NULL) {
        cJSON *arr = cJSON_AddArrayToObject(c, "env");
        char copy[512], *save = NULL;
        snprintf(copy, sizeof(copy), "%s", env);
        for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            cJSON *e = cJSON_CreateObject();
            char *eq = strchr(kv, '=');
            *eq = '\0';
            cJSON_AddStringToObject(e, "name", kv);
            if (strcmp(eq + 1, "@index") == 0) {
                /* what the Job controller adds */
                cJSON *from = cJSON_AddObjectToObject(e, "valueFrom");
                cJSON *f = cJSON_AddObjectToObject(from, "fieldRef");
                cJSON_AddStringToObject(f, "apiVersion", "v1");
                cJSON_AddStringToObject(f, "fieldPath", "metadata.labels['" WH_ANN_INDEX "']");
            } else
                cJSON_AddStringToObject(e, "value", eq + 1);
            cJSON_AddItemToArray(arr, e);
        }
    }
    if (gpus >= 0) {
        char q[16];
        cJSON *res = cJSON_AddObjectToObject(c, "resources");
        cJSON *lim = cJSON_AddObjectToObject(res, "limits");
        cJSON *req = cJSON_AddObjectToObject(res, "requests");
        snprintf(q, sizeof(q), "%d", gpus);
        cJSON_AddStringToObject(lim, WH_GPU_RESOURCE, q);
        cJSON_AddStringToObject(req, WH_GPU_RESOURCE, q);
        cJSON_AddStringToObject(lim, "memory", "64Gi");
    }
    return c;
}

/* A Pod of Indexed Job "train" in namespace "ml" with completion index
 * `index` (-1: none) and the inline config `config` (NULL: none); one
 * container "trainer" with `gpus` GPUs and env `env` (see container()). */
static cJSON *job_pod(int index, const char *config, int gpus, const char *env)
{
    cJSON *pod = cJSON_CreateObject(), *meta, *lab, *ann, *own, *ref, *spec, *cs;
    char idx[16], gen[64], host[64];

    snprintf(idx, sizeof(idx), "%d", index);
    snprintf(gen, sizeof(gen), "train-%d-", index);
    snprintf(host, sizeof(host), "train-%d", index);
    cJSON_AddStringToObject(pod, "apiVersion", "v1");
    cJSON_AddStringToObject(pod, "kind", "Pod");
    meta = cJSON_AddObjectToObject(pod, "metadata");
    cJSON_AddStringToObject(meta, "generateName", gen);
    cJSON_AddStringToObject(meta, "namespace", "ml");
    lab = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(lab, "batch.kubernetes.io/controller-uid", "4d5e-uid");
    cJSON_AddStringToObject(lab, WH_LABEL_JOB, "train");
    cJSON_AddStringToObject(lab, "controller-uid", "4d5e-uid");
    cJSON_AddStringToObject(lab, WH_LABEL_JOB_LEGACY, "train");
    if (index >= 0)
        cJSON_AddStringToObject(lab, WH_ANN_INDEX, idx);
    ann = cJSON_AddObjectToObject(meta, "annotations");
    if (index >= 0)
        cJSON_AddStringToObject(ann, WH_ANN_INDEX, idx);
    if (config != NULL)
        cJSON_AddStringToObject(ann, WH_ANN_CONFIG, config);
    own = cJSON_AddArrayToObject(meta, "ownerReferences");
    ref = cJSON_CreateObject();
    cJSON_AddStringToObject(ref, "apiVersion", "batch/v1");
    cJSON_AddStringToObject(ref, "kind", "Job");
    cJSON_AddStringToObject(ref, "name", "train");
    cJSON_AddStringToObject(ref, "uid", "4d5e-uid");
    cJSON_AddTrueToObject(ref, "controller");
    cJSON_AddTrueToObject(ref, "blockOwnerDeletion");
    cJSON_AddItemToArray(own, ref);
    cJSON_AddArrayToObject(meta, "finalizers");
    cJSON_AddItemToArray(cJSON_GetObjectItem(meta, "finalizers"),
                         cJSON_CreateString("batch.kubernetes.io/job-tracking"));
    spec = cJSON_AddObjectToObject(pod, "spec");
    cJSON_AddStringToObject(spec, "hostname", host);
    cJSON_AddStringToObject(spec, "subdomain", "train");
    cJSON_AddStringToObject(spec, "restartPolicy", "Never");
    cs = cJSON_AddArrayToObject(spec, "containers");
    cJSON_AddItemToArray(cs, container("trainer", gpus, env));
    return pod;
}

static cJSON *meta_of(cJSON *pod, const char *key)
{
    return cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), key);
}

static cJSON *spec_of(cJSON *pod, const char *key)
{
    return cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), key);
}

static void set_annotation(cJSON *pod, const char *key, const char *value)
{
    cJSON *ann = meta_of(pod, "annotations");
    cJSON_DeleteItemFromObject(ann, key);
    if (value != NULL)
        cJSON_AddStringToObject(ann, key, value);
}

/* The AdmissionReview text of a CREATE of `pod` (not consumed). */
static char *review_of(const cJSON *pod, const char *uid)
{
    cJSON *r = cJSON_CreateObject(), *req, *kind, *res;
    char *text;

    cJSON_AddStringToObject(r, "kind", "AdmissionReview");
    cJSON_AddStringToObject(r, "apiVersion", "admission.k8s.io/v1");
    req = cJSON_AddObjectToObject(r, "request");
    cJSON_AddStringToObject(req, "uid", uid);
    kind = cJSON_AddObjectToObject(req, "kind");
    cJSON_AddStringToObject(kind, "group", "");
    cJSON_AddStringToObject(kind, "version", "v1");
    cJSON_AddStringToObject(kind, "kind", "Pod");
    res = cJSON_AddObjectToObject(req, "resource");
    cJSON_AddStringToObject(res, "group", "");
    cJSON_AddStringToObject(res, "version", "v1");
    cJSON_AddStringToObject(res, "resource", "pods");
    cJSON_AddStringToObject(req, "namespace", "ml");
    cJSON_AddStringToObject(req, "operation", "CREATE");
    cJSON_AddFalseToObject(req, "dryRun");
    cJSON_AddItemToObject(req, "object", cJSON_Duplicate(pod, 1));
    cJSON_AddNullToObject(req, "oldObject");
    text = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    ASSERT(text != NULL);
    return text;
}

/* Decodes and decides; both must succeed. */
static void run(const cJSON *pod, const struct wh_opts *opts, struct wh_response *resp)
{
    char *text = review_of(pod, "705ab4f5-6393-11e8-b7cc-42010a800002");
    struct wh_review rv;
    struct accel_error err;

    accel_error_clear(&err);
    if (wh_review_decode(&rv, text, strlen(text), &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "decode: %s", err.msg);
    if (wh_mutate(&rv, opts, resp, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "mutate: %s", err.msg);
    if (!resp->allowed) {
        /* one TAP comment per line of the denial */
        char *copy = strdup(resp->message), *save = NULL;
        for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
            test_note("denied: %s", l);
        free(copy);
    }
    wh_review_free(&rv);
    cJSON_free(text);
}

/* ---------------------------------------------------------------- JSON Patch (test side) */

/* One JSON Pointer segment, unescaped (~1 then ~0, RFC 6901 §4). */
static const char *next_segment(const char *p, char *seg, size_t size)
{
    size_t n = 0;

    ASSERT(*p == '/');
    for (p++; *p && *p != '/'; p++) {
        char c = *p;
        if (c == '~') {
            ASSERT(p[1] == '0' || p[1] == '1');
            c = p[1] == '0' ? '~' : '/';
            p++;
        }
        ASSERT(n + 1 < size);
        seg[n++] = c;
    }
    seg[n] = '\0';
    return p;
}

/* Applies the `add` operations of `ops` to doc as RFC 6902 §4.1 says: the
 * parent must exist; "-" appends; an object member is added or replaced. */
static void apply_patch(cJSON *doc, const cJSON *ops)
{
    const cJSON *op;

    ASSERT(cJSON_IsArray(ops));
    cJSON_ArrayForEach(op, ops)
    {
        const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(op, "path"));
        cJSON *cur = doc, *val = cJSON_Duplicate(cJSON_GetObjectItem(op, "value"), 1);
        char seg[256];

        ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(op, "op")), "add");
        ASSERT(p != NULL && val != NULL);
        for (;;) {
            p = next_segment(p, seg, sizeof(seg));
            if (*p == '\0')
                break;
            if (cJSON_IsArray(cur))
                cur = cJSON_GetArrayItem(cur, atoi(seg));
            else
                cur = cJSON_GetObjectItemCaseSensitive(cur, seg);
            if (cur == NULL)
                test_fail(__FILE__, __LINE__, "add: the path's parent is missing at '%s'", seg);
        }
        if (cJSON_IsArray(cur)) {
            if (strcmp(seg, "-") == 0)
                cJSON_AddItemToArray(cur, val);
            else
                ASSERT(cJSON_InsertItemInArray(cur, atoi(seg), val));
        } else {
            ASSERT(cJSON_IsObject(cur));
            cJSON_DeleteItemFromObjectCaseSensitive(cur, seg);
            cJSON_AddItemToObject(cur, seg, val);
        }
    }
}

static cJSON *patch_ops(const struct wh_response *resp)
{
    cJSON *ops;

    ASSERT(resp->patch != NULL);
    ops = cJSON_Parse(resp->patch);
    ASSERT(cJSON_IsArray(ops));
    ASSERT_INT_EQ(cJSON_GetArraySize(ops), resp->nops);
    return ops;
}

/* The env value of NAME in container i, NULL when absent; fails when the
 * name is there twice. */
static const char *env_value(const cJSON *pod, int i, const char *name)
{
    const cJSON *c =
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"), i);
    const cJSON *e;
    const char *found = NULL;
    int n = 0;

    cJSON_ArrayForEach(e, cJSON_GetObjectItem(c, "env"))
    {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), name) == 0) {
            const cJSON *v = cJSON_GetObjectItem(e, "value");
            found = v ? cJSON_GetStringValue(v) : "(valueFrom)";
            n++;
        }
    }
    if (n > 1)
        test_fail(__FILE__, __LINE__, "container %d: %s is in env %d times", i, name, n);
    return found;
}

/* Applies resp's patch to pod, then runs the webhook on the result: it must
 * be allowed with nothing to add. */
static void apply_and_rerun(cJSON *pod, const struct wh_response *resp, const struct wh_opts *opts)
{
    struct wh_response again;
    cJSON *ops = patch_ops(resp);
    size_t kept = 0, kept_again = 0;

    apply_patch(pod, ops);
    cJSON_Delete(ops);
    run(pod, opts, &again);
    ASSERT(again.allowed);
    if (again.patch != NULL)
        test_fail(__FILE__, __LINE__, "second run patches again: %s", again.patch);
    /* the user's own values are reported again, accelrun's are not */
    for (size_t i = 0; i < resp->nwarnings; i++)
        kept += strstr(resp->warnings[i], "is set in the pod spec") != NULL;
    for (size_t i = 0; i < again.nwarnings; i++)
        kept_again += strstr(again.warnings[i], "is set in the pod spec") != NULL;
    if (kept_again != kept)
        test_fail(__FILE__, __LINE__, "second run: %zu kept variables reported, first run %zu",
                  kept_again, kept);
    wh_response_free(&again);
}

/* accel_env_build for the layout the webhook should have used. */
static void expected_env(const char *yaml, const struct accel_layout *lay,
                         const struct accel_site *site, struct accel_env *env)
{
    struct accel_cfg_opts copts = {0, site, 0, 0};
    struct accel_env_opts eopts = {NULL, site, false};
    struct accel_cfg cfg;
    struct accel_diags d;
    struct accel_error err;

    accel_diags_init(&d);
    accel_error_clear(&err);
    ASSERT_OK(accel_cfg_load_buffer(&cfg, "expected", yaml, strlen(yaml), &copts, &d, &err));
    if (accel_env_build(&cfg, lay, &eopts, env, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "accel_env_build: %s", err.msg);
    accel_cfg_free(&cfg);
    accel_diags_free(&d);
}

/* Every variable of `want` (but the reserved ones) is in container i with
 * its value; returns how many were compared. */
static size_t same_as_env_build(const cJSON *pod, int i, const struct accel_env *want)
{
    size_t n = 0;

    for (size_t k = 0; k < want->n; k++) {
        char name[ACCEL_MAX_ENV_NAME + 1];
        const char *eq = strchr(want->v[k], '=');
        const char *got;
        snprintf(name, sizeof(name), "%.*s", (int)(eq - want->v[k]), want->v[k]);
        if (wh_env_reserved(name))
            continue;
        got = env_value(pod, i, name);
        if (got == NULL || strcmp(got, eq + 1) != 0)
            test_fail(__FILE__, __LINE__, "container %d: %s is '%s', accel_env_build says '%s'", i,
                      name, got ? got : "(absent)", eq + 1);
        n++;
    }
    return n;
}

static bool has_warning(const struct wh_response *r, const char *needle)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strstr(r->warnings[i], needle) != NULL)
            return true;
    return false;
}

/* ---------------------------------------------------------------- a fake API server */

struct fake_api {
    const char *cm_data; /* NULL: the read fails with cm_why */
    const char *cm_why;
    long completions;
    enum wh_job_mode mode;
    const char *job_why; /* non-NULL: the Job read fails */
    unsigned cm_calls, job_calls;
    char ns[64], name[64], key[64];
};

static int fake_configmap(void *ctx, const char *ns, const char *name, const char *key, char **data,
                          size_t *len, char *why, size_t whylen)
{
    struct fake_api *f = ctx;

    f->cm_calls++;
    snprintf(f->ns, sizeof(f->ns), "%s", ns);
    snprintf(f->name, sizeof(f->name), "%s", name);
    snprintf(f->key, sizeof(f->key), "%s", key);
    if (f->cm_data == NULL) {
        snprintf(why, whylen, "%s", f->cm_why);
        return -1;
    }
    *data = strdup(f->cm_data);
    *len = strlen(f->cm_data);
    return 0;
}

static int fake_job(void *ctx, const char *ns, const char *name, long *completions,
                    enum wh_job_mode *mode, char *why, size_t whylen)
{
    struct fake_api *f = ctx;

    (void)ns;
    (void)name;
    f->job_calls++;
    if (f->job_why != NULL) {
        snprintf(why, whylen, "%s", f->job_why);
        return -1;
    }
    *completions = f->completions;
    *mode = f->mode;
    return 0;
}

/* ---------------------------------------------------------------- cases */

TEST(no_annotation_allowed_untouched)
{
    struct fake_api api = {cfg_1x2, "", 2, WH_JOB_INDEXED, NULL, 0, 0, "", "", ""};
    struct wh_fetch fetch = {fake_configmap, fake_job, &api};
    struct wh_opts opts = {NULL, 0, &fetch};
    struct wh_response resp;
    cJSON *pod = job_pod(1, NULL, 1, NULL);

    run(pod, &opts, &resp);
    ASSERT(resp.allowed);
    ASSERT(resp.patch == NULL);
    ASSERT_INT_EQ(resp.nwarnings, 0);
    ASSERT_INT_EQ(api.cm_calls + api.job_calls, 0); /* no API call */
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(one_process_pod_without_env)
{
    struct accel_layout lay = {2, 1, 1, 0, -1, 0, "train-0.train.ml.svc", 29500, 0};
    struct wh_response resp;
    struct accel_env want;
    cJSON *pod = job_pod(1, cfg_1x2, 1, NULL), *ops;

    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    /* no env: one add of the whole array */
    ops = patch_ops(&resp);
    ASSERT_INT_EQ(cJSON_GetArraySize(ops), 1);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ops, 0), "path")),
                  "/spec/containers/0/env");
    cJSON_Delete(ops);
    ASSERT(has_warning(&resp, "not checked (no API server configured)"));
    apply_and_rerun(pod, &resp, NULL);
    /* the per-process set of node 1 of 2 */
    ASSERT_STR_EQ(env_value(pod, 0, "RANK"), "1");
    ASSERT_STR_EQ(env_value(pod, 0, "LOCAL_RANK"), "0");
    ASSERT_STR_EQ(env_value(pod, 0, "WORLD_SIZE"), "2");
    ASSERT_STR_EQ(env_value(pod, 0, "GROUP_RANK"), "1");
    ASSERT_STR_EQ(env_value(pod, 0, "LOCAL_WORLD_SIZE"), "1");
    ASSERT_STR_EQ(env_value(pod, 0, "MASTER_ADDR"), "train-0.train.ml.svc");
    ASSERT_STR_EQ(env_value(pod, 0, "MASTER_PORT"), "29500");
    ASSERT_STR_EQ(env_value(pod, 0, "ACCELERATE_MIXED_PRECISION"), "bf16");
    ASSERT(env_value(pod, 0, "PET_NNODES") == NULL);
    ASSERT(env_value(pod, 0, "CUDA_VISIBLE_DEVICES") == NULL);
    expected_env(cfg_1x2, &lay, NULL, &want);
    test_note("%zu variables as accel_env_build gives them", same_as_env_build(pod, 0, &want));
    accel_env_free(&want);
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(one_process_pod_with_env)
{
    struct accel_layout lay = {2, 0, 1, 0, -1, 0, "train-0.train.ml.svc", 29500, 0};
    struct wh_response resp;
    struct accel_env want;
    cJSON *pod = job_pod(0, cfg_1x2, 1, "JOB_COMPLETION_INDEX=@index,HF_HOME=/data/hf"), *ops, *op;
    size_t n;

    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    /* an env: one append per variable, each a string value */
    ops = patch_ops(&resp);
    cJSON_ArrayForEach(op, ops)
    {
        ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(op, "path")),
                      "/spec/containers/0/env/-");
        ASSERT(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(op, "value"), "value")));
    }
    cJSON_Delete(ops);
    apply_and_rerun(pod, &resp, NULL);
    ASSERT_STR_EQ(env_value(pod, 0, "HF_HOME"), "/data/hf");
    ASSERT_STR_EQ(env_value(pod, 0, "JOB_COMPLETION_INDEX"), "(valueFrom)");
    ASSERT_STR_EQ(env_value(pod, 0, "RANK"), "0");
    expected_env(cfg_1x2, &lay, NULL, &want);
    n = same_as_env_build(pod, 0, &want);
    ASSERT_INT_EQ(resp.nops, n);
    /* the user's entries stay first, in their order */
    ASSERT_STR_EQ(
        cJSON_GetStringValue(cJSON_GetObjectItem(
            cJSON_GetArrayItem(
                cJSON_GetObjectItem(cJSON_GetArrayItem(spec_of(pod, "containers"), 0), "env"), 0),
            "name")),
        "JOB_COMPLETION_INDEX");
    accel_env_free(&want);
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(empty_env_array)
{
    struct wh_response resp;
    cJSON *pod = job_pod(0, cfg_1x2, 1, ""), *ops;

    run(pod, NULL, &resp);
    ops = patch_ops(&resp);
    ASSERT(cJSON_GetArraySize(ops) > 1);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ops, 0), "path")),
                  "/spec/containers/0/env/-");
    cJSON_Delete(ops);
    apply_and_rerun(pod, &resp, NULL);
    ASSERT_STR_EQ(env_value(pod, 0, "WORLD_SIZE"), "2");
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(several_containers_and_init_containers)
{
    struct wh_response resp;
    cJSON *pod = job_pod(1, cfg_1x2, 1, NULL), *ops, *op, *inits;
    int paths[2] = {0, 0};

    cJSON_AddItemToArray(spec_of(pod, "containers"), container("logger", -1, "LOG=1"));
    inits = cJSON_AddArrayToObject(cJSON_GetObjectItem(pod, "spec"), "initContainers");
    cJSON_AddItemToArray(inits, container("wait-for-master", -1, NULL));
    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    ops = patch_ops(&resp);
    cJSON_ArrayForEach(op, ops)
    {
        const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(op, "path"));
        ASSERT(strstr(p, "initContainers") == NULL);
        if (strcmp(p, "/spec/containers/0/env") == 0)
            paths[0]++;
        else if (strcmp(p, "/spec/containers/1/env/-") == 0)
            paths[1]++;
        else
            test_fail(__FILE__, __LINE__, "unexpected path %s", p);
    }
    ASSERT_INT_EQ(paths[0], 1);
    ASSERT(paths[1] > 1);
    cJSON_Delete(ops);
    apply_and_rerun(pod, &resp, NULL);
    ASSERT_STR_EQ(env_value(pod, 0, "RANK"), "1");
    ASSERT_STR_EQ(env_value(pod, 1, "RANK"), "1");
    ASSERT(cJSON_GetObjectItem(cJSON_GetArrayItem(inits, 0), "env") == NULL);
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(containers_annotation)
{
    struct wh_response resp;
    cJSON *pod = job_pod(1, cfg_1x2, 1, NULL), *ops, *inits;

    cJSON_AddItemToArray(spec_of(pod, "containers"), container("logger", -1, NULL));
    inits = cJSON_AddArrayToObject(cJSON_GetObjectItem(pod, "spec"), "initContainers");
    cJSON_AddItemToArray(inits, container("setup", -1, NULL));
    /* only the one named */
    set_annotation(pod, WH_ANN_CONTAINERS, "logger");
    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    ops = patch_ops(&resp);
    ASSERT_INT_EQ(cJSON_GetArraySize(ops), 1);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(ops, 0), "path")),
                  "/spec/containers/1/env");
    cJSON_Delete(ops);
    wh_response_free(&resp);
    /* " trainer , logger" reads as both */
    set_annotation(pod, WH_ANN_CONTAINERS, " trainer , logger");
    run(pod, NULL, &resp);
    ops = patch_ops(&resp);
    ASSERT_INT_EQ(cJSON_GetArraySize(ops), 2);
    cJSON_Delete(ops);
    wh_response_free(&resp);
    /* an unknown name and an init container: denied, both said */
    set_annotation(pod, WH_ANN_CONTAINERS, "trainer,nosuch,setup");
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT(resp.patch == NULL);
    ASSERT_INT_EQ(resp.code, 403);
    ASSERT_CONTAINS(resp.message, "no container named 'nosuch'");
    ASSERT_CONTAINS(resp.message, "'setup' is an init container");
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(pod_fields_generate_name_only)
{
    cJSON *pod = job_pod(3, cfg_1x2, 2, NULL);
    struct wh_pod p;
    struct accel_error err;

    cJSON_AddItemToArray(cJSON_AddArrayToObject(cJSON_GetObjectItem(pod, "spec"), "initContainers"),
                         container("init", 1, NULL));
    ASSERT_OK(wh_pod_read(&p, pod, "", &err));
    ASSERT(p.name == NULL);
    ASSERT_STR_EQ(p.generate_name, "train-3-");
    ASSERT_STR_EQ(p.ns, "ml"); /* the object's, when the request has none */
    ASSERT_STR_EQ(p.job, "train");
    ASSERT_STR_EQ(p.owner_job, "train");
    ASSERT_STR_EQ(p.index, "3");
    ASSERT_STR_EQ(p.subdomain, "train");
    ASSERT_STR_EQ(p.config, cfg_1x2);
    ASSERT(p.config_map == NULL && p.select == NULL);
    ASSERT_INT_EQ(p.n, 2);
    ASSERT_INT_EQ(p.nregular, 1);
    ASSERT_STR_EQ(p.c[0].name, "trainer");
    ASSERT_INT_EQ(p.c[0].gpus, 2);
    ASSERT(p.c[0].env == NULL && !p.c[0].init);
    ASSERT(p.c[1].init);
    ASSERT_INT_EQ(p.c[1].index, 0);
    wh_pod_free(&p);
    /* request.namespace wins; the legacy job-name label is the fallback */
    cJSON_DeleteItemFromObject(meta_of(pod, "labels"), WH_LABEL_JOB);
    ASSERT_OK(wh_pod_read(&p, pod, "other", &err));
    ASSERT_STR_EQ(p.ns, "other");
    ASSERT_STR_EQ(p.job, "train");
    wh_pod_free(&p);
    /* wrong types are named */
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(pod, "spec"), "containers",
                              cJSON_CreateString("x"));
    accel_error_clear(&err);
    ASSERT_INT_EQ(wh_pod_read(&p, pod, "", &err), ACCEL_EINVAL);
    ASSERT_STR_EQ(err.msg, "request.object.spec.containers: not an array");
    wh_pod_free(&p);
    cJSON_Delete(pod);
}

TEST(invalid_config_denied_located)
{
    /* line 3: a misspelt key; line 4: 3 processes on 2 machines */
    static const char bad[] = "distributed_type: MULTI_GPU\n"
                              "num_machines: 2\n"
                              "mixed_precison: bf16\n"
                              "num_processes: 3\n";
    struct wh_response resp;
    cJSON *pod = job_pod(0, bad, 1, NULL);
    char *out;
    size_t len;
    struct accel_error err;
    cJSON *back;

    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT(resp.patch == NULL);
    ASSERT_CONTAINS(resp.message, "annotation accelrun.io/config:3:1: error: mixed_precison");
    ASSERT_CONTAINS(resp.message, "mixed_precision"); /* did you mean */
    ASSERT_CONTAINS(resp.message, "annotation accelrun.io/config:4:16: error: num_processes");
    ASSERT(strchr(resp.message, '\n') != NULL); /* one line each */
    /* the denial as the API server reads it */
    ASSERT_OK(wh_response_encode("u-1", &resp, &out, &len, &err));
    back = cJSON_Parse(out);
    ASSERT(back != NULL);
    ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(back, "response"), "allowed")));
    ASSERT_INT_EQ(cJSON_GetObjectItem(
                      cJSON_GetObjectItem(cJSON_GetObjectItem(back, "response"), "status"), "code")
                      ->valueint,
                  403);
    ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(back, "response"), "patch") == NULL);
    ASSERT(cJSON_GetObjectItem(cJSON_GetObjectItem(back, "response"), "patchType") == NULL);
    cJSON_Delete(back);
    accel_free(out);
    wh_response_free(&resp);
    /* not YAML at all: the parser's position */
    set_annotation(pod, WH_ANN_CONFIG, "num_machines: [2\n");
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "annotation accelrun.io/config:");
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(node_level_set_for_gpu_limit_4)
{
    struct accel_layout lay = {2, 1, 4, -1, -1, 0, "train-0.train.ml.svc", 29500, 0};
    struct wh_response resp;
    struct accel_env want;
    cJSON *pod = job_pod(1, cfg_fsdp_4x2, 4, NULL);

    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    apply_and_rerun(pod, &resp, NULL);
    ASSERT_STR_EQ(env_value(pod, 0, "PET_NNODES"), "2");
    ASSERT_STR_EQ(env_value(pod, 0, "PET_NODE_RANK"), "1");
    ASSERT_STR_EQ(env_value(pod, 0, "PET_NPROC_PER_NODE"), "4");
    ASSERT_STR_EQ(env_value(pod, 0, "PET_MASTER_ADDR"), "train-0.train.ml.svc");
    ASSERT_STR_EQ(env_value(pod, 0, "PET_MASTER_PORT"), "29500");
    ASSERT_STR_EQ(env_value(pod, 0, "GROUP_RANK"), "1");
    ASSERT_STR_EQ(env_value(pod, 0, "WORLD_SIZE"), "8");
    ASSERT_STR_EQ(env_value(pod, 0, "ACCELERATE_USE_FSDP"), "true");
    ASSERT(env_value(pod, 0, "RANK") == NULL);       /* torchrun sets it per process */
    ASSERT(env_value(pod, 0, "LOCAL_RANK") == NULL); /* likewise */
    expected_env(cfg_fsdp_4x2, &lay, NULL, &want);
    same_as_env_build(pod, 0, &want);
    accel_env_free(&want);
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* no num_processes: the GPU limit says 4 per pod */
    pod = job_pod(0, "distributed_type: MULTI_GPU\nnum_machines: 3\n", 4, NULL);
    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    apply_and_rerun(pod, &resp, NULL);
    ASSERT_STR_EQ(env_value(pod, 0, "PET_NPROC_PER_NODE"), "4");
    ASSERT_STR_EQ(env_value(pod, 0, "WORLD_SIZE"), "12");
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* more processes per pod than GPUs: the config's own cluster-fit error */
    pod = job_pod(0, cfg_fsdp_4x2, 2, NULL);
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "annotation accelrun.io/config:3:16: error: num_processes: 4 "
                                  "processes per machine, but a node has 2 GPUs");
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(cpu_and_single_process_configs)
{
    /* examples/cpu-2x4.yaml: 4 CPU processes a pod, the node-level set */
    static const char cpu[] = "distributed_type: MULTI_CPU\nmixed_precision: 'no'\n"
                              "num_machines: 2\nnum_processes: 8\nuse_cpu: true\n";
    struct accel_layout lay = {2, 0, 4, -1, -1, 0, "train-0.train.ml.svc", 29500, 0};
    struct wh_response resp;
    struct accel_env want;
    cJSON *pod = job_pod(0, cpu, -1, NULL);

    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    apply_and_rerun(pod, &resp, NULL);
    ASSERT_STR_EQ(env_value(pod, 0, "PET_NPROC_PER_NODE"), "4");
    ASSERT_STR_EQ(env_value(pod, 0, "ACCELERATE_USE_CPU"), "True");
    expected_env(cpu, &lay, NULL, &want);
    same_as_env_build(pod, 0, &want);
    accel_env_free(&want);
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* distributed_type NO runs one process whatever the GPU limit says */
    pod = job_pod(0, "distributed_type: 'NO'\nnum_machines: 1\n", 4, NULL);
    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    apply_and_rerun(pod, &resp, NULL);
    ASSERT(env_value(pod, 0, "PET_NPROC_PER_NODE") == NULL);
    ASSERT(env_value(pod, 0, "WORLD_SIZE") == NULL); /* a world of one, as accelerate */
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(user_variable_kept_with_warning)
{
    struct wh_response resp;
    cJSON *pod = job_pod(1, cfg_1x2, 1,
                         "MASTER_PORT=1234,NVIDIA_VISIBLE_DEVICES=all,OMP_NUM_THREADS=8"),
          *ops, *op;

    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    /* accelerate keeps a user's OMP_NUM_THREADS without a word */
    ASSERT(!has_warning(&resp, "OMP_NUM_THREADS"));
    ASSERT_INT_EQ(resp.nwarnings, 2); /* MASTER_PORT, and the Job not checked */
    ASSERT(has_warning(&resp, "container trainer: MASTER_PORT is set in the pod spec and kept; "
                              "accelrun would set MASTER_PORT=29500"));
    ops = patch_ops(&resp);
    cJSON_ArrayForEach(op, ops)
    {
        const char *name =
            cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(op, "value"), "name"));
        ASSERT(strcmp(name, "MASTER_PORT") != 0);
    }
    cJSON_Delete(ops);
    apply_and_rerun(pod, &resp, NULL);
    ASSERT_STR_EQ(env_value(pod, 0, "MASTER_PORT"), "1234");
    ASSERT_STR_EQ(env_value(pod, 0, "NVIDIA_VISIBLE_DEVICES"), "all");
    ASSERT_STR_EQ(env_value(pod, 0, "OMP_NUM_THREADS"), "8");
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(never_gpu_visibility)
{
    static const char ids[] = "distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 4\n"
                              "gpu_ids: 0,1\n";
    struct wh_response resp;
    cJSON *pod = job_pod(0, ids, 2, NULL);

    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    ASSERT(has_warning(&resp, "gpu_ids is not used on Kubernetes"));
    ASSERT(strstr(resp.patch, "CUDA_VISIBLE_DEVICES") == NULL);
    ASSERT(strstr(resp.patch, "NVIDIA_VISIBLE_DEVICES") == NULL);
    ASSERT(wh_env_reserved("CUDA_VISIBLE_DEVICES") && wh_env_reserved("NVIDIA_VISIBLE_DEVICES"));
    ASSERT(!wh_env_reserved("CUDA_DEVICE_ORDER"));
    apply_and_rerun(pod, &resp, NULL);
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(host_network_dns_warning)
{
    struct wh_response resp;
    cJSON *pod = job_pod(0, cfg_1x2, 1, NULL), *spec = cJSON_GetObjectItem(pod, "spec");

    cJSON_AddTrueToObject(spec, "hostNetwork");
    cJSON_AddStringToObject(spec, "dnsPolicy", "ClusterFirst");
    run(pod, NULL, &resp);
    ASSERT(resp.allowed);
    ASSERT(has_warning(&resp, "spec.hostNetwork with dnsPolicy ClusterFirst: train-0.train.ml.svc "
                              "resolves only with dnsPolicy: ClusterFirstWithHostNet"));
    wh_response_free(&resp);
    cJSON_ReplaceItemInObject(spec, "dnsPolicy", cJSON_CreateString("ClusterFirstWithHostNet"));
    run(pod, NULL, &resp);
    ASSERT(!has_warning(&resp, "hostNetwork"));
    wh_response_free(&resp);
    cJSON_ReplaceItemInObject(spec, "hostNetwork", cJSON_CreateString("yes"));
    {
        struct wh_pod p;
        struct accel_error err;
        ASSERT_INT_EQ(wh_pod_read(&p, pod, "", &err), ACCEL_EINVAL);
        ASSERT_STR_EQ(err.msg, "request.object.spec.hostNetwork: not a boolean");
        wh_pod_free(&p);
    }
    cJSON_Delete(pod);
}

TEST(layout_denials)
{
    struct wh_response resp;
    cJSON *pod;

    /* no completion index */
    pod = job_pod(-1, cfg_1x2, 1, NULL);
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "annotation batch.kubernetes.io/job-completion-index: missing");
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* out of range, then not a number */
    pod = job_pod(2, cfg_1x2, 1, NULL);
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "2 is not below num_machines (2)");
    wh_response_free(&resp);
    set_annotation(pod, WH_ANN_INDEX, "1x");
    run(pod, NULL, &resp);
    ASSERT_CONTAINS(resp.message, "'1x' is not a completion index");
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* no subdomain, together with the config's own error: one denial */
    pod = job_pod(0, "distributed_type: MULTI_GPU\nnum_machines: 2\nbogus_key: 1\n", 1, NULL);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(pod, "spec"), "subdomain");
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "spec.subdomain: missing");
    ASSERT_CONTAINS(resp.message, "annotation accelrun.io/config:3:1: error: bogus_key");
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* no job-name label and no ownerReference */
    pod = job_pod(0, cfg_1x2, 1, NULL);
    cJSON_DeleteItemFromObject(meta_of(pod, "labels"), WH_LABEL_JOB);
    cJSON_DeleteItemFromObject(meta_of(pod, "labels"), WH_LABEL_JOB_LEGACY);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(pod, "metadata"), "ownerReferences");
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "label batch.kubernetes.io/job-name: missing");
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* both annotations */
    pod = job_pod(0, cfg_1x2, 1, NULL);
    set_annotation(pod, WH_ANN_CONFIG_MAP, "cfg");
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "give one, not both");
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* main_process_port: 0 on one machine: core/env's reason, named */
    pod = job_pod(0, "distributed_type: MULTI_GPU\nnum_processes: 2\nmain_process_port: 0\n", 2,
                  NULL);
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message,
                    "annotation accelrun.io/config: error: layout: main_process_port: 0");
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(config_map_and_job_through_the_api)
{
    static const char bad[] = "distributed_type: MULTI_GPU\nnum_machines: 2\nnum_procs: 2\n";
    struct fake_api api = {cfg_1x2, "", 2, WH_JOB_INDEXED, NULL, 0, 0, "", "", ""};
    struct wh_fetch fetch = {fake_configmap, fake_job, &api};
    struct wh_opts opts = {NULL, 0, &fetch};
    struct wh_response resp;
    cJSON *pod = job_pod(1, NULL, 1, NULL);

    /* no API server: denied, saying so */
    set_annotation(pod, WH_ANN_CONFIG_MAP, "train-cfg");
    run(pod, NULL, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "no API server is configured");
    ASSERT_CONTAINS(resp.message, "ConfigMap ml/train-cfg");
    wh_response_free(&resp);
    /* read: default key, the pod's namespace; the Job checked */
    run(pod, &opts, &resp);
    ASSERT(resp.allowed);
    ASSERT_INT_EQ(api.cm_calls, 1);
    ASSERT_INT_EQ(api.job_calls, 1);
    ASSERT_STR_EQ(api.ns, "ml");
    ASSERT_STR_EQ(api.name, "train-cfg");
    ASSERT_STR_EQ(api.key, WH_CONFIG_MAP_KEY);
    ASSERT(!has_warning(&resp, "not checked"));
    apply_and_rerun(pod, &resp, &opts);
    ASSERT_STR_EQ(env_value(pod, 0, "RANK"), "1");
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* NAME/KEY; an invalid config is located in the ConfigMap */
    pod = job_pod(1, NULL, 1, NULL);
    set_annotation(pod, WH_ANN_CONFIG_MAP, "train-cfg/fsdp.yaml");
    api.cm_data = bad;
    run(pod, &opts, &resp);
    ASSERT(!resp.allowed);
    ASSERT_STR_EQ(api.key, "fsdp.yaml");
    ASSERT_CONTAINS(resp.message, "configmap train-cfg/fsdp.yaml:3:1: error: num_procs");
    wh_response_free(&resp);
    /* the read fails: what and why */
    api.cm_data = NULL;
    api.cm_why = "403 Forbidden: add a Role rule {apiGroups: [\"\"], resources: [configmaps], "
                 "verbs: [get]}";
    run(pod, &opts, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "couldn't read key fsdp.yaml of ConfigMap ml/train-cfg: 403");
    wh_response_free(&resp);
    /* a name that cannot be a ConfigMap's never reaches the API */
    api.cm_calls = 0;
    set_annotation(pod, WH_ANN_CONFIG_MAP, "../secrets/x");
    run(pod, &opts, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "is not NAME or NAME/KEY");
    ASSERT_INT_EQ(api.cm_calls, 0);
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* the Job: completions against num_machines (located), not Indexed, unreadable */
    api.cm_data = cfg_1x2;
    pod = job_pod(1, cfg_1x2, 1, NULL);
    api.completions = 3;
    run(pod, &opts, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "annotation accelrun.io/config:3:15: error: num_machines: 2, but "
                                  "the job has 3 nodes");
    wh_response_free(&resp);
    api.completions = 2;
    api.mode = WH_JOB_NOT_INDEXED;
    run(pod, &opts, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "Job ml/train: completionMode is not Indexed");
    wh_response_free(&resp);
    api.job_why = "timed out after 2 s";
    run(pod, &opts, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "couldn't read Job ml/train: timed out after 2 s");
    wh_response_free(&resp);
    /* an API server before v1.21 drops completionMode: allowed, warned */
    api.mode = WH_JOB_MODE_UNKNOWN;
    api.job_why = NULL;
    run(pod, &opts, &resp);
    ASSERT(resp.allowed);
    ASSERT(has_warning(&resp, "Job ml/train has no spec.completionMode (an API server before "
                              "v1.21)"));
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* no num_machines: the Job's completions are the node count */
    api.mode = WH_JOB_INDEXED;
    api.completions = 3;
    pod = job_pod(2, "distributed_type: MULTI_GPU\n", 1, NULL);
    run(pod, &opts, &resp);
    ASSERT(resp.allowed);
    apply_and_rerun(pod, &resp, &opts);
    ASSERT_STR_EQ(env_value(pod, 0, "WORLD_SIZE"), "3");
    ASSERT_STR_EQ(env_value(pod, 0, "RANK"), "2");
    wh_response_free(&resp);
    cJSON_Delete(pod);
}

TEST(site_policy_and_ports)
{
    static const char site_text[] = "defaults:\n"
                                    "  mixed_precision: fp16\n"
                                    "enforce:\n"
                                    "  dynamo_config:\n"
                                    "    dynamo_backend: 'NO'\n"
                                    "accelrun:\n"
                                    "  port_base: 23456\n"
                                    "  env:\n"
                                    "    NCCL_DEBUG: WARN\n";
    struct accel_site site;
    struct accel_diags d;
    struct accel_error err;
    struct wh_opts opts = {&site, 0, NULL};
    struct accel_layout lay = {2, 1, 1, 0, -1, 0, "train-0.train.ml.svc", 23456, 0};
    struct accel_env want;
    struct wh_response resp;
    cJSON *pod;

    accel_diags_init(&d);
    ASSERT_OK(
        accel_site_load_buffer(&site, "site.yaml", site_text, strlen(site_text), 0, &d, &err));
    accel_diags_free(&d);
    /* user bf16 over the site default; the site's port and NCCL variable */
    pod = job_pod(1, cfg_1x2, 1, NULL);
    run(pod, &opts, &resp);
    ASSERT(resp.allowed);
    apply_and_rerun(pod, &resp, &opts);
    ASSERT_STR_EQ(env_value(pod, 0, "MASTER_PORT"), "23456");
    ASSERT_STR_EQ(env_value(pod, 0, "NCCL_DEBUG"), "WARN");
    ASSERT_STR_EQ(env_value(pod, 0, "ACCELERATE_MIXED_PRECISION"), "bf16");
    expected_env(cfg_1x2, &lay, &site, &want);
    same_as_env_build(pod, 0, &want);
    accel_env_free(&want);
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* main_process_port wins over the site's */
    pod = job_pod(0, "distributed_type: MULTI_GPU\nnum_machines: 2\nmain_process_port: 31000\n", 1,
                  NULL);
    run(pod, &opts, &resp);
    apply_and_rerun(pod, &resp, &opts);
    ASSERT_STR_EQ(env_value(pod, 0, "MASTER_PORT"), "31000");
    ASSERT_STR_EQ(env_value(pod, 0, "ACCELERATE_MIXED_PRECISION"), "fp16"); /* site default */
    wh_response_free(&resp);
    cJSON_Delete(pod);
    /* contradicting an enforced key: denied, naming both places */
    pod = job_pod(0,
                  "distributed_type: MULTI_GPU\nnum_machines: 2\ndynamo_config:\n"
                  "  dynamo_backend: INDUCTOR\n",
                  1, NULL);
    run(pod, &opts, &resp);
    ASSERT(!resp.allowed);
    ASSERT_CONTAINS(resp.message, "annotation accelrun.io/config:4:");
    ASSERT_CONTAINS(resp.message, "site.yaml");
    wh_response_free(&resp);
    cJSON_Delete(pod);
    accel_site_free(&site);
}

TEST(not_a_pod_create)
{
    static const char update[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
        "{\"uid\":\"u\",\"operation\":\"UPDATE\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":"
        "\"v1\"}}}";
    static const char deploy[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
        "{\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":{\"kind\":\"Deployment\","
        "\"apiVersion\":\"apps/v1\"}}}";
    struct wh_review rv;
    struct wh_response resp;
    struct accel_error err;

    ASSERT_OK(wh_review_decode(&rv, update, strlen(update), &err));
    ASSERT(rv.pod == NULL);
    ASSERT_OK(wh_mutate(&rv, NULL, &resp, &err));
    ASSERT(resp.allowed && resp.patch == NULL && resp.nwarnings == 0);
    wh_response_free(&resp);
    wh_review_free(&rv);
    ASSERT_OK(wh_review_decode(&rv, deploy, strlen(deploy), &err));
    ASSERT(rv.pod == NULL);
    ASSERT_OK(wh_mutate(&rv, NULL, &resp, &err));
    ASSERT(resp.allowed && resp.patch == NULL);
    ASSERT(has_warning(&resp, "is not a v1 Pod"));
    wh_response_free(&resp);
    wh_review_free(&rv);
}

/* A review whose request is `request` (JSON text of its members). */
static char *envelope(const char *api, const char *kind, const char *request)
{
    size_t n = strlen(request) + 256;
    char *s = malloc(n);

    snprintf(s, n, "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"request\":{%s}}", api, kind, request);
    return s;
}

TEST(bad_requests)
{
    static const struct {
        const char *api, *kind, *request;
        enum accel_err rc;
        const char *msg;
    } rows[] = {
        {"admission.k8s.io/v1beta1", "AdmissionReview", "\"uid\":\"u\"", ACCEL_EINVAL,
         "apiVersion: 'admission.k8s.io/v1beta1' is not admission.k8s.io/v1"},
        {"admission.k8s.io/v1", "AdmissionRequest", "\"uid\":\"u\"", ACCEL_EINVAL,
         "kind: 'AdmissionRequest', expected AdmissionReview"},
        {"admission.k8s.io/v1", "AdmissionReview", "\"operation\":\"CREATE\"", ACCEL_EINVAL,
         "request.uid: missing"},
        {"admission.k8s.io/v1", "AdmissionReview", "\"uid\":7", ACCEL_EINVAL,
         "request.uid: not a string"},
        {"admission.k8s.io/v1", "AdmissionReview", "\"uid\":\"u\"", ACCEL_EINVAL,
         "request.operation: missing"},
        {"admission.k8s.io/v1", "AdmissionReview", "\"uid\":\"u\",\"operation\":\"CREATE\"",
         ACCEL_EINVAL, "request.object: missing on a CREATE"},
        {"admission.k8s.io/v1", "AdmissionReview",
         "\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":[]", ACCEL_EINVAL,
         "request.object: not an object"},
        {"admission.k8s.io/v1", "AdmissionReview",
         "\"uid\":\"u\",\"operation\":\"CREATE\",\"dryRun\":\"yes\"", ACCEL_EINVAL,
         "request.dryRun: not a boolean"},
    };
    static const struct {
        const char *body;
        enum accel_err rc;
        const char *msg;
    } raw[] = {
        {"not json", ACCEL_EPARSE, "body: not JSON"},
        {"{\"apiVersion\":", ACCEL_EPARSE, "body: not JSON"},
        {"{} {}", ACCEL_EPARSE, "body: bytes after the JSON value (at byte 3)"},
        {"[1,2]", ACCEL_EINVAL, "body: not a JSON object"},
        {"{\"kind\":\"AdmissionReview\"}", ACCEL_EINVAL, "apiVersion: missing"},
        {"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", ACCEL_EINVAL,
         "request: missing"},
        {"", ACCEL_EPARSE, "body: empty"},
    };
    struct wh_review rv;
    struct accel_error err;

    for (size_t i = 0; i < N_OF(rows); i++) {
        char *b = envelope(rows[i].api, rows[i].kind, rows[i].request);
        accel_error_clear(&err);
        ASSERT_INT_EQ(wh_review_decode(&rv, b, strlen(b), &err), rows[i].rc);
        ASSERT_CONTAINS(err.msg, rows[i].msg);
        ASSERT_INT_EQ(wh_http_status(rows[i].rc), 400);
        ASSERT(rv.root == NULL);
        wh_review_free(&rv);
        free(b);
    }
    for (size_t i = 0; i < N_OF(raw); i++) {
        accel_error_clear(&err);
        ASSERT_INT_EQ(wh_review_decode(&rv, raw[i].body, strlen(raw[i].body), &err), raw[i].rc);
        ASSERT_CONTAINS(err.msg, raw[i].msg);
        ASSERT_INT_EQ(wh_http_status(raw[i].rc), 400);
        wh_review_free(&rv);
    }
    ASSERT_INT_EQ(wh_http_status(ACCEL_ETOOBIG), 413);
    ASSERT_INT_EQ(wh_http_status(ACCEL_ENOMEM), 500);
    ASSERT_INT_EQ(wh_http_status(ACCEL_OK), 200);
}

TEST(caps)
{
    struct wh_review rv;
    struct accel_error err;
    size_t n = WH_MAX_BODY + 1;
    char *big = malloc(n + 1), *deep, *b;
    cJSON *pod;

    /* the body: checked before any parsing */
    memset(big, ' ', n);
    big[n] = '\0';
    ASSERT_INT_EQ(wh_review_decode(&rv, big, n, &err), ACCEL_ETOOBIG);
    ASSERT_CONTAINS(err.msg, "body: 3145729 bytes, over the cap of 3145728");
    ASSERT_INT_EQ(wh_http_status(ACCEL_ETOOBIG), 413);
    /* just under the cap still decodes (padding is whitespace) */
    b = review_of(pod = job_pod(0, NULL, -1, NULL), "u");
    memcpy(big, b, strlen(b));
    ASSERT_OK(wh_review_decode(&rv, big, WH_MAX_BODY, &err));
    wh_review_free(&rv);
    cJSON_free(b);
    /* nesting */
    deep = malloc(2 * WH_MAX_DEPTH + 8);
    memset(deep, '[', WH_MAX_DEPTH + 1);
    memset(deep + WH_MAX_DEPTH + 1, ']', WH_MAX_DEPTH + 1);
    ASSERT_INT_EQ(wh_review_decode(&rv, deep, 2 * WH_MAX_DEPTH + 2, &err), ACCEL_ETOOBIG);
    ASSERT_CONTAINS(err.msg, "body: nested deeper than 64");
    /* brackets inside strings do not count */
    memset(big, '[', 1000);
    big[0] = '"';
    big[999] = '"';
    ASSERT_INT_EQ(wh_review_decode(&rv, big, 1000, &err), ACCEL_EINVAL);
    ASSERT_CONTAINS(err.msg, "body: not a JSON object");
    /* a string over the cap, named by its path */
    memset(big, 'x', WH_MAX_STRING + 1);
    big[WH_MAX_STRING + 1] = '\0';
    set_annotation(pod, "note.example.com/long", big);
    b = review_of(pod, "u");
    accel_error_clear(&err);
    ASSERT_INT_EQ(wh_review_decode(&rv, b, strlen(b), &err), ACCEL_ETOOBIG);
    ASSERT_CONTAINS(err.msg,
                    "request.object.metadata.annotations.note.example.com/long: a string of 262145 "
                    "bytes, over the cap of 262144");
    cJSON_free(b);
    set_annotation(pod, "note.example.com/long", NULL);
    /* a key over the cap: the object holding it is named */
    set_annotation(pod, big, "v");
    b = review_of(pod, "u");
    ASSERT_INT_EQ(wh_review_decode(&rv, b, strlen(b), &err), ACCEL_ETOOBIG);
    ASSERT_CONTAINS(err.msg, "request.object.metadata.annotations: a key of 262145 bytes, over the "
                             "cap of 262144");
    cJSON_free(b);
    set_annotation(pod, big, NULL);
    /* inside an array: its index */
    {
        cJSON *c0 = cJSON_GetArrayItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "spec"), "containers"), 0);
        cJSON *args = cJSON_AddArrayToObject(c0, "args");
        ASSERT(args != NULL);
        cJSON_AddItemToArray(args, cJSON_CreateString("--model"));
        cJSON_AddItemToArray(args, cJSON_CreateString(big));
        b = review_of(pod, "u");
        ASSERT_INT_EQ(wh_review_decode(&rv, b, strlen(b), &err), ACCEL_ETOOBIG);
        ASSERT_CONTAINS(err.msg, "request.object.spec.containers[0].args[1]: a string of 262145 "
                                 "bytes");
        cJSON_free(b);
        cJSON_DeleteItemFromObject(c0, "args");
    }
    /* the uid */
    set_annotation(pod, "note.example.com/long", NULL);
    memset(big, 'u', 200);
    big[200] = '\0';
    b = review_of(pod, big);
    ASSERT_INT_EQ(wh_review_decode(&rv, b, strlen(b), &err), ACCEL_EINVAL);
    ASSERT_CONTAINS(err.msg, "request.uid: 200 bytes, more than 128");
    cJSON_free(b);
    cJSON_Delete(pod);
    free(deep);
    free(big);
}

/* Decodes standard base64; returns the bytes (caller frees). */
static char *unbase64(const char *s)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(s), o = 0;
    char *out = malloc(n + 1);

    ASSERT(n % 4 == 0);
    for (size_t i = 0; i < n; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            const char *p = strchr(tab, s[i + k]);
            if (s[i + k] == '=') {
                pad++;
                v <<= 6;
                continue;
            }
            ASSERT(p != NULL && s[i + k] != '\0' && pad == 0);
            v = (v << 6) | (unsigned)(p - tab);
        }
        out[o++] = (char)(v >> 16);
        if (pad < 2)
            out[o++] = (char)(v >> 8);
        if (pad < 1)
            out[o++] = (char)v;
    }
    out[o] = '\0';
    return out;
}

TEST(response_encoding)
{
    /* RFC 4648 §10 test vectors */
    static const char *const vec[][2] = {{"", ""},
                                         {"f", "Zg=="},
                                         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},
                                         {"foob", "Zm9vYg=="},
                                         {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    struct wh_response resp;
    struct accel_error err;
    struct accel_buf b;
    char *out, *raw;
    size_t len;
    cJSON *back, *r, *w;

    for (size_t i = 0; i < N_OF(vec); i++) {
        accel_buf_init(&b, 64);
        ASSERT_OK(wh_base64(&b, (const unsigned char *)vec[i][0], strlen(vec[i][0])));
        ASSERT_STR_EQ(accel_buf_str(&b), vec[i][1]);
        accel_buf_free(&b);
    }
    /* past the encoder's 768-byte blocks, appended to what the buffer held;
     * over the cap: ETOOBIG and the buffer as it was */
    raw = malloc(300 * 6 + 1);
    out = malloc(300 * 8 + 3);
    for (size_t i = 0; i < 300; i++) {
        memcpy(raw + 6 * i, "foobar", 6);
        memcpy(out + 2 + 8 * i, "Zm9vYmFy", 8);
    }
    memcpy(out, "p:", 2);
    out[2 + 300 * 8] = '\0';
    accel_buf_init(&b, 2 + 300 * 8);
    ASSERT_OK(accel_buf_puts(&b, "p:"));
    ASSERT_OK(wh_base64(&b, (const unsigned char *)raw, 300 * 6));
    ASSERT_STR_EQ(accel_buf_str(&b), out);
    accel_buf_reset(&b);
    ASSERT_OK(accel_buf_puts(&b, "p:"));
    ASSERT_INT_EQ(wh_base64(&b, (const unsigned char *)raw, 300 * 6 + 1), ACCEL_ETOOBIG);
    ASSERT_STR_EQ(accel_buf_str(&b), "p:");
    accel_buf_free(&b);
    free(raw);
    free(out);
    /* allowed with a patch and a warning */
    wh_response_init(&resp);
    resp.patch = strdup("[{\"op\":\"add\",\"path\":\"/spec/containers/0/env\",\"value\":[]}]");
    resp.nops = 1;
    ASSERT_OK(wh_response_warn(&resp, "a warning with ünïcode"));
    ASSERT_OK(wh_response_encode("705ab4f5-6393", &resp, &out, &len, &err));
    ASSERT_INT_EQ(len, strlen(out));
    back = cJSON_Parse(out);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(back, "apiVersion")),
                  "admission.k8s.io/v1");
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(back, "kind")), "AdmissionReview");
    r = cJSON_GetObjectItem(back, "response");
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(r, "uid")), "705ab4f5-6393");
    ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(r, "allowed")));
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(r, "patchType")), "JSONPatch");
    raw = unbase64(cJSON_GetStringValue(cJSON_GetObjectItem(r, "patch")));
    ASSERT_STR_EQ(raw, resp.patch);
    free(raw);
    ASSERT(cJSON_GetObjectItem(r, "status") == NULL);
    w = cJSON_GetObjectItem(r, "warnings");
    ASSERT_INT_EQ(cJSON_GetArraySize(w), 1);
    ASSERT_STR_EQ(cJSON_GetStringValue(cJSON_GetArrayItem(w, 0)), "a warning with ünïcode");
    cJSON_Delete(back);
    accel_free(out);
    wh_response_free(&resp);
    /* a patch whose response just fits the cap (the size estimate does not) */
    wh_response_init(&resp);
    resp.patch = malloc(WH_MAX_RESPONSE / 4 * 3 - 120 + 1);
    memset(resp.patch, 'p', WH_MAX_RESPONSE / 4 * 3 - 120);
    resp.patch[WH_MAX_RESPONSE / 4 * 3 - 120] = '\0';
    resp.nops = 1;
    ASSERT_OK(wh_response_encode("u", &resp, &out, &len, &err));
    ASSERT(len <= WH_MAX_RESPONSE && len > WH_MAX_RESPONSE - 100);
    accel_free(out);
    resp.patch[0] = '\0';
    free(resp.patch);
    resp.patch = malloc(WH_MAX_RESPONSE / 4 * 3 + 1);
    memset(resp.patch, 'p', WH_MAX_RESPONSE / 4 * 3);
    resp.patch[WH_MAX_RESPONSE / 4 * 3] = '\0';
    ASSERT_INT_EQ(wh_response_encode("u", &resp, &out, &len, &err), ACCEL_ETOOBIG);
    ASSERT_CONTAINS(err.msg, "over the cap");
    wh_response_free(&resp);
    /* allowed, nothing to patch: neither patch nor patchType */
    wh_response_init(&resp);
    ASSERT_OK(wh_response_encode("u", &resp, &out, &len, &err));
    ASSERT_STR_EQ(out, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                       "\"response\":{\"uid\":\"u\",\"allowed\":true}}");
    accel_free(out);
    /* a denial drops a patch made before it */
    resp.patch = strdup("[]");
    ASSERT_OK(wh_response_deny(&resp, "no: %d", 1));
    ASSERT(resp.patch == NULL);
    ASSERT_OK(wh_response_encode("u", &resp, &out, &len, &err));
    ASSERT_STR_EQ(out, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                       "\"response\":{\"uid\":\"u\",\"allowed\":false,\"status\":{\"code\":403,"
                       "\"message\":\"no: 1\"}}}");
    accel_free(out);
    wh_response_free(&resp);
}

/* wh_json_quote writes what cJSON's printer writes, byte for byte (the
 * patch and the response are written without it, the goldens compare the
 * bytes): every byte value alone and inside text, and a long mixed string */
TEST(json_quote_matches_cjson)
{
    char s[600];
    struct accel_buf b;
    size_t k = 0;

    for (int c = 1; c < 256; c++) {
        const char one[] = {(char)c, '\0'}, mid[] = {'a', (char)c, 'b', '\0'};
        const char *cases[] = {one, mid};
        for (size_t i = 0; i < N_OF(cases); i++) {
            cJSON *str = cJSON_CreateString(cases[i]);
            char *want = cJSON_PrintUnformatted(str);
            accel_buf_init(&b, 64);
            ASSERT_OK(wh_json_quote(&b, cases[i]));
            if (strcmp(accel_buf_str(&b), want) != 0)
                test_fail(__FILE__, __LINE__, "byte 0x%02x: %s, cJSON %s", c, accel_buf_str(&b),
                          want);
            accel_buf_free(&b);
            cJSON_free(want);
            cJSON_Delete(str);
        }
    }
    for (int c = 1; k + 1 < sizeof(s); c = c % 255 + 1)
        s[k++] = (char)(c * 7 % 255 + 1);
    s[k] = '\0';
    {
        cJSON *str = cJSON_CreateString(s);
        char *want = cJSON_PrintUnformatted(str);
        accel_buf_init(&b, 4096);
        ASSERT_OK(accel_buf_puts(&b, "x"));
        ASSERT_OK(wh_json_quote(&b, s));
        ASSERT(b.data[0] == 'x');
        ASSERT_STR_EQ(b.data + 1, want);
        ASSERT_OK(wh_json_quote(&b, ""));
        ASSERT_STR_EQ(b.data + b.len - 2, "\"\"");
        accel_buf_free(&b);
        cJSON_free(want);
        cJSON_Delete(str);
    }
    /* past the cap: ETOOBIG */
    accel_buf_init(&b, 8);
    ASSERT_INT_EQ(wh_json_quote(&b, "0123456789"), ACCEL_ETOOBIG);
    accel_buf_free(&b);
}

/* ---------------------------------------------------------------- the config cache */

/* The response bytes of `pod`'s review under opts. */
static char *answer(const cJSON *pod, const struct wh_opts *opts)
{
    char *text = review_of(pod, "u-1"), *out;
    struct wh_review rv;
    struct wh_response resp;
    struct accel_error err;
    size_t len;

    accel_error_clear(&err);
    if (wh_review_decode(&rv, text, strlen(text), &err) != ACCEL_OK ||
        wh_mutate(&rv, opts, &resp, &err) != ACCEL_OK ||
        wh_response_encode(rv.uid, &resp, &out, &len, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "%s", err.msg);
    wh_response_free(&resp);
    wh_review_free(&rv);
    cJSON_free(text);
    return out;
}

static const char cfg_typo[] = "distributed_type: MULTI_GPU\n"
                               "num_machines: 2\n"
                               "mixed_precison: bf16\n";

/* The pods of the cases below: two ranks of two configs, and a refused one. */
static cJSON *cache_pod(int k)
{
    static const char *const cfgs[] = {cfg_1x2, cfg_fsdp_4x2, cfg_typo};
    return job_pod(k % 2, cfgs[(k / 2) % 3], k % 3 == 0 ? 4 : -1, k % 4 == 1 ? "A=1" : NULL);
}
#define CACHE_PODS 12

struct cache_run {
    const struct wh_opts *opts;
    char **want; /* CACHE_PODS answers without a cache */
    unsigned seed;
    int bad;
};

static void *cache_thread(void *arg)
{
    struct cache_run *r = arg;

    for (int i = 0; i < 150; i++) {
        int k = (int)(rand_r(&r->seed) % CACHE_PODS);
        cJSON *pod = cache_pod(k);
        char *got = answer(pod, r->opts);
        r->bad += strcmp(got, r->want[k]) != 0;
        accel_free(got);
        cJSON_Delete(pod);
    }
    return NULL;
}

/* With the cache every answer is byte for byte the uncached one (allowed,
 * patched, warned or denied), whatever was loaded before, on one thread or
 * four; a new site generation, node count or GPU limit is a miss; an entry
 * held by a review outlives its eviction; a config too large is never
 * kept. */
TEST(config_cache)
{
    struct wh_opts plain = {NULL, 0, NULL, NULL, 0}, cached = plain;
    struct accel_cfg_opts copts = {0, NULL, 2, 0};
    struct wh_cfg_key key = {"annotation accelrun.io/config", cfg_1x2, sizeof(cfg_1x2) - 1, &copts,
                             7};
    const struct wh_cfg_entry *held, *e;
    char *want[CACHE_PODS], *big;
    unsigned long long hits, misses;
    struct cache_run runs[4];
    pthread_t th[4];
    struct accel_site site;
    char same_len[sizeof(cfg_1x2)];
    size_t n;

    accel_site_init(&site);
    memcpy(same_len, cfg_1x2, sizeof(cfg_1x2));
    memcpy(strstr(same_len, "bf16"), "fp16", 4);
    ASSERT_INT_EQ(strlen(same_len), strlen(cfg_1x2));

    for (int k = 0; k < CACHE_PODS; k++) {
        cJSON *pod = cache_pod(k);
        want[k] = answer(pod, &plain);
        cJSON_Delete(pod);
    }
    ASSERT(strstr(want[4], "mixed_precison") != NULL && strstr(want[4], "\"allowed\":false"));
    ASSERT(strstr(want[0], "\"patch\"") != NULL);
    /* one thread: twice over every pod */
    ASSERT_OK(wh_cfg_cache_new(&cached.cache, 2));
    cached.site_gen = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < CACHE_PODS; k++) {
            cJSON *pod = cache_pod(k);
            char *got = answer(pod, &cached);
            if (strcmp(got, want[k]) != 0)
                test_fail(__FILE__, __LINE__, "pod %d, pass %d: %s\nwithout the cache: %s", k, pass,
                          got, want[k]);
            accel_free(got);
            cJSON_Delete(pod);
        }
    wh_cfg_cache_stats(cached.cache, &hits, &misses);
    test_note("one thread, 2 slots, 24 reviews: %llu hits, %llu misses", hits, misses);
    ASSERT_INT_EQ(hits + misses, 2 * CACHE_PODS);
    ASSERT(hits > 0 && misses >= 4);
    /* four threads */
    for (int t = 0; t < 4; t++) {
        runs[t] = (struct cache_run){&cached, want, (unsigned)t * 7919u + 1, 0};
        ASSERT_INT_EQ(pthread_create(&th[t], NULL, cache_thread, &runs[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        ASSERT_INT_EQ(pthread_join(th[t], NULL), 0);
        ASSERT_INT_EQ(runs[t].bad, 0);
    }
    wh_cfg_cache_free(cached.cache);

    /* the key: each part of it */
    ASSERT_OK(wh_cfg_cache_new(&cached.cache, 8));
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &held));
    ASSERT_INT_EQ(held->rc, ACCEL_OK);
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e));
    ASSERT(e == held);
    wh_cfg_release(e);
    key.site_gen = 8;
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e));
    ASSERT(e != held);
    wh_cfg_release(e);
    key.site_gen = 7;
    copts.nodes = 3; /* a Job of 3: the config's 2 machines is now an error */
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e));
    ASSERT(e != held && e->diags.errors > 0);
    wh_cfg_release(e);
    copts.nodes = 2;
    copts.gpus_per_node = 8;
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e));
    ASSERT(e != held);
    wh_cfg_release(e);
    copts.gpus_per_node = 0;
    key.name = "configmap ml/c/config.yaml";
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e));
    ASSERT(e != held);
    wh_cfg_release(e);
    key.name = "annotation accelrun.io/config";
    copts.version = held->cfg.num_machines; /* any other version number */
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e));
    ASSERT(e != held);
    wh_cfg_release(e);
    copts.version = 0;
    copts.site = &site;
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e));
    ASSERT(e != held);
    wh_cfg_release(e);
    copts.site = NULL;
    key.text = same_len; /* one byte differs */
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e));
    ASSERT(e != held);
    ASSERT_STR_EQ(e->cfg.mixed_precision, "fp16");
    wh_cfg_release(e);
    key.text = cfg_1x2;
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e)); /* and the first again: a hit */
    ASSERT(e == held);
    wh_cfg_release(e);
    wh_cfg_cache_stats(cached.cache, &hits, &misses);
    ASSERT_INT_EQ(hits, 2);
    ASSERT_INT_EQ(misses, 8);
    wh_cfg_cache_free(cached.cache);
    /* held past the cache's end, and past its eviction */
    ASSERT_INT_EQ(held->cfg.num_machines, 2);
    wh_cfg_release(held);

    ASSERT_OK(wh_cfg_cache_new(&cached.cache, 1));
    key.name = "annotation accelrun.io/config";
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &held));
    key.text = cfg_fsdp_4x2;
    key.len = sizeof(cfg_fsdp_4x2) - 1;
    ASSERT_OK(wh_cfg_get(cached.cache, &key, &e)); /* evicts the first */
    ASSERT_INT_EQ(held->cfg.num_processes, 2);
    ASSERT_INT_EQ(e->cfg.num_processes, 8);
    wh_cfg_release(e);
    wh_cfg_release(held);
    /* over WH_CFG_CACHE_MAX_TEXT: loaded each time */
    n = WH_CFG_CACHE_MAX_TEXT + 100;
    big = malloc(n + 1);
    memset(big, '#', n);
    memcpy(big + n - sizeof(cfg_1x2), "\n", 1);
    memcpy(big + n - sizeof(cfg_1x2) + 1, cfg_1x2, sizeof(cfg_1x2) - 1);
    big[n] = '\0';
    key.text = big;
    key.len = n;
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(wh_cfg_get(cached.cache, &key, &e));
        ASSERT_INT_EQ(e->rc, ACCEL_OK);
        ASSERT_INT_EQ(e->cfg.num_machines, 2);
        ASSERT(!e->cached);
        wh_cfg_release(e);
    }
    free(big);
    wh_cfg_cache_stats(cached.cache, &hits, &misses);
    ASSERT_INT_EQ(hits, 0);
    wh_cfg_cache_free(cached.cache);
    /* no cache at all */
    key.text = cfg_1x2;
    key.len = sizeof(cfg_1x2) - 1;
    ASSERT_OK(wh_cfg_get(NULL, &key, &e));
    ASSERT_INT_EQ(e->cfg.num_machines, 2);
    wh_cfg_release(e);
    for (int k = 0; k < CACHE_PODS; k++)
        accel_free(want[k]);
    accel_site_free(&site);
}

/* Every allocation of a review with the cache failed in turn: the review
 * says out of memory (or did not need it) and leaks nothing, and the next
 * review with the same cache answers as if nothing had happened: a load cut
 * short by a failure (a finding without its value) is never kept. */
TEST(config_cache_out_of_memory)
{
    struct wh_opts plain = {NULL, 0, NULL, NULL, 0}, cached = {NULL, 0, NULL, NULL, 1};
    cJSON *pods[2] = {job_pod(1, cfg_1x2, -1, NULL), job_pod(0, cfg_typo, -1, NULL)};
    char *text[2], *want[2];
    long live;
    unsigned long k;

    /* a value in the finding: "got string 'x'" */
    set_annotation(pods[1], WH_ANN_CONFIG, "num_machines: x\n");
    for (int i = 0; i < 2; i++) {
        text[i] = review_of(pods[i], "u-1");
        want[i] = answer(pods[i], &plain);
    }
    test_alloc_install();
    live = test_alloc_live();
    for (int i = 0; i < 2; i++)
        for (k = 1; k < 100000; k++) {
            struct wh_review rv;
            struct wh_response resp;
            struct accel_error err;
            enum accel_err rc;
            char *again;

            ASSERT_OK(wh_cfg_cache_new(&cached.cache, 4));
            ASSERT_OK(wh_review_decode(&rv, text[i], strlen(text[i]), &err));
            test_alloc_fail_at(k);
            rc = wh_mutate(&rv, &cached, &resp, &err);
            test_alloc_fail_at(0);
            wh_response_free(&resp);
            wh_review_free(&rv);
            if (rc != ACCEL_OK && rc != ACCEL_ENOMEM)
                test_fail(__FILE__, __LINE__, "pod %d, allocation %lu failed: %s", i, k,
                          accel_errname(rc));
            again = answer(pods[i], &cached);
            if (strcmp(again, want[i]) != 0)
                test_fail(__FILE__, __LINE__, "pod %d, after allocation %lu failed: %s\nwant %s", i,
                          k, again, want[i]);
            accel_free(again);
            wh_cfg_cache_free(cached.cache);
            if (test_alloc_live() != live)
                test_fail(__FILE__, __LINE__, "pod %d, allocation %lu failed: %ld blocks leaked", i,
                          k, test_alloc_live() - live);
            if (rc == ACCEL_OK)
                break;
        }
    test_note("the last review's %lu allocations failed in turn", k - 1);
    ASSERT(k > 10);
    for (int i = 0; i < 2; i++) {
        accel_free(want[i]);
        cJSON_free(text[i]);
        cJSON_Delete(pods[i]);
    }
}

/* A container without env whose variables are all the device plugin's: the
 * operation begun for it is taken back, and the next container's follows
 * with the right commas. */
TEST(patch_nothing_to_add)
{
    static char v0[] = "CUDA_VISIBLE_DEVICES=0", v1[] = "NVIDIA_VISIBLE_DEVICES=all",
                v2[] = "RANK=1";
    char *const vars[] = {v0, v1}, *const more[] = {v2};
    struct wh_container c0 = {"a", 0, false, NULL, -1}, c1 = {"b", 1, false, NULL, -1};
    struct wh_response resp;
    struct accel_buf ops;
    size_t nops = 0;

    wh_response_init(&resp);
    accel_buf_init(&ops, 4096);
    ASSERT_OK(accel_buf_puts(&ops, "["));
    ASSERT_OK(wh_patch_env(&ops, &nops, &c0, vars, N_OF(vars), NULL, &resp));
    ASSERT_STR_EQ(accel_buf_str(&ops), "[");
    ASSERT_INT_EQ(nops, 0);
    ASSERT_OK(wh_patch_env(&ops, &nops, &c1, more, N_OF(more), NULL, &resp));
    ASSERT_OK(wh_patch_env(&ops, &nops, &c0, vars, N_OF(vars), NULL, &resp));
    ASSERT_OK(wh_patch_env(&ops, &nops, &c0, more, N_OF(more), NULL, &resp));
    ASSERT_OK(accel_buf_puts(&ops, "]"));
    ASSERT_STR_EQ(accel_buf_str(&ops),
                  "[{\"op\":\"add\",\"path\":\"/spec/containers/1/env\",\"value\":[{\"name\":"
                  "\"RANK\",\"value\":\"1\"}]},{\"op\":\"add\",\"path\":\"/spec/containers/0/"
                  "env\",\"value\":[{\"name\":\"RANK\",\"value\":\"1\"}]}]");
    ASSERT_INT_EQ(nops, 2);
    accel_buf_free(&ops);
    wh_response_free(&resp);
}

TEST(warning_caps)
{
    struct wh_response resp;
    char longer[600];

    wh_response_init(&resp);
    memset(longer, 'w', sizeof(longer) - 3);
    /* a 2-byte character across the cut is dropped whole */
    longer[WH_MAX_WARNING - 1] = (char)0xC3;
    longer[WH_MAX_WARNING] = (char)0xA9;
    longer[sizeof(longer) - 3] = '\0';
    ASSERT_OK(wh_response_warn(&resp, "%s", longer));
    ASSERT_INT_EQ(strlen(resp.warnings[0]), WH_MAX_WARNING - 1);
    for (int i = 1; i < 40; i++)
        ASSERT_OK(wh_response_warn(&resp, "warning %d", i));
    ASSERT_INT_EQ(resp.nwarnings, WH_MAX_WARNINGS);
    ASSERT_STR_EQ(resp.warnings[WH_MAX_WARNINGS - 2], "warning 30");
    ASSERT_STR_EQ(resp.warnings[WH_MAX_WARNINGS - 1], "accelrun: 9 more warnings not shown");
    wh_response_free(&resp);
}

TEST(pointer_escaping)
{
    static const char *const rows[][2] = {
        {"env", "env"},  {"accelrun.io/config", "accelrun.io~1config"},
        {"a~b", "a~0b"}, {"~1", "~01"},
        {"/~", "~1~0"},  {"", ""}};
    struct accel_buf b;

    for (size_t i = 0; i < N_OF(rows); i++) {
        char seg[64];
        accel_buf_init(&b, 64);
        ASSERT_OK(accel_buf_puts(&b, "/"));
        ASSERT_OK(wh_pointer_escape(&b, rows[i][0]));
        ASSERT_STR_EQ(accel_buf_str(&b) + 1, rows[i][1]);
        /* and back, by the test's applier */
        next_segment(accel_buf_str(&b), seg, sizeof(seg));
        ASSERT_STR_EQ(seg, rows[i][0]);
        accel_buf_free(&b);
    }
}

TEST(deterministic)
{
    struct wh_response a, b;
    cJSON *pod = job_pod(1, cfg_fsdp_4x2, 4, "X=1");

    run(pod, NULL, &a);
    run(pod, NULL, &b);
    ASSERT_STR_EQ(a.patch, b.patch);
    wh_response_free(&a);
    wh_response_free(&b);
    cJSON_Delete(pod);
}

/* ---------------------------------------------------------------- golden */

#define GOLDEN_DIR "tests/golden/admission"

/* The bytes of `path` (caller frees), NULL when it does not exist. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (f == NULL)
        return NULL;
    ASSERT(fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0);
    buf = malloc((size_t)n + 1);
    ASSERT(buf != NULL && fread(buf, 1, (size_t)n, f) == (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    ASSERT(f != NULL && fputs(text, f) >= 0 && fputc('\n', f) != EOF && fclose(f) == 0);
}

/* Compares `got` (plus a newline) with the file, or writes the file when
 * ACCEL_GOLDEN_WRITE=1. */
static void golden_compare(const char *path, const char *got)
{
    size_t len;
    char *want;

    if (getenv("ACCEL_GOLDEN_WRITE") != NULL && strcmp(getenv("ACCEL_GOLDEN_WRITE"), "1") == 0) {
        spit(path, got);
        return;
    }
    want = slurp(path, &len);
    if (want == NULL)
        test_fail(__FILE__, __LINE__, "%s: missing (ACCEL_GOLDEN_WRITE=1 writes it)", path);
    if (len == 0 || want[len - 1] != '\n' || strlen(got) != len - 1 ||
        memcmp(want, got, len - 1) != 0)
        test_fail(__FILE__, __LINE__, "%s differs:\n# got:  %s", path, got);
    free(want);
}

/* Every GOLDEN_DIR/CASE.request.json, decided with no API server and no
 * site: the encoded response byte for byte (CASE.response.json) and its
 * patch, decoded and indented (CASE.patch.json, present only with a patch). */
TEST(golden_admission)
{
    struct dirent **list = NULL;
    int n = scandir(GOLDEN_DIR, &list, NULL, alphasort), cases = 0;

    if (n < 0)
        SKIP("no " GOLDEN_DIR " (run from the repository root)");
    for (int i = 0; i < n; i++) {
        const char *name = list[i]->d_name, *dot = strstr(name, ".request.json");
        char path[512], base[256];
        struct wh_review rv;
        struct wh_response resp;
        struct accel_error err;
        char *body, *out, *pretty;
        size_t len;

        if (dot == NULL || dot[strlen(".request.json")] != '\0') {
            free(list[i]);
            continue;
        }
        snprintf(base, sizeof(base), "%s/%.*s", GOLDEN_DIR, (int)(dot - name), name);
        snprintf(path, sizeof(path), "%s/%s", GOLDEN_DIR, name);
        body = slurp(path, &len);
        ASSERT(body != NULL);
        if (wh_review_decode(&rv, body, len, &err) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
        ASSERT_OK(wh_mutate(&rv, NULL, &resp, &err));
        ASSERT_OK(wh_response_encode(rv.uid, &resp, &out, &len, &err));
        snprintf(path, sizeof(path), "%s.response.json", base);
        golden_compare(path, out);
        snprintf(path, sizeof(path), "%s.patch.json", base);
        if (resp.patch != NULL) {
            /* one operation a line, for readable diffs */
            cJSON *ops = cJSON_Parse(resp.patch), *op;
            struct accel_buf b;
            accel_buf_init(&b, 1u << 22);
            ASSERT_OK(accel_buf_puts(&b, "["));
            cJSON_ArrayForEach(op, ops)
            {
                pretty = cJSON_PrintUnformatted(op);
                ASSERT_OK(accel_buf_printf(&b, "%s\n%s", op == ops->child ? "" : ",", pretty));
                cJSON_free(pretty);
            }
            ASSERT_OK(accel_buf_puts(&b, "\n]"));
            golden_compare(path, accel_buf_str(&b));
            accel_buf_free(&b);
            cJSON_Delete(ops);
        } else if (access(path, F_OK) == 0 && getenv("ACCEL_GOLDEN_WRITE") == NULL)
            test_fail(__FILE__, __LINE__, "%s: no patch now, but the file is there", path);
        accel_free(out);
        wh_response_free(&resp);
        wh_review_free(&rv);
        free(body);
        free(list[i]);
        cases++;
    }
    free(list);
    ASSERT(cases >= 8);
    test_note("%d AdmissionReviews as in " GOLDEN_DIR, cases);
}

TEST_LIST(T(no_annotation_allowed_untouched), T(one_process_pod_without_env),
          T(one_process_pod_with_env), T(empty_env_array),
          T(several_containers_and_init_containers), T(containers_annotation),
          T(pod_fields_generate_name_only), T(invalid_config_denied_located),
          T(node_level_set_for_gpu_limit_4), T(cpu_and_single_process_configs),
          T(user_variable_kept_with_warning), T(never_gpu_visibility), T(host_network_dns_warning),
          T(layout_denials), T(config_map_and_job_through_the_api), T(site_policy_and_ports),
          T(not_a_pod_create), T(bad_requests), T(caps), T(response_encoding),
          T(json_quote_matches_cjson), T(config_cache), T(config_cache_out_of_memory),
          T(patch_nothing_to_add), T(warning_caps), T(pointer_escaping), T(deterministic),
          T(golden_admission))
