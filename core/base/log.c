/*
 * log.c: forwards formatted lines to the front end's hook.  The default hook
 * prints warnings and errors to stderr, so a library user who installs nothing
 * still sees problems.
 */
#include <stdio.h>

#include "accel/log.h"

static accel_log_fn log_fn;
static void *log_ctx;

void accel_log_set(accel_log_fn fn, void *ctx)
{
    log_fn = fn;
    log_ctx = ctx;
}

void accel_log(enum accel_log_level level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (log_fn != NULL) {
        log_fn(log_ctx, level, line);
        return;
    }
    if (level >= ACCEL_LOG_WARN)
        fprintf(stderr, "accelrun: %s\n", line);
}
