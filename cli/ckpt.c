/*
 * ckpt.c: `accelrun ckpt` lists, shows, verifies and consolidates the
 * checkpoints libaccelrun saves (accel/ckpt.h, DESIGN 9): ROOT/step-NNNNNNNN
 * directories of one safetensors file per rank and a manifest.json.  Every
 * read goes through the public ckpt API, so the command trusts a checkpoint
 * exactly as far as a trainer loading it would; it never writes into one.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/ckpt.h"
#include "accel/fsutil.h"
#include "cli.h"

const char cli_ckpt_usage[] =
    "usage: accelrun ckpt ls ROOT\n"
    "       accelrun ckpt show PATH\n"
    "       accelrun ckpt verify PATH\n"
    "       accelrun ckpt consolidate PATH OUTDIR [--max-shard-size SIZE]\n"
    "\n"
    "Inspect, check and export the sharded checkpoints libaccelrun saves: one\n"
    "safetensors file per rank and a manifest.json (the commit) in each\n"
    "ROOT/step-NNNNNNNN.  PATH is a checkpoint directory, or a ROOT: the checkpoint\n"
    "a trainer's load takes (the newest step with a manifest.json, which must load).\n"
    "\n"
    "  ls ROOT            every step directory: step, committed or not, world size,\n"
    "                     size; which one a load takes and what ROOT/latest names\n"
    "  show PATH          step, world size, metadata, tensors with dtype and shape\n"
    "  verify PATH        read every byte: checksums, headers, file sizes\n"
    "  consolidate PATH OUTDIR\n"
    "                     write the model (every tensor not named optim.*) in the\n"
    "                     Hugging Face layout: OUTDIR/model.safetensors, or shards\n"
    "                     model-0000i-of-0000N.safetensors and an index\n"
    "  --max-shard-size SIZE\n"
    "                     largest shard of consolidate: 5GB (the default), 500MB,\n"
    "                     10GiB or bytes; KB MB GB TB are powers of 1000 (as in\n"
    "                     huggingface_hub), KiB MiB GiB TiB powers of 1024\n"
    "  -h, --help         this text\n"
    "\n"
    "Exit status: 0 success, 1 a damaged checkpoint (a manifest, header, size or\n"
    "checksum that does not check out), 2 usage, or no checkpoint at PATH.\n";

#define MODEL_SHARD_DEFAULT UINT64_C(5000000000) /* huggingface_hub's max_shard_size */
#define SIZE_MAX_BYTES (UINT64_C(1) << 60)
#define LATEST_MAX 256 /* bytes of ROOT/latest read */
#define INDEX_MAX (256u << 20)

static char prog_name[64];

/* "812 B", "12.0 MiB": powers of 1024, one decimal. */
static const char *human(uint64_t n, char *buf, size_t len)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    int u = -1;

    if (n < 1024) {
        snprintf(buf, len, "%" PRIu64 " B", n);
        return buf;
    }
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

/* SIZE: a decimal number (a fraction allowed), blanks, then nothing or B
 * (bytes), KB MB GB TB (10^3..10^12) or KiB MiB GiB TiB (2^10..2^40), any
 * case.  The result is rounded down, as huggingface_hub's int(value * unit). */
static bool parse_size(const char *s, uint64_t *out)
{
    static const struct {
        const char *name;
        uint64_t mult;
    } units[] = {{"", 1},
                 {"b", 1},
                 {"kb", UINT64_C(1000)},
                 {"mb", UINT64_C(1000000)},
                 {"gb", UINT64_C(1000000000)},
                 {"tb", UINT64_C(1000000000000)},
                 {"kib", UINT64_C(1) << 10},
                 {"mib", UINT64_C(1) << 20},
                 {"gib", UINT64_C(1) << 30},
                 {"tib", UINT64_C(1) << 40}};
    uint64_t whole = 0, frac = 0, scale = 1, mult = 0;
    const char *p = s;
    char unit[4];
    size_t n = 0;

    while (*p == ' ')
        p++;
    if (*p < '0' || *p > '9')
        return false;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (whole > SIZE_MAX_BYTES)
            return false;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return false;
        for (; *p >= '0' && *p <= '9'; p++)
            if (scale < UINT64_C(1000000000000)) { /* 12 digits are plenty */
                frac = frac * 10 + (uint64_t)(*p - '0');
                scale *= 10;
            }
    }
    while (*p == ' ')
        p++;
    for (; *p && *p != ' ' && n < sizeof unit - 1; p++)
        unit[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
    unit[n] = '\0';
    while (*p == ' ')
        p++;
    if (*p)
        return false;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(unit, units[i].name))
            mult = units[i].mult;
    if (!mult || whole > SIZE_MAX_BYTES / mult)
        return false;
    /* frac / scale x mult, exactly: mult and scale both <= 10^12 */
    *out = whole * mult + (uint64_t)((unsigned __int128)frac * mult / scale);
    return *out >= 1 && *out <= SIZE_MAX_BYTES;
}

