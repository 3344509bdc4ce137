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

bool plugin_placement_task(spank_t sp, unsigned local_count, unsigned local_id,
                           struct plugin_placement *out)
{
    struct accel_plan_req req = {local_count, NULL, false, NULL, false};
    struct accel_node_plan plan = {0, false, NULL};
    struct accel_error err;
    char granted[4096], physical[4096] = "";
    struct accel_rank_plan *ranks;
    struct accel_plan exported;
    unsigned ngranted, idx = local_id;
    bool shared;

    memset(out, 0, sizeof(*out));
    if (!plugin.topo_loaded || local_id >= local_count ||
        spank_getenv(sp, "CUDA_VISIBLE_DEVICES", granted, sizeof(granted)) != ESPANK_SUCCESS)
        return false;
    ngranted = accel_gpu_list_count(granted);
    if (ngranted == 0)
        return false;
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
        strcmp(physical, granted) != 0 && accel_gpu_list_count(physical) == ngranted) {
        req.local_ids = true;
        req.physical = physical;
    }
    accel_error_clear(&err);
    if (accel_topo_plan(&plugin.topo, &req, &plan, &err) != ACCEL_OK) {
        slurm_debug(PLUGIN_NAME ": no placement, Slurm's GPU order kept: %s", err.msg);
        return false;
    }
    /* the list in plan order (shared lists only), and the rank's NIC */
    ranks = calloc(plan.nranks, sizeof(*ranks));
    if (ranks != NULL && accel_node_plan_export(&plugin.topo, &plan, granted, ranks, plan.nranks,
                                                &exported, &err) == ACCEL_OK) {
        if (shared)
            memcpy(out->order, ranks[idx].cuda_visible_devices,
                   sizeof(ranks[idx].cuda_visible_devices));
        out->nic = ranks[idx];
        out->nic.cuda_visible_devices[0] = '\0';
    } else {
        slurm_debug(PLUGIN_NAME ": no NIC or GPU order: %s", ranks ? err.msg : "out of memory");
    }
    free(ranks);
    if (plan.ranks[idx].cpus != NULL)
        snprintf(out->cpus, sizeof(out->cpus), "%s", plan.ranks[idx].cpus);
    accel_node_plan_free(&plan);
    return true;
}
