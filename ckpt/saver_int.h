/*
 * saver_int.h: what the files of a saver share (saver.c: open, saving,
 * the writer, close; saver_tier.c: the node-local tier and the copy up;
 * saver_resume.c: resuming).  accel/ckpt.h's "savers" says what a saver
 * does; ckpt_int.h holds what all of ckpt/ shares.
 */
#ifndef ACCEL_CKPT_SAVER_INT_H
#define ACCEL_CKPT_SAVER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "ckpt_int.h"

enum wstate {
    W_IDLE,    /* no save in flight */
    W_RUNNING, /* the writer has it */
    W_DONE,    /* written (and copied up): poll commits it */
    W_FAILED,  /* sv->werr says why */
};

/* The save in flight: copies of the request, data in the staging memory. */
struct job {
    unsigned long step;
    struct accel_ckpt_kv *meta; /* keys and values owned */
    size_t nmeta;
    struct accel_ckpt_piece *p; /* names owned; data into staging or copies (deferred:
                                   the caller's until the writer copied it) */
    size_t n;
    bool deferred; /* the writer copies the pieces first */
};

/* A buffer of the caller's memory functions, reused. */
struct mem {
    void *p;
    size_t cap;
};

struct accel_ckpt_saver {
    struct accel_ckpt_saver_opts o; /* root, local, owner owned */
    char *local;             /* the local tier: o.local/<the root's name>-<hash>; NULL: none */
    struct ckpt__origin org; /* recorded in every rank file this saver writes */
    struct accel_ckpt_mem mem;
    int lock; /* rank 0: the root's lock */
    pthread_t thread;
    bool thread_up;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool quit, queued;  /* under mu */
    unsigned long tidy; /* under mu: a committed step whose clean-up the writer owes */
    enum wstate state;  /* under mu */
    bool staged;        /* under mu: the job's pieces are in staging (or copies) */
    struct accel_error werr;
    bool werr_told; /* werr is on stderr already (ckpt__tell) */
    struct job job;
    struct mem staging, copies; /* the caller's (accel_ckpt_saver_staging) and ours */
};

/* saver.c: collective steps over the caller's min (ckpt.h, "savers") */

/* Every rank's outcome, through the min: *all true when every rank's was
 * ACCEL_OK.  A rank whose own `mine` failed tells why first (ckpt__tell)
 * and keeps that error in err; otherwise err gets the agreement's. */
enum accel_err ckpt__sv_agree(struct accel_ckpt_saver *sv, enum accel_err mine, bool *all,
                              struct accel_error *err);

/* rank 0's value on every rank */
enum accel_err ckpt__sv_from_rank0(struct accel_ckpt_saver *sv, uint64_t v, uint64_t *out,
                                   struct accel_error *err);

/* The newest step under root whose step directory holds `file` (a
 * committed checkpoint's manifest, or this rank's file), 0 when none. */
unsigned long ckpt__sv_newest_with(const char *root, const char *file);

/* Rank 0 commits `step` in the root (the others wait in the agreement);
 * then `latest`, the root's clean-up, every rank's local tier. */
enum accel_err ckpt__sv_commit_step(struct accel_ckpt_saver *sv, unsigned long step,
                                    const struct accel_ckpt_kv *meta, size_t nmeta,
                                    struct accel_error *err);

/* saver_tier.c */

/* The local tier of root under local (LOCAL/<root's name>-<XXH3 of it>);
 * NULL when out of memory. */
char *ckpt__sv_tier_path(const char *local, const char *root);

/* The local tier made, a directory of this user's own. */
enum accel_err ckpt__sv_make_tier(const struct accel_ckpt_saver *sv, struct accel_error *err);

/* Copies this rank's file of `step` from the local tier to the root's step
 * directory (at o.copy_rate), checked piece by piece as it goes and read
 * back; *local_bad when the local copy itself is damaged. */
enum accel_err ckpt__sv_copy_up(struct accel_ckpt_saver *sv, unsigned long step, bool *local_bad,
                                struct accel_error *err);

/* Removes the local tier's steps older than step but the keep_local - 1
 * newest, and, with `past`, those newer than step. */
void ckpt__sv_trim_local(struct accel_ckpt_saver *sv, unsigned long step, bool past);

#endif