static uint64_t tensor_bytes(const struct accel_ckpt_tensor *t)
{
    uint64_t n = accel_dtype_size(t->dtype);

    for (unsigned d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

static bool is_optim(const char *name)
{
    return strncmp(name, "optim.", 6) == 0;
}

/* "[768, 2304]", "[]" for a scalar. */
static void shape_text(const struct accel_ckpt_tensor *t, char *buf, size_t len)
{
    size_t at = 0;

    at += (size_t)snprintf(buf, len, "[");
    for (unsigned d = 0; d < t->ndim && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRIu64, d ? ", " : "", t->shape[d]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
}

/* The exit status for a checkpoint that could not be opened or read: 1 when
 * what is there is damaged, 2 when nothing usable is there at all. */
static int ckpt_status(enum accel_err rc)
{
    return rc == ACCEL_EPARSE || rc == ACCEL_ETOOBIG || rc == ACCEL_EIO ? CLI_EXIT_FINDINGS
                                                                        : CLI_EXIT_USAGE;
}

static int open_ckpt(const char *path, struct accel_ckpt **c)
{
    struct accel_error err;
    enum accel_err rc;

    accel_error_clear(&err);
    rc = accel_ckpt_open(c, path, &err);
    if (rc == ACCEL_OK)
        return CLI_EXIT_OK;
    fprintf(stderr, "%s: %s\n", prog_name, err.msg);
    /* a manifest that cannot be read (EIO) is a file problem, not damage */
    return rc == ACCEL_EIO ? CLI_EXIT_USAGE : ckpt_status(rc);
}

/* ---------------------------------------------------------------- ls */

/* ROOT/latest: the step name it holds into buf (empty when there is none),
 * or a description of what is wrong with it into `bad`. */
static void read_latest(const char *root, char *buf, size_t len, char *bad, size_t badlen)
{
    char path[4096], *text = NULL;
    struct accel_error err;
    enum accel_err rc;
    size_t n = 0;

    buf[0] = bad[0] = '\0';
    accel_error_clear(&err);
    if ((size_t)snprintf(path, sizeof path, "%s/latest", root) >= sizeof path)
        return;
    rc = accel_read_file(path, LATEST_MAX, &text, &n, &err);
    if (rc == ACCEL_ENOTFOUND)
        return;
    if (rc != ACCEL_OK) {
        snprintf(bad, badlen, "%s", err.msg);
        return;
    }
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        text[--n] = '\0';
    if (n == 13 && !strncmp(text, "step-", 5) && strspn(text + 5, "0123456789") == 8)
        snprintf(buf, len, "%s", text);
    else
        snprintf(bad, badlen, "%s/latest holds '%.40s', not a step-NNNNNNNN name", root, text);
    accel_free(text);
}

/* What a trainer's load of `root` takes: the library's own choice (the
 * newest step with a manifest, which must load), as an index into e, or
 * SIZE_MAX with the reason in `why`. */
static size_t loaded_entry(const char *root, const struct accel_ckpt_entry *e, size_t n, char *why,
                           size_t len)
{
    struct accel_ckpt *c = NULL;
    struct accel_error err;
    size_t at = SIZE_MAX;

    accel_error_clear(&err);
    why[0] = '\0';
    /* its rank files too: a truncated one fails the load's first read */
    if (accel_ckpt_open(&c, root, &err) != ACCEL_OK ||
        accel_ckpt_check_files(c, &err) != ACCEL_OK) {
        snprintf(why, len, "%s", err.msg);
        accel_ckpt_close(c);
        return SIZE_MAX;
    }
    {
        const char *dir = accel_ckpt_dir(c), *base = strrchr(dir, '/');
        base = base ? base + 1 : dir;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(e[i].name, base))
                at = i;
    }
    accel_ckpt_close(c);
    return at;
}

static int cmd_ls(const char *root)
{
    struct accel_ckpt_entry *e = NULL;
    struct accel_error err;
    size_t n = 0, committed = 0, load, latest_at = SIZE_MAX;
    char latest[32], latest_bad[1024], why[1024], manifest[4200];
    enum accel_err rc;

    accel_error_clear(&err);
    rc = accel_ckpt_list(root, &e, &n, &err);
    if (rc != ACCEL_OK) {
        fprintf(stderr, "%s: %s\n", prog_name, err.msg);
        return CLI_EXIT_USAGE;
    }
    read_latest(root, latest, sizeof latest, latest_bad, sizeof latest_bad);
    load = n ? loaded_entry(root, e, n, why, sizeof why) : SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        committed += e[i].committed;
        if (latest[0] && !strcmp(e[i].name, latest))
            latest_at = i;
    }
    if (n == 0) {
        snprintf(manifest, sizeof manifest, "%s/manifest.json", root);
        if (access(manifest, F_OK) == 0)
            printf("%s: no step-NNNNNNNN directories: this is one checkpoint (try `accelrun "
                   "ckpt show %s`)\n",
                   root, root);
        else
            printf("%s: no step-NNNNNNNN directories\n", root);
    } else {
        printf("%-14s %9s  %-30s %6s  %10s\n", "name", "step", "state", "world", "size");
    }
    for (size_t i = 0; i < n; i++) {
        char size[32], world[16], state[64], mark[32] = "";
        struct accel_ckpt *c = NULL;
        bool has_manifest;

        snprintf(manifest, sizeof manifest, "%s/%s/manifest.json", root, e[i].name);
        has_manifest = !e[i].committed && access(manifest, F_OK) == 0;
        snprintf(state, sizeof state, "%s",
                 e[i].committed ? "committed"
                 : has_manifest ? "damaged (manifest.json)"
                                : "incomplete (no manifest.json)");
        snprintf(world, sizeof world, "%u", e[i].world);
        snprintf(mark, sizeof mark, "%s%s%s", i == load ? "<- load" : "",
                 i == load && i == latest_at ? ", " : "",
                 i == latest_at ? (i == load ? "latest" : "<- latest") : "");
        printf("%-14s %9lu  %-30s %6s  %10s%s%s\n", e[i].name, e[i].step, state,
               e[i].committed ? world : "-",
               e[i].committed ? human(e[i].bytes, size, sizeof size) : "-", mark[0] ? "  " : "",
               mark);
        if (has_manifest) { /* say why the manifest does not count */
            snprintf(manifest, sizeof manifest, "%s/%s", root, e[i].name);
            accel_error_clear(&err);
            if (accel_ckpt_open(&c, manifest, &err) != ACCEL_OK)
                printf("    %s\n", err.msg);
            accel_ckpt_close(c);
        }
    }
    if (n > 0 && load != SIZE_MAX)
        printf("%s: %zu committed, %zu not; a load takes %s\n", root, committed, n - committed,
               e[load].name);
    else if (n > 0)
        printf("%s: %zu committed, %zu not; a load fails: %s\n", root, committed, n - committed,
               why);
    if (latest_bad[0])
        printf("warning: %s\n", latest_bad);
    else if (!latest[0] && committed > 0)
        printf("%s/latest: missing (a load does not need it)\n", root);
    else if (latest[0] && latest_at == SIZE_MAX)
        printf("warning: %s/latest names %s, which is not there (a load ignores latest)\n", root,
               latest);
    else if (latest[0] && !e[latest_at].committed)
        printf("warning: %s/latest names %s, which is not committed (a load ignores latest)\n",
               root, latest);
    else if (latest[0])
        printf("%s/latest: %s%s\n", root, latest,
               latest_at == load || load == SIZE_MAX ? "" : " (a load ignores latest)");
    accel_free(e);
    return CLI_EXIT_OK;
}

/* ---------------------------------------------------------------- show */

/* s with control characters written as \n, \t or \xHH, for one line. */
static const char *esc(const char *s, char *buf, size_t len)
{
    size_t at = 0;

    for (; *s && at + 5 < len; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '\n' || ch == '\t')
            at += (size_t)snprintf(buf + at, len - at, "\\%c", ch == '\n' ? 'n' : 't');
        else if (ch < 0x20 || ch == 0x7f)
            at += (size_t)snprintf(buf + at, len - at, "\\x%02x", ch);
        else
            buf[at++] = (char)ch;
    }
    buf[at] = '\0';
    return buf;
}

