/*
 * check.c: the schema walk.  Every key of every section is looked up in the
 * tables of schema.c for the target accelerate version; what is unknown,
 * removed, of the wrong type or outside its enum becomes a located finding
 * with the fix.  accelerate itself checks only top-level key names and two
 * enums; it ignores unknown nested keys, which is how typos in fsdp_config
 * silently fall back to defaults.  Cross-field rules live in rules.c.
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check_int.h"
#include "schema.h"

struct walk {
    unsigned version;
    struct accel_diags *d;
};

static void vstr(unsigned v, char *buf, size_t n)
{
    accel_version_format(v, buf, n);
}

/* ------------------------------------------------------------ did you mean */

/* Optimal string alignment distance (Damerau-Levenshtein with adjacent
 * transpositions), capped at 64 characters per word. */
static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    int d[65][65];

    if (la > 64 || lb > 64)
        return 99;
    for (int i = 0; i <= la; i++)
        d[i][0] = i;
    for (int j = 0; j <= lb; j++)
        d[0][j] = j;
    for (int i = 1; i <= la; i++) {
        for (int j = 1; j <= lb; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best)
                best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

static void best_in(const struct section *s, const char *key, const char **best, int *bestd,
                    const char **where)
{
    for (size_t i = 0; i < s->n; i++) {
        const char *name = s->keys[i].name;
        int dist = edit_distance(key, name);
        /* Also compare without the section prefix: "sharding_strategy". */
        if (s->prefix && strncmp(name, s->prefix, strlen(s->prefix)) == 0) {
            int d2 = edit_distance(key, name + strlen(s->prefix));
            if (d2 < dist)
                dist = d2;
        }
        if (dist < *bestd) {
            *bestd = dist;
            *best = name;
            *where = s->name;
        }
    }
}

void config__suggest(const char *key, const char *section, char *buf, size_t size)
{
    const char *best = NULL, *where = "";
    int bestd = 99, limit;
    size_t len = strlen(key);

    best_in(&config__schema_cluster, key, &best, &bestd, &where);
    for (const struct section *const *s = config__schema_sections; *s; s++)
        best_in(*s, key, &best, &bestd, &where);
    limit = len <= 4 ? 1 : len <= 10 ? 2 : 3;
    buf[0] = '\0';
    if (best == NULL || bestd > limit)
        return;
    if (strcmp(where, section) == 0)
        snprintf(buf, size, "; did you mean '%s'?", best);
    else if (where[0] == '\0')
        snprintf(buf, size, "; did you mean '%s' (a top-level key)?", best);
    else
        snprintf(buf, size, "; did you mean '%s' under %s?", best, where);
}

/* ------------------------------------------------------------ key names */

static const struct section *section_named(const char *name)
{
    for (const struct section *const *s = config__schema_sections; *s; s++)
        if (strcmp((*s)->name, name) == 0)
            return *s;
    return NULL;
}

/* key's canonical name in section s (NULL: none): the section's prefix
 * added where accelerate adds it. */
static void canonical(const struct section *s, const char *key, char *buf, size_t size)
{
    if (s != NULL && s->prefix != NULL && strncmp(key, s->prefix_test, strlen(s->prefix_test)) != 0)
        snprintf(buf, size, "%s%s", s->prefix, key);
    else
        snprintf(buf, size, "%s", key);
}

void config__canonical_key(const char *section, const char *key, char *buf, size_t size)
{
    canonical(section_named(section), key, buf, size);
}

/* ------------------------------------------------------------ values */

static bool enum_match(const struct key_spec *k, const struct accel_val *v, size_t *index)
{
    size_t n = 0;

    while (k->values[n] != NULL)
        n++;
    if ((k->flags & KF_DIGITS) && v->type == ACCEL_V_INT && v->u.i >= 1 && (size_t)v->u.i <= n) {
        *index = (size_t)v->u.i - 1;
        return true;
    }
    if (v->type != ACCEL_V_STR)
        return false;
    if ((k->flags & KF_DIGITS) && strlen(v->u.s) == 1 && v->u.s[0] >= '1' &&
        (size_t)(v->u.s[0] - '0') <= n) {
        *index = (size_t)(v->u.s[0] - '1');
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        if ((k->flags & KF_CASEI) ? strcasecmp(v->u.s, k->values[i]) == 0
                                  : strcmp(v->u.s, k->values[i]) == 0) {
            *index = i;
            return true;
        }
    }
    return false;
}

static void list_values(const char *const *values, char *buf, size_t size)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; values[i] != NULL && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", values[i]);
}

