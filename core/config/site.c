/*
 * site.c: the administrator's site file (accel/site.h).  Its defaults and
 * enforce sections are checked with the same schema as a user config; the
 * accelrun section holds the port range and extra NCCL_* variables.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/site.h"
#include "check_int.h"

#define MAX_ENV_NAME 128
#define MAX_ENV_VALUE 4096

void accel_site_init(struct accel_site *site)
{
    memset(site, 0, sizeof(*site));
    site->port_base = ACCEL_PORT_BASE_DEFAULT;
    site->port_range = ACCEL_PORT_RANGE_DEFAULT;
    site->nic_binding = true;
    site->cpu_binding = true;
}

void accel_site_free(struct accel_site *site)
{
    if (site == NULL)
        return;
    for (size_t i = 0; i < site->nenv; i++)
        accel_free(site->env[i]);
    accel_doc_free(&site->doc);
    accel_site_init(site);
}

static bool env_name_ok(const char *s)
{
    if (strncmp(s, "NCCL_", 5) != 0 || strlen(s) > MAX_ENV_NAME || s[5] == '\0')
        return false;
    for (; *s; s++)
        if (!(isupper((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '_'))
            return false;
    return true;
}

static void read_env(struct accel_site *site, const struct accel_val *env, struct accel_diags *d)
{
    if (env->type != ACCEL_V_MAP) {
        accel_diag_add(d, ACCEL_SEV_ERROR, &env->mark, "accelrun.env",
                       "expected a mapping of NCCL_* variables to values");
        return;
    }
    for (size_t i = 0; i < env->u.map.n; i++) {
        const struct accel_pair *p = &env->u.map.v[i];
        struct accel_buf value, kv;
        enum accel_err rc;
        char path[256];

        snprintf(path, sizeof(path), "accelrun.env.%s", p->key);
        if (!env_name_ok(p->key)) {
            accel_diag_add(d, ACCEL_SEV_ERROR, &p->mark, path,
                           "only NCCL_* variables (upper case, digits, _) may be set here");
            continue;
        }
        if (p->val.type == ACCEL_V_MAP || p->val.type == ACCEL_V_LIST ||
            p->val.type == ACCEL_V_NULL) {
            accel_diag_add(d, ACCEL_SEV_ERROR, &p->val.mark, path,
                           "expected a plain value (a string or a number)");
            continue;
        }
        if (site->nenv >= ACCEL_MAX_SITE_ENV) {
            accel_diag_add(d, ACCEL_SEV_ERROR, &p->mark, path,
                           "more than %d variables; the limit keeps task environments small",
                           ACCEL_MAX_SITE_ENV);
            return;
        }
        /* NCCL reads 0/1, not Python's True/False. */
        accel_buf_init(&value, MAX_ENV_VALUE);
        rc = p->val.type == ACCEL_V_BOOL ? accel_buf_puts(&value, p->val.u.b ? "1" : "0")
                                         : accel_val_pystr(&p->val, &value);
        if (rc == ACCEL_ETOOBIG) {
            accel_buf_free(&value);
            accel_diag_add(d, ACCEL_SEV_ERROR, &p->val.mark, path, "value longer than %d bytes",
                           MAX_ENV_VALUE);
            continue;
        }
        accel_buf_init(&kv, MAX_ENV_NAME + 1 + MAX_ENV_VALUE);
        if (rc == ACCEL_OK)
            rc = accel_buf_printf(&kv, "%s=%s", p->key, accel_buf_str(&value));
        accel_buf_free(&value);
        site->env[site->nenv] = rc == ACCEL_OK ? accel_buf_take(&kv) : NULL;
        accel_buf_free(&kv);
        if (site->env[site->nenv] == NULL) {
            d->oom = 1;
            return;
        }
        site->nenv++;
    }
}

static void read_port(const struct accel_pair *p, long lo, long hi, unsigned *out,
                      struct accel_diags *d)
{
    char path[64];

    snprintf(path, sizeof(path), "accelrun.%s", p->key);
    if (p->val.type != ACCEL_V_INT || p->val.u.i < lo || p->val.u.i > hi) {
        accel_diag_add(d, ACCEL_SEV_ERROR, &p->val.mark, path,
                       "expected an integer from %ld to %ld", lo, hi);
        return;
    }
    *out = (unsigned)p->val.u.i;
}

/* A switch spelled as one of two words: *out = (value == on). */
static void read_choice(const struct accel_pair *p, const char *on, const char *off, bool *out,
                        struct accel_diags *d)
{
    char path[64];

    snprintf(path, sizeof(path), "accelrun.%s", p->key);
    if (p->val.type == ACCEL_V_STR && strcmp(p->val.u.s, on) == 0)
        *out = true;
    else if (p->val.type == ACCEL_V_STR && strcmp(p->val.u.s, off) == 0)
        *out = false;
    else
        accel_diag_add(d, ACCEL_SEV_ERROR, &p->val.mark, path, "expected %s or %s", on, off);
}

