/*
 * slurm_topo.c: the switch tree, from the two places Slurm describes it: a
 * topology.conf in tree form (topology/tree: "SwitchName=leaf1 Nodes=n[1-4]",
 * "SwitchName=spine Switches=leaf[1-2]") and nodes' SLURM_TOPOLOGY_ADDR with
 * SLURM_TOPOLOGY_ADDR_PATTERN ("spine.leaf2.n2", "switch.switch.node").
 * Names go into a string arena and two open-addressing hash tables (switches,
 * nodes), so building and looking up are O(1) per name and a 16k-node file
 * parses in milliseconds.  Every mistake in a file is reported with
 * file:line:column and the key.  It does not read topology/block files
 * (BlockName=), the 25.05 topology.yaml, or link speeds (LinkSpeed is checked
 * and ignored); it never asks slurmctld (`scontrol show topology`).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <strings.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/cluster.h"
#include "accel/fsutil.h"

#define CHUNK_BYTES 65536 /* string arena chunk */
#define MAX_TOKENS 8      /* KEY=VALUE pairs on one topology.conf line */

struct accel_cluster__chunk {
    struct accel_cluster__chunk *next;
    size_t used, cap;
    char data[];
};

/* ---------------------------------------------------------------- arena and hashes */

static char *str_save(struct accel_switch_tree *t, const char *s, size_t n)
{
    struct accel_cluster__chunk *c = t->strings;
    char *p;

    if (c == NULL || c->cap - c->used < n + 1) {
        size_t cap = n + 1 > CHUNK_BYTES ? n + 1 : CHUNK_BYTES;
        c = accel_malloc(sizeof(*c) + cap);
        if (c == NULL)
            return NULL;
        c->next = t->strings;
        c->used = 0;
        c->cap = cap;
        t->strings = c;
    }
    p = c->data + c->used;
    memcpy(p, s, n);
    p[n] = '\0';
    c->used += n + 1;
    return p;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a */

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* Both element types start with `const char *name`: the table reads it through
 * the element array `base` of stride `stride`. */
static const char *name_at(const void *base, size_t stride, uint32_t i)
{
    return *(const char *const *)(const void *)((const char *)base + stride * i);
}

static uint32_t ht_find(const uint32_t *slots, size_t cap, const void *base, size_t stride,
                        const char *name)
{
    size_t i;

    if (cap == 0 || name == NULL)
        return ACCEL_SWITCH_NONE;
    for (i = (size_t)hash_str(name) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        uint32_t v = slots[i];
        if (v == 0)
            return ACCEL_SWITCH_NONE;
        if (strcmp(name_at(base, stride, v - 1), name) == 0)
            return v - 1;
    }
}

static void ht_put(uint32_t *slots, size_t cap, const void *base, size_t stride, uint32_t idx)
{
    size_t i = (size_t)hash_str(name_at(base, stride, idx)) & (cap - 1);

    while (slots[i] != 0)
        i = (i + 1) & (cap - 1);
    slots[i] = idx + 1;
}

/* Adds element `idx` (its name already set) to the table holding elements
 * 0..idx-1, growing it to keep the load at most 1/2. */
static enum accel_err ht_insert(uint32_t **slots, size_t *cap, const void *base, size_t stride,
                                uint32_t idx)
{
    if (((size_t)idx + 1) * 2 > *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        uint32_t *ns = accel_calloc(ncap, sizeof(*ns));
        if (ns == NULL)
            return ACCEL_ENOMEM;
        for (size_t i = 0; i < *cap; i++)
            if ((*slots)[i] != 0)
                ht_put(ns, ncap, base, stride, (*slots)[i] - 1);
        accel_free(*slots);
        *slots = ns;
        *cap = ncap;
    }
    ht_put(*slots, *cap, base, stride, idx);
    return ACCEL_OK;
}

/* ---------------------------------------------------------------- tree basics */

void accel_switch_tree_init(struct accel_switch_tree *t)
{
    memset(t, 0, sizeof(*t));
}

void accel_switch_tree_free(struct accel_switch_tree *t)
{
    struct accel_cluster__chunk *c, *next;

    if (t == NULL)
        return;
    for (c = t->strings; c != NULL; c = next) {
        next = c->next;
        accel_free(c);
    }
    accel_free(t->switches);
    accel_free(t->nodes);
    accel_free(t->switch_hash);
    accel_free(t->node_hash);
    accel_switch_tree_init(t);
}

uint32_t accel_switch_tree_find(const struct accel_switch_tree *t, const char *name)
{
    return ht_find(t->switch_hash, t->switch_hash_cap, t->switches, sizeof(*t->switches), name);
}

uint32_t accel_switch_tree_node(const struct accel_switch_tree *t, const char *name)
{
    return ht_find(t->node_hash, t->node_hash_cap, t->nodes, sizeof(*t->nodes), name);
}

uint32_t accel_switch_tree_leaf(const struct accel_switch_tree *t, const char *node)
{
    uint32_t i = accel_switch_tree_node(t, node);

    return i == ACCEL_SWITCH_NONE ? ACCEL_SWITCH_NONE : t->nodes[i].leaf;
}

/* Doubles *cap (from 16) up to `max` elements of `size` bytes. */
static enum accel_err grow(void **arr, uint32_t *cap, uint32_t used, size_t size)
{
    uint32_t ncap;
    void *p;

    if (used < *cap)
        return ACCEL_OK;
    ncap = *cap ? *cap * 2 : 16;
    p = accel_realloc(*arr, (size_t)ncap * size);
    if (p == NULL)
        return ACCEL_ENOMEM;
    *arr = p;
    *cap = ncap;
    return ACCEL_OK;
}

/* Appends a switch; the caller checked the name is new and the caps. */
static enum accel_err add_switch(struct accel_switch_tree *t, const char *name, size_t len,
                                 uint32_t parent, uint32_t depth, unsigned line, uint32_t *idx)
{
    struct accel_switch *s;
    void *arr = t->switches;

    if (grow(&arr, &t->switch_cap, t->nswitches, sizeof(*s)) != ACCEL_OK)
        return ACCEL_ENOMEM;
    t->switches = arr;
    s = &t->switches[t->nswitches];
    memset(s, 0, sizeof(*s));
    s->name = str_save(t, name, len);
    if (s->name == NULL)
        return ACCEL_ENOMEM;
    s->parent = parent;
    s->depth = depth;
    s->line = line;
    if (ht_insert(&t->switch_hash, &t->switch_hash_cap, t->switches, sizeof(*s), t->nswitches) !=
        ACCEL_OK)
        return ACCEL_ENOMEM;
    *idx = t->nswitches++;
    return ACCEL_OK;
}

/* Appends a node under `leaf`; the caller checked the name is new. */
static enum accel_err add_node(struct accel_switch_tree *t, const char *name, uint32_t leaf,
                               unsigned line)
{
    struct accel_switch_node *nd;
    void *arr = t->nodes;

    if (grow(&arr, &t->node_cap, t->nnodes, sizeof(*nd)) != ACCEL_OK)
        return ACCEL_ENOMEM;
    t->nodes = arr;
    nd = &t->nodes[t->nnodes];
    nd->name = str_save(t, name, strlen(name));
    if (nd->name == NULL)
        return ACCEL_ENOMEM;
    nd->leaf = leaf;
    nd->line = line;
    if (ht_insert(&t->node_hash, &t->node_hash_cap, t->nodes, sizeof(*nd), t->nnodes) != ACCEL_OK)
        return ACCEL_ENOMEM;
    t->nnodes++;
    t->switches[leaf].nodes++;
    return ACCEL_OK;
}

/* A switch or node name: printable, no host-list punctuation. */
static bool name_ok(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isgraph((unsigned char)s[i]) || strchr("[],=#", s[i]) != NULL)
            return false;
    return true;
}

