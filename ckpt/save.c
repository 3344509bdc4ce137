/*
 * save.c: accel_ckpt_save, the commit protocol of DESIGN 9.
 *
 *   every rank   checks its pieces, writes rank-R-of-W.safetensors.tmp,
 *                fsyncs it, renames it into ROOT/step-S/
 *   agree #1     did every rank's file land?
 *   rank 0       fsyncs the directory; reads every rank file's header and
 *                the pieces it declares; checks that they tile every tensor
 *                exactly, with one type and shape per tensor; removes what
 *                else is in the directory (an earlier attempt's files);
 *                writes manifest.json durably (the commit), then `latest`;
 *                deletes checkpoints older than the `keep` newest
 *   agree #2     did the commit happen?
 *
 * A crash anywhere before the manifest's rename leaves the previous
 * checkpoints and `latest` as they were, and a directory without a manifest,
 * which loading ignores and the next save of that step reuses.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <dirent.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "accel/log.h"
#include "accel/utf8.h"
#include "ckpt_int.h"

static int piece_name_cmp(const void *a, const void *b)
{
    return strcmp((*(const struct accel_ckpt_piece *const *)a)->t.name,
                  (*(const struct accel_ckpt_piece *const *)b)->t.name);
}

static bool meta_key_ok(const char *k)
{
    if (!*k || strlen(k) > ACCEL_CKPT_MAX_META_LEN)
        return false;
    for (; *k; k++)
        if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
              *k == '_' || *k == '.' || *k == '-'))
            return false;
    return true;
}

static enum accel_err check_args(const struct accel_ckpt_save_opts *o,
                                 const struct accel_ckpt_piece *pc, size_t n,
                                 struct accel_error *err)
{
    const struct accel_ckpt_piece **sorted;
    enum accel_err rc = ACCEL_OK;

    if (!o->root || !*o->root || !o->agree || o->world < 1 || o->world > ACCEL_CKPT_MAX_WORLD ||
        o->rank >= o->world || o->step > ACCEL_CKPT_MAX_STEP || (n && !pc))
        return accel_error_set(err, ACCEL_EINVAL,
                               "checkpoint save: needs a root, an agree function, rank < world "
                               "<= %d and a step <= %lu",
                               ACCEL_CKPT_MAX_WORLD, ACCEL_CKPT_MAX_STEP);
    if (o->nmeta > ACCEL_CKPT_MAX_META || n > ACCEL_CKPT_MAX_TENSORS)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               "checkpoint save: %zu metadata entries, %zu pieces (limits %d, %d)",
                               o->nmeta, n, ACCEL_CKPT_MAX_META, ACCEL_CKPT_MAX_TENSORS);
    for (size_t i = 0; i < o->nmeta; i++)
        if (!o->meta[i].key || !meta_key_ok(o->meta[i].key) || !o->meta[i].value ||
            strlen(o->meta[i].value) > ACCEL_CKPT_MAX_META_LEN ||
            !accel_utf8_valid(o->meta[i].value, strlen(o->meta[i].value)))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "checkpoint save: metadata %zu: keys are [A-Za-z0-9_.-], keys "
                                   "and values UTF-8 of at most %d bytes",
                                   i, ACCEL_CKPT_MAX_META_LEN);
    for (size_t i = 0; i < o->nmeta; i++) /* at most ACCEL_CKPT_MAX_META: pairs are cheap */
        for (size_t j = 0; j < i; j++)
            if (!strcmp(o->meta[i].key, o->meta[j].key))
                return accel_error_set(err, ACCEL_EINVAL,
                                       "checkpoint save: metadata key '%s' twice", o->meta[i].key);
    for (size_t i = 0; i < n; i++) {
        const struct accel_ckpt_tensor *t = &pc[i].t;
        uint64_t numel;

        if (!t->name || !*t->name || strlen(t->name) > ACCEL_CKPT_MAX_NAME ||
            !accel_utf8_valid(t->name, strlen(t->name)))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "checkpoint save: piece %zu: a name of 1..%d bytes of UTF-8", i,
                                   ACCEL_CKPT_MAX_NAME);
        if (!strcmp(t->name, "__metadata__")) /* the safetensors header's own key */
            return accel_error_set(err, ACCEL_EINVAL,
                                   "checkpoint save: piece %zu: '__metadata__' is not a tensor "
                                   "name in safetensors",
                                   i);
        if (!accel_dtype_st_name(t->dtype) || t->ndim > ACCEL_CKPT_MAX_DIMS ||
            !st_numel(t->shape, t->ndim, &numel) ||
            numel > (UINT64_C(1) << 48) / accel_dtype_size(t->dtype))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "checkpoint save: tensor '%s': bad type "
                                   "or shape",
                                   t->name);
        if (pc[i].lo >= pc[i].hi || pc[i].hi > numel || !pc[i].data)
            return accel_error_set(err, ACCEL_EINVAL,
                                   "checkpoint save: tensor '%s': the piece [%" PRIu64 ", %" PRIu64
                                   ") is empty or past its %" PRIu64 " elements, or has no data",
                                   t->name, pc[i].lo, pc[i].hi, numel);
    }
    sorted = accel_calloc(n ? n : 1, sizeof *sorted);
    if (!sorted)
        return accel_error_set(err, ACCEL_ENOMEM, "checkpoint save: out of memory");
    for (size_t i = 0; i < n; i++)
        sorted[i] = &pc[i];
    qsort(sorted, n, sizeof *sorted, piece_name_cmp);
    for (size_t i = 1; i < n; i++)
        if (!strcmp(sorted[i - 1]->t.name, sorted[i]->t.name)) {
            rc = accel_error_set(err, ACCEL_EINVAL,
                                 "checkpoint save: tensor '%s' has two pieces on rank %u (one "
                                 "contiguous range per rank)",
                                 sorted[i]->t.name, o->rank);
            break;
        }
    accel_free(sorted);
    return rc;
}

