/*
 * nccl_impl.h: what nccl.c (the communicators) and nccl_boot.c (the store's
 * part of init, NCCL's results in words) share.  Private to core/comm, and
 * unlike nccl_int.h it needs nccl.h.
 */
#ifndef ACCEL_NCCL_IMPL_H
#define ACCEL_NCCL_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include <nccl.h>

#include "accel/err.h"
#include "accel/store.h"

/* The accel_err of an NCCL result (a dead peer or network: ACCEL_EPEER). */
enum accel_err comm__nccl_code(ncclResult_t r);

/* "ncclRemoteError (remote process exited or there was a network error):
 * <NCCL's last error of comm, which may be NULL>" into buf; returns buf. */
const char *comm__nccl_why(ncclResult_t r, ncclComm_t comm, char *buf, size_t n);

/* Where ranks tell each other that their init failed (store keys below the
 * communicator's prefix, nccl_int.h); store == NULL: nowhere. */
struct comm__nccl_board {
    struct accel_store *store;
    char failed_key[160];
    char why_key[160];
    double next_check; /* CLOCK_MONOTONIC seconds */
};

/* The board of keys <prefix><sub>failed and <prefix><sub>why on s. */
void comm__nccl_board_init(struct comm__nccl_board *b, struct accel_store *s, const char *prefix,
                           const char *sub);
/* Tells the other ranks that this one failed, with msg as the reason. */
void comm__nccl_board_post(struct comm__nccl_board *b, const char *msg);
/* True when some rank posted a failure, its reason then in why. */
bool comm__nccl_board_failed(struct comm__nccl_board *b, char *why, size_t n);

/* Rank 0 failed before it had an id: "!" and the reason under the id key,
 * so that the other ranks fail at once instead of at their deadline. */
void comm__nccl_publish_id_failure(struct accel_store *s, const char *prefix, const char *msg);

#endif
