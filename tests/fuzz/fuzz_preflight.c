/*
 * fuzz_preflight.c: libFuzzer target for what the preflight reads back: a
 * node's report as another node sends it (accel_pf_node_from_json, which
 * also reads a record's versions) and an accelerate version string
 * (pf__version_number, from the job's Python).
 *
 * Invariants: no crash, no leak; an accepted report has a host, at most
 * ACCEL_PF_MAX_ROWS rows and GPUs, every string NUL-terminated within its
 * field, and written out and read back it is the same node (the round trip
 * is exact); a version number read is at most 99.99.99.
 */
#include <stdlib.h>
#include <string.h>

#include "../../core/preflight/pf_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_strings(const struct accel_pf_node *n)
{
    if (!memchr(n->host, 0, sizeof(n->host)) || !memchr(n->v.python, 0, sizeof(n->v.python)))
        abort();
    for (size_t i = 0; i < n->nrows; i++)
        if (!memchr(n->rows[i].reason, 0, sizeof(n->rows[i].reason)) ||
            !memchr(n->rows[i].check, 0, sizeof(n->rows[i].check)))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct accel_pf_node a, b;
    char text[64];
    unsigned v;

    if (accel_pf_node_from_json(&a, (const char *)data, size, NULL) == ACCEL_OK) {
        char *s;
        if (!a.host[0] || a.nrows > ACCEL_PF_MAX_ROWS || a.v.ngpus > ACCEL_PF_MAX_GPUS)
            abort();
        check_strings(&a);
        s = accel_pf_node_to_json(&a);
        if (!s)
            return 0; /* out of memory */
        if (accel_pf_node_from_json(&b, s, strlen(s), NULL) != ACCEL_OK)
            abort();
        free(s);
        /* a host or reason that was cut to its field may carry a cut UTF-8
         * sequence, which cJSON writes back as it is: compare the fields */
        if (strcmp(a.host, b.host) != 0 || a.nrows != b.nrows || a.v.ngpus != b.v.ngpus ||
            strcmp(a.v.python, b.v.python) != 0)
            abort();
        for (size_t i = 0; i < a.nrows; i++)
            if (a.rows[i].status != b.rows[i].status ||
                strcmp(a.rows[i].reason, b.rows[i].reason) != 0)
                abort();
    }
    if (size < sizeof(text)) {
        memcpy(text, data, size);
        text[size] = '\0';
        if (pf__version_number(text, &v) && v > ACCEL_VERSION(99, 99, 99))
            abort();
    }
    return 0;
}
