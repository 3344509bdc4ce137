/*
 * config.c: the load pipeline of accel/config.h (parse, merge with the site
 * policy, check, resolve) and accelerate version numbers.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/config.h"
#include "accel/site.h"
#include "check_int.h"
#include "resolve_int.h"

void accel_version_format(unsigned v, char *buf, size_t size)
{
    snprintf(buf, size, "%u.%u.%u", v / 10000u, v / 100u % 100u, v % 100u);
}

enum accel_err accel_version_parse(const char *text, unsigned *out, struct accel_error *err)
{
    unsigned long ma, mi = 0, pa = 0;
    char *end;
    char lo[32], hi[32];
    unsigned v;

    accel_version_format(ACCEL_VERSION_OLDEST, lo, sizeof(lo));
    accel_version_format(ACCEL_VERSION_NEWEST, hi, sizeof(hi));
    if (strcmp(text, "latest") == 0) {
        *out = ACCEL_VERSION_NEWEST;
        return ACCEL_OK;
    }
    /* strtoul alone would accept blanks and signs: every part starts with a digit */
    if (!isdigit((unsigned char)text[0]))
        goto bad;
    ma = strtoul(text, &end, 10);
    if (*end == '.') {
        const char *s = end + 1;
        if (!isdigit((unsigned char)*s))
            goto bad;
        mi = strtoul(s, &end, 10);
        if (*end == '.') {
            s = end + 1;
            if (!isdigit((unsigned char)*s))
                goto bad;
            pa = strtoul(s, &end, 10);
        }
    }
    if (*end != '\0' || ma > 99 || mi > 99 || pa > 99)
        goto bad;
    v = ACCEL_VERSION((unsigned)ma, (unsigned)mi, (unsigned)pa);
    if (v < ACCEL_VERSION_OLDEST ||
        v > ACCEL_VERSION(ACCEL_VERSION_NEWEST / 10000u, ACCEL_VERSION_NEWEST / 100u % 100u, 99))
        return accel_error_set(err, ACCEL_EUNSUPPORTED,
                               "accelerate %s: outside the versions accelrun knows (%s to %s)",
                               text, lo, hi);
    *out = v;
    return ACCEL_OK;
bad:
    return accel_error_set(err, ACCEL_EINVAL,
                           "accelerate version '%s': not a version number; write e.g. 1.13 or "
                           "1.13.0 or latest",
                           text);
}

static void on_duplicate(void *ctx, const struct accel_pair *first, const struct accel_pair *second)
{
    accel_diag_add(ctx, ACCEL_SEV_WARNING, &second->mark, second->key,
                   "repeated key (first at line %u); like PyYAML, the last value wins: delete one",
                   first->mark.line);
}

/* --------------------------------------------------------------- site merge */

/* Deep merge: every key of `over` replaces or merges into `base`. */
static enum accel_err merge_into(struct accel_val *base, const struct accel_val *over)
{
    enum accel_err rc = ACCEL_OK;

    for (size_t i = 0; rc == ACCEL_OK && i < over->u.map.n; i++) {
        const struct accel_pair *o = &over->u.map.v[i];
        struct accel_pair *b = accel_map_find(base, o->key);
        struct accel_val copy;
        if (b != NULL && b->val.type == ACCEL_V_MAP && o->val.type == ACCEL_V_MAP) {
            rc = merge_into(&b->val, &o->val);
            continue;
        }
        rc = accel_val_copy(&copy, &o->val);
        if (rc == ACCEL_OK)
            rc = config__map_set(base, o->key, &copy, &o->mark);
        accel_val_free(&copy);
    }
    return rc;
}

/* A user value that contradicts an enforced one is an error naming both. */
static void conflicts(const struct accel_val *user, const struct accel_val *enforce,
                      const char *parent, struct accel_diags *d)
{
    for (size_t i = 0; i < enforce->u.map.n; i++) {
        const struct accel_pair *e = &enforce->u.map.v[i];
        const struct accel_pair *u = accel_map_find(user, e->key);
        char path[512];
        struct accel_buf want, got;

        if (u == NULL)
            continue;
        snprintf(path, sizeof(path), "%s%s%s", parent, parent[0] ? "." : "", e->key);
        if (e->val.type == ACCEL_V_MAP && u->val.type == ACCEL_V_MAP) {
            conflicts(&u->val, &e->val, path, d);
            continue;
        }
        if (accel_val_equal(&u->val, &e->val))
            continue;
        accel_buf_init(&want, 200);
        accel_buf_init(&got, 200);
        /* ETOOBIG: cut, the start is enough to name the values; ENOMEM: the
         * list is marked incomplete (as check.c's check_value) */
        if (accel_val_pystr(&e->val, &want) == ACCEL_ENOMEM ||
            accel_val_pystr(&u->val, &got) == ACCEL_ENOMEM)
            d->oom = 1;
        accel_diag_add(d, ACCEL_SEV_ERROR, &u->val.mark, path,
                       "the site policy enforces %s: %s (%s:%u:%u); this config sets %s: delete "
                       "the key or set it to %s",
                       path, accel_buf_str(&want), e->val.mark.file ? e->val.mark.file : "site",
                       e->val.mark.line, e->val.mark.col, accel_buf_str(&got),
                       accel_buf_str(&want));
        accel_buf_free(&want);
        accel_buf_free(&got);
    }
}