/* The API looks metadata up by key and does not list the keys; the
 * manifest's "meta" object does (docs/accelrun-ckpt.md).  Values come from
 * the API. */
static void show_meta(const struct accel_ckpt *c)
{
    char path[4200], *text = NULL, k[4 * ACCEL_CKPT_MAX_META_LEN + 8],
                     v[4 * ACCEL_CKPT_MAX_META_LEN + 8];
    struct accel_error err;
    const cJSON *m;
    cJSON *root;
    size_t n, shown = 0;

    accel_error_clear(&err);
    if ((size_t)snprintf(path, sizeof path, "%s/manifest.json", accel_ckpt_dir(c)) >= sizeof path ||
        accel_read_file(path, ACCEL_CKPT_MAX_MANIFEST, &text, &n, &err) != ACCEL_OK)
        return;
    root = cJSON_ParseWithLength(text, n);
    m = cJSON_GetObjectItemCaseSensitive(root, "meta");
    for (const cJSON *e = m ? m->child : NULL; e; e = e->next) {
        const char *val = e->string ? accel_ckpt_meta(c, e->string) : NULL;
        if (val)
            printf("%s%s=%s\n", shown++ ? "            " : "metadata    ",
                   esc(e->string, k, sizeof k), esc(val, v, sizeof v));
    }
    if (!shown)
        printf("metadata    (none)\n");
    cJSON_Delete(root);
    accel_free(text);
}

