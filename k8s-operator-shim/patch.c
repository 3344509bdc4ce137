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
 * doubles.  The operations are written as JSON text straight into the
 * caller's buffer (wh_json_quote), not built as a cJSON tree.
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

/* {"name":NAME,"value":VALUE}, appended; env values are strings in the Pod
 * schema, whatever they look like. */
static enum accel_err env_entry(struct accel_buf *b, const char *name, const char *value)
{
    enum accel_err rc = accel_buf_puts(b, "{\"name\":");

    if (rc == ACCEL_OK)
        rc = wh_json_quote(b, name);
    if (rc == ACCEL_OK)
        rc = accel_buf_puts(b, ",\"value\":");
    if (rc == ACCEL_OK)
        rc = wh_json_quote(b, value);
    return rc == ACCEL_OK ? accel_buf_add(b, "}", 1) : rc;
}

/* ,{"op":"add","path":PATH,"value": -- the opening of an operation whose
 * value the caller appends, then "}"; the comma unless it is the first. */
static enum accel_err add_op(struct accel_buf *ops, size_t *nops, const char *path)
{
    enum accel_err rc =
        accel_buf_puts(ops, *nops ? ",{\"op\":\"add\",\"path\":" : "{\"op\":\"add\",\"path\":");

    if (rc == ACCEL_OK)
        rc = wh_json_quote(ops, path);
    if (rc == ACCEL_OK)
        rc = accel_buf_puts(ops, ",\"value\":");
    if (rc == ACCEL_OK)
        (*nops)++;
    return rc;
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

enum accel_err wh_patch_env(struct accel_buf *ops, size_t *nops, const struct wh_container *c,
                            char *const *vars, size_t n, const struct accel_site *site,
                            struct wh_response *resp)
{
    char base[64], path[64 + 2];
    size_t mark = ops->len, added = 0; /* no env: the one operation's start */
    enum accel_err rc = ACCEL_OK;

    snprintf(base, sizeof(base), "/spec/containers/%u/env", c->index);
    snprintf(path, sizeof(path), "%s/-", base);
    if (c->env == NULL && (rc = add_op(ops, nops, base)) == ACCEL_OK)
        rc = accel_buf_add(ops, "[", 1);
    for (size_t i = 0; i < n && rc == ACCEL_OK; i++) {
        const char *eq = strchr(vars[i], '=');
        char name[ACCEL_MAX_ENV_NAME + 1];
        const cJSON *have;

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
        if (c->env == NULL) /* an item of the one operation's array */
            rc = added ? accel_buf_add(ops, ",", 1) : ACCEL_OK;
        else
            rc = add_op(ops, nops, path);
        if (rc == ACCEL_OK)
            rc = env_entry(ops, name, eq + 1);
        if (rc == ACCEL_OK && c->env != NULL)
            rc = accel_buf_add(ops, "}", 1);
        added++;
    }
    if (rc == ACCEL_OK && c->env == NULL) {
        if (added > 0) {
            rc = accel_buf_add(ops, "]}", 2);
        } else { /* nothing to add: the operation begun above is taken back */
            ops->len = mark;
            ops->data[mark] = '\0';
            (*nops)--;
        }
    }
    return rc;
}
