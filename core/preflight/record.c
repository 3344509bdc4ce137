/*
 * record.c: the version lock of a job, and drift from the one before.
 * DIR/<config name>-<XXH3 of the config's absolute path>/<job>.json holds
 *
 *   {"config": PATH, "job": ID, "time": "2026-12-05T21:40:00Z",
 *    "nodes": {HOST: {"python", "packages": {...}, "torch_cuda", ...}}}
 *
 * written durably (temp, fsync, rename).  The newest other file there is the
 * previous record of the same config: each node is compared with its own
 * entry in it ("torch 2.13.0 → 2.15.0 on n2").  Records are small and
 * read capped; one that does not parse is passed over.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <xxhash.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "pf_int.h"

#define PF_RECORD_MAX (1u << 20)

/* Letters, digits, '.', '_', '-': a job id or a config's name as a file name. */
static void file_name(char *dst, size_t size, const char *src, size_t max)
{
    size_t k = 0;

    for (const char *c = src; *c && k + 1 < size && k < max; c++)
        dst[k++] = (isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '-') ? *c : '_';
    dst[k] = '\0';
}

static bool safe_job(const char *job)
{
    if (!job[0] || job[0] == '.' || strlen(job) > 64)
        return false;
    for (const char *c = job; *c; c++)
        if (!(isalnum((unsigned char)*c) || *c == '.' || *c == '_' || *c == '-'))
            return false;
    return true;
}

/* The newest *.json in sub other than `mine`, parsed; NULL when none. */
static cJSON *previous(const char *sub, const char *mine)
{
    DIR *d = opendir(sub);
    struct dirent *e;
    char best[NAME_MAX + 1] = "", path[PATH_MAX];
    struct timespec when = {0, 0};
    cJSON *doc = NULL;

    if (!d)
        return NULL;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        struct stat st;
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0 || strcmp(e->d_name, mine) == 0)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (st.st_mtim.tv_sec > when.tv_sec ||
            (st.st_mtim.tv_sec == when.tv_sec && st.st_mtim.tv_nsec > when.tv_nsec)) {
            when = st.st_mtim;
            pf__copy(best, sizeof(best), e->d_name);
        }
    }
    closedir(d);
    if (best[0] && snprintf(path, sizeof(path), "%s/%s", sub, best) < (int)sizeof(path)) {
        char *text = NULL;
        size_t len = 0;
        if (accel_read_file(path, PF_RECORD_MAX, &text, &len, NULL) == ACCEL_OK)
            doc = cJSON_ParseWithLength(text, len);
        accel_free(text);
    }
    return doc;
}

/* Appends "what a → b" to buf when a and b differ. */
static void differ(char *buf, size_t size, const char *what, const char *a, const char *b)
{
    size_t off = strlen(buf);

    if (strcmp(a, b) != 0 && off < size)
        snprintf(buf + off, size - off, "%s%s %s → %s", off ? ", " : "", what, a[0] ? a : "none",
                 b[0] ? b : "none");
}

