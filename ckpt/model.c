/*
 * model.c: a checkpoint in memory (ckpt_int.h): its names on disk, the
 * checks every checkpoint passes before it is committed or read, and the
 * manifest, written and read.
 *
 * The manifest (docs/ckpt.md has an example):
 *   {"format": "accelrun.checkpoint", "version": 1, "step": S, "world_size": W,
 *    "meta": {KEY: VALUE, ...},
 *    "files": [{"name": "rank-00000-of-00004.safetensors", "bytes": B}, ...],
 *    "tensors": {NAME: {"dtype": "F32", "shape": [..],
 *                       "pieces": [[FILE, LO, HI, "XXH3 in hex"], ...]}, ...}}
 * File names are never taken from it: file i must be rank i's name.
 */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "accel/utf8.h"
#include "ckpt_int.h"

void ckpt__step_name(char *buf, size_t len, unsigned long step)
{
    snprintf(buf, len, "step-%08lu", step);
}

bool ckpt__parse_step_name(const char *name, unsigned long *step)
{
    unsigned long s = 0;

    if (strncmp(name, "step-", 5) != 0 || strlen(name) != 13)
        return false;
    for (const char *p = name + 5; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        s = s * 10 + (unsigned long)(*p - '0');
    }
    *step = s;
    return true;
}

void ckpt__rank_name(char *buf, size_t len, unsigned rank, unsigned world)
{
    snprintf(buf, len, "rank-%05u-of-%05u.safetensors", rank, world);
}

bool ckpt__path(char *buf, size_t len, const char *dir, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", dir, name);
    return n > 0 && (size_t)n < len;
}

struct accel_ckpt *ckpt__new(const char *dir, unsigned long step, unsigned world,
                             struct accel_error *err)
{
    struct accel_ckpt *c = accel_calloc(1, sizeof *c);
    char name[64];

    if (!c || !(c->dir = accel_strdup(dir)) || !(c->f = accel_calloc(world, sizeof *c->f)))
        goto nomem;
    c->step = step;
    c->world = world;
    for (unsigned r = 0; r < world; r++) {
        ckpt__rank_name(name, sizeof name, r, world);
        c->f[r].fd = -1;
        if (!(c->f[r].name = accel_strdup(name)))
            goto nomem;
        c->nf = r + 1;
    }
    return c;
nomem:
    accel_ckpt_close(c);
    accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory for a checkpoint of %u ranks", dir,
                    world);
    return NULL;
}

static int tensor_by_name(const void *a, const void *b)
{
    return strcmp(((const struct ckpt__tensor *)a)->t.name,
                  ((const struct ckpt__tensor *)b)->t.name);
}

static int piece_by_lo(const void *a, const void *b)
{
    const struct ckpt__piece *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* c->by_file and c->file_first (a counting sort of the pieces by file, in
 * tensor order within a file), checking that a file holds at most one
 * piece of a tensor: its rank file has one tensor of that name. */
static enum accel_err index_by_file(struct accel_ckpt *c, const char *what, struct accel_error *err)
{
    size_t *next;

    accel_free(c->by_file);
    accel_free(c->file_first);
    c->by_file = accel_malloc((c->np ? c->np : 1) * sizeof *c->by_file);
    c->file_first = accel_calloc(c->nf + 1, sizeof *c->file_first);
    next = accel_calloc(c->nf + 1, sizeof *next);
    if (!c->by_file || !c->file_first || !next) {
        accel_free(next);
        return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory", what);
    }
    for (size_t i = 0; i < c->nt; i++)
        for (size_t k = 0; k < c->t[i].n; k++)
            c->file_first[c->p[c->t[i].first + k].file + 1]++;
    for (size_t f = 0; f < c->nf; f++)
        c->file_first[f + 1] += c->file_first[f];
    memcpy(next, c->file_first, (c->nf + 1) * sizeof *next);
    for (size_t i = 0; i < c->nt; i++)
        for (size_t k = 0; k < c->t[i].n; k++) {
            size_t idx = c->t[i].first + k, f = c->p[idx].file;
            c->p[idx].tensor = (uint32_t)i;
            if (next[f] > c->file_first[f] && c->p[c->by_file[next[f] - 1]].tensor == i) {
                accel_free(next);
                return accel_error_set(err, ACCEL_EPARSE,
                                       "%s: tensor '%s': two pieces in %s (one a rank)", what,
                                       c->t[i].t.name, c->f[f].name);
            }
            c->by_file[next[f]++] = idx;
        }
    accel_free(next);
    return ACCEL_OK;
}

enum accel_err ckpt__check(struct accel_ckpt *c, const char *what, struct accel_error *err)
{
    qsort(c->t, c->nt, sizeof *c->t, tensor_by_name);
    for (size_t i = 0; i < c->nt; i++) {
        struct ckpt__tensor *t = &c->t[i];
        struct ckpt__piece *p = c->p + t->first;
        uint64_t at = 0;

        if (i > 0 && !strcmp(c->t[i - 1].t.name, t->t.name))
            return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s' twice", what, t->t.name);
        if (!accel_dtype_size(t->t.dtype) || t->t.ndim > ACCEL_CKPT_MAX_DIMS ||
            !ckpt__st_numel(t->t.shape, t->t.ndim, &t->numel) ||
            t->numel > (UINT64_C(1) << 62) / accel_dtype_size(t->t.dtype))
            return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s': bad type or shape", what,
                                   t->t.name);
        qsort(p, t->n, sizeof *p, piece_by_lo);
        for (size_t k = 0; k < t->n; k++) {
            if (p[k].file >= c->nf)
                return accel_error_set(err, ACCEL_EPARSE,
                                       "%s: tensor '%s': a piece in file %u of %zu", what,
                                       t->t.name, p[k].file, c->nf);
            if (p[k].lo != at || p[k].hi <= p[k].lo)
                return accel_error_set(
                    err, ACCEL_EPARSE,
                    "%s: tensor '%s': pieces %s elements near [%" PRIu64 ", %" PRIu64 ")", what,
                    t->t.name, p[k].lo > at ? "leave out" : "overlap or are empty at", at, p[k].lo);
            at = p[k].hi;
        }
        if (at != t->numel)
            return accel_error_set(err, ACCEL_EPARSE,
                                   "%s: tensor '%s': pieces cover %" PRIu64 " of its %" PRIu64
                                   " elements",
                                   what, t->t.name, at, t->numel);
    }
    return index_by_file(c, what, err);
}

