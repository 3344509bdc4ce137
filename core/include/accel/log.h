/*
 * accel/log.h: the logging hook.  Library code never prints; it calls
 * accel_log(), which hands one formatted line (no trailing newline) to the
 * function the front end installed: Slurm's logger in the plugin, stderr in the
 * CLI.  Without a hook, messages at ACCEL_LOG_WARN and above go to stderr.
 * The hook is process-wide, set once at start-up before any thread starts.
 */
#ifndef ACCEL_LOG_H
#define ACCEL_LOG_H

#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

enum accel_log_level { ACCEL_LOG_DEBUG, ACCEL_LOG_INFO, ACCEL_LOG_WARN, ACCEL_LOG_ERROR };

typedef void (*accel_log_fn)(void *ctx, enum accel_log_level level, const char *line);

/* Installs `fn` (NULL restores the default) and its context pointer. */
void accel_log_set(accel_log_fn fn, void *ctx);

/* Formats and forwards one line; lines longer than 1 KiB are truncated. */
void accel_log(enum accel_log_level level, const char *fmt, ...) ACCEL_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif

#endif
