/*
 * test_ckpt.c: checkpoints (ckpt/, DESIGN 9): the safetensors header both
 * ways and each rule of its reader; saves by W ranks (threads of this
 * process, the agree callback a barrier over them) read back bit-exactly at
 * any world size; the commit protocol's failures, unfinished attempts and
 * clean-up; corrupted rank files and manifests; argument checks; metadata
 * and global shapes.
 *
 * Each case works in a fresh mkdtemp directory under /tmp that it removes
 * when it passes (a failing case leaves it for inspection).  Tensor data are
 * bytes from test_mix32, NaN payloads and all: nothing here does arithmetic
 * on them, every comparison is memcmp.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../ckpt/ckpt_int.h"
#include "../../ckpt/st_int.h"
#include "accel/alloc.h"
#include "accel/ckpt.h"
#include "accel/fsutil.h"
#include "accel/log.h"
#include "barrier.h"
#include "test.h"

/* ---------------------------------------------------------------- helpers */

static char tmpdir[64];

static void make_tmpdir(void)
{
    test_mkdtemp(tmpdir, sizeof tmpdir, "test-ckpt");
    test_note("working in %s", tmpdir);
}

static void remove_tmpdir(void)
{
    test_rmtree(tmpdir);
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* The whole file, NUL-terminated (accel_free). */
static char *slurp(const char *path, size_t *len)
{
    struct accel_error err = {0};
    char *text = NULL;
    size_t n = 0;

    ASSERT_ACCEL_OK(accel_read_file(path, 64u << 20, &text, &n, &err), &err);
    if (len)
        *len = n;
    return text;
}

static void spit(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    ASSERT(fd >= 0);
    ASSERT_INT_EQ(write(fd, data, len), (long long)len);
    ASSERT_OK(close(fd));
}

static uint64_t file_size(const char *path)
{
    struct stat st;

    ASSERT_OK(stat(path, &st));
    return (uint64_t)st.st_size;
}

/* The library's log lines, kept (one test at a time: each runs in its own
 * process). */
static char logged[4096];

static void keep_log(void *ctx, enum accel_log_level level, const char *line)
{
    size_t at = strlen(logged);

    (void)ctx;
    (void)level;
    snprintf(logged + at, sizeof logged - at, "%s\n", line);
}

/* --------------------------------------------- W ranks, W threads, one agree */

#define MAXW 8
#define MAXT 16

/* A barrier that ANDs the ranks' flags, reusable round after round. */

struct agree_ctx {
    struct test_barrier *b;
    unsigned rank, calls;
    enum accel_err fail_with; /* agree itself fails (ACCEL_OK: it does not) */
};

static enum accel_err agree(void *ctx, bool ok, bool *all_ok, struct accel_error *err)
{
    struct agree_ctx *a = ctx;
    uint64_t all = 0;
    enum accel_err rc;

    if (a->fail_with != ACCEL_OK)
        return accel_error_set(err, a->fail_with, "agree: made to fail on rank %u", a->rank);
    a->calls++;
    rc = test_barrier_min(a->b, a->rank, ok ? 1 : 0, &all, 20, err);
    *all_ok = all == 1;
    return rc;
}

struct rank_run {
    struct accel_ckpt_save_opts o;
    const struct accel_ckpt_piece *p;
    size_t n;
    struct agree_ctx a;
    enum accel_err rc;
    struct accel_error err;
};

static void *save_thread(void *arg)
{
    struct rank_run *r = arg;

    r->rc = accel_ckpt_save(&r->o, r->p, r->n, &r->err);
    return NULL;
}

struct save_out {
    enum accel_err rc[MAXW];
    struct accel_error err[MAXW];
    unsigned calls[MAXW];
};

/* accel_ckpt_save on o->world threads, as *o says, rank r saving the n[r]
 * pieces p[r]; every rank has called agree as often as every other. */
static void save_world(const struct accel_ckpt_save_opts *o, struct accel_ckpt_piece p[][MAXT],
                       const size_t *n, struct save_out *out)
{
    struct test_barrier b = TEST_BARRIER_INIT(o->world);
    struct rank_run run[MAXW];
    pthread_t th[MAXW];

    ASSERT(o->world >= 1 && o->world <= MAXW);
    memset(run, 0, sizeof run);
    for (unsigned r = 0; r < o->world; r++) {
        run[r].o = *o;
        run[r].o.rank = r;
        run[r].o.agree = agree;
        run[r].o.agree_ctx = &run[r].a;
        run[r].a = (struct agree_ctx){&b, r, 0, ACCEL_OK};
        run[r].p = p[r];
        run[r].n = n[r];
        ASSERT_OK(pthread_create(&th[r], NULL, save_thread, &run[r]));
    }
    for (unsigned r = 0; r < o->world; r++)
        ASSERT_OK(pthread_join(th[r], NULL));
    for (unsigned r = 0; r < o->world; r++) {
        out->rc[r] = run[r].rc;
        out->err[r] = run[r].err;
        out->calls[r] = run[r].a.calls;
        ASSERT_INT_EQ(out->calls[r], out->calls[0]);
        /* the lock's, the files', the commit's */
        ASSERT(out->calls[r] >= 1 && out->calls[r] <= 3);
    }
}

/* ------------------------------------------------------------ a test model */

struct tdata {
    struct accel_ckpt_tensor t;
    uint64_t numel;
    unsigned char *data; /* numel x element size */
};

struct model {
    struct tdata t[MAXT];
    size_t nt;
};

struct spec {
    const char *name;
    enum accel_dtype dtype;
    unsigned ndim;
    uint64_t shape[3];
};

/* Flattened: 35 + 13 + 24 + 1 + 15 + 13 = 101 elements. */
static const struct spec gpt_spec[] = {
    {"h.0.attn.weight", ACCEL_F32, 2, {7, 5}}, {"h.0.bias", ACCEL_F32, 1, {13}},
    {"h.1.x", ACCEL_F32, 3, {3, 4, 2}},        {"ln_f.scale", ACCEL_F32, 0, {0}},
    {"wte.bf16", ACCEL_BF16, 2, {5, 3}},       {"optim.exp_avg.h.0.bias", ACCEL_F32, 1, {13}},
};

static void model_init(struct model *m, const struct spec *s, size_t n, unsigned seed)
{
    memset(m, 0, sizeof *m);
    ASSERT(n <= MAXT);
    for (size_t i = 0; i < n; i++) {
        struct tdata *t = &m->t[i];
        size_t bytes;

        t->t.name = s[i].name;
        t->t.dtype = s[i].dtype;
        t->t.ndim = s[i].ndim;
        t->numel = 1;
        for (unsigned d = 0; d < s[i].ndim; d++) {
            t->t.shape[d] = s[i].shape[d];
            t->numel *= s[i].shape[d];
        }
        bytes = (size_t)t->numel * accel_dtype_size(s[i].dtype);
        t->data = malloc(bytes ? bytes : 1);
        ASSERT(t->data != NULL);
        for (size_t k = 0; k < bytes; k++)
            t->data[k] =
                (unsigned char)test_mix32(seed * 7919u + (unsigned)i * 104729u + (unsigned)k);
    }
    m->nt = n;
}

static void model_free(struct model *m)
{
    for (size_t i = 0; i < m->nt; i++)
        free(m->t[i].data);
    m->nt = 0;
}

static const struct tdata *model_find(const struct model *m, const char *name)
{
    for (size_t i = 0; i < m->nt; i++)
        if (!strcmp(m->t[i].t.name, name))
            return &m->t[i];
    return NULL;
}

/* FSDP's flat parameter: the tensors back to back, padded to a multiple of
 * world; rank r owns elements [r S, (r + 1) S) of it, and its piece of a
 * tensor is that slice's intersection with the tensor (none, part, all). */
static size_t split(const struct model *m, unsigned world, unsigned rank,
                    struct accel_ckpt_piece *out)
{
    uint64_t total = 0, at = 0, slice, lo, hi;
    size_t n = 0;

    for (size_t i = 0; i < m->nt; i++)
        total += m->t[i].numel;
    slice = (total + world - 1) / world;
    lo = rank * slice;
    hi = lo + slice;
    for (size_t i = 0; i < m->nt; i++) {
        const struct tdata *t = &m->t[i];
        uint64_t a = at > lo ? at : lo, b = at + t->numel < hi ? at + t->numel : hi;

        if (a < b) {
            out[n].t = t->t;
            out[n].lo = a - at;
            out[n].hi = b - at;
            out[n].data = t->data + (a - at) * accel_dtype_size(t->t.dtype);
            n++;
        }
        at += t->numel;
    }
    return n;
}

static void split_all(const struct model *m, unsigned world, struct accel_ckpt_piece p[][MAXT],
                      size_t *n)
{
    for (unsigned r = 0; r < world; r++)
        n[r] = split(m, world, r, p[r]);
}

static struct accel_ckpt_save_opts opts(const char *root, unsigned long step, unsigned world)
{
    struct accel_ckpt_save_opts o = {0};

    o.root = root;
    o.step = step;
    o.world = world;
    return o;
}

/* Saves m at `world` ranks; every rank must succeed, agreeing twice. */
static void save_ok(const struct accel_ckpt_save_opts *o, const struct model *m)
{
    struct accel_ckpt_piece p[MAXW][MAXT];
    size_t n[MAXW];
    struct save_out out;

    split_all(m, o->world, p, n);
    save_world(o, p, n, &out);
    for (unsigned r = 0; r < o->world; r++) {
        if (out.rc[r] != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "rank %u of %u: %s: %s", r, o->world,
                      accel_errname(out.rc[r]), out.err[r].msg);
        ASSERT_INT_EQ(out.calls[r], 3); /* the lock, the files, the commit */
    }
}

/* Elements [lo, hi) of t read from c equal the model's, bit for bit. */
static void check_range(struct accel_ckpt *c, const struct tdata *t, uint64_t lo, uint64_t hi)
{
    size_t esz = accel_dtype_size(t->t.dtype), bytes = (size_t)(hi - lo) * esz;
    unsigned char *buf = malloc(bytes + 1);
    struct accel_error err = {0};

    ASSERT(buf != NULL);
    memset(buf, 0xa5, bytes + 1);
    ASSERT_ACCEL_OK(accel_ckpt_read(c, t->t.name, t->t.dtype, lo, hi, buf, &err), &err);
    if (memcmp(buf, t->data + lo * esz, bytes) != 0)
        test_fail(__FILE__, __LINE__, "tensor '%s' [%llu, %llu): bytes differ", t->t.name,
                  (unsigned long long)lo, (unsigned long long)hi);
    ASSERT_INT_EQ(buf[bytes], 0xa5); /* nothing past hi written */
    free(buf);
}

/* Loading at `world` ranks, each with its own handle on `path`: each reads
 * its FSDP slices (split at that world size) and finds the model's bytes. */
static void load_world(const char *path, const struct model *m, unsigned world)
{
    for (unsigned r = 0; r < world; r++) {
        struct accel_ckpt_piece p[MAXT];
        size_t n = split(m, world, r, p);
        struct accel_error err = {0};
        struct accel_ckpt *c;

        ASSERT_ACCEL_OK(accel_ckpt_open(&c, path, &err), &err);
        for (size_t i = 0; i < n; i++)
            check_range(c, model_find(m, p[i].t.name), p[i].lo, p[i].hi);
        accel_ckpt_close(c);
    }
}

/* Every tensor whole and in random sub-ranges (empty ones too). */
static void check_model(struct accel_ckpt *c, const struct model *m, unsigned seed)
{
    ASSERT_INT_EQ(accel_ckpt_ntensors(c), m->nt);
    for (size_t i = 0; i < m->nt; i++) {
        const struct tdata *t = &m->t[i];

        check_range(c, t, 0, t->numel);
        for (unsigned k = 0; k < 40; k++) {
            uint64_t a = test_mix32(seed + 31u * k + (unsigned)i) % (t->numel + 1);
            uint64_t b = test_mix32(seed + 37u * k + 1000u * (unsigned)i) % (t->numel + 1);
            check_range(c, t, a < b ? a : b, a < b ? b : a);
        }
    }
}

static void read_latest(const char *root, char *buf, size_t len)
{
    char path[512], *text;

    snprintf(path, sizeof path, "%s/latest", root);
    text = slurp(path, NULL);
    snprintf(buf, len, "%s", text);
    accel_free(text);
}

/* ------------------------------------------------------------- safetensors */

TEST(st_round_trip)
{
    const struct accel_ckpt_tensor ts[] = {
        {"b", ACCEL_BF16, 1, {3}},
        {"a", ACCEL_F32, 2, {2, 2}},
        {"c", ACCEL_F16, 1, {1}},
        {"s", ACCEL_F32, 0, {0}},
    };
    struct ckpt__st_out o[4] = {{&ts[0], 6, 0}, {&ts[1], 16, 0}, {&ts[2], 2, 0}, {&ts[3], 4, 0}};
    const struct accel_ckpt_kv meta[] = {{"format", "pt"}, {"k2", "v\"2"}};
    /* the writer's layout: larger elements first, then by name */
    const char *order[] = {"a", "s", "b", "c"};
    const uint64_t begin[] = {0, 16, 20, 26}, end[] = {16, 20, 26, 28};
    struct accel_error err = {0};
    struct ckpt__st_header h;
    char *head, path[512], data[28];
    size_t len, seq[4];
    uint64_t n = 0;
    int fd;

    make_tmpdir();
    ASSERT_ACCEL_OK(ckpt__st_build(o, 4, meta, 2, &head, &len, seq, &err), &err);
    ASSERT_INT_EQ(len % 8, 0);
    for (int i = 7; i >= 0; i--)
        n = n << 8 | (unsigned char)head[i];
    ASSERT_INT_EQ(n, len - 8);
    ASSERT(strncmp(head + 8, "{\"__metadata__\":", 16) == 0);
    ASSERT_INT_EQ(o[1].begin, 0);
    ASSERT_INT_EQ(o[3].begin, 16);
    ASSERT_INT_EQ(o[0].begin, 20);
    ASSERT_INT_EQ(o[2].begin, 26);
    ASSERT_INT_EQ(seq[0], 1); /* o's indices in the order of the data */
    ASSERT_INT_EQ(seq[1], 3);
    ASSERT_INT_EQ(seq[2], 0);
    ASSERT_INT_EQ(seq[3], 2);

    /* a file of that header and 28 data bytes reads back the same */
    snprintf(path, sizeof path, "%s/x.safetensors", tmpdir);
    memset(data, 7, sizeof data);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT(fd >= 0);
    ASSERT_INT_EQ(write(fd, head, len), (long long)len);
    ASSERT_INT_EQ(write(fd, data, sizeof data), (long long)sizeof data);
    ASSERT_ACCEL_OK(ckpt__st_read(fd, len + sizeof data, ST_MAX_HEADER, path, &h, &err), &err);
    close(fd);
    ASSERT_INT_EQ(h.data_start, len);
    ASSERT_INT_EQ(h.nt, 4);
    for (size_t i = 0; i < 4; i++) {
        const struct ckpt__st_tensor *t = ckpt__st_find(&h, order[i]);
        ASSERT(t != NULL);
        ASSERT_INT_EQ(t->begin, begin[i]);
        ASSERT_INT_EQ(t->end, end[i]);
    }
    ASSERT_STR_EQ(h.t[0].name, "a"); /* sorted by name */
    ASSERT_STR_EQ(h.t[3].name, "s");
    ASSERT_STR_EQ(ckpt__st_find(&h, "a")->dtype, "F32");
    ASSERT_INT_EQ(ckpt__st_find(&h, "a")->ndim, 2);
    ASSERT_INT_EQ(ckpt__st_find(&h, "a")->shape[1], 2);
    ASSERT_STR_EQ(ckpt__st_find(&h, "b")->dtype, "BF16");
    ASSERT_INT_EQ(ckpt__st_find(&h, "b")->bits, 16);
    ASSERT_STR_EQ(ckpt__st_find(&h, "c")->dtype, "F16");
    ASSERT_INT_EQ(ckpt__st_find(&h, "s")->ndim, 0);
    ASSERT(ckpt__st_find(&h, "zz") == NULL);
    ASSERT_INT_EQ(h.nmeta, 2);
    ASSERT_STR_EQ(ckpt__st_meta(&h, "format"), "pt");
    ASSERT_STR_EQ(ckpt__st_meta(&h, "k2"), "v\"2");
    ASSERT(ckpt__st_meta(&h, "nope") == NULL);
    ckpt__st_header_free(&h);
    ckpt__st_header_free(&h); /* twice is harmless */
    accel_free(head);

    /* nothing at all: "{}" padded with spaces to 8 bytes */
    ASSERT_ACCEL_OK(ckpt__st_build(o, 0, NULL, 0, &head, &len, NULL, &err), &err);
    ASSERT_INT_EQ(len, 16);
    ASSERT(memcmp(head + 8, "{}      ", 8) == 0);
    ASSERT_ACCEL_OK(ckpt__st_parse(head + 8, len - 8, 0, "empty", &h, &err), &err);
    ASSERT_INT_EQ(h.nt, 0);
    ckpt__st_header_free(&h);
    accel_free(head);

    /* bytes that do not match the shape, a type it does not know */
    o[1].bytes = 15;
    ASSERT_ERR(ckpt__st_build(o, 4, NULL, 0, &head, &len, NULL, &err), &err, ACCEL_EINVAL, "'a'");
    ASSERT(head == NULL);
    o[1].bytes = 16;
    {
        struct accel_ckpt_tensor bad = {"q", (enum accel_dtype)9, 1, {1}};
        struct ckpt__st_out ob = {&bad, 4, 0};
        ASSERT_ERR(ckpt__st_build(&ob, 1, NULL, 0, &head, &len, NULL, &err), &err, ACCEL_EINVAL,
                   "'q'");
    }
    remove_tmpdir();
}

#define F32(name, b, e)                                                                            \
    "\"" name "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" b "," e "]}"

static const struct {
    const char *json;
    uint64_t data_len;
    enum accel_err code;
    const char *msg;
} st_bad[] = {
    /* not UTF-8 (a lone continuation byte, a truncated sequence) */
    {"{" F32("a", "0", "4") ",\"\x80\":1}", 4, ACCEL_EPARSE, "not UTF-8"},
    {"{\"\xc3\":1}", 0, ACCEL_EPARSE, "not UTF-8"},
    /* not an object */
    {"[1,2]", 0, ACCEL_EPARSE, "not a JSON object"},
    {"nope", 0, ACCEL_EPARSE, "not a JSON object"},
    {"", 0, ACCEL_EPARSE, "not a JSON object"},
    {"{\"a\":", 0, ACCEL_EPARSE, "not a JSON object"},
    /* only JSON whitespace either side of the object (serde_json's rule) */
    {"{} x", 0, ACCEL_EPARSE, "not a JSON object"},
    {"{}{}", 0, ACCEL_EPARSE, "not a JSON object"},
    {"{}\x01", 0, ACCEL_EPARSE, "not a JSON object"},
    {"\x01{}", 0, ACCEL_EPARSE, "not a JSON object"},
    {"\xef\xbb\xbf{}", 0, ACCEL_EPARSE, "not a JSON object"}, /* a BOM */
    /* tensors */
    {"{\"a\":1}", 0, ACCEL_EPARSE, "tensor 'a' is not an object"},
    {"{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "tensor 'a' has an unknown dtype"},
    {"{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "unknown dtype"},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE, "lacks 'dtype'"},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE, "lacks 'shape'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, ACCEL_EPARSE, "lacks 'data_offsets'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", 4,
     ACCEL_EPARSE, "tensor 'a' has an unknown field 'extra'"},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
     ACCEL_EPARSE, "'dtype' twice"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "shape is not an array"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "not a JSON object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "not a JSON object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "not a JSON object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "not a JSON object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "a dimension is not an integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "a dimension is not an integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
     ACCEL_ETOOBIG, "tensor 'a' has over 8 dimensions"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4, ACCEL_EPARSE,
     "data_offsets is not [begin, end]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4, ACCEL_EPARSE,
     "not a JSON object"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 4, ACCEL_EPARSE,
     "data_offsets is not [begin, end]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"b\":0,\"e\":4}}}", 4,
     ACCEL_EPARSE, "data_offsets is not [begin, end]"},
    {"{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, ACCEL_EPARSE,
     "3 elements of F4 are not whole bytes"},
    /* size != numel x bits / 8 */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, ACCEL_EPARSE,
     "do not hold 8 bytes"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, ACCEL_EPARSE,
     "do not hold 4 bytes"},
    /* the data buffer: a hole, an overlap, not from 0, a trailing or missing byte */
    {"{" F32("a", "0", "4") "," F32("b", "8", "12") "}", 12, ACCEL_EPARSE,
     "tensor 'b' starts at byte 8 of the data, not 4"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}," F32("b", "4", "8") "}", 8,
     ACCEL_EPARSE, "tensor 'b' starts at byte 4 of the data, not 8"},
    {"{" F32("a", "4", "8") "}", 8, ACCEL_EPARSE, "starts at byte 4 of the data, not 0"},
    {"{" F32("a", "0", "4") "}", 5, ACCEL_EPARSE, "the tensors hold 4 bytes but the file has 5"},
    {"{" F32("a", "0", "4") "}", 3, ACCEL_EPARSE, "the tensors hold 4 bytes but the file has 3"},
    /* a name twice */
    {"{" F32("a", "0", "4") "," F32("a", "4", "8") "}", 8, ACCEL_EPARSE, "tensor 'a' twice"},
    /* __metadata__ */
    {"{\"__metadata__\":{\"k\":1}}", 0, ACCEL_EPARSE, "__metadata__ value of 'k' is not a string"},
    {"{\"__metadata__\":{\"k\":\"v\",\"j\":null}}", 0, ACCEL_EPARSE, "value of 'j' is not"},
    {"{\"__metadata__\":[]}", 0, ACCEL_EPARSE, "__metadata__ is not an object"},
    {"{\"__metadata__\":\"x\"}", 0, ACCEL_EPARSE, "__metadata__ is not an object"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, ACCEL_EPARSE, "__metadata__ twice"},
    {"{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, ACCEL_EPARSE, "key 'k' twice"},
};

