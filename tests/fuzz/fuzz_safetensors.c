/*
 * fuzz_safetensors.c: libFuzzer target for the safetensors header reader
 * and writer (ckpt/st.c).  Each input is used twice:
 *
 *   as a whole file   written to a temporary file and read with ckpt__st_read (the
 *                     8-byte length, the header, the data buffer), with the
 *                     full header cap and with a cap below the input's size;
 *   as header JSON    given to ckpt__st_parse with a data length derived from the
 *                     input: the largest data_offsets end it mentions, so
 *                     that well-formed headers get past the tiling rule.
 *
 * Invariants: no crash, no leak; an accepted header has its tensors sorted
 * by name, unique, each of exactly numel x bits / 8 bytes, tiling the data
 * buffer exactly (so one byte more or less is refused); and a header of
 * F32/BF16/F16 tensors written back by ckpt__st_build reads back to the same
 * names, types, shapes and metadata.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../ckpt/st_int.h"
#include "accel/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One temporary file for every input (unlinked at once: only the fd lives). */
static int tmp_fd(void)
{
    static int fd = -1;
    char path[] = "/tmp/fuzz_safetensors.XXXXXX";

    if (fd < 0) {
        fd = mkstemp(path);
        if (fd < 0)
            abort();
        unlink(path);
    }
    return fd;
}

/* Everything an accepted header promises. */
static void check_header(const struct ckpt__st_header *h, uint64_t data_len)
{
    uint64_t sum = 0;

    for (size_t i = 0; i < h->nt; i++) {
        const struct ckpt__st_tensor *t = &h->t[i];
        uint64_t numel;

        if (i > 0 && strcmp(h->t[i - 1].name, t->name) >= 0)
            abort(); /* sorted by name, unique */
        if (!ckpt__st_numel(t->shape, t->ndim, &numel) || t->end < t->begin ||
            t->end - t->begin != numel * t->bits / 8 || t->end > data_len)
            abort();
        if (ckpt__st_find(h, t->name) != t)
            abort();
        sum += t->end - t->begin;
    }
    if (sum != data_len)
        abort(); /* tiled: no hole, no overlap, no trailing byte */
    for (size_t i = 1; i < h->nmeta; i++)
        if (strcmp(h->meta_key[i - 1], h->meta_key[i]) >= 0)
            abort();
    for (size_t i = 0; i < h->nmeta; i++)
        if (ckpt__st_meta(h, h->meta_key[i]) != h->meta_val[i])
            abort();
}

/* Writes h back with ckpt__st_build (when every tensor is a type the writer
 * knows) and reads the result: the same tensors and metadata. */
static void round_trip(const struct ckpt__st_header *h, uint64_t data_len)
{
    struct accel_ckpt_tensor *ts = accel_calloc(h->nt ? h->nt : 1, sizeof *ts);
    struct ckpt__st_out *out = accel_calloc(h->nt ? h->nt : 1, sizeof *out);
    struct accel_ckpt_kv *kv = accel_calloc(h->nmeta ? h->nmeta : 1, sizeof *kv);
    struct ckpt__st_header back;
    struct accel_error err;
    char *buf = NULL;
    size_t len = 0;
    enum accel_err rc;

    if (!ts || !out || !kv)
        goto out;
    for (size_t i = 0; i < h->nt; i++) {
        const struct ckpt__st_tensor *t = &h->t[i];
        if (!accel_dtype_from_st_name(t->dtype, &ts[i].dtype))
            goto out; /* a type only the reader knows */
        ts[i].name = t->name;
        ts[i].ndim = t->ndim;
        memcpy(ts[i].shape, t->shape, sizeof t->shape);
        out[i].t = &ts[i];
        out[i].bytes = t->end - t->begin;
    }
    for (size_t i = 0; i < h->nmeta; i++)
        kv[i] = (struct accel_ckpt_kv){h->meta_key[i], h->meta_val[i]};
    rc = ckpt__st_build(out, h->nt, kv, h->nmeta, &buf, &len, NULL, &err);
    if (rc == ACCEL_ETOOBIG || rc == ACCEL_ENOMEM)
        goto out;
    if (rc != ACCEL_OK || len < 8 || len % 8 != 0)
        abort(); /* the writer refused what the reader accepted */
    if (ckpt__st_parse(buf + 8, len - 8, data_len, "round trip", &back, &err) != ACCEL_OK)
        abort();
    if (back.nt != h->nt || back.nmeta != h->nmeta)
        abort();
    for (size_t i = 0; i < h->nt; i++)
        if (strcmp(back.t[i].name, h->t[i].name) || strcmp(back.t[i].dtype, h->t[i].dtype) ||
            back.t[i].ndim != h->t[i].ndim ||
            memcmp(back.t[i].shape, h->t[i].shape, sizeof h->t[i].shape) ||
            back.t[i].end - back.t[i].begin != h->t[i].end - h->t[i].begin ||
            back.t[i].begin != out[i].begin)
            abort();
    for (size_t i = 0; i < h->nmeta; i++)
        if (strcmp(back.meta_key[i], h->meta_key[i]) || strcmp(back.meta_val[i], h->meta_val[i]))
            abort();
    ckpt__st_header_free(&back);
out:
    accel_free(buf);
    accel_free(ts);
    accel_free(out);
    accel_free(kv);
}

/* The largest data_offsets end the input mentions (0 when none). */
static uint64_t derived_len(const uint8_t *data, size_t size)
{
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);
    uint64_t len = 0, end;

    for (const cJSON *t = cJSON_IsObject(root) ? root->child : NULL; t; t = t->next) {
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
        if (cJSON_GetArraySize(off) == 2 && ckpt__st_json_uint(off->child->next, &end) && end > len)
            len = end;
    }
    cJSON_Delete(root);
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ckpt__st_header h;
    struct accel_error err;
    uint64_t len;
    int fd = tmp_fd();

    /* the input as a file */
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
        abort();
    if (ckpt__st_read(fd, size, ST_MAX_HEADER, "input", &h, &err) == ACCEL_OK) {
        if (size < h.data_start)
            abort();
        check_header(&h, size - h.data_start);
        ckpt__st_header_free(&h);
    }
    if (size > 16 && ckpt__st_read(fd, size, size / 2, "input", &h, &err) == ACCEL_OK) {
        if (h.data_start - 8 > size / 2)
            abort(); /* past the cap */
        ckpt__st_header_free(&h);
    }

    /* the input as header JSON */
    len = derived_len(data, size);
    if (ckpt__st_parse((const char *)data, size, len, "input", &h, &err) == ACCEL_OK) {
        struct ckpt__st_header other;
        check_header(&h, len);
        round_trip(&h, len);
        ckpt__st_header_free(&h);
        if (ckpt__st_parse((const char *)data, size, len + 1, "input", &other, &err) == ACCEL_OK)
            abort(); /* a trailing byte */
        if (len > 0 &&
            ckpt__st_parse((const char *)data, size, len - 1, "input", &other, &err) == ACCEL_OK)
            abort(); /* a missing byte */
    }
    return 0;
}
