/*
 * stepd.c: remote context (slurmstepd).  user_init reads and checks the
 * config once per node, with the job user's identity; task_init gives each
 * task its environment, or fails it with the located message.
 *
 * Why task_init and not user_init for errors: a failing user_init does not
 * make srun exit non-zero (SchedMD bug 7573), and a failing remote init or
 * user_init of a batch job drains the node.  task_init failures make each
 * task exit 1 and srun exit 1, and drain nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/cluster.h"
#include "accel/env.h"
#include "accel/log.h"
#include "accel/sched.h"
#include "plugin.h"

#ifndef SLURM_BATCH_SCRIPT
#define SLURM_BATCH_SCRIPT (0xfffffffb)
#endif
#ifndef SLURM_EXTERN_CONT
#define SLURM_EXTERN_CONT (0xfffffffc)
#endif
#ifndef SLURM_INTERACTIVE_STEP
#define SLURM_INTERACTIVE_STEP (0xfffffffa)
#endif

struct plugin_state plugin;

void plugin_state_reset(void)
{
    free(plugin.config_path);
    accel_free(plugin.node_rank);
    if (plugin.topo_loaded)
        accel_topo_free(&plugin.topo);
    if (plugin.loaded) {
        accel_cfg_free(&plugin.cfg);
        accel_site_free(&plugin.site);
    }
    memset(&plugin, 0, sizeof(plugin));
}

static void log_to_slurm(void *ctx, enum accel_log_level level, const char *line)
{
    (void)ctx;
    if (level >= ACCEL_LOG_ERROR)
        slurm_error(PLUGIN_NAME ": %s", line);
    else if (level >= ACCEL_LOG_WARN)
        slurm_info(PLUGIN_NAME ": %s", line);
    else
        slurm_debug(PLUGIN_NAME ": %s", line);
}

void plugin_log_init(void)
{
    accel_log_set(log_to_slurm, NULL);
}

/* Appends the error findings (and, if there are none, `fallback`) to the
 * text task_init will print. */
/* Appends the findings of severity `sev` to `text` (one per line). */
static size_t keep(const struct accel_diags *d, enum accel_sev sev, char *text, size_t size)
{
    size_t used = strlen(text);
    char line[2048];

    for (size_t i = 0; i < d->n && used < size; i++) {
        if (d->v[i].sev != sev)
            continue;
        accel_diag_format(&d->v[i], line, sizeof(line));
        used += (size_t)snprintf(text + used, size - used, "%s%s", used ? "\n" : "", line);
    }
    return used;
}

/* The errors for task_init to raise (and, without any, `fallback`). */
static void keep_errors(struct accel_diags *d, const char *fallback)
{
    accel_diags_sort(d);
    if (keep(d, ACCEL_SEV_ERROR, plugin.error, sizeof(plugin.error)) == 0 && fallback != NULL)
        snprintf(plugin.error, sizeof(plugin.error), "%s", fallback);
}

int plugin_stepd_init(spank_t sp)
{
    (void)sp;
    return 0;
}

int plugin_stepd_exit(spank_t sp)
{
    (void)sp;
    return 0;
}

/* True when the effective gid and every supplementary group are the job's
 * (its gid and S_JOB_SUPPLEMENTARY_GIDS), as Slurm sets them before
 * user_init; else the reason in plugin.error: a user's file is never read
 * with a group the user does not have (root's, say). */
static bool job_groups_only(spank_t sp)
{
    gid_t job_gid = 0, *sup = NULL, *have = NULL;
    int nsup = 0, n;
    bool ok = true;
    if (spank_get_item(sp, S_JOB_GID, &job_gid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &sup, &nsup) != ESPANK_SUCCESS) {
        snprintf(plugin.error, sizeof(plugin.error),
                 PLUGIN_NAME ": couldn't read the job's groups from Slurm");
        return false;
    }
    if (getegid() != job_gid) {
        snprintf(plugin.error, sizeof(plugin.error),
                 PLUGIN_NAME ": refusing to read %s with gid %u instead of the job's gid %u",
                 plugin.config_path, (unsigned)getegid(), (unsigned)job_gid);
        return false;
    }
    n = getgroups(0, NULL);
    if (n < 0 || (n > 0 && !(have = malloc((size_t)n * sizeof(*have)))) ||
        (n > 0 && (n = getgroups(n, have)) < 0)) {
        snprintf(plugin.error, sizeof(plugin.error),
                 PLUGIN_NAME ": couldn't read this process's groups: %s", strerror(errno));
        free(have);
        return false;
    }
    for (int i = 0; ok && i < n; i++) {
        ok = have[i] == job_gid;
        for (int k = 0; !ok && k < nsup; k++)
            ok = have[i] == sup[k];
        if (!ok)
            snprintf(plugin.error, sizeof(plugin.error),
                     PLUGIN_NAME ": refusing to read %s with group %u, which the job does not have",
                     plugin.config_path, (unsigned)have[i]);
    }
    free(have);
    return ok;
}