TEST(st_parse_rejects)
{
    struct accel_error err;
    struct ckpt__st_header h;

    for (size_t i = 0; i < sizeof st_bad / sizeof st_bad[0]; i++) {
        enum accel_err rc;

        memset(&err, 0, sizeof err);
        memset(&h, 0x5a, sizeof h);
        rc = ckpt__st_parse(st_bad[i].json, strlen(st_bad[i].json), st_bad[i].data_len, "f.st", &h,
                            &err);
        if (rc != st_bad[i].code || !strstr(err.msg, st_bad[i].msg) || !strstr(err.msg, "f.st"))
            test_fail(__FILE__, __LINE__, "case %zu (%s): %s \"%s\", expected %s \"%s\"", i,
                      st_bad[i].json, accel_errname(rc), err.msg, accel_errname(st_bad[i].code),
                      st_bad[i].msg);
        ASSERT(h.t == NULL && h.nt == 0 && h.meta_key == NULL && h.nmeta == 0);
    }

    /* a name over ACCEL_CKPT_MAX_NAME bytes */
    {
        char json[1024], name[ACCEL_CKPT_MAX_NAME + 2];

        memset(name, 'n', sizeof name - 1);
        name[sizeof name - 1] = '\0';
        snprintf(json, sizeof json,
                 "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],"
                 "\"data_offsets\":[0,4]}}",
                 name);
        ASSERT_ERR(ckpt__st_parse(json, strlen(json), 4, "f.st", &h, &err), &err, ACCEL_ETOOBIG,
                   "a tensor name of 513 bytes");
    }
}

TEST(st_parse_accepts)
{
    static const struct {
        const char *json;
        uint64_t data_len;
        size_t nt, nmeta;
    } ok[] = {
        /* whitespace either side (the writer pads with spaces) */
        {"  \n\t{" F32("a", "0", "4") "}   \n  ", 4, 1, 0},
        {"{}", 0, 0, 0},
        {"{\"__metadata__\":{}}", 0, 0, 0},
        {"{\"__metadata__\":null}", 0, 0, 0},
        {"{\"__metadata__\":{\"z\":\"1\",\"a\":\"\",\"m\":\"x\"}}", 0, 0, 3},
        /* zero-size tensors, at the start and at the end */
        {"{\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]}," F32(
             "a", "0", "4") ",\"y\":{\"dtype\":\"BF16\",\"shape\":[2,0],\"data_offsets\":[4,4]}}",
         4, 3, 0},
        /* a scalar, other types */
        {"{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[8,11]},"
         "\"f\":{\"dtype\":\"F4\",\"shape\":[2,3],\"data_offsets\":[11,14]}}",
         14, 3, 0},
    };
    struct accel_error err = {0};
    struct ckpt__st_header h;

    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        enum accel_err rc =
            ckpt__st_parse(ok[i].json, strlen(ok[i].json), ok[i].data_len, "ok.st", &h, &err);
        if (rc != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "case %zu (%s): %s", i, ok[i].json, err.msg);
        ASSERT_INT_EQ(h.nt, ok[i].nt);
        ASSERT_INT_EQ(h.nmeta, ok[i].nmeta);
        ASSERT_INT_EQ(h.data_start, 8 + strlen(ok[i].json));
        if (i == 4) { /* metadata sorted by key */
            ASSERT_STR_EQ(h.meta_key[0], "a");
            ASSERT_STR_EQ(h.meta_key[2], "z");
            ASSERT_STR_EQ(ckpt__st_meta(&h, "z"), "1");
        }
        if (i == 5) {
            ASSERT_INT_EQ(ckpt__st_find(&h, "z")->begin, 0);
            ASSERT_INT_EQ(ckpt__st_find(&h, "z")->end, 0);
            ASSERT_INT_EQ(ckpt__st_find(&h, "y")->begin, 4);
        }
        ckpt__st_header_free(&h);
    }
}

/* ckpt__st_read: the 8-byte length against the file. */
TEST(st_read_length)
{
    struct accel_error err = {0};
    struct ckpt__st_header h;
    unsigned char buf[64];
    char path[512];
    int fd;

    make_tmpdir();
    snprintf(path, sizeof path, "%s/f.safetensors", tmpdir);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT(fd >= 0);

    /* shorter than the length itself */
    ASSERT_INT_EQ(pwrite(fd, "\x02\0\0\0\0", 5, 0), 5);
    ASSERT_ERR(ckpt__st_read(fd, 5, ST_MAX_HEADER, path, &h, &err), &err, ACCEL_EPARSE,
               "too short");

    /* a header of 100 bytes in a file of 8 + 50 */
    memset(buf, ' ', sizeof buf);
    buf[0] = 100;
    memset(buf + 1, 0, 7);
    ASSERT_INT_EQ(pwrite(fd, buf, 58, 0), 58);
    ASSERT_ERR(ckpt__st_read(fd, 58, ST_MAX_HEADER, path, &h, &err), &err, ACCEL_EPARSE,
               "the header length 100 runs past the end of the file");

    /* over the caps: the reader's and the caller's */
    memset(buf, 0, 8);
    buf[5] = 1; /* 2^40 */
    ASSERT_INT_EQ(pwrite(fd, buf, 8, 0), 8);
    ASSERT_ERR(ckpt__st_read(fd, 58, ST_MAX_HEADER, path, &h, &err), &err, ACCEL_ETOOBIG,
               "a header of 1099511627776 bytes");
    memset(buf, 0, 8);
    buf[0] = 48;
    memcpy(buf + 8, "{}", 2);
    ASSERT_INT_EQ(pwrite(fd, buf, 56, 0), 56);
    ASSERT_ERR(ckpt__st_read(fd, 56, 40, path, &h, &err), &err, ACCEL_ETOOBIG, "limit 40");
    ASSERT_ACCEL_OK(ckpt__st_read(fd, 56, 48, path, &h, &err), &err);
    ASSERT_INT_EQ(h.data_start, 56);
    ckpt__st_header_free(&h);
    /* the same header, a byte of data the header does not account for */
    ASSERT_ERR(ckpt__st_read(fd, 57, 48, path, &h, &err), &err, ACCEL_EPARSE,
               "hold 0 bytes but the file has 1");
    /* a file shorter than the caller says */
    ASSERT_ERR(ckpt__st_read(fd, 200, ST_MAX_HEADER, path, &h, &err), &err, ACCEL_EPARSE,
               "hold 0 bytes but the file has 144");
    close(fd);
    remove_tmpdir();
}

/* -------------------------------------------------------------- save, load */

/* W in 1..5 saves, W' in 1..5 loads: every byte comes back. */
TEST(reshard_bit_exact)
{
    struct model m;
    char root[256], path[512], latest[64];

    make_tmpdir();
    for (unsigned w = 1; w <= 5; w++) {
        struct accel_ckpt_save_opts o;
        struct accel_ckpt_entry *e;
        struct accel_error err = {0};
        struct accel_ckpt *c;
        uint64_t bytes = 0;
        size_t n;

        model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], w);
        snprintf(root, sizeof root, "%s/w%u", tmpdir, w);
        o = opts(root, 10 * w, w);
        save_ok(&o, &m);

        /* on disk: W rank files and the manifest, nothing else */
        snprintf(path, sizeof path, "%s/step-%08u", root, 10 * w);
        ASSERT_INT_EQ(test_count_entries(path), w + 1);
        for (unsigned r = 0; r < w; r++) {
            snprintf(path, sizeof path, "%s/step-%08u/rank-%05u-of-%05u.safetensors", root, 10 * w,
                     r, w);
            ASSERT(exists(path));
            bytes += file_size(path);
        }
        read_latest(root, latest, sizeof latest);
        snprintf(path, sizeof path, "step-%08u\n", 10 * w);
        ASSERT_STR_EQ(latest, path);
        ASSERT_ACCEL_OK(accel_ckpt_list(root, &e, &n, &err), &err);
        ASSERT_INT_EQ(n, 1);
        ASSERT(e[0].committed);
        ASSERT_INT_EQ(e[0].step, 10 * w);
        ASSERT_INT_EQ(e[0].world, w);
        ASSERT_INT_EQ(e[0].bytes, bytes);
        snprintf(path, sizeof path, "step-%08u", 10 * w);
        ASSERT_STR_EQ(e[0].name, path);
        accel_free(e);

        /* the root means its newest committed checkpoint */
        ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
        ASSERT_INT_EQ(accel_ckpt_step(c), 10 * w);
        ASSERT_INT_EQ(accel_ckpt_world(c), w);
        check_model(c, &m, 1000u * w);
        ASSERT_ACCEL_OK(accel_ckpt_verify(c, &err), &err);
        accel_ckpt_close(c);
        for (unsigned w2 = 1; w2 <= 5; w2++)
            load_world(root, &m, w2);
        model_free(&m);
    }
    remove_tmpdir();
}

/* A rank file is a safetensors file: 1-D pieces, {"format": "pt"}, and the
 * pieces' global shapes and ranges in its __metadata__. */
TEST(rank_file_format)
{
    struct model m;
    struct accel_ckpt_save_opts o;
    struct accel_error err = {0};
    struct ckpt__st_header h;
    char root[256], path[512];
    int fd;

    make_tmpdir();
    model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 3);
    snprintf(root, sizeof root, "%s/r", tmpdir);
    o = opts(root, 1, 2);
    save_ok(&o, &m);
    /* rank 1 of 2 holds elements [51, 101): h.1.x [3, 24) and what follows */
    snprintf(path, sizeof path, "%s/step-00000001/rank-00001-of-00002.safetensors", root);
    fd = open(path, O_RDONLY);
    ASSERT(fd >= 0);
    ASSERT_ACCEL_OK(ckpt__st_read(fd, file_size(path), ST_MAX_HEADER, path, &h, &err), &err);
    close(fd);
    ASSERT_INT_EQ(h.data_start % 8, 0);
    ASSERT_STR_EQ(ckpt__st_meta(&h, "format"), "pt");
    ASSERT_CONTAINS(ckpt__st_meta(&h, "accelrun.pieces"), "\"h.1.x\"");
    ASSERT_INT_EQ(h.nt, 4);
    ASSERT_INT_EQ(ckpt__st_find(&h, "h.1.x")->ndim, 1);
    ASSERT_INT_EQ(ckpt__st_find(&h, "h.1.x")->shape[0], 21);
    ASSERT_INT_EQ(ckpt__st_find(&h, "ln_f.scale")->shape[0], 1);
    ASSERT_STR_EQ(ckpt__st_find(&h, "wte.bf16")->dtype, "BF16");
    ASSERT(ckpt__st_find(&h, "h.0.bias") == NULL);
    ckpt__st_header_free(&h);
    model_free(&m);
    remove_tmpdir();
}

