/*
 * accel/diag.h: findings about a config, collected all at once.
 *
 * `accelrun check` prints every finding, not just the first: each names the
 * file, line, column and key path (fsdp_config.fsdp_sharding_strategy), says
 * what is wrong and how to fix it.  Errors stop a launch; warnings do not.
 *
 * Ownership: the list owns its strings; accel_diags_free releases them.
 *
 * Thread-safety: a list of findings belongs to one thread at a time.
 */
#ifndef ACCEL_DIAG_H
#define ACCEL_DIAG_H

#include <stddef.h>

#include "accel/err.h"
#include "accel/value.h"

#ifdef __cplusplus
extern "C" {
#endif

enum accel_sev { ACCEL_SEV_ERROR, ACCEL_SEV_WARNING, ACCEL_SEV_NOTE };

struct accel_diag {
    enum accel_sev sev;
    char *file; /* "" when the finding is not about a file position */
    unsigned line, col;
    char *key; /* dotted key path, "" for the whole file */
    char *msg; /* what is wrong and the fix, one sentence or two */
};

struct accel_diags {
    struct accel_diag *v;
    size_t n, cap;
    size_t errors, warnings;
    int oom; /* an append failed for lack of memory; the list is incomplete */
};

#define ACCEL_MAX_DIAGS 1000 /* more findings than this are counted, not kept */

void accel_diags_init(struct accel_diags *d);
void accel_diags_free(struct accel_diags *d);

/* Appends a finding at `mark` (NULL = no position).  Never fails: on memory
 * exhaustion it sets d->oom and still counts the severity. */
void accel_diag_add(struct accel_diags *d, enum accel_sev sev, const struct accel_mark *mark,
                    const char *key, const char *fmt, ...) ACCEL_PRINTF(5, 6);

/* Adds a located error (a file that could not be read or parsed) as an
 * error finding. */
void accel_diag_from_error(struct accel_diags *d, const struct accel_error *err);

/* Orders the findings by file, line and column, keeping the order of
 * findings at the same place (a stable sort). */
void accel_diags_sort(struct accel_diags *d);

/* Copies the first error (or, without one, nothing) into `err` as a located
 * error with code `code`, so a front end that shows one line can show it. */
enum accel_err accel_diags_first_error(const struct accel_diags *d, enum accel_err code,
                                       struct accel_error *err);

/* "error", "warning", "note" */
const char *accel_sev_name(enum accel_sev s);

/* Formats one finding as "file:line:col: error: key: message" into buf. */
void accel_diag_format(const struct accel_diag *g, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif
