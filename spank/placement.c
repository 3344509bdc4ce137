/*
 * placement.c: where a task goes on its node (DESIGN decision 7): its GPU
 * within what Slurm granted, the NIC nearest that GPU, the CPUs local to it.
 *
 * When every task of a node sees the same GPU list (--gres=gpu:N, no
 * per-task binding) and the list holds at least one GPU per task, the list
 * is permuted so that local rank i's device (accelerate takes
 * LOCAL_RANK mod the visible count) is the GPU the topology plan gives rank
 * i: consecutive ranks on one NVSwitch, NVLink or PCI switch, ranks of a
 * socket together.  Ids are only reordered, never added or dropped.  With
 * per-task binding (--gpus-per-task, --gpu-bind) Slurm already placed the
 * task and its list stays.  Either way the task learns its GPU's nearest NIC
 * (NCCL_IB_HCA or NCCL_SOCKET_IFNAME) and CPUs (binding.c).  Any problem (no
 * topology, fake devices, an odd list) leaves Slurm's choices as they are:
 * placement never fails a job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/topo.h"
#include "plugin.h"

void plugin_placement_load(spank_t sp)
{
    char probe[8];
    struct accel_error err;
    enum accel_err rc;

    /* Only steps with GPUs pay for discovery. */
    if (spank_getenv(sp, "SLURM_STEP_GPUS", probe, sizeof(probe)) == ESPANK_ENV_NOEXIST &&
        spank_getenv(sp, "CUDA_VISIBLE_DEVICES", probe, sizeof(probe)) == ESPANK_ENV_NOEXIST)
        return;
    accel_error_clear(&err);
    rc = plugin.args.topology_xml[0] != '\0'
             ? accel_topo_load_xml(&plugin.topo, plugin.args.topology_xml, &err)
             : accel_topo_discover(&plugin.topo, &err);
    if (rc != ACCEL_OK) {
        slurm_debug(PLUGIN_NAME ": no GPU placement: %s", err.msg);
        return;
    }
    plugin.topo_loaded = true;
}

static unsigned count_ids(const char *list)
{
    unsigned n = list[0] != '\0';
    for (const char *c = list; *c; c++)
        n += *c == ',';
    return n;
}

/* True when the comma list `list` holds `id`. */
static bool has_id(const char *list, const char *id)
{
    size_t n = strlen(id);

    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, id, n) == 0)
            return true;
        p += len + (end != NULL);
    }
    return false;
}

/* Appends `id` to `out` unless it is there already; false when it does not fit. */
static bool append_id(char *out, size_t size, const char *id)
{
    size_t used = strlen(out), n = strlen(id);

    if (has_id(out, id))
        return true;
    if (used + n + 2 > size)
        return false;
    if (used > 0)
        out[used++] = ',';
    memcpy(out + used, id, n + 1);
    return true;
}

/* Local rank `local_id`'s NIC variable from the plan, as core/env spells it. */
static void task_nic(const struct accel_node_plan *plan, unsigned idx, struct accel_rank_plan *out)
{
    struct accel_rank_plan *all = calloc(plan->nranks, sizeof(*all));
    struct accel_plan exported;
    struct accel_error err;

    if (all == NULL)
        return;
    if (accel_node_plan_export(&plugin.topo, plan, all, plan->nranks, &exported, &err) ==
        ACCEL_OK) {
        memcpy(out->nccl_ib_hca, all[idx].nccl_ib_hca, sizeof(out->nccl_ib_hca));
        memcpy(out->nccl_socket_ifname, all[idx].nccl_socket_ifname,
               sizeof(out->nccl_socket_ifname));
    }
    free(all);
}

bool plugin_placement_task(spank_t sp, unsigned local_count, unsigned local_id,
                           struct plugin_placement *out)
{
    struct accel_plan_req req = {local_count, NULL, false, NULL, false};
    struct accel_node_plan plan = {0, false, NULL};
    struct accel_error err;
    char granted[4096], physical[4096] = "";
    unsigned ngranted, idx = local_id;
    bool shared, ok = true;

    memset(out, 0, sizeof(*out));
    if (!plugin.topo_loaded || local_id >= local_count ||
        spank_getenv(sp, "CUDA_VISIBLE_DEVICES", granted, sizeof(granted)) != ESPANK_SUCCESS ||
        count_ids(granted) == 0)
        return false;
    ngranted = count_ids(granted);
    /* Every task sees the node's list (one GPU or more per task): plan all
     * of them and take this task's place.  Fewer GPUs than tasks means Slurm
     * bound each task to its own (--gpus-per-task, --gpu-bind): plan that
     * task alone, for its NIC and CPUs, and keep the list. */
    shared = ngranted >= local_count;
    if (!shared) {
        req.nproc = 1;
        idx = 0;
    }
    req.gpus = granted;
    /* With ConstrainDevices Slurm writes local indices and keeps the node-wide
     * ids in SLURM_STEP_GPUS (reference/slurm.md §2.10). */
    if (spank_getenv(sp, "SLURM_STEP_GPUS", physical, sizeof(physical)) == ESPANK_SUCCESS &&
        strcmp(physical, granted) != 0 && count_ids(physical) == count_ids(granted)) {
        req.local_ids = true;
        req.physical = physical;
    }
    accel_error_clear(&err);
    if (accel_topo_plan(&plugin.topo, &req, &plan, &err) != ACCEL_OK) {
        slurm_debug(PLUGIN_NAME ": no placement, Slurm's GPU order kept: %s", err.msg);
        return false;
    }
    if (shared) {
        for (unsigned i = 0; ok && i < plan.nranks; i++)
            ok = plan.ranks[i].gpu_id[0] != '\0' &&
                 append_id(out->order, sizeof(out->order), plan.ranks[i].gpu_id);
        /* then the granted GPUs no rank took, in Slurm's order */
        for (char *save = NULL, *id = strtok_r(granted, ",", &save); ok && id;
             id = strtok_r(NULL, ",", &save))
            ok = append_id(out->order, sizeof(out->order), id);
        /* a permutation of what Slurm granted, or nothing */
        if (!ok || count_ids(out->order) != ngranted)
            out->order[0] = '\0';
    }
    task_nic(&plan, idx, &out->nic);
    if (plan.ranks[idx].cpus != NULL)
        snprintf(out->cpus, sizeof(out->cpus), "%s", plan.ranks[idx].cpus);
    accel_node_plan_free(&plan);
    return true;
}
