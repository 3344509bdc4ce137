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

static void print_env(enum fmt fmt, const struct accel_env *env)
{
    if (fmt == FMT_SH)
        print_sh(env);
    else if (fmt == FMT_JSON)
        print_json(env);
    else
        print_dotenv(env);
}

static char prog_name[] = "accelrun env";

/* The command line: the layout, the config's options, the output format. */
struct env_args {
    struct accel_layout lay;
    struct accel_cfg_opts copts;
    const char *site_path;
    enum fmt fmt;
};

static bool parse_format(const char *text, enum fmt *fmt)
{
    if (strcmp(text, "sh") == 0)
        *fmt = FMT_SH;
    else if (strcmp(text, "dotenv") == 0)
        *fmt = FMT_DOTENV;
    else if (strcmp(text, "json") == 0)
        *fmt = FMT_JSON;
    else {
        fprintf(stderr, "accelrun: --format: '%s' is not sh, dotenv or json\n", text);
        return false;
    }
    return true;
}

/* The options, then the one FILE (argv[optind]).  Returns CLI_EXIT_OK, -1
 * after --help, or CLI_EXIT_USAGE (said on stderr). */
static int parse(int argc, char **argv, struct env_args *a)
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
    struct cli_getopt g = {argc, argv, prog_name, "h", opts, cli_env_usage};
    bool have_nnodes = false, have_rank = false, have_nproc = false;
    unsigned long n;
    int c;

    g.version = &a->copts.version; /* CLI_SHARED_OPTIONS */
    g.site = &a->site_path;
    while ((c = cli_next_option(&g)) >= 0) {
        switch (c) {
        case 'n':
            if (!cli_parse_uint("--nnodes", optarg, 1, 1u << 20, &n))
                return CLI_EXIT_USAGE;
            a->lay.nnodes = (unsigned)n;
            have_nnodes = true;
            break;
        case 'r':
            if (!cli_parse_uint("--node-rank", optarg, 0, 1u << 20, &n))
                return CLI_EXIT_USAGE;
            a->lay.node_rank = (unsigned)n;
            have_rank = true;
            break;
        case 'p':
            if (!cli_parse_uint("--nproc-per-node", optarg, 1, 4096, &n))
                return CLI_EXIT_USAGE;
            a->lay.nproc_per_node = (unsigned)n;
            have_nproc = true;
            break;
        case 'l':
            if (!cli_parse_uint("--local-rank", optarg, 0, 4095, &n))
                return CLI_EXIT_USAGE;
            a->lay.local_rank = (int)n;
            break;
        case 'a':
            a->lay.master_addr = optarg;
            break;
        case 'P':
            if (!cli_parse_uint("--master-port", optarg, 1, 65535, &n))
                return CLI_EXIT_USAGE;
            a->lay.master_port = (unsigned)n;
            break;
        case 'c':
            if (!cli_parse_uint("--cpus-per-proc", optarg, 1, 65536, &n))
                return CLI_EXIT_USAGE;
            a->lay.cpus_per_proc = (unsigned)n;
            break;
        case 'f':
            if (!parse_format(optarg, &a->fmt))
                return CLI_EXIT_USAGE;
            break;
        }
    }
    if (c != CLI_OPT_END)
        return c == CLI_OPT_HELP ? -1 : CLI_EXIT_USAGE;
    if (optind != argc - 1 || !have_nnodes || !have_rank || !have_nproc) {
        fprintf(stderr,
                "accelrun env: expected FILE, --nnodes, --node-rank and --nproc-per-node\n\n%s",
                cli_env_usage);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* Loads `file` and prints its environment for the layout. */
static int print_for(const char *file, struct env_args *a)
{
    struct accel_env_opts eopts = {NULL, NULL};
    struct accel_env env = {NULL, 0};
    struct cli_config c;
    struct accel_error err;
    int status;

    status = cli_config_load(&c, file, a->site_path, &a->copts, false, stderr);
    if (status != CLI_EXIT_OK)
        return status;
    status = CLI_EXIT_FINDINGS;
    eopts.site = a->copts.site;
    /* Warnings still matter to someone previewing an environment. */
    cli_print_diags(&c.diags, stderr);
    if (c.rc != ACCEL_OK) {
        status = cli_exit_status(c.rc);
        goto out;
    }
    /* (with num_machines > 1 the config's own warning already says it) */
    if (a->lay.nnodes > 1 && a->lay.master_addr == NULL && c.cfg.main_process_ip == NULL &&
        c.cfg.num_machines <= 1)
        fprintf(stderr,
                "%s: warning: %u nodes, no --master-addr and no main_process_ip: MASTER_ADDR "
                "falls back to 127.0.0.1, which only works on one machine\n",
                file, a->lay.nnodes);
    accel_error_clear(&err);
    if (accel_env_build(&c.cfg, &a->lay, &eopts, &env, &err) != ACCEL_OK) {
        fprintf(stderr, "%s: error: %s\n", file, err.msg);
        goto out;
    }
    print_env(a->fmt, &env);
    status = CLI_EXIT_OK;
out:
    accel_env_free(&env);
    cli_config_free(&c);
    return status;
}

int cli_env(int argc, char **argv)
{
    struct env_args a = {{0, 0, 0, -1, -1, 0, NULL, 0, 0}, {0}, NULL, FMT_DOTENV};
    int status = parse(argc, argv, &a);

    if (status != CLI_EXIT_OK)
        return status < 0 ? CLI_EXIT_OK : status;
    return print_for(argv[optind], &a);
}
