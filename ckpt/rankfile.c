/*
 * rankfile.c: a rank file read back as its writer left it: its header and
 * the pieces it declares (__metadata__["accelrun.pieces"]: the commit
 * merges every rank's into the checkpoint's model), the saver's origin it
 * records, and its bytes checked piece by piece against the declared
 * checksums as they stream past (a local copy read once, as it is copied
 * up: saver.c).
 */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "ckpt_int.h"

enum accel_err ckpt__read_declared(struct accel_ckpt *c, unsigned r, size_t *cap,
                                   struct accel_error *err)
{
    struct ckpt__file *f = &c->f[r];
    char path[4096];
    struct stat st;
    enum accel_err rc;
    const char *json;
    cJSON *doc = NULL;
    const cJSON *ps;
    uint64_t rank, world, step;
    int fd;

    if (!ckpt__path(path, sizeof path, c->dir, f->name))
        return accel_error_set(err, ACCEL_EINVAL, "%s: path too long", c->dir);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return accel_error_sys(err, ACCEL_EIO, "%s: couldn't open", path);
    if (fstat(fd, &st) != 0) {
        close(fd);
        return accel_error_sys(err, ACCEL_EIO, "%s: couldn't stat", path);
    }
    f->bytes = (uint64_t)st.st_size;
    rc = ckpt__st_read(fd, f->bytes, ST_MAX_HEADER, path, &f->h, err);
    close(fd);
    if (rc != ACCEL_OK)
        return rc;
    json = ckpt__st_meta(&f->h, CK_META_PIECES);
    doc = json ? ckpt__st_json_object(json, strlen(json)) : NULL;
    ps = cJSON_GetObjectItemCaseSensitive(doc, "pieces");
    if (!cJSON_IsObject(ps) ||
        !ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(doc, "rank"), &rank) ||
        !ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(doc, "world_size"), &world) ||
        !ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(doc, "step"), &step) || rank != r ||
        world != c->world || step != c->step) {
        rc = accel_error_set(err, ACCEL_EPARSE,
                             "%s: __metadata__[\"%s\"] is missing, malformed, or from another "
                             "rank, world size or step",
                             path, CK_META_PIECES);
        goto out;
    }
    for (const cJSON *e = ps->child; e; e = e->next) {
        struct ckpt__tensor *t;
        struct ckpt__piece *p;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");

        if (c->np == *cap) {
            size_t ncap = *cap ? 2 * *cap : 64;
            void *nt = accel_realloc(c->t, ncap * sizeof *c->t);
            if (nt)
                c->t = nt;
            void *np = nt ? accel_realloc(c->p, ncap * sizeof *c->p) : NULL;
            if (!np) {
                rc = accel_error_set(err, ACCEL_ENOMEM, "checkpoint commit: out of memory");
                goto out;
            }
            c->p = np;
            *cap = ncap;
        }
        t = &c->t[c->nt];
        p = &c->p[c->np];
        memset(t, 0, sizeof *t);
        memset(p, 0, sizeof *p);
        t->first = c->np;
        t->n = 1;
        p->file = r;
        if (!(t->t.name = accel_strdup(e->string))) {
            rc = accel_error_set(err, ACCEL_ENOMEM, "checkpoint commit: out of memory");
            goto out;
        }
        c->nt++;
        c->np++;
        if (!cJSON_IsString(dt) || !accel_dtype_from_st_name(dt->valuestring, &t->t.dtype) ||
            !cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > ACCEL_CKPT_MAX_DIMS ||
            !ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(e, "lo"), &p->lo) ||
            !ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(e, "hi"), &p->hi) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "xxh3")) ||
            !ckpt__parse_hex64(cJSON_GetObjectItemCaseSensitive(e, "xxh3")->valuestring,
                               &p->xxh3)) {
            rc = accel_error_set(err, ACCEL_EPARSE, "%s: piece '%s' is malformed", path, e->string);
            goto out;
        }
        for (const cJSON *d = shape->child; d; d = d->next)
            if (!ckpt__st_json_uint(d, &t->t.shape[t->t.ndim++])) {
                rc = accel_error_set(err, ACCEL_EPARSE, "%s: piece '%s': bad shape", path,
                                     e->string);
                goto out;
            }
    }
out:
    cJSON_Delete(doc);
    if (rc == ACCEL_OK)
        f->parsed = true; /* kept for ckpt__open_file's check: read once */
    else
        ckpt__st_header_free(&f->h);
    return rc;
}

/* The pieces doc of header h (a new tree), or NULL. */
static cJSON *pieces_doc(const struct ckpt__st_header *h)
{
    const char *json = ckpt__st_meta(h, CK_META_PIECES);

    return json ? ckpt__st_json_object(json, strlen(json)) : NULL;
}

bool ckpt__origin_of(const struct ckpt__st_header *h, struct ckpt__origin *org)
{
    cJSON *doc = pieces_doc(h);
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(doc, "run");
    uint64_t base = 0;
    bool ok = cJSON_IsString(run) && ckpt__parse_hex64(run->valuestring, &org->run) &&
              org->run != 0 &&
              ckpt__st_json_uint(cJSON_GetObjectItemCaseSensitive(doc, "base"), &base);

    org->base = (unsigned long)base;
    if (!ok)
        memset(org, 0, sizeof *org);
    cJSON_Delete(doc);
    return ok;
}

