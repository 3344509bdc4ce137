/*
 * nccl_int.h: what the nccl backend offers besides its constructor
 * (declared in comm_int.h): the unique-id exchange on its own (nccl_boot.c),
 * so that it is tested on machines without a GPU, and a few CUDA helpers
 * (nccl_dev.c) for the GPU tests
 * and bench/nccl_bench.c, which are built by the Makefile without the CUDA
 * include path.  Nothing here needs nccl.h or cuda_runtime.h to be included.
 *
 * Built only where ACCEL_HAVE_NCCL is defined (CUDA toolkit with NCCL found,
 * NO_CUDA unset); callers guard their use with the same macro.
 */
#ifndef ACCEL_NCCL_INT_H
#define ACCEL_NCCL_INT_H

#include <stddef.h>

#include "accel/err.h"
#include "accel/store.h"

#ifdef ACCEL_HAVE_NCCL

/* Bytes of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES; nccl.c checks they agree). */
#define ACCEL_NCCL_ID_BYTES 128

/* Store keys below a communicator's prefix (c->prefix, "c0/"):
 *   <prefix>nccl/id      rank 0's ncclUniqueId (128 bytes), or "!" and the
 *                        reason rank 0 failed before it had one
 *   <prefix>nccl/failed  count of ranks whose init failed (accel_store_add)
 *   <prefix>nccl/why     "rank R of W: ..." of the last rank that failed */

/* ncclGetUniqueId into out (starts NCCL's bootstrap root thread in this
 * process, which must then live until every rank has initialised).  Needs no
 * GPU.  Errors: ACCEL_EIO with NCCL's message. */
enum accel_err comm__nccl_unique_id(unsigned char out[ACCEL_NCCL_ID_BYTES],
                                    struct accel_error *err) ACCEL_WUR;

/* Rank 0 creates the id and sets <prefix>nccl/id; every other rank waits for
 * that key (bounded by the store client's timeout) and copies it into id.
 * Errors: ACCEL_EPEER (rank 0 published a failure instead of an id: its
 * reason is in the message), ACCEL_EIO (a value that is not an id), and the
 * store's errors (ACCEL_ETIMEDOUT, ...). */
enum accel_err comm__nccl_exchange_id(struct accel_store *s, const char *prefix, unsigned rank,
                                      unsigned world, unsigned char id[ACCEL_NCCL_ID_BYTES],
                                      struct accel_error *err) ACCEL_WUR;

/* Number of CUDA devices this process sees (cudaGetDeviceCount); 0 when there
 * is none or no usable driver, with CUDA's reason in why (may be NULL). */
int comm__nccl_device_count(char *why, size_t why_len);

/* NCCL_VERSION_CODE of the library loaded at run time (22809 for 2.28.9);
 * 0 if ncclGetVersion fails. */
int comm__nccl_version(void);

/* Device memory on the current device for tests and benchmarks: cudaMalloc,
 * cudaFree (NULL allowed), cudaMemcpy in any direction (cudaMemcpyDefault)
 * and cudaMemset, both complete on return (they wait on the legacy default
 * stream, without a deadline: not for use where a peer may be dead).
 * Errors: ACCEL_ENOMEM, ACCEL_EIO. */
enum accel_err comm__nccl_dev_alloc(void **p, size_t bytes, struct accel_error *err) ACCEL_WUR;
void comm__nccl_dev_free(void *p);
enum accel_err comm__nccl_copy(void *dst, const void *src, size_t bytes,
                               struct accel_error *err) ACCEL_WUR;
enum accel_err comm__nccl_fill(void *p, int byte, size_t bytes, struct accel_error *err) ACCEL_WUR;

#endif
#endif