/* ---------------------------------------------------------------- writing */

static cJSON *shape_json(const struct accel_ckpt_tensor *t)
{
    cJSON *a = cJSON_CreateArray();

    for (unsigned d = 0; a && d < t->ndim; d++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->shape[d]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

char *ckpt__manifest_json(const struct accel_ckpt *c, struct accel_error *err)
{
    cJSON *root = cJSON_CreateObject(), *o, *a;
    char *out = NULL;

    if (!root || !cJSON_AddStringToObject(root, "format", CK_FORMAT) ||
        !cJSON_AddNumberToObject(root, "version", CK_VERSION) ||
        !cJSON_AddNumberToObject(root, "step", (double)c->step) ||
        !cJSON_AddNumberToObject(root, "world_size", c->world) ||
        !(o = cJSON_AddObjectToObject(root, "meta")))
        goto out;
    for (size_t i = 0; i < c->nmeta; i++)
        if (!cJSON_AddStringToObject(o, c->meta[i].key, c->meta[i].value))
            goto out;
    if (!(a = cJSON_AddArrayToObject(root, "files")))
        goto out;
    for (size_t i = 0; i < c->nf; i++) {
        cJSON *f = cJSON_CreateObject();
        if (!cJSON_AddItemToArray(a, f) || !cJSON_AddStringToObject(f, "name", c->f[i].name) ||
            !cJSON_AddNumberToObject(f, "bytes", (double)c->f[i].bytes))
            goto out;
    }
    if (!(o = cJSON_AddObjectToObject(root, "tensors")))
        goto out;
    for (size_t i = 0; i < c->nt; i++) {
        const struct ckpt__tensor *t = &c->t[i];
        cJSON *e = cJSON_CreateObject(), *ps, *shape = shape_json(&t->t);

        if (!cJSON_AddItemToObject(o, t->t.name, e) ||
            !cJSON_AddStringToObject(e, "dtype", accel_dtype_st_name(t->t.dtype)) ||
            !cJSON_AddItemToObject(e, "shape", shape) ||
            !(ps = cJSON_AddArrayToObject(e, "pieces")))
            goto out;
        for (size_t k = 0; k < t->n; k++) {
            const struct ckpt__piece *p = &c->p[t->first + k];
            cJSON *q = cJSON_CreateArray();
            char hex[17];

            snprintf(hex, sizeof hex, "%016" PRIx64, p->xxh3);
            if (!cJSON_AddItemToArray(ps, q) ||
                !cJSON_AddItemToArray(q, cJSON_CreateNumber(p->file)) ||
                !cJSON_AddItemToArray(q, cJSON_CreateNumber((double)p->lo)) ||
                !cJSON_AddItemToArray(q, cJSON_CreateNumber((double)p->hi)) ||
                !cJSON_AddItemToArray(q, cJSON_CreateString(hex)))
                goto out;
        }
    }
    out = cJSON_PrintUnformatted(root);
out:
    cJSON_Delete(root);
    if (!out)
        accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory writing the manifest", c->dir);
    return out;
}

/* ---------------------------------------------------------------- reading */

bool ckpt__parse_hex64(const char *s, uint64_t *out)
{
    uint64_t v = 0;

    if (!s || strlen(s) != 16)
        return false;
    for (; *s; s++) {
        int d = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return true;
}

static enum accel_err bad(struct accel_error *err, const char *path, const char *field)
{
    return accel_error_set(err, ACCEL_EPARSE, "%s: '%s' is missing or malformed", path, field);
}

static enum accel_err load_meta(struct accel_ckpt *c, const cJSON *m, const char *path,
                                struct accel_error *err)
{
    size_t n = (size_t)cJSON_GetArraySize(m), i = 0;

    if (!cJSON_IsObject(m))
        return bad(err, path, "meta");
    if (n > ACCEL_CKPT_MAX_META)
        return accel_error_set(err, ACCEL_ETOOBIG, "%s: %zu metadata entries (limit %d)", path, n,
                               ACCEL_CKPT_MAX_META);
    if (n && !(c->meta = accel_calloc(n, sizeof *c->meta)))
        return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory reading it", path);
    for (const cJSON *v = m->child; v; v = v->next, i++) {
        if (!cJSON_IsString(v))
            return bad(err, path, "meta");
        c->meta[i].key = accel_strdup(v->string);
        c->meta[i].value = accel_strdup(v->valuestring);
        c->nmeta = i + 1;
        if (!c->meta[i].key || !c->meta[i].value)
            return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory reading it", path);
    }
    return ACCEL_OK;
}

static enum accel_err load_files(struct accel_ckpt *c, const cJSON *a, const char *path,
                                 struct accel_error *err)
{
    size_t i = 0;

    if (!cJSON_IsArray(a) || (size_t)cJSON_GetArraySize(a) != c->nf)
        return accel_error_set(err, ACCEL_EPARSE, "%s: 'files' must list %zu files", path, c->nf);
    for (const cJSON *f = a->child; f; f = f->next, i++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(name) || strcmp(name->valuestring, c->f[i].name) != 0 ||
            !ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(f, "bytes"), &c->f[i].bytes))
            return accel_error_set(err, ACCEL_EPARSE,
                                   "%s: files[%zu] must be {\"name\": \"%s\", "
                                   "\"bytes\": N}",
                                   path, i, c->f[i].name);
    }
    return ACCEL_OK;
}

static enum accel_err load_tensor(struct accel_ckpt *c, const cJSON *e, struct ckpt__tensor *t,
                                  const char *path, struct accel_error *err)
{
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(e, "pieces");

    if (strlen(e->string) > ACCEL_CKPT_MAX_NAME)
        return accel_error_set(err, ACCEL_ETOOBIG, "%s: a tensor name of %zu bytes (limit %d)",
                               path, strlen(e->string), ACCEL_CKPT_MAX_NAME);
    if (!(t->t.name = accel_strdup(e->string)))
        return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory reading it", path);
    if (!cJSON_IsString(dt) || !accel_dtype_from_st_name(dt->valuestring, &t->t.dtype))
        return accel_error_set(err, ACCEL_EPARSE,
                               "%s: tensor '%s': dtype must be F32, BF16 or "
                               "F16",
                               path, t->t.name);
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > ACCEL_CKPT_MAX_DIMS)
        return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s': bad shape", path, t->t.name);
    for (const cJSON *d = shape->child; d; d = d->next)
        if (!ckpt__st_json_uint(d, &t->t.shape[t->t.ndim++]))
            return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s': bad shape", path,
                                   t->t.name);
    if (!cJSON_IsArray(ps))
        return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s': no pieces", path, t->t.name);
    t->first = c->np;
    for (const cJSON *q = ps->child; q; q = q->next) {
        struct ckpt__piece *p = &c->p[c->np];
        uint64_t file;

        if (!cJSON_IsArray(q) || cJSON_GetArraySize(q) != 4 ||
            !ckpt__st_json_uint(q->child, &file) || file >= c->nf ||
            !ckpt__st_json_uint(q->child->next, &p->lo) ||
            !ckpt__st_json_uint(q->child->next->next, &p->hi) ||
            !cJSON_IsString(q->child->next->next->next) ||
            !ckpt__parse_hex64(q->child->next->next->next->valuestring, &p->xxh3))
            return accel_error_set(err, ACCEL_EPARSE,
                                   "%s: tensor '%s': a piece is not [FILE, LO, HI, \"XXH3\"]", path,
                                   t->t.name);
        p->file = (uint32_t)file;
        c->np++;
        t->n++;
    }
    return ACCEL_OK;
}

