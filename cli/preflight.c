/*
 * preflight.c: `accelrun preflight FILE` runs the upgrade checklist on this
 * machine (core/preflight: versions, the config against the installed
 * accelerate, imports, hardware, network), prints one table and exits 1 on
 * any FAIL.  `accelrun launch --preflight` and the plugin's
 * --accel-preflight run the same checks.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accel/preflight.h"
#include "cli.h"

const char cli_preflight_usage[] =
    "usage: accelrun preflight FILE [--python PATH] [--import MODULE]... [--json]\n"
    "                          [--site FILE] [--record-dir DIR [--job ID]]\n"
    "                          [--procs-per-node N] [--timeout SECONDS]\n"
    "       accelrun preflight --task [--full] FILE [same options]\n"
    "\n"
    "Check this machine against an accelerate config before a job runs there: the\n"
    "versions of the job's Python (python, torch with its CUDA and NCCL, accelerate,\n"
    "transformers, peft, deepspeed) and of the NVIDIA driver and GPUs; the config\n"
    "against the schema of the accelerate installed here; imports in a clean process\n"
    "and from several threads at once; GPUs against processes, mixed precision against\n"
    "compute capability, free GPU memory; NCCL_SOCKET_IFNAME, NCCL_IB_HCA and\n"
    "MASTER_ADDR against what this machine has.  One line per check: PASS, WARN or\n"
    "FAIL and the reason.\n"
    "\n"
    "  --python PATH        the job's Python (default: the first python or python3\n"
    "                       on PATH)\n"
    "  --import MODULE      import MODULE too, alone and beside the others (up to 8;\n"
    "                       default: the comma list $ACCELRUN_PREFLIGHT_IMPORTS)\n"
    "  --record-dir DIR     keep this run's versions in DIR (one JSON lock per job)\n"
    "                       and report drift from the previous run of FILE\n"
    "                       (default: $ACCELRUN_PREFLIGHT_DIR, else no record)\n"
    "  --job ID             the record's name (default: $SLURM_JOB_ID-<host>, else\n"
    "                       local-<time>-<pid>-<host>)\n"
    "  --procs-per-node N   processes this machine will run (default: from FILE)\n"
    "  --timeout SECONDS    for the job's Python: versions and both import tests\n"
    "                       (default 60)\n"
    "  --site FILE          apply the site policy\n"
    "  --json               print {\"result\", \"nodes\": [{host, versions, checks}]}\n"
    "  --task               one task of a job (what srun --accel-preflight runs in\n"
    "                       every task): the tasks meet at MASTER_ADDR:MASTER_PORT,\n"
    "                       each node's first task checks its node, rank 0 prints\n"
    "                       one table for all nodes; exit 1 everywhere on a FAIL\n"
    "  --full               with --task: also a small all_reduce across all tasks\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 no FAIL (warnings allowed), 1 a check failed, 2 usage or an\n"
    "unreadable file.\n";

static char prog_name[] = "accelrun preflight";

struct args {
    struct accel_pf_opts pf;
    const char *site_path, *record_dir, *job;
    bool json, in_job, full;
};

/* The options into `a`.  Returns CLI_EXIT_OK, -1 after --help, or
 * CLI_EXIT_USAGE (said on stderr). */
