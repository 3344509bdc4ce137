/*
 * pf_int.h: what the preflight's files share (core/preflight/).
 */
#ifndef ACCEL_PF_INT_H
#define ACCEL_PF_INT_H

#include <stdbool.h>
#include <sys/types.h>

#include "accel/config.h"
#include "accel/preflight.h"

/* A child process whose stdout and stderr (the tail, for messages) and fd 3
 * (what it reports: JSON) are read until it exits or the deadline passes. */
#define PF_OUT_MAX (256u << 10) /* fd 3 */
#define PF_TAIL 400             /* the last bytes of stdout and stderr */

struct pf__proc {
    pid_t pid;
    int fd_out, fd_rep; /* -1 once at end of file */
    char *rep;          /* fd 3's bytes, NUL-terminated (accel_malloc) */
    size_t rep_len;
    bool rep_over; /* more than PF_OUT_MAX */
    char tail[PF_TAIL + 1];
    size_t tail_len;
    int status; /* waitpid's, when done */
    bool done, timed_out;
    char spawn_err[160]; /* why it did not start; "" when it did */
};

/* Starts argv[0] (a path) with the caller's environment, in a process group
 * of its own, stdin from /dev/null.  Never fails: a child that could not
 * start is done, with spawn_err set. */
void pf__start(struct pf__proc *p, const char *const argv[]);

/* Reads every started process until all have exited or `deadline`
 * (accel_now) has passed; those still running then are killed (their
 * process group, SIGKILL) and marked timed_out.  Reaps them all. */
void pf__wait_all(struct pf__proc *procs, size_t n, double deadline);

/* Frees p->rep. */
void pf__proc_free(struct pf__proc *p);

/* "exit status 3", "killed by signal 9", "timed out after 60 s", or the
 * spawn error, with the output's last line: for a row's reason. */
void pf__proc_why(const struct pf__proc *p, unsigned timeout_ms, char *buf, size_t size);

/* The Python program (scripts.c). */
extern const char pf__probe_py[];

/* NVML by dlopen: fills v->driver and the visible GPUs (CUDA_VISIBLE_DEVICES
 * honoured).  false with `why` when there is no driver to ask. */
bool pf__nvml(struct accel_pf_versions *v, char *why, size_t size);

/* An accelerate version as the schema's number: "1.15.0" -> 11500,
 * "0.32.1" -> 3201, "1.16.0.dev0" -> 11600; false for text that is not one. */
bool pf__version_number(const char *text, unsigned *out);

/* The hardware and network rows, from the loaded config (NULL when it did
 * not load) and this node's versions. */
void pf__check_hardware(struct accel_pf_node *node, const struct accel_cfg *cfg,
                        unsigned procs_per_node);
void pf__check_network(struct accel_pf_node *node);

/* A node's versions as a JSON object (malloc'd text), and back from a cJSON
 * object (const void *: cJSON stays out of this header); false when it is
 * not one. */
char *pf__versions_to_json(const struct accel_pf_versions *v);
bool pf__versions_from_json(struct accel_pf_versions *v, const void *json);

/* Letters, digits, '.', '_', '-': what host names, job ids and record
 * names are made of (report.c); a plain name is one or more of them. */
bool pf__plain_char(char c);
bool pf__plain_name(const char *s);

/* A fixed-size copy: always NUL-terminated, truncated to fit. */
void pf__copy(char *dst, size_t size, const char *src);

#endif
