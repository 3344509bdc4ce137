/*
 * warn.c: the store server's rate-limited warnings (store_int.h): a
 * thousand connections that break the same rule make one line and a count,
 * not a thousand lines.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "accel/log.h"
#include "store_int.h"

void bootstrap__warn(struct bootstrap__warn *w, double interval, double now, const char *fmt, ...)
{
    char line[sizeof(w->held)];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (w->last > 0 && now - w->last < interval) {
        w->suppressed++;
        memcpy(w->held, line, sizeof(line));
        return;
    }
    if (w->suppressed > 0)
        accel_log(ACCEL_LOG_WARN, "%s (and %lu more like it in the last %.3g s)", line,
                  w->suppressed, now - w->last);
    else
        accel_log(ACCEL_LOG_WARN, "%s", line);
    w->last = now;
    w->suppressed = 0;
}

void bootstrap__warn_flush(struct bootstrap__warn *w, double interval, double now, bool force)
{
    if (w->suppressed == 0 || (!force && now - w->last < interval))
        return;
    if (w->suppressed > 1)
        accel_log(ACCEL_LOG_WARN, "%s (and %lu more like it in the last %.3g s)", w->held,
                  w->suppressed - 1, now - w->last);
    else
        accel_log(ACCEL_LOG_WARN, "%s", w->held);
    w->last = now;
    w->suppressed = 0;
}