/* Loads the site file and the config as the job user.  Never fails the
 * callback: problems are kept for task_init. */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    struct accel_cfg_opts opts = {0};
    struct accel_diags d;
    struct accel_error err;
    uint32_t step_id = 0, job_id = 0;
    uid_t job_uid = 0;
    char *nodelist = NULL;
    spank_err_t src;

    (void)ac;
    (void)av;
    if (plugin.config_path == NULL && !plugin.preflight)
        return 0;
    if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_UID, &job_uid) != ESPANK_SUCCESS) {
        snprintf(plugin.error, sizeof(plugin.error), PLUGIN_NAME ": couldn't read the job ids");
        return 0;
    }
    plugin.skip_step = step_id == SLURM_BATCH_SCRIPT || step_id == SLURM_EXTERN_CONT ||
                       step_id == SLURM_INTERACTIVE_STEP;
    /* --accel-preflight alone (an #SBATCH line, the config on srun's):
     * task_init fails the step that runs it, never the batch script */
    if (plugin.skip_step || plugin.config_path == NULL)
        return 0;
    if (plugin.args.error[0] != '\0') {
        snprintf(plugin.error, sizeof(plugin.error), PLUGIN_NAME ": %s", plugin.args.error);
        return 0;
    }
    /* Slurm runs user_init with the job user's effective uid.  If that ever
     * changes, refuse rather than read a user's file as root. */
    if (geteuid() != job_uid) {
        snprintf(plugin.error, sizeof(plugin.error),
                 PLUGIN_NAME ": refusing to read %s with uid %u instead of the job's uid %u",
                 plugin.config_path, (unsigned)geteuid(), (unsigned)job_uid);
        return 0;
    }
    if (!job_groups_only(sp))
        return 0;
    accel_diags_init(&d);
    accel_error_clear(&err);
    accel_site_init(&plugin.site);
    if (plugin.args.site[0] != '\0' &&
        accel_site_load(&plugin.site, plugin.args.site, 0, &d, &err) != ACCEL_OK) {
        keep_errors(&d, err.msg);
        accel_diags_free(&d);
        return 0;
    }
    opts.site = plugin.args.site[0] ? &plugin.site : NULL;
    if (accel_cfg_load(&plugin.cfg, plugin.config_path, &opts, &d, &err) != ACCEL_OK) {
        keep_errors(&d, err.msg);
        accel_diags_free(&d);
        accel_site_free(&plugin.site);
        return 0;
    }
    accel_diags_sort(&d);
    keep(&d, ACCEL_SEV_WARNING, plugin.warnings, sizeof(plugin.warnings));
    /* the preflight's helper runs in the task: hand it a path that does not
     * depend on the working directory (resolved here, as the user) */
    if (realpath(plugin.config_path, plugin.config_abs) == NULL)
        snprintf(plugin.config_abs, sizeof(plugin.config_abs), "%s", plugin.config_path);
    accel_diags_free(&d);
    plugin.loaded = true;

    /* A fragmented 16k-node step lists ~74 KB of hosts: on the heap. */
    nodelist = malloc(ACCEL_CLUSTER_MAX_LIST + 1);
    src = nodelist ? spank_getenv(sp, "SLURM_STEP_NODELIST", nodelist, ACCEL_CLUSTER_MAX_LIST + 1)
                   : ESPANK_NOSPACE;
    if (src != ESPANK_SUCCESS ||
        accel_hostlist_first(nodelist, plugin.master_addr, sizeof(plugin.master_addr), &err) !=
            ACCEL_OK) {
        snprintf(plugin.error, sizeof(plugin.error),
                 PLUGIN_NAME ": couldn't find the first host of SLURM_STEP_NODELIST: %s",
                 src != ESPANK_SUCCESS ? spank_strerror(src) : err.msg);
        free(nodelist);
        return 0;
    }
    /* Switch-aware node order; without it (no topology.conf, odd host names)
     * the tasks keep Slurm's order. */
    if (plugin_order_load(sp, nodelist, &err) != ACCEL_OK)
        slurm_debug(PLUGIN_NAME ": Slurm's node order: %s", err.msg);
    free(nodelist);
    plugin_placement_load(sp);
    /* The plugstack line wins over the site file's accelrun section. */
    if (plugin.args.ports_given)
        plugin.master_port =
            accel_step_port(job_id, step_id, plugin.args.port_base, plugin.args.port_range);
    else
        plugin.master_port =
            accel_step_port(job_id, step_id, plugin.site.port_base, plugin.site.port_range);
    return 0;
}

