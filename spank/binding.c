/*
 * binding.c: CPU binding where Slurm has not bound (DESIGN decision 7).
 *
 * With task/affinity Slurm binds a task by itself only when the step's CPUs
 * match its tasks (auto binding), or when the user asks (--cpu-bind).  The
 * common GPU case, 8 tasks on a whole 112-core node, gets every task on all
 * 112 CPUs: data loaders and NCCL's proxy threads then wander across sockets.
 * Here such a task is bound to the CPUs local to its GPU, within what it may
 * use already.  Slurm's own choices win: a task bound apart from the others
 * (SLURM_CPU_BIND_LIST with different masks) or a user's --cpu-bind=none is
 * left alone.  slurm_spank_task_init runs in the task's process just before
 * exec, as the job user, so sched_setaffinity(0) binds exactly that task.
 */
#include <string.h>

#include "plugin.h"

/* True when Slurm put every task of the node on the same CPUs and the user
 * did not ask for a binding of their own. */
static bool slurm_left_unbound(spank_t sp)
{
    char type[256], list[4096];
    const char *first, *comma;
    size_t n;

    if (spank_getenv(sp, "SLURM_CPU_BIND_TYPE", type, sizeof(type)) != ESPANK_SUCCESS)
        return true; /* no task/affinity: nobody bound anything */
    if (strstr(type, "none") != NULL)
        return false; /* --cpu-bind=none: the user's word */
    if (spank_getenv(sp, "SLURM_CPU_BIND_LIST", list, sizeof(list)) != ESPANK_SUCCESS ||
        list[0] == '\0')
        return true;
    /* one mask per local task: all equal = not bound apart */
    first = list;
    comma = strchr(first, ',');
    n = comma ? (size_t)(comma - first) : strlen(first);
    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len != n || strncmp(p, first, n) != 0)
            return false;
        p += len + (end != NULL);
    }
    return true;
}

void plugin_bind_cpus(spank_t sp, const char *cpus, uint32_t rank)
{
    struct accel_error err;

    if (cpus == NULL || cpus[0] == '\0' || !slurm_left_unbound(sp))
        return;
    accel_error_clear(&err);
    if (accel_topo_bind_cpus(cpus, &err) != ACCEL_OK)
        slurm_debug(PLUGIN_NAME ": rank %u: not bound: %s", rank, err.msg);
}