static void check_value(struct walk *w, const struct key_spec *k, const struct accel_val *v,
                        const char *path)
{
    char allowed[512];
    char got[128];
    struct accel_buf b;

    accel_buf_init(&b, 100);
    /* ETOOBIG: a long value, whose start is shown; ENOMEM: the finding would
     * lose its value, so the list is marked incomplete (a cache must not
     * keep it: k8s-operator-shim/cfgcache.c) */
    if (accel_val_pystr(v, &b) == ACCEL_ENOMEM)
        w->d->oom = 1;
    snprintf(got, sizeof(got), "%s", accel_buf_str(&b));
    accel_buf_free(&b);

    if (v->type == ACCEL_V_NULL) {
        if (!(k->flags & KF_NULL))
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                           "has no value; give one or delete the key");
        return;
    }
    if ((k->flags & KF_AUTO) && v->type == ACCEL_V_STR && strcmp(v->u.s, "auto") == 0)
        return;
    switch (k->type) {
    case KT_BOOL:
        if (v->type != ACCEL_V_BOOL)
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                           "expected true or false, got %s %s%s%s", accel_vtype_name(v->type),
                           v->quoted ? "'" : "", got, v->quoted ? "'" : "");
        return;
    case KT_INT:
        if (v->type != ACCEL_V_INT) {
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                           "expected an integer, got %s %s%s%s%s", accel_vtype_name(v->type),
                           v->quoted ? "'" : "", got, v->quoted ? "'" : "",
                           v->quoted ? "; remove the quotes" : "");
            return;
        }
        /* a literal past int64 was clamped (scalar.c): not its value */
        if (k->min < k->max && (v->u.i == LLONG_MAX || v->u.i == LLONG_MIN))
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                           "the number is past the 64-bit integer range; use a value from %ld "
                           "to %ld",
                           k->min, k->max);
        else if (k->min < k->max && (v->u.i < k->min || v->u.i > k->max))
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                           "%lld is out of range; use a value from %ld to %ld", v->u.i, k->min,
                           k->max);
        return;
    case KT_FLOAT:
        if (v->type != ACCEL_V_INT && v->type != ACCEL_V_FLOAT)
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                           "expected a number, got %s %s (YAML 1.1 reads 1e5 as a string: write "
                           "1.0e+5)",
                           accel_vtype_name(v->type), got);
        return;
    case KT_STR:
        if (v->type != ACCEL_V_STR)
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                           "expected a string, got %s %s; quote it: '%s'",
                           accel_vtype_name(v->type), got, got);
        return;
    case KT_ENUM: {
        size_t idx;
        if (!enum_match(k, v, &idx)) {
            const char *spelled = NULL;
            list_values(k->values, allowed, sizeof(allowed));
            for (size_t i = 0; v->type == ACCEL_V_STR && k->values[i] != NULL; i++)
                if (strcasecmp(v->u.s, k->values[i]) == 0)
                    spelled = k->values[i];
            if (spelled != NULL)
                accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                               "'%s': accelerate compares this exactly; write %s", v->u.s, spelled);
            else
                accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path, "%s%s%s is not one of: %s%s",
                               v->type == ACCEL_V_STR ? "'" : "", got,
                               v->type == ACCEL_V_STR ? "'" : "", allowed,
                               (k->flags & KF_DIGITS) ? " (or their number, 1 upward)" : "");
        }
        return;
    }
    case KT_STRLIST:
        if (v->type != ACCEL_V_LIST) {
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                           "expected a list of strings, got %s", accel_vtype_name(v->type));
            return;
        }
        for (size_t i = 0; i < v->u.list.n; i++)
            if (v->u.list.v[i].type != ACCEL_V_STR)
                accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->u.list.v[i].mark, path,
                               "list item %zu is %s, expected a string; quote it", i + 1,
                               accel_vtype_name(v->u.list.v[i].type));
        return;
    case KT_MAP:
        if (v->type != ACCEL_V_MAP)
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &v->mark, path,
                           "expected a mapping of keys, got %s", accel_vtype_name(v->type));
        return;
    case KT_ANY:
        return;
    }
}