static cJSON *piece_json(const struct accel_ckpt_piece *p, uint64_t sum)
{
    cJSON *e = cJSON_CreateObject(), *shape = cJSON_CreateArray();
    char hex[17];

    snprintf(hex, sizeof hex, "%016" PRIx64, sum);
    for (unsigned d = 0; shape && d < p->t.ndim; d++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)p->t.shape[d]));
    if (!e || !cJSON_AddStringToObject(e, "dtype", accel_dtype_st_name(p->t.dtype)) ||
        !cJSON_AddItemToObject(e, "shape", shape) || cJSON_GetArraySize(shape) != (int)p->t.ndim ||
        !cJSON_AddNumberToObject(e, "lo", (double)p->lo) ||
        !cJSON_AddNumberToObject(e, "hi", (double)p->hi) ||
        !cJSON_AddStringToObject(e, "xxh3", hex)) {
        cJSON_Delete(e);
        return NULL;
    }
    return e;
}

/* This rank's file: its pieces as 1-D tensors; the global shapes, ranges
 * and checksums in __metadata__["accelrun.pieces"]. */
static enum accel_err write_rank(const struct accel_ckpt_save_opts *o, const char *dir,
                                 const struct accel_ckpt_piece *pc, size_t n,
                                 struct accel_error *err)
{
    enum accel_err rc = ACCEL_ENOMEM;
    struct accel_ckpt_tensor *flat = accel_calloc(n ? n : 1, sizeof *flat);
    struct st_out *out = accel_calloc(n ? n : 1, sizeof *out);
    size_t *seq = accel_calloc(n ? n : 1, sizeof *seq);
    cJSON *doc = cJSON_CreateObject(), *ps = cJSON_AddObjectToObject(doc, "pieces");
    char *pieces = NULL, *head = NULL, name[64];
    struct ck_out f = {.fd = -1};
    size_t hlen;

