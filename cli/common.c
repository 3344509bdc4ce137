/*
 * common.c: helpers the subcommands share: reading their options, printing
 * findings as text or JSON, parsing numbers strictly, loading the site file
 * and a config on it.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

void cli_print_diags(const struct accel_diags *d, FILE *out)
{
    char line[2048];

    for (size_t i = 0; i < d->n; i++) {
        accel_diag_format(&d->v[i], line, sizeof(line));
        fprintf(out, "%s\n", line);
    }
    if (d->n < d->errors + d->warnings)
        fprintf(out, "accelrun: %zu more findings not shown\n", d->errors + d->warnings - d->n);
}

int cli_print_diags_json(const struct accel_diags *d, FILE *out)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(root, "findings");
    char *text;

    if (root == NULL || arr == NULL) {
        cJSON_Delete(root);
        return -1;
    }
    for (size_t i = 0; i < d->n; i++) {
        const struct accel_diag *g = &d->v[i];
        cJSON *o = cJSON_CreateObject();
        if (o == NULL)
            break;
        cJSON_AddStringToObject(o, "severity", accel_sev_name(g->sev));
        cJSON_AddStringToObject(o, "file", g->file);
        cJSON_AddNumberToObject(o, "line", g->line);
        cJSON_AddNumberToObject(o, "column", g->col);
        cJSON_AddStringToObject(o, "key", g->key);
        cJSON_AddStringToObject(o, "message", g->msg);
        cJSON_AddItemToArray(arr, o);
    }
    cJSON_AddNumberToObject(root, "errors", (double)d->errors);
    cJSON_AddNumberToObject(root, "warnings", (double)d->warnings);
    text = cJSON_Print(root);
    cJSON_Delete(root);
    if (text == NULL)
        return -1;
    fprintf(out, "%s\n", text);
    cJSON_free(text);
    return 0;
}

bool cli_parse_uint(const char *opt, const char *text, unsigned long lo, unsigned long hi,
                    unsigned long *out)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < lo || v > hi) {
        fprintf(stderr, "accelrun: %s: '%s' is not a number from %lu to %lu\n", opt, text, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

int cli_shared_option(int c, const char *arg, unsigned *version, const char **site)
{
    struct accel_error err;

    if (c == 's') {
        *site = arg;
        return 1;
    }
    if (c != 'V')
        return 0;
    accel_error_clear(&err);
    if (accel_version_parse(arg, version, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun: --accelerate-version: %s\n", err.msg);
        return -1;
    }
    return 1;
}

int cli_next_option(struct cli_getopt *g)
{
    int c;

    if (!g->started) {
        g->argv[0] = g->prog;
        optind = 1;
        g->started = true;
    }
    while ((c = getopt_long(g->argc, g->argv, g->optstring, g->table, NULL)) != -1) {
        int shared = g->version ? cli_shared_option(c, optarg, g->version, g->site) : 0;
        if (shared < 0)
            return CLI_OPT_BAD;
        if (shared > 0)
            continue;
        if (c == 'h') {
            fputs(g->usage, stdout);
            return CLI_OPT_HELP;
        }
        if (c == '?' || c == ':') {
            fputs(g->usage, stderr);
            return CLI_OPT_BAD;
        }
        return c;
    }
    return CLI_OPT_END;
}

int cli_exit_status(enum accel_err rc)
{
    switch (rc) {
    case ACCEL_OK:
        return CLI_EXIT_OK;
    case ACCEL_ENOTFOUND:
    case ACCEL_EPERM:
    case ACCEL_EIO:
    case ACCEL_ENOMEM:
    case ACCEL_EINVAL:
    case ACCEL_ETIMEDOUT:
    case ACCEL_EPEER:
    case ACCEL_ENONCE:
    case ACCEL_EBUSY:
    case ACCEL_ENOSPC:
        return CLI_EXIT_USAGE;
    case ACCEL_ETOOBIG:
    case ACCEL_EPARSE:
    case ACCEL_ECONFIG:
    case ACCEL_EPOLICY:
    case ACCEL_EUNSUPPORTED:
    case ACCEL_ELAYOUT:
    case ACCEL_ERR__LAST:
        break;
    }
    return CLI_EXIT_FINDINGS;
}

void cli_print_summary(const char *file, const struct accel_diags *d, FILE *out)
{
    fprintf(out, "%s: %zu error%s, %zu warning%s\n", file, d->errors, d->errors == 1 ? "" : "s",
            d->warnings, d->warnings == 1 ? "" : "s");
}

int cli_load_site(const char *path, unsigned version, struct accel_site *site, bool json, FILE *out)
{
    struct accel_diags d;
    struct accel_error err;
    enum accel_err rc;

    accel_site_init(site);
    if (path == NULL)
        return CLI_EXIT_OK;
    accel_diags_init(&d);
    accel_error_clear(&err);
    rc = accel_site_load(site, path, version, &d, &err);
    if (rc != ACCEL_OK) {
        accel_diags_sort(&d);
        if (json) {
            cli_print_diags_json(&d, out);
        } else {
            cli_print_diags(&d, out);
            cli_print_summary(path, &d, out);
        }
    }
    accel_diags_free(&d);
    return cli_exit_status(rc);
}

int cli_config_load(struct cli_config *c, const char *file, const char *site_path,
                    struct accel_cfg_opts *copts, bool json, FILE *out)
{
    struct accel_error err;
    int status;

    c->loaded = false;
    status = cli_load_site(site_path, copts->version, &c->site, json, out);
    if (status != CLI_EXIT_OK)
        return status;
    copts->site = site_path ? &c->site : NULL;
    accel_diags_init(&c->diags);
    accel_error_clear(&err);
    c->rc = accel_cfg_load(&c->cfg, file, copts, &c->diags, &err);
    accel_diags_sort(&c->diags);
    c->loaded = true;
    return CLI_EXIT_OK;
}

void cli_config_free(struct cli_config *c)
{
    if (!c->loaded)
        return;
    accel_cfg_free(&c->cfg);
    accel_diags_free(&c->diags);
    accel_site_free(&c->site);
    c->loaded = false;
}
