/*
 * ckpt_tool.c: the C side of the checkpoint interop test (tests/ckpt/) and
 * of the CLI tests: it saves a checkpoint of known tensors with W ranks in
 * one process (one thread per rank, a barrier as the agree step), and it
 * reads a safetensors header with the library's reader, so that a Python
 * script can hold both against the real `safetensors` package.
 *
 *   ckpt_tool save ROOT --world W --step S [--seed N] [--keep K] [--dump DIR]
 *                       [--no-optim] [--meta KEY=VALUE]...
 *       Saves the fixed tensor set below (F32, BF16, F16; a scalar, 1-D, 2-D
 *       and 3-D tensors, optimizer state) split as FSDP splits flat
 *       parameters: per dtype, the tensors laid end to end in name order and
 *       cut into W equal slices, so pieces start and end mid-row and some
 *       ranks hold no piece of a tensor.  --dump DIR writes every full tensor
 *       as DIR/NAME.bin (raw little-endian bytes) and DIR/tensors.json
 *       ({NAME: {"dtype", "shape"}}): the truth the reader is checked against.
 *   ckpt_tool consolidate PATH OUTDIR [MAX_SHARD_BYTES]
 *   ckpt_tool st-read FILE
 *       Prints {"ok": true, "data_start": N, "metadata": {...}, "tensors":
 *       {NAME: {"dtype", "shape", "begin", "end", "fnv1a64"}}} (fnv1a64: the
 *       FNV-1a 64 of the tensor's bytes, in hex), or {"ok": false, "code":
 *       "ACCEL_E...", "error": "..."} and exit status 1.
 *
 * Exit status: 0 done, 1 the library said no, 2 usage.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../ckpt/st_int.h"
#include "accel/ckpt.h"

#define MAX_WORLD 64
#define MAX_META 8

/* The tensor set: a small GPT-2 block's names, every shape kind. */
static const struct spec {
    const char *name;
    enum accel_dtype dtype;
    unsigned ndim;
    uint64_t shape[3];
} specs[] = {
    {"h.0.attn.c_attn.bias", ACCEL_F32, 1, {48}},
    {"h.0.attn.c_attn.weight", ACCEL_F32, 2, {16, 48}},
    {"h.0.attn.rotary", ACCEL_F16, 3, {2, 3, 5}},
    {"h.0.ln_1.weight", ACCEL_BF16, 1, {16}},
    {"h.0.mlp.c_fc.weight", ACCEL_F16, 2, {16, 33}},
    {"h.0.mlp.c_proj.weight", ACCEL_BF16, 2, {33, 16}},
    {"lm_head.scale", ACCEL_F32, 0, {0}},
    {"optim.exp_avg.wte.weight", ACCEL_F32, 2, {50, 16}},
    {"optim.step", ACCEL_F32, 0, {0}},
    {"wte.weight", ACCEL_F32, 2, {50, 16}},
};
#define NSPECS (sizeof specs / sizeof specs[0])

struct tensor {
    struct accel_ckpt_tensor t;
    uint64_t numel;
    unsigned char *data;
};

struct group {
    pthread_barrier_t barrier;
    bool ok[MAX_WORLD];
    unsigned world;
};

struct rank {
    struct group *g;
    struct accel_ckpt_save_opts o;
    struct accel_ckpt_piece *pieces;
    size_t npieces;
    enum accel_err rc;
    struct accel_error err;
};

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Random finite values of each type (normal numbers, either sign). */
static void fill(struct tensor *t, uint64_t *seed)
{
    for (uint64_t i = 0; i < t->numel; i++) {
        uint64_t x = splitmix(seed);
        if (t->t.dtype == ACCEL_F32) {
            float f = (float)((double)(x >> 40) / (double)(1u << 24) * 2.0 - 1.0);
            memcpy(t->data + 4 * i, &f, 4);
        } else {
            /* BF16: sign, exponent 100..155 of 8 bits, 7 bits mantissa;
             * F16: sign, exponent 1..29 of 5 bits, 10 bits mantissa */
            uint16_t h =
                t->t.dtype == ACCEL_BF16
                    ? (uint16_t)((x >> 63) << 15 | (100 + (x >> 8) % 56) << 7 | (x & 0x7f))
                    : (uint16_t)((x >> 63) << 15 | (1 + (x >> 16) % 29) << 10 | (x & 0x3ff));
            t->data[2 * i] = (unsigned char)(h & 0xff);
            t->data[2 * i + 1] = (unsigned char)(h >> 8);
        }
    }
}

static enum accel_err agree(void *ctx, bool ok, bool *all_ok, struct accel_error *err)
{
    struct rank *r = ctx;
    struct group *g = r->g;
    bool all = true;

    (void)err;
    g->ok[r->o.rank] = ok;
    pthread_barrier_wait(&g->barrier);
    for (unsigned i = 0; i < g->world; i++)
        all = all && g->ok[i];
    pthread_barrier_wait(&g->barrier); /* all have read before the next round writes */
    *all_ok = all;
    return ACCEL_OK;
}

