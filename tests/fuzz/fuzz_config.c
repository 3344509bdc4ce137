/*
 * fuzz_config.c: libFuzzer target for the config parser.
 *
 * Feeds the bytes to accel_doc_parse as a config file.  A refused input must
 * leave the doc empty and the error struct filled in; an accepted one must
 * survive accel_val_copy (the copy equal to the original, as Python compares,
 * unless a NaN makes Python's == false, and printing the same str() text) and
 * accel_val_pystr into a capped buffer.  Everything is freed, so the sanitizers
 * see any leak.  Any broken rule aborts, which libFuzzer reports as a crash.
 *
 * Built two ways (Makefile): `make fuzz` links it with libFuzzer and ASan/UBSan;
 * `make fuzz-replay` links it with tests/fuzz/replay_main.c and replays the
 * seed corpus and every saved crasher in tests/fuzz/regressions/.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/buf.h"
#include "accel/value.h"

#define PYSTR_MAX (1u << 16) /* bytes of str() text; past it ETOOBIG, by design */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* True when a NaN float is anywhere in v (NaN != NaN in Python too). */
static int has_nan(const struct accel_val *v)
{
    switch (v->type) {
    case ACCEL_V_FLOAT:
        return isnan(v->u.f);
    case ACCEL_V_LIST:
        for (size_t i = 0; i < v->u.list.n; i++)
            if (has_nan(&v->u.list.v[i]))
                return 1;
        return 0;
    case ACCEL_V_MAP:
        for (size_t i = 0; i < v->u.map.n; i++)
            if (has_nan(&v->u.map.v[i].val))
                return 1;
        return 0;
    case ACCEL_V_NULL:
    case ACCEL_V_BOOL:
    case ACCEL_V_INT:
    case ACCEL_V_STR:
        break;
    }
    return 0;
}

/* Duplicate keys: both pairs must name the same key. */
static void on_dup(void *ctx, const struct accel_pair *first, const struct accel_pair *second)
{
    (void)ctx;
    if (strcmp(first->key, second->key) != 0)
        abort();
}

/* str(v) into a capped buffer; returns the text (caller frees) or NULL when
 * it exceeded the cap.  Any other failure aborts. */
static char *pystr(const struct accel_val *v)
{
    struct accel_buf b;
    enum accel_err rc;

    accel_buf_init(&b, PYSTR_MAX);
    rc = accel_val_pystr(v, &b);
    if (rc == ACCEL_ETOOBIG) {
        if (b.len > PYSTR_MAX)
            abort();
        accel_buf_free(&b);
        return NULL;
    }
    if (rc != ACCEL_OK)
        abort();
    return accel_buf_take(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct accel_doc doc;
    struct accel_error err;
    struct accel_val copy;
    enum accel_err rc;
    char *s1, *s2;

    accel_error_clear(&err);
    rc = accel_doc_parse(&doc, "fuzz.yaml", (const char *)data, size, on_dup, NULL, &err);
    if (rc != ACCEL_OK) {
        if (doc.file != NULL || doc.root.type != ACCEL_V_NULL || err.code != rc)
            abort();
        if ((rc == ACCEL_EPARSE || rc == ACCEL_ETOOBIG) && err.file[0] == '\0')
            abort();
        if (rc != ACCEL_EPARSE && rc != ACCEL_ETOOBIG && rc != ACCEL_ENOMEM)
            abort();
        accel_doc_free(&doc);
        return 0;
    }
    if (accel_val_copy(&copy, &doc.root) != ACCEL_OK)
        abort(); /* no allocation fails here */
    if (!accel_val_equal(&copy, &doc.root) && !has_nan(&doc.root))
        abort();
    s1 = pystr(&doc.root);
    s2 = pystr(&copy);
    if ((s1 == NULL) != (s2 == NULL) || (s1 != NULL && strcmp(s1, s2) != 0))
        abort();
    accel_free(s1);
    accel_free(s2);
    (void)accel_val_truthy(&doc.root);
    accel_val_free(&copy);
    accel_doc_free(&doc);
    return 0;
}
