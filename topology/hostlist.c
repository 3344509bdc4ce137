/*
 * hostlist.c: full expansion of a Slurm host list ("n[001-004,7],gpu-[1-2]-a").
 * Three passes over the text, none of which allocates until the last: the
 * first checks the grammar and computes the host count arithmetically (so a
 * hostile range is refused before anything is expanded), the second sums the
 * bytes of the names, the third writes them into one block.  It does not
 * compress lists, sort or deduplicate them (Slurm's order is the input's
 * meaning), and it needs no libslurm.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/cluster.h"

#define MAX_DIGITS 18 /* keeps every number below 10^18, far from uint64 overflow */

/* One bracket group while it is being enumerated. */
struct group {
    const char *text; /* first character after '[' */
    const char *next; /* the range after the current one */
    uint64_t v, hi;   /* current value and its range's end */
    int width;        /* zero padding of the current range */
};

/* One entry (between top-level commas), as parsed by entry_scan: literal
 * text lit[0], group 0, lit[1], group 1, ..., lit[ngroups].  Names are
 * composed from these pieces, never by rescanning the groups' text, so a
 * list of one name with 16k ranges expands in linear time. */
struct entry {
    const char *start, *end;
    size_t ngroups;
    const char *lit[ACCEL_CLUSTER_MAX_GROUPS + 1];
    size_t litlen[ACCEL_CLUSTER_MAX_GROUPS + 1];
    struct group g[ACCEL_CLUSTER_MAX_GROUPS];
};

static enum accel_err bad(struct accel_error *err, const char *list, const char *at,
                          enum accel_err code, const char *what)
{
    unsigned col;

    if (err == NULL)
        return code;
    col = (unsigned)(at - list) + 1;
    accel_error_set(err, code, "host list '%.64s%s': %s at byte %u", list,
                    strlen(list) > 64 ? "..." : "", what, col);
    if (err != NULL)
        err->column = col;
    return code;
}

static enum accel_err too_many(struct accel_error *err, const char *list, const char *at,
                               size_t max)
{
    char what[64];

    snprintf(what, sizeof(what), "more than %zu hosts", max);
    return bad(err, list, at, ACCEL_ETOOBIG, what);
}

static int digits_of(uint64_t v)
{
    int d = 1;

    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Reads a number of 1..MAX_DIGITS digits at *p; advances *p.  -1 when there is
 * none, -2 when it is too long. */
static int read_number(const char **p, uint64_t *v)
{
    const char *q = *p;
    int n = 0;

    *v = 0;
    while (isdigit((unsigned char)*q)) {
        if (++n > MAX_DIGITS)
            return -2;
        *v = *v * 10 + (uint64_t)(*q - '0');
        q++;
    }
    if (n == 0)
        return -1;
    *p = q;
    return n;
}

/* Parses one range "lo" or "lo-hi" at *p (advanced past it). */
static enum accel_err range_scan(const char *list, const char **p, uint64_t *lo, uint64_t *hi,
                                 int *width, struct accel_error *err)
{
    const char *q = *p;
    int w = read_number(&q, lo);

    if (w == -2)
        return bad(err, list, q, ACCEL_ETOOBIG, "number too long");
    if (w < 0)
        return bad(err, list, q, ACCEL_EINVAL, "expected a number");
    *hi = *lo;
    if (*q == '-') {
        int w2;
        q++;
        w2 = read_number(&q, hi);
        if (w2 == -2)
            return bad(err, list, q, ACCEL_ETOOBIG, "number too long");
        if (w2 < 0)
            return bad(err, list, q, ACCEL_EINVAL, "expected the end of a range");
        if (*hi < *lo)
            return bad(err, list, *p, ACCEL_EINVAL, "range runs backwards");
    }
    *width = w;
    *p = q;
    return ACCEL_OK;
}

/* Checks the entry starting at `start`, fills `e`, and returns in *count its
 * number of hosts.  `before` hosts came in earlier entries; more than `max`
 * in all is ACCEL_ETOOBIG. */
static enum accel_err entry_scan(const char *list, const char *start, struct entry *e,
                                 size_t before, size_t max, size_t *count, struct accel_error *err)
{
    size_t cap = max - before;
    const char *p = start;
    size_t lit = 0, longest = 0; /* literal bytes; longest name */
    uint64_t total = 1;
    enum accel_err rc;

    e->start = start;
    e->ngroups = 0;
    e->lit[0] = start;
    while (*p != '\0' && *p != ',') {
        uint64_t size = 0;
        int maxw = 0;
        struct group *g;

        if (*p == ']')
            return bad(err, list, p, ACCEL_EINVAL, "']' without '['");
        if (*p != '[') {
            if (!isgraph((unsigned char)*p))
                return bad(err, list, p, ACCEL_EINVAL, "blank or control character");
            lit++;
            p++;
            continue;
        }
        if (e->ngroups == ACCEL_CLUSTER_MAX_GROUPS)
            return bad(err, list, p, ACCEL_ETOOBIG, "too many bracket groups in one name");
        e->litlen[e->ngroups] = (size_t)(p - e->lit[e->ngroups]);
        g = &e->g[e->ngroups++];
        g->text = ++p;
        for (;;) {
            uint64_t lo, hi;
            int w;
            if ((rc = range_scan(list, &p, &lo, &hi, &w, err)) != ACCEL_OK)
                return rc;
            size += hi - lo + 1;
            if (size > cap)
                return too_many(err, list, g->text - 1, max);
            if (digits_of(hi) > maxw)
                maxw = digits_of(hi);
            if (w > maxw)
                maxw = w;
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == ']')
                break;
            return bad(err, list, p, ACCEL_EINVAL,
                       *p == '\0' ? "unclosed '['" : "expected ',' or ']'");
        }
        p++; /* the ']' */
        e->lit[e->ngroups] = p;
        total *= size;
        if (total > cap)
            return too_many(err, list, e->start, max);
        longest += (size_t)maxw;
    }
    if (p == start)
        return bad(err, list, p, ACCEL_EINVAL, "empty host name");
    if (total > cap)
        return too_many(err, list, start, max);
    longest += lit;
    if (longest > ACCEL_CLUSTER_MAX_NAME)
        return bad(err, list, start, ACCEL_ETOOBIG, "host name too long");
    e->litlen[e->ngroups] = (size_t)(p - e->lit[e->ngroups]);
    e->end = p;
    *count = (size_t)total;
    return ACCEL_OK;
}

/* Loads the range at p (checked by entry_scan) into group g. */
static void group_load(struct group *g, const char *p)
{
    uint64_t lo = 0, hi = 0;
    int w = 1;

    (void)range_scan(NULL, &p, &lo, &hi, &w, NULL);
    g->v = lo;
    g->hi = hi;
    g->width = w;
    g->next = *p == ',' ? p + 1 : NULL;
}

/* Advances group g; false when it wrapped around (and is back on its first). */
static bool group_next(struct group *g)
{
    if (g->v < g->hi) {
        g->v++;
        return true;
    }
    if (g->next == NULL) {
        group_load(g, g->text);
        return false;
    }
    group_load(g, g->next);
    return true;
}

/* Writes the current name of entry e into out (ACCEL_CLUSTER_MAX_NAME + 1
 * bytes; entry_scan checked the longest name fits). */
static size_t entry_name(const struct entry *e, char *out)
{
    size_t n = 0;

    for (size_t i = 0;; i++) {
        memcpy(out + n, e->lit[i], e->litlen[i]);
        n += e->litlen[i];
        if (i == e->ngroups)
            break;
        n += (size_t)snprintf(out + n, ACCEL_CLUSTER_MAX_NAME + 1 - n, "%0*llu", e->g[i].width,
                              (unsigned long long)e->g[i].v);
    }
    out[n] = '\0';
    return n;
}

