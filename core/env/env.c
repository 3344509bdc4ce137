/*
 * env.c: accel_env_build.  It checks the layout against the config, derives
 * the world (ranks, master address and port, threads), asks
 * accelerate_vars.c for accelerate's own variables and adds what torchrun
 * gives each worker, or, for the simple launcher, the ranks mpirun would.
 * Then the plan's placement and the site's NCCL variables.
 */
#include <stdio.h>
#include <string.h>

#include "env_int.h"

static enum accel_err make_world(const struct accel_cfg *cfg, const struct accel_layout *lay,
                                 bool job_wins, struct world *w, struct accel_error *err)
{
    bool node_level = lay->local_rank < 0;

    memset(w, 0, sizeof(*w));
    if (lay->nnodes == 0 || lay->nproc_per_node == 0)
        return accel_error_set(err, ACCEL_ELAYOUT,
                               "layout: needs at least one node and one process per node");
    if (lay->node_rank >= lay->nnodes)
        return accel_error_set(err, ACCEL_ELAYOUT,
                               "layout: node rank %u is not below the node count %u",
                               lay->node_rank, lay->nnodes);
    if (!node_level && (unsigned)lay->local_rank >= lay->nproc_per_node)
        return accel_error_set(err, ACCEL_ELAYOUT,
                               "layout: local rank %d is not below the processes per node (%u)",
                               lay->local_rank, lay->nproc_per_node);
    w->nnodes = lay->nnodes;
    w->node_rank = lay->node_rank;
    w->nproc_per_node = lay->nproc_per_node;
    w->world_size = lay->world_size ? lay->world_size : lay->nnodes * lay->nproc_per_node;
    w->local_rank = lay->local_rank;
    w->rank = node_level ? -1
              : lay->global_rank >= 0
                  ? lay->global_rank
                  : (long)lay->node_rank * lay->nproc_per_node + lay->local_rank;
    if (w->rank >= (long)w->world_size)
        return accel_error_set(err, ACCEL_ELAYOUT,
                               "layout: world size %u leaves no room for rank %ld", w->world_size,
                               w->rank);
    if (!job_wins && cfg->num_processes > 0 && (unsigned long)cfg->num_processes != w->world_size)
        return accel_error_set(err, ACCEL_ELAYOUT,
                               "layout: the config says num_processes: %ld, the job has %u "
                               "process%s; make them equal or leave num_processes out",
                               cfg->num_processes, w->world_size, w->world_size == 1 ? "" : "es");
    if (!job_wins && accel_map_find(&cfg->tree, "num_machines") != NULL &&
        (unsigned long)cfg->num_machines != w->nnodes)
        return accel_error_set(
            err, ACCEL_ELAYOUT,
            "layout: the config says num_machines: %ld, the job has %u node%s; make them "
            "equal or leave num_machines out",
            cfg->num_machines, w->nnodes, w->nnodes == 1 ? "" : "s");
    w->master_addr =
        lay->master_addr ? lay->master_addr
        : (cfg->main_process_ip && (cfg->num_machines > 1 || cfg->launcher == ACCEL_LAUNCH_SIMPLE))
            ? cfg->main_process_ip
            : "127.0.0.1";
    if (lay->master_port != 0)
        w->master_port = lay->master_port;
    else if (cfg->main_process_port > 0)
        w->master_port = (unsigned)cfg->main_process_port;
    else if (cfg->main_process_port == 0)
        return accel_error_set(err, ACCEL_ELAYOUT,
                               "layout: main_process_port: 0 asks the launcher to pick a free "
                               "port; give the port (--master-port) for a reproducible "
                               "environment");
    else
        w->master_port = ACCEL_DEFAULT_PORT;
    /* accelerate: OMP_NUM_THREADS is 1 unless a CPU job can give each
     * process more than one physical core. */
    w->omp_threads = (cfg->use_cpu && lay->cpus_per_proc > 1) ? lay->cpus_per_proc : 1;
    return ACCEL_OK;
}

/* What torchrun's local elastic agent puts in every worker's environment,
 * less TORCHELASTIC_USE_AGENT_STORE and TORCHELASTIC_ERROR_FILE, which only
 * make sense with an agent process (docs/differences.md). */
