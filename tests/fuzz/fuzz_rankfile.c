/*
 * fuzz_rankfile.c: libFuzzer target for a rank file read back
 * (ckpt/rankfile.c: the pieces it declares, the saver's origin it records,
 * and the streaming check a local copy goes through as it is copied up).
 * The input is written as DIR/rank-00000-of-00001.safetensors, checked as
 * rank 0 of 1 at step 1, its bytes fed in chunks whose sizes the input's
 * own bytes pick.
 *
 * Invariants: no crash, no leak; an accepted file has its declared pieces'
 * spans in order, tiling [data_start, size) with no gap or overlap, each
 * span's XXH3 of the input's bytes the declared one (recomputed here); the
 * check ends accepted exactly when every byte went past and every span
 * matched; an origin, when one is read, has a run that is not 0.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "../../ckpt/ckpt_int.h"
#include "accel/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], path[128];

static void cleanup(void)
{
    unlink(path);
    rmdir(dir);
}

static void setup(void)
{
    char tmpl[] = "/tmp/fuzz_rankfile.XXXXXX";

    if (dir[0])
        return;
    if (!mkdtemp(tmpl))
        abort();
    snprintf(dir, sizeof dir, "%s", tmpl);
    snprintf(path, sizeof path, "%s/rank-00000-of-00001.safetensors", dir);
    atexit(cleanup);
}

static void write_input(const uint8_t *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) != 0)
        abort();
}

/* What an accepted file promises: spans in order that tile the data
 * buffer, each of the declared checksum. */
static void check_spans(const struct ckpt__check *v, const uint8_t *data, size_t size)
{
    const struct ckpt__st_header *h = ckpt__check_header(v);
    uint64_t at = h->data_start;

    for (size_t i = 0; i < v->n; i++) {
        const struct ckpt__span *s = &v->span[i];
        if (s->off != at || s->off + s->len > size || XXH3_64bits(data + s->off, s->len) != s->xxh3)
            abort();
        at += s->len;
    }
    if (at != size)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ckpt__check v;
    struct ckpt__origin org;
    struct accel_error err;
    enum accel_err rc;
    size_t at = 0, k = 0;

    setup();
    write_input(data, size);
    rc = ckpt__check_open(&v, dir, 1, 0, 1, &err);
    if (rc == ACCEL_OK) {
        if (ckpt__origin_of(ckpt__check_header(&v), &org) && org.run == 0)
            abort();
        /* fed in chunks of 1 .. 64 bytes (the input's bytes pick), or whole */
        while (rc == ACCEL_OK && at < size) {
            size_t n = size > 4096 ? size - at : (size_t)(1 + data[k++ % size] % 64);
            if (n > size - at)
                n = size - at;
            rc = ckpt__check_feed(&v, data + at, n, &err);
            at += n;
        }
        if (rc == ACCEL_OK)
            rc = ckpt__check_end(&v, &err);
        if (rc == ACCEL_OK)
            check_spans(&v, data, size);
        else if (rc != ACCEL_EIO)
            abort(); /* a mismatch is the only failure past the header */
        /* a byte short: never accepted */
        if (rc == ACCEL_OK) {
            struct ckpt__check w;
            ckpt__check_free(&v);
            if (ckpt__check_open(&w, dir, 1, 0, 1, &err) != ACCEL_OK)
                abort();
            if (size > 0 && ckpt__check_feed(&w, data, size - 1, &err) == ACCEL_OK &&
                ckpt__check_end(&w, &err) == ACCEL_OK)
                abort();
            ckpt__check_free(&w);
            return 0;
        }
    }
    ckpt__check_free(&v);
    return 0;
}
