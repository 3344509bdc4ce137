/*
 * patch.c: the RFC 6902 operations that add variables to a container's env,
 * valid against the request object whatever its env looks like
 * (shared/reference/kubernetes.md §1.6): no env → one `add .../env` with
 * the whole array (`.../env/-` would fail, "doc is missing path"); an env,
 * empty or not → one `add .../env/-` per missing name (`add .../env` would
 * replace the user's list).  A name already there is never appended twice
 * (duplicates hide each other and break server-side apply, §1.7), so a
 * second run over this patch's own output adds nothing.  Only values made
 * here go into the patch: no user subtree is re-emitted through cJSON's
 * doubles.
 */
#include <stdio.h>
#include <string.h>

#include "accel/env.h"
#include "webhook.h"

enum accel_err wh_pointer_escape(struct accel_buf *b, const char *seg)
{
    enum accel_err rc = ACCEL_OK;

    for (const char *s = seg; *s && rc == ACCEL_OK; s++) {
        if (*s == '~')
            rc = accel_buf_add(b, "~0", 2);
        else if (*s == '/')
            rc = accel_buf_add(b, "~1", 2);
        else
            rc = accel_buf_add(b, s, 1);
    }
    return rc;
}

bool wh_env_reserved(const char *name)
{
    return strcmp(name, "NVIDIA_VISIBLE_DEVICES") == 0 || strcmp(name, "CUDA_VISIBLE_DEVICES") == 0;
}

/* {"name": NAME, "value": VALUE}; env values are strings in the Pod
 * schema, whatever they look like. */
static cJSON *env_entry(const char *name, const char *value)
{
    cJSON *o = cJSON_CreateObject();

    if (o == NULL || cJSON_AddStringToObject(o, "name", name) == NULL ||
        cJSON_AddStringToObject(o, "value", value) == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* {"op": "add", "path": PATH, "value": value}; takes value (deleted on
 * failure). */
static enum accel_err add_op(cJSON *ops, const char *path, cJSON *value)
{
    cJSON *op = cJSON_CreateObject();

    if (op == NULL || cJSON_AddStringToObject(op, "op", "add") == NULL ||
        cJSON_AddStringToObject(op, "path", path) == NULL) {
        cJSON_Delete(op);
        cJSON_Delete(value);
        return ACCEL_ENOMEM;
    }
    cJSON_AddItemToObject(op, "value", value);
    cJSON_AddItemToArray(ops, op);
    return ACCEL_OK;
}

/* Compares an existing entry with NAME=VALUE: 1 the same literal value, 0
 * another value or a valueFrom. */
static int same_value(const cJSON *entry, const char *value)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(entry, "value");

    if (cJSON_GetObjectItemCaseSensitive(entry, "valueFrom") != NULL)
        return 0;
    if (v == NULL || cJSON_IsNull(v))
        return value[0] == '\0';
    return cJSON_IsString(v) && strcmp(v->valuestring, value) == 0;
}

enum accel_err wh_patch_env(cJSON *ops, const struct wh_container *c, char *const *vars, size_t n,
                            const struct accel_site *site, struct wh_response *resp)
{
    char base[64];
    cJSON *list = NULL;
    enum accel_err rc = ACCEL_OK;

    snprintf(base, sizeof(base), "/spec/containers/%u/env", c->index);
    if (c->env == NULL && (list = cJSON_CreateArray()) == NULL)
        return ACCEL_ENOMEM;
    for (size_t i = 0; i < n && rc == ACCEL_OK; i++) {
        const char *eq = strchr(vars[i], '=');
        char name[ACCEL_MAX_ENV_NAME + 1];
        const cJSON *have;
        cJSON *e;

        if (eq == NULL || (size_t)(eq - vars[i]) > ACCEL_MAX_ENV_NAME)
            continue;
        memcpy(name, vars[i], (size_t)(eq - vars[i]));
        name[eq - vars[i]] = '\0';
        if (wh_env_reserved(name))
            continue;
        have = wh_container_env(c, name);
        if (have != NULL) {
            if (!same_value(have, eq + 1) && !accel_env_user_wins(name, site))
                rc = wh_response_warn(resp,
                                      "container %s: %s is set in the pod spec and kept; "
                                      "accelrun would set %.*s",
                                      c->name, name, 96, vars[i]);
            continue;
        }
        if ((e = env_entry(name, eq + 1)) == NULL) {
            rc = ACCEL_ENOMEM;
            break;
        }
        if (list != NULL) {
            cJSON_AddItemToArray(list, e);
            continue;
        }
        {
            char path[sizeof(base) + 2];
            snprintf(path, sizeof(path), "%s/-", base);
            rc = add_op(ops, path, e);
        }
    }
    if (rc == ACCEL_OK && list != NULL && cJSON_GetArraySize(list) > 0) {
        rc = add_op(ops, base, list);
        list = NULL;
    }
    cJSON_Delete(list);
    return rc;
}