static void torchrun_vars(struct env__list *l, const struct world *w)
{
    env__list_setf(l, "RANK", "%ld", w->rank);
    env__list_setf(l, "LOCAL_RANK", "%d", w->local_rank);
    env__list_setf(l, "WORLD_SIZE", "%u", w->world_size);
    env__list_setf(l, "LOCAL_WORLD_SIZE", "%u", w->nproc_per_node);
    env__list_setf(l, "GROUP_RANK", "%u", w->node_rank);
    env__list_setf(l, "GROUP_WORLD_SIZE", "%u", w->nnodes);
    env__list_setf(l, "ROLE_RANK", "%ld", w->rank);
    env__list_setf(l, "ROLE_WORLD_SIZE", "%u", w->world_size);
    env__list_set(l, "ROLE_NAME", "default");
    env__list_set(l, "MASTER_ADDR", w->master_addr);
    env__list_setf(l, "MASTER_PORT", "%u", w->master_port);
    env__list_set(l, "TORCHELASTIC_RESTART_COUNT", "0");
    env__list_set(l, "TORCHELASTIC_MAX_RESTARTS", "0");
    env__list_set(l, "TORCHELASTIC_RUN_ID", "none");
    env__list_set(l, "TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
    env__list_set(l, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
}

/* The simple launcher: MASTER_* for multi-process runs, and the ranks that
 * mpirun would otherwise provide (accelerate reads RANK, WORLD_SIZE,
 * LOCAL_RANK and LOCAL_WORLD_SIZE first). */
static void simple_vars(struct env__list *l, const struct world *w)
{
    bool multi = w->world_size > 1 || w->nnodes > 1;

    if (multi) {
        env__list_set(l, "MASTER_ADDR", w->master_addr);
        env__list_setf(l, "MASTER_PORT", "%u", w->master_port);
    }
    if (w->world_size > 1 && w->local_rank >= 0) {
        env__list_setf(l, "RANK", "%ld", w->rank);
        env__list_setf(l, "LOCAL_RANK", "%d", w->local_rank);
        env__list_setf(l, "WORLD_SIZE", "%u", w->world_size);
        env__list_setf(l, "LOCAL_WORLD_SIZE", "%u", w->nproc_per_node);
    }
}

/* DESIGN decision 5: a pod that runs `accelrun launch` or torchrun itself. */
static void node_level_vars(struct env__list *l, const struct world *w)
{
    env__list_setf(l, "GROUP_RANK", "%u", w->node_rank);
    env__list_setf(l, "WORLD_SIZE", "%u", w->world_size);
    env__list_set(l, "MASTER_ADDR", w->master_addr);
    env__list_setf(l, "MASTER_PORT", "%u", w->master_port);
    env__list_setf(l, "PET_NNODES", "%u", w->nnodes);
    env__list_setf(l, "PET_NODE_RANK", "%u", w->node_rank);
    env__list_setf(l, "PET_NPROC_PER_NODE", "%u", w->nproc_per_node);
    env__list_set(l, "PET_MASTER_ADDR", w->master_addr);
    env__list_setf(l, "PET_MASTER_PORT", "%u", w->master_port);
}

static void plan_vars(struct env__list *l, const struct accel_plan *plan, int local_rank)
{
    const struct accel_rank_plan *r;

    if (plan == NULL || local_rank < 0 || (unsigned)local_rank >= plan->nranks)
        return;
    r = &plan->ranks[local_rank];
    if (r->cuda_visible_devices[0] != '\0') {
        env__list_set(l, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        env__list_set(l, "CUDA_VISIBLE_DEVICES", r->cuda_visible_devices);
    }
    if (r->nccl_ib_hca[0] != '\0')
        env__list_set(l, "NCCL_IB_HCA", r->nccl_ib_hca);
    if (r->nccl_socket_ifname[0] != '\0')
        env__list_set(l, "NCCL_SOCKET_IFNAME", r->nccl_socket_ifname);
}

static void site_vars(struct env__list *l, const struct accel_site *site)
{
    if (site == NULL)
        return;
    for (size_t i = 0; i < site->nenv; i++) {
        char name[ACCEL_MAX_ENV_NAME + 1];
        const char *eq = strchr(site->env[i], '=');
        size_t n = eq ? (size_t)(eq - site->env[i]) : 0;
        if (n == 0 || n > ACCEL_MAX_ENV_NAME)
            continue;
        memcpy(name, site->env[i], n);
        name[n] = '\0';
        env__list_set(l, name, eq + 1);
    }
}

enum accel_err accel_env_build(const struct accel_cfg *cfg, const struct accel_layout *lay,
                               const struct accel_env_opts *opts, struct accel_env *out,
                               struct accel_error *err)
{
    struct env__list l = {out, 0, ACCEL_OK};
    struct world w;
    enum accel_err rc;

    out->v = NULL;
    out->n = 0;
    if (cfg->launcher == ACCEL_LAUNCH_NONE)
        return accel_error_set(err, ACCEL_EUNSUPPORTED,
                               "%s config: not launched by accelrun (accelerate hands it to %s)",
                               cfg->sagemaker ? "SageMaker" : cfg->dist_name,
                               cfg->sagemaker ? "AWS SageMaker" : "torch_xla");
    rc = make_world(cfg, lay, opts != NULL && opts->job_wins, &w, err);
    if (rc != ACCEL_OK)
        return rc;
    env__accelerate_vars(&l, cfg, &w);
    if (w.local_rank < 0)
        node_level_vars(&l, &w);
    else if (cfg->launcher == ACCEL_LAUNCH_SIMPLE)
        simple_vars(&l, &w);
    else
        torchrun_vars(&l, &w);
    plan_vars(&l, opts ? opts->plan : NULL, w.local_rank);
    site_vars(&l, opts ? opts->site : NULL);
    env__list_sort(&l);
    if (l.rc != ACCEL_OK) {
        accel_env_free(out);
        return accel_error_set(err, l.rc, "environment: couldn't build it: %s",
                               accel_strerror(l.rc));
    }
    return ACCEL_OK;
}

bool accel_env_user_wins(const char *name, const struct accel_site *site)
{
    size_t n = strlen(name);

    if (strcmp(name, "OMP_NUM_THREADS") == 0)
        return true;
    if (strcmp(name, "NCCL_IB_HCA") != 0 && strcmp(name, "NCCL_SOCKET_IFNAME") != 0)
        return false;
    for (size_t i = 0; site != NULL && i < site->nenv; i++)
        if (strncmp(site->env[i], name, n) == 0 && site->env[i][n] == '=')
            return false;
    return true;
}