static int parse_options(int argc, char **argv, struct args *a)
{
    static const struct option opts[] = {{"python", required_argument, NULL, 'p'},
                                         {"import", required_argument, NULL, 'i'},
                                         {"record-dir", required_argument, NULL, 'r'},
                                         {"job", required_argument, NULL, 'J'},
                                         {"procs-per-node", required_argument, NULL, 'n'},
                                         {"timeout", required_argument, NULL, 't'},
                                         {"site", required_argument, NULL, 's'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"task", no_argument, NULL, 'B'},
                                         {"full", no_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct cli_getopt g = {argc, argv, prog_name, "h", opts, cli_preflight_usage};
    unsigned long n;
    int c;

    while ((c = cli_next_option(&g)) >= 0) {
        switch (c) {
        case 'p':
            a->pf.python = optarg;
            break;
        case 'i':
            if (a->pf.nimports == ACCEL_PF_MAX_IMPORTS) {
                fprintf(stderr, "accelrun preflight: --import: at most %d modules\n",
                        ACCEL_PF_MAX_IMPORTS);
                return CLI_EXIT_USAGE;
            }
            a->pf.imports[a->pf.nimports++] = optarg;
            break;
        case 'r':
            a->record_dir = optarg;
            break;
        case 'J':
            a->job = optarg;
            break;
        case 'n':
            if (!cli_parse_uint("--procs-per-node", optarg, 1, 4096, &n))
                return CLI_EXIT_USAGE;
            a->pf.procs_per_node = (unsigned)n;
            break;
        case 't':
            if (!cli_parse_uint("--timeout", optarg, 1, 3600, &n))
                return CLI_EXIT_USAGE;
            a->pf.timeout_ms = (unsigned)n * 1000u;
            break;
        case 's':
            a->site_path = optarg;
            break;
        case 'j':
            a->json = true;
            break;
        case 'B':
            a->in_job = true;
            break;
        case 'f':
            a->full = true;
            break;
        }
    }
    if (c != CLI_OPT_END)
        return c == CLI_OPT_HELP ? -1 : CLI_EXIT_USAGE;
    return CLI_EXIT_OK;
}

/* Without --import: the job's own packages, named in its environment
 * (srun --export) as a comma list. */
static int imports_from_env(struct args *a)
{
    static char list[1024];
    char *save = NULL;

    if (a->pf.nimports != 0 || !getenv("ACCELRUN_PREFLIGHT_IMPORTS"))
        return CLI_EXIT_OK;
    snprintf(list, sizeof(list), "%s", getenv("ACCELRUN_PREFLIGHT_IMPORTS"));
    for (char *m = strtok_r(list, ", ", &save); m; m = strtok_r(NULL, ", ", &save)) {
        if (a->pf.nimports == ACCEL_PF_MAX_IMPORTS) {
            fprintf(stderr, "accelrun preflight: ACCELRUN_PREFLIGHT_IMPORTS: at most %d modules\n",
                    ACCEL_PF_MAX_IMPORTS);
            return CLI_EXIT_USAGE;
        }
        a->pf.imports[a->pf.nimports++] = m;
    }
    return CLI_EXIT_OK;
}

/* The command line, checked, with the defaults from the environment.
 * Returns CLI_EXIT_OK, -1 after --help, or CLI_EXIT_USAGE. */
static int parse(int argc, char **argv, struct args *a)
{
    struct accel_error err;
    int status = parse_options(argc, argv, a);

    if (status != CLI_EXIT_OK)
        return status;
    if (optind != argc - 1) {
        fprintf(stderr, "accelrun preflight: expected one config FILE\n\n%s", cli_preflight_usage);
        return CLI_EXIT_USAGE;
    }
    if (a->full && !a->in_job) {
        fprintf(stderr, "accelrun preflight: --full is for --task (a job's tasks)\n");
        return CLI_EXIT_USAGE;
    }
    a->pf.config = argv[optind];
    if (imports_from_env(a) != CLI_EXIT_OK)
        return CLI_EXIT_USAGE;
    accel_error_clear(&err);
    if (accel_pf_opts_check(&a->pf, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun preflight: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    if (!a->record_dir)
        a->record_dir = getenv("ACCELRUN_PREFLIGHT_DIR");
    return CLI_EXIT_OK;
}

int cli_preflight_run(const struct accel_pf_opts *pf, const char *record_dir, const char *job,
                      bool json, FILE *out)
{
    struct accel_pf_node node;
    struct accel_error err;
    char local[96];

    accel_error_clear(&err);
    if (access(pf->config, R_OK) != 0) {
        fprintf(stderr, "accelrun preflight: couldn't read %s: %s\n", pf->config, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    if (accel_pf_check_node(&node, pf, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun preflight: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    if (record_dir && *record_dir) {
        if (!job) {
            /* one record per job and machine: `accelrun launch --preflight`
             * on every node of a job writes its own */
            const char *id = getenv("SLURM_JOB_ID");
            if (id && *id)
                snprintf(local, sizeof(local), "%.24s-%.32s", id, node.host);
            else
                snprintf(local, sizeof(local), "local-%lld-%d-%.24s", (long long)time(NULL),
                         (int)getpid(), node.host);
            job = local;
        }
        if (accel_pf_record(record_dir, pf->config, job, &node, 1, &err) != ACCEL_OK)
            fprintf(stderr, "accelrun preflight: warning: %s\n", err.msg);
    }
    if (json) {
        char *s = accel_pf_to_json(&node, 1);
        if (!s) {
            fputs("accelrun preflight: out of memory\n", stderr);
            return CLI_EXIT_USAGE;
        }
        fprintf(out, "%s\n", s);
        free(s);
    } else {
        accel_pf_print(&node, 1, pf->config, out);
    }
    return accel_pf_worst(&node, 1) == ACCEL_PF_FAIL ? CLI_EXIT_FINDINGS : CLI_EXIT_OK;
}

int cli_preflight(int argc, char **argv)
{
    struct args a;
    struct accel_site site;
    int status;

    memset(&a, 0, sizeof(a));
    status = parse(argc, argv, &a);
    if (status != CLI_EXIT_OK)
        return status < 0 ? CLI_EXIT_OK : status;
    status = cli_load_site(a.site_path, 0, &site, a.json, stdout);
    if (status != CLI_EXIT_OK)
        return status;
    a.pf.site = a.site_path ? &site : NULL;
    if (a.in_job)
        status = cli_preflight_job(&a.pf, a.record_dir, a.full);
    else
        status = cli_preflight_run(&a.pf, a.record_dir, a.job, a.json, stdout);
    accel_site_free(&site);
    return status;
}
