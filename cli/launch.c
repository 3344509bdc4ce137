/*
 * launch.c: `accelrun launch [options] -- CMD...` starts one node's ranks,
 * each with the environment core/env builds (the function the SPANK plugin
 * calls) and its place in the node's topology plan; procs.c runs them.
 *
 * Layout: options, else the node-level variables a pod gets (PET_NNODES,
 * PET_NODE_RANK, PET_NPROC_PER_NODE, PET_MASTER_ADDR, PET_MASTER_PORT),
 * else the config, else one node of this machine's GPUs (or one process).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accel/env.h"
#include "accel/preflight.h"
#include "accel/topo.h"
#include "cli.h"
#include "procs.h"

extern char **environ;

const char cli_launch_usage[] =
    "usage: accelrun launch [--config FILE] [-n N] [--nnodes N --node-rank R]\n"
    "                       [--master-addr A] [--master-port P] [--site FILE]\n"
    "                       [--tee DIR] [--main-only] [--dry-run] [--topology-xml FILE]\n"
    "                       [--grace SECONDS] [--accelerate-version V] [--preflight]\n"
    "                       -- CMD [ARG...]\n"
    "\n"
    "Start this node's processes of an accelerate job, each with the environment\n"
    "`accelerate launch` + torchrun would give it, placed on the node's GPUs, NICs\n"
    "and CPUs (docs/accelrun-launch.md).\n"
    "\n"
    "  --config FILE      the accelerate config (default: a built-in one: MULTI_GPU on\n"
    "                     the GPUs found, else MULTI_CPU; 'NO' for one process)\n"
    "  -n, --nproc-per-node N  processes on this node (default: PET_NPROC_PER_NODE,\n"
    "                     num_processes / num_machines, the GPUs found, else 1)\n"
    "  --nnodes N         nodes (default PET_NNODES, num_machines, 1)\n"
    "  --node-rank R      this node (default PET_NODE_RANK, 0)\n"
    "  --master-addr A    rank 0's host (default PET_MASTER_ADDR, main_process_ip,\n"
    "                     127.0.0.1 on one node)\n"
    "  --master-port P    (default PET_MASTER_PORT, main_process_port, on one node a\n"
    "                     free port, else 29500)\n"
    "  --site FILE        apply the site policy\n"
    "  --tee DIR          keep each rank's output in DIR/rank-R.log (DIR is created;\n"
    "                     a link in a log's place is refused)\n"
    "  --main-only        show only rank 0's output (the others go to --tee logs)\n"
    "  --dry-run          print every rank's variables and CPUs; start nothing\n"
    "  --topology-xml F   plan on this hwloc XML instead of discovering the machine\n"
    "  --grace SECONDS    from SIGTERM to SIGKILL when ranks are stopped (default 10)\n"
    "  --preflight        first check this node against the config (accelrun preflight,\n"
    "                     with rank 0's environment; the table on stderr): on a FAIL\n"
    "                     nothing starts and the exit status is 1\n"
    "  -h, --help         this text\n"
    "\n"
    "Output lines are prefixed with the rank (\"[3] ...\").  SIGINT, SIGTERM and SIGHUP\n"
    "are forwarded; when a rank fails the others are stopped, and nothing a rank\n"
    "started outlives the launcher.  Exit status: the failed rank's (128 + signal\n"
    "for a signal), 0 when all exited 0, 141 the output was closed (the ranks are\n"
    "stopped), 1 config errors, 2 usage or no rank could start (--tee, ulimit -n).\n";

struct launch {
    const char *config, *site_path, *tee, *xml, *master_addr;
    unsigned version, nnodes, node_rank, nproc, master_port;
    bool main_only, dry_run, preflight;
    double grace_s;
};

/* An unsigned from the environment (PET_*); false when unset or not one. */
static bool env_uint(const char *name, unsigned long lo, unsigned long hi, unsigned *out)
{
    const char *v = getenv(name);
    unsigned long n;

    if (v == NULL || v[0] == '\0')
        return false;
    if (!cli_parse_uint(name, v, lo, hi, &n))
        exit(CLI_EXIT_USAGE); /* the message named the variable */
    *out = (unsigned)n;
    return true;
}

