/*
 * consolidate.c: a checkpoint's model weights in the Hugging Face layout
 * (reference/checkpoint.md §1.9): model.safetensors, or model-0000i-of-0000N
 * .safetensors split at max_shard_bytes of tensor data as huggingface_hub
 * splits (over the tensors in name order), plus model.safetensors.index.json
 * {"metadata": {"total_size": N}, "weight_map": {name: file}}; every file
 * with {"format": "pt"}.
 *
 * Each tensor is copied piece by piece (every piece read whole, checksum
 * checked, written in place), so memory is the largest piece, not the model.
 * Every file is written first, as .partial-NAME; a failure then removes
 * them and leaves the earlier export as it was.  Once all are written, the
 * earlier export's files are removed and the new ones renamed into place,
 * the index last: a crash among those steps leaves an incomplete export
 * (run it again), never a mix of two.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/buf.h"
#include "accel/fsutil.h"
#include "accel/log.h"
#include "ckpt_int.h"

#define HF_MAX_SHARD 5000000000ull /* huggingface_hub's default */
#define HF_SINGLE "model.safetensors"
#define HF_INDEX "model.safetensors.index.json"
#define PARTIAL ".partial-" /* see finish_files */

static bool is_model(const struct ckpt__tensor *t)
{
    return strncmp(t->t.name, "optim.", 6) != 0;
}

static uint64_t tensor_bytes(const struct ckpt__tensor *t)
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

static void partial_name(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, PARTIAL "%s", name);
}

/* The name of output file i of an export of nshards shards: the shards,
 * then the index (none for one shard); false past the last. */
static bool output_name(char *buf, size_t len, size_t i, size_t nshards)
{
    if (i < nshards)
        shard_name(buf, len, i, nshards);
    else if (i == nshards && nshards > 1)
        snprintf(buf, len, "%s", HF_INDEX);
    else
        return false;
    return true;
}

/* One output file: the model tensors model[first .. last). */
static enum accel_err write_shard(struct accel_ckpt *c, const char *out, const char *name,
                                  struct ckpt__tensor *const *model, size_t first, size_t last,
                                  void **buf, size_t *buflen, struct accel_error *err)
{
    size_t n = last - first;
    struct ckpt__st_out *o = accel_calloc(n ? n : 1, sizeof *o);
    size_t *seq = accel_calloc(n ? n : 1, sizeof *seq);
    const struct accel_ckpt_kv meta[] = {{"format", "pt"}};
    struct ckpt__out f = {.fd = -1};
    char *head = NULL;
    size_t hlen;
    enum accel_err rc;

    if (!o || !seq) {
        accel_free(o);
        accel_free(seq);
        return accel_error_set(err, ACCEL_ENOMEM, "consolidate: out of memory");
    }
    for (size_t i = 0; i < n; i++)
        o[i] = (struct ckpt__st_out){&model[first + i]->t, tensor_bytes(model[first + i]), 0};
    rc = ckpt__st_build(o, n, meta, 1, &head, &hlen, seq, err);
    if (rc == ACCEL_OK)
        rc = ckpt__out_open(&f, out, name, err);
    if (rc == ACCEL_OK)
        rc = ckpt__out_write(&f, head, hlen, err);
    for (size_t i = 0; rc == ACCEL_OK && i < n; i++) { /* in the order ckpt__st_build laid out */
        const struct ckpt__tensor *t = model[first + seq[i]];
        for (size_t k = 0; rc == ACCEL_OK && k < t->n; k++) {
            const struct ckpt__piece *p = &c->p[t->first + k];
            uint64_t off, len;

            rc = ckpt__piece_at(c, t, k, &off, &len, err);
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
                rc = ckpt__pread(c, p->file, *buf, off, len, p->xxh3, t->t.name, err);
            if (rc == ACCEL_OK)
                rc = ckpt__out_write(&f, *buf, len, err);
        }
    }
    rc = ckpt__out_close(&f, rc, NULL, err);
    accel_free(head);
    accel_free(o);
    accel_free(seq);
    return rc;
}

/* A JSON string literal of s (quotes and escapes by cJSON) appended to b. */
static enum accel_err add_json_string(struct accel_buf *b, const char *s)
{
    cJSON *v = cJSON_CreateString(s);
    char *q = v ? cJSON_PrintUnformatted(v) : NULL;
    enum accel_err rc = q ? accel_buf_puts(b, q) : ACCEL_ENOMEM;

    cJSON_free(q);
    cJSON_Delete(v);
    return rc;
}

/* The index as transformers writes it (json.dumps(indent=2, sort_keys=True)
 * and a newline; the names are in name order already). */
