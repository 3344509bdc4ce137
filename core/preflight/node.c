/*
 * node.c: one node's preflight.  The job's Python runs the probe (the
 * versions, the clean import test, then the threaded one: scripts.c) while
 * NVML is asked here; then the config is checked against the accelerate version the
 * probe found, and the hardware and network rows are added.  The rows say
 * what was found; nothing here decides whether the job starts.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "accel/alloc.h"
#include "accel/clock.h"
#include "accel/diag.h"
#include "pf_int.h"

#define PF_TIMEOUT_MS 60000u
#define PF_ROUNDS 3u

bool pf__version_number(const char *text, unsigned *out)
{
    unsigned long part[3] = {0, 0, 0};
    const char *s = text;
    int n = 0;

    /* MAJOR.MINOR[.PATCH]: what follows (".dev0", "rc1", "+local", ".x")
     * does not change the release */
    while (n < 3 && isdigit((unsigned char)*s)) {
        char *end;
        part[n++] = strtoul(s, &end, 10);
        if (part[n - 1] > 99)
            return false;
        s = end;
        if (*s != '.')
            break;
        s++;
    }
    if (n < 2)
        return false;
    *out = ACCEL_VERSION((unsigned)part[0], (unsigned)part[1], (unsigned)part[2]);
    return true;
}

/* A dotted Python module name of at most 100 characters. */
static bool module_name(const char *m)
{
    size_t n = strlen(m);
    bool start = true;

    if (n == 0 || n > 100)
        return false;
    for (const char *c = m; *c; c++) {
        if (*c == '.') {
            if (start)
                return false;
            start = true;
        } else if (isalpha((unsigned char)*c) || *c == '_' ||
                   (!start && isdigit((unsigned char)*c))) {
            start = false;
        } else {
            return false;
        }
    }
    return !start;
}

static bool executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* `want` (a path, or a name looked up on PATH), else the first python or
 * python3 on PATH, into path. */
static bool find_python(const char *want, char *path, size_t size)
{
    const char *env = getenv("PATH");
    const char *p = env && *env ? env : "/usr/local/bin:/usr/bin:/bin";

    if (want && strchr(want, '/')) {
        pf__copy(path, size, want);
        return executable(path);
    }
    while (*p) {
        size_t len = strcspn(p, ":");
        const char *names[2] = {want ? want : "python", want ? NULL : "python3"};
        for (int i = 0; i < 2 && names[i]; i++) {
            /* an empty entry is the working directory, as for execvp */
            int w = len ? snprintf(path, size, "%.*s/%s", (int)len, p, names[i])
                        : snprintf(path, size, "./%s", names[i]);
            if (w > 0 && (size_t)w < size && executable(path))
                return true;
        }
        p += len;
        p += *p == ':';
    }
    return false;
}

/* Bytes of the first line of text (no newline: all of it). */
static size_t line_len(const char *text, size_t len)
{
    const char *nl = memchr(text, '\n', len);
    return nl ? (size_t)(nl - text) : len;
}

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The probe's report into v; false when there is none to read. */
static bool read_probe(const struct pf__proc *p, struct accel_pf_versions *v, cJSON **doc)
{
    const cJSON *pk;

    *doc =
        p->rep && !p->rep_over ? cJSON_ParseWithLength(p->rep, line_len(p->rep, p->rep_len)) : NULL;
    if (!cJSON_IsObject(*doc))
        return false;
    pf__copy(v->python, sizeof(v->python), jstr(*doc, "python"));
    pk = cJSON_GetObjectItemCaseSensitive(*doc, "packages");
    for (int i = 0; i < ACCEL_PF_NPKG; i++)
        pf__copy(v->pkg[i], sizeof(v->pkg[i]), jstr(pk, accel_pf_pkg_name((enum accel_pf_pkg)i)));
    pf__copy(v->torch_cuda, sizeof(v->torch_cuda), jstr(*doc, "torch_cuda"));
    pf__copy(v->torch_nccl, sizeof(v->torch_nccl), jstr(*doc, "torch_nccl"));
    return true;
}

