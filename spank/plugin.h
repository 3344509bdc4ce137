/*
 * plugin.h: state and functions shared by the files of the accelrun SPANK
 * plugin.  One file per Slurm context (pyxis's shape): dispatch.c holds the
 * callbacks every context gets and switches on spank_context(); options.c
 * the option table; args.c the plugstack.conf arguments; stepd.c the remote
 * (slurmstepd) callbacks; srun.c the local and allocator ones.
 *
 * Privileges: slurmstepd runs as root.  The config file and the site file
 * are read only in user_init, where Slurm has switched the effective uid to
 * the job's user (checked), never as root.  User errors are kept and raised
 * from task_init, so srun exits non-zero and no node is drained.
 */
#ifndef ACCELRUN_SPANK_PLUGIN_H
#define ACCELRUN_SPANK_PLUGIN_H

#include <slurm/spank.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/config.h"
#include "accel/site.h"
#include "accel/topo.h"

#define PLUGIN_NAME "accelrun"
#define MAX_PATH_ARG 4096
#define MAX_ERROR_TEXT 8192

struct plugin_args {
    char site[MAX_PATH_ARG];          /* site=FILE, "" = none */
    char topology[MAX_PATH_ARG];      /* topology=FILE, "" = next to slurm.conf */
    char topology_xml[MAX_PATH_ARG];  /* topology_xml=FILE: hwloc XML instead of discovery */
    unsigned port_base;               /* port_base= */
    unsigned port_range;              /* port_range= */
    bool ports_given;                 /* either was on the plugstack line: it beats the site file */
    char accelrun[MAX_PATH_ARG];      /* accelrun=FILE: the preflight's helper, "" = built in */
    char preflight_dir[MAX_PATH_ARG]; /* preflight_dir=DIR: version records, "" = none */
    char error[512];                  /* a bad argument: "" when all were fine */
};

/* Everything the plugin keeps between callbacks of one process. */
struct plugin_state {
    struct plugin_args args;
    char *config_path;             /* --accel-config, last value wins; NULL = not used */
    char config_abs[MAX_PATH_ARG]; /* its absolute path (user_init, as the user) */
    int preflight;                 /* --accel-preflight: 0 no, 1 yes, 2 =full */
    bool skip_step;                /* batch, extern or interactive step */
    bool loaded;                   /* cfg and site are valid */
    struct accel_site site;
    struct accel_cfg cfg;
    struct accel_topo topo; /* this node, for GPU order (placement.c) */
    bool topo_loaded;
    size_t nnodes;     /* nodes of the step */
    size_t *node_rank; /* [nnodes]: ring place (GROUP_RANK) of Slurm's node i */
    char master_addr[256];
    unsigned master_port;
    char error[MAX_ERROR_TEXT];    /* user error to raise in task_init, "" = none */
    char warnings[MAX_ERROR_TEXT]; /* warnings rank 0 prints once, "" = none */
};

extern struct plugin_state plugin;

/* args.c: parses plugstack.conf arguments strictly; a bad one is recorded in
 * args->error (and logged), never fails the plugin. */
void plugin_args_parse(struct plugin_args *args, int ac, char **av);

/* order.c: the step's node order from Slurm's topology.conf (user_init),
 * and a node's GROUP_RANK and first rank (task_init). */
enum accel_err plugin_order_load(spank_t sp, const char *nodelist, struct accel_error *err);
enum accel_err plugin_order_rank(const char *tasks_per_node, uint32_t node_id, uint32_t *group_rank,
                                 uint32_t *first_rank, struct accel_error *err);

/* placement.c: loads this node's topology (user_init, steps with GPUs only);
 * then, in task_init, the task's place on it.  false = no plan (keep
 * everything as Slurm set it). */
struct plugin_placement {
    char order[4096];           /* CUDA_VISIBLE_DEVICES in plan order; "" = keep Slurm's */
    struct accel_rank_plan nic; /* the NIC variable (cuda_visible_devices unused) */
    char cpus[4096];            /* CPUs local to the task's GPU as a list; "" = unknown */
};
void plugin_placement_load(spank_t sp);
bool plugin_placement_task(spank_t sp, unsigned local_count, unsigned local_id,
                           struct plugin_placement *out);

/* binding.c: binds the calling task to `cpus` (a list) where Slurm left
 * every task of the node on the same CPUs and the user did not say
 * --cpu-bind=none; never widens, never fails the task. */
void plugin_bind_cpus(spank_t sp, const char *cpus, uint32_t rank);

/* options.c */
int plugin_options_register(spank_t sp);

/* preflight.c: runs `accelrun preflight --task` for this task (task_init,
 * the environment complete) and relays its output; 0 = start the program. */
int plugin_preflight_task(spank_t sp, uint32_t rank);

/* stepd.c: remote context */
int plugin_stepd_init(spank_t sp);
int plugin_stepd_exit(spank_t sp);

/* srun.c: local and allocator context */
int plugin_srun_init(spank_t sp);

/* Installs a log hook that sends library messages to Slurm's logger. */
void plugin_log_init(void);

/* Resets the state (at init and exit). */
void plugin_state_reset(void);

#endif