/* The pieces in the manifest, counted before they are read. */
static size_t count_pieces(const cJSON *ts)
{
    size_t n = 0;

    for (const cJSON *e = ts->child; e; e = e->next)
        n += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "pieces"));
    return n;
}

enum accel_err ckpt__load(struct accel_ckpt **out, const char *dir, struct accel_error *err)
{
    enum accel_err rc;
    char path[4096], *text = NULL;
    size_t len;
    cJSON *root = NULL;
    const cJSON *ts;
    struct accel_ckpt *c = NULL;
    uint64_t step, world, version;
    size_t nt, np;

    *out = NULL;
    if (!ckpt__path(path, sizeof path, dir, CK_MANIFEST))
        return accel_error_set(err, ACCEL_EINVAL, "%s: path too long", dir);
    rc = accel_read_file(path, ACCEL_CKPT_MAX_MANIFEST, &text, &len, err);
    if (rc != ACCEL_OK)
        return rc;
    if (!accel_utf8_valid(text, len) || !(root = ckpt__st_json_object(text, len))) {
        rc = accel_error_set(err, ACCEL_EPARSE, "%s: not a JSON object", path);
        goto out;
    }
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(root, "format")) ||
        strcmp(cJSON_GetObjectItemCaseSensitive(root, "format")->valuestring, CK_FORMAT) != 0) {
        rc = accel_error_set(err, ACCEL_EPARSE, "%s: 'format' is not \"%s\"", path, CK_FORMAT);
        goto out;
    }
    if (!ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(root, "version"), &version) ||
        version != CK_VERSION) {
        rc = accel_error_set(err, ACCEL_EPARSE,
                             "%s: 'version' is not %d (written by another accelrun?)", path,
                             CK_VERSION);
        goto out;
    }
    if (!ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(root, "step"), &step) ||
        step > ACCEL_CKPT_MAX_STEP) {
        rc = bad(err, path, "step");
        goto out;
    }
    {
        const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
        unsigned long named;
        if (ckpt__parse_step_name(base, &named) && named != step) {
            rc = accel_error_set(err, ACCEL_EPARSE,
                                 "%s: 'step' is %llu but the directory is %s (moved or copied "
                                 "from another?)",
                                 path, (unsigned long long)step, base);
            goto out;
        }
    }
    if (!ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(root, "world_size"), &world) ||
        world < 1 || world > ACCEL_CKPT_MAX_WORLD) {
        rc = bad(err, path, "world_size");
        goto out;
    }
    ts = cJSON_GetObjectItemCaseSensitive(root, "tensors");
    if (!cJSON_IsObject(ts)) {
        rc = bad(err, path, "tensors");
        goto out;
    }
    nt = (size_t)cJSON_GetArraySize(ts);
    np = count_pieces(ts);
    if (nt > ACCEL_CKPT_MAX_TENSORS || np > ACCEL_CKPT_MAX_PIECES) {
        rc = accel_error_set(err, ACCEL_ETOOBIG, "%s: %zu tensors in %zu pieces (limits %d, %d)",
                             path, nt, np, ACCEL_CKPT_MAX_TENSORS, ACCEL_CKPT_MAX_PIECES);
        goto out;
    }
    c = ckpt__new(dir, (unsigned long)step, (unsigned)world, err);
    if (!c) {
        rc = ACCEL_ENOMEM;
        goto out;
    }
    c->t = accel_calloc(nt ? nt : 1, sizeof *c->t);
    c->p = accel_calloc(np ? np : 1, sizeof *c->p);
    if (!c->t || !c->p) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory reading it", path);
        goto out;
    }
    rc = load_meta(c, cJSON_GetObjectItemCaseSensitive(root, "meta"), path, err);
    if (rc == ACCEL_OK)
        rc = load_files(c, cJSON_GetObjectItemCaseSensitive(root, "files"), path, err);
    for (const cJSON *e = ts->child; rc == ACCEL_OK && e; e = e->next)
        rc = load_tensor(c, e, &c->t[c->nt++], path, err);
    if (rc == ACCEL_OK)
        rc = ckpt__check(c, path, err);
out:
    cJSON_Delete(root);
    accel_free(text);
    if (rc == ACCEL_OK)
        *out = c;
    else
        accel_ckpt_close(c);
    return rc;
}
