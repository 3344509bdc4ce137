/*
 * consolidate.c: a checkpoint's model weights in the Hugging Face layout
 * (reference/checkpoint.md §1.9): model.safetensors, or model-0000i-of-0000N
 * .safetensors split greedily (in name order) at max_shard_bytes of tensor
 * data, plus model.safetensors.index.json {"metadata": {"total_size": N},
 * "weight_map": {name: file}}; every file with {"format": "pt"}.
 *
 * Each tensor is copied piece by piece (every piece read whole, checksum
 * checked, written in place), so memory is the largest piece, not the model.
 * Files are written under temporary names and renamed; then the files of an
 * earlier consolidation into the same directory that this one did not
 * write are removed, so the directory never mixes two layouts.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "accel/log.h"
#include "ckpt_int.h"

#define HF_MAX_SHARD 5000000000ull /* huggingface_hub's default */
#define HF_SINGLE "model.safetensors"
#define HF_INDEX "model.safetensors.index.json"

static bool is_model(const struct ck_tensor *t)
{
    return strncmp(t->t.name, "optim.", 6) != 0;
}

static uint64_t tensor_bytes(const struct ck_tensor *t)
{
    return t->numel * accel_dtype_size(t->t.dtype);
}

static void shard_name(char *buf, size_t len, size_t i, size_t n)
{
    if (n == 1)
        snprintf(buf, len, "%s", HF_SINGLE);
    else
        snprintf(buf, len, "model-%05zu-of-%05zu.safetensors", i + 1, n);
}

/* One output file: the model tensors model[first .. last). */
static enum accel_err write_shard(struct accel_ckpt *c, const char *out, const char *name,
                                  struct ck_tensor *const *model, size_t first, size_t last,
                                  void **buf, size_t *buflen, struct accel_error *err)
{
    size_t n = last - first;
    struct st_out *o = accel_calloc(n ? n : 1, sizeof *o);
    size_t *seq = accel_calloc(n ? n : 1, sizeof *seq);
    const struct accel_ckpt_kv meta[] = {{"format", "pt"}};
    struct ck_out f = {.fd = -1};
    char *head = NULL;
    size_t hlen;
    enum accel_err rc;

    if (!o || !seq) {
        accel_free(o);
        accel_free(seq);
        return accel_error_set(err, ACCEL_ENOMEM, "consolidate: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        o[i] = (struct st_out){&model[first + i]->t, tensor_bytes(model[first + i]), 0};
    rc = st_build(o, n, meta, 1, &head, &hlen, seq, err);
    if (rc == ACCEL_OK)
        rc = ck_out_open(&f, out, name, err);
    if (rc == ACCEL_OK)
        rc = ck_out_write(&f, head, hlen, err);
    for (size_t i = 0; rc == ACCEL_OK && i < n; i++) { /* in the order st_build laid out */
        const struct ck_tensor *t = model[first + seq[i]];
        for (size_t k = 0; rc == ACCEL_OK && k < t->n; k++) {
            const struct ck_piece *p = &c->p[t->first + k];
            uint64_t off, len;

            rc = ck_piece_at(c, t, k, &off, &len, err);
            if (rc == ACCEL_OK && *buflen < len) {
                void *b = accel_realloc(*buf, (size_t)len);
                if (!b)
                    rc = accel_error_set(err, ACCEL_ENOMEM,
                                         "consolidate: out of memory for a "
                                         "piece of %" PRIu64 " bytes",
                                         len);
                else {
                    *buf = b;
                    *buflen = (size_t)len;
                }
            }
            if (rc == ACCEL_OK)
                rc = ck_pread(c, p->file, *buf, off, len, p->xxh3, t->t.name, err);
            if (rc == ACCEL_OK)
                rc = ck_out_write(&f, *buf, len, err);
        }
    }
    rc = ck_out_close(&f, rc, err);
    accel_free(head);
    accel_free(o);
    accel_free(seq);
    return rc;
}

static enum accel_err write_index(const char *out, struct ck_tensor *const *model, size_t n,
                                  const size_t *shard_of, size_t nshards, struct accel_error *err)
{
    cJSON *root = cJSON_CreateObject(), *meta, *map;
    uint64_t total = 0;
    char path[4096], name[64], *json = NULL;
    enum accel_err rc;

    for (size_t i = 0; i < n; i++)
        total += tensor_bytes(model[i]);
    if (!root || !(meta = cJSON_AddObjectToObject(root, "metadata")) ||
        !cJSON_AddNumberToObject(meta, "total_size", (double)total) ||
        !(map = cJSON_AddObjectToObject(root, "weight_map")))
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        shard_name(name, sizeof name, shard_of[i], nshards);
        if (!cJSON_AddStringToObject(map, model[i]->t.name, name))
            goto nomem;
    }
    if (!(json = cJSON_Print(root)))
        goto nomem;
    cJSON_Delete(root);
    if (!ck_path(path, sizeof path, out, HF_INDEX)) {
        cJSON_free(json);
        return accel_error_set(err, ACCEL_EINVAL, "path too long: %s", out);
    }
    rc = accel_write_durable(path, json, strlen(json), 0666, err);
    cJSON_free(json);
    return rc;
nomem:
    cJSON_Delete(root);
    return accel_error_set(err, ACCEL_ENOMEM, "consolidate: out of memory");
}

/* Removes model*.safetensors and the index that this consolidation did not
 * write (an earlier one's, of another layout). */
static void remove_stale(const char *out, size_t nshards)
{
    DIR *d = opendir(out);
    struct dirent *e;
    char ours[64];

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        bool hf = (!strncmp(e->d_name, "model", 5) && len > 12 &&
                   !strcmp(e->d_name + len - 12, ".safetensors")) ||
                  !strcmp(e->d_name, HF_INDEX);
        bool keep = !hf || (nshards > 1 && !strcmp(e->d_name, HF_INDEX));

        for (size_t i = 0; !keep && i < nshards; i++) {
            shard_name(ours, sizeof ours, i, nshards);
            keep = !strcmp(e->d_name, ours);
        }
        if (!keep && unlinkat(dirfd(d), e->d_name, 0) != 0)
            accel_log(ACCEL_LOG_WARN, "consolidate: couldn't remove %s/%s: %s", out, e->d_name,
                      strerror(errno));
    }
    closedir(d);
}