static void walk_section(struct walk *w, const struct section *s, const struct accel_val *map,
                         const char *parent);

static void check_key(struct walk *w, const struct section *s, const struct accel_pair *p,
                      const char *parent)
{
    char canon[256], path[512], suggest[256], since[32], removed[32], target[32];
    const struct key_spec *k;

    canonical(s, p->key, canon, sizeof(canon));
    snprintf(path, sizeof(path), "%s%s%s", parent, parent[0] ? "." : "", p->key);
    if (strcmp(canon, p->key) != 0) {
        if (w->version < s->prefix_since) {
            vstr(w->version, target, sizeof(target));
            vstr(s->prefix_since, since, sizeof(since));
            accel_diag_add(w->d, ACCEL_SEV_ERROR, &p->mark, path,
                           "accelerate %s ignores this key (it adds the %s prefix only from %s "
                           "on); write %s",
                           target, s->prefix, since, canon);
            return;
        }
    }
    k = config__schema_find(s, canon);
    if (k != NULL && strcmp(canon, p->key) != 0)
        accel_diag_add(w->d, ACCEL_SEV_NOTE, &p->mark, path,
                       "read as %s (accelerate adds the %s prefix)", canon, s->prefix);
    if (k == NULL) {
        config__suggest(canon, s->name, suggest, sizeof(suggest));
        if (suggest[0] == '\0' && strcmp(canon, p->key) != 0)
            config__suggest(p->key, s->name, suggest, sizeof(suggest));
        accel_diag_add(w->d, ACCEL_SEV_ERROR, &p->mark, path, "unknown key%s%s%s", suggest,
                       suggest[0] ? "" : "; delete it or check the spelling against ",
                       suggest[0] ? "" : (s->name[0] ? s->name : "the accelerate config keys"));
        return;
    }
    if (k->removed != 0 && w->version >= k->removed) {
        vstr(k->removed, removed, sizeof(removed));
        vstr(w->version, target, sizeof(target));
        accel_diag_add(w->d, ACCEL_SEV_ERROR, &p->mark, path,
                       "removed in accelerate %s (target %s); %s", removed, target, k->instead);
        return;
    }
    if (k->since != 0 && w->version < k->since) {
        vstr(k->since, since, sizeof(since));
        vstr(w->version, target, sizeof(target));
        accel_diag_add(w->d, ACCEL_SEV_ERROR, &p->mark, path,
                       "added in accelerate %s; the target version %s %s it; upgrade accelerate "
                       "or delete the key",
                       since, target, parent[0] ? "ignores" : "rejects");
        return;
    }
    if (k->flags & KF_LEGACY)
        accel_diag_add(w->d, ACCEL_SEV_WARNING, &p->mark, path,
                       "an old-schema key that accelerate converts on load; write %s instead",
                       k->instead);
    if (k->flags & KF_NOOP)
        accel_diag_add(w->d, ACCEL_SEV_WARNING, &p->mark, path,
                       "accelerate passes this key on but nothing reads it (the name `accelerate "
                       "config` writes); rename it to %s",
                       k->instead);
    check_value(w, k, &p->val, path);
    if (k->type == KT_MAP && k->sub != NULL && p->val.type == ACCEL_V_MAP)
        walk_section(w, k->sub, &p->val, path);
}

static void walk_section(struct walk *w, const struct section *s, const struct accel_val *map,
                         const char *parent)
{
    for (size_t i = 0; i < map->u.map.n; i++)
        check_key(w, s, &map->u.map.v[i], parent);
}

void config__check_schema(const struct accel_val *root, unsigned version, struct accel_diags *d)
{
    struct walk w = {version, d};
    const struct accel_pair *ce;
    const struct section *top = &config__schema_cluster;

    if (root->type != ACCEL_V_MAP) {
        accel_diag_add(d, ACCEL_SEV_ERROR, &root->mark, "",
                       root->type == ACCEL_V_NULL
                           ? "the file is empty; it needs at least distributed_type"
                           : "the file must be a mapping of keys (key: value), not a %s",
                       accel_vtype_name(root->type));
        return;
    }
    ce = accel_map_find(root, "compute_environment");
    if (ce != NULL && ce->val.type == ACCEL_V_STR && strcmp(ce->val.u.s, "AMAZON_SAGEMAKER") == 0)
        top = &config__schema_sagemaker;
    walk_section(&w, top, root, "");
}
