/*
 * save.c: accel_ckpt_save, the commit protocol of DESIGN 9 (rank 0's part
 * of it, the commit itself, is commit.c's).
 *
 *   every rank   checks its pieces, writes rank-R-of-W.safetensors.tmp,
 *                fsyncs it, renames it into ROOT/step-S/
 *   agree #1     did every rank's file land?
 *   rank 0       fsyncs the directory; reads every rank file's header and
 *                the pieces it declares; checks that they tile every tensor
 *                exactly, with one type and shape per tensor; removes what
 *                else is in the directory (an earlier attempt's files);
 *                writes manifest.json durably (the commit)
 *   agree #2     did the commit happen?
 *   rank 0       moves `latest`, deletes checkpoints older than the `keep`
 *                newest (the others go on meanwhile)
 *
 * A crash anywhere before the manifest's rename leaves the previous
 * checkpoints and `latest` as they were, and a directory without a manifest,
 * which loading ignores and the next save of that step reuses.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "accel/alloc.h"
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

enum accel_err ckpt__check_save(const struct accel_ckpt_save_opts *o,
                                const struct accel_ckpt_piece *pc, size_t n,
                                struct accel_error *err)
{
    const struct accel_ckpt_piece **sorted;
    enum accel_err rc = ACCEL_OK;

    if (!o->root || !*o->root || o->world < 1 || o->world > ACCEL_CKPT_MAX_WORLD ||
        o->rank >= o->world || o->step > ACCEL_CKPT_MAX_STEP || (n && !pc))
        return accel_error_set(err, ACCEL_EINVAL,
                               "checkpoint save: needs a root, rank < world <= %d and a step <= "
                               "%lu",
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
            !ckpt__st_numel(t->shape, t->ndim, &numel) ||
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

/* The header of a rank file: its pieces as 1-D tensors, and in __metadata__
 * their global shapes, ranges and checksums (sums[i], all 0 for the first
 * build: the hex digits are of fixed width, so both builds have the same
 * length) and the save's metadata; the data at a multiple of 4096. */
static enum accel_err rank_header(const struct accel_ckpt_save_opts *o,
                                  const struct ckpt__origin *org, const struct accel_ckpt_piece *pc,
                                  size_t n, const uint64_t *sums, struct ckpt__st_out *out,
                                  struct accel_ckpt_tensor *flat, size_t *seq, char **head,
                                  size_t *hlen, struct accel_error *err)
{
    cJSON *doc = cJSON_CreateObject(), *ps = cJSON_AddObjectToObject(doc, "pieces");
    cJSON *user = cJSON_CreateObject();
    char *pieces = NULL, *users = NULL;
    enum accel_err rc = ACCEL_ENOMEM;

    if (!ps || !user || !cJSON_AddNumberToObject(doc, "rank", o->rank) ||
        !cJSON_AddNumberToObject(doc, "world_size", o->world) ||
        !cJSON_AddNumberToObject(doc, "step", (double)o->step))
        goto out;
    if (org) {
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, org->run);
        if (!cJSON_AddStringToObject(doc, "run", hex) ||
            !cJSON_AddNumberToObject(doc, "base", (double)org->base))
            goto out;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = (pc[i].hi - pc[i].lo) * accel_dtype_size(pc[i].t.dtype);
        cJSON *e = piece_json(&pc[i], sums[i]);

        if (!e || !cJSON_AddItemToObject(ps, pc[i].t.name, e))
            goto out;
        flat[i] = (struct accel_ckpt_tensor){pc[i].t.name, pc[i].t.dtype, 1, {pc[i].hi - pc[i].lo}};
        out[i] = (struct ckpt__st_out){&flat[i], bytes, 0};
    }
    for (size_t i = 0; i < o->nmeta; i++)
        if (!cJSON_AddStringToObject(user, o->meta[i].key, o->meta[i].value))
            goto out;
    pieces = cJSON_PrintUnformatted(doc);
    users = cJSON_PrintUnformatted(user);
    if (pieces && users) {
        const struct accel_ckpt_kv meta[] = {
            {"format", "pt"}, {CK_META_PIECES, pieces}, {CK_META_USER, users}};
        rc = ckpt__st_build_aligned(out, n, meta, 3, CK_DIRECT_ALIGN, head, hlen, seq, err);
    }
out:
    if (rc == ACCEL_ENOMEM)
        accel_error_set(err, rc, "checkpoint save: out of memory");
    cJSON_free(pieces);
    cJSON_free(users);
    cJSON_Delete(user);
    cJSON_Delete(doc);
    return rc;
}

/* bytes hashed, then handed to the writer, at a time: the hash reads them
 * into the cache, the copy into the writer's buffer reads them from it */
#define HASH_CHUNK (256u << 10)

