/*
 * options.c: the --accel-config and --accel-preflight[=full] options, registered with
 * spank_option_register in every context (the static spank_options table is
 * ignored by sbatch and salloc).  The callback runs several times: from the
 * environment first, then from the command line, and twice in slurmstepd;
 * the last value wins.
 */
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

static int accel_config_cb(int val, const char *optarg, int remote)
{
    char *copy;

    (void)val;
    (void)remote;
    if (optarg == NULL || optarg[0] == '\0' || strlen(optarg) >= MAX_PATH_ARG) {
        slurm_error(PLUGIN_NAME ": --accel-config needs a file name (at most %d bytes)",
                    MAX_PATH_ARG - 1);
        return -1;
    }
    copy = strdup(optarg);
    if (copy == NULL)
        return -1;
    free(plugin.config_path);
    plugin.config_path = copy;
    return 0;
}

static int accel_preflight_cb(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    if (optarg == NULL || optarg[0] == '\0') {
        plugin.preflight = 1;
    } else if (strcmp(optarg, "full") == 0) {
        plugin.preflight = 2;
    } else {
        slurm_error(PLUGIN_NAME ": --accel-preflight takes no value or =full, not '%.64s'", optarg);
        return -1;
    }
    return 0;
}

/* spank_option has non-const char pointers; keep the strings in arrays. */
static char opt_name[] = "accel-config";
static char opt_arg[] = "FILE";
static char opt_usage[] =
    "[accelrun] Run every task with the environment `accelerate launch` would give it for this "
    "Accelerate config (YAML or JSON); a relative path is taken from the job's working directory";

static char pf_name[] = "accel-preflight";
static char pf_arg[] = "full";
static char pf_usage[] =
    "[accelrun] Before the program starts, check every node against the --accel-config file "
    "(the job's Python and its versions, the config against the accelerate installed there, "
    "imports, GPUs, network names, the rendezvous); =full adds an all_reduce across all tasks; "
    "on a FAIL nothing starts";

static struct spank_option options[] = {
    {opt_name, opt_arg, opt_usage, 1, 0, accel_config_cb},
    {pf_name, pf_arg, pf_usage, 2, 0, accel_preflight_cb},
};

int plugin_options_register(spank_t sp)
{
    for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
        spank_err_t rc = spank_option_register(sp, &options[i]);
        if (rc != ESPANK_SUCCESS) {
            slurm_error(PLUGIN_NAME ": couldn't register --%s: %s", options[i].name,
                        spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}