/* More ranks than elements: ranks 3 and 4 of 5 hold padding only. */
TEST(ranks_without_pieces)
{
    static const struct spec tiny[] = {{"t", ACCEL_F32, 1, {3}}};
    struct model m;
    struct accel_ckpt_piece p[MAXW][MAXT];
    size_t n[MAXW];
    struct accel_ckpt_save_opts o;
    struct accel_error err = {0};
    struct accel_ckpt *c;
    char root[256], path[512];

    make_tmpdir();
    model_init(&m, tiny, 1, 9);
    split_all(&m, 5, p, n);
    ASSERT_INT_EQ(n[3], 0);
    ASSERT_INT_EQ(n[4], 0);
    snprintf(root, sizeof root, "%s/t", tmpdir);
    o = opts(root, 0, 5);
    save_ok(&o, &m);
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_INT_EQ(accel_ckpt_step(c), 0);
    ASSERT_INT_EQ(accel_ckpt_world(c), 5);
    check_model(c, &m, 5);
    ASSERT_ACCEL_OK(accel_ckpt_verify(c, &err), &err); /* opens the empty files too */
    accel_ckpt_close(c);
    load_world(root, &m, 2);

    /* an empty file damaged: reads do not touch it, verify finds it */
    snprintf(path, sizeof path, "%s/step-00000000/rank-00004-of-00005.safetensors", root);
    ASSERT_OK(truncate(path, (off_t)file_size(path) - 1));
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    check_model(c, &m, 6);
    ASSERT_ERR(accel_ckpt_verify(c, &err), &err, ACCEL_EIO, "rank-00004-of-00005.safetensors");
    accel_ckpt_close(c);
    model_free(&m);
    remove_tmpdir();
}

/* No rank has a piece: a checkpoint of no tensors (metadata only). */
TEST(empty_checkpoint)
{
    struct accel_ckpt_piece p[MAXW][MAXT];
    size_t n[MAXW] = {0};
    struct accel_ckpt_save_opts o;
    struct save_out out;
    struct accel_error err = {0};
    struct accel_ckpt *c;
    const struct accel_ckpt_kv meta[] = {{"seed", "7"}};
    char root[256];

    make_tmpdir();
    snprintf(root, sizeof root, "%s/e", tmpdir);
    o = opts(root, 2, 2);
    o.meta = meta;
    o.nmeta = 1;
    save_world(&o, p, n, &out);
    ASSERT_ACCEL_OK(out.rc[0], &out.err[0]);
    ASSERT_ACCEL_OK(out.rc[1], &out.err[1]);
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_INT_EQ(accel_ckpt_ntensors(c), 0);
    ASSERT_STR_EQ(accel_ckpt_meta(c, "seed"), "7");
    ASSERT(accel_ckpt_tensor_at(c, 0) == NULL);
    ASSERT_ACCEL_OK(accel_ckpt_verify(c, &err), &err);
    accel_ckpt_close(c);
    remove_tmpdir();
}

/* ---------------------------------------------------------- commit protocol */

static void assert_only_step1(const char *root, const char *manifest1, const struct model *m)
{
    struct accel_error err = {0};
    struct accel_ckpt *c;
    char latest[64], path[512], *now;

    read_latest(root, latest, sizeof latest);
    ASSERT_STR_EQ(latest, "step-00000001\n");
    snprintf(path, sizeof path, "%s/step-00000001/manifest.json", root);
    now = slurp(path, NULL);
    ASSERT_STR_EQ(now, manifest1);
    accel_free(now);
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_INT_EQ(accel_ckpt_step(c), 1);
    check_model(c, m, 1);
    accel_ckpt_close(c);
}

TEST(failed_save_commits_nothing)
{
    struct model m1, m2;
    struct accel_ckpt_piece p[MAXW][MAXT];
    size_t n[MAXW];
    struct accel_ckpt_save_opts o;
    struct save_out out;
    char root[256], path[512], *manifest1;

    make_tmpdir();
    snprintf(root, sizeof root, "%s/root", tmpdir);
    model_init(&m1, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 1);
    model_init(&m2, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 2);
    o = opts(root, 1, 2);
    save_ok(&o, &m1);
    snprintf(path, sizeof path, "%s/step-00000001/manifest.json", root);
    manifest1 = slurp(path, NULL);

    /* rank 1 of 3 has a bad piece: it fails alone, the others hear of it */
    o = opts(root, 2, 3);
    split_all(&m2, 3, p, n);
    p[1][0].hi = p[1][0].lo;
    save_world(&o, p, n, &out);
    ASSERT_INT_EQ(out.calls[0], 1);
    ASSERT_INT_EQ(out.rc[1], ACCEL_EINVAL);
    ASSERT_CONTAINS(out.err[1].msg, "is empty or past");
    ASSERT_INT_EQ(out.rc[0], ACCEL_EPEER);
    ASSERT_INT_EQ(out.rc[2], ACCEL_EPEER);
    ASSERT_CONTAINS(out.err[0].msg, "nothing was committed");
    snprintf(path, sizeof path, "%s/step-00000002/manifest.json", root);
    ASSERT(!exists(path));
    assert_only_step1(root, manifest1, &m1);

    /* every file lands but rank 2 leaves its slice out: rank 0 finds the
     * hole before it commits */
    o = opts(root, 3, 3);
    split_all(&m2, 3, p, n);
    n[2] = 0;
    save_world(&o, p, n, &out);
    ASSERT_INT_EQ(out.calls[0], 3);
    ASSERT_INT_EQ(out.rc[0], ACCEL_EINVAL);
    ASSERT_CONTAINS(out.err[0].msg, "pieces cover");
    ASSERT_INT_EQ(out.rc[1], ACCEL_EPEER);
    ASSERT_INT_EQ(out.rc[2], ACCEL_EPEER);
    ASSERT_CONTAINS(out.err[1].msg, "rank 0 couldn't commit");
    snprintf(path, sizeof path, "%s/step-00000003/manifest.json", root);
    ASSERT(!exists(path));
    assert_only_step1(root, manifest1, &m1);

    /* two ranks overlap */
    split_all(&m2, 3, p, n);
    p[1][0].lo--;
    p[1][0].data = (const unsigned char *)p[1][0].data - accel_dtype_size(p[1][0].t.dtype);
    save_world(&o, p, n, &out);
    ASSERT_INT_EQ(out.rc[0], ACCEL_EINVAL);
    ASSERT_CONTAINS(out.err[0].msg, "overlap");
    ASSERT_INT_EQ(out.rc[1], ACCEL_EPEER);
    ASSERT(!exists(path));
    assert_only_step1(root, manifest1, &m1);

    /* two ranks disagree on a tensor's shape */
    split_all(&m2, 3, p, n);
    ASSERT_STR_EQ(p[2][0].t.name, "h.1.x"); /* split over ranks 1 and 2 */
    p[2][0].t.shape[0] = 4;
    save_world(&o, p, n, &out);
    ASSERT_INT_EQ(out.rc[0], ACCEL_EINVAL);
    ASSERT_CONTAINS(out.err[0].msg, "different types or shapes");
    ASSERT_INT_EQ(out.rc[1], ACCEL_EPEER);
    ASSERT_INT_EQ(out.rc[2], ACCEL_EPEER);
    ASSERT(!exists(path));
    assert_only_step1(root, manifest1, &m1);

    accel_free(manifest1);
    model_free(&m1);
    model_free(&m2);
    remove_tmpdir();
}

/* An agree that fails: its error is the save's, on every rank. */
TEST(agree_error)
{
    struct test_barrier b = TEST_BARRIER_INIT(1);
    struct agree_ctx a = {&b, 0, 0, ACCEL_ETIMEDOUT};
    struct accel_ckpt_save_opts o;
    struct accel_ckpt_piece p[MAXW][MAXT];
    size_t n[MAXW];
    struct accel_error err = {0};
    struct model m;
    char root[256], path[512];

    make_tmpdir();
    model_init(&m, gpt_spec, 2, 4);
    split_all(&m, 1, p, n);
    snprintf(root, sizeof root, "%s/root", tmpdir);
    o = opts(root, 4, 1);
    o.agree = agree;
    o.agree_ctx = &a;
    ASSERT_ERR(accel_ckpt_save(&o, p[0], n[0], &err), &err, ACCEL_ETIMEDOUT, "made to fail");
    snprintf(path, sizeof path, "%s/step-00000004/manifest.json", root);
    ASSERT(!exists(path));
    model_free(&m);
    remove_tmpdir();
}

TEST(incomplete_attempt)
{
    struct model m;
    struct accel_ckpt_save_opts o;
    struct accel_ckpt_entry *e;
    struct accel_error err = {0};
    struct accel_ckpt *c;
    char root[256], path[512], latest[64];
    size_t n;

    make_tmpdir();
    snprintf(root, sizeof root, "%s/root", tmpdir);
    model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 7);

    /* nothing there yet, an empty root, a root with an attempt only */
    ASSERT_ERR(accel_ckpt_open(&c, root, &err), &err, ACCEL_ENOTFOUND, root);
    ASSERT(c == NULL);
    ASSERT_ERR(accel_ckpt_list(root, &e, &n, &err), &err, ACCEL_ENOTFOUND, root);
    ASSERT_OK(mkdir(root, 0755));
    ASSERT_ERR(accel_ckpt_open(&c, root, &err), &err, ACCEL_ENOTFOUND, "holds no checkpoint");
    snprintf(path, sizeof path, "%s/step-00000009", root);
    ASSERT_OK(mkdir(path, 0755));
    snprintf(path, sizeof path, "%s/step-00000009/rank-00003-of-00004.safetensors", root);
    spit(path, "half a file", 11);
    snprintf(path, sizeof path, "%s/step-00000009/rank-00000-of-00002.safetensors.tmp", root);
    spit(path, "half a file", 11);
    snprintf(path, sizeof path, "%s/step-9", root); /* not a step name: ignored */
    ASSERT_OK(mkdir(path, 0755));
    ASSERT_ERR(accel_ckpt_open(&c, root, &err), &err, ACCEL_ENOTFOUND,
               "1 attempt without a manifest.json");
    snprintf(path, sizeof path, "%s/step-00000009", root);
    ASSERT_ERR(accel_ckpt_open(&c, path, &err), &err, ACCEL_ENOTFOUND, "holds no checkpoint");

    /* a committed step 5 beside it: loading takes 5, the list has both */
    o = opts(root, 5, 2);
    save_ok(&o, &m);
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_INT_EQ(accel_ckpt_step(c), 5);
    accel_ckpt_close(c);
    ASSERT_ACCEL_OK(accel_ckpt_list(root, &e, &n, &err), &err);
    ASSERT_INT_EQ(n, 2);
    ASSERT_INT_EQ(e[0].step, 5);
    ASSERT(e[0].committed);
    ASSERT_INT_EQ(e[0].world, 2);
    ASSERT_INT_EQ(e[1].step, 9);
    ASSERT(!e[1].committed);
    ASSERT_STR_EQ(e[1].name, "step-00000009");
    ASSERT_INT_EQ(e[1].world, 0);
    ASSERT_INT_EQ(e[1].bytes, 0);
    accel_free(e);

    /* saving step 9 at world 2 reuses the directory and clears it */
    o = opts(root, 9, 2);
    save_ok(&o, &m);
    snprintf(path, sizeof path, "%s/step-00000009/rank-00003-of-00004.safetensors", root);
    ASSERT(!exists(path));
    snprintf(path, sizeof path, "%s/step-00000009/rank-00000-of-00002.safetensors.tmp", root);
    ASSERT(!exists(path));
    snprintf(path, sizeof path, "%s/step-00000009", root);
    ASSERT_INT_EQ(test_count_entries(path), 3);
    read_latest(root, latest, sizeof latest);
    ASSERT_STR_EQ(latest, "step-00000009\n");
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_INT_EQ(accel_ckpt_step(c), 9);
    check_model(c, &m, 9);
    accel_ckpt_close(c);
    model_free(&m);
    remove_tmpdir();
}

