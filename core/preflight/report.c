/*
 * report.c: the preflight's rows, the table rank 0 prints (one line per node
 * and check) and the JSON of nodes: what `--json` prints, what a node sends
 * to the one that prints, and (versions only) what a record keeps.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pf_int.h"

void pf__copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

void accel_pf_add_row(struct accel_pf_node *node, const char *check, enum accel_pf_status st,
                      const char *fmt, ...)
{
    struct accel_pf_row *r;
    va_list ap;

    if (node->nrows >= ACCEL_PF_MAX_ROWS)
        return;
    r = &node->rows[node->nrows++];
    pf__copy(r->check, sizeof(r->check), check);
    r->status = st;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
}

const char *accel_pf_status_name(enum accel_pf_status s)
{
    switch (s) {
    case ACCEL_PF_PASS:
        return "PASS";
    case ACCEL_PF_WARN:
        return "WARN";
    case ACCEL_PF_FAIL:
        return "FAIL";
    }
    return "?";
}

const char *accel_pf_pkg_name(enum accel_pf_pkg p)
{
    static const char *const names[ACCEL_PF_NPKG] = {"torch", "accelerate", "transformers", "peft",
                                                     "deepspeed"};
    return (unsigned)p < ACCEL_PF_NPKG ? names[p] : "?";
}

enum accel_pf_status accel_pf_worst(const struct accel_pf_node *nodes, size_t n)
{
    enum accel_pf_status w = ACCEL_PF_PASS;

    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < nodes[i].nrows; k++)
            if (nodes[i].rows[k].status > w)
                w = nodes[i].rows[k].status;
    return w;
}

void accel_pf_print(const struct accel_pf_node *nodes, size_t n, const char *config, FILE *out)
{
    size_t wide = 4, counts[3] = {0, 0, 0};
    enum accel_pf_status worst = accel_pf_worst(nodes, n);

    for (size_t i = 0; i < n; i++)
        if (strlen(nodes[i].host) > wide)
            wide = strlen(nodes[i].host);
    fprintf(out, "%-*s  %-10s  %-6s  %s\n", (int)wide, "NODE", "CHECK", "RESULT", "REASON");
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < nodes[i].nrows; k++) {
            const struct accel_pf_row *r = &nodes[i].rows[k];
            counts[r->status]++;
            fprintf(out, "%-*s  %-10s  %-6s  %s\n", (int)wide, nodes[i].host, r->check,
                    accel_pf_status_name(r->status), r->reason);
        }
    fprintf(out, "preflight: %s: %s on %zu node%s (%zu failed, %zu warning%s)%s\n", config,
            accel_pf_status_name(worst), n, n == 1 ? "" : "s", counts[ACCEL_PF_FAIL],
            counts[ACCEL_PF_WARN], counts[ACCEL_PF_WARN] == 1 ? "" : "s",
            worst == ACCEL_PF_FAIL ? ": the job does not start" : "");
}

/* ---------------------------------------------------------------- JSON */

static cJSON *versions_json(const struct accel_pf_versions *v)
{
    cJSON *o = cJSON_CreateObject(), *pk = cJSON_AddObjectToObject(o, "packages");
    cJSON *gpus = cJSON_AddArrayToObject(o, "gpus");

    cJSON_AddStringToObject(o, "python", v->python);
    cJSON_AddStringToObject(o, "python_path", v->python_path);
    for (int i = 0; i < ACCEL_PF_NPKG; i++)
        cJSON_AddStringToObject(pk, accel_pf_pkg_name((enum accel_pf_pkg)i), v->pkg[i]);
    cJSON_AddStringToObject(o, "torch_cuda", v->torch_cuda);
    cJSON_AddStringToObject(o, "torch_nccl", v->torch_nccl);
    cJSON_AddStringToObject(o, "driver", v->driver);
    for (unsigned i = 0; i < v->ngpus && gpus; i++) {
        cJSON *g = cJSON_CreateObject();
        char cc[16];
        snprintf(cc, sizeof(cc), "%u.%u", v->gpu[i].cc_major, v->gpu[i].cc_minor);
        cJSON_AddStringToObject(g, "name", v->gpu[i].name);
        cJSON_AddStringToObject(g, "compute_capability", cc);
        cJSON_AddNumberToObject(g, "memory_total", (double)v->gpu[i].mem_total);
        cJSON_AddNumberToObject(g, "memory_free", (double)v->gpu[i].mem_free);
        cJSON_AddNumberToObject(g, "memory_used", (double)v->gpu[i].mem_used);
        cJSON_AddItemToArray(gpus, g);
    }
    return o;
}

