/*
 * fuzz_objects.c: libFuzzer target for the webhook's decoding of what the
 * API server answers (k8s-operator-shim/objects.c): the same bytes as a
 * ConfigMap, a Job and an error's Status.  A decoded value must be a
 * NUL-terminated copy of the stated length, completions -1 or a count, the
 * mode one of the three, and every message a terminated line within its
 * buffer; a failure must say why.  A broken rule aborts, which libFuzzer
 * reports as a crash.
 *
 * Built two ways (Makefile): `make fuzz` links it with libFuzzer and
 * ASan/UBSan; `make fuzz-replay` replays tests/fuzz/corpus/fuzz_objects.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../k8s-operator-shim/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_objects: broken rule: %s\n", what);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char why[512], msg[64];
    char *value = NULL;
    size_t vlen = 0;
    long completions = 7;
    enum wh_job_mode mode = WH_JOB_INDEXED;

    why[0] = '\0';
    if (wh_configmap_value((const char *)data, size, "ml", "train-cfg", "config.yaml", &value,
                           &vlen, why, sizeof(why)) == 0) {
        must(value != NULL && strlen(value) == vlen, "a ConfigMap value of its stated length");
        must(vlen <= size, "a ConfigMap value within its body");
    } else {
        must(value == NULL, "no value after a failure");
        must(why[0] != '\0' && memchr(why, '\0', sizeof(why)) != NULL, "a failure says why");
    }
    free(value);

    why[0] = '\0';
    if (wh_job_spec((const char *)data, size, "ml", "train", &completions, &mode, why,
                    sizeof(why)) == 0) {
        must(completions >= -1 && completions < 1000000000L, "completions -1 or a count");
        must(mode == WH_JOB_INDEXED || mode == WH_JOB_NOT_INDEXED || mode == WH_JOB_MODE_UNKNOWN,
             "one of the three modes");
    } else {
        must(why[0] != '\0', "a failure says why");
    }

    memset(msg, 'x', sizeof(msg));
    wh_status_message((const char *)data, size, msg, sizeof(msg));
    must(memchr(msg, '\0', sizeof(msg)) != NULL, "a Status message within its buffer");
    return 0;
}