TEST(keep_holds_the_newest_n_and_0_holds_all)
{
    struct model m;
    struct accel_ckpt_save_opts o;
    char root[256], path[512], latest[64];

    make_tmpdir();
    model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 5);

    /* keep = 2: the two newest; and a latest.tmp.PID a crash left is gone */
    snprintf(root, sizeof root, "%s/keep2", tmpdir);
    for (unsigned long s = 1; s <= 5; s++) {
        o = opts(root, s, 2);
        o.keep = 2;
        save_ok(&o, &m);
        if (s == 1) {
            snprintf(path, sizeof path, "%s/latest.tmp.99999", root);
            spit(path, "step-", 5);
        }
    }
    ASSERT(!exists(path));
    ASSERT_INT_EQ(test_count_entries(root), 4); /* 2 steps, latest, accelrun.lock */
    snprintf(path, sizeof path, "%s/step-00000004/manifest.json", root);
    ASSERT(exists(path));
    snprintf(path, sizeof path, "%s/step-00000005/manifest.json", root);
    ASSERT(exists(path));
    read_latest(root, latest, sizeof latest);
    ASSERT_STR_EQ(latest, "step-00000005\n");

    /* keep = 0: all of them; an older attempt that never committed goes */
    snprintf(root, sizeof root, "%s/keep0", tmpdir);
    for (unsigned long s = 1; s <= 3; s++) {
        if (s == 3) { /* an attempt at step 0 that never committed */
            snprintf(path, sizeof path, "%s/step-00000000", root);
            ASSERT_OK(mkdir(path, 0755));
        }
        o = opts(root, s, 3);
        save_ok(&o, &m);
    }
    ASSERT_INT_EQ(test_count_entries(root), 5); /* steps 1..3, latest, accelrun.lock */
    snprintf(path, sizeof path, "%s/step-00000000", root);
    ASSERT(!exists(path));

    /* keep = 1: a checkpoint whose manifest this version cannot read (a
     * newer format) is neither counted nor deleted */
    accel_log_set(keep_log, NULL);
    snprintf(root, sizeof root, "%s/keep1", tmpdir);
    o = opts(root, 1, 1);
    save_ok(&o, &m);
    snprintf(path, sizeof path, "%s/step-00000001/manifest.json", root);
    {
        const char *v2 = "{\"format\":\"accelrun.checkpoint\",\"version\":2}";
        spit(path, v2, strlen(v2));
    }
    o = opts(root, 2, 1);
    o.keep = 1;
    save_ok(&o, &m);
    ASSERT(exists(path));
    o = opts(root, 3, 1);
    o.keep = 1;
    save_ok(&o, &m);
    ASSERT(exists(path));
    snprintf(path, sizeof path, "%s/step-00000002", root);
    ASSERT(!exists(path));
    ASSERT_CONTAINS(logged, "keep1/step-00000001 alone: its manifest.json does not load");
    model_free(&m);
    remove_tmpdir();
}

TEST(same_step_twice)
{
    struct model m;
    struct accel_ckpt_piece p[MAXW][MAXT];
    size_t n[MAXW];
    struct accel_ckpt_save_opts o;
    struct save_out out;
    char root[256], path[512], *before, *after;

    make_tmpdir();
    model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 6);
    snprintf(root, sizeof root, "%s/root", tmpdir);
    o = opts(root, 3, 2);
    save_ok(&o, &m);
    snprintf(path, sizeof path, "%s/step-00000003/manifest.json", root);
    before = slurp(path, NULL);
    for (unsigned w = 2; w <= 3; w++) {
        o = opts(root, 3, w);
        split_all(&m, w, p, n);
        save_world(&o, p, n, &out);
        for (unsigned r = 0; r < w; r++) {
            ASSERT_INT_EQ(out.rc[r], ACCEL_EINVAL);
            ASSERT_CONTAINS(out.err[r].msg, "already holds a committed checkpoint");
        }
    }
    after = slurp(path, NULL);
    ASSERT_STR_EQ(after, before);
    snprintf(path, sizeof path, "%s/step-00000003", root);
    ASSERT_INT_EQ(test_count_entries(path), 3); /* no rank-*-of-00003 */
    accel_free(before);
    accel_free(after);
    model_free(&m);
    remove_tmpdir();
}

/* ---------------------------------------------------------------- corruption */

/* Where tensor `name`'s bytes are in a rank file. */
static uint64_t data_offset(const char *path, const char *name)
{
    struct accel_error err = {0};
    struct ckpt__st_header h;
    uint64_t off;
    int fd = open(path, O_RDONLY);

    ASSERT(fd >= 0);
    ASSERT_ACCEL_OK(ckpt__st_read(fd, file_size(path), ST_MAX_HEADER, path, &h, &err), &err);
    close(fd);
    ASSERT(ckpt__st_find(&h, name) != NULL);
    off = h.data_start + ckpt__st_find(&h, name)->begin;
    ckpt__st_header_free(&h);
    return off;
}

static void flip_byte(const char *path, uint64_t off)
{
    unsigned char b;
    int fd = open(path, O_RDWR);

    ASSERT(fd >= 0);
    ASSERT_INT_EQ(pread(fd, &b, 1, (off_t)off), 1);
    b ^= 0x10;
    ASSERT_INT_EQ(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

TEST(corrupt_rank_file)
{
    struct model m;
    struct accel_ckpt_save_opts o;
    struct accel_error err = {0};
    struct accel_ckpt *c;
    char root[256], dir[512], f0[600], f1[600];
    float buf[32];
    uint64_t off, size;
    unsigned char last;

    make_tmpdir();
    model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 8);
    snprintf(root, sizeof root, "%s/root", tmpdir);
    o = opts(root, 1, 2);
    save_ok(&o, &m);
    snprintf(dir, sizeof dir, "%s/step-00000001", root);
    snprintf(f0, sizeof f0, "%s/rank-00000-of-00002.safetensors", dir);
    snprintf(f1, sizeof f1, "%s/rank-00001-of-00002.safetensors", dir);

    /* one byte of rank 0's piece of h.1.x ([0, 3); [3, 24) is rank 1's) */
    off = data_offset(f0, "h.1.x") + 5;
    flip_byte(f0, off);
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, dir, &err), &err); /* rank files: when read */
    ASSERT_ERR(accel_ckpt_read(c, "h.1.x", ACCEL_F32, 0, 24, buf, &err), &err, ACCEL_EIO,
               "checksum mismatch");
    ASSERT_CONTAINS(err.msg, "rank-00000-of-00002.safetensors");
    ASSERT_CONTAINS(err.msg, "'h.1.x'");
    /* a part of that piece: the piece is read whole, and fails */
    ASSERT_ERR(accel_ckpt_read(c, "h.1.x", ACCEL_F32, 2, 3, buf, &err), &err, ACCEL_EIO,
               "checksum mismatch");
    /* rank 1's part, and the other tensors of rank 0, are fine */
    check_range(c, model_find(&m, "h.1.x"), 3, 24);
    check_range(c, model_find(&m, "h.0.bias"), 0, 13);
    ASSERT_ERR(accel_ckpt_verify(c, &err), &err, ACCEL_EIO, "checksum mismatch");
    /* every read checks: put the byte back and the same handle reads it */
    flip_byte(f0, off);
    check_range(c, model_find(&m, "h.1.x"), 0, 24);
    ASSERT_ACCEL_OK(accel_ckpt_verify(c, &err), &err);
    accel_ckpt_close(c);

    /* a byte of the header: a rank file that is no longer safetensors */
    flip_byte(f1, 8); /* '{' becomes 'k' */
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, dir, &err), &err);
    ASSERT_ERR(accel_ckpt_read(c, "ln_f.scale", ACCEL_F32, 0, 1, buf, &err), &err, ACCEL_EPARSE,
               "rank-00001-of-00002.safetensors");
    ASSERT_ERR(accel_ckpt_verify(c, &err), &err, ACCEL_EPARSE, "not a JSON object");
    accel_ckpt_close(c);
    flip_byte(f1, 8);

    /* a rank file one byte short */
    size = file_size(f1);
    {
        int fd = open(f1, O_RDONLY);
        ASSERT(fd >= 0);
        ASSERT_INT_EQ(pread(fd, &last, 1, (off_t)size - 1), 1);
        close(fd);
    }
    ASSERT_OK(truncate(f1, (off_t)size - 1));
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_ERR(accel_ckpt_read(c, "ln_f.scale", ACCEL_F32, 0, 1, buf, &err), &err, ACCEL_EIO,
               "rank-00001-of-00002.safetensors");
    {
        char want[96];
        snprintf(want, sizeof want, "%llu bytes, the manifest says %llu",
                 (unsigned long long)size - 1, (unsigned long long)size);
        ASSERT_CONTAINS(err.msg, want);
    }
    ASSERT_ERR(accel_ckpt_verify(c, &err), &err, ACCEL_EIO, "the manifest says");
    check_range(c, model_find(&m, "h.0.bias"), 0, 13); /* rank 0's file is fine */
    accel_ckpt_close(c);

    /* ... or one byte long */
    ASSERT_OK(truncate(f1, (off_t)size + 1));
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_ERR(accel_ckpt_verify(c, &err), &err, ACCEL_EIO, "the manifest says");
    accel_ckpt_close(c);
    ASSERT_OK(truncate(f1, (off_t)size));
    {
        int fd = open(f1, O_WRONLY);
        ASSERT(fd >= 0);
        ASSERT_INT_EQ(pwrite(fd, &last, 1, (off_t)size - 1), 1);
        close(fd);
    }
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_ACCEL_OK(accel_ckpt_verify(c, &err), &err);
    accel_ckpt_close(c);

    /* a rank file gone */
    ASSERT_OK(unlink(f1));
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_ERR(accel_ckpt_read(c, "ln_f.scale", ACCEL_F32, 0, 1, buf, &err), &err, ACCEL_EIO,
               "couldn't open");
    accel_ckpt_close(c);
    model_free(&m);
    remove_tmpdir();
}