static void read_accelrun(struct accel_site *site, const struct accel_val *a, struct accel_diags *d)
{
    if (a->type != ACCEL_V_MAP) {
        accel_diag_add(d, ACCEL_SEV_ERROR, &a->mark, "accelrun",
                       "expected a mapping (port_base, port_range, slurm_wins, nic_binding, "
                       "cpu_binding, env)");
        return;
    }
    for (size_t i = 0; i < a->u.map.n; i++) {
        const struct accel_pair *p = &a->u.map.v[i];
        if (strcmp(p->key, "port_base") == 0)
            read_port(p, 1024, 65535, &site->port_base, d);
        else if (strcmp(p->key, "port_range") == 0)
            read_port(p, 1, 64512, &site->port_range, d);
        else if (strcmp(p->key, "slurm_wins") == 0 && p->val.type == ACCEL_V_BOOL)
            site->slurm_wins = p->val.u.b;
        else if (strcmp(p->key, "slurm_wins") == 0)
            accel_diag_add(d, ACCEL_SEV_ERROR, &p->val.mark, "accelrun.slurm_wins",
                           "expected true or false");
        else if (strcmp(p->key, "nic_binding") == 0)
            read_choice(p, "rank", "none", &site->nic_binding, d);
        else if (strcmp(p->key, "cpu_binding") == 0)
            read_choice(p, "auto", "none", &site->cpu_binding, d);
        else if (strcmp(p->key, "env") == 0)
            read_env(site, &p->val, d);
        else {
            char path[256];
            snprintf(path, sizeof(path), "accelrun.%s", p->key);
            accel_diag_add(d, ACCEL_SEV_ERROR, &p->mark, path,
                           "unknown key in the accelrun section; known: port_base, port_range, "
                           "slurm_wins, nic_binding, cpu_binding, env");
        }
    }
    if ((unsigned long)site->port_base + site->port_range > 65536ul)
        accel_diag_add(d, ACCEL_SEV_ERROR, &a->mark, "accelrun.port_range",
                       "port_base %u + port_range %u passes 65535; lower one of them",
                       site->port_base, site->port_range);
}

static enum accel_err read_site(struct accel_site *site, unsigned version, struct accel_diags *d,
                                struct accel_error *err)
{
    const struct accel_val *root = &site->doc.root;
    size_t before = d->errors;

    if (root->type != ACCEL_V_MAP) {
        accel_diag_add(d, ACCEL_SEV_ERROR, &root->mark, "",
                       "a site file is a mapping with defaults:, enforce: and accelrun:");
        goto fail;
    }
    for (size_t i = 0; i < root->u.map.n; i++) {
        const struct accel_pair *p = &root->u.map.v[i];
        if (strcmp(p->key, "defaults") == 0 || strcmp(p->key, "enforce") == 0) {
            if (p->val.type == ACCEL_V_NULL)
                continue;
            if (p->val.type != ACCEL_V_MAP) {
                accel_diag_add(d, ACCEL_SEV_ERROR, &p->val.mark, p->key,
                               "expected a mapping of accelerate config keys");
                continue;
            }
            config__check_schema(&p->val, version, d);
            if (p->key[0] == 'd')
                site->defaults = &p->val;
            else
                site->enforce = &p->val;
        } else if (strcmp(p->key, "accelrun") == 0) {
            read_accelrun(site, &p->val, d);
        } else {
            accel_diag_add(d, ACCEL_SEV_ERROR, &p->mark, p->key,
                           "unknown key in a site file; known: defaults, enforce, accelrun");
        }
    }
    if (d->oom) {
        accel_site_free(site);
        return accel_error_set(err, ACCEL_ENOMEM, "site file: out of memory reading it");
    }
    if (d->errors == before)
        return ACCEL_OK;
fail:
    accel_diags_first_error(d, ACCEL_ECONFIG, err);
    accel_site_free(site);
    return ACCEL_ECONFIG;
}

/* Reads `name` from disk when `data` is NULL, else parses `data`. */
static enum accel_err load(struct accel_site *site, const char *name, const char *data, size_t len,
                           unsigned version, struct accel_diags *diags, struct accel_error *err)
{
    enum accel_err rc;

    accel_site_init(site);
    rc = data ? accel_doc_parse(&site->doc, name, data, len, NULL, NULL, err)
              : accel_doc_load(&site->doc, name, NULL, NULL, err);
    if (rc != ACCEL_OK) {
        accel_diag_from_error(diags, err);
        return rc;
    }
    return read_site(site, version ? version : ACCEL_VERSION_NEWEST, diags, err);
}

enum accel_err accel_site_load_buffer(struct accel_site *site, const char *name, const char *data,
                                      size_t len, unsigned version, struct accel_diags *diags,
                                      struct accel_error *err)
{
    return load(site, name, data ? data : "", len, version, diags, err);
}

enum accel_err accel_site_load(struct accel_site *site, const char *path, unsigned version,
                               struct accel_diags *diags, struct accel_error *err)
{
    return load(site, path, NULL, 0, version, diags, err);
}
