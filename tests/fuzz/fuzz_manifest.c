/*
 * fuzz_manifest.c: libFuzzer target for the checkpoint manifest reader
 * (ckpt/model.c ckpt__load and ckpt__check, and the read paths behind them).  The
 * input is written twice in a temporary directory that holds no rank file:
 * as DIR/manifest.json, a directory whose name is no step (so any step
 * loads), read with ckpt__load; and as ROOT/step-00000001/manifest.json, read
 * with accel_ckpt_list and accel_ckpt_open on ROOT.
 *
 * Invariants: no crash, no leak; an accepted manifest has its tensors
 * sorted by name and unique, each with a known type, and pieces that tile
 * [0, numel) in order, in files below the world size; it writes back
 * (ckpt__manifest_json) to a manifest that loads to the same model; the listing
 * calls step-00000001 committed, and opening ROOT succeeds, exactly when
 * ckpt__load accepted the manifest and its step is 1; and, with no rank file
 * there, verify and every non-empty read fail cleanly.
 */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../ckpt/ckpt_int.h"
#include "accel/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char top[64], dir[96], root[96], stepdir[128];

/* The temporary directory goes when the process exits normally. */
static void cleanup(void)
{
    char path[160];

    snprintf(path, sizeof path, "%s/manifest.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/manifest.json", stepdir);
    unlink(path);
    rmdir(dir);
    rmdir(stepdir);
    rmdir(root);
    rmdir(top);
}

static void setup(void)
{
    char tmpl[] = "/tmp/fuzz_manifest.XXXXXX";

    if (dir[0])
        return;
    if (!mkdtemp(tmpl))
        abort();
    snprintf(top, sizeof top, "%s", tmpl);
    atexit(cleanup);
    snprintf(dir, sizeof dir, "%s/ckpt", tmpl);
    snprintf(root, sizeof root, "%s/root", tmpl);
    snprintf(stepdir, sizeof stepdir, "%s/step-00000001", root);
    if (mkdir(dir, 0700) != 0 || mkdir(root, 0700) != 0 || mkdir(stepdir, 0700) != 0)
        abort();
}

static void write_manifest(const char *in, const void *data, size_t size)
{
    char manifest[160];
    int fd;

    snprintf(manifest, sizeof manifest, "%s/manifest.json", in);
    fd = open(manifest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) != 0)
        abort();
}

static void check_model(const struct accel_ckpt *c)
{
    if (c->world < 1 || c->world > ACCEL_CKPT_MAX_WORLD || c->nf != c->world ||
        c->step > ACCEL_CKPT_MAX_STEP)
        abort();
    for (size_t i = 0; i < c->nt; i++) {
        const struct ckpt__tensor *t = &c->t[i];
        uint64_t at = 0;

        if ((i > 0 && strcmp(c->t[i - 1].t.name, t->t.name) >= 0) ||
            !accel_dtype_size(t->t.dtype) || t->t.ndim > ACCEL_CKPT_MAX_DIMS ||
            t->first + t->n > c->np || accel_ckpt_find(c, t->t.name) != &t->t)
            abort();
        for (size_t k = 0; k < t->n; k++) {
            const struct ckpt__piece *p = &c->p[t->first + k];
            if (p->lo != at || p->hi <= p->lo || p->file >= c->nf)
                abort();
            at = p->hi;
        }
        if (at != t->numel)
            abort();
    }
}

/* Two models are the same checkpoint. */
static void same(const struct accel_ckpt *a, const struct accel_ckpt *b)
{
    if (a->step != b->step || a->world != b->world || a->nt != b->nt || a->np != b->np ||
        a->nmeta != b->nmeta)
        abort();
    for (size_t i = 0; i < a->nf; i++)
        if (a->f[i].bytes != b->f[i].bytes)
            abort();
    for (size_t i = 0; i < a->nmeta; i++)
        if (strcmp(a->meta[i].key, b->meta[i].key) || strcmp(a->meta[i].value, b->meta[i].value) ||
            !accel_ckpt_meta(b, a->meta[i].key))
            abort();
    for (size_t i = 0; i < a->nt; i++) {
        const struct ckpt__tensor *x = &a->t[i], *y = &b->t[i];
        if (strcmp(x->t.name, y->t.name) || x->t.dtype != y->t.dtype || x->t.ndim != y->t.ndim ||
            memcmp(x->t.shape, y->t.shape, sizeof x->t.shape) || x->n != y->n)
            abort();
        for (size_t k = 0; k < x->n; k++) {
            const struct ckpt__piece *p = &a->p[x->first + k], *q = &b->p[y->first + k];
            if (p->file != q->file || p->lo != q->lo || p->hi != q->hi || p->xxh3 != q->xxh3)
                abort();
        }
    }
}

static void no_files(struct accel_ckpt *c)
{
    struct accel_error err;
    char buf[64];

    if (accel_ckpt_verify(c, &err) == ACCEL_OK)
        abort(); /* every rank file is missing */
    for (size_t i = 0; i < c->nt && i < 8; i++) {
        const struct ckpt__tensor *t = &c->t[i];
        uint64_t hi = t->numel < 4 ? t->numel : 4;
        enum accel_err rc = accel_ckpt_read(c, t->t.name, t->t.dtype, 0, hi, buf, &err);
        if ((hi > 0 && rc == ACCEL_OK) || (hi == 0 && rc != ACCEL_OK))
            abort();
        if (accel_ckpt_read(c, t->t.name, t->t.dtype, 0, t->numel + 1, NULL, &err) != ACCEL_EINVAL)
            abort(); /* past the end */
    }
    if (accel_ckpt_read(c, "\x01 no such tensor", ACCEL_F32, 0, 0, NULL, &err) != ACCEL_ENOTFOUND)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct accel_ckpt *c = NULL, *again = NULL, *opened = NULL;
    struct accel_ckpt_entry *e = NULL;
    struct accel_error err;
    enum accel_err rc;
    size_t n = 0;
    bool step1;
    char *json;

    setup();
    write_manifest(dir, data, size);
    write_manifest(stepdir, data, size);
    rc = ckpt__load(&c, dir, &err);
    if ((rc == ACCEL_OK) != (c != NULL))
        abort();
    step1 = rc == ACCEL_OK && c->step == 1;
    if (accel_ckpt_list(root, &e, &n, &err) != ACCEL_OK || n != 1 || e[0].committed != step1 ||
        e[0].step != 1)
        abort();
    accel_free(e);
    if ((accel_ckpt_open(&opened, root, &err) == ACCEL_OK) != step1)
        abort();
    accel_ckpt_close(opened);
    if (rc != ACCEL_OK)
        return 0;

    check_model(c);
    json = ckpt__manifest_json(c, &err);
    if (!json)
        abort();
    write_manifest(dir, json, strlen(json));
    cJSON_free(json);
    if (ckpt__load(&again, dir, &err) != ACCEL_OK)
        abort(); /* what the writer writes, the reader reads */
    same(c, again);
    accel_ckpt_close(again);
    no_files(c);
    accel_ckpt_close(c);
    return 0;
}
