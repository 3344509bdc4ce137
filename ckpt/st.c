/*
 * st.c: the safetensors header, read with every rule of the reference
 * reader and written as the reference writer lays it out (st_int.h).  Tensor
 * bytes are the caller's: this file only says where they go.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/utf8.h"
#include "st_int.h"

/* safetensors' dtypes (the Rust enum at 0.8) and their bits. */
static const struct {
    const char *name;
    unsigned bits;
} dtypes[] = {
    {"BOOL", 8},        {"F4", 4},      {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},
    {"I8", 8},          {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8},
    {"F8_E5M2FNUZ", 8}, {"I16", 16},    {"U16", 16},    {"F16", 16},    {"BF16", 16},
    {"I32", 32},        {"U32", 32},    {"F32", 32},    {"C64", 64},    {"F64", 64},
    {"I64", 64},        {"U64", 64},
};

/* JSON numbers must be integers in [0, 2^53] to survive cJSON's double. */
#define ST_MAX_INT 9007199254740992.0

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct ckpt__st_tensor *)a)->name,
                  ((const struct ckpt__st_tensor *)b)->name);
}

static int by_begin(const void *a, const void *b)
{
    const struct ckpt__st_tensor *x = a, *y = b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

bool ckpt__st_numel(const uint64_t *shape, unsigned ndim, uint64_t *numel)
{
    uint64_t n = 1;

    for (unsigned i = 0; i < ndim; i++) {
        if (shape[i] != 0 && n > (UINT64_C(1) << 63) / shape[i])
            return false;
        n *= shape[i];
    }
    *numel = n;
    return true;
}

bool ckpt__st_json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > ST_MAX_INT ||
        (double)(uint64_t)v->valuedouble != v->valuedouble)
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

static bool json_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* What cJSON lets through and serde_json does not, in the two documents
 * read here (whose numbers are all unsigned integers): a control byte in a
 * string or outside one (other than whitespace), and a number written with
 * a sign, a fraction, an exponent or a leading zero. */
static bool json_strict(const char *json, size_t n)
{
    bool in_str = false;

    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)json[i];
        if (in_str) {
            if (ch < 0x20)
                return false;
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch < 0x20 && !json_ws((char)ch)) {
            return false;
        } else if (ch == '-' || ch == '+' || ch == '.') {
            return false;
        } else if (ch >= '0' && ch <= '9') {
            size_t start = i;
            while (i + 1 < n && json[i + 1] >= '0' && json[i + 1] <= '9')
                i++;
            if ((json[start] == '0' && i > start) ||
                (i + 1 < n && (json[i + 1] == 'e' || json[i + 1] == 'E')))
                return false;
        }
    }
    return true;
}

cJSON *ckpt__st_json_object(const char *json, size_t n)
{
    const char *end = NULL;
    size_t i = 0;
    cJSON *root;

    while (i < n && json_ws(json[i]))
        i++;
    if (i == n || json[i] != '{' || !json_strict(json, n))
        return NULL;
    root = cJSON_ParseWithLengthOpts(json, n, &end, false);
    if (!cJSON_IsObject(root) || !end || end < json || end > json + n) {
        cJSON_Delete(root);
        return NULL;
    }
    for (; end < json + n; end++)
        if (!json_ws(*end)) {
            cJSON_Delete(root);
            return NULL;
        }
    return root;
}

void ckpt__st_header_free(struct ckpt__st_header *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->nt; i++)
        accel_free(h->t[i].name);
    for (size_t i = 0; i < h->nmeta; i++) {
        accel_free(h->meta_key[i]);
        accel_free(h->meta_val[i]);
    }
    accel_free(h->t);
    accel_free(h->meta_key);
    accel_free(h->meta_val);
    memset(h, 0, sizeof *h);
}

static enum accel_err parse_meta(const cJSON *m, const char *what, struct ckpt__st_header *h,
                                 struct accel_error *err)
{
    size_t n = 0, i = 0;

