/*
 * data.c: loads the Debian licence corpus (see data.h) and cuts training
 * and validation windows out of it.  Reads with stdio, caps each file at
 * GPT_DATA_MAX_FILE, keeps nothing open.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"
#include "rng.h"

/* base-files' regular files (not the GPL/LGPL/GFDL symlinks, which would
 * repeat texts), sorted by name as `LC_ALL=C ls` sorts them. */
const char *const gpt_data_files[] = {
    "Apache-2.0", "Artistic", "BSD",      "CC0-1.0", "GFDL-1.2", "GFDL-1.3", "GPL-1", "GPL-2",
    "GPL-3",      "LGPL-2",   "LGPL-2.1", "LGPL-3",  "MPL-1.1",  "MPL-2.0",  NULL,
};

static uint64_t fnv1a(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

int gpt_data_load(struct gpt_data *d, const char *dir, char *why, size_t whylen)
{
    char path[4096];
    struct stat st;
    FILE *f = NULL;
    int rc = -1;

    memset(d, 0, sizeof *d);
    errno = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, whylen,
                 "data folder %s: %s (the licence texts of Debian's base-files package; "
                 "give another folder with --data)",
                 dir, errno ? strerror(errno) : "not a folder");
        return -1;
    }
    for (size_t i = 0; gpt_data_files[i]; i++) {
        unsigned char *grown;
        snprintf(path, sizeof path, "%s/%s", dir, gpt_data_files[i]);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            snprintf(why, whylen,
                     "data folder %s has no file %s (expected base-files' licence texts: "
                     "Apache-2.0 Artistic BSD CC0-1.0 GFDL-1.2 GFDL-1.3 GPL-1 GPL-2 GPL-3 "
                     "LGPL-2 LGPL-2.1 LGPL-3 MPL-1.1 MPL-2.0)",
                     dir, gpt_data_files[i]);
            goto out;
        }
        if (st.st_size <= 0 || (size_t)st.st_size > GPT_DATA_MAX_FILE) {
            snprintf(why, whylen, "%s: size %lld is not in 1..%u bytes", path,
                     (long long)st.st_size, GPT_DATA_MAX_FILE);
            goto out;
        }
        grown = realloc(d->bytes, d->n + (size_t)st.st_size);
        if (!grown) {
            snprintf(why, whylen, "out of memory reading %s", path);
            goto out;
        }
        d->bytes = grown;
        f = fopen(path, "rb");
        if (!f || fread(d->bytes + d->n, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
            snprintf(why, whylen, "cannot read %s: %s", path, f ? "short read" : strerror(errno));
            goto out;
        }
        fclose(f);
        f = NULL;
        d->n += (size_t)st.st_size;
        d->nfiles++;
    }
    d->ntrain = d->n - d->n / 10;
    d->hash = fnv1a(d->bytes, d->n);
    rc = 0;
out:
    if (f)
        fclose(f);
    if (rc)
        gpt_data_free(d);
    return rc;
}

void gpt_data_free(struct gpt_data *d)
{
    if (!d)
        return;
    free(d->bytes);
    memset(d, 0, sizeof *d);
}

void gpt_data_train_seq(const struct gpt_data *d, uint64_t seed, uint64_t step, uint64_t j,
                        size_t T, unsigned char *tok, unsigned char *tgt)
{
    size_t span = d->ntrain - T; /* window [s, s+T] must fit: s <= ntrain - T - 1 */
    size_t s = (size_t)(gpt_rng_hash(seed, step, j) % span);

    memcpy(tok, d->bytes + s, T);
    memcpy(tgt, d->bytes + s + 1, T);
}

void gpt_data_val_seq(const struct gpt_data *d, size_t j, size_t count, size_t T,
                      unsigned char *tok, unsigned char *tgt)
{
    size_t nval = d->n - d->ntrain, span = nval - T - 1;
    size_t s = d->ntrain + (count > 1 ? span * j / (count - 1) : 0);

    memcpy(tok, d->bytes + s, T);
    memcpy(tgt, d->bytes + s + 1, T);
}