/* ---------------------------------------------------------------- topology.conf */

struct token {
    const char *key, *val;
    size_t klen, vlen;
    unsigned line, col; /* of the key */
};

struct ref { /* "Switches=" names a child; resolved once every switch is known */
    const char *child;
    uint32_t parent;
    unsigned line, col;
};

struct conf {
    struct accel_switch_tree *t;
    const char *file;
    struct ref *refs;
    uint32_t nrefs, refcap;
    struct accel_error *err;
};

static enum accel_err conf_fail(struct conf *c, enum accel_err code, unsigned line, unsigned col,
                                const char *key, const char *fmt, ...) ACCEL_PRINTF(6, 7);

static enum accel_err conf_fail(struct conf *c, enum accel_err code, unsigned line, unsigned col,
                                const char *key, const char *fmt, ...)
{
    va_list ap;
    char msg[sizeof(c->err->msg)];

    if (c->err == NULL)
        return code;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    accel_error_set(c->err, code, "%s", msg);
    accel_error_at(c->err, c->file, line, col, key);
    return code;
}

static bool key_is(const struct token *tk, const char *name)
{
    return tk->klen == strlen(name) && strncasecmp(tk->key, name, tk->klen) == 0;
}

/* Expands a host-list value; a bad list is reported at its own column. */
static enum accel_err conf_hostlist(struct conf *c, const struct token *tk, const char *key,
                                    size_t max, struct accel_hostlist *hl)
{
    char *val = accel_strndup(tk->val, tk->vlen);
    enum accel_err rc;
    struct accel_error sub;

    if (val == NULL)
        return conf_fail(c, ACCEL_ENOMEM, tk->line, tk->col, key, "out of memory");
    accel_error_clear(&sub);
    rc = accel_hostlist_expand(val, max, hl, &sub);
    accel_free(val);
    if (rc == ACCEL_OK)
        return ACCEL_OK;
    return conf_fail(c, rc == ACCEL_EINVAL ? ACCEL_EPARSE : rc, tk->line,
                     tk->col + (unsigned)tk->klen + (sub.column ? sub.column : 1), key, "%s",
                     sub.msg);
}