static int cmd_show(const char *path)
{
    struct accel_ckpt *c = NULL;
    size_t nt, nmodel = 0, width = 4;
    uint64_t total = 0;
    char buf[32], name[4 * ACCEL_CKPT_MAX_NAME + 8];
    int status = open_ckpt(path, &c);

    if (status != CLI_EXIT_OK)
        return status;
    nt = accel_ckpt_ntensors(c);
    for (size_t i = 0; i < nt; i++) {
        const struct accel_ckpt_tensor *t = accel_ckpt_tensor_at(c, i);
        size_t w = strlen(esc(t->name, name, sizeof name));
        total += tensor_bytes(t);
        nmodel += !is_optim(t->name);
        width = w > width ? (w < 60 ? w : 60) : width;
    }
    printf("checkpoint  %s\n", accel_ckpt_dir(c));
    printf("step        %lu\n", accel_ckpt_step(c));
    printf("world size  %u\n", accel_ckpt_world(c));
    show_meta(c);
    printf("tensors     %zu (%zu model, %zu optimizer state), %s\n", nt, nmodel, nt - nmodel,
           human(total, buf, sizeof buf));
    printf("\n%-*s  %-5s  %-24s  %10s\n", (int)width, "name", "dtype", "shape", "size");
    for (size_t i = 0; i < nt; i++) {
        const struct accel_ckpt_tensor *t = accel_ckpt_tensor_at(c, i);
        char shape[256];

        shape_text(t, shape, sizeof shape);
        printf("%-*s  %-5s  %-24s  %10s\n", (int)width, esc(t->name, name, sizeof name),
               accel_dtype_st_name(t->dtype), shape, human(tensor_bytes(t), buf, sizeof buf));
    }
    accel_ckpt_close(c);
    return CLI_EXIT_OK;
}

/* ---------------------------------------------------------------- verify */