/* ---------------------------------------------------------------- the streaming check */

static int span_by_off(const void *a, const void *b)
{
    const struct ckpt__span *x = a, *y = b;

    return x->off < y->off ? -1 : x->off > y->off;
}

enum accel_err ckpt__check_open(struct ckpt__check *v, const char *dir, unsigned long step,
                                unsigned rank, unsigned world, struct accel_error *err)
{
    const struct ckpt__st_header *h;
    enum accel_err rc;
    size_t cap = 0;

    memset(v, 0, sizeof *v);
    v->rank = rank;
    v->c = ckpt__new(dir, step, world, err);
    if (!v->c)
        return ACCEL_ENOMEM;
    rc = ckpt__read_declared(v->c, rank, &cap, err);
    if (rc != ACCEL_OK)
        return rc;
    h = &v->c->f[rank].h;
    v->span = accel_calloc(v->c->np ? v->c->np : 1, sizeof *v->span);
    v->h = XXH3_createState();
    if (!v->span || !v->h)
        return accel_error_set(err, ACCEL_ENOMEM, "checkpoint: out of memory");
    /* one declared piece per tensor of the header, and no tensor without
     * one: the spans then tile the data buffer (the header's rule) */
    if (h->nt != v->c->np)
        return accel_error_set(err, ACCEL_EPARSE, "%s/%s: %zu tensors, %zu pieces declared", dir,
                               v->c->f[rank].name, h->nt, v->c->np);
    for (size_t i = 0; i < v->c->np; i++) {
        const struct ckpt__tensor *t = &v->c->t[i];
        const struct ckpt__st_tensor *s = ckpt__st_find(h, t->t.name);
        const struct ckpt__piece *p = &v->c->p[t->first];

        if (!s || s->ndim != 1 || s->shape[0] != p->hi - p->lo ||
            strcmp(s->dtype, accel_dtype_st_name(t->t.dtype)) != 0)
            return accel_error_set(err, ACCEL_EPARSE,
                                   "%s/%s: tensor '%s' is not the piece its header declares", dir,
                                   v->c->f[rank].name, t->t.name);
        v->span[i] =
            (struct ckpt__span){h->data_start + s->begin, s->end - s->begin, p->xxh3, t->t.name};
    }
    v->n = v->c->np;
    qsort(v->span, v->n, sizeof *v->span, span_by_off);
    XXH3_64bits_reset(v->h);
    return ACCEL_OK;
}

/* The span at k is whole: its sum compared, the next one begun. */
static enum accel_err span_done(struct ckpt__check *v, struct accel_error *err)
{
    const struct ckpt__span *s = &v->span[v->k];

    if (XXH3_64bits_digest(v->h) != s->xxh3)
        return accel_error_set(err, ACCEL_EIO,
                               "%s/%s: tensor '%s': checksum mismatch (the data changed after it "
                               "was saved)",
                               v->c->dir, v->c->f[v->rank].name, s->name);
    v->k++;
    XXH3_64bits_reset(v->h);
    return ACCEL_OK;
}

enum accel_err ckpt__check_feed(struct ckpt__check *v, const void *data, size_t n,
                                struct accel_error *err)
{
    const char *p = data;

    while (v->k < v->n) {
        const struct ckpt__span *s = &v->span[v->k];
        uint64_t take;

        if (v->pos < s->off) { /* the header (or nothing): skipped */
            take = s->off - v->pos < n ? s->off - v->pos : n;
        } else {
            take = s->off + s->len - v->pos < n ? s->off + s->len - v->pos : n;
            XXH3_64bits_update(v->h, p, (size_t)take);
        }
        p += take;
        n -= (size_t)take;
        v->pos += take;
        if (v->pos == s->off + s->len) {
            enum accel_err rc = span_done(v, err);
            if (rc != ACCEL_OK)
                return rc;
        } else if (n == 0) {
            break;
        }
    }
    v->pos += n; /* past the last span: the file's size says whether it may be */
    return ACCEL_OK;
}

enum accel_err ckpt__check_end(struct ckpt__check *v, struct accel_error *err)
{
    const struct ckpt__file *f = &v->c->f[v->rank];

    if (v->k < v->n || v->pos != f->bytes)
        return accel_error_set(err, ACCEL_EIO,
                               "%s/%s: %" PRIu64 " bytes read, the file's header makes it %" PRIu64
                               " (it changed while it was read)",
                               v->c->dir, f->name, v->pos, f->bytes);
    return ACCEL_OK;
}

const struct ckpt__st_header *ckpt__check_header(const struct ckpt__check *v)
{
    return &v->c->f[v->rank].h;
}

void ckpt__check_free(struct ckpt__check *v)
{
    accel_ckpt_close(v->c);
    accel_free(v->span);
    XXH3_freeState(v->h);
    memset(v, 0, sizeof *v);
}