    if (cJSON_IsNull(m))
        return ACCEL_OK;
    if (!cJSON_IsObject(m))
        return accel_error_set(err, ACCEL_EPARSE, "%s: __metadata__ is not an object", what);
    for (const cJSON *v = m->child; v; v = v->next)
        n++;
    if (n > ACCEL_CKPT_MAX_TENSORS)
        return accel_error_set(err, ACCEL_ETOOBIG, "%s: __metadata__ has %zu entries", what, n);
    h->meta_key = accel_calloc(n ? n : 1, sizeof *h->meta_key);
    h->meta_val = accel_calloc(n ? n : 1, sizeof *h->meta_val);
    if (!h->meta_key || !h->meta_val)
        return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory", what);
    for (const cJSON *v = m->child; v; v = v->next, i++) {
        if (!cJSON_IsString(v))
            return accel_error_set(err, ACCEL_EPARSE,
                                   "%s: __metadata__ value of '%s' is not a string", what,
                                   v->string);
        h->meta_key[i] = accel_strdup(v->string);
        h->meta_val[i] = accel_strdup(v->valuestring);
        h->nmeta = i + 1;
        if (!h->meta_key[i] || !h->meta_val[i])
            return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory", what);
    }
    /* sorted by key (insertion sort on the two arrays; metadata is small) */
    for (size_t a = 1; a < h->nmeta; a++)
        for (size_t b = a; b > 0 && strcmp(h->meta_key[b - 1], h->meta_key[b]) >= 0; b--) {
            char *k = h->meta_key[b], *val = h->meta_val[b];
            if (!strcmp(h->meta_key[b - 1], k))
                return accel_error_set(err, ACCEL_EPARSE, "%s: __metadata__ key '%s' twice", what,
                                       k);
            h->meta_key[b] = h->meta_key[b - 1];
            h->meta_val[b] = h->meta_val[b - 1];
            h->meta_key[b - 1] = k;
            h->meta_val[b - 1] = val;
        }
    return ACCEL_OK;
}

static enum accel_err parse_tensor(const cJSON *v, const char *what, struct ckpt__st_tensor *t,
                                   struct accel_error *err)
{
    const cJSON *dt = NULL, *shape = NULL, *off = NULL;
    uint64_t numel;
    size_t i;

    if (strlen(v->string) > ACCEL_CKPT_MAX_NAME)
        return accel_error_set(err, ACCEL_ETOOBIG, "%s: a tensor name of %zu bytes (limit %d)",
                               what, strlen(v->string), ACCEL_CKPT_MAX_NAME);
    if (!cJSON_IsObject(v))
        return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s' is not an object", what,
                               v->string);
    for (const cJSON *f = v->child; f; f = f->next) {
        const cJSON **slot = !strcmp(f->string, "dtype")          ? &dt
                             : !strcmp(f->string, "shape")        ? &shape
                             : !strcmp(f->string, "data_offsets") ? &off
                                                                  : NULL;
        if (!slot)
            return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s' has an unknown field '%s'",
                                   what, v->string, f->string);
        if (*slot)
            return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s' has '%s' twice", what,
                                   v->string, f->string);
        *slot = f;
    }
    if (!dt || !shape || !off)
        return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s' lacks '%s'", what, v->string,
                               !dt      ? "dtype"
                               : !shape ? "shape"
                                        : "data_offsets");
    t->name = accel_strdup(v->string);
    if (!t->name)
        return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory", what);
    for (i = 0; cJSON_IsString(dt) && i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(dt->valuestring, dtypes[i].name))
            break;
    if (!cJSON_IsString(dt) || i == sizeof dtypes / sizeof dtypes[0])
        return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s' has an unknown dtype", what,
                               v->string);
    t->dtype = dtypes[i].name;
    t->bits = dtypes[i].bits;
    if (!cJSON_IsArray(shape))
        return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s': shape is not an array", what,
                               v->string);
    for (const cJSON *d = shape->child; d; d = d->next) {
        if (t->ndim == ACCEL_CKPT_MAX_DIMS)
            return accel_error_set(err, ACCEL_ETOOBIG, "%s: tensor '%s' has over %d dimensions",
                                   what, v->string, ACCEL_CKPT_MAX_DIMS);
        if (!ckpt__st_json_uint(d, &t->shape[t->ndim++]))
            return accel_error_set(err, ACCEL_EPARSE,
                                   "%s: tensor '%s': a dimension is not an integer >= 0", what,
                                   v->string);
    }
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        !ckpt__st_json_uint(off->child, &t->begin) ||
        !ckpt__st_json_uint(off->child->next, &t->end))
        return accel_error_set(err, ACCEL_EPARSE,
                               "%s: tensor '%s': data_offsets is not [begin, end]", what,
                               v->string);
    if (!ckpt__st_numel(t->shape, t->ndim, &numel) || numel > UINT64_MAX / t->bits)
        return accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s': its size overflows", what,
                               v->string);
    if (numel * t->bits % 8)
        return accel_error_set(err, ACCEL_EPARSE,
                               "%s: tensor '%s': %llu elements of %s are not whole bytes", what,
                               v->string, (unsigned long long)numel, t->dtype);
    if (t->end < t->begin || t->end - t->begin != numel * t->bits / 8)
        return accel_error_set(err, ACCEL_EPARSE,
                               "%s: tensor '%s': data_offsets [%llu, %llu] do not hold %llu "
                               "bytes (its shape and dtype)",
                               what, v->string, (unsigned long long)t->begin,
                               (unsigned long long)t->end,
                               (unsigned long long)(numel * t->bits / 8));
    return ACCEL_OK;
}