static enum accel_err conf_nodes(struct conf *c, const struct token *tk, uint32_t sw)
{
    struct accel_switch_tree *t = c->t;
    struct accel_hostlist hl;
    enum accel_err rc;

    if ((rc = conf_hostlist(c, tk, "Nodes", 0, &hl)) != ACCEL_OK)
        return rc;
    if (hl.n > ACCEL_CLUSTER_MAX_NODES - t->nnodes) {
        rc = conf_fail(c, ACCEL_ETOOBIG, tk->line, tk->col, "Nodes",
                       "more than %u nodes in the tree", ACCEL_CLUSTER_MAX_NODES);
        goto out;
    }
    for (size_t i = 0; i < hl.n; i++) {
        uint32_t old = accel_switch_tree_node(t, hl.names[i]);
        if (old != ACCEL_SWITCH_NONE) {
            const struct accel_switch_node *o = &t->nodes[old];
            if (o->leaf == sw)
                rc = conf_fail(c, ACCEL_ECONFIG, tk->line, tk->col, "Nodes",
                               "node '%s' is listed twice under switch '%s'", hl.names[i],
                               t->switches[sw].name);
            else
                rc = conf_fail(c, ACCEL_ECONFIG, tk->line, tk->col, "Nodes",
                               "node '%s' is under both '%s' (line %u) and '%s'; a node "
                               "belongs to one leaf switch",
                               hl.names[i], t->switches[o->leaf].name, o->line,
                               t->switches[sw].name);
            goto out;
        }
        if (add_node(t, hl.names[i], sw, tk->line) != ACCEL_OK) {
            rc = conf_fail(c, ACCEL_ENOMEM, tk->line, tk->col, "Nodes", "out of memory");
            goto out;
        }
    }
out:
    accel_hostlist_free(&hl);
    return rc;
}

static enum accel_err conf_switches(struct conf *c, const struct token *tk, uint32_t sw)
{
    struct accel_hostlist hl;
    enum accel_err rc;

    if ((rc = conf_hostlist(c, tk, "Switches", ACCEL_CLUSTER_MAX_SWITCHES, &hl)) != ACCEL_OK)
        return rc;
    if (hl.n > ACCEL_CLUSTER_MAX_SWITCHES - c->nrefs) {
        rc = conf_fail(c, ACCEL_ETOOBIG, tk->line, tk->col, "Switches",
                       "more than %u child switches in the file", ACCEL_CLUSTER_MAX_SWITCHES);
        goto out;
    }
    for (size_t i = 0; i < hl.n; i++) {
        void *arr = c->refs;
        struct ref *r;
        if (grow(&arr, &c->refcap, c->nrefs, sizeof(*r)) != ACCEL_OK) {
            rc = conf_fail(c, ACCEL_ENOMEM, tk->line, tk->col, "Switches", "out of memory");
            goto out;
        }
        c->refs = arr;
        r = &c->refs[c->nrefs];
        r->child = str_save(c->t, hl.names[i], strlen(hl.names[i]));
        if (r->child == NULL) {
            rc = conf_fail(c, ACCEL_ENOMEM, tk->line, tk->col, "Switches", "out of memory");
            goto out;
        }
        r->parent = sw;
        r->line = tk->line;
        r->col = tk->col;
        c->nrefs++;
    }
out:
    accel_hostlist_free(&hl);
    return rc;
}

