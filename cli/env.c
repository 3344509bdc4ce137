/*
 * env.c: `accelrun env FILE ...` prints the environment one process (or,
 * without --local-rank, one node's launcher) gets for a given layout: the
 * same function the SPANK plugin and `accelrun launch` call.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "accel/env.h"
#include "cli.h"

const char cli_env_usage[] =
    "usage: accelrun env FILE --nnodes N --node-rank R --nproc-per-node P\n"
    "                         [--local-rank L] [--master-addr A] [--master-port PORT]\n"
    "                         [--cpus-per-proc C] [--site FILE] [--accelerate-version V]\n"
    "                         [--format sh|dotenv|json]\n"
    "\n"
    "Print the environment `accelerate launch` + torchrun would give a process of\n"
    "this config in this layout; without --local-rank, the node-level set for a\n"
    "launcher that starts the node's processes itself (PET_* for torchrun).\n"
    "\n"
    "  --nnodes N          nodes in the job\n"
    "  --node-rank R       this node, 0 .. N-1\n"
    "  --nproc-per-node P  processes on each node\n"
    "  --local-rank L      this process on its node, 0 .. P-1\n"
    "  --master-addr A     rank 0's host (default: main_process_ip, else 127.0.0.1)\n"
    "  --master-port PORT  rendezvous port (default: main_process_port, else 29500)\n"
    "  --cpus-per-proc C   CPU jobs: cores per process (OMP_NUM_THREADS)\n"
    "  --site FILE         apply the site policy\n"
    "  --format F          sh (export NAME='v'), dotenv (NAME=v, default) or json\n"
    "  -h, --help          this text\n"
    "\n"
    "Exit status: 0 printed, 1 the config has errors or does not fit the layout,\n"
    "2 usage or unreadable file.\n";

enum fmt { FMT_DOTENV, FMT_SH, FMT_JSON };

static void print_sh(const struct accel_env *env)
{
    for (size_t i = 0; i < env->n; i++) {
        const char *eq = strchr(env->v[i], '=');
        printf("export %.*s='", (int)(eq - env->v[i]), env->v[i]);
        for (const char *c = eq + 1; *c; c++) {
            if (*c == '\'')
                fputs("'\\''", stdout);
            else
                putchar(*c);
        }
        puts("'");
    }
}

static void print_dotenv(const struct accel_env *env)
{
    for (size_t i = 0; i < env->n; i++) {
        const char *eq = strchr(env->v[i], '=');
        const char *val = eq + 1;
        if (strpbrk(val, " \t\n\"'\\#$") == NULL) {
            puts(env->v[i]);
            continue;
        }
        printf("%.*s=\"", (int)(eq - env->v[i]), env->v[i]);
        for (const char *c = val; *c; c++) {
            if (*c == '\n')
                fputs("\\n", stdout);
            else {
                if (*c == '"' || *c == '\\' || *c == '$')
                    putchar('\\');
                putchar(*c);
            }
        }
        puts("\"");
    }
}

static int print_json(const struct accel_env *env)
{
    cJSON *o = cJSON_CreateObject();
    char *text;

    if (o == NULL)
        return -1;
    for (size_t i = 0; i < env->n; i++) {
        const char *eq = strchr(env->v[i], '=');
        char name[ACCEL_MAX_ENV_NAME + 1];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - env->v[i]), env->v[i]);
        cJSON_AddStringToObject(o, name, eq + 1);
    }
    text = cJSON_Print(o);
    cJSON_Delete(o);
    if (text == NULL)
        return -1;
    puts(text);
    cJSON_free(text);
    return 0;
}

static char prog_name[] = "accelrun env";

int cli_env(int argc, char **argv)
{
    static const struct option opts[] = {{"nnodes", required_argument, NULL, 'n'},
                                         {"node-rank", required_argument, NULL, 'r'},
                                         {"nproc-per-node", required_argument, NULL, 'p'},
                                         {"local-rank", required_argument, NULL, 'l'},
                                         {"master-addr", required_argument, NULL, 'a'},
                                         {"master-port", required_argument, NULL, 'P'},
                                         {"cpus-per-proc", required_argument, NULL, 'c'},
                                         CLI_SHARED_OPTIONS,

                                         {"format", required_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct accel_layout lay = {0, 0, 0, -1, -1, 0, NULL, 0, 0};
    struct accel_cfg_opts copts = {0};
    struct accel_env_opts eopts = {NULL, NULL};
    const char *site_path = NULL;
    bool have_nnodes = false, have_rank = false, have_nproc = false;
    enum fmt fmt = FMT_DOTENV;
    struct accel_site site;
    struct accel_diags d;
    struct accel_cfg cfg;
    struct accel_env env = {NULL, 0};
    struct accel_error err;
    unsigned long n;
    int c, status = CLI_EXIT_FINDINGS;
    enum accel_err rc;

    argv[0] = prog_name; /* getopt's own messages say "accelrun env: ..." */
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int shared = cli_shared_option(c, optarg, &copts.version, &site_path);
        if (shared < 0)
            return CLI_EXIT_USAGE;
        if (shared > 0)
            continue;
        switch (c) {
        case 'n':
            if (!cli_parse_uint("--nnodes", optarg, 1, 1u << 20, &n))
                return CLI_EXIT_USAGE;
            lay.nnodes = (unsigned)n;
            have_nnodes = true;
            break;
        case 'r':
            if (!cli_parse_uint("--node-rank", optarg, 0, 1u << 20, &n))
                return CLI_EXIT_USAGE;
            lay.node_rank = (unsigned)n;
            have_rank = true;
            break;
        case 'p':
            if (!cli_parse_uint("--nproc-per-node", optarg, 1, 4096, &n))
                return CLI_EXIT_USAGE;
            lay.nproc_per_node = (unsigned)n;
            have_nproc = true;
            break;
        case 'l':
            if (!cli_parse_uint("--local-rank", optarg, 0, 4095, &n))
                return CLI_EXIT_USAGE;
            lay.local_rank = (int)n;
            break;
        case 'a':
            lay.master_addr = optarg;
            break;
        case 'P':
            if (!cli_parse_uint("--master-port", optarg, 1, 65535, &n))
                return CLI_EXIT_USAGE;
            lay.master_port = (unsigned)n;
            break;
        case 'c':
            if (!cli_parse_uint("--cpus-per-proc", optarg, 1, 65536, &n))
                return CLI_EXIT_USAGE;
            lay.cpus_per_proc = (unsigned)n;
            break;
        case 'f':
            if (strcmp(optarg, "sh") == 0)
                fmt = FMT_SH;
            else if (strcmp(optarg, "dotenv") == 0)
                fmt = FMT_DOTENV;
            else if (strcmp(optarg, "json") == 0)
                fmt = FMT_JSON;
            else {
                fprintf(stderr, "accelrun: --format: '%s' is not sh, dotenv or json\n", optarg);
                return CLI_EXIT_USAGE;
            }
            break;
        case 'h':
            fputs(cli_env_usage, stdout);
            return CLI_EXIT_OK;
        default:
            fputs(cli_env_usage, stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind != argc - 1 || !have_nnodes || !have_rank || !have_nproc) {
        fprintf(stderr,
                "accelrun env: expected FILE, --nnodes, --node-rank and --nproc-per-node\n\n%s",
                cli_env_usage);
        return CLI_EXIT_USAGE;
    }
    status = cli_load_site(site_path, copts.version, &site, false, stderr);
    if (status != CLI_EXIT_OK)
        return status;
    status = CLI_EXIT_FINDINGS;
    copts.site = site_path ? &site : NULL;
    eopts.site = copts.site;
    accel_diags_init(&d);
    accel_error_clear(&err);
    rc = accel_cfg_load(&cfg, argv[optind], &copts, &d, &err);
    accel_diags_sort(&d);
    /* Warnings still matter to someone previewing an environment. */
    cli_print_diags(&d, stderr);
    if (rc != ACCEL_OK) {
        status = cli_exit_status(rc);
        goto out;
    }
    /* (with num_machines > 1 the config's own warning already says it) */
    if (lay.nnodes > 1 && lay.master_addr == NULL && cfg.main_process_ip == NULL &&
        cfg.num_machines <= 1)
        fprintf(stderr,
                "%s: warning: %u nodes, no --master-addr and no main_process_ip: MASTER_ADDR "
                "falls back to 127.0.0.1, which only works on one machine\n",
                argv[optind], lay.nnodes);
    rc = accel_env_build(&cfg, &lay, &eopts, &env, &err);
    if (rc != ACCEL_OK) {
        fprintf(stderr, "%s: error: %s\n", argv[optind], err.msg);
        goto out;
    }
    if (fmt == FMT_SH)
        print_sh(&env);
    else if (fmt == FMT_JSON)
        print_json(&env);
    else
        print_dotenv(&env);
    status = CLI_EXIT_OK;
out:
    accel_env_free(&env);
    accel_cfg_free(&cfg);
    accel_diags_free(&d);
    accel_site_free(&site);
    return status;
}
