/*
 * accel/comm.h: collectives over a communicator (DESIGN decision 8).
 *
 * Backends, one file each, chosen at init:
 *
 *   socket  CPU buffers; a pipelined, chunked ring over TCP.  The reduction
 *           order is fixed by (world size, count), so a result is bit-exact
 *           from run to run.  Always built.
 *   nccl    CUDA device buffers on a CUDA stream; built where the CUDA toolkit
 *           with NCCL is found (accel_comm_has_nccl tells).
 *
 * Every rank of the communicator calls the same operations in the same order
 * with the same counts, types and roots (as with MPI and NCCL).  socket calls
 * return when the operation is complete; nccl calls return once the operation
 * is queued on the stream (accel_comm_sync waits).  Counts are elements, any
 * value including 0.  socket: bf16 and fp16 are reduced in fp32 and rounded
 * once to nearest even.  nccl: as NCCL reduces them, which may round in the
 * 16-bit type at each hop, and ACCEL_AVG is ncclAvg, which scales each input
 * by 1/size in the type (exact for power-of-two sizes; for others a bias of
 * up to half an ulp of 1/size, 0.2% in bf16).  In place: pass the same pointer as send and recv
 * (for all_gather and reduce_scatter, the rank's own slice of the larger buffer, as NCCL defines
 * it).
 *
 * Failure: a peer that dies or closes makes every other rank's call fail with
 * ACCEL_EPEER within the timeout, the message naming the rank that failed
 * first where it is known ("rank 2 of 4: all_reduce: rank 3 (10.0.0.2:41234)
 * closed its connection"); a peer that stops answering gives ACCEL_ETIMEDOUT.
 * After an error the communicator only accepts accel_comm_free.
 *
 * Thread-safety: a communicator is used by one thread at a time (its
 * operations are ordered, as MPI's and NCCL's are).  Communicators that share
 * a store client (a split's children share their parent's, for init and for
 * the failure record) are too, since a store client is; communicators on
 * clients of their own may run in different threads at once.
 */
#ifndef ACCEL_COMM_H
#define ACCEL_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/dtype.h"
#include "accel/err.h"
#include "accel/store.h"