static bool get_u32(spank_t sp, spank_item_t item, uint32_t *out)
{
    return spank_get_item(sp, item, out) == ESPANK_SUCCESS;
}

/* Prints, from rank 0 only, what the user should know but that does not stop
 * the job: the config's warnings, the keys Slurm decides instead of the
 * config, and counts the site lets Slurm override. */
static void warn_once(uint32_t world, uint32_t nnodes, bool job_wins)
{
    const struct accel_cfg *cfg = &plugin.cfg;
    char *copy, *line, *save = NULL;

    if (plugin.warnings[0] != '\0' && (copy = strdup(plugin.warnings)) != NULL) {
        for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            slurm_spank_log(PLUGIN_NAME ": %s", line);
        free(copy);
    }
    if (cfg->main_process_ip != NULL || cfg->main_process_port >= 0)
        slurm_spank_log(PLUGIN_NAME ": note: %s: Slurm decides the rendezvous here "
                                    "(MASTER_ADDR=%s, MASTER_PORT=%u); main_process_ip and "
                                    "main_process_port in the config are not used",
                        plugin.config_path, plugin.master_addr, plugin.master_port);
    if (!job_wins)
        return;
    if (cfg->num_processes > 0 && (uint32_t)cfg->num_processes != world)
        slurm_spank_log(PLUGIN_NAME ": warning: %s says num_processes: %ld, the step has %u "
                                    "task%s; the site lets Slurm win",
                        plugin.config_path, cfg->num_processes, world, world == 1 ? "" : "s");
    if (accel_map_find(&cfg->tree, "num_machines") != NULL && (uint32_t)cfg->num_machines != nnodes)
        slurm_spank_log(PLUGIN_NAME ": warning: %s says num_machines: %ld, the step has %u "
                                    "node%s; the site lets Slurm win",
                        plugin.config_path, cfg->num_machines, nnodes, nnodes == 1 ? "" : "s");
}

/* True for the variables that name visible devices: Slurm's GPU binding owns
 * them, so a config's gpu_ids never replaces what Slurm set. */