enum accel_err ckpt__write_rank(const struct accel_ckpt_save_opts *o,
                                const struct ckpt__origin *org, const char *dir,
                                const struct accel_ckpt_piece *pc, size_t n,
                                struct accel_error *err)
{
    enum accel_err rc = ACCEL_ENOMEM;
    struct accel_ckpt_tensor *flat = accel_calloc(n ? n : 1, sizeof *flat);
    struct ckpt__st_out *out = accel_calloc(n ? n : 1, sizeof *out);
    size_t *seq = accel_calloc(n ? n : 1, sizeof *seq);
    uint64_t *sums = accel_calloc(n ? n : 1, sizeof *sums);
    XXH3_state_t *h = XXH3_createState();
    char *head = NULL, *head2 = NULL, name[64];
    struct ckpt__out f = {.fd = -1};
    size_t hlen = 0, hlen2 = 0;

    if (!flat || !out || !seq || !sums || !h) {
        accel_error_set(err, rc, "checkpoint save: out of memory");
        goto out;
    }
    /* the header's length (checksums to come), so the data can go first */
    rc = rank_header(o, org, pc, n, sums, out, flat, seq, &head, &hlen, err);
    if (rc != ACCEL_OK)
        goto out;
    f.total = hlen;
    for (size_t k = 0; k < n; k++)
        f.total += out[k].bytes;
    f.head_len = hlen;
    ckpt__rank_name(name, sizeof name, o->rank, o->world);
    rc = ckpt__out_open(&f, dir, name, err);
    /* the data, in the order ckpt__st_build laid out, each piece's XXH3
     * made as it goes out (one pass over the data) */
    for (size_t k = 0; rc == ACCEL_OK && k < n; k++) {
        const char *p = pc[seq[k]].data;
        uint64_t left = out[seq[k]].bytes;
        XXH3_64bits_reset(h);
        while (rc == ACCEL_OK && left > 0) {
            size_t c = left > HASH_CHUNK ? HASH_CHUNK : (size_t)left;
            XXH3_64bits_update(h, p, c);
            rc = ckpt__out_write(&f, p, c, err);
            p += c;
            left -= c;
        }
        sums[seq[k]] = XXH3_64bits_digest(h);
    }
    /* the header with the checksums, written last over the space left */
    if (rc == ACCEL_OK) {
        rc = rank_header(o, org, pc, n, sums, out, flat, seq, &head2, &hlen2, err);
        if (rc == ACCEL_OK && hlen2 != hlen)
            rc = accel_error_set(err, ACCEL_EINVAL, "checkpoint save: the header changed size");
        f.head = head2;
    }
    rc = ckpt__out_close(&f, rc, NULL, err);
out:
    accel_free(head);
    accel_free(head2);
    XXH3_freeState(h);
    accel_free(flat);
    accel_free(out);
    accel_free(seq);
    accel_free(sums);
    return rc;
}

/* A root that every user may write to and that lacks the sticky bit lets
 * anyone rename, replace or plant the checkpoints in it: refused.  With
 * the sticky bit (as /tmp) others can still add step directories that a
 * resume would pick: a warning. */
static enum accel_err check_root(const char *root, unsigned rank, struct accel_error *err)
{
    struct stat st;

    if (stat(root, &st) != 0)
        return accel_error_sys(err, ACCEL_EIO, "checkpoint save: couldn't stat the root %s", root);
    if (!S_ISDIR(st.st_mode))
        return accel_error_set(err, ACCEL_EINVAL, "checkpoint save: the root %s is not a directory",
                               root);
    if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
        return accel_error_set(
            err, ACCEL_EPERM,
            "checkpoint save: the root %s is writable by every user (mode %04o): anyone could "
            "replace its checkpoints or make the clean-up remove other files; run chmod o-w %s "
            "(or chmod +t for a shared one)",
            root, (unsigned)(st.st_mode & 07777), root);
    if ((st.st_mode & S_IWOTH) && rank == 0)
        accel_log(ACCEL_LOG_WARN,
                  "checkpoint: the root %s is writable by every user (mode %04o): others can "
                  "add checkpoints there that a resume would load",
                  root, (unsigned)(st.st_mode & 07777));
    return ACCEL_OK;
}

enum accel_err ckpt__root_dir(const char *root, unsigned rank, struct accel_error *err)
{
    if (mkdir(root, 0777) != 0 && errno != EEXIST)
        return accel_error_sys(err, errno == EACCES ? ACCEL_EPERM : ACCEL_EIO,
                               "checkpoint save: couldn't create the root %s", root);
    return check_root(root, rank, err);
}