static void versions_row(struct accel_pf_node *node, const char *gpu_why, const cJSON *probe)
{
    const struct accel_pf_versions *v = &node->v;
    const char *terr = jstr(probe, "torch_error");
    char gpus[256] = "";
    size_t off = 0;

    if (v->driver[0]) {
        off += (size_t)snprintf(gpus, sizeof(gpus), "; driver %s, %u GPU%s", v->driver, v->ngpus,
                                v->ngpus == 1 ? "" : "s");
        if (v->ngpus > 0 && off < sizeof(gpus))
            snprintf(gpus + off, sizeof(gpus) - off, " (%s, sm %u.%u)", v->gpu[0].name,
                     v->gpu[0].cc_major, v->gpu[0].cc_minor);
    } else {
        snprintf(gpus, sizeof(gpus), "; %s", gpu_why);
    }
    if (!v->pkg[ACCEL_PF_ACCELERATE][0] || !v->pkg[ACCEL_PF_TORCH][0]) {
        const char *missing = !v->pkg[ACCEL_PF_ACCELERATE][0] ? "accelerate" : "torch";
        accel_pf_add_row(
            node, "versions", ACCEL_PF_FAIL,
            "%s is not installed for %s (python %s): `%s -m pip install %s`, or put the "
            "job's environment first on PATH%s",
            missing, v->python_path, v->python, v->python_path, missing, gpus);
        return;
    }
    accel_pf_add_row(
        node, "versions", terr ? ACCEL_PF_FAIL : ACCEL_PF_PASS,
        "python %s, torch %s (CUDA %s, NCCL %s), accelerate %s, transformers %s, peft %s, "
        "deepspeed %s%s%s%s",
        v->python, v->pkg[ACCEL_PF_TORCH], v->torch_cuda[0] ? v->torch_cuda : "-",
        v->torch_nccl[0] ? v->torch_nccl : "-", v->pkg[ACCEL_PF_ACCELERATE],
        v->pkg[ACCEL_PF_TRANSFORMERS][0] ? v->pkg[ACCEL_PF_TRANSFORMERS] : "-",
        v->pkg[ACCEL_PF_PEFT][0] ? v->pkg[ACCEL_PF_PEFT] : "-",
        v->pkg[ACCEL_PF_DEEPSPEED][0] ? v->pkg[ACCEL_PF_DEEPSPEED] : "-", gpus,
        terr ? "; import torch: " : "", terr ? terr : "");
}

static void imports_row(struct accel_pf_node *node, const cJSON *probe)
{
    const cJSON *imp = cJSON_GetObjectItemCaseSensitive(probe, "imports"), *it;
    char done[ACCEL_PF_REASON] = "";
    size_t off = 0;

    if (cJSON_GetArraySize(imp) == 0)
        return; /* nothing to import: the versions row says why */
    cJSON_ArrayForEach(it, imp)
    {
        const char *what = jstr(it, "what"), *e = jstr(it, "error");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(it, "seconds");
        if (e) {
            accel_pf_add_row(node, "imports", ACCEL_PF_FAIL, "%s: %s", what ? what : "?", e);
            return;
        }
        if (off < sizeof(done))
            off +=
                (size_t)snprintf(done + off, sizeof(done) - off, "%s%s (%.2f s)", off ? "; " : "",
                                 what ? what : "?", cJSON_IsNumber(s) ? s->valuedouble : 0.0);
    }
    accel_pf_add_row(node, "imports", ACCEL_PF_PASS, "in a clean process: %s", done);
}