enum accel_err ckpt__st_parse(const char *json, size_t n, uint64_t data_len, const char *what,
                              struct ckpt__st_header *h, struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;
    cJSON *root = NULL;
    size_t count = 0;
    uint64_t at = 0;

    memset(h, 0, sizeof *h);
    h->data_start = 8 + (uint64_t)n;
    if (!accel_utf8_valid(json, n))
        return accel_error_set(err, ACCEL_EPARSE, "%s: the header is not UTF-8", what);
    root = ckpt__st_json_object(json, n);
    if (!root) {
        rc = accel_error_set(err, ACCEL_EPARSE, "%s: the header is not a JSON object", what);
        goto out;
    }
    for (const cJSON *v = root->child; v; v = v->next)
        count++;
    if (count > ACCEL_CKPT_MAX_TENSORS + 1) {
        rc = accel_error_set(err, ACCEL_ETOOBIG, "%s: %zu tensors (limit %d)", what, count,
                             ACCEL_CKPT_MAX_TENSORS);
        goto out;
    }
    h->t = accel_calloc(count ? count : 1, sizeof *h->t);
    if (!h->t) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory", what);
        goto out;
    }
    for (const cJSON *v = root->child; v; v = v->next) {
        if (!strcmp(v->string, "__metadata__")) {
            if (h->meta_key) {
                rc = accel_error_set(err, ACCEL_EPARSE, "%s: __metadata__ twice", what);
                goto out;
            }
            rc = parse_meta(v, what, h, err);
            if (rc == ACCEL_OK && !h->meta_key)
                h->meta_key = accel_calloc(1, sizeof *h->meta_key); /* seen, empty */
        } else {
            rc = parse_tensor(v, what, &h->t[h->nt], err);
            if (h->t[h->nt].name)
                h->nt++;
        }
        if (rc != ACCEL_OK)
            goto out;
    }
    /* the data buffer: tiled from 0 with no hole, overlap or trailing byte */
    qsort(h->t, h->nt, sizeof *h->t, by_begin);
    for (size_t i = 0; i < h->nt; i++) {
        if (h->t[i].begin != at) {
            rc = accel_error_set(err, ACCEL_EPARSE,
                                 "%s: tensor '%s' starts at byte %llu of the data, not %llu "
                                 "(offsets must tile the data with no hole or overlap)",
                                 what, h->t[i].name, (unsigned long long)h->t[i].begin,
                                 (unsigned long long)at);
            goto out;
        }
        at = h->t[i].end;
    }
    if (at != data_len) {
        rc = accel_error_set(err, ACCEL_EPARSE,
                             "%s: the tensors hold %llu bytes but the file has %llu after the "
                             "header (truncated, or bytes appended)",
                             what, (unsigned long long)at, (unsigned long long)data_len);
        goto out;
    }
    qsort(h->t, h->nt, sizeof *h->t, by_name);
    for (size_t i = 1; i < h->nt; i++)
        if (!strcmp(h->t[i - 1].name, h->t[i].name)) {
            rc = accel_error_set(err, ACCEL_EPARSE, "%s: tensor '%s' twice", what, h->t[i].name);
            goto out;
        }