static cJSON *pieces_of(cJSON *root, const char *tensor)
{
    cJSON *t =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "tensors"), tensor);
    cJSON *ps = cJSON_GetObjectItemCaseSensitive(t, "pieces");

    ASSERT(cJSON_IsArray(ps));
    return ps;
}

/* h.1.x is [[0, 0, 3, ..], [1, 3, 24, ..]] at world 2 */
static void edit_hole(cJSON *root)
{
    cJSON *q = cJSON_GetArrayItem(pieces_of(root, "h.1.x"), 1);
    ASSERT(cJSON_ReplaceItemInArray(q, 1, cJSON_CreateNumber(4)));
}

static void edit_overlap(cJSON *root)
{
    cJSON *q = cJSON_GetArrayItem(pieces_of(root, "h.1.x"), 1);
    ASSERT(cJSON_ReplaceItemInArray(q, 1, cJSON_CreateNumber(2)));
}

static void edit_drop_piece(cJSON *root)
{
    cJSON_DeleteItemFromArray(pieces_of(root, "h.1.x"), 1);
}

static void edit_piece_file(cJSON *root)
{
    cJSON *q = cJSON_GetArrayItem(pieces_of(root, "h.1.x"), 1);
    ASSERT(cJSON_ReplaceItemInArray(q, 0, cJSON_CreateNumber(2)));
}

static void edit_piece_object(cJSON *root)
{
    cJSON *ps = pieces_of(root, "h.1.x"), *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "file", 1);
    cJSON_AddNumberToObject(o, "lo", 3);
    cJSON_AddNumberToObject(o, "hi", 24);
    cJSON_AddStringToObject(o, "xxh3", "0123456789abcdef");
    ASSERT(cJSON_ReplaceItemInArray(ps, 1, o));
}

static void edit_format(cJSON *root)
{
    ASSERT(cJSON_ReplaceItemInObject(root, "format", cJSON_CreateString("safetensors")));
}

static void edit_version(cJSON *root)
{
    ASSERT(cJSON_ReplaceItemInObject(root, "version", cJSON_CreateNumber(2)));
}

static void edit_file_name(cJSON *root)
{
    cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "files"), 1);
    ASSERT(cJSON_ReplaceItemInObject(f, "name",
                                     cJSON_CreateString("rank-00000-of-00002.safetensors")));
}

static void edit_dtype(cJSON *root)
{
    cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "tensors"),
                                                "h.1.x");
    ASSERT(cJSON_ReplaceItemInObject(t, "dtype", cJSON_CreateString("F64")));
}

static void edit_shape(cJSON *root)
{
    cJSON *t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "tensors"),
                                                "h.1.x");
    cJSON *s = cJSON_CreateIntArray((const int[]){3, 4, 3}, 3);
    ASSERT(cJSON_ReplaceItemInObject(t, "shape", s));
}

static void edit_world(cJSON *root)
{
    ASSERT(cJSON_ReplaceItemInObject(root, "world_size", cJSON_CreateNumber(3)));
}

TEST(corrupt_manifest)
{
    static const struct {
        void (*edit)(cJSON *root);
        const char *msg;
    } edits[] = {
        {edit_hole, "tensor 'h.1.x': pieces leave out"},
        {edit_overlap, "tensor 'h.1.x': pieces overlap"},
        {edit_drop_piece, "tensor 'h.1.x': pieces cover 3 of its 24 elements"},
        {edit_piece_file, "a piece is not [FILE, LO, HI, \"XXH3\"]"},
        {edit_piece_object, "a piece is not [FILE, LO, HI, \"XXH3\"]"},
        {edit_format, "'format' is not \"accelrun.checkpoint\""},
        {edit_version, "'version' is not 1"},
        {edit_file_name, "files[1] must be"},
        {edit_dtype, "dtype must be F32, BF16 or F16"},
        {edit_shape, "pieces cover 24 of its 36 elements"},
        {edit_world, "'files' must list 3 files"},
    };
    struct model m;
    struct accel_ckpt_save_opts o;
    struct accel_error err = {0};
    struct accel_ckpt *c;
    char root[256], dir[512], manifest[600], *orig;
    size_t len;

    make_tmpdir();
    model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 11);
    snprintf(root, sizeof root, "%s/root", tmpdir);
    o = opts(root, 1, 2);
    save_ok(&o, &m);
    snprintf(dir, sizeof dir, "%s/step-00000001", root);
    snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
    orig = slurp(manifest, &len);

    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        cJSON *doc = cJSON_Parse(orig);
        char *text;

        ASSERT(doc != NULL);
        edits[i].edit(doc);
        text = cJSON_PrintUnformatted(doc);
        spit(manifest, text, strlen(text));
        cJSON_free(text);
        cJSON_Delete(doc);
        memset(&err, 0, sizeof err);
        if (accel_ckpt_open(&c, dir, &err) != ACCEL_EPARSE || !strstr(err.msg, edits[i].msg) ||
            !strstr(err.msg, manifest))
            test_fail(__FILE__, __LINE__, "edit %zu: %s \"%s\", expected EPARSE \"%s\"", i,
                      accel_errname(err.code), err.msg, edits[i].msg);
        ASSERT(c == NULL);
        /* the root's newest checkpoint is that one: its error, not a "no
         * checkpoint" or an older one */
        ASSERT_ERR(accel_ckpt_open(&c, root, &err), &err, ACCEL_EPARSE, edits[i].msg);
    }

    /* not JSON, not UTF-8, not there */
    spit(manifest, "{\"format\":", 10);
    ASSERT_ERR(accel_ckpt_open(&c, dir, &err), &err, ACCEL_EPARSE, "manifest.json: not a JSON");
    spit(manifest, "\"\xff\"", 3);
    ASSERT_ERR(accel_ckpt_open(&c, dir, &err), &err, ACCEL_EPARSE, "manifest.json: not a JSON");

    /* a checksum changed: the manifest is fine, the read is not */
    {
        char *bad = strdup(orig), *x = strstr(bad, "\"h.1.x\"");
        float buf[24];

        ASSERT(x != NULL);
        x = strstr(x, "\"pieces\":[[");
        ASSERT(x != NULL);
        x = strchr(x + 11, '"') + 1; /* the first piece's checksum */
        *x = *x == '0' ? '1' : '0';
        spit(manifest, bad, len);
        free(bad);
        ASSERT_ACCEL_OK(accel_ckpt_open(&c, dir, &err), &err);
        ASSERT_ERR(accel_ckpt_read(c, "h.1.x", ACCEL_F32, 0, 24, buf, &err), &err, ACCEL_EIO,
                   "checksum mismatch");
        accel_ckpt_close(c);
    }

    /* a tensor left out of the manifest: rank 1's file holds one too many */
    {
        cJSON *doc = cJSON_Parse(orig);
        char *text;
        float buf[24];

        ASSERT(doc != NULL);
        cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "tensors"),
                                                "ln_f.scale");
        text = cJSON_PrintUnformatted(doc);
        spit(manifest, text, strlen(text));
        cJSON_free(text);
        cJSON_Delete(doc);
        ASSERT_ACCEL_OK(accel_ckpt_open(&c, dir, &err), &err);
        ASSERT_INT_EQ(accel_ckpt_ntensors(c), 5);
        check_range(c, model_find(&m, "h.0.bias"), 0, 13); /* rank 0's file is as it says */
        ASSERT_ERR(accel_ckpt_read(c, "wte.bf16", ACCEL_BF16, 0, 15, buf, &err), &err, ACCEL_EPARSE,
                   "rank-00001-of-00002.safetensors: 4 tensors, the manifest puts 3");
        ASSERT_ERR(accel_ckpt_verify(c, &err), &err, ACCEL_EPARSE, "the manifest puts 3");
        accel_ckpt_close(c);
    }

    spit(manifest, orig, len);
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    check_model(c, &m, 11);
    accel_ckpt_close(c);
    accel_free(orig);
    model_free(&m);
    remove_tmpdir();
}

/* ---------------------------------------------------------------- arguments */

static enum accel_err save1(const char *root, const struct accel_ckpt_piece *p, size_t n,
                            const struct accel_ckpt_kv *meta, size_t nmeta, struct accel_error *err)
{
    struct test_barrier b = TEST_BARRIER_INIT(1);
    struct agree_ctx a = {&b, 0, 0, ACCEL_OK};
    struct accel_ckpt_save_opts o = opts(root, 1, 1);

    o.meta = meta;
    o.nmeta = nmeta;
    o.agree = agree;
    o.agree_ctx = &a;
    memset(err, 0, sizeof *err);
    return accel_ckpt_save(&o, p, n, err);
}

