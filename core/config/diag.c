/*
 * diag.c: the list of findings.  Appending never fails the caller: a finding
 * that cannot be stored is still counted, and `oom` says the list is short.
 */
#include <stdio.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/diag.h"

void accel_diags_init(struct accel_diags *d)
{
    memset(d, 0, sizeof(*d));
}

void accel_diags_free(struct accel_diags *d)
{
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++) {
        accel_free(d->v[i].file);
        accel_free(d->v[i].key);
        accel_free(d->v[i].msg);
    }
    accel_free(d->v);
    memset(d, 0, sizeof(*d));
}

const char *accel_sev_name(enum accel_sev s)
{
    switch (s) {
    case ACCEL_SEV_ERROR:
        return "error";
    case ACCEL_SEV_WARNING:
        return "warning";
    case ACCEL_SEV_NOTE:
        return "note";
    }
    return "note";
}

void accel_diag_add(struct accel_diags *d, enum accel_sev sev, const struct accel_mark *mark,
                    const char *key, const char *fmt, ...)
{
    char msg[1024];
    struct accel_diag *g;
    va_list ap;

    if (sev == ACCEL_SEV_ERROR)
        d->errors++;
    else if (sev == ACCEL_SEV_WARNING)
        d->warnings++;
    if (d->n >= ACCEL_MAX_DIAGS)
        return;
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 16;
        struct accel_diag *p = accel_realloc(d->v, nc * sizeof(*p));
        if (p == NULL) {
            d->oom = 1;
            return;
        }
        d->v = p;
        d->cap = nc;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    g = &d->v[d->n];
    g->sev = sev;
    g->line = mark ? mark->line : 0;
    g->col = mark ? mark->col : 0;
    g->file = accel_strdup(mark && mark->file ? mark->file : "");
    g->key = accel_strdup(key ? key : "");
    g->msg = accel_strdup(msg);
    if (g->file == NULL || g->key == NULL || g->msg == NULL) {
        accel_free(g->file);
        accel_free(g->key);
        accel_free(g->msg);
        d->oom = 1;
        return;
    }
    d->n++;
}

static int place_cmp(const struct accel_diag *a, const struct accel_diag *b)
{
    int c = strcmp(a->file, b->file);
    if (c != 0)
        return c;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    return (a->col > b->col) - (a->col < b->col);
}

void accel_diags_sort(struct accel_diags *d)
{
    /* Insertion sort: stable, and the list is capped at ACCEL_MAX_DIAGS. */
    for (size_t i = 1; i < d->n; i++) {
        struct accel_diag g = d->v[i];
        size_t j = i;
        while (j > 0 && place_cmp(&d->v[j - 1], &g) > 0) {
            d->v[j] = d->v[j - 1];
            j--;
        }
        d->v[j] = g;
    }
}

void accel_diag_from_error(struct accel_diags *d, const struct accel_error *err)
{
    struct accel_mark m = {err->file, err->line, err->column};
    accel_diag_add(d, ACCEL_SEV_ERROR, &m, err->key, "%s", err->msg);
}

void accel_diag_format(const struct accel_diag *g, char *buf, size_t size)
{
    char where[512];
    const char *msg = g->msg;
    size_t fl = strlen(g->file);

    if (g->line > 0)
        snprintf(where, sizeof(where), "%s:%u:%u: ", g->file, g->line, g->col);
    else if (fl > 0)
        snprintf(where, sizeof(where), "%s: ", g->file);
    else
        where[0] = '\0';
    /* a message about the file as a whole names it first (fsutil.c: "PATH:
     * couldn't open"): said once, in front */
    if (g->line == 0 && fl > 0 && strncmp(msg, g->file, fl) == 0 && strncmp(msg + fl, ": ", 2) == 0)
        msg += fl + 2;
    snprintf(buf, size, "%s%s: %s%s%s", where, accel_sev_name(g->sev), g->key,
             g->key[0] ? ": " : "", msg);
}

enum accel_err accel_diags_first_error(const struct accel_diags *d, enum accel_err code,
                                       struct accel_error *err)
{
    for (size_t i = 0; i < d->n; i++) {
        const struct accel_diag *g = &d->v[i];
        if (g->sev != ACCEL_SEV_ERROR)
            continue;
        accel_error_set(err, code, "%s", g->msg);
        accel_error_at(err, g->file, g->line, g->col, g->key);
        return code;
    }
    if (d->errors > 0 || d->oom)
        return accel_error_set(err, d->oom ? ACCEL_ENOMEM : code, "config: %zu error(s)",
                               d->errors);
    return ACCEL_OK;
}