/* One line's tokens: checks the keys, then defines the switch. */
static enum accel_err conf_statement(struct conf *c, const struct token *tk, size_t ntok)
{
    static const char known[] = "SwitchName, Switches, Nodes, LinkSpeed";
    const struct token *nodes = NULL, *switches = NULL, *speed = NULL;
    struct accel_switch_tree *t = c->t;
    uint32_t sw, old;
    enum accel_err rc;

    if (key_is(&tk[0], "BlockName") || key_is(&tk[0], "BlockSizes"))
        return conf_fail(c, ACCEL_EUNSUPPORTED, tk[0].line, tk[0].col, "BlockName",
                         "topology/block files are not read; give the nodes' "
                         "SLURM_TOPOLOGY_ADDR instead (pattern block.node)");
    if (!key_is(&tk[0], "SwitchName"))
        return conf_fail(c, ACCEL_EPARSE, tk[0].line, tk[0].col, "",
                         "a line starts with SwitchName=, not '%.*s='", (int)tk[0].klen, tk[0].key);
    for (size_t i = 1; i < ntok; i++) {
        const struct token **slot = key_is(&tk[i], "Nodes")       ? &nodes
                                    : key_is(&tk[i], "Switches")  ? &switches
                                    : key_is(&tk[i], "LinkSpeed") ? &speed
                                                                  : NULL;
        char key[64];
        snprintf(key, sizeof(key), "%.*s", (int)tk[i].klen, tk[i].key);
        if (slot == NULL && key_is(&tk[i], "SwitchName"))
            return conf_fail(c, ACCEL_ECONFIG, tk[i].line, tk[i].col, key,
                             "SwitchName given twice on one line");
        if (slot == NULL)
            return conf_fail(c, ACCEL_ECONFIG, tk[i].line, tk[i].col, key,
                             "unknown key '%s' in topology.conf; known: %s", key, known);
        if (*slot != NULL)
            return conf_fail(c, ACCEL_ECONFIG, tk[i].line, tk[i].col, key,
                             "%s given twice on one line", key);
        *slot = &tk[i];
    }
    if (nodes != NULL && switches != NULL) {
        const struct token *second = nodes > switches ? nodes : switches;
        return conf_fail(c, ACCEL_ECONFIG, second->line, second->col,
                         second == nodes ? "Nodes" : "Switches",
                         "switch '%.*s' has both Nodes and Switches; a switch holds one or the "
                         "other",
                         (int)tk[0].vlen, tk[0].val);
    }
    if (speed != NULL) {
        bool digits = speed->vlen <= 10;
        for (size_t i = 0; i < speed->vlen && digits; i++)
            digits = isdigit((unsigned char)speed->val[i]);
        if (!digits)
            return conf_fail(c, ACCEL_ECONFIG, speed->line, speed->col, "LinkSpeed",
                             "LinkSpeed must be a whole number, not '%.*s'", (int)speed->vlen,
                             speed->val);
    }
    if (tk[0].vlen > ACCEL_CLUSTER_MAX_NAME)
        return conf_fail(c, ACCEL_ETOOBIG, tk[0].line, tk[0].col, "SwitchName",
                         "switch name longer than %d bytes", ACCEL_CLUSTER_MAX_NAME);
    if (!name_ok(tk[0].val, tk[0].vlen))
        return conf_fail(c, ACCEL_ECONFIG, tk[0].line, tk[0].col, "SwitchName",
                         "'%.*s' is not a switch name (one name, no ranges)", (int)tk[0].vlen,
                         tk[0].val);
    {
        char name[ACCEL_CLUSTER_MAX_NAME + 1];
        memcpy(name, tk[0].val, tk[0].vlen);
        name[tk[0].vlen] = '\0';
        old = accel_switch_tree_find(t, name);
    }
    if (old != ACCEL_SWITCH_NONE)
        return conf_fail(c, ACCEL_ECONFIG, tk[0].line, tk[0].col, "SwitchName",
                         "switch '%s' is defined twice (first at line %u)", t->switches[old].name,
                         t->switches[old].line);
    if (t->nswitches == ACCEL_CLUSTER_MAX_SWITCHES)
        return conf_fail(c, ACCEL_ETOOBIG, tk[0].line, tk[0].col, "SwitchName",
                         "more than %u switches", ACCEL_CLUSTER_MAX_SWITCHES);
    if (add_switch(t, tk[0].val, tk[0].vlen, ACCEL_SWITCH_NONE, 0, tk[0].line, &sw) != ACCEL_OK)
        return conf_fail(c, ACCEL_ENOMEM, tk[0].line, tk[0].col, "SwitchName", "out of memory");
    if (nodes != NULL && (rc = conf_nodes(c, nodes, sw)) != ACCEL_OK)
        return rc;
    if (switches != NULL && (rc = conf_switches(c, switches, sw)) != ACCEL_OK)
        return rc;
    return ACCEL_OK;
}