    if (!flat || !out || !seq || !ps || !cJSON_AddNumberToObject(doc, "rank", o->rank) ||
        !cJSON_AddNumberToObject(doc, "world_size", o->world) ||
        !cJSON_AddNumberToObject(doc, "step", (double)o->step))
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        size_t esz = accel_dtype_size(pc[i].t.dtype);
        uint64_t bytes = (pc[i].hi - pc[i].lo) * esz;
        cJSON *e = piece_json(&pc[i], XXH3_64bits(pc[i].data, (size_t)bytes));

        if (!e || !cJSON_AddItemToObject(ps, pc[i].t.name, e))
            goto nomem;
        flat[i] = (struct accel_ckpt_tensor){pc[i].t.name, pc[i].t.dtype, 1, {pc[i].hi - pc[i].lo}};
        out[i] = (struct st_out){&flat[i], bytes, 0};
    }
    pieces = cJSON_PrintUnformatted(doc);
    if (!pieces)
        goto nomem;
    {
        const struct accel_ckpt_kv meta[] = {{"format", "pt"}, {CK_META_PIECES, pieces}};
        rc = st_build(out, n, meta, 2, &head, &hlen, seq, err);
    }
    if (rc != ACCEL_OK)
        goto out;
    ck_rank_name(name, sizeof name, o->rank, o->world);
    rc = ck_out_open(&f, dir, name, err);
    if (rc == ACCEL_OK)
        rc = ck_out_write(&f, head, hlen, err);
    for (size_t k = 0; rc == ACCEL_OK && k < n; k++) /* in the order st_build laid out */
        rc = ck_out_write(&f, pc[seq[k]].data, out[seq[k]].bytes, err);
    rc = ck_out_close(&f, rc, err);
    goto out;
nomem:
    rc = accel_error_set(err, ACCEL_ENOMEM, "checkpoint save: out of memory");
out:
    accel_free(head);
    cJSON_free(pieces);
    cJSON_Delete(doc);
    accel_free(flat);
    accel_free(out);
    accel_free(seq);
    return rc;
}

/* ------------------------------------------------------------- the commit */

/* Rank r's declared pieces, appended to c (tensors may repeat across files:
 * merged by commit_model). */
static enum accel_err read_declared(struct accel_ckpt *c, unsigned r, size_t *cap,
                                    struct accel_error *err)
{
    struct ck_file *f = &c->f[r];
    char path[4096];
    struct stat st;
    enum accel_err rc;
    const char *json;
    cJSON *doc = NULL;
    const cJSON *ps;
    uint64_t rank, world, step;
    int fd;

    if (!ck_path(path, sizeof path, c->dir, f->name))
        return accel_error_set(err, ACCEL_EINVAL, "path too long: %s", c->dir);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return accel_error_sys(err, ACCEL_EIO, "couldn't open %s", path);
    if (fstat(fd, &st) != 0) {
        close(fd);
        return accel_error_sys(err, ACCEL_EIO, "couldn't stat %s", path);
    }
    f->bytes = (uint64_t)st.st_size;
    rc = st_read(fd, f->bytes, ST_MAX_HEADER, path, &f->h, err);
    close(fd);
    if (rc != ACCEL_OK)
        return rc;
    json = st_meta(&f->h, CK_META_PIECES);
    doc = json ? cJSON_Parse(json) : NULL;
    ps = cJSON_GetObjectItemCaseSensitive(doc, "pieces");
    if (!cJSON_IsObject(ps) ||
        !st_json_uint(cJSON_GetObjectItemCaseSensitive(doc, "rank"), &rank) ||
        !st_json_uint(cJSON_GetObjectItemCaseSensitive(doc, "world_size"), &world) ||
        !st_json_uint(cJSON_GetObjectItemCaseSensitive(doc, "step"), &step) || rank != r ||
        world != c->world || step != c->step) {
        rc = accel_error_set(err, ACCEL_EPARSE,
                             "%s: __metadata__[\"%s\"] is missing, malformed, or from another "
                             "rank, world size or step",
                             path, CK_META_PIECES);
        goto out;
    }
    for (const cJSON *e = ps->child; e; e = e->next) {
        struct ck_tensor *t;
        struct ck_piece *p;
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
            !st_json_uint(cJSON_GetObjectItemCaseSensitive(e, "lo"), &p->lo) ||
            !st_json_uint(cJSON_GetObjectItemCaseSensitive(e, "hi"), &p->hi) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "xxh3")) ||
            sscanf(cJSON_GetObjectItemCaseSensitive(e, "xxh3")->valuestring, "%16" SCNx64,
                   &p->xxh3) != 1) {
            rc = accel_error_set(err, ACCEL_EPARSE, "%s: piece '%s' is malformed", path, e->string);
            goto out;
        }
        for (const cJSON *d = shape->child; d; d = d->next)
            if (!st_json_uint(d, &t->t.shape[t->t.ndim++])) {
                rc = accel_error_set(err, ACCEL_EPARSE, "%s: piece '%s': bad shape", path,
                                     e->string);
                goto out;
            }
    }
