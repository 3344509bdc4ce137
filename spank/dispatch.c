/*
 * dispatch.c: the callbacks every context receives (slurm_spank_init and
 * slurm_spank_exit), dispatched on spank_context().  This is the only file with the
 * SPANK_PLUGIN declaration.
 */
#include <slurm/spank.h>

#include "accel/log.h"
#include "plugin.h"

SPANK_PLUGIN(accelrun, 1)

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    plugin_state_reset();
    plugin_log_init();
    /* A bad plugstack argument must not break jobs that do not use
     * --accel-config: it is recorded and raised only for those that do. */
    plugin_args_parse(&plugin.args, ac, av);
    switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR:
        if (plugin_options_register(sp) != 0)
            return -1;
        return plugin_srun_init(sp);
    case S_CTX_REMOTE:
        if (plugin_options_register(sp) != 0)
            return -1;
        return plugin_stepd_init(sp);
    case S_CTX_SLURMD:
    case S_CTX_JOB_SCRIPT:
    case S_CTX_ERROR:
        break;
    }
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_context() == S_CTX_REMOTE)
        plugin_stepd_exit(sp);
    plugin_state_reset();
    return 0;
}