out:
    cJSON_Delete(root);
    if (rc != ACCEL_OK)
        ckpt__st_header_free(h);
    return rc;
}

static enum accel_err pread_all(int fd, void *buf, size_t n, uint64_t off, const char *what,
                                struct accel_error *err)
{
    char *p = buf;

    while (n > 0) {
        ssize_t got = pread(fd, p, n, (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return accel_error_sys(err, ACCEL_EIO, "%s: couldn't read", what);
        if (got == 0)
            return accel_error_set(err, ACCEL_EIO, "%s: unexpected end of file", what);
        p += got;
        n -= (size_t)got;
        off += (uint64_t)got;
    }
    return ACCEL_OK;
}

enum accel_err ckpt__st_read(int fd, uint64_t file_size, size_t max_header, const char *what,
                             struct ckpt__st_header *h, struct accel_error *err)
{
    unsigned char len8[8];
    uint64_t n = 0;
    enum accel_err rc;
    char *json;

    memset(h, 0, sizeof *h);
    if (file_size < 8)
        return accel_error_set(err, ACCEL_EPARSE, "%s: %llu bytes, too short for a header", what,
                               (unsigned long long)file_size);
    rc = pread_all(fd, len8, 8, 0, what, err);
    if (rc != ACCEL_OK)
        return rc;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len8[i];
    if (n > max_header || n > ST_MAX_HEADER)
        return accel_error_set(err, ACCEL_ETOOBIG, "%s: a header of %llu bytes (limit %zu)", what,
                               (unsigned long long)n,
                               max_header < ST_MAX_HEADER ? max_header : ST_MAX_HEADER);
    if (n > file_size - 8)
        return accel_error_set(err, ACCEL_EPARSE,
                               "%s: the header length %llu runs past the end of the file", what,
                               (unsigned long long)n);
    json = accel_malloc(n ? n : 1);
    if (!json)
        return accel_error_set(err, ACCEL_ENOMEM, "%s: out of memory", what);
    rc = pread_all(fd, json, n, 8, what, err);
    if (rc == ACCEL_OK)
        rc = ckpt__st_parse(json, n, file_size - 8 - n, what, h, err);
    accel_free(json);
    return rc;
}

static int name_vs_tensor(const void *name, const void *t)
{
    return strcmp(name, ((const struct ckpt__st_tensor *)t)->name);
}

const struct ckpt__st_tensor *ckpt__st_find(const struct ckpt__st_header *h, const char *name)
{
    return h->nt ? bsearch(name, h->t, h->nt, sizeof *h->t, name_vs_tensor) : NULL;
}

const char *ckpt__st_meta(const struct ckpt__st_header *h, const char *key)
{
    for (size_t i = 0; i < h->nmeta; i++)
        if (!strcmp(h->meta_key[i], key))
            return h->meta_val[i];
    return NULL;
}

/* ---------------------------------------------------------------- writing */

static int by_size_then_name(const void *a, const void *b)
{
    const struct ckpt__st_out *x = *(const struct ckpt__st_out *const *)a;
    const struct ckpt__st_out *y = *(const struct ckpt__st_out *const *)b;
    size_t sx = accel_dtype_size(x->t->dtype), sy = accel_dtype_size(y->t->dtype);

    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

enum accel_err ckpt__st_build(struct ckpt__st_out *o, size_t n, const struct accel_ckpt_kv *meta,
                              size_t nmeta, char **out, size_t *len, size_t *seq,
                              struct accel_error *err)
{
    return ckpt__st_build_aligned(o, n, meta, nmeta, 8, out, len, seq, err);
}

enum accel_err ckpt__st_build_aligned(struct ckpt__st_out *o, size_t n,
                                      const struct accel_ckpt_kv *meta, size_t nmeta, size_t align,
                                      char **out, size_t *len, size_t *seq, struct accel_error *err)
{
    enum accel_err rc = ACCEL_ENOMEM;
    struct ckpt__st_out **order = NULL;
    cJSON *root = cJSON_CreateObject(), *m = NULL;
    char *json = NULL, *buf = NULL;
    uint64_t at = 0;
    size_t jn, padded;

    *out = NULL;
    *len = 0;
    order = accel_calloc(n ? n : 1, sizeof *order);
    if (!root || !order)
        goto nomem;
    if (nmeta) {
        m = cJSON_AddObjectToObject(root, "__metadata__");
        if (!m)
            goto nomem;
        for (size_t i = 0; i < nmeta; i++)
            if (!cJSON_AddStringToObject(m, meta[i].key, meta[i].value))
                goto nomem;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &o[i];
    qsort(order, n, sizeof *order, by_size_then_name);
    for (size_t i = 0; i < n; i++) {
        const struct accel_ckpt_tensor *t = order[i]->t;
        uint64_t numel;
        cJSON *e, *a;

        if (!accel_dtype_st_name(t->dtype) || t->ndim > ACCEL_CKPT_MAX_DIMS ||
            !ckpt__st_numel(t->shape, t->ndim, &numel) ||
            order[i]->bytes != numel * accel_dtype_size(t->dtype)) {
            rc = accel_error_set(err, ACCEL_EINVAL,
                                 "safetensors header: tensor '%s': %llu bytes do not match its "
                                 "type and shape",
                                 t->name, (unsigned long long)order[i]->bytes);
            goto out;
        }
        order[i]->begin = at;
        if (seq)
            seq[i] = (size_t)(order[i] - o);
        e = cJSON_AddObjectToObject(root, t->name);
        if (!e || !cJSON_AddStringToObject(e, "dtype", accel_dtype_st_name(t->dtype)))
            goto nomem;
        a = cJSON_AddArrayToObject(e, "shape");
        for (unsigned d = 0; a && d < t->ndim; d++)
            if (!cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->shape[d])))
                a = NULL;
        if (!a)
            goto nomem;
        a = cJSON_AddArrayToObject(e, "data_offsets");
        if (!a || !cJSON_AddItemToArray(a, cJSON_CreateNumber((double)at)) ||
            !cJSON_AddItemToArray(a, cJSON_CreateNumber((double)(at + order[i]->bytes))))
            goto nomem;
        at += order[i]->bytes;
        if (at > (UINT64_C(1) << 48)) {
            rc = accel_error_set(err, ACCEL_ETOOBIG,
                                 "safetensors header: a file of over 2^48 bytes");
            goto out;
        }
    }
    json = cJSON_PrintUnformatted(root);
    if (!json)
        goto nomem;
    jn = strlen(json);
    /* trailing spaces (every safetensors reader takes them), so that the
     * data starts `align`-byte aligned: 8 + padded is a multiple of it */
    padded = (8 + jn + align - 1) / align * align - 8;
    if (padded > ST_MAX_HEADER) {
        rc = accel_error_set(err, ACCEL_ETOOBIG, "safetensors header: %zu bytes (limit %u)", padded,
                             ST_MAX_HEADER);
        goto out;
    }
    buf = accel_malloc(8 + padded);
    if (!buf)
        goto nomem;
    for (int i = 0; i < 8; i++)
        buf[i] = (char)((uint64_t)padded >> (8 * i) & 0xff);
    memcpy(buf + 8, json, jn);
    memset(buf + 8 + jn, ' ', padded - jn);
    *out = buf;
    *len = 8 + padded;
    buf = NULL;
    rc = ACCEL_OK;
    goto out;
nomem:
    rc = accel_error_set(err, ACCEL_ENOMEM, "safetensors header: out of memory building it");
out:
    accel_free(buf);
    cJSON_free(json);
    cJSON_Delete(root);
    accel_free(order);
    return rc;
}