static void threads_row(struct accel_pf_node *node, const struct pf__proc *p, unsigned timeout_ms)
{
    size_t first = p->rep ? line_len(p->rep, p->rep_len) : 0;
    cJSON *doc = p->rep && !p->rep_over && first < p->rep_len
                     ? cJSON_ParseWithLength(p->rep + first + 1, p->rep_len - first - 1)
                     : NULL;
    const cJSON *found = cJSON_GetObjectItemCaseSensitive(doc, "concurrent_only");
    const cJSON *mods = cJSON_GetObjectItemCaseSensitive(doc, "modules");
    const cJSON *rounds = cJSON_GetObjectItemCaseSensitive(doc, "rounds");
    int nmods = cJSON_GetArraySize(mods);

    if (!cJSON_IsObject(doc)) {
        char why[400];
        pf__proc_why(p, timeout_ms, why, sizeof(why));
        accel_pf_add_row(node, "threads", ACCEL_PF_WARN,
                         "the import from several threads at once %s%s", why,
                         p->timed_out ? " (an import deadlock?)" : "");
    } else if (nmods == 0) {
        /* no accelerate: the versions row fails already */
    } else if (cJSON_IsObject(found) && cJSON_GetArraySize(found) > 0) {
        /* the clearest error to show: a partially initialized module names
         * both ends of the cycle; a deadlock error names only one */
        const cJSON *show = found->child, *f;
        cJSON_ArrayForEach(f, found)
        {
            if (cJSON_IsString(f) && strstr(f->valuestring, "partially initialized")) {
                show = f;
                break;
            }
        }
        char names[200] = "";
        size_t off = 0;
        cJSON_ArrayForEach(f, found)
        {
            if (off < sizeof(names))
                off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", off ? ", " : "",
                                        f->string);
        }
        accel_pf_add_row(
            node, "threads", ACCEL_PF_WARN,
            "%d of %d modules fail when imported from threads at once, though each imports "
            "alone (an import cycle): %s; %s: %s; import the package once in the main thread "
            "before starting threads",
            cJSON_GetArraySize(found), nmods, names, show->string,
            cJSON_IsString(show) ? show->valuestring : "?");
    } else {
        const cJSON *skipped = cJSON_GetObjectItemCaseSensitive(doc, "skipped");
        accel_pf_add_row(node, "threads", ACCEL_PF_PASS,
                         "%d modules imported by %d threads at once, %d round%s: none failed "
                         "there that imports from one thread%s%s",
                         nmods, nmods, cJSON_IsNumber(rounds) ? rounds->valueint : 0,
                         cJSON_IsNumber(rounds) && rounds->valueint == 1 ? "" : "s",
                         cJSON_GetArraySize(skipped) > 0 ? "; not tried twice in one process: "
                                                         : "",
                         cJSON_GetArraySize(skipped) > 0 && cJSON_IsString(skipped->child)
                             ? skipped->child->valuestring
                             : "");
    }
    cJSON_Delete(doc);
}

/* The config against this node's accelerate; *cfg loaded on success. */
static bool config_row(struct accel_pf_node *node, const struct accel_pf_opts *o,
                       struct accel_cfg *cfg)
{
    const char *have = node->v.pkg[ACCEL_PF_ACCELERATE];
    struct accel_cfg_opts copts = {.site = o->site};
    char target[32], note[200] = "";
    enum accel_pf_status ok = ACCEL_PF_PASS;
    struct accel_diags d;
    struct accel_error err;
    enum accel_err rc;
    unsigned v = 0;

    if (have[0] && pf__version_number(have, &v)) {
        if (v > ACCEL_VERSION_NEWEST) {
            accel_version_format(ACCEL_VERSION_NEWEST, target, sizeof(target));
            snprintf(note, sizeof(note),
                     "; accelerate %s is newer than accelrun knows: checked against %s", have,
                     target);
            v = ACCEL_VERSION_NEWEST;
            ok = ACCEL_PF_WARN;
        } else if (v < ACCEL_VERSION_OLDEST) {
            snprintf(note, sizeof(note), "; keys older than 1.0.0 taken as known to %s", have);
        }
    } else {
        v = ACCEL_VERSION_NEWEST;
        snprintf(note, sizeof(note),
                 "; this node's accelerate unknown: checked against the "
                 "newest");
        ok = ACCEL_PF_WARN;
    }
    copts.version = v;
    accel_version_format(v, target, sizeof(target));
    accel_diags_init(&d);
    accel_error_clear(&err);
    rc = accel_cfg_load(cfg, o->config, &copts, &d, &err);
    accel_diags_sort(&d);
    if (rc != ACCEL_OK) {
        char first[2][300] = {"", ""};
        size_t k = 0;
        for (size_t i = 0; i < d.n && k < 2; i++)
            if (d.v[i].sev == ACCEL_SEV_ERROR)
                accel_diag_format(&d.v[i], first[k++], sizeof(first[0]));
        if (k == 0)
            pf__copy(first[0], sizeof(first[0]), err.msg);
        accel_pf_add_row(node, "config", ACCEL_PF_FAIL, "against accelerate %s: %s%s%s%s", target,
                         first[0], first[1][0] ? "; " : "", first[1],
                         d.errors > 2 ? " (and more: accelrun check --accelerate-version)" : "");
    } else {
        accel_pf_add_row(node, "config", ok,
                         "%s checked against accelerate %s: %zu error%s, %zu warning%s%s",
                         o->config, target, d.errors, d.errors == 1 ? "" : "s", d.warnings,
                         d.warnings == 1 ? "" : "s", note);
    }
    accel_diags_free(&d);
    return rc == ACCEL_OK;
}