static enum accel_err write_index(const char *out, const char *file,
                                  struct ckpt__tensor *const *model, size_t n,
                                  const size_t *shard_of, size_t nshards, struct accel_error *err)
{
    struct accel_buf b;
    struct ckpt__out f = {.fd = -1};
    uint64_t total = 0;
    char name[64];
    enum accel_err rc;

    for (size_t i = 0; i < n; i++)
        total += tensor_bytes(model[i]);
    accel_buf_init(&b, (size_t)ACCEL_CKPT_MAX_MANIFEST);
    rc = accel_buf_printf(&b,
                          "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n"
                          "  \"weight_map\": {\n",
                          (unsigned long long)total);
    for (size_t i = 0; rc == ACCEL_OK && i < n; i++) {
        shard_name(name, sizeof name, shard_of[i], nshards);
        rc = accel_buf_puts(&b, "    ");
        if (rc == ACCEL_OK)
            rc = add_json_string(&b, model[i]->t.name);
        if (rc == ACCEL_OK)
            rc = accel_buf_printf(&b, ": \"%s\"%s\n", name, i + 1 < n ? "," : "");
    }
    if (rc == ACCEL_OK)
        rc = accel_buf_puts(&b, "  }\n}\n");
    if (rc != ACCEL_OK) {
        accel_buf_free(&b);
        return accel_error_set(err, rc, "consolidate: the index: %s", accel_strerror(rc));
    }
    rc = ckpt__out_open(&f, out, file, err);
    if (rc == ACCEL_OK)
        rc = ckpt__out_write(&f, accel_buf_str(&b), b.len, err);
    rc = ckpt__out_close(&f, rc, NULL, err);
    accel_buf_free(&b);
    return rc;
}

/* True for NNNNN, five decimal digits (huggingface_hub's %05d). */
static bool five_digits(const char *p)
{
    for (int i = 0; i < 5; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

/* True for the names an export is made of: model.safetensors,
 * model-NNNNN-of-NNNNN.safetensors, the index; and their partial files. */
static bool hf_name(const char *name)
{
    static const char pre[] = "model-", of[] = "-of-", ext[] = ".safetensors";
    const size_t len = sizeof pre - 1 + 5 + sizeof of - 1 + 5 + sizeof ext - 1; /* 32 */

    if (!strncmp(name, PARTIAL, sizeof(PARTIAL) - 1))
        name += sizeof(PARTIAL) - 1;
    if (!strcmp(name, HF_SINGLE) || !strcmp(name, HF_INDEX))
        return true;
    return strlen(name) == len && !strncmp(name, pre, sizeof pre - 1) && five_digits(name + 6) &&
           !strncmp(name + 11, of, sizeof of - 1) && five_digits(name + 15) &&
           !strcmp(name + 20, ext);
}

/* Before this consolidation's partial files are renamed into place: removes
 * every export file in OUT but those partial files (an earlier export's,
 * whatever its layout, and partial files a crashed one left), so that a
 * crash among the renames leaves an incomplete export, never a mix of two;
 * never other files (model-ema.safetensors stays). */
static void remove_stale(const char *out, size_t nshards)
{
    DIR *d = ckpt__opendir_nofollow(AT_FDCWD, out);
    struct dirent *e;
    char ours[64], part[80];
    size_t replaced = 0;

    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        bool keep = !hf_name(e->d_name);
        for (size_t i = 0; !keep && output_name(ours, sizeof ours, i, nshards); i++) {
            partial_name(part, sizeof part, ours);
            keep = !strcmp(e->d_name, part);
        }
        if (keep)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) != 0)
            accel_log(ACCEL_LOG_WARN, "consolidate: couldn't remove %s/%s: %s", out, e->d_name,
                      strerror(errno));
        else
            replaced += strncmp(e->d_name, PARTIAL, sizeof(PARTIAL) - 1) != 0;
    }
    closedir(d);
    /* a model.safetensors put there by hand is gone too: said, not silent */
    if (replaced)
        accel_log(ACCEL_LOG_WARN, "consolidate: replaced the %zu file%s of an earlier export in %s",
                  replaced, replaced == 1 ? "" : "s", out);
}

/* huggingface_hub's split (split_state_dict_into_shards_factory), over the
 * tensors in name order: a tensor over `max` bytes is a shard of its own,
 * placed when it is met; otherwise a tensor that would take the open shard
 * past `max` closes it first.  Shards are numbered in the order they close.
 * Returns the count; shard_of[i] is tensor i's shard. */
