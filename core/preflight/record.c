/*
 * record.c: the version lock of a job, and drift from the one before.
 * DIR/<config name>-<XXH3 of the config's absolute path>.<uid>/<job>.json holds
 *
 *   {"config": PATH, "job": ID, "time": "2026-12-05T21:40:00Z",
 *    "nodes": {HOST: {"python", "packages": {...}, "torch_cuda", ...}}}
 *
 * written durably (temp, fsync, rename).  Each node is compared with its
 * entry in the newest earlier record of the same config that has one (of
 * the newest PF_RECORDS_LOOKED_AT): "torch 2.13.0 → 2.15.0 on n2".  The
 * folder is the user's own (a shared DIR may be world-writable: a folder
 * someone else made in its place is refused).  Records are read capped;
 * one that does not parse is passed over.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <xxhash.h>

#include "accel/alloc.h"
#include "accel/fsutil.h"
#include "pf_int.h"

#define PF_RECORD_MAX (8u << 20) /* 4096 nodes of ~1 KiB each, and room */

/* Letters, digits, '.', '_', '-': a job id or a config's name as a file name. */
static void file_name(char *dst, size_t size, const char *src, size_t max)
{
    size_t k = 0;

    for (const char *c = src; *c && k + 1 < size && k < max; c++)
        dst[k++] = pf__plain_char(*c) ? *c : '_';
    dst[k] = '\0';
}

/* A job id that is a file name of its own: plain, not hidden, short. */
static bool safe_job(const char *job)
{
    return pf__plain_name(job) && job[0] != '.' && strlen(job) <= 64;
}

#define PF_RECORDS_LOOKED_AT 16 /* the newest records searched for a node */

struct record {
    char name[NAME_MAX + 1];
    struct timespec mtime;
};

static int newest_first(const void *a, const void *b)
{
    const struct timespec *x = &((const struct record *)a)->mtime;
    const struct timespec *y = &((const struct record *)b)->mtime;
    if (x->tv_sec != y->tv_sec)
        return x->tv_sec < y->tv_sec ? 1 : -1;
    return x->tv_nsec < y->tv_nsec ? 1 : x->tv_nsec > y->tv_nsec ? -1 : 0;
}

/* The *.json files in sub other than `mine`, newest first: at most
 * PF_RECORDS_LOOKED_AT of them in *out (accel_free), their count returned. */
static size_t records(const char *sub, const char *mine, struct record **out)
{
    int fd = open(sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct record *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;

    *out = NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        struct stat st;
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0 || strcmp(e->d_name, mine) == 0)
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            struct record *w = accel_realloc(v, (cap = cap ? 2 * cap : 32) * sizeof(*v));
            if (!w)
                break;
            v = w;
        }
        pf__copy(v[n].name, sizeof(v[n].name), e->d_name);
        v[n++].mtime = st.st_mtim;
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof(*v), newest_first);
    *out = v;
    return n < PF_RECORDS_LOOKED_AT ? n : PF_RECORDS_LOOKED_AT;
}