/* Splits the text into lines and KEY=VALUE tokens and hands each line over. */
static enum accel_err conf_scan(struct conf *c, const char *text, size_t len)
{
    const char *p = text, *end = text + len, *bol = text;
    struct token tk[MAX_TOKENS];
    size_t ntok = 0;
    unsigned line = 1;
    enum accel_err rc;

    for (;;) {
        const char *start, *eq;
        if (p == end || *p == '\n') {
            if (ntok > 0 && (rc = conf_statement(c, tk, ntok)) != ACCEL_OK)
                return rc;
            ntok = 0;
            if (p == end)
                return ACCEL_OK;
            p++;
            line++;
            bol = p;
            continue;
        }
        if (*p == '\\' && (end - p >= 2 && p[1] == '\n')) { /* continuation */
            p += 2;
            line++;
            bol = p;
            continue;
        }
        if (*p == '\\' && end - p >= 3 && p[1] == '\r' && p[2] == '\n') {
            p += 3;
            line++;
            bol = p;
            continue;
        }
        if (*p == ' ' || *p == '\t' || *p == '\r') {
            p++;
            continue;
        }
        if (*p == '#') {
            while (p < end && *p != '\n')
                p++;
            continue;
        }
        start = p;
        eq = NULL;
        while (p < end && isgraph((unsigned char)*p) && *p != '#' &&
               !(*p == '\\' && end - p >= 2 && p[1] == '\n') &&
               !(*p == '\\' && end - p >= 3 && p[1] == '\r' && p[2] == '\n')) {
            if (*p == '=' && eq == NULL)
                eq = p;
            p++;
        }
        if (p == start)
            return conf_fail(c, ACCEL_EPARSE, line, (unsigned)(p - bol) + 1, "",
                             "control character 0x%02x", (unsigned char)*p);
        if (eq == NULL || eq == start)
            return conf_fail(c, ACCEL_EPARSE, line, (unsigned)(start - bol) + 1, "",
                             "expected KEY=VALUE, found '%.*s'",
                             (int)(p - start > 64 ? 64 : p - start), start);
        if (eq + 1 == p)
            return conf_fail(c, ACCEL_EPARSE, line, (unsigned)(start - bol) + 1, "",
                             "'%.*s' has no value", (int)(eq - start > 64 ? 64 : eq - start),
                             start);
        if (ntok == MAX_TOKENS)
            return conf_fail(c, ACCEL_EPARSE, line, (unsigned)(start - bol) + 1, "",
                             "more than %d KEY=VALUE pairs on one line", MAX_TOKENS);
        tk[ntok].key = start;
        tk[ntok].klen = (size_t)(eq - start);
        tk[ntok].val = eq + 1;
        tk[ntok].vlen = (size_t)(p - eq - 1);
        tk[ntok].line = line;
        tk[ntok].col = (unsigned)(start - bol) + 1;
        ntok++;
    }
}

/* Links children to parents, then finds every switch's depth, refusing cycles
 * and trees deeper than ACCEL_CLUSTER_MAX_DEPTH. */
