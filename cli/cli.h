/*
 * cli.h: the `accelrun` command's subcommands and their shared helpers.
 * Each subcommand lives in its own file and returns the process exit code.
 */
#ifndef ACCELRUN_CLI_H
#define ACCELRUN_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "accel/config.h"
#include "accel/diag.h"
#include "accel/site.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FINDINGS 1 /* the config has errors */
#define CLI_EXIT_USAGE 2    /* bad command line, unreadable file */

int cli_check(int argc, char **argv);
int cli_env(int argc, char **argv);
int cli_topo(int argc, char **argv);
int cli_launch(int argc, char **argv);
int cli_ckpt(int argc, char **argv);
int cli_preflight(int argc, char **argv);

struct accel_pf_opts;
/* Runs the preflight on this machine with `pf`, records it under record_dir
 * (NULL: no record; job NULL: $SLURM_JOB_ID, else local-<time>-<pid>),
 * prints the table (or JSON) to `out`; returns CLI_EXIT_FINDINGS on a FAIL.
 * `accelrun launch --preflight` calls it too. */
int cli_preflight_run(const struct accel_pf_opts *pf, const char *record_dir, const char *job,
                      bool json, FILE *out);

/* `accelrun preflight --task`: this task's part of a job's preflight
 * (cli/preflight_job.c); rank 0 prints the table.  0: start the program. */
int cli_preflight_job(const struct accel_pf_opts *given, const char *record_dir, bool full);

/* Prints findings as "file:line:col: severity: key: message" lines. */
void cli_print_diags(const struct accel_diags *d, FILE *out);

/* Prints findings as {"findings":[...]} (cJSON). */
int cli_print_diags_json(const struct accel_diags *d, FILE *out);

/* Parses an unsigned decimal option value within [lo, hi]; prints the error
 * naming the option and returns false when it is not one. */
bool cli_parse_uint(const char *opt, const char *text, unsigned long lo, unsigned long hi,
                    unsigned long *out);

/* The options every config-reading command shares, for getopt_long tables:
 * --accelerate-version V ('V') and --site FILE ('s'). */
#define CLI_SHARED_OPTIONS                                                                         \
    {"accelerate-version", required_argument, NULL, 'V'},                                          \
    {                                                                                              \
        "site", required_argument, NULL, 's'                                                       \
    }

/* Handles one of CLI_SHARED_OPTIONS: returns 1 when `c` was one, 0 when it
 * was not, -1 for a bad value (the error is printed). */
int cli_shared_option(int c, const char *arg, unsigned *version, const char **site);

/* A subcommand's command line, read one option at a time by
 * cli_next_option (getopt_long underneath, so optarg and optind are its). */
struct cli_getopt {
    int argc;
    char **argv;
    char *prog;                 /* argv[0] while parsing: getopt's own messages name it */
    const char *optstring;      /* getopt_long's ("h", "+hn:", ...) */
    const struct option *table; /* getopt_long's, {NULL, 0, NULL, 0}-terminated */
    const char *usage;          /* printed by --help (stdout) and after a bad option (stderr) */
    unsigned *version;          /* not NULL: CLI_SHARED_OPTIONS are handled here, */
    const char **site;          /* into *version and *site */
    bool started;
};

#define CLI_OPT_END (-1)  /* no option left: argv[optind] is the first operand */
#define CLI_OPT_HELP (-2) /* -h/--help: the usage went to stdout */
#define CLI_OPT_BAD (-3)  /* an unknown option, a missing or bad value: said on stderr */

/* The next of the subcommand's own options (the short option's character,
 * the long option's val), optarg its value; or a CLI_OPT_* code.  The first
 * call starts from argv[1]. */
int cli_next_option(struct cli_getopt *g);

/* A config read as `check` and `env` read it: the --site file, then FILE. */
struct cli_config {
    struct accel_site site;
    struct accel_cfg cfg;
    struct accel_diags diags; /* FILE's findings, sorted, not printed */
    enum accel_err rc;        /* how reading FILE went */
    bool loaded;              /* the above are set (cli_config_free frees them) */
};

/* Loads site_path (NULL: none; its findings, when it fails, are printed to
 * `out`, as JSON with `json`) and then `file` with `copts` (copts->site set
 * here).  Returns CLI_EXIT_OK once FILE was read, well or not (c->rc), else
 * the site file's exit status.  cli_config_free(c) frees c in both cases. */
int cli_config_load(struct cli_config *c, const char *file, const char *site_path,
                    struct accel_cfg_opts *copts, bool json, FILE *out);
void cli_config_free(struct cli_config *c);

/* Loads --site FILE (if given) for `version`; on failure prints the findings
 * and a summary to `out`.  Returns a CLI_EXIT_* status. */
int cli_load_site(const char *path, unsigned version, struct accel_site *site, bool json,
                  FILE *out);

/* The exit status for a load result: 2 for unreadable files, 1 for findings. */
int cli_exit_status(enum accel_err rc);

/* "file: N errors, N warnings" */
void cli_print_summary(const char *file, const struct accel_diags *d, FILE *out);

/* The usage text of a subcommand, also printed by --help. */
extern const char cli_check_usage[];
extern const char cli_env_usage[];
extern const char cli_topo_usage[];
extern const char cli_launch_usage[];
extern const char cli_ckpt_usage[];
extern const char cli_preflight_usage[];

#endif