TEST(bad_arguments)
{
    static const float data[64];
    char root[256], path[512], long_name[ACCEL_CKPT_MAX_NAME + 2];
    struct accel_ckpt_piece p[2] = {
        {{"w", ACCEL_F32, 2, {4, 4}}, 0, 16, data},
        {{"b", ACCEL_F32, 1, {4}}, 0, 4, data},
    };
    struct accel_ckpt_piece q[2];
    const struct accel_ckpt_kv slash[] = {{"a/b", "v"}};
    const struct accel_ckpt_kv empty_key[] = {{"", "v"}};
    const struct accel_ckpt_kv bad_utf8[] = {{"k", "\xc3("}};
    struct accel_ckpt_save_opts o;
    struct accel_error err = {0};

    make_tmpdir();
    snprintf(root, sizeof root, "%s/root", tmpdir);

    /* a name twice on one rank */
    memcpy(q, p, sizeof q);
    q[1].t = q[0].t;
    q[1].lo = 0;
    q[1].hi = 4;
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL,
               "tensor 'w' has two pieces on rank 0");
    /* a piece past its tensor, empty, without data */
    memcpy(q, p, sizeof q);
    q[1].hi = 5;
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL,
               "tensor 'b': the piece [0, 5) is empty or past its 4 elements");
    q[1].hi = 4;
    q[1].lo = 4;
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL, "[4, 4) is empty");
    memcpy(q, p, sizeof q);
    q[0].data = NULL;
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL, "or has no data");
    /* names: too long, empty, not UTF-8, the header's own key */
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    memcpy(q, p, sizeof q);
    q[0].t.name = long_name;
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL, "a name of 1..512 bytes");
    q[0].t.name = "";
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL, "a name of 1..512 bytes");
    q[0].t.name = NULL;
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL, "a name of 1..512 bytes");
    q[0].t.name = "w\xff";
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL, "UTF-8");
    q[0].t.name = "__metadata__";
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL, "__metadata__");
    /* a type, a shape */
    memcpy(q, p, sizeof q);
    q[0].t.dtype = (enum accel_dtype)7;
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL,
               "tensor 'w': bad type or shape");
    memcpy(q, p, sizeof q);
    q[0].t.ndim = ACCEL_CKPT_MAX_DIMS + 1;
    ASSERT_ERR(save1(root, q, 2, NULL, 0, &err), &err, ACCEL_EINVAL,
               "tensor 'w': bad type or shape");
    /* metadata: a key with '/', an empty key, a value not UTF-8, too many */
    ASSERT_ERR(save1(root, p, 2, slash, 1, &err), &err, ACCEL_EINVAL,
               "metadata 0: keys are [A-Za-z0-9_.-]");
    ASSERT_ERR(save1(root, p, 2, empty_key, 1, &err), &err, ACCEL_EINVAL, "metadata 0");
    ASSERT_ERR(save1(root, p, 2, bad_utf8, 1, &err), &err, ACCEL_EINVAL, "metadata 0");
    {
        struct accel_ckpt_kv many[ACCEL_CKPT_MAX_META + 1];
        for (size_t i = 0; i < sizeof many / sizeof many[0]; i++)
            many[i] = (struct accel_ckpt_kv){"k", "v"};
        ASSERT_ERR(save1(root, p, 2, many, ACCEL_CKPT_MAX_META + 1, &err), &err, ACCEL_ETOOBIG,
                   "65 metadata entries");
    }
    /* options */
    o = opts(root, 1, 1);
    ASSERT_ERR(accel_ckpt_save(&o, p, 2, &err), &err, ACCEL_EINVAL, "agree function");
    ASSERT_ERR(accel_ckpt_save(NULL, p, 2, &err), &err, ACCEL_EINVAL, "agree function");
    {
        struct test_barrier b = TEST_BARRIER_INIT(1);
        struct agree_ctx a = {&b, 0, 0, ACCEL_OK};

        o.agree = agree;
        o.agree_ctx = &a;
        o.rank = 1; /* of 1 */
        ASSERT_ERR(accel_ckpt_save(&o, p, 2, &err), &err, ACCEL_EINVAL, "rank < world");
        o.rank = 0;
        o.step = ACCEL_CKPT_MAX_STEP + 1;
        ASSERT_ERR(accel_ckpt_save(&o, p, 2, &err), &err, ACCEL_EINVAL, "a step <=");
        o.step = 1;
        o.root = "";
        ASSERT_ERR(accel_ckpt_save(&o, p, 2, &err), &err, ACCEL_EINVAL, "needs a root");
        o.root = root;
        ASSERT_ERR(accel_ckpt_save(&o, NULL, 2, &err), &err, ACCEL_EINVAL, "needs a root");
        ASSERT_INT_EQ(a.calls, 4); /* every failure still agreed (ok = false) */
    }
    /* nothing of that was committed, nor written */
    snprintf(path, sizeof path, "%s/step-00000001", root);
    ASSERT(!exists(path));

    /* and the arguments that are fine */
    ASSERT_ACCEL_OK(save1(root, p, 2, NULL, 0, &err), &err);
    remove_tmpdir();
}

/* ------------------------------------------------------ metadata and shapes */

TEST(meta_and_shapes)
{
    const struct accel_ckpt_kv meta[] = {
        {"seed", "1234"},
        {"model.n_layer", "12"},
        {"note", "h\xc3\xa9llo \"quoted\" \\ \xe2\x9c\x93"},
        {"empty", ""},
    };
    static const char *const sorted[] = {
        "h.0.attn.weight", "h.0.bias", "h.1.x", "ln_f.scale", "optim.exp_avg.h.0.bias", "wte.bf16"};
    struct model m;
    struct accel_ckpt_save_opts o;
    struct accel_error err = {0};
    struct accel_ckpt *c;
    const struct accel_ckpt_tensor *t;
    char root[256], dir[512];
    float buf[40];

    make_tmpdir();
    model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 12);
    snprintf(root, sizeof root, "%s/root", tmpdir);
    o = opts(root, 12345678, 3);
    o.meta = meta;
    o.nmeta = sizeof meta / sizeof meta[0];
    save_ok(&o, &m);
    snprintf(dir, sizeof dir, "%s/step-12345678", root);

    ASSERT_ACCEL_OK(accel_ckpt_open(&c, root, &err), &err);
    ASSERT_INT_EQ(accel_ckpt_step(c), 12345678);
    ASSERT_INT_EQ(accel_ckpt_world(c), 3);
    ASSERT_STR_EQ(accel_ckpt_dir(c), dir);
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++)
        ASSERT_STR_EQ(accel_ckpt_meta(c, meta[i].key), meta[i].value);
    ASSERT(accel_ckpt_meta(c, "missing") == NULL);
    ASSERT(accel_ckpt_meta(c, "format") == NULL); /* the rank files' own, not the user's */

    ASSERT_INT_EQ(accel_ckpt_ntensors(c), 6);
    for (size_t i = 0; i < 6; i++) {
        const struct tdata *want = model_find(&m, sorted[i]);

        t = accel_ckpt_tensor_at(c, i);
        ASSERT(t != NULL);
        ASSERT_STR_EQ(t->name, sorted[i]);
        ASSERT(accel_ckpt_find(c, sorted[i]) == t);
        ASSERT_INT_EQ(t->dtype, want->t.dtype);
        ASSERT_INT_EQ(t->ndim, want->t.ndim);
        for (unsigned d = 0; d < t->ndim; d++)
            ASSERT_INT_EQ(t->shape[d], want->t.shape[d]);
    }
    ASSERT(accel_ckpt_tensor_at(c, 6) == NULL);
    ASSERT(accel_ckpt_find(c, "h.1") == NULL);
    ASSERT(accel_ckpt_find(c, "zzz") == NULL);
    t = accel_ckpt_find(c, "h.1.x");
    ASSERT_INT_EQ(t->ndim, 3);
    ASSERT_INT_EQ(t->shape[0], 3);
    ASSERT_INT_EQ(t->shape[1], 4);
    ASSERT_INT_EQ(t->shape[2], 2);
    ASSERT_INT_EQ(accel_ckpt_find(c, "ln_f.scale")->ndim, 0);

    /* reads that do not fit */
    ASSERT_ERR(accel_ckpt_read(c, "nope", ACCEL_F32, 0, 1, buf, &err), &err, ACCEL_ENOTFOUND,
               "no tensor 'nope'");
    ASSERT_ERR(accel_ckpt_read(c, "wte.bf16", ACCEL_F32, 0, 1, buf, &err), &err, ACCEL_EINVAL,
               "tensor 'wte.bf16' holds 15 elements of BF16; asked for [0, 1) of F32");
    ASSERT_ERR(accel_ckpt_read(c, "h.0.bias", ACCEL_F32, 0, 14, buf, &err), &err, ACCEL_EINVAL,
               "holds 13 elements");
    ASSERT_ERR(accel_ckpt_read(c, "h.0.bias", ACCEL_F32, 5, 4, buf, &err), &err, ACCEL_EINVAL,
               "[5, 4)");
    ASSERT_ERR(accel_ckpt_read(c, "h.0.bias", ACCEL_F32, 0, 1, NULL, &err), &err, ACCEL_EINVAL,
               "h.0.bias");
    ASSERT_ACCEL_OK(accel_ckpt_read(c, "h.0.bias", ACCEL_F32, 13, 13, NULL, &err), &err);
    accel_ckpt_close(c);
    accel_ckpt_close(NULL);
    model_free(&m);
    remove_tmpdir();
}

/* consolidate: the split and files of huggingface_hub's layout; a
 * consolidation that fails (a damaged piece) leaves the directory's earlier
 * export as it was, with no partial file. */
TEST(consolidate_all_or_nothing)
{
    struct model m;
    struct accel_ckpt_save_opts o;
    struct accel_error err = {0};
    struct accel_ckpt *c;
    char root[256], dir[512], hf[512], f0[600], path[700];
    char *index1, *index2, *shard1, *shard2;
    size_t len1, len2, slen1, slen2;

    make_tmpdir();
    model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 9);
    snprintf(root, sizeof root, "%s/root", tmpdir);
    snprintf(hf, sizeof hf, "%s/hf", tmpdir);
    o = opts(root, 1, 2);
    save_ok(&o, &m);
    snprintf(dir, sizeof dir, "%s/step-00000001", root);
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, dir, &err), &err);
    /* 60 bytes a shard, huggingface_hub's way: h.0.attn.weight (140 bytes)
     * and h.1.x (96) are shards of their own when met (1, 2); h.0.bias (52)
     * and ln_f.scale (4) share the shard that wte.bf16 (30) closes (3);
     * wte.bf16 is the last (4) */
    ASSERT_ACCEL_OK(accel_ckpt_consolidate(c, hf, 0, &err), &err); /* model.safetensors */
    snprintf(path, sizeof path, "%s/model-ema.safetensors", hf);   /* not an export file */
    spit(path, "x", 1);
    ASSERT_ACCEL_OK(accel_ckpt_consolidate(c, hf, 60, &err), &err); /* replaces it */
    accel_ckpt_close(c);
    ASSERT(exists(path));
    snprintf(path, sizeof path, "%s/model.safetensors", hf);
    ASSERT(!exists(path));
    ASSERT_INT_EQ(test_count_entries(hf), 6);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", hf);
    index1 = slurp(path, &len1);
    ASSERT_CONTAINS(index1, "\"h.0.attn.weight\": \"model-00001-of-00004.safetensors\"");
    ASSERT_CONTAINS(index1, "\"h.1.x\": \"model-00002-of-00004.safetensors\"");
    ASSERT_CONTAINS(index1, "\"h.0.bias\": \"model-00003-of-00004.safetensors\"");
    ASSERT_CONTAINS(index1, "\"ln_f.scale\": \"model-00003-of-00004.safetensors\"");
    ASSERT_CONTAINS(index1, "\"wte.bf16\": \"model-00004-of-00004.safetensors\"");
    ASSERT(strstr(index1, "optim.") == NULL);
    snprintf(path, sizeof path, "%s/model-00004-of-00004.safetensors", hf);
    shard1 = slurp(path, &slen1);

    /* damage rank 1's piece of wte.bf16, the last shard's: the new export
     * (one file) fails after writing, and the old one stays whole */
    snprintf(f0, sizeof f0, "%s/rank-00001-of-00002.safetensors", dir);
    flip_byte(f0, data_offset(f0, "wte.bf16") + 1);
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, dir, &err), &err);
    ASSERT_ERR(accel_ckpt_consolidate(c, hf, 0, &err), &err, ACCEL_EIO, "checksum mismatch");
    accel_ckpt_close(c);
    ASSERT_INT_EQ(test_count_entries(hf), 6); /* no partial file left */
    snprintf(path, sizeof path, "%s/model.safetensors", hf);
    ASSERT(!exists(path));
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", hf);
    index2 = slurp(path, &len2);
    ASSERT(len1 == len2 && memcmp(index1, index2, len1) == 0);
    snprintf(path, sizeof path, "%s/model-00004-of-00004.safetensors", hf);
    shard2 = slurp(path, &slen2);
    ASSERT(slen1 == slen2 && memcmp(shard1, shard2, slen1) == 0);
    accel_free(index1);
    accel_free(index2);
    accel_free(shard1);
    accel_free(shard2);

    /* sharded, sharded otherwise, then one file: each export replaces the
     * one before whole, and partial files a crashed one left go too */
    accel_log_set(keep_log, NULL);
    snprintf(f0, sizeof f0, "%s/rank-00001-of-00002.safetensors", dir);
    flip_byte(f0, data_offset(f0, "wte.bf16") + 1); /* undamaged again */
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, dir, &err), &err);
    snprintf(path, sizeof path, "%s/.partial-model-00002-of-00009.safetensors", hf);
    spit(path, "x", 1);
    ASSERT_ACCEL_OK(accel_ckpt_consolidate(c, hf, 100, &err), &err);
    ASSERT_CONTAINS(logged, "replaced the 5 files of an earlier export in");
    ASSERT(!exists(path));
    ASSERT_ACCEL_OK(accel_ckpt_consolidate(c, hf, 0, &err), &err);
    accel_ckpt_close(c);
    ASSERT_INT_EQ(test_count_entries(hf), 2); /* model.safetensors, model-ema.safetensors */
    snprintf(path, sizeof path, "%s/model.safetensors", hf);
    ASSERT(exists(path));
    model_free(&m);
    remove_tmpdir();
}