#ifdef __cplusplus
extern "C" {
#endif

enum accel_redop { ACCEL_SUM, ACCEL_AVG };

struct accel_comm;

/* Zeroed opts (or NULL) mean every default. */
struct accel_comm_opts {
    /* "socket" or "nccl"; NULL or "" = ACCELRUN_COMM, else nccl where built
     * and CUDA_VISIBLE_DEVICES is set and not empty, else socket */
    const char *backend;
    /* seconds: deadline of init and of each operation; 0 = ACCELRUN_TIMEOUT,
     * else 300 */
    double timeout_s;
    /* socket: the address to listen on and publish; NULL = the local
     * address of the route to MASTER_ADDR, else 127.0.0.1 */
    const char *ifaddr;
    /* socket: bytes of a pipeline chunk, 4096 to 64 MiB; 0 =
     * ACCELRUN_SOCKET_CHUNK, else 512 KiB */
    size_t chunk_bytes;
    int cuda_device;   /* nccl: the device to use; -1 = the current one */
    void *cuda_stream; /* nccl: cudaStream_t to queue on; NULL = a stream of the communicator */
    /* socket: the job nonce carried in the ring's hello (accel_store_nonce
     * of the job); a rank presenting another one is refused, ACCEL_ENONCE */
    uint64_t nonce;
};

/* Creates the communicator of `world` ranks, this one being `rank`, meeting
 * through `store` (the store stays the caller's and must outlive the
 * communicator's init; the socket backend keeps using it to report failures).
 * Errors: ACCEL_ETIMEDOUT, ACCEL_EPEER, ACCEL_ENONCE, ACCEL_EUNSUPPORTED (a
 * backend not built), ACCEL_EINVAL, ACCEL_EIO, ACCEL_ENOMEM. */
enum accel_err accel_comm_init(struct accel_comm **out, struct accel_store *store, unsigned rank,
                               unsigned world, const struct accel_comm_opts *opts,
                               struct accel_error *err) ACCEL_WUR;

/* Splits into communicators of the ranks that pass the same `color` (ranked
 * by `key`, then by rank), as MPI_Comm_split and ncclCommSplit do; a negative
 * color gives *out = NULL.  Collective over `c`. */
enum accel_err accel_comm_split(struct accel_comm *c, int color, int key, struct accel_comm **out,
                                struct accel_error *err) ACCEL_WUR;

/* The two-level split a hierarchical collective needs, from the layout the
 * launcher exported (RANK, LOCAL_RANK, LOCAL_WORLD_SIZE; the
 * plugin and `accelrun launch` number ranks contiguously per node, nodes in
 * switch order and local ranks in the node's topology plan): *node holds the
 * ranks of this node, ranked by LOCAL_RANK (NVLink / shared memory); *rail
 * holds local rank LOCAL_RANK of every node, ranked by node order (one NIC
 * rail).  `c` must be the job's communicator in RANK order.  Collective over
 * `c`.  Errors: ACCEL_EINVAL (a variable missing or malformed: the message
 * names it), ACCEL_ELAYOUT (ranks not contiguous per node, or a node whose
 * size is not LOCAL_WORLD_SIZE), and those of accel_comm_split. */
enum accel_err accel_comm_split_nodes(struct accel_comm *c, struct accel_comm **node,
                                      struct accel_comm **rail, struct accel_error *err) ACCEL_WUR;

unsigned accel_comm_rank(const struct accel_comm *c);
unsigned accel_comm_size(const struct accel_comm *c);
const char *accel_comm_backend(const struct accel_comm *c); /* "socket" or "nccl" */
bool accel_comm_has_nccl(void);
/* nccl: the cudaStream_t (as void *) the communicator queues its operations
 * on; a caller's kernels queued on it are ordered with the collectives
 * without a sync.  socket: NULL. */
void *accel_comm_cuda_stream(const struct accel_comm *c);

/* recv[i] = op over ranks of send[i], for i < count. */
enum accel_err accel_all_reduce(struct accel_comm *c, const void *send, void *recv, size_t count,
                                enum accel_dtype t, enum accel_redop op,
                                struct accel_error *err) ACCEL_WUR;

/* send holds size * recvcount elements; rank r receives the reduction of
 * slice r. */
enum accel_err accel_reduce_scatter(struct accel_comm *c, const void *send, void *recv,
                                    size_t recvcount, enum accel_dtype t, enum accel_redop op,
                                    struct accel_error *err) ACCEL_WUR;

/* recv holds size * sendcount elements; slice r is rank r's send. */
enum accel_err accel_all_gather(struct accel_comm *c, const void *send, void *recv,
                                size_t sendcount, enum accel_dtype t,
                                struct accel_error *err) ACCEL_WUR;

/* recv on every rank = send of `root` (send is read on root only). */
enum accel_err accel_broadcast(struct accel_comm *c, const void *send, void *recv, size_t count,
                               enum accel_dtype t, unsigned root,
                               struct accel_error *err) ACCEL_WUR;

enum accel_err accel_comm_barrier(struct accel_comm *c, struct accel_error *err) ACCEL_WUR;

/* nccl: waits for the operations queued so far (with the timeout; aborts the
 * communicator on timeout or on an asynchronous NCCL error).  socket: ACCEL_OK. */
enum accel_err accel_comm_sync(struct accel_comm *c, struct accel_error *err) ACCEL_WUR;

/* Frees the communicator; after an error, aborts it first (ncclCommAbort).
 * NULL is allowed. */
void accel_comm_free(struct accel_comm *c);

#ifdef __cplusplus
}
#endif

#endif