static void start_python(struct pf__proc *proc, const char *py, const struct accel_pf_opts *o)
{
    char rounds[16];
    const char *argv[5 + ACCEL_PF_MAX_IMPORTS] = {py, "-c", pf__probe_py, rounds};
    size_t n = 4;

    snprintf(rounds, sizeof(rounds), "%u", o->rounds ? o->rounds : PF_ROUNDS);
    /* the job's own modules: their packages' findings lead the threads row */
    for (size_t i = 0; i < o->nimports; i++)
        argv[n++] = o->imports[i];
    argv[n] = NULL;
    pf__start(proc, argv);
}

enum accel_err accel_pf_opts_check(const struct accel_pf_opts *o, struct accel_error *err)
{
    if (!o->config || !o->config[0])
        return accel_error_set(err, ACCEL_EINVAL, "preflight: no config to check");
    if (o->nimports > ACCEL_PF_MAX_IMPORTS)
        return accel_error_set(err, ACCEL_EINVAL, "preflight: more than %d modules to import",
                               ACCEL_PF_MAX_IMPORTS);
    for (size_t i = 0; i < o->nimports; i++)
        if (!module_name(o->imports[i]))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "preflight: '%s' is not a Python module name (letters, "
                                   "digits, _ and dots)",
                                   o->imports[i]);
    return ACCEL_OK;
}

enum accel_err accel_pf_check_node(struct accel_pf_node *node, const struct accel_pf_opts *o,
                                   struct accel_error *err)
{
    unsigned timeout = o->timeout_ms ? o->timeout_ms : PF_TIMEOUT_MS;
    struct pf__proc proc;
    struct accel_cfg cfg;
    char gpu_why[200] = "", why[400];
    cJSON *probe = NULL;
    bool have_cfg;

    memset(node, 0, sizeof(*node));
    if (accel_pf_opts_check(o, err) != ACCEL_OK)
        return err ? err->code : ACCEL_EINVAL;
    if (gethostname(node->host, sizeof(node->host) - 1) != 0)
        pf__copy(node->host, sizeof(node->host), "?");
    node->host[strcspn(node->host, ".")] = '\0';

    if (!find_python(o->python, node->v.python_path, sizeof(node->v.python_path))) {
        if (o->python)
            accel_pf_add_row(node, "python", ACCEL_PF_FAIL, "%s is not an executable file",
                             o->python);
        else
            accel_pf_add_row(
                node, "python", ACCEL_PF_FAIL,
                "no python or python3 on PATH (%s): activate the job's environment, or "
                "name it (--python)",
                getenv("PATH") ? getenv("PATH") : "unset");
        memset(&proc, 0, sizeof(proc));
        proc.done = true;
        proc.pid = -1;
    } else {
        start_python(&proc, node->v.python_path, o);
    }
    /* while Python starts: the driver */
    if (!pf__nvml(&node->v, gpu_why, sizeof(gpu_why)))
        node->v.driver[0] = '\0';
    if (node->nrows == 0) {
        pf__wait_all(&proc, 1, accel_now() + timeout / 1000.0);
        if (read_probe(&proc, &node->v, &probe)) {
            accel_pf_add_row(node, "python", ACCEL_PF_PASS, "%s (python %s)", node->v.python_path,
                             node->v.python);
            versions_row(node, gpu_why, probe);
            imports_row(node, probe);
            threads_row(node, &proc, timeout);
        } else {
            pf__proc_why(&proc, timeout, why, sizeof(why));
            accel_pf_add_row(node, "python", ACCEL_PF_FAIL, "%s %s", node->v.python_path, why);
        }
    }
    have_cfg = config_row(node, o, &cfg);
    pf__check_hardware(node, have_cfg ? &cfg : NULL, o->procs_per_node);
    pf__check_network(node);
    if (have_cfg)
        accel_cfg_free(&cfg);
    cJSON_Delete(probe);
    pf__proc_free(&proc);
    return ACCEL_OK;
}