enum accel_err ckpt__step_dir(const char *root, unsigned long step, unsigned rank, char *dir,
                              size_t len, struct accel_error *err)
{
    char name[32], manifest[4200];
    enum accel_err rc;
    struct stat st;

    ckpt__step_name(name, sizeof name, step);
    if (!ckpt__path(dir, len, root, name))
        return accel_error_set(err, ACCEL_EINVAL, "checkpoint save: path too long: %s", root);
    rc = ckpt__root_dir(root, rank, err);
    if (rc != ACCEL_OK)
        return rc;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return accel_error_sys(err, errno == EACCES ? ACCEL_EPERM : ACCEL_EIO,
                               "checkpoint save: couldn't create %s", dir);
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return accel_error_set(err, ACCEL_EINVAL,
                               "checkpoint save: %s is not a directory (a link is not followed)",
                               dir);
    if (st.st_uid != geteuid())
        return accel_error_set(err, ACCEL_EPERM,
                               "checkpoint save: %s belongs to uid %u, not to this process's uid "
                               "%u: a step is saved into a directory of its own",
                               dir, (unsigned)st.st_uid, (unsigned)geteuid());
    if (ckpt__path(manifest, sizeof manifest, dir, CK_MANIFEST) && access(manifest, F_OK) == 0)
        return accel_error_set(err, ACCEL_EINVAL,
                               "checkpoint save: %s already holds a committed checkpoint (step "
                               "%lu); steps are saved once",
                               dir, step);
    return ACCEL_OK;
}

void ckpt__tell(unsigned rank, const struct accel_error *err)
{
    accel_log(ACCEL_LOG_ERROR, "rank %u: %s", rank, err->msg);
}

enum accel_err ckpt__agreed(enum accel_err rc, enum accel_err arc, bool all,
                            struct accel_error *err, const char *fmt, ...)
{
    char msg[sizeof err->msg];
    va_list ap;

    if (rc != ACCEL_OK || arc != ACCEL_OK)
        return rc != ACCEL_OK ? rc : arc;
    if (all)
        return ACCEL_OK;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return accel_error_set(err, ACCEL_EPEER, "%s", msg);
}

/* Every rank's outcome through o->agree, as ckpt__sv_agree does it for the
 * saver: a rank whose own `mine` failed tells why first and keeps its err. */
static enum accel_err agree(const struct accel_ckpt_save_opts *o, enum accel_err mine, bool *all,
                            struct accel_error *err)
{
    if (mine != ACCEL_OK)
        ckpt__tell(o->rank, err);
    return o->agree(o->agree_ctx, mine == ACCEL_OK, all, mine == ACCEL_OK ? err : NULL);
}

enum accel_err accel_ckpt_save(const struct accel_ckpt_save_opts *o,
                               const struct accel_ckpt_piece *pieces, size_t npieces,
                               struct accel_error *err)
{
    char dir[4096];
    enum accel_err rc, arc;
    bool all = false;
    int lock = -1;

    if (!o || !o->agree)
        return accel_error_set(err, ACCEL_EINVAL, "checkpoint save: no options or agree function");
    rc = ckpt__check_save(o, pieces, npieces, err);
    /* one job per root: rank 0 holds the root's lock for the save, and no
     * rank writes before it has it */
    if (rc == ACCEL_OK && o->rank == 0 && (rc = ckpt__root_dir(o->root, 0, err)) == ACCEL_OK)
        rc = ckpt__lock_take(o->root, NULL, &lock, err);
    arc = agree(o, rc, &all, err);
    rc = ckpt__agreed(rc, arc, all, err,
                      "checkpoint step %lu: rank 0 couldn't lock the checkpoint root %s, "
                      "or another rank's arguments are wrong (their logs say why); nothing "
                      "was written, nothing was committed",
                      o->step, o->root);
    if (rc != ACCEL_OK)
        goto out;
    rc = ckpt__step_dir(o->root, o->step, o->rank, dir, sizeof dir, err);
    if (rc == ACCEL_OK)
        rc = ckpt__write_rank(o, NULL, dir, pieces, npieces, err);
    arc = agree(o, rc, &all, err);
    rc = ckpt__agreed(rc, arc, all, err,
                      "checkpoint step %lu: another rank couldn't write its part; "
                      "nothing was committed",
                      o->step);
    if (rc != ACCEL_OK)
        goto out;
    if (o->rank == 0)
        rc = ckpt__commit(o, dir, err);
    arc = agree(o, rc, &all, err);
    rc = ckpt__agreed(rc, arc, all, err,
                      "checkpoint step %lu: rank 0 couldn't commit it (its log says why)", o->step);
    /* after the agreement, so that no rank waits in it for the clean-up */
    if (rc == ACCEL_OK && o->rank == 0)
        ckpt__after_commit(o);
out:
    ckpt__lock_drop(lock);
    return rc;
}