static int cmd_verify(const char *path)
{
    struct accel_ckpt *c = NULL;
    struct accel_error err;
    uint64_t total = 0;
    size_t nt;
    enum accel_err rc;
    int status = open_ckpt(path, &c);

    if (status != CLI_EXIT_OK)
        return status;
    nt = accel_ckpt_ntensors(c);
    for (size_t i = 0; i < nt; i++)
        total += tensor_bytes(accel_ckpt_tensor_at(c, i));
    accel_error_clear(&err);
    rc = accel_ckpt_verify(c, &err);
    printf("%s: step %lu, world %u, %zu tensor%s, %" PRIu64 " bytes: ", accel_ckpt_dir(c),
           accel_ckpt_step(c), accel_ckpt_world(c), nt, nt == 1 ? "" : "s", total);
    if (rc == ACCEL_OK)
        printf("OK\n");
    else
        printf("DAMAGED: %s\n", err.msg);
    accel_ckpt_close(c);
    return rc == ACCEL_OK ? CLI_EXIT_OK : rc == ACCEL_ENOMEM ? CLI_EXIT_USAGE : CLI_EXIT_FINDINGS;
}

/* ---------------------------------------------------------------- consolidate */

static void print_file(const char *out, const char *name, size_t ntensors)
{
    char path[4200], buf[32];
    struct stat st;

    snprintf(path, sizeof path, "%s/%s", out, name);
    if (stat(path, &st) == 0)
        printf("wrote %s: %zu tensor%s, %s\n", path, ntensors, ntensors == 1 ? "" : "s",
               human((uint64_t)st.st_size, buf, sizeof buf));
    else
        printf("wrote %s: %zu tensor%s (but it is not there now)\n", path, ntensors,
               ntensors == 1 ? "" : "s");
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The shards an index names, each once, with their tensor counts. */
static bool print_index(const char *out)
{
    char path[4200], *text = NULL;
    const char **files = NULL;
    struct accel_error err;
    const cJSON *wm, *total;
    cJSON *root = NULL;
    size_t n, nf = 0;
    bool ok = false;

    accel_error_clear(&err);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", out);
    if (accel_read_file(path, INDEX_MAX, &text, &n, &err) != ACCEL_OK)
        return false;
    root = cJSON_ParseWithLength(text, n);
    wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    total = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "metadata"),
                                             "total_size");
    n = (size_t)cJSON_GetArraySize(wm);
    if (!cJSON_IsObject(wm) || !cJSON_IsNumber(total) ||
        !(files = calloc(n ? n : 1, sizeof *files)))
        goto out;
    for (const cJSON *v = wm->child; v; v = v->next)
        if (cJSON_IsString(v))
            files[nf++] = v->valuestring;
    qsort(files, nf, sizeof *files, by_string);
    for (size_t i = 0, j; i < nf; i = j) {
        for (j = i; j < nf && !strcmp(files[i], files[j]); j++)
            ;
        print_file(out, files[i], j - i);
    }
    printf("wrote %s: %zu tensors in %s, total_size %.0f\n", path, n, nf ? "shards" : "no shard",
           total->valuedouble);
    ok = true;
out:
    free(files);
    cJSON_Delete(root);
    accel_free(text);
    return ok;
}