static void *rank_main(void *arg)
{
    struct rank *r = arg;

    accel_error_clear(&r->err);
    r->rc = accel_ckpt_save(&r->o, r->pieces, r->npieces, &r->err);
    return NULL;
}

static int dump(const char *dir, const struct tensor *ts, size_t n)
{
    cJSON *root = cJSON_CreateObject();
    char path[4096], *text;
    FILE *f;

    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        perror(dir);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_AddObjectToObject(root, ts[i].t.name), *shape;
        size_t bytes = (size_t)ts[i].numel * accel_dtype_size(ts[i].t.dtype);

        cJSON_AddStringToObject(e, "dtype", accel_dtype_st_name(ts[i].t.dtype));
        shape = cJSON_AddArrayToObject(e, "shape");
        for (unsigned d = 0; d < ts[i].t.ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)ts[i].t.shape[d]));
        snprintf(path, sizeof path, "%s/%s.bin", dir, ts[i].t.name);
        f = fopen(path, "wb");
        if (!f || fwrite(ts[i].data, 1, bytes, f) != bytes || fclose(f) != 0) {
            perror(path);
            return 1;
        }
    }
    text = cJSON_Print(root);
    snprintf(path, sizeof path, "%s/tensors.json", dir);
    f = fopen(path, "w");
    if (!text || !f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    cJSON_free(text);
    cJSON_Delete(root);
    return 0;
}

static int usage(void)
{
    fputs("usage: ckpt_tool save ROOT --world W --step S [--seed N] [--keep K] [--dump DIR]\n"
          "                            [--no-optim] [--meta KEY=VALUE]...\n"
          "       ckpt_tool consolidate PATH OUTDIR [MAX_SHARD_BYTES]\n"
          "       ckpt_tool st-read FILE\n",
          stderr);
    return 2;
}

static int cmd_save(int argc, char **argv)
{
    const char *root = argv[0], *dumpdir = NULL;
    unsigned long world = 0, step = 0, keep = 0;
    uint64_t seed = 1;
    bool optim = true;
    struct accel_ckpt_kv meta[MAX_META];
    size_t nmeta = 0, nt = 0;
    struct tensor ts[NSPECS];
    struct group g;
    struct rank ranks[MAX_WORLD];
    pthread_t th[MAX_WORLD];
    int status = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-optim")) {
            optim = false;
            continue;
        }
        if (!v)
            return usage();
        i++;
        if (!strcmp(a, "--world"))
            world = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--step"))
            step = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--keep"))
            keep = strtoul(v, NULL, 10);
        else if (!strcmp(a, "--dump"))
            dumpdir = v;
        else if (!strcmp(a, "--meta") && nmeta < MAX_META && strchr(v, '=')) {
            char *kv = strdup(v), *eq = strchr(kv, '=');
            *eq = '\0';
            meta[nmeta++] = (struct accel_ckpt_kv){kv, eq + 1};
        } else
            return usage();
    }
    if (world < 1 || world > MAX_WORLD)
        return usage();

    /* the tensors, with their data */
    for (size_t i = 0; i < NSPECS; i++) {
        struct tensor *t = &ts[nt];
        if (!optim && !strncmp(specs[i].name, "optim.", 6))
            continue;
        memset(t, 0, sizeof *t);
        t->t.name = specs[i].name;
        t->t.dtype = specs[i].dtype;
        t->t.ndim = specs[i].ndim;
        t->numel = 1;
        for (unsigned d = 0; d < specs[i].ndim; d++)
            t->numel *= t->t.shape[d] = specs[i].shape[d];
        t->data = malloc((size_t)t->numel * accel_dtype_size(t->t.dtype));
        if (!t->data)
            return 1;
        fill(t, &seed);
        nt++;
    }
    if (dumpdir && dump(dumpdir, ts, nt) != 0)
        return 1;

    /* FSDP-style: per dtype, tensors end to end, W equal slices */
    memset(ranks, 0, sizeof ranks);
    for (unsigned r = 0; r < world; r++) {
        ranks[r].g = &g;
        ranks[r].pieces = calloc(nt, sizeof *ranks[r].pieces);
        ranks[r].o = (struct accel_ckpt_save_opts){
            root, step, r, (unsigned)world, meta, nmeta, (unsigned)keep, agree, &ranks[r]};
        if (!ranks[r].pieces)
            return 1;
    }
    for (int dt = ACCEL_F32; dt <= ACCEL_F16; dt++) {
        uint64_t total = 0, at = 0, slice;
        for (size_t i = 0; i < nt; i++)
            total += ts[i].t.dtype == (enum accel_dtype)dt ? ts[i].numel : 0;
        slice = (total + world - 1) / world;
        for (size_t i = 0; i < nt; i++) {
            if (ts[i].t.dtype != (enum accel_dtype)dt)
                continue;
            for (unsigned r = 0; r < world; r++) {
                uint64_t a = r * slice, b = a + slice;
                uint64_t lo = a > at ? a - at : 0, hi = b < at + ts[i].numel ? b - at : ts[i].numel;
                struct rank *rk = &ranks[r];
                if (b <= at || a >= at + ts[i].numel || lo >= hi)
                    continue;
                rk->pieces[rk->npieces++] = (struct accel_ckpt_piece){
                    ts[i].t, lo, hi, ts[i].data + lo * accel_dtype_size(ts[i].t.dtype)};
            }
            at += ts[i].numel;
        }
    }

    g.world = (unsigned)world;
    if (pthread_barrier_init(&g.barrier, NULL, (unsigned)world) != 0)
        return 1;
    for (unsigned r = 0; r < world; r++)
        if (pthread_create(&th[r], NULL, rank_main, &ranks[r]) != 0)
            return 1;
    for (unsigned r = 0; r < world; r++)
        pthread_join(th[r], NULL);
    pthread_barrier_destroy(&g.barrier);
    for (unsigned r = 0; r < world; r++) {
        if (ranks[r].rc != ACCEL_OK) {
            fprintf(stderr, "ckpt_tool: rank %u: %s: %s\n", r, accel_errname(ranks[r].rc),
                    ranks[r].err.msg);
            status = 1;
        }
        free(ranks[r].pieces);
    }
    for (size_t i = 0; i < nt; i++)
        free(ts[i].data);
    for (size_t i = 0; i < nmeta; i++)
        free((char *)meta[i].key);
    if (status == 0)
        printf("saved step %lu of %zu tensors with %lu ranks under %s\n", step, nt, world, root);
    return status;
}