/* A free TCP port on this machine, for a one-node job without one. */
static unsigned free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unsigned port = ACCEL_DEFAULT_PORT;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int parse(struct launch *l, int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"nproc-per-node", required_argument, NULL, 'n'},
                                         {"nnodes", required_argument, NULL, 'N'},
                                         {"node-rank", required_argument, NULL, 'r'},
                                         {"master-addr", required_argument, NULL, 'a'},
                                         {"master-port", required_argument, NULL, 'P'},
                                         {"tee", required_argument, NULL, 't'},
                                         {"main-only", no_argument, NULL, 'm'},
                                         {"dry-run", no_argument, NULL, 'd'},
                                         {"topology-xml", required_argument, NULL, 'x'},
                                         {"grace", required_argument, NULL, 'g'},
                                         {"preflight", no_argument, NULL, 'F'},
                                         CLI_SHARED_OPTIONS,

                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    static char prog_name[] = "accelrun launch";
    struct cli_getopt g = {argc, argv, prog_name, "+hn:", opts, cli_launch_usage};
    unsigned long n;
    int c;

    g.version = &l->version; /* CLI_SHARED_OPTIONS */
    g.site = &l->site_path;
    while ((c = cli_next_option(&g)) >= 0) {
        switch (c) {
        case 'c':
            l->config = optarg;
            break;
        case 'n':
            if (!cli_parse_uint("--nproc-per-node", optarg, 1, 4096, &n))
                return CLI_EXIT_USAGE;
            l->nproc = (unsigned)n;
            break;
        case 'N':
            if (!cli_parse_uint("--nnodes", optarg, 1, 1u << 20, &n))
                return CLI_EXIT_USAGE;
            l->nnodes = (unsigned)n;
            break;
        case 'r':
            if (!cli_parse_uint("--node-rank", optarg, 0, 1u << 20, &n))
                return CLI_EXIT_USAGE;
            l->node_rank = (unsigned)n + 1; /* 0 = not given */
            break;
        case 'a':
            l->master_addr = optarg;
            break;
        case 'P':
            if (!cli_parse_uint("--master-port", optarg, 1, 65535, &n))
                return CLI_EXIT_USAGE;
            l->master_port = (unsigned)n;
            break;
        case 't':
            l->tee = optarg;
            break;
        case 'm':
            l->main_only = true;
            break;
        case 'd':
            l->dry_run = true;
            break;
        case 'x':
            l->xml = optarg;
            break;
        case 'g':
            if (!cli_parse_uint("--grace", optarg, 0, 3600, &n))
                return CLI_EXIT_USAGE;
            l->grace_s = (double)n;
            break;
        case 'F':
            l->preflight = true;
            break;
        }
    }
    if (c != CLI_OPT_END)
        return c == CLI_OPT_HELP ? -1 : CLI_EXIT_USAGE;
    if (l->preflight && l->config == NULL) {
        fprintf(stderr, "accelrun launch: --preflight needs --config FILE (the config it "
                        "checks)\n");
        return CLI_EXIT_USAGE;
    }
    if (optind >= argc && !l->dry_run) {
        fprintf(stderr, "accelrun launch: no command to run (put it after --)\n\n%s",
                cli_launch_usage);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* Node-level defaults from the pod's environment (DESIGN decision 5). */
static void pet_defaults(struct launch *l)
{
    unsigned v;

    if (l->nnodes == 0 && env_uint("PET_NNODES", 1, 1u << 20, &v))
        l->nnodes = v;
    if (l->node_rank == 0 && env_uint("PET_NODE_RANK", 0, 1u << 20, &v))
        l->node_rank = v + 1;
    if (l->nproc == 0 && env_uint("PET_NPROC_PER_NODE", 1, 4096, &v))
        l->nproc = v;
    if (l->master_addr == NULL && getenv("PET_MASTER_ADDR") && getenv("PET_MASTER_ADDR")[0])
        l->master_addr = getenv("PET_MASTER_ADDR");
    if (l->master_port == 0 && env_uint("PET_MASTER_PORT", 1, 65535, &v))
        l->master_port = v;
}

/* The machine, for the plan and the built-in config; false without one. */
static bool load_topology(const struct launch *l, struct accel_topo *t)
{
    struct accel_error err;
    enum accel_err rc;

    accel_error_clear(&err);
    rc = l->xml ? accel_topo_load_xml(t, l->xml, &err) : accel_topo_discover(t, &err);
    if (rc != ACCEL_OK) {
        fprintf(stderr, "accelrun launch: %s: no placement: %s\n", l->xml ? l->xml : "topology",
                err.msg);
        return false;
    }
    return true;
}

/* GPUs this process may use: CUDA_VISIBLE_DEVICES's count, else the node's. */
static unsigned gpus_here(const struct accel_topo *t)
{
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");

    if (cvd != NULL)
        return strcmp(cvd, "NoDevFiles") == 0 ? 0 : accel_gpu_list_count(cvd);
    return t ? t->ngpus : 0;
}

static int load_config(const struct launch *l, const struct accel_site *site, unsigned ngpus,
                       struct accel_cfg *cfg)
{
    struct accel_cfg_opts copts = {l->version, site, 0};
    struct accel_diags d;
    struct accel_error err;
    char builtin[128];
    enum accel_err rc;

    accel_diags_init(&d);
    accel_error_clear(&err);
    if (l->config != NULL) {
        rc = accel_cfg_load(cfg, l->config, &copts, &d, &err);
    } else {
        bool one = (l->nproc ? l->nproc : ngpus ? ngpus : 1) * (l->nnodes ? l->nnodes : 1) == 1;
        snprintf(builtin, sizeof(builtin), "distributed_type: %s\n%s",
                 one     ? "'NO'"
                 : ngpus ? "MULTI_GPU"
                         : "MULTI_CPU",
                 ngpus ? "" : "use_cpu: true\n");
        rc = accel_cfg_load_buffer(cfg, "(built-in config)", builtin, strlen(builtin), &copts, &d,
                                   &err);
    }
    accel_diags_sort(&d);
    if (l->config != NULL || rc != ACCEL_OK) /* the built-in config's notes are noise */
        cli_print_diags(&d, stderr);
    accel_diags_free(&d);
    return rc == ACCEL_OK ? CLI_EXIT_OK : cli_exit_status(rc);
}

/* Fills the layout's gaps from the config and the machine. */
static int settle_layout(struct launch *l, const struct accel_cfg *cfg, unsigned ngpus)
{
    if (l->nnodes == 0)
        l->nnodes = cfg->num_machines > 0 ? (unsigned)cfg->num_machines : 1;
    if (l->node_rank == 0)
        l->node_rank = 1;
    if (l->node_rank - 1 >= l->nnodes) {
        fprintf(stderr, "accelrun launch: node rank %u is not below the %u node%s\n",
                l->node_rank - 1, l->nnodes, l->nnodes == 1 ? "" : "s");
        return CLI_EXIT_USAGE;
    }
    if (l->nproc == 0 && cfg->num_processes > 0) {
        if (cfg->num_processes % l->nnodes != 0) {
            fprintf(stderr, "%s: num_processes: %ld does not split evenly over %u nodes; give -n\n",
                    cfg->file, cfg->num_processes, l->nnodes);
            return CLI_EXIT_FINDINGS;
        }
        l->nproc = (unsigned)(cfg->num_processes / l->nnodes);
    }
    if (l->nproc == 0)
        l->nproc = ngpus && !cfg->use_cpu ? ngpus : 1;
    if (l->master_addr == NULL && cfg->main_process_ip == NULL && l->nnodes > 1) {
        fprintf(stderr,
                "accelrun launch: %u nodes need --master-addr (or main_process_ip, or "
                "PET_MASTER_ADDR)\n",
                l->nnodes);
        return CLI_EXIT_USAGE;
    }
    if (l->master_port == 0 && cfg->main_process_port <= 0 && l->nnodes == 1)
        l->master_port = free_port();
    return CLI_EXIT_OK;
}

/* Without --config the built-in config is only a fallback: in a pod the
 * webhook already put the job's config into the node-level environment
 * (ACCELERATE_*, FSDP_*, ...), and those values win over the built-in
 * config's.  The layout variables are still launch's own. */
static bool pod_wins(const char *name, bool builtin)
{
    static const char *const prefixes[] = {"ACCELERATE_", "FSDP_", "MEGATRON_LM_",
                                           "PARALLELISM_CONFIG_"};

    if (!builtin || getenv(name) == NULL)
        return false;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

/* True when the rank keeps this process's value of `name` over core/env's:
 * where accel_env_user_wins says so, and a pod's config variables over the
 * built-in config's.  One rule for the launch and its --dry-run listing. */
static bool env_kept(const char *name, const struct accel_site *site, bool builtin)
{
    return getenv(name) != NULL && (accel_env_user_wins(name, site) || pod_wins(name, builtin));
}

/* NAME of the NAME=VALUE item s, into a buffer of ACCEL_MAX_ENV_NAME + 1. */
static void item_name(const char *s, char *name)
{
    const char *eq = strchr(s, '=');
    size_t n = eq ? (size_t)(eq - s) : strlen(s);

    snprintf(name, ACCEL_MAX_ENV_NAME + 1, "%.*s", (int)n, s);
}

/* The rank's whole environment: this process's, then core/env's on top
 * (but what env_kept keeps). */
static char **merge_env(const struct accel_env *env, const struct accel_site *site, bool builtin)
{
    size_t n = 0, k = 0;
    char **out;

    while (environ[n] != NULL)
        n++;
    out = calloc(n + env->n + 1, sizeof(*out));
    if (out == NULL)
        return NULL;
    for (size_t i = 0; environ[i] != NULL; i++) {
        const char *eq = strchr(environ[i], '=');
        char name[ACCEL_MAX_ENV_NAME + 1];
        if (eq == NULL || (size_t)(eq - environ[i]) > ACCEL_MAX_ENV_NAME)
            continue;
        item_name(environ[i], name);
        if (accel_env_get(env, name) != NULL && !env_kept(name, site, builtin))
            continue; /* replaced below */
        out[k++] = environ[i];
    }
    for (size_t i = 0; i < env->n; i++) {
        char name[ACCEL_MAX_ENV_NAME + 1];
        item_name(env->v[i], name);
        if (!env_kept(name, site, builtin))
            out[k++] = env->v[i];
    }
    return out;
}

/* --dry-run: the variables the rank gets from the launch, as it gets them:
 * a value this process's environment keeps is listed with that value, after
 * a comment naming what the config would have set. */
static void print_rank(const struct launch *l, unsigned i, const struct accel_env *env,
                       const char *cpus, const struct accel_site *site, bool builtin)
{
    printf("# rank %u (node %u, local rank %u)%s%s\n", (l->node_rank - 1) * l->nproc + i,
           l->node_rank - 1, i, cpus ? ", CPUs " : "", cpus ? cpus : "");
    for (size_t k = 0; k < env->n; k++) {
        char name[ACCEL_MAX_ENV_NAME + 1];
        item_name(env->v[k], name);
        if (!env_kept(name, site, builtin)) {
            puts(env->v[k]);
            continue;
        }
        printf("# %s: the environment's value is kept (%s would be set)\n", name,
               env->v[k] + strlen(name) + 1);
        printf("%s=%s\n", name, getenv(name));
    }
}

/* --preflight: this node against the config, seeing what rank 0 will see
 * of the network (its MASTER_ADDR and NCCL interface names, set here: the
 * ranks get their own environments). */
static int preflight(const struct launch *l, const struct accel_site *site, char **env0)
{
    static const char *const seen[] = {"MASTER_ADDR", "MASTER_PORT", "NCCL_SOCKET_IFNAME",
                                       "NCCL_IB_HCA"};
    struct accel_pf_opts pf = {.config = l->config, .site = site, .procs_per_node = l->nproc};
    int status;

    for (size_t k = 0; k < sizeof(seen) / sizeof(seen[0]); k++) {
        size_t len = strlen(seen[k]);
        for (char **e = env0; e && *e; e++)
            if (strncmp(*e, seen[k], len) == 0 && (*e)[len] == '=')
                setenv(seen[k], *e + len + 1, 1);
    }
    status = cli_preflight_run(&pf, getenv("ACCELRUN_PREFLIGHT_DIR"), NULL, false, stderr);
    if (status == CLI_EXIT_FINDINGS)
        fprintf(stderr, "accelrun launch: preflight failed: no rank started\n");
    return status;
}

/* What cli_launch holds from stage to stage; ranks_free frees it. */
struct ranks {
    struct accel_site site;
    struct accel_cfg cfg;
    struct accel_topo topo;
    struct accel_node_plan plan;    /* GPU order, NIC and CPUs per local rank */
    struct accel_rank_plan *placed; /* [nproc] the plan as core/env takes it */
    struct accel_plan eplan;        /* eplan.nranks 0: no placement */
    struct accel_env *envs;         /* [nproc] what core/env builds */
    char ***envps;                  /* [nproc] each rank's whole environment */
    const char **cpus;              /* [nproc] the CPUs to bind to, or NULL */
    bool have_topo, have_cfg;
    unsigned ngpus;
};

/* The site policy, when --site gave one. */
static const struct accel_site *site_of(const struct launch *l, const struct ranks *r)
{
    return l->site_path ? &r->site : NULL;
}

/* The config and the layout.  The machine is discovered only where it
 * matters: the built-in config's choice between GPUs and CPUs, and a GPU
 * job's placement. */
static int settle(struct launch *l, struct ranks *r)
{
    int status;

    if (l->config == NULL) {
        r->have_topo = load_topology(l, &r->topo);
        r->ngpus = gpus_here(r->have_topo ? &r->topo : NULL);
    }
    status = load_config(l, site_of(l, r), r->ngpus, &r->cfg);
    if (status != CLI_EXIT_OK)
        return status;
    r->have_cfg = true;
    if (l->config != NULL && !r->cfg.use_cpu) {
        r->have_topo = load_topology(l, &r->topo);
        r->ngpus = gpus_here(r->have_topo ? &r->topo : NULL);
    }
    return settle_layout(l, &r->cfg, r->ngpus);
}

/* The plan: GPU order, NIC and CPUs per local rank (GPU jobs); without
 * one (a warning), the ranks are not placed. */
static void place(const struct launch *l, struct ranks *r)
{
    struct accel_plan_req req = {l->nproc, getenv("CUDA_VISIBLE_DEVICES"), false, NULL, false};
    struct accel_error err;

    if (!r->have_topo || r->ngpus == 0 || r->cfg.use_cpu)
        return;
    accel_error_clear(&err);
    r->placed = calloc(l->nproc, sizeof(*r->placed));
    if (r->placed == NULL || accel_topo_plan(&r->topo, &req, &r->plan, &err) != ACCEL_OK ||
        accel_node_plan_export(&r->topo, &r->plan, req.gpus, r->placed, l->nproc, &r->eplan,
                               &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun launch: warning: no placement: %s\n",
                r->placed ? err.msg : "out of memory");
        r->eplan.nranks = 0;
    }
    for (unsigned i = 0; i < r->eplan.nranks && !r->site.nic_binding; i++)
        r->placed[i].nccl_ib_hca[0] = r->placed[i].nccl_socket_ifname[0] = '\0';
}

/* Every rank's environment and CPUs; with --dry-run, printed instead of
 * merged into this process's environment. */
static int build_ranks(const struct launch *l, struct ranks *r)
{
    struct accel_error err;

    r->envs = calloc(l->nproc, sizeof(*r->envs));
    r->envps = calloc(l->nproc, sizeof(*r->envps));
    r->cpus = calloc(l->nproc, sizeof(*r->cpus));
    if (r->envs == NULL || r->envps == NULL || r->cpus == NULL) {
        fprintf(stderr, "accelrun launch: out of memory\n");
        return CLI_EXIT_USAGE;
    }
    for (unsigned i = 0; i < l->nproc; i++) {
        struct accel_layout lay = {l->nnodes, l->node_rank - 1, l->nproc,       (int)i, -1,
                                   0,         l->master_addr,   l->master_port, 0};
        struct accel_env_opts eopts = {r->eplan.nranks ? &r->eplan : NULL, site_of(l, r), false};
        accel_error_clear(&err);
        if (accel_env_build(&r->cfg, &lay, &eopts, &r->envs[i], &err) != ACCEL_OK) {
            fprintf(stderr, "%s: error: %s\n", r->cfg.file, err.msg);
            return CLI_EXIT_FINDINGS;
        }
        if (r->eplan.nranks && r->site.cpu_binding && r->plan.ranks[i].cpus &&
            r->plan.ranks[i].cpus[0])
            r->cpus[i] = r->plan.ranks[i].cpus;
        if (l->dry_run) {
            print_rank(l, i, &r->envs[i], r->cpus[i], site_of(l, r), l->config == NULL);
            continue;
        }
        r->envps[i] = merge_env(&r->envs[i], site_of(l, r), l->config == NULL);
        if (r->envps[i] == NULL) {
            fprintf(stderr, "accelrun launch: out of memory\n");
            return CLI_EXIT_USAGE;
        }
    }
    return CLI_EXIT_OK;
}

/* --preflight (rank 0's environment), then the ranks: procs.c. */
static int run_ranks(const struct launch *l, const struct ranks *r, char **cmd)
{
    struct procs_opts po = {l->nproc,     (l->node_rank - 1) * l->nproc,
                            cmd,          (char **const *)r->envps,
                            r->cpus,      l->tee,
                            l->main_only, l->grace_s};
    int status;

    if (l->preflight) {
        status = preflight(l, site_of(l, r), r->envps[0]);
        if (status != CLI_EXIT_OK)
            return status;
    }
    if (l->main_only && l->tee == NULL && l->nproc > 1)
        fprintf(stderr, "accelrun launch: note: --main-only without --tee: the output of "
                        "ranks other than 0 is dropped\n");
    fflush(NULL);
    return procs_run(&po);
}

static void ranks_free(const struct launch *l, struct ranks *r)
{
    for (unsigned i = 0; r->envs != NULL && i < l->nproc; i++) {
        free(r->envps ? r->envps[i] : NULL);
        accel_env_free(&r->envs[i]);
    }
    free(r->envs);
    free(r->envps);
    free(r->cpus);
    free(r->placed);
    accel_node_plan_free(&r->plan);
    if (r->have_topo)
        accel_topo_free(&r->topo);
    if (r->have_cfg)
        accel_cfg_free(&r->cfg);
    accel_site_free(&r->site);
}

int cli_launch(int argc, char **argv)
{
    struct launch l = {0};
    struct ranks r;
    int status;

    l.grace_s = 10;
    status = parse(&l, argc, argv);
    if (status != CLI_EXIT_OK)
        return status < 0 ? CLI_EXIT_OK : status;
    pet_defaults(&l);
    memset(&r, 0, sizeof(r));
    status = cli_load_site(l.site_path, l.version, &r.site, false, stderr);
    if (status != CLI_EXIT_OK)
        return status;
    status = settle(&l, &r);
    if (status != CLI_EXIT_OK)
        goto out;
    place(&l, &r);
    status = build_ranks(&l, &r);
    if (status != CLI_EXIT_OK || l.dry_run)
        goto out;
    status = run_ranks(&l, &r, argv + optind);
out:
    ranks_free(&l, &r);
    return status;
}
