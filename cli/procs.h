/*
 * procs.h: the process group of `accelrun launch`: start the ranks of one
 * node, relay their output line by line with a rank prefix, forward
 * signals, and stop everyone when one rank fails.
 */
#ifndef ACCELRUN_PROCS_H
#define ACCELRUN_PROCS_H

#include <stdbool.h>

struct procs_opts {
    unsigned n;              /* local ranks, >= 1 */
    unsigned first_rank;     /* global rank of local rank 0 (output prefixes, log names) */
    char *const *argv;       /* the command, argv[0] searched in each rank's PATH */
    char **const *envp;      /* [n] each rank's whole environment */
    const char *const *cpus; /* [n] CPU list to bind rank i to, or NULL; the array may be NULL */
    const char *tee_dir;     /* a log per rank (rank-R.log, stdout and stderr), or NULL */
    bool main_only;          /* only rank 0 to the terminal (others in their logs) */
    double grace_s;          /* SIGTERM → SIGKILL delay when stopping ranks */
};

/* Runs the ranks until all have ended and nothing they started is left (what
 * outlives them is stopped).  Returns the launcher's exit status: 0 when
 * every rank exited 0; else the first failed rank's exit code (128 + signal
 * for a signal), after the others were stopped, with a one-line summary on
 * stderr; 128 + signal when the launcher itself was interrupted (SIGINT,
 * SIGTERM, SIGHUP are forwarded to every rank's process group), 141 when its
 * output was closed (the ranks are stopped); 127 when a rank could not be
 * started (pipe, fork: the others are stopped); 2, with no rank started, when a
 * --tee log cannot be opened (the directory is created when missing; a link,
 * FIFO or another's file in a log's place is refused) or the hard open-file
 * limit is below what n ranks need (a soft one is raised, and the ranks get it
 * back); 1 when signals cannot be watched.  Every error is one line on stderr
 * saying what to do. */
int procs_run(const struct procs_opts *o);

#endif