static bool device_var(const char *name)
{
    static const char *const names[] = {"CUDA_VISIBLE_DEVICES",   "ZE_AFFINITY_MASK",
                                        "MLU_VISIBLE_DEVICES",    "SDAA_VISIBLE_DEVICES",
                                        "MUSA_VISIBLE_DEVICES",   "ASCEND_RT_VISIBLE_DEVICES",
                                        "HABANA_VISIBLE_MODULES", "NEURON_RT_VISIBLE_CORES"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

/* Prints a user error once per step: from global rank 0. */
static int fail_task(uint32_t rank, const char *text)
{
    if (rank == 0) {
        char *copy = strdup(text), *line, *save = NULL;
        if (copy == NULL)
            return -1;
        for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
            slurm_error("%s%s", strncmp(line, PLUGIN_NAME ":", 9) == 0 ? "" : PLUGIN_NAME ": ",
                        line);
        free(copy);
    }
    return -1;
}

/* Ranks contiguous per node, as torchrun numbers them, with the nodes in
 * switch order (order.c; DESIGN decision 7): a node's first rank is the
 * number of tasks on the nodes placed before it.  With Slurm's block
 * distribution and no topology this is SLURM_PROCID; with -m cyclic or a
 * topology.conf it is not, and this is the numbering that keeps
 * GROUP_RANK, LOCAL_RANK and RANK consistent.  Renumbers *node_id and
 * *rank; returns 0, or fail_task's -1. */
static int torch_numbering(spank_t sp, uint32_t local_count, int local_id, uint32_t *node_id,
                           uint32_t *rank)
{
    char tpn[4096];
    unsigned before = 0, count = 0;
    uint32_t group = *node_id, first = 0;
    struct accel_error err;
    spank_err_t terr = spank_getenv(sp, "SLURM_STEP_TASKS_PER_NODE", tpn, sizeof(tpn));

    /* absent: Slurm's numbering; present but unreadable (longer than
     * tpn): an error, never a silently skipped check */
    if (terr != ESPANK_SUCCESS && terr != ESPANK_ENV_NOEXIST) {
        snprintf(plugin.error, sizeof(plugin.error),
                 PLUGIN_NAME ": couldn't read SLURM_STEP_TASKS_PER_NODE (%zu bytes at most): %s",
                 sizeof(tpn) - 1, spank_strerror(terr));
        return fail_task(*rank, plugin.error);
    }
    if (terr != ESPANK_SUCCESS)
        return 0;
    accel_error_clear(&err);
    if (accel_tasks_per_node(tpn, *node_id, &before, &count, &err) != ACCEL_OK ||
        count != local_count)
        return fail_task(*rank, PLUGIN_NAME ": SLURM_STEP_TASKS_PER_NODE does not match "
                                            "this node's task count");
    first = before;
    if (plugin.node_rank != NULL &&
        plugin_order_rank(tpn, *node_id, &group, &first, &err) != ACCEL_OK)
        return fail_task(*rank, err.msg);
    *node_id = group;
    *rank = first + (uint32_t)local_id;
    return 0;
}

/* The task's layout, from Slurm, numbered as torchrun numbers it (*rank
 * too).  Returns 0, or fail_task's -1. */
static int task_layout(spank_t sp, uint32_t *rank, struct accel_layout *lay)
{
    uint32_t world = 0, local_count = 0, node_id = 0, nnodes = 0, cpus = 0;
    int local_id = 0;

    if (spank_get_item(sp, S_TASK_ID, &local_id) != ESPANK_SUCCESS ||
        !get_u32(sp, S_JOB_TOTAL_TASK_COUNT, &world) ||
        !get_u32(sp, S_JOB_LOCAL_TASK_COUNT, &local_count) ||
        !get_u32(sp, S_JOB_NODEID, &node_id) || !get_u32(sp, S_JOB_NNODES, &nnodes))
        return fail_task(*rank, PLUGIN_NAME ": couldn't read the task layout from Slurm");
    if (torch_numbering(sp, local_count, local_id, &node_id, rank) != 0)
        return -1;
    if (!get_u32(sp, S_STEP_CPUS_PER_TASK, &cpus))
        cpus = 0;
    lay->nnodes = nnodes;
    lay->node_rank = node_id;
    lay->nproc_per_node = local_count;
    lay->local_rank = local_id;
    lay->global_rank = *rank;
    lay->world_size = world;
    lay->master_addr = plugin.master_addr;
    lay->master_port = plugin.master_port;
    lay->cpus_per_proc = cpus;
    return 0;
}

/* Sets core/env's variables in the task, but for those the task keeps:
 * accelerate keeps an OMP_NUM_THREADS the user exported; Slurm's GPU
 * binding is never replaced.  Returns 0, or fail_task's -1. */
static int set_task_env(spank_t sp, const struct accel_env *env, uint32_t rank)
{
    char probe[16];

    for (size_t i = 0; i < env->n; i++) {
        char *kv = env->v[i], *eq = strchr(kv, '=');
        int overwrite = 1;
        *eq = '\0';
        if (accel_env_user_wins(kv, &plugin.site) || device_var(kv))
            overwrite = spank_getenv(sp, kv, probe, sizeof(probe)) == ESPANK_ENV_NOEXIST;
        if (!overwrite && device_var(kv) && rank == 0)
            slurm_spank_log(PLUGIN_NAME ": note: %s: gpu_ids is not used here; the step's GPU "
                                        "binding (--gpus-per-task, --gres) decides %s",
                            plugin.config_path, kv);
        if (spank_setenv(sp, kv, eq + 1, overwrite) != ESPANK_SUCCESS && overwrite) {
            *eq = '=';
            return fail_task(rank, PLUGIN_NAME ": couldn't set the task environment");
        }
        *eq = '=';
    }
    return 0;
}

/* After the environment: Slurm numbers GPUs in PCI bus order; make CUDA
 * agree.  Then Slurm's list in topology order (placement.c), when every
 * task shares it, and the CPU binding (`place` NULL: the task has no
 * place). */
static void place_task(spank_t sp, const struct plugin_placement *place, uint32_t rank)
{
    char probe[16];

    if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", probe, sizeof(probe)) != ESPANK_ENV_NOEXIST) {
        spank_setenv(sp, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
        if (place && place->order[0] != '\0')
            spank_setenv(sp, "CUDA_VISIBLE_DEVICES", place->order, 1);
    }
    if (place && plugin.site.cpu_binding)
        plugin_bind_cpus(sp, place->cpus, rank);
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    struct accel_layout lay = {0, 0, 0, -1, -1, 0, NULL, 0, 0};
    struct accel_env_opts eopts = {NULL, NULL, false};
    struct accel_env env = {NULL, 0};
    struct accel_error err;
    uint32_t rank = 0;
    struct plugin_placement place;
    struct accel_rank_plan *ranks = NULL;
    struct accel_plan plan = {0, NULL};
    bool placed;
    int rc = -1;

    (void)ac;
    (void)av;
    if (plugin.config_path == NULL && plugin.preflight && !plugin.skip_step) {
        get_u32(sp, S_TASK_GLOBAL_ID, &rank);
        return fail_task(rank, PLUGIN_NAME ": --accel-preflight checks the --accel-config file: "
                                           "give both");
    }
    if (plugin.config_path == NULL || plugin.skip_step)
        return 0;
    get_u32(sp, S_TASK_GLOBAL_ID, &rank);
    if (plugin.error[0] != '\0')
        return fail_task(rank, plugin.error);
    if (!plugin.loaded)
        return fail_task(rank, PLUGIN_NAME ": the config was not loaded");
    if (task_layout(sp, &rank, &lay) != 0)
        return -1;
    eopts.site = plugin.args.site[0] ? &plugin.site : NULL;
    eopts.job_wins = plugin.site.slurm_wins;
    /* The task's place on the node (placement.c): its NIC goes through
     * core/env as the plan of this local rank. */
    placed = plugin_placement_task(sp, lay.nproc_per_node, (unsigned)lay.local_rank, &place);
    if (placed && plugin.site.nic_binding && lay.nproc_per_node <= ACCEL_TOPO_MAX_RANKS) {
        ranks = calloc(lay.nproc_per_node, sizeof(*ranks));
        if (ranks != NULL) {
            ranks[lay.local_rank] = place.nic;
            plan.nranks = lay.nproc_per_node;
            plan.ranks = ranks;
            eopts.plan = &plan;
        }
    }
    if (rank == 0)
        warn_once(lay.world_size, lay.nnodes, eopts.job_wins);
    accel_error_clear(&err);
    if (accel_env_build(&plugin.cfg, &lay, &eopts, &env, &err) != ACCEL_OK) {
        char text[1024];
        snprintf(text, sizeof(text), PLUGIN_NAME ": %s: error: %s", plugin.config_path, err.msg);
        fail_task(rank, text);
        goto out;
    }
    if (set_task_env(sp, &env, rank) != 0)
        goto out;
    place_task(sp, placed ? &place : NULL, rank);
    /* last: the preflight sees the task's final environment */
    if (plugin.preflight && plugin_preflight_task(sp, rank) != 0)
        goto out;
    rc = 0;
out:
    free(ranks);
    accel_env_free(&env);
    return rc;
}
