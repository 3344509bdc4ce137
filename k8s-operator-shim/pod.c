/*
 * pod.c: the fields of a Pod object accelrun reads, with their JSON types
 * checked: namespace, name or generateName, the Job's name (label, legacy
 * label, controlling ownerReference), the completion index and the accelrun
 * annotations as written, spec.subdomain, and per container its name, its
 * env array and its nvidia.com/gpu limit.  It keeps pointers into the
 * review's tree and copies nothing; what the values mean is mutate.c's.
 * Unknown fields are ignored, as the API server's own decoder would not
 * have let them through.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "webhook.h"

/* A quantity of a countable resource: "4" or 4.  Extended resources must
 * be whole numbers (shared/reference/kubernetes.md §3); anything else is
 * reported as unreadable. */
static enum accel_err gpu_limit(const cJSON *c, const char *field, long *out,
                                struct accel_error *err)
{
    const cJSON *res, *lim, *g;
    enum accel_err rc;

    *out = -1;
    if ((rc = wh_json_member(c, "resources", cJSON_Object, field, &res, err)) != ACCEL_OK ||
        res == NULL)
        return rc;
    if ((rc = wh_json_member(res, "limits", cJSON_Object, field, &lim, err)) != ACCEL_OK ||
        lim == NULL)
        return rc;
    g = cJSON_GetObjectItemCaseSensitive(lim, WH_GPU_RESOURCE);
    if (g == NULL || cJSON_IsNull(g))
        return ACCEL_OK;
    if (cJSON_IsNumber(g) && g->valuedouble >= 0 && g->valuedouble <= 1e6 &&
        g->valuedouble == (double)(long)g->valuedouble) {
        *out = (long)g->valuedouble;
        return ACCEL_OK;
    }
    if (cJSON_IsString(g)) {
        char *end;
        long v;
        errno = 0;
        v = strtol(g->valuestring, &end, 10);
        if (errno == 0 && end != g->valuestring && *end == '\0' && v >= 0 && v <= 1000000 &&
            g->valuestring[0] >= '0' && g->valuestring[0] <= '9') {
            *out = v;
            return ACCEL_OK;
        }
    }
    return accel_error_set(err, ACCEL_EINVAL,
                           "%s.resources.limits[\"" WH_GPU_RESOURCE "\"]: not a whole number",
                           field);
}

static enum accel_err read_containers(struct wh_pod *pod, const cJSON *list, bool init,
                                      struct accel_error *err)
{
    const char *key =
        init ? "request.object.spec.initContainers" : "request.object.spec.containers";
    unsigned i = 0;

    for (const cJSON *c = list ? list->child : NULL; c != NULL; c = c->next, i++) {
        struct wh_container *w;
        char field[64];
        enum accel_err rc;

        snprintf(field, sizeof(field), "%s[%u]", key, i);
        if (pod->n == WH_MAX_CONTAINERS)
            return accel_error_set(err, ACCEL_ETOOBIG, "%s: more than %u containers", key,
                                   WH_MAX_CONTAINERS);
        if (!cJSON_IsObject(c))
            return accel_error_set(err, ACCEL_EINVAL, "%s: not an object", field);
        w = &pod->c[pod->n];
        memset(w, 0, sizeof(*w));
        w->index = i;
        w->init = init;
        if ((rc = wh_json_string(c, "name", field, &w->name, err)) != ACCEL_OK)
            return rc;
        if (w->name == NULL || w->name[0] == '\0')
            return accel_error_set(err, ACCEL_EINVAL, "%s.name: missing", field);
        if ((rc = wh_json_member(c, "env", cJSON_Array, field, &w->env, err)) != ACCEL_OK)
            return rc;
        for (const cJSON *e = w->env ? w->env->child : NULL; e != NULL; e = e->next) {
            const char *name;
            if (!cJSON_IsObject(e))
                return accel_error_set(err, ACCEL_EINVAL, "%s.env: an entry is not an object",
                                       field);
            if ((rc = wh_json_string(e, "name", field, &name, err)) != ACCEL_OK)
                return rc;
            if (name == NULL)
                return accel_error_set(err, ACCEL_EINVAL, "%s.env: an entry has no name", field);
        }
        if ((rc = gpu_limit(c, field, &w->gpus, err)) != ACCEL_OK)
            return rc;
        pod->n++;
    }
    if (!init)
        pod->nregular = pod->n;
    return ACCEL_OK;
}

/* The name of the controlling ownerReference of kind Job (batch/v1). */
static enum accel_err owner_job(const cJSON *meta, const char **out, struct accel_error *err)
{
    const cJSON *refs;
    enum accel_err rc;
    unsigned i = 0;

    *out = NULL;
    rc = wh_json_member(meta, "ownerReferences", cJSON_Array,
                        "request.object.metadata.ownerReferences", &refs, err);
    if (rc != ACCEL_OK)
        return rc;
    for (const cJSON *r = refs ? refs->child : NULL; r != NULL; r = r->next, i++) {
        const char *kind, *name, *api;
        if (!cJSON_IsObject(r))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "request.object.metadata.ownerReferences[%u]: not an object", i);
        if ((rc = wh_json_string(r, "kind", "request.object.metadata.ownerReferences[].kind", &kind,
                                 err)) != ACCEL_OK ||
            (rc = wh_json_string(r, "name", "request.object.metadata.ownerReferences[].name", &name,
                                 err)) != ACCEL_OK ||
            (rc = wh_json_string(r, "apiVersion",
                                 "request.object.metadata.ownerReferences[].apiVersion", &api,
                                 err)) != ACCEL_OK)
            return rc;
        if (kind && name && api && strcmp(kind, "Job") == 0 && strcmp(api, "batch/v1") == 0 &&
            cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "controller"))) {
            *out = name;
            return ACCEL_OK;
        }
    }
    return ACCEL_OK;
}