out:
    cJSON_Delete(doc);
    st_header_free(&f->h);
    return rc;
}

static int record_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ck_tensor *)a)->t.name, ((const struct ck_tensor *)b)->t.name);
}

/* One tensor per name out of the records read_declared made (one per
 * piece): the records of a name must agree on type and shape; their pieces
 * end up next to each other. */
static enum accel_err merge_records(struct accel_ckpt *c, struct accel_error *err)
{
    struct ck_tensor *t = accel_calloc(c->nt ? c->nt : 1, sizeof *t);
    struct ck_piece *p = accel_calloc(c->np ? c->np : 1, sizeof *p);
    enum accel_err rc = ACCEL_OK;
    size_t nt = 0;

    if (!t || !p) {
        accel_free(t);
        accel_free(p);
        return accel_error_set(err, ACCEL_ENOMEM, "checkpoint commit: out of memory");
    }
    if (c->nt) /* c->t is NULL when no rank has a piece */
        qsort(c->t, c->nt, sizeof *c->t, record_cmp);
    for (size_t i = 0; i < c->nt; i++) {
        struct ck_tensor *r = &c->t[i], *last = nt ? &t[nt - 1] : NULL;

        p[i] = c->p[r->first];
        if (last && !strcmp(last->t.name, r->t.name)) {
            if (rc == ACCEL_OK && (last->t.dtype != r->t.dtype || last->t.ndim != r->t.ndim ||
                                   memcmp(last->t.shape, r->t.shape, sizeof r->t.shape) != 0))
                rc = accel_error_set(err, ACCEL_EINVAL,
                                     "checkpoint commit: tensor '%s': ranks %u and %u saved it "
                                     "with different types or shapes",
                                     r->t.name, p[last->first].file, p[i].file);
            last->n++;
            accel_free((char *)r->t.name);
        } else {
            t[nt] = *r; /* takes the name */
            t[nt].first = i;
            t[nt++].n = 1;
        }
    }
    accel_free(c->t);
    accel_free(c->p);
    c->t = t;
    c->nt = nt;
    c->p = p;
    return rc;
}

/* Removes what a directory being committed holds besides this world's rank
 * files: files of an earlier attempt (another world size, temporaries). */
static void remove_strays(const struct accel_ckpt *c)
{
    DIR *d = opendir(c->dir);
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        bool ours = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
        for (size_t r = 0; !ours && r < c->nf; r++)
            ours = !strcmp(e->d_name, c->f[r].name);
        if (!ours && unlinkat(dirfd(d), e->d_name, 0) != 0)
            accel_log(ACCEL_LOG_WARN, "checkpoint: couldn't remove %s/%s: %s", c->dir, e->d_name,
                      strerror(errno));
    }
    closedir(d);
}

