/*
 * main.c: `accelrun`, the command-line front end.  It parses the command,
 * installs a stderr logger and hands over to one file per subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "accel/log.h"
#include "cli.h"

static const char usage[] =
    "usage: accelrun <command> [options]\n"
    "\n"
    "Hugging Face Accelerate configs as the launch itself: check a config before it\n"
    "waits in a queue, and give every process exactly the environment\n"
    "`accelerate launch` would give it (on Slurm through the accelrun.so SPANK plugin).\n"
    "\n"
    "commands:\n"
    "  check FILE   validate a config: schema of a given accelerate version, types,\n"
    "               cross-field rules, site policy, cluster fit; all findings at once\n"
    "  env FILE     print the environment of one process (or of one node) for a layout\n"
    "  launch       start this node's processes of a job, each with its environment\n"
    "               and place (GPU, NIC, CPUs); rank-prefixed output, failure handling\n"
    "  topo         show the placement of a node's ranks (GPU, NUMA, CPUs, NIC) and the\n"
    "               switch order of a job's nodes\n"
    "  ckpt         list, show, verify and consolidate sharded checkpoints (ls, show,\n"
    "               verify, consolidate into the Hugging Face safetensors layout)\n"
    "  preflight FILE\n"
    "               check this machine before a job runs: versions of the job's Python\n"
    "               and GPUs, the config against the installed accelerate, imports,\n"
    "               GPUs and precision, network names; one PASS/WARN/FAIL table\n"
    "  help         this text; `accelrun COMMAND --help` for a command\n"
    "  version      print the version\n"
    "\n"
    "Exit status: 0 success, 1 the config (or checkpoint) has errors, 2 usage or file\n"
    "problems.\n"
    "Docs: docs/accelrun-check.md, docs/accelrun-env.md, docs/accelrun-topo.md,\n"
    "      docs/accelrun-launch.md, docs/accelrun-ckpt.md, docs/preflight.md,\n"
    "      docs/spank-plugin.md, docs/config-site.md, docs/differences.md\n";

static void log_stderr(void *ctx, enum accel_log_level level, const char *line)
{
    (void)ctx;
    if (level >= ACCEL_LOG_WARN)
        fprintf(stderr, "accelrun: %s\n", line);
}

int main(int argc, char **argv)
{
    const char *cmd;

    accel_log_set(log_stderr, NULL);
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    cmd = argv[1];
    if (strcmp(cmd, "check") == 0)
        return cli_check(argc - 1, argv + 1);
    if (strcmp(cmd, "env") == 0)
        return cli_env(argc - 1, argv + 1);
    if (strcmp(cmd, "launch") == 0)
        return cli_launch(argc - 1, argv + 1);
    if (strcmp(cmd, "topo") == 0)
        return cli_topo(argc - 1, argv + 1);
    if (strcmp(cmd, "ckpt") == 0)
        return cli_ckpt(argc - 1, argv + 1);
    if (strcmp(cmd, "preflight") == 0)
        return cli_preflight(argc - 1, argv + 1);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        char v[32];
        accel_version_format(ACCEL_VERSION_NEWEST, v, sizeof(v));
        printf("accelrun 0.1.0 (accelerate schema 1.0.0 to %s)\n", v);
        return CLI_EXIT_OK;
    }
    fprintf(stderr, "accelrun: unknown command '%s'\n\n%s", cmd, usage);
    return CLI_EXIT_USAGE;
}