/* tree = defaults < user < enforce, all canonicalised. */
static enum accel_err merge_site(struct accel_val *tree, const struct accel_val *user,
                                 const struct accel_site *site, unsigned version,
                                 struct accel_diags *d)
{
    enum accel_err rc;
    struct accel_val enforce = {.type = ACCEL_V_NULL};

    tree->type = ACCEL_V_MAP;
    tree->u.map.v = NULL;
    tree->u.map.n = 0;
    tree->mark = user->mark; /* whole-file findings point at the user's file */
    if (site != NULL && site->defaults != NULL && site->defaults->type == ACCEL_V_MAP) {
        rc = merge_into(tree, site->defaults);
        if (rc == ACCEL_OK)
            rc = config__migrate(tree);
        if (rc == ACCEL_OK)
            rc = config__canonicalize(tree, version);
        if (rc != ACCEL_OK)
            return rc;
    }
    rc = merge_into(tree, user);
    if (rc != ACCEL_OK || site == NULL || site->enforce == NULL ||
        site->enforce->type != ACCEL_V_MAP)
        return rc;
    rc = accel_val_copy(&enforce, site->enforce);
    if (rc == ACCEL_OK)
        rc = config__migrate(&enforce);
    if (rc == ACCEL_OK)
        rc = config__canonicalize(&enforce, version);
    if (rc == ACCEL_OK) {
        conflicts(user, &enforce, "", d);
        rc = merge_into(tree, &enforce);
    }
    accel_val_free(&enforce);
    return rc;
}

/* --------------------------------------------------------------- loading */

void accel_cfg_free(struct accel_cfg *cfg)
{
    if (cfg == NULL)
        return;
    accel_free(cfg->file);
    accel_val_free(&cfg->tree);
    accel_val_free(&cfg->args);
    accel_free(cfg->main_process_ip);
    accel_free(cfg->gpu_ids);
    accel_free(cfg->ds_fields);
    memset(cfg, 0, sizeof(*cfg));
}

static enum accel_err load_doc(struct accel_cfg *cfg, struct accel_doc *doc,
                               const struct accel_cfg_opts *opts, struct accel_diags *diags,
                               struct accel_error *err)
{
    unsigned version = (opts && opts->version) ? opts->version : ACCEL_VERSION_NEWEST;
    const struct accel_site *site = opts ? opts->site : NULL;
    size_t errors_before = diags->errors;
    enum accel_err rc;

    config__check_schema(&doc->root, version, diags);
    if (doc->root.type != ACCEL_V_MAP) {
        rc = ACCEL_ECONFIG;
        goto out;
    }
    rc = config__migrate(&doc->root);
    if (rc == ACCEL_OK)
        rc = config__canonicalize(&doc->root, version);
    if (rc != ACCEL_OK)
        goto out;
    {
        size_t before_merge = diags->errors;
        rc = merge_site(&cfg->tree, &doc->root, site, version, diags);
        if (rc != ACCEL_OK)
            goto out;
        if (diags->errors > before_merge) {
            rc = ACCEL_EPOLICY;
            goto out;
        }
    }
    config__check_rules(&cfg->tree, &doc->root, opts, version, diags);
    if (diags->errors > errors_before) {
        rc = ACCEL_ECONFIG;
        goto out;
    }
    cfg->file = accel_strdup(doc->file);
    if (cfg->file == NULL) {
        rc = ACCEL_ENOMEM;
        goto out;
    }
    rc = config__resolve(cfg);
out:
    if (rc == ACCEL_ENOMEM) {
        accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory loading the config", doc->file);
        diags->oom = 1;
    } else if (rc != ACCEL_OK) {
        accel_diags_first_error(diags, rc, err);
    }
    if (rc != ACCEL_OK)
        accel_cfg_free(cfg);
    return rc;
}

/* Reads `name` from disk when `data` is NULL, else parses `data`. */
static enum accel_err load(struct accel_cfg *cfg, const char *name, const char *data, size_t len,
                           const struct accel_cfg_opts *opts, struct accel_diags *diags,
                           struct accel_error *err)
{
    struct accel_doc doc;
    enum accel_err rc;

    memset(cfg, 0, sizeof(*cfg));
    rc = data ? accel_doc_parse(&doc, name, data, len, on_duplicate, diags, err)
              : accel_doc_load(&doc, name, on_duplicate, diags, err);
    if (rc != ACCEL_OK) {
        accel_diag_from_error(diags, err);
        return rc;
    }
    rc = load_doc(cfg, &doc, opts, diags, err);
    accel_doc_free(&doc);
    return rc;
}

enum accel_err accel_cfg_load_buffer(struct accel_cfg *cfg, const char *name, const char *data,
                                     size_t len, const struct accel_cfg_opts *opts,
                                     struct accel_diags *diags, struct accel_error *err)
{
    return load(cfg, name, data ? data : "", len, opts, diags, err);
}

enum accel_err accel_cfg_load(struct accel_cfg *cfg, const char *path,
                              const struct accel_cfg_opts *opts, struct accel_diags *diags,
                              struct accel_error *err)
{
    return load(cfg, path, NULL, 0, opts, diags, err);
}