/* Deletes the committed checkpoints older than the keep - 1 newest before
 * `step`, and every attempt older than `step` that never committed.  A
 * manifest that does not load (another version's, unreadable) is not an
 * attempt: neither counted nor deleted.  Only the checkpoints counted and
 * those deleted are parsed, so a save reads about `keep` manifests. */
static void collect(const char *root, unsigned long step, unsigned keep)
{
    struct accel_ckpt_entry *e = NULL;
    struct accel_error err;
    size_t n = 0, kept = 1;
    char path[4096];

    if (ck_list(root, false, &e, &n, &err) != ACCEL_OK) {
        accel_log(ACCEL_LOG_WARN, "checkpoint: no clean-up of %s: %s", root, err.msg);
        return;
    }
    for (size_t i = n; i-- > 0;) {
        struct accel_ckpt *c = NULL;

        if (e[i].step >= step || !ck_path(path, sizeof path, root, e[i].name))
            continue;
        if (e[i].committed) {
            if (ck_load(&c, path, &err) != ACCEL_OK) {
                accel_log(ACCEL_LOG_WARN, "checkpoint: left %s alone: its %s does not load (%s)",
                          path, CK_MANIFEST, err.msg);
                continue;
            }
            accel_ckpt_close(c);
            if (keep == 0 || kept < keep) {
                kept++;
                continue;
            }
        }
        if (ck_remove_dir(path) != 0)
            accel_log(ACCEL_LOG_WARN, "checkpoint: couldn't remove %s: %s", path, strerror(errno));
    }
    accel_free(e);
}

/* The newest step under root with a manifest; 0 when none (or unreadable). */
static unsigned long newest_committed(const char *root)
{
    struct accel_ckpt_entry *e = NULL;
    struct accel_error err;
    unsigned long best = 0;
    size_t n = 0;

    if (ck_list(root, false, &e, &n, &err) != ACCEL_OK)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].committed && e[i].step > best)
            best = e[i].step;
    accel_free(e);
    return best;
}

static enum accel_err commit(const struct accel_ckpt_save_opts *o, const char *dir,
                             struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;
    struct accel_ckpt *c;
    char path[4096], line[32], *json = NULL;
    struct accel_error lerr = {0};
    size_t cap = 0;

    if (accel_fsync_dir(dir) != 0)
        return accel_error_sys(err, ACCEL_EIO, "couldn't fsync %s", dir);
    c = ck_new(dir, o->step, o->world, err);
    if (!c)
        return ACCEL_ENOMEM;
    for (unsigned r = 0; rc == ACCEL_OK && r < o->world; r++)
        rc = read_declared(c, r, &cap, err);
    if (rc == ACCEL_OK)
        rc = merge_records(c, err);
    if (rc == ACCEL_OK && (rc = ck_check(c, dir, err)) == ACCEL_EPARSE) {
        rc = ACCEL_EINVAL; /* pieces that overlap or leave holes: the ranks' arguments */
        if (err)
            err->code = rc;
    }
    /* each file's header against what the model now says (ck_piece_at's check) */
    for (size_t i = 0; rc == ACCEL_OK && i < c->nt; i++) {
        uint64_t off, len;
        for (size_t k = 0; rc == ACCEL_OK && k < c->t[i].n; k++)
            rc = ck_piece_at(c, &c->t[i], k, &off, &len, err);
    }
    if (rc != ACCEL_OK)
        goto out;
    remove_strays(c);
    c->meta = (struct accel_ckpt_kv *)o->meta; /* borrowed for the manifest */
    c->nmeta = o->nmeta;
    json = ck_manifest_json(c, err);
    c->meta = NULL;
    c->nmeta = 0;
    if (!json) {
        rc = ACCEL_ENOMEM;
        goto out;
    }
    if (!ck_path(path, sizeof path, dir, CK_MANIFEST)) {
        rc = accel_error_set(err, ACCEL_EINVAL, "path too long: %s", dir);
        goto out;
    }
    rc = accel_write_durable(path, json, strlen(json), 0666, err);
    if (rc != ACCEL_OK)
        goto out;
    /* committed: from here on a failure only leaves `latest` behind; and it
     * only moves forward (a root may hold newer steps than this one) */
    ck_step_name(line, sizeof line - 1, o->step);
    strcat(line, "\n");
    if (newest_committed(o->root) > o->step)
        accel_log(ACCEL_LOG_INFO,
                  "checkpoint: step %lu is committed; %s/%s keeps naming a newer "
                  "step",
                  o->step, o->root, CK_LATEST);
    else if (!ck_path(path, sizeof path, o->root, CK_LATEST) ||
             accel_write_durable(path, line, strlen(line), 0666, &lerr) != ACCEL_OK)
        accel_log(ACCEL_LOG_WARN,
                  "checkpoint: step %lu is committed, but %s/%s was not "
                  "updated: %s",
                  o->step, o->root, CK_LATEST, lerr.msg);
    collect(o->root, o->step, o->keep);
out:
    cJSON_free(json);
    accel_ckpt_close(c);
    return rc;
}

