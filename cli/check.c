/*
 * check.c: `accelrun check FILE` prints every finding about a config and
 * exits 1 when any is an error, so a broken config is caught before the job
 * waits in a queue.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

const char cli_check_usage[] =
    "usage: accelrun check FILE [--accelerate-version V] [--site FILE]\n"
    "                           [--nodes N --gpus-per-node G] [--json]\n"
    "\n"
    "Validate an accelerate config (YAML, or JSON as `accelerate config default`\n"
    "writes it) and print every finding as file:line:column: severity: key: message.\n"
    "\n"
    "  --accelerate-version V  check against accelerate V (1.0 ... 1.15, or latest;\n"
    "                          default latest): keys added later or removed since\n"
    "                          are errors that name the version and the replacement\n"
    "  --site FILE             apply the site policy (defaults, enforced keys)\n"
    "  --nodes N               the job's node count: num_machines must match\n"
    "  --gpus-per-node G       GPUs per node: processes per node must fit\n"
    "  --json                  print {\"findings\":[{severity,file,line,column,key,message}]}\n"
    "  -h, --help              this text\n"
    "\n"
    "Exit status: 0 no errors (warnings allowed), 1 errors, 2 usage or unreadable file.\n";

static char prog_name[] = "accelrun check";

int cli_check(int argc, char **argv)
{
    static const struct option opts[] = {CLI_SHARED_OPTIONS,
                                         {"nodes", required_argument, NULL, 'N'},
                                         {"gpus-per-node", required_argument, NULL, 'G'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct accel_cfg_opts copts = {0};
    const char *site_path = NULL;
    struct cli_getopt g = {argc, argv, prog_name, "h", opts, cli_check_usage};
    struct cli_config c;
    bool json = false;
    unsigned long n;
    int opt, status;

    g.version = &copts.version; /* CLI_SHARED_OPTIONS */
    g.site = &site_path;
    while ((opt = cli_next_option(&g)) >= 0) {
        switch (opt) {
        case 'N':
            if (!cli_parse_uint("--nodes", optarg, 1, 1u << 20, &n))
                return CLI_EXIT_USAGE;
            copts.nodes = (unsigned)n;
            break;
        case 'G':
            if (!cli_parse_uint("--gpus-per-node", optarg, 1, 4096, &n))
                return CLI_EXIT_USAGE;
            copts.gpus_per_node = (unsigned)n;
            break;
        case 'j':
            json = true;
            break;
        }
    }
    if (opt != CLI_OPT_END)
        return opt == CLI_OPT_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (optind != argc - 1) {
        fprintf(stderr, "accelrun check: expected one config FILE\n\n%s", cli_check_usage);
        return CLI_EXIT_USAGE;
    }
    status = cli_config_load(&c, argv[optind], site_path, &copts, json, stdout);
    if (status != CLI_EXIT_OK)
        return status;
    if (json)
        cli_print_diags_json(&c.diags, stdout);
    else
        cli_print_diags(&c.diags, stdout);
    status = cli_exit_status(c.rc);
    if (c.rc == ACCEL_OK && !json)
        printf("%s: ok (%s, %zu warning%s)\n", argv[optind],
               c.cfg.sagemaker ? "a SageMaker config" : c.cfg.dist_name, c.diags.warnings,
               c.diags.warnings == 1 ? "" : "s");
    else if (c.rc != ACCEL_OK && !json)
        cli_print_summary(argv[optind], &c.diags, stdout);
    cli_config_free(&c);
    return status;
}