static int cmd_consolidate(int argc, char **argv)
{
    struct accel_ckpt *c = NULL;
    struct accel_error err;
    uint64_t max = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
    enum accel_err rc;

    if (argc < 2)
        return usage();
    accel_error_clear(&err);
    rc = accel_ckpt_open(&c, argv[0], &err);
    if (rc == ACCEL_OK)
        rc = accel_ckpt_consolidate(c, argv[1], max, &err);
    accel_ckpt_close(c);
    if (rc != ACCEL_OK) {
        fprintf(stderr, "ckpt_tool: %s: %s\n", accel_errname(rc), err.msg);
        return 1;
    }
    return 0;
}

static int st_fail(enum accel_err rc, const char *msg)
{
    cJSON *o = cJSON_CreateObject();
    char *text;

    cJSON_AddBoolToObject(o, "ok", 0);
    cJSON_AddStringToObject(o, "code", accel_errname(rc));
    cJSON_AddStringToObject(o, "error", msg);
    text = cJSON_PrintUnformatted(o);
    puts(text);
    cJSON_free(text);
    cJSON_Delete(o);
    return 1;
}

static int cmd_st_read(const char *file)
{
    struct ckpt__st_header h;
    struct accel_error err;
    struct stat st;
    enum accel_err rc;
    cJSON *o, *m, *ts;
    unsigned char *buf = NULL;
    char *text;
    int fd = open(file, O_RDONLY | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) != 0) {
        perror(file);
        return 2;
    }
    accel_error_clear(&err);
    rc = ckpt__st_read(fd, (uint64_t)st.st_size, ST_MAX_HEADER, file, &h, &err);
    if (rc != ACCEL_OK) {
        close(fd);
        return st_fail(rc, err.msg);
    }
    o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", 1);
    cJSON_AddNumberToObject(o, "data_start", (double)h.data_start);
    m = cJSON_AddObjectToObject(o, "metadata");
    for (size_t i = 0; i < h.nmeta; i++)
        cJSON_AddStringToObject(m, h.meta_key[i], h.meta_val[i]);
    ts = cJSON_AddObjectToObject(o, "tensors");
    for (size_t i = 0; i < h.nt; i++) {
        const struct ckpt__st_tensor *t = &h.t[i];
        cJSON *e = cJSON_AddObjectToObject(ts, t->name), *shape;
        uint64_t len = t->end - t->begin, fnv = UINT64_C(0xcbf29ce484222325);
        char hex[17];

        cJSON_AddStringToObject(e, "dtype", t->dtype);
        shape = cJSON_AddArrayToObject(e, "shape");
        for (unsigned d = 0; d < t->ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddNumberToObject(e, "begin", (double)t->begin);
        cJSON_AddNumberToObject(e, "end", (double)t->end);
        buf = realloc(buf, len ? (size_t)len : 1);
        if (!buf || pread(fd, buf, (size_t)len, (off_t)(h.data_start + t->begin)) != (ssize_t)len) {
            close(fd);
            return st_fail(ACCEL_EIO, "short read of tensor data");
        }
        for (uint64_t k = 0; k < len; k++)
            fnv = (fnv ^ buf[k]) * UINT64_C(0x100000001b3);
        snprintf(hex, sizeof hex, "%016" PRIx64, fnv);
        cJSON_AddStringToObject(e, "fnv1a64", hex);
    }
    text = cJSON_PrintUnformatted(o);
    puts(text);
    cJSON_free(text);
    cJSON_Delete(o);
    ckpt__st_header_free(&h);
    free(buf);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "save"))
        return cmd_save(argc - 2, argv + 2);
    if (argc >= 4 && !strcmp(argv[1], "consolidate"))
        return cmd_consolidate(argc - 2, argv + 2);
    if (argc == 3 && !strcmp(argv[1], "st-read"))
        return cmd_st_read(argv[2]);
    return usage();
}