enum accel_err accel_ckpt_consolidate(struct accel_ckpt *c, const char *out,
                                      uint64_t max_shard_bytes, struct accel_error *err)
{
    struct ck_tensor **model = accel_calloc(c->nt ? c->nt : 1, sizeof *model);
    size_t *shard_of = accel_calloc(c->nt ? c->nt : 1, sizeof *shard_of);
    size_t n = 0, nshards = 0, first = 0, bufsz = 0;
    uint64_t size = 0, max = max_shard_bytes ? max_shard_bytes : HF_MAX_SHARD;
    enum accel_err rc = ACCEL_OK;
    void *buf = NULL;
    char name[64];

    if (!model || !shard_of) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "consolidate: out of memory");
        goto out;
    }
    for (size_t i = 0; i < c->nt; i++)
        if (is_model(&c->t[i]))
            model[n++] = &c->t[i];
    if (n == 0) {
        rc = accel_error_set(err, ACCEL_ENOTFOUND, "%s: no model tensors (only optim.*)", c->dir);
        goto out;
    }
    /* greedy, in name order: a tensor bigger than max gets a file of its own */
    for (size_t i = 0; i < n; i++) {
        uint64_t b = tensor_bytes(model[i]);
        if (size > 0 && size + b > max) {
            nshards++;
            size = 0;
        }
        shard_of[i] = nshards;
        size += b;
    }
    nshards++;
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        rc = accel_error_sys(err, errno == EACCES ? ACCEL_EPERM : ACCEL_EIO, "couldn't create %s",
                             out);
        goto out;
    }
    for (size_t s = 0; rc == ACCEL_OK && s < nshards; s++) {
        size_t last = first;
        while (last < n && shard_of[last] == s)
            last++;
        shard_name(name, sizeof name, s, nshards);
        rc = write_shard(c, out, name, model, first, last, &buf, &bufsz, err);
        first = last;
    }
    if (rc == ACCEL_OK && nshards > 1)
        rc = write_index(out, model, n, shard_of, nshards, err);
    if (rc == ACCEL_OK) {
        remove_stale(out, nshards);
        if (accel_fsync_dir(out) != 0)
            rc = accel_error_sys(err, ACCEL_EIO, "couldn't fsync %s", out);
    }
out:
    accel_free(buf);
    accel_free(model);
    accel_free(shard_of);
    return rc;
}