static enum accel_err conf_resolve(struct conf *c)
{
    struct accel_switch_tree *t = c->t;
    struct accel_switch *sw = t->switches;
    uint32_t *mark = NULL, *path = NULL;
    enum accel_err rc = ACCEL_OK;

    for (uint32_t i = 0; i < c->nrefs; i++) {
        const struct ref *r = &c->refs[i];
        uint32_t ch = accel_switch_tree_find(t, r->child);
        if (ch == ACCEL_SWITCH_NONE)
            return conf_fail(c, ACCEL_ECONFIG, r->line, r->col, "Switches",
                             "switch '%s', a child of '%s', is not defined", r->child,
                             sw[r->parent].name);
        if (sw[ch].parent == r->parent)
            return conf_fail(c, ACCEL_ECONFIG, r->line, r->col, "Switches",
                             "switch '%s' is listed twice under '%s'", r->child,
                             sw[r->parent].name);
        if (sw[ch].parent != ACCEL_SWITCH_NONE)
            return conf_fail(c, ACCEL_ECONFIG, r->line, r->col, "Switches",
                             "switch '%s' is under both '%s' (line %u) and '%s'", r->child,
                             sw[sw[ch].parent].name, sw[sw[ch].parent].line, sw[r->parent].name);
        sw[ch].parent = r->parent;
        sw[r->parent].children++;
    }
    mark = accel_calloc(t->nswitches, sizeof(*mark));
    path = accel_calloc(t->nswitches, sizeof(*path));
    if (mark == NULL || path == NULL) {
        rc = conf_fail(c, ACCEL_ENOMEM, 0, 0, "", "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < t->nswitches; i++)
        sw[i].depth = ACCEL_SWITCH_NONE;
    for (uint32_t i = 0; i < t->nswitches; i++) {
        uint32_t s = i, len = 0, d;
        while (s != ACCEL_SWITCH_NONE && sw[s].depth == ACCEL_SWITCH_NONE) {
            if (mark[s] == i + 1) { /* came back to a switch of this walk */
                char cyc[512];
                size_t n = 0;
                uint32_t k = s;
                do {
                    n += (size_t)snprintf(cyc + n, sizeof(cyc) - n, "%s -> ", sw[k].name);
                    k = sw[k].parent;
                } while (k != s && n < sizeof(cyc) - 1);
                if (n < sizeof(cyc) - 1)
                    snprintf(cyc + n, sizeof(cyc) - n, "%s", sw[s].name);
                rc = conf_fail(c, ACCEL_ECONFIG, sw[s].line, 1, "Switches",
                               "switches form a cycle (child -> parent): %s", cyc);
                goto out;
            }
            mark[s] = i + 1;
            path[len++] = s;
            s = sw[s].parent;
        }
        d = s == ACCEL_SWITCH_NONE ? 0 : sw[s].depth + 1;
        while (len > 0) {
            uint32_t k = path[--len];
            if (d >= ACCEL_CLUSTER_MAX_DEPTH) {
                rc = conf_fail(c, ACCEL_ETOOBIG, sw[k].line, 1, "Switches",
                               "switch '%s' is more than %d levels below its top switch",
                               sw[k].name, ACCEL_CLUSTER_MAX_DEPTH - 1);
                goto out;
            }
            sw[k].depth = d++;
        }
    }
out:
    accel_free(mark);
    accel_free(path);
    return rc;
}

enum accel_err accel_switch_tree_parse(struct accel_switch_tree *t, const char *file,
                                       const char *text, size_t len, struct accel_error *err)
{
    struct conf c = {t, file ? file : "topology.conf", NULL, 0, 0, err};
    enum accel_err rc;

    if (t->nswitches != 0 || t->nnodes != 0)
        return accel_error_set(err, ACCEL_EINVAL, "accel_switch_tree_parse needs an empty tree");
    if (len > ACCEL_CLUSTER_MAX_FILE) {
        rc = accel_error_set(err, ACCEL_ETOOBIG, "%s is larger than %u bytes", c.file,
                             ACCEL_CLUSTER_MAX_FILE);
        accel_error_at(err, c.file, 0, 0, NULL);
        return rc;
    }
    rc = conf_scan(&c, text, len);
    if (rc == ACCEL_OK)
        rc = conf_resolve(&c);
    accel_free(c.refs);
    if (rc != ACCEL_OK)
        accel_switch_tree_free(t);
    return rc;
}

enum accel_err accel_switch_tree_load(struct accel_switch_tree *t, const char *path,
                                      struct accel_error *err)
{
    char *text = NULL;
    size_t len = 0;
    enum accel_err rc;

    if (t->nswitches != 0 || t->nnodes != 0)
        return accel_error_set(err, ACCEL_EINVAL, "accel_switch_tree_load needs an empty tree");
    rc = accel_read_file(path, ACCEL_CLUSTER_MAX_FILE, &text, &len, err);
    if (rc != ACCEL_OK) {
        accel_error_at(err, path, 0, 0, NULL);
        return rc;
    }
    rc = accel_switch_tree_parse(t, path, text, len, err);
    accel_free(text);
    return rc;
}

/* ---------------------------------------------------------------- SLURM_TOPOLOGY_ADDR */

static enum accel_err addr_fail(struct accel_error *err, enum accel_err code, size_t off,
                                const char *what, const char *text)
{
    accel_error_set(err, code, "%s at byte %zu of '%.128s'", what, off + 1, text);
    if (err != NULL)
        err->column = (unsigned)off + 1;
    return code;
}

enum accel_err accel_switch_addr_parse(const char *addr, const char *pattern,
                                       struct accel_switch_addr *out, struct accel_error *err)
{
    const char *p, *q;
    unsigned levels = 0;
    size_t n;

    memset(out, 0, sizeof(*out));
    if (addr == NULL || pattern == NULL || *addr == '\0' || *pattern == '\0')
        return accel_error_set(err, ACCEL_EINVAL, "empty topology address or pattern");
    if (strnlen(addr, ACCEL_CLUSTER_MAX_ADDR + 1) > ACCEL_CLUSTER_MAX_ADDR ||
        strnlen(pattern, ACCEL_CLUSTER_MAX_ADDR + 1) > ACCEL_CLUSTER_MAX_ADDR)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               "topology address or pattern longer than %d bytes",
                               ACCEL_CLUSTER_MAX_ADDR);
    /* the pattern: (switch|block).* node */
    for (p = pattern;; p = q + 1) {
        q = strchr(p, '.');
        n = q ? (size_t)(q - p) : strlen(p);
        if (n == 4 && strncmp(p, "node", 4) == 0) {
            if (q != NULL)
                return addr_fail(err, ACCEL_EINVAL, (size_t)(q - pattern),
                                 "'node' must end the pattern", pattern);
            break;
        }
        if (n == 0)
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - pattern), "empty word in pattern",
                             pattern);
        if (!((n == 6 && strncmp(p, "switch", 6) == 0) || (n == 5 && strncmp(p, "block", 5) == 0)))
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - pattern),
                             "unknown word in pattern (switch, block, node)", pattern);
        if (q == NULL)
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - pattern),
                             "the pattern does not end in 'node'", pattern);
        if (++levels > ACCEL_CLUSTER_MAX_DEPTH)
            return addr_fail(err, ACCEL_ETOOBIG, (size_t)(p - pattern), "too many switch levels",
                             pattern);
    }
    /* the address: one field per switch word, the rest is the node */
    p = addr;
    for (unsigned i = 0; i < levels; i++) {
        q = strchr(p, '.');
        if (q == NULL)
            return addr_fail(err, ACCEL_EINVAL, strlen(addr),
                             "the address has fewer fields than its pattern", addr);
        n = (size_t)(q - p);
        if (n == 0)
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - addr), "empty switch name", addr);
        if (n > ACCEL_CLUSTER_MAX_NAME)
            return addr_fail(err, ACCEL_ETOOBIG, (size_t)(p - addr), "switch name too long", addr);
        if (!name_ok(p, n))
            return addr_fail(err, ACCEL_EINVAL, (size_t)(p - addr), "bad switch name", addr);
        memcpy(out->switches[i], p, n);
        p = q + 1;
    }
    n = strlen(p);
    if (n == 0)
        return addr_fail(err, ACCEL_EINVAL, (size_t)(p - addr), "empty node name", addr);
    if (n > ACCEL_CLUSTER_MAX_NAME)
        return addr_fail(err, ACCEL_ETOOBIG, (size_t)(p - addr), "node name too long", addr);
    if (!name_ok(p, n))
        return addr_fail(err, ACCEL_EINVAL, (size_t)(p - addr), "bad node name", addr);
    memcpy(out->node, p, n);
    out->nswitches = levels;
    return ACCEL_OK;
}

