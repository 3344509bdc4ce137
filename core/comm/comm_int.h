/*
 * comm_int.h: what a collectives backend implements (core/comm only).
 *
 * comm.c checks the arguments every backend would check (NULL buffers with a
 * non-zero count, a root out of range, an unknown type, a communicator that
 * failed before) and counts of 0 (ACCEL_OK at once, except barrier), then
 * calls the backend.  A backend that fails sets c->failed; comm.c refuses
 * every later call but free.
 */
#ifndef ACCEL_COMM_INT_H
#define ACCEL_COMM_INT_H

#include "accel/comm.h"

struct accel_comm_ops {
    const char *name;
    enum accel_err (*all_reduce)(struct accel_comm *c, const void *send, void *recv, size_t count,
                                 enum accel_dtype t, enum accel_redop op, struct accel_error *err);
    enum accel_err (*reduce_scatter)(struct accel_comm *c, const void *send, void *recv,
                                     size_t recvcount, enum accel_dtype t, enum accel_redop op,
                                     struct accel_error *err);
    enum accel_err (*all_gather)(struct accel_comm *c, const void *send, void *recv,
                                 size_t sendcount, enum accel_dtype t, struct accel_error *err);
    enum accel_err (*broadcast)(struct accel_comm *c, const void *send, void *recv, size_t count,
                                enum accel_dtype t, unsigned root, struct accel_error *err);
    enum accel_err (*barrier)(struct accel_comm *c, struct accel_error *err);
    enum accel_err (*sync)(struct accel_comm *c, struct accel_error *err);
    /* *out is a new communicator of the same backend, or NULL for color < 0 */
    enum accel_err (*split)(struct accel_comm *c, int color, int key, struct accel_comm **out,
                            struct accel_error *err);
    void (*free)(struct accel_comm *c);          /* releases c->impl (aborting when c->failed) */
    void *(*stream)(const struct accel_comm *c); /* the cudaStream_t queued on; NULL = none */
};

struct accel_comm {
    const struct accel_comm_ops *ops;
    unsigned rank, size;
    double timeout_s;
    bool failed;
    struct accel_store *store; /* the caller's; valid during init and split */
    unsigned generation;       /* splits made from this communicator, for store key names */
    char prefix[64];           /* store key prefix unique to this communicator ("c0/", "c0.1.3/") */
    void *impl;                /* the backend's state */
};

/* Backend constructors: fill c->ops and c->impl (c's other fields are set). */
enum accel_err comm__socket_init(struct accel_comm *c, const struct accel_comm_opts *opts,
                                 struct accel_error *err);
#ifdef ACCEL_HAVE_NCCL
enum accel_err comm__nccl_init(struct accel_comm *c, const struct accel_comm_opts *opts,
                               struct accel_error *err);
#endif

#endif