/* The clean-up never follows a link: a step-NNNNNNNN link planted in the
 * root, to a directory outside it or to a checkpoint of another root, is
 * ignored (a warning), and what it names stays whole; a real directory of
 * another user is left alone; a root every user may write to is refused
 * unless it has the sticky bit. */
TEST(clean_up_never_follows_links)
{
    struct model m;
    struct accel_ckpt_piece p[MAXW][MAXT];
    size_t n[MAXW];
    struct accel_ckpt_save_opts o;
    struct save_out out;
    struct accel_error err = {0};
    struct accel_ckpt *c;
    char root[256], victim[256], other[256], path[700];

    make_tmpdir();
    accel_log_set(keep_log, NULL);
    model_init(&m, gpt_spec, sizeof gpt_spec / sizeof gpt_spec[0], 12);
    snprintf(root, sizeof root, "%s/root", tmpdir);
    snprintf(victim, sizeof victim, "%s/victim", tmpdir);
    snprintf(other, sizeof other, "%s/other", tmpdir);
    ASSERT_OK(mkdir(root, 0755));
    ASSERT_OK(mkdir(victim, 0700));
    snprintf(path, sizeof path, "%s/important.txt", victim);
    spit(path, "keep me", 7);
    /* a link that looks like an attempt older than every step saved */
    snprintf(path, sizeof path, "%s/step-00000001", root);
    ASSERT_OK(symlink(victim, path));
    /* a link to a committed checkpoint of another root */
    o = opts(other, 1, 2);
    save_ok(&o, &m);
    snprintf(path, sizeof path, "%s/step-00000002", root);
    {
        char target[300];
        snprintf(target, sizeof target, "%s/step-00000001", other);
        ASSERT_OK(symlink(target, path));
    }
    for (unsigned long s = 3; s <= 5; s++) {
        o = opts(root, s, 2);
        o.keep = 1;
        save_ok(&o, &m);
    }
    snprintf(path, sizeof path, "%s/important.txt", victim);
    ASSERT(exists(path));
    ASSERT_INT_EQ(test_count_entries(victim), 1);
    snprintf(path, sizeof path, "%s/step-00000001", other);
    ASSERT_ACCEL_OK(accel_ckpt_open(&c, path, &err), &err);
    check_model(c, &m, 3);
    accel_ckpt_close(c);
    ASSERT_CONTAINS(logged, "root/step-00000001: a symbolic link, not a directory");
    ASSERT_CONTAINS(logged, "root/step-00000002: a symbolic link, not a directory");
    snprintf(path, sizeof path, "%s/step-00000004", root); /* keep = 1 */
    ASSERT(!exists(path));

    /* a step directory that links elsewhere is not saved into either */
    snprintf(path, sizeof path, "%s/step-00000009", root);
    ASSERT_OK(symlink(victim, path));
    o = opts(root, 9, 1);
    split_all(&m, 1, p, n);
    save_world(&o, p, n, &out);
    ASSERT_INT_EQ(out.rc[0], ACCEL_EINVAL);
    ASSERT_CONTAINS(out.err[0].msg, "is not a directory (a link is not followed)");
    ASSERT_INT_EQ(test_count_entries(victim), 1);

    /* another user's directories: neither removed nor saved into (as root
     * only: no other user can own a file made here otherwise) */
    if (geteuid() == 0) {
        snprintf(path, sizeof path, "%s/step-00000006", root); /* an old attempt */
        ASSERT_OK(mkdir(path, 0755));
        ASSERT_OK(chown(path, 4242, 4242));
        snprintf(path, sizeof path, "%s/step-00000010", root);
        ASSERT_OK(mkdir(path, 0755));
        ASSERT_OK(chown(path, 4242, 4242));
        o = opts(root, 7, 1);
        o.keep = 1;
        save_ok(&o, &m);
        snprintf(path, sizeof path, "%s/step-00000006", root);
        ASSERT(exists(path));
        ASSERT_CONTAINS(logged, "step-00000006 belongs to uid 4242, not to this process's uid 0");
        o = opts(root, 10, 1);
        save_world(&o, p, n, &out);
        ASSERT_INT_EQ(out.rc[0], ACCEL_EPERM);
        ASSERT_CONTAINS(out.err[0].msg, "step-00000010 belongs to uid 4242");
    } else
        test_note("not root: the other-user cases are not run");

    /* a root every user may write to */
    ASSERT_OK(chmod(root, 0777));
    o = opts(root, 11, 1);
    save_world(&o, p, n, &out);
    ASSERT_INT_EQ(out.rc[0], ACCEL_EPERM);
    ASSERT_CONTAINS(out.err[0].msg, "is writable by every user (mode 0777)");
    ASSERT_CONTAINS(out.err[0].msg, "chmod o-w");
    snprintf(path, sizeof path, "%s/step-00000011", root);
    ASSERT(!exists(path));
    ASSERT_OK(chmod(root, 01777)); /* as /tmp: saved, with a warning */
    save_ok(&o, &m);
    ASSERT_CONTAINS(logged, "others can add checkpoints there");
    model_free(&m);
    remove_tmpdir();
}

/* One job per root: a root whose lock another job holds (here another open
 * file description of this process, as flock sees it) is refused with that
 * job's line and nothing is written; once it lets go, the save goes
 * through and says whose lock it took over. */
TEST(one_job_per_root)
{
    static const float data[16];
    const struct accel_ckpt_piece p[1] = {{{"w", ACCEL_F32, 2, {4, 4}}, 0, 16, data}};
    char root[256], path[512];
    struct accel_error err;
    int fd;

    make_tmpdir();
    snprintf(root, sizeof root, "%s/root", tmpdir);
    ASSERT(mkdir(root, 0755) == 0);
    snprintf(path, sizeof path, "%s/accelrun.lock", root);
    fd = open(path, O_RDWR | O_CREAT, 0644);
    ASSERT(fd >= 0);
    ASSERT(flock(fd, LOCK_EX) == 0);
    ASSERT(write(fd, "job 4711 on n9\n", 15) == 15);
    ASSERT_ERR(save1(root, p, 1, NULL, 0, &err), &err, ACCEL_EBUSY, "in use by another job");
    ASSERT_CONTAINS(err.msg, "job 4711 on n9");
    snprintf(path, sizeof path, "%s/step-00000001", root);
    ASSERT(!exists(path));
    close(fd); /* the other job ends */
    ASSERT_ACCEL_OK(save1(root, p, 1, NULL, 0, &err), &err);
    snprintf(path, sizeof path, "%s/step-00000001/manifest.json", root);
    ASSERT(exists(path));
    remove_tmpdir();
}

/* out.c past its two buffers (a write thread per full buffer, the next one
 * filled meanwhile): 41 MiB and a tail in odd-sized writes, a head written
 * last; the file holds exactly what was written, and the sum is of it. */
TEST(durable_writer_past_two_buffers)
{
    const size_t total = (41u << 20) + 123, head_len = CK_DIRECT_ALIGN, step = (3u << 20) + 7;
    struct ckpt__out f = {.fd = -1, .hashing = true};
    struct accel_error err = {0};
    unsigned char *data = malloc(total), *back;
    char *head = malloc(head_len);
    uint64_t sum = 0;
    size_t n = 0;
    char path[512];

    ASSERT(data && head);
    for (size_t i = 0; i < total; i++)
        data[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(head, 'h', head_len);
    make_tmpdir();
    f.total = head_len + total;
    f.head = head;
    f.head_len = head_len;
    ASSERT_ACCEL_OK(ckpt__out_open(&f, tmpdir, "big", &err), &err);
    test_note("O_DIRECT: %s", f.direct ? "yes" : "no (the file system refused it)");
    for (size_t at = 0; at < total; at += step)
        ASSERT_ACCEL_OK(ckpt__out_write(&f, data + at, total - at < step ? total - at : step, &err),
                        &err);
    ASSERT_ACCEL_OK(ckpt__out_close(&f, ACCEL_OK, &sum, &err), &err);
    ASSERT(sum == XXH3_64bits(data, total));
    snprintf(path, sizeof path, "%s/big", tmpdir);
    back = (unsigned char *)slurp(path, &n);
    ASSERT_INT_EQ(n, head_len + total);
    ASSERT(memcmp(back, head, head_len) == 0);
    ASSERT(memcmp(back + head_len, data, total) == 0);
    snprintf(path, sizeof path, "%s/big.tmp", tmpdir);
    ASSERT(!exists(path));
    accel_free(back);
    free(data);
    free(head);
    remove_tmpdir();
}

TEST_LIST(T(consolidate_all_or_nothing), T(st_round_trip), T(st_parse_rejects), T(st_parse_accepts),
          T(st_read_length), T(reshard_bit_exact), T(rank_file_format), T(ranks_without_pieces),
          T(empty_checkpoint), T(failed_save_commits_nothing), T(agree_error),
          T(incomplete_attempt), T(keep_holds_the_newest_n_and_0_holds_all), T(same_step_twice),
          T(corrupt_rank_file), T(corrupt_manifest), T(bad_arguments), T(meta_and_shapes),
          T(clean_up_never_follows_links), T(one_job_per_root),
          T(durable_writer_past_two_buffers))