static size_t split(struct ckpt__tensor *const *model, size_t n, uint64_t max, size_t *shard_of)
{
    size_t nshards = 0, open_first = 0;
    uint64_t size = 0;
    bool open = false;

    for (size_t i = 0; i < n; i++) {
        uint64_t b = tensor_bytes(model[i]);
        if (b > max) {
            shard_of[i] = nshards++;
            continue;
        }
        if (open && size + b > max) { /* close it: its tensors get its number now */
            for (size_t k = open_first; k < i; k++)
                if (shard_of[k] == SIZE_MAX)
                    shard_of[k] = nshards;
            nshards++;
            open = false;
        }
        if (!open) {
            open = true;
            open_first = i;
            size = 0;
        }
        shard_of[i] = SIZE_MAX; /* the open shard's, numbered when it closes */
        size += b;
    }
    if (open) {
        for (size_t k = open_first; k < n; k++)
            if (shard_of[k] == SIZE_MAX)
                shard_of[k] = nshards;
        nshards++;
    }
    return nshards;
}

/* The files are written as ".partial-NAME" and renamed into place once all
 * are (the index last), so a failure leaves the directory as it was: an
 * earlier consolidation's files are never mixed with some of this one's. */

/* Renames the partial files into place (promote), or removes them. */
static enum accel_err finish_files(const char *out, size_t nshards, bool promote,
                                   struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;
    char name[64], part[80], from[4200], to[4200];

    for (size_t i = 0; output_name(name, sizeof name, i, nshards); i++) { /* the index last */
        partial_name(part, sizeof part, name);
        if (!ckpt__path(from, sizeof from, out, part) || !ckpt__path(to, sizeof to, out, name))
            return accel_error_set(err, ACCEL_EINVAL, "consolidate: path too long: %s", out);
        if (!promote)
            unlink(from);
        else if (rc == ACCEL_OK && rename(from, to) != 0)
            rc = accel_error_sys(err, ACCEL_EIO, "consolidate: couldn't rename %s to %s", from, to);
    }
    return rc;
}

enum accel_err accel_ckpt_consolidate(struct accel_ckpt *c, const char *out,
                                      uint64_t max_shard_bytes, struct accel_error *err)
{
    struct ckpt__tensor **model = accel_calloc(c->nt ? c->nt : 1, sizeof *model);
    struct ckpt__tensor **grouped = accel_calloc(c->nt ? c->nt : 1, sizeof *grouped);
    size_t *shard_of = accel_calloc(c->nt ? c->nt : 1, sizeof *shard_of);
    size_t *start = NULL, n = 0, nshards = 0, bufsz = 0;
    uint64_t max = max_shard_bytes ? max_shard_bytes : HF_MAX_SHARD;
    enum accel_err rc = ACCEL_OK;
    void *buf = NULL;
    char name[64], part[80];

    if (!model || !grouped || !shard_of) {
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
    nshards = split(model, n, max, shard_of);
    /* each shard's tensors together, in name order (a counting sort) */
    if (!(start = accel_calloc(nshards + 1, sizeof *start))) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "consolidate: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        start[shard_of[i] + 1]++;
    for (size_t s = 0; s < nshards; s++)
        start[s + 1] += start[s];
    for (size_t i = 0, *at = shard_of; i < n; i++, at++)
        grouped[start[*at]++] = model[i];
    for (size_t s = nshards; s > 0; s--) /* back to each shard's first */
        start[s] = start[s - 1];
    start[0] = 0;
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        rc = accel_error_sys(err, errno == EACCES ? ACCEL_EPERM : ACCEL_EIO,
                             "consolidate: couldn't create %s", out);
        goto out;
    }
    for (size_t s = 0; rc == ACCEL_OK && s < nshards; s++) {
        shard_name(name, sizeof name, s, nshards);
        partial_name(part, sizeof part, name);
        rc = write_shard(c, out, part, grouped, start[s], start[s + 1], &buf, &bufsz, err);
    }
    if (rc == ACCEL_OK && nshards > 1) {
        partial_name(part, sizeof part, HF_INDEX);
        rc = write_index(out, part, model, n, shard_of, nshards, err);
    }
    if (rc != ACCEL_OK) { /* the earlier export stays as it was */
        struct accel_error ignored;
        (void)finish_files(out, nshards, false, &ignored);
        goto out;
    }
    remove_stale(out, nshards);
    rc = finish_files(out, nshards, true, err);
    if (rc == ACCEL_OK && accel_fsync_dir(out) != 0)
        rc = accel_error_sys(err, ACCEL_EIO, "consolidate: couldn't fsync %s", out);
out:
    accel_free(buf);
    accel_free(model);
    accel_free(grouped);
    accel_free(shard_of);
    accel_free(start);
    return rc;
}