static cJSON *read_record(const char *sub, const char *name)
{
    char path[PATH_MAX], *text = NULL;
    size_t len = 0;
    cJSON *doc = NULL;

    if (snprintf(path, sizeof(path), "%s/%s", sub, name) < (int)sizeof(path) &&
        accel_read_file(path, PF_RECORD_MAX, &text, &len, NULL) == ACCEL_OK)
        doc = cJSON_ParseWithLength(text, len);
    accel_free(text);
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

/* `prev`: the newest earlier record with this node's entry; NULL with
 * `any` when there are records but none has this node. */
static void drift_row(struct accel_pf_node *node, const cJSON *prev, bool any)
{
    const cJSON *mine = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(prev, "nodes"), node->host);
    const cJSON *job = cJSON_GetObjectItemCaseSensitive(prev, "job");
    const cJSON *time = cJSON_GetObjectItemCaseSensitive(prev, "time");
    const char *jid = cJSON_IsString(job) ? job->valuestring : "?";
    const char *at = cJSON_IsString(time) ? time->valuestring : "?";
    struct accel_pf_versions was;
    const struct accel_pf_versions *now = &node->v;
    char d[ACCEL_PF_REASON - 100] = "", gw[112], gn[112];

    if (!prev) {
        accel_pf_add_row(node, "drift", ACCEL_PF_PASS,
                         any ? "no earlier record of this config has %s"
                             : "the first record of this config%s",
                         any ? node->host : "");
        return;
    }
    if (!pf__versions_from_json(&was, mine)) {
        accel_pf_add_row(node, "drift", ACCEL_PF_WARN,
                         "job %s (%s): its record of %s is unreadable", jid, at, node->host);
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

/* DIR and DIR/NAME made if missing; DIR/NAME must then be a folder of
 * this user that no one else may write to (DIR may be a shared 1777
 * folder: a name another user made first is refused, never followed). */
static enum accel_err own_folder(const char *dir, const char *sub, struct accel_error *err)
{
    struct stat st;

    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return accel_error_sys(err, ACCEL_EIO, "preflight: couldn't make the record folder %s",
                               dir);
    if (mkdir(sub, 0755) != 0 && errno != EEXIST)
        return accel_error_sys(err, ACCEL_EIO, "preflight: couldn't make the record folder %s",
                               sub);
    if (lstat(sub, &st) != 0)
        return accel_error_sys(err, ACCEL_EIO, "preflight: couldn't look at %s", sub);
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
        return accel_error_set(err, ACCEL_EPERM,
                               "preflight: %s is not a folder of uid %u that only it may write "
                               "to: no record kept (remove it)",
                               sub, (unsigned)geteuid());
    return ACCEL_OK;
}

enum accel_err accel_pf_record(const char *dir, const char *config, const char *job,
                               struct accel_pf_node *nodes, size_t n, struct accel_error *err)
{
    char abs[PATH_MAX], stem[72], sub[PATH_MAX], mine[80], path[PATH_MAX];
    struct record *recs = NULL;
    size_t nrecs;
    const char *base;
    char *text;
    enum accel_err rc;

    if (!safe_job(job)) {
        for (size_t i = 0; i < n; i++)
            accel_pf_add_row(&nodes[i], "drift", ACCEL_PF_WARN, "not recorded: job '%.64s'", job);
        return accel_error_set(err, ACCEL_EINVAL,
                               "preflight: couldn't name a record after job '%s' (letters, "
                               "digits, . _ -)",
                               job);
    }
    if (!realpath(config, abs))
        pf__copy(abs, sizeof(abs), config);
    base = strrchr(abs, '/') ? strrchr(abs, '/') + 1 : abs;
    file_name(stem, sizeof(stem), base, strcspn(base, ".") ? strcspn(base, ".") : 64);
    /* one folder per config and user: another user's records are neither
     * read nor overwritten */
    if (snprintf(sub, sizeof(sub), "%s/%s-%016llx.%u", dir, stem,
                 (unsigned long long)XXH3_64bits(abs, strlen(abs)),
                 (unsigned)geteuid()) >= (int)sizeof(sub))
        return accel_error_set(err, ACCEL_EINVAL, "preflight: record folder too long: %s", dir);
    snprintf(mine, sizeof(mine), "%s.json", job);
    rc = own_folder(dir, sub, err);
    if (rc != ACCEL_OK) {
        for (size_t i = 0; i < n; i++)
            accel_pf_add_row(&nodes[i], "drift", ACCEL_PF_WARN, "not recorded: %s", err->msg);
        return rc;
    }
    /* each node against the newest record that has it */
    nrecs = records(sub, mine, &recs);
    {
        cJSON *docs[PF_RECORDS_LOOKED_AT] = {NULL};
        for (size_t i = 0; i < n; i++) {
            const cJSON *found = NULL;
            for (size_t r = 0; r < nrecs && !found; r++) {
                if (!docs[r])
                    docs[r] = read_record(sub, recs[r].name);
                if (cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(docs[r], "nodes"), nodes[i].host))
                    found = docs[r];
            }
            drift_row(&nodes[i], found, nrecs > 0);
        }
        for (size_t r = 0; r < nrecs; r++)
            cJSON_Delete(docs[r]);
    }
    accel_free(recs);
    text = record_json(abs, job, nodes, n);
    if (!text)
        return accel_error_set(err, ACCEL_ENOMEM, "preflight: out of memory writing the record");
    if (snprintf(path, sizeof(path), "%s/%s", sub, mine) >= (int)sizeof(path)) {
        free(text);
        return accel_error_set(err, ACCEL_EINVAL, "preflight: record path too long in %s", sub);
    }
    rc = accel_write_durable(path, text, strlen(text), 0644, err);
    free(text);
    return rc;
}