/* Pass 2 (block == NULL: sums bytes into *bytes) or pass 3 (writes names). */
static void expand(const char *list, struct accel_hostlist *hl, char *block, size_t *bytes)
{
    const char *p = list;
    char name[ACCEL_CLUSTER_MAX_NAME + 1];
    size_t k = 0, off = 0;

    while (*p != '\0') {
        struct entry e;
        size_t count;
        (void)entry_scan(list, p, &e, 0, ACCEL_CLUSTER_MAX_NODES, &count, NULL);
        for (size_t gi = 0; gi < e.ngroups; gi++)
            group_load(&e.g[gi], e.g[gi].text);
        for (;;) {
            size_t len = entry_name(&e, name);
            size_t gi = e.ngroups;
            if (block != NULL) {
                memcpy(block + off, name, len + 1);
                hl->names[k++] = block + off;
            }
            off += len + 1;
            /* odometer: the last group varies fastest */
            while (gi > 0 && !group_next(&e.g[gi - 1]))
                gi--;
            if (gi == 0)
                break;
        }
        p = *e.end == ',' ? e.end + 1 : e.end;
    }
    *bytes = off;
}

/* Pass 1: checks the whole list and counts its hosts (at most max_hosts;
 * 0 means ACCEL_CLUSTER_MAX_NODES). */
static enum accel_err check_list(const char *list, size_t max_hosts, size_t *total,
                                 struct accel_error *err)
{
    const char *p = list;
    enum accel_err rc;

    *total = 0;
    if (list == NULL || list[0] == '\0')
        return accel_error_set(err, ACCEL_EINVAL, "host list: empty");
    if (strnlen(list, ACCEL_CLUSTER_MAX_LIST + 1) > ACCEL_CLUSTER_MAX_LIST)
        return accel_error_set(err, ACCEL_ETOOBIG, "host list: longer than %u bytes",
                               ACCEL_CLUSTER_MAX_LIST);
    if (max_hosts == 0 || max_hosts > ACCEL_CLUSTER_MAX_NODES)
        max_hosts = ACCEL_CLUSTER_MAX_NODES;
    while (*p != '\0') {
        struct entry e;
        size_t count;
        if ((rc = entry_scan(list, p, &e, *total, max_hosts, &count, err)) != ACCEL_OK)
            return rc;
        *total += count;
        if (*e.end == ',') {
            if (e.end[1] == '\0')
                return bad(err, list, e.end + 1, ACCEL_EINVAL, "empty host name");
            p = e.end + 1;
        } else {
            p = e.end;
        }
    }
    return ACCEL_OK;
}

enum accel_err accel_hostlist_first(const char *list, char *out, size_t size,
                                    struct accel_error *err)
{
    char name[ACCEL_CLUSTER_MAX_NAME + 1];
    struct entry e;
    size_t total, count, len;
    enum accel_err rc = check_list(list, 0, &total, err);

    if (rc != ACCEL_OK)
        return rc;
    (void)entry_scan(list, list, &e, 0, ACCEL_CLUSTER_MAX_NODES, &count, NULL);
    for (size_t gi = 0; gi < e.ngroups; gi++)
        group_load(&e.g[gi], e.g[gi].text);
    len = entry_name(&e, name);
    if (len >= size)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               "host list: host name '%.64s' does not fit %zu bytes", name, size);
    memcpy(out, name, len + 1);
    return ACCEL_OK;
}

enum accel_err accel_hostlist_expand(const char *list, size_t max_hosts, struct accel_hostlist *out,
                                     struct accel_error *err)
{
    size_t total = 0, bytes = 0;
    enum accel_err rc;
    char *block;

    out->n = 0;
    out->names = NULL;
    if ((rc = check_list(list, max_hosts, &total, err)) != ACCEL_OK)
        return rc;
    expand(list, NULL, NULL, &bytes);
    if (total > (SIZE_MAX - bytes) / sizeof(char *))
        return accel_error_set(err, ACCEL_ENOMEM, "host list: too large for memory");
    block = accel_malloc(total * sizeof(char *) + bytes);
    if (block == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "host list: out of memory expanding it");
    out->names = (char **)(void *)block;
    expand(list, out, block + total * sizeof(char *), &bytes);
    out->n = total;
    return ACCEL_OK;
}

void accel_hostlist_free(struct accel_hostlist *hl)
{
    if (hl == NULL)
        return;
    accel_free(hl->names);
    hl->names = NULL;
    hl->n = 0;
}