static enum accel_err make_dirs(const struct accel_ckpt_save_opts *o, char *dir, size_t len,
                                struct accel_error *err)
{
    char name[32], manifest[4200];
    struct stat st;

    ck_step_name(name, sizeof name, o->step);
    if (!ck_path(dir, len, o->root, name))
        return accel_error_set(err, ACCEL_EINVAL, "path too long: %s", o->root);
    if (mkdir(o->root, 0777) != 0 && errno != EEXIST)
        return accel_error_sys(err, errno == EACCES ? ACCEL_EPERM : ACCEL_EIO,
                               "couldn't create the checkpoint root %s", o->root);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return accel_error_sys(err, errno == EACCES ? ACCEL_EPERM : ACCEL_EIO, "couldn't create %s",
                               dir);
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return accel_error_set(err, ACCEL_EINVAL, "%s is not a directory", dir);
    if (ck_path(manifest, sizeof manifest, dir, CK_MANIFEST) && access(manifest, F_OK) == 0)
        return accel_error_set(err, ACCEL_EINVAL,
                               "%s already holds a committed checkpoint (step %lu); steps are "
                               "saved once",
                               dir, o->step);
    return ACCEL_OK;
}

enum accel_err accel_ckpt_save(const struct accel_ckpt_save_opts *o,
                               const struct accel_ckpt_piece *pieces, size_t npieces,
                               struct accel_error *err)
{
    char dir[4096];
    enum accel_err rc, arc;
    bool all = false;

    if (!o || !o->agree)
        return accel_error_set(err, ACCEL_EINVAL, "checkpoint save: no options or agree function");
    rc = check_args(o, pieces, npieces, err);
    if (rc == ACCEL_OK)
        rc = make_dirs(o, dir, sizeof dir, err);
    if (rc == ACCEL_OK)
        rc = write_rank(o, dir, pieces, npieces, err);
    arc = o->agree(o->agree_ctx, rc == ACCEL_OK, &all, err);
    if (arc != ACCEL_OK)
        return arc;
    if (rc != ACCEL_OK)
        return rc;
    if (!all)
        return accel_error_set(err, ACCEL_EPEER,
                               "checkpoint step %lu: another rank failed to write its part; "
                               "nothing was committed",
                               o->step);
    if (o->rank == 0)
        rc = commit(o, dir, err);
    arc = o->agree(o->agree_ctx, rc == ACCEL_OK, &all, rc == ACCEL_OK ? err : NULL);
    if (rc != ACCEL_OK)
        return rc;
    if (arc != ACCEL_OK)
        return arc;
    if (!all)
        return accel_error_set(err, ACCEL_EPEER,
                               "checkpoint step %lu: rank 0 could not commit it (its log says "
                               "why)",
                               o->step);
    return ACCEL_OK;
}