enum accel_err accel_switch_tree_add(struct accel_switch_tree *t, const struct accel_switch_addr *a,
                                     struct accel_error *err)
{
    uint32_t idx[ACCEL_CLUSTER_MAX_DEPTH], fresh = 0, nd, leaf;
    unsigned k = a->nswitches;

    if (k == 0)
        return ACCEL_OK;
    if (k > ACCEL_CLUSTER_MAX_DEPTH || a->node[0] == '\0')
        return accel_error_set(err, ACCEL_EINVAL, "malformed topology address");
    /* check everything first, so that a contradiction changes nothing */
    for (unsigned j = 0; j < k; j++) {
        const struct accel_switch *s;
        for (unsigned i = 0; i < j; i++)
            if (strcmp(a->switches[i], a->switches[j]) == 0)
                return accel_error_set(err, ACCEL_ECONFIG,
                                       "node '%s': switch '%s' appears twice in its address",
                                       a->node, a->switches[j]);
        idx[j] = accel_switch_tree_find(t, a->switches[j]);
        if (idx[j] == ACCEL_SWITCH_NONE) {
            fresh++;
            continue;
        }
        s = &t->switches[idx[j]];
        if (j == 0 ? s->parent != ACCEL_SWITCH_NONE
                   : idx[j - 1] == ACCEL_SWITCH_NONE || s->parent != idx[j - 1])
            return accel_error_set(err, ACCEL_ECONFIG,
                                   "node '%s': switch '%s' is under '%s' in its address but "
                                   "under '%s' in the tree",
                                   a->node, s->name,
                                   j == 0 ? "(nothing: a top switch)" : a->switches[j - 1],
                                   s->parent == ACCEL_SWITCH_NONE ? "(nothing: a top switch)"
                                                                  : t->switches[s->parent].name);
        if (j + 1 < k && s->nodes > 0)
            return accel_error_set(err, ACCEL_ECONFIG,
                                   "node '%s': switch '%s' is a leaf (it has nodes) but its "
                                   "address puts switches under it",
                                   a->node, s->name);
        if (j + 1 == k && s->children > 0)
            return accel_error_set(err, ACCEL_ECONFIG,
                                   "node '%s': switch '%s' has switches under it but the "
                                   "address makes it a leaf",
                                   a->node, s->name);
    }
    nd = accel_switch_tree_node(t, a->node);
    if (nd != ACCEL_SWITCH_NONE) {
        if (idx[k - 1] != ACCEL_SWITCH_NONE && t->nodes[nd].leaf == idx[k - 1])
            return ACCEL_OK;
        return accel_error_set(err, ACCEL_ECONFIG,
                               "node '%s' is under '%s' in the tree but under '%s' in its address",
                               a->node, t->switches[t->nodes[nd].leaf].name, a->switches[k - 1]);
    }
    if (fresh > ACCEL_CLUSTER_MAX_SWITCHES - t->nswitches)
        return accel_error_set(err, ACCEL_ETOOBIG, "more than %u switches",
                               ACCEL_CLUSTER_MAX_SWITCHES);
    if (t->nnodes == ACCEL_CLUSTER_MAX_NODES)
        return accel_error_set(err, ACCEL_ETOOBIG, "more than %u nodes", ACCEL_CLUSTER_MAX_NODES);
    for (unsigned j = 0; j < k; j++) {
        uint32_t parent = j == 0 ? ACCEL_SWITCH_NONE : idx[j - 1];
        if (idx[j] != ACCEL_SWITCH_NONE)
            continue;
        if (add_switch(t, a->switches[j], strlen(a->switches[j]), parent, j, 0, &idx[j]) !=
            ACCEL_OK)
            return accel_error_set(err, ACCEL_ENOMEM, "out of memory");
        if (parent != ACCEL_SWITCH_NONE)
            t->switches[parent].children++;
    }
    leaf = idx[k - 1];
    if (add_node(t, a->node, leaf, 0) != ACCEL_OK)
        return accel_error_set(err, ACCEL_ENOMEM, "out of memory");
    return ACCEL_OK;
}