/* OUTDIR is a directory, or can be made one (its parent is a directory). */
static bool out_dir_usable(const char *out)
{
    char parent[4096], *slash;
    struct stat st;

    if (stat(out, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return true;
        fprintf(stderr, "%s: %s is not a directory\n", prog_name, out);
        return false;
    }
    snprintf(parent, sizeof parent, "%s", out);
    for (size_t n = strlen(parent); n > 1 && parent[n - 1] == '/'; n--)
        parent[n - 1] = '\0'; /* "out/" is "out" */
    slash = strrchr(parent, '/');
    if (!slash)
        return true;               /* in the current directory */
    slash[slash == parent] = '\0'; /* "/out": the parent is "/" */
    if (stat(parent, &st) == 0 && S_ISDIR(st.st_mode))
        return true;
    fprintf(stderr,
            "%s: %s: its parent %s is not a directory (OUTDIR is created, not its parents)\n",
            prog_name, out, parent);
    return false;
}

static int cmd_consolidate(const char *path, const char *out, uint64_t max_shard)
{
    struct accel_ckpt *c = NULL;
    struct accel_error err;
    uint64_t total = 0, limit = max_shard ? max_shard : MODEL_SHARD_DEFAULT;
    size_t nt, nmodel = 0;
    enum accel_err rc;
    int status;

    /* OUTDIR's problems are usage errors (2), not damage (1): said up front */
    if (!out_dir_usable(out))
        return CLI_EXIT_USAGE;
    status = open_ckpt(path, &c);
    if (status != CLI_EXIT_OK)
        return status;
    nt = accel_ckpt_ntensors(c);
    for (size_t i = 0; i < nt; i++) {
        const struct accel_ckpt_tensor *t = accel_ckpt_tensor_at(c, i);
        if (!is_optim(t->name)) {
            nmodel++;
            total += tensor_bytes(t);
        }
    }
    accel_error_clear(&err);
    rc = accel_ckpt_consolidate(c, out, max_shard, &err);
    if (rc != ACCEL_OK) {
        fprintf(stderr, "%s: %s\n", prog_name, err.msg);
        accel_ckpt_close(c);
        return rc == ACCEL_EPARSE || rc == ACCEL_EIO ? CLI_EXIT_FINDINGS : CLI_EXIT_USAGE;
    }
    printf("%s: step %lu, world %u: %zu model tensor%s, %" PRIu64 " bytes", accel_ckpt_dir(c),
           accel_ckpt_step(c), accel_ckpt_world(c), nmodel, nmodel == 1 ? "" : "s", total);
    if (nt > nmodel)
        printf(" (%zu optimizer tensor%s left out)", nt - nmodel, nt - nmodel == 1 ? "" : "s");
    printf("\n");
    /* huggingface_hub's rule: one file unless more than one shard is needed */
    if (total <= limit || nmodel < 2 || !print_index(out))
        print_file(out, "model.safetensors", nmodel);
    accel_ckpt_close(c);
    return CLI_EXIT_OK;
}

/* ---------------------------------------------------------------- dispatch */

int cli_ckpt(int argc, char **argv)
{
    static const struct option opts[] = {{"max-shard-size", required_argument, NULL, 'm'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    static const struct {
        const char *name;
        int nargs;
    } subs[] = {{"ls", 1}, {"show", 1}, {"verify", 1}, {"consolidate", 2}};
    const char *sub, *size_text = NULL;
    uint64_t max_shard = 0;
    int c, nargs = -1;

    if (argc < 2) {
        fprintf(stderr, "accelrun ckpt: expected ls, show, verify or consolidate\n\n%s",
                cli_ckpt_usage);
        return CLI_EXIT_USAGE;
    }
    sub = argv[1];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
        fputs(cli_ckpt_usage, stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (!strcmp(sub, subs[i].name))
            nargs = subs[i].nargs;
    if (nargs < 0) {
        fprintf(stderr, "accelrun ckpt: unknown subcommand '%s'\n\n%s", sub, cli_ckpt_usage);
        return CLI_EXIT_USAGE;
    }
    snprintf(prog_name, sizeof prog_name, "accelrun ckpt %s", sub);
    argv[1] = prog_name; /* getopt's own messages say "accelrun ckpt SUB: ..." */
    argc--;
    argv++;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'm':
            size_text = optarg;
            break;
        case 'h':
            fputs(cli_ckpt_usage, stdout);
            return CLI_EXIT_OK;
        default:
            fputs(cli_ckpt_usage, stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (argc - optind != nargs) {
        fprintf(stderr, "%s: expected %s\n\n%s", prog_name,
                nargs == 2           ? "PATH and OUTDIR"
                : !strcmp(sub, "ls") ? "one ROOT"
                                     : "one PATH",
                cli_ckpt_usage);
        return CLI_EXIT_USAGE;
    }
    if (size_text && strcmp(sub, "consolidate") != 0) {
        fprintf(stderr, "%s: --max-shard-size goes with consolidate only\n", prog_name);
        return CLI_EXIT_USAGE;
    }
    if (size_text && !parse_size(size_text, &max_shard)) {
        fprintf(stderr,
                "%s: --max-shard-size: '%s' is not a size from 1 byte to 1 EiB (5GB, 500MB, "
                "10GiB, 1048576)\n",
                prog_name, size_text);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(sub, "ls"))
        return cmd_ls(argv[optind]);
    if (!strcmp(sub, "verify"))
        return cmd_verify(argv[optind]);
    if (!strcmp(sub, "consolidate"))
        return cmd_consolidate(argv[optind], argv[optind + 1], max_shard);
    return cmd_show(argv[optind]);
}