static void drift_row(struct accel_pf_node *node, const cJSON *prev)
{
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(prev, "nodes");
    const cJSON *mine = cJSON_GetObjectItemCaseSensitive(nodes, node->host);
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(prev, "job");
    const cJSON *time = cJSON_GetObjectItemCaseSensitive(prev, "time");
    const char *jid = cJSON_IsString(job) ? job->valuestring : "?";
    const char *at = cJSON_IsString(time) ? time->valuestring : "?";
    struct accel_pf_versions was;
    const struct accel_pf_versions *now = &node->v;
    char d[ACCEL_PF_REASON - 100] = "", gw[112], gn[112];

    if (!prev) {
        accel_pf_add_row(node, "drift", ACCEL_PF_PASS, "the first record of this config");
        return;
    }
    if (!pf__versions_from_json(&was, mine)) {
        accel_pf_add_row(node, "drift", ACCEL_PF_PASS, "job %s (%s) has no record of %s", jid, at,
                         node->host);
        return;
    }
    differ(d, sizeof(d), "python", was.python, now->python);
    for (int i = 0; i < ACCEL_PF_NPKG; i++)
        differ(d, sizeof(d), accel_pf_pkg_name((enum accel_pf_pkg)i), was.pkg[i], now->pkg[i]);
    differ(d, sizeof(d), "torch's CUDA", was.torch_cuda, now->torch_cuda);
    differ(d, sizeof(d), "torch's NCCL", was.torch_nccl, now->torch_nccl);
    differ(d, sizeof(d), "driver", was.driver, now->driver);
    snprintf(gw, sizeof(gw), "%u x %s", was.ngpus, was.ngpus ? was.gpu[0].name : "-");
    snprintf(gn, sizeof(gn), "%u x %s", now->ngpus, now->ngpus ? now->gpu[0].name : "-");
    differ(d, sizeof(d), "GPUs", gw, gn);
    if (d[0])
        accel_pf_add_row(node, "drift", ACCEL_PF_WARN, "%s on %s since job %s (%s)", d, node->host,
                         jid, at);
    else
        accel_pf_add_row(node, "drift", ACCEL_PF_PASS, "the same versions as job %s (%s)", jid, at);
}

static char *record_json(const char *config, const char *job, const struct accel_pf_node *nodes,
                         size_t n)
{
    cJSON *o = cJSON_CreateObject(), *all;
    char stamp[32], *s;
    time_t t = time(NULL);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(o, "config", config);
    cJSON_AddStringToObject(o, "job", job);
    cJSON_AddStringToObject(o, "time", stamp);
    all = cJSON_AddObjectToObject(o, "nodes");
    for (size_t i = 0; i < n && all; i++) {
        char *v = pf__versions_to_json(&nodes[i].v);
        cJSON *p = v ? cJSON_Parse(v) : NULL;
        free(v);
        if (p)
            cJSON_AddItemToObject(all, nodes[i].host, p);
    }
    s = o ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

enum accel_err accel_pf_record(const char *dir, const char *config, const char *job,
                               struct accel_pf_node *nodes, size_t n, struct accel_error *err)
{
    char abs[PATH_MAX], stem[72], sub[PATH_MAX], mine[80], path[PATH_MAX];
    const char *base;
    cJSON *prev;
    char *text;
    enum accel_err rc;

    if (!safe_job(job))
        return accel_error_set(err, ACCEL_EINVAL,
                               "preflight: job '%s' cannot name a record (letters, digits, . _ -)",
                               job);
    if (!realpath(config, abs))
        pf__copy(abs, sizeof(abs), config);
    base = strrchr(abs, '/') ? strrchr(abs, '/') + 1 : abs;
    file_name(stem, sizeof(stem), base, strcspn(base, ".") ? strcspn(base, ".") : 64);
    if (snprintf(sub, sizeof(sub), "%s/%s-%016llx", dir, stem,
                 (unsigned long long)XXH3_64bits(abs, strlen(abs))) >= (int)sizeof(sub))
        return accel_error_set(err, ACCEL_EINVAL, "preflight: record directory too long: %s", dir);
    snprintf(mine, sizeof(mine), "%s.json", job);
    prev = previous(sub, mine);
    for (size_t i = 0; i < n; i++)
        drift_row(&nodes[i], prev);
    cJSON_Delete(prev);

    if ((mkdir(dir, 0755) != 0 && errno != EEXIST) || (mkdir(sub, 0755) != 0 && errno != EEXIST))
        return accel_error_sys(err, ACCEL_EIO, "preflight: couldn't make the record directory %s",
                               sub);
    text = record_json(abs, job, nodes, n);
    if (!text)
        return accel_error_set(err, ACCEL_ENOMEM, "out of memory");
    if (snprintf(path, sizeof(path), "%s/%s", sub, mine) >= (int)sizeof(path)) {
        free(text);
        return accel_error_set(err, ACCEL_EINVAL, "preflight: record path too long in %s", sub);
    }
    rc = accel_write_durable(path, text, strlen(text), 0644, err);
    free(text);
    return rc;
}
