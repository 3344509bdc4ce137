/*
 * objects.c: the two API objects the webhook reads, decoded from the API
 * server's JSON without I/O (api.c fetches them; the fuzz target
 * tests/fuzz/fuzz_objects.c feeds them anything): a ConfigMap's data[key]
 * and a Job's spec.completions and spec.completionMode, and the message of
 * the Status object an error answer carries.
 */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "accel/alloc.h"
#include "webhook.h"

/* The body as a JSON object, or NULL with why set. */
static cJSON *object(const char *body, size_t len, const char *what, char *why, size_t whylen)
{
    cJSON *obj = cJSON_ParseWithLength(body != NULL ? body : "", len);

    if (!cJSON_IsObject(obj)) {
        snprintf(why, whylen, "the API server's answer for %s is not a JSON object", what);
        cJSON_Delete(obj);
        return NULL;
    }
    return obj;
}

int wh_configmap_value(const char *body, size_t len, const char *ns, const char *name,
                       const char *key, char **value, size_t *vlen, char *why, size_t whylen)
{
    char what[300];
    const cJSON *d, *v;
    cJSON *obj;
    int rc = -1;

    *value = NULL;
    snprintf(what, sizeof(what), "ConfigMap %s/%s", ns, name);
    if ((obj = object(body, len, what, why, whylen)) == NULL)
        return -1;
    d = cJSON_GetObjectItemCaseSensitive(obj, "data");
    v = cJSON_GetObjectItemCaseSensitive(d, key);
    if (!cJSON_IsString(v)) {
        snprintf(why, whylen, "ConfigMap %s/%s has no key %s in data%s", ns, name, key,
                 cJSON_IsObject(d) ? "" : " (it has no data)");
    } else if ((*value = accel_strdup(v->valuestring)) == NULL) {
        snprintf(why, whylen, "ConfigMap %s/%s: out of memory", ns, name);
    } else {
        *vlen = strlen(*value);
        rc = 0;
    }
    cJSON_Delete(obj);
    return rc;
}

int wh_job_spec(const char *body, size_t len, const char *ns, const char *name, long *completions,
                enum wh_job_mode *mode, char *why, size_t whylen)
{
    char what[300];
    const cJSON *spec, *n, *m;
    cJSON *obj;

    snprintf(what, sizeof(what), "Job %s/%s", ns, name);
    if ((obj = object(body, len, what, why, whylen)) == NULL)
        return -1;
    spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
    n = cJSON_GetObjectItemCaseSensitive(spec, "completions");
    m = cJSON_GetObjectItemCaseSensitive(spec, "completionMode");
    *completions = cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble < 1e9
                       ? (long)n->valuedouble
                       : -1;
    if (!cJSON_IsString(m))
        *mode = WH_JOB_MODE_UNKNOWN;
    else
        *mode = strcmp(m->valuestring, "Indexed") == 0 ? WH_JOB_INDEXED : WH_JOB_NOT_INDEXED;
    cJSON_Delete(obj);
    return 0;
}

void wh_status_message(const char *body, size_t len, char *msg, size_t size)
{
    cJSON *j = cJSON_ParseWithLength(body != NULL ? body : "", len);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");

    snprintf(msg, size, "%.300s", cJSON_IsString(m) ? m->valuestring : "");
    cJSON_Delete(j);
}
