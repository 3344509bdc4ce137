/*
 * srun.c: local (srun) and allocator (sbatch, salloc) context.  The config
 * is checked where the tasks start (slurmstepd), with the user's identity
 * there; here the plugin only reports a broken plugstack.conf, at every
 * srun, so the administrator hears of it.
 */
#include "plugin.h"

int plugin_srun_init(spank_t sp)
{
    (void)sp;
    if (plugin.args.error[0] != '\0')
        slurm_error(PLUGIN_NAME ": %s; jobs using --accel-config will fail until it is fixed",
                    plugin.args.error);
    return 0;
}