/* Every value of a labels or annotations map must be a string. */
static enum accel_err string_map(const cJSON *m, const char *field, struct accel_error *err)
{
    for (const cJSON *v = m ? m->child : NULL; v != NULL; v = v->next)
        if (!cJSON_IsString(v))
            return accel_error_set(err, ACCEL_EINVAL, "%s[\"%.64s\"]: not a string", field,
                                   v->string);
    return ACCEL_OK;
}

enum accel_err wh_pod_read(struct wh_pod *pod, const cJSON *object, const char *req_ns,
                           struct accel_error *err)
{
    const cJSON *meta, *ann, *lab, *spec, *cs, *ics;
    const char *ns;
    enum accel_err rc;
    size_t total;

    memset(pod, 0, sizeof(*pod));
    if ((rc = wh_json_member(object, "metadata", cJSON_Object, "request.object.metadata", &meta,
                             err)) != ACCEL_OK ||
        (rc = wh_json_member(object, "spec", cJSON_Object, "request.object.spec", &spec, err)) !=
            ACCEL_OK)
        return rc;
    if (meta == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "request.object.metadata: missing");
    if (spec == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "request.object.spec: missing");
    if ((rc = wh_json_string(meta, "namespace", "request.object.metadata.namespace", &ns, err)) !=
            ACCEL_OK ||
        (rc = wh_json_string(meta, "name", "request.object.metadata.name", &pod->name, err)) !=
            ACCEL_OK ||
        (rc = wh_json_string(meta, "generateName", "request.object.metadata.generateName",
                             &pod->generate_name, err)) != ACCEL_OK ||
        (rc = wh_json_member(meta, "annotations", cJSON_Object,
                             "request.object.metadata.annotations", &ann, err)) != ACCEL_OK ||
        (rc = wh_json_member(meta, "labels", cJSON_Object, "request.object.metadata.labels", &lab,
                             err)) != ACCEL_OK ||
        (rc = string_map(ann, "request.object.metadata.annotations", err)) != ACCEL_OK ||
        (rc = string_map(lab, "request.object.metadata.labels", err)) != ACCEL_OK ||
        (rc = owner_job(meta, &pod->owner_job, err)) != ACCEL_OK)
        return rc;
    /* request.namespace is authoritative (the object's may be empty) */
    pod->ns = req_ns && req_ns[0] ? req_ns : ns ? ns : "";
    if (lab != NULL) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(lab, WH_LABEL_JOB);
        if (j == NULL)
            j = cJSON_GetObjectItemCaseSensitive(lab, WH_LABEL_JOB_LEGACY);
        pod->job = j ? j->valuestring : NULL;
    }
    if (ann != NULL) {
        const cJSON *v;
        if ((v = cJSON_GetObjectItemCaseSensitive(ann, WH_ANN_INDEX)) != NULL)
            pod->index = v->valuestring;
        if ((v = cJSON_GetObjectItemCaseSensitive(ann, WH_ANN_CONFIG)) != NULL)
            pod->config = v->valuestring;
        if ((v = cJSON_GetObjectItemCaseSensitive(ann, WH_ANN_CONFIG_MAP)) != NULL)
            pod->config_map = v->valuestring;
        if ((v = cJSON_GetObjectItemCaseSensitive(ann, WH_ANN_CONTAINERS)) != NULL)
            pod->select = v->valuestring;
    }
    if ((rc = wh_json_string(spec, "subdomain", "request.object.spec.subdomain", &pod->subdomain,
                             err)) != ACCEL_OK)
        return rc;
    if (pod->subdomain != NULL && pod->subdomain[0] == '\0')
        pod->subdomain = NULL;
    if ((rc = wh_json_string(spec, "dnsPolicy", "request.object.spec.dnsPolicy", &pod->dns_policy,
                             err)) != ACCEL_OK)
        return rc;
    {
        const cJSON *hn = cJSON_GetObjectItemCaseSensitive(spec, "hostNetwork");
        if (hn != NULL && !cJSON_IsNull(hn) && !cJSON_IsBool(hn))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "request.object.spec.hostNetwork: not a boolean");
        pod->host_network = cJSON_IsTrue(hn);
    }
    if ((rc = wh_json_member(spec, "containers", cJSON_Array, "request.object.spec.containers", &cs,
                             err)) != ACCEL_OK ||
        (rc = wh_json_member(spec, "initContainers", cJSON_Array,
                             "request.object.spec.initContainers", &ics, err)) != ACCEL_OK)
        return rc;
    total = (size_t)cJSON_GetArraySize(cs) + (size_t)cJSON_GetArraySize(ics);
    if (total > WH_MAX_CONTAINERS)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               "request.object.spec: %zu containers, more than %u", total,
                               WH_MAX_CONTAINERS);
    pod->c = accel_calloc(total ? total : 1, sizeof(*pod->c));
    if (pod->c == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "out of memory");
    if ((rc = read_containers(pod, cs, false, err)) != ACCEL_OK ||
        (rc = read_containers(pod, ics, true, err)) != ACCEL_OK)
        return rc;
    return ACCEL_OK;
}

void wh_pod_free(struct wh_pod *pod)
{
    if (pod == NULL)
        return;
    accel_free(pod->c);
    memset(pod, 0, sizeof(*pod));
}

const cJSON *wh_container_env(const struct wh_container *c, const char *name)
{
    for (const cJSON *e = c->env ? c->env->child : NULL; e != NULL; e = e->next) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return e;
    }
    return NULL;
}
