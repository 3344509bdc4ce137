/*
 * topology_conf.c: Slurm's topology.conf in tree form (topology/tree:
 * "SwitchName=leaf1 Nodes=n[1-4]", "SwitchName=spine Switches=leaf[1-2]")
 * into the switch tree of slurm_topo.c.  Every mistake in a file is reported
 * with file:line:column and the key.  It does not read topology/block files
 * (BlockName=), the 25.05 topology.yaml, or link speeds (LinkSpeed is checked
 * and ignored).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <strings.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/cluster.h"
#include "accel/fsutil.h"
#include "switch_int.h"

#define MAX_TOKENS 8 /* KEY=VALUE pairs on one topology.conf line */

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
        if (topo__switch_add_node(t, hl.names[i], sw, tk->line) != ACCEL_OK) {
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
        if (topo__grow(&arr, &c->refcap, c->nrefs, sizeof(*r)) != ACCEL_OK) {
            rc = conf_fail(c, ACCEL_ENOMEM, tk->line, tk->col, "Switches", "out of memory");
            goto out;
        }
        c->refs = arr;
        r = &c->refs[c->nrefs];
        r->child = topo__str_save(c->t, hl.names[i], strlen(hl.names[i]));
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
    if (!topo__switch_name_ok(tk[0].val, tk[0].vlen))
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
    if (topo__switch_add(t, tk[0].val, tk[0].vlen, ACCEL_SWITCH_NONE, 0, tk[0].line, &sw) !=
        ACCEL_OK)
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
        return accel_error_set(err, ACCEL_EINVAL,
                               "switch tree: not empty; parsing needs an empty one");
    if (len > ACCEL_CLUSTER_MAX_FILE) {
        rc = accel_error_set(err, ACCEL_ETOOBIG, "%s: larger than %u bytes", c.file,
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
        return accel_error_set(err, ACCEL_EINVAL,
                               "switch tree: not empty; loading needs an empty one");
    rc = accel_read_file(path, ACCEL_CLUSTER_MAX_FILE, &text, &len, err);
    if (rc != ACCEL_OK) {
        accel_error_at(err, path, 0, 0, NULL);
        return rc;
    }
    rc = accel_switch_tree_parse(t, path, text, len, err);
    accel_free(text);
    return rc;
}