static cJSON *node_json(const struct accel_pf_node *node)
{
    cJSON *o = cJSON_CreateObject(), *checks;

    cJSON_AddStringToObject(o, "host", node->host);
    cJSON_AddItemToObject(o, "versions", versions_json(&node->v));
    checks = cJSON_AddArrayToObject(o, "checks");
    for (size_t k = 0; k < node->nrows && checks; k++) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "check", node->rows[k].check);
        cJSON_AddStringToObject(r, "status", accel_pf_status_name(node->rows[k].status));
        cJSON_AddStringToObject(r, "reason", node->rows[k].reason);
        cJSON_AddItemToArray(checks, r);
    }
    return o;
}

char *pf__versions_to_json(const struct accel_pf_versions *v)
{
    cJSON *o = versions_json(v);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *accel_pf_node_to_json(const struct accel_pf_node *node)
{
    cJSON *o = node_json(node);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *accel_pf_to_json(const struct accel_pf_node *nodes, size_t n)
{
    cJSON *o = cJSON_CreateObject(), *arr;
    char *s;

    cJSON_AddStringToObject(o, "result", accel_pf_status_name(accel_pf_worst(nodes, n)));
    arr = cJSON_AddArrayToObject(o, "nodes");
    for (size_t i = 0; i < n && arr; i++)
        cJSON_AddItemToArray(arr, node_json(&nodes[i]));
    s = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static bool take(char *dst, size_t size, const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v))
        return false;
    pf__copy(dst, size, v->valuestring);
    return true;
}

bool pf__versions_from_json(struct accel_pf_versions *v, const void *json)
{
    const cJSON *o = json, *pk = cJSON_GetObjectItemCaseSensitive(o, "packages"), *g;
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(o, "gpus");

    memset(v, 0, sizeof(*v));
    if (!cJSON_IsObject(o) || !cJSON_IsObject(pk) ||
        !take(v->python, sizeof(v->python), o, "python"))
        return false;
    take(v->python_path, sizeof(v->python_path), o, "python_path");
    for (int i = 0; i < ACCEL_PF_NPKG; i++)
        take(v->pkg[i], sizeof(v->pkg[i]), pk, accel_pf_pkg_name((enum accel_pf_pkg)i));
    take(v->torch_cuda, sizeof(v->torch_cuda), o, "torch_cuda");
    take(v->torch_nccl, sizeof(v->torch_nccl), o, "torch_nccl");
    take(v->driver, sizeof(v->driver), o, "driver");
    cJSON_ArrayForEach(g, gpus)
    {
        struct accel_pf_gpu *d = &v->gpu[v->ngpus];
        char cc[16] = "";
        if (v->ngpus >= ACCEL_PF_MAX_GPUS || !cJSON_IsObject(g))
            break;
        take(d->name, sizeof(d->name), g, "name");
        take(cc, sizeof(cc), g, "compute_capability");
        if (sscanf(cc, "%2u.%2u", &d->cc_major, &d->cc_minor) != 2)
            d->cc_major = d->cc_minor = 0;
        v->ngpus++;
    }
    return true;
}

bool pf__plain_char(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '_' || c == '-';
}

bool pf__plain_name(const char *s)
{
    if (!s[0])
        return false;
    for (; *s; s++)
        if (!pf__plain_char(*s))
            return false;
    return true;
}

enum accel_err accel_pf_node_from_json(struct accel_pf_node *node, const char *text, size_t len,
                                       struct accel_error *err)
{
    cJSON *o = cJSON_ParseWithLength(text, len), *r;
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(o, "checks");

    memset(node, 0, sizeof(*node));
    if (!cJSON_IsObject(o) || !take(node->host, sizeof(node->host), o, "host") ||
        !pf__plain_name(node->host) || /* a host name as gethostname gives one */
        !pf__versions_from_json(&node->v, cJSON_GetObjectItemCaseSensitive(o, "versions")) ||
        !cJSON_IsArray(checks)) {
        cJSON_Delete(o);
        return accel_error_set(err, ACCEL_EPARSE, "preflight: the node's report is malformed");
    }
    cJSON_ArrayForEach(r, checks)
    {
        char check[16], status[8], reason[ACCEL_PF_REASON];
        enum accel_pf_status st;
        if (!take(check, sizeof(check), r, "check") || !take(status, sizeof(status), r, "status") ||
            !take(reason, sizeof(reason), r, "reason"))
            continue;
        st = strcmp(status, "PASS") == 0   ? ACCEL_PF_PASS
             : strcmp(status, "WARN") == 0 ? ACCEL_PF_WARN
                                           : ACCEL_PF_FAIL; /* unknown: the safe side */
        accel_pf_add_row(node, check, st, "%s", reason);
    }
    cJSON_Delete(o);
    return ACCEL_OK;
}
