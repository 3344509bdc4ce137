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
    struct accel_site site;
    struct accel_diags d;
    struct accel_cfg cfg;
    struct accel_error err;
    bool json = false;
    unsigned long n;
    enum accel_err rc;
    int c, status;

    argv[0] = prog_name; /* getopt's own messages say "accelrun check: ..." */
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int shared = cli_shared_option(c, optarg, &copts.version, &site_path);
        if (shared < 0)
            return CLI_EXIT_USAGE;
        if (shared > 0)
            continue;
        switch (c) {
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
        case 'h':
            fputs(cli_check_usage, stdout);
            return CLI_EXIT_OK;
        default:
            fputs(cli_check_usage, stderr);
            return CLI_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "accelrun check: expected one config FILE\n\n%s", cli_check_usage);
        return CLI_EXIT_USAGE;
    }
    status = cli_load_site(site_path, copts.version, &site, json, stdout);
    if (status != CLI_EXIT_OK)
        return status;
    copts.site = site_path ? &site : NULL;
    accel_diags_init(&d);
    accel_error_clear(&err);
    rc = accel_cfg_load(&cfg, argv[optind], &copts, &d, &err);
    accel_diags_sort(&d);
    if (json)
        cli_print_diags_json(&d, stdout);
    else
        cli_print_diags(&d, stdout);
    status = cli_exit_status(rc);
    if (rc == ACCEL_OK && !json)
        printf("%s: ok (%s, %zu warning%s)\n", argv[optind],
               cfg.sagemaker ? "a SageMaker config" : cfg.dist_name, d.warnings,
               d.warnings == 1 ? "" : "s");
    else if (rc != ACCEL_OK && !json)
        cli_print_summary(argv[optind], &d, stdout);
    accel_cfg_free(&cfg);
    accel_diags_free(&d);
    accel_site_free(&site);
    return status;
}
