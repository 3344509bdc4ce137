/*
 * nccl_boot.c: what the nccl backend's ranks tell each other through the
 * rendezvous store, and NCCL's results in words: rank 0's ncclUniqueId
 * (or why it has none), and the failure board on which a rank whose init
 * failed says so, so that the others stop waiting at once (keys in
 * nccl_int.h).  The communicators themselves are nccl.c's.
 */
#include <stdio.h>
#include <string.h>

#include <nccl.h>

#include "accel/alloc.h"
#include "accel/clock.h"
#include "accel/log.h"
#include "nccl_impl.h"
#include "nccl_int.h"

_Static_assert(ACCEL_NCCL_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId size");
_Static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId layout");

#define BOARD_PERIOD_S 0.1 /* how often a waiting rank looks for a failed peer */

/* ---------------------------------------------------------------- NCCL's results */

enum accel_err comm__nccl_code(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return ACCEL_OK;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
        return ACCEL_EINVAL;
    case ncclRemoteError: /* a peer died or the network failed */
    case ncclSystemError: /* sockets closed under NCCL: usually the same */
        return ACCEL_EPEER;
    case ncclUnhandledCudaError:
    case ncclInternalError:
    case ncclInProgress:
    case ncclNumResults:
        return ACCEL_EIO;
    }
    return ACCEL_EIO;
}

static const char *nccl_name(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return "ncclSuccess";
    case ncclUnhandledCudaError:
        return "ncclUnhandledCudaError";
    case ncclSystemError:
        return "ncclSystemError";
    case ncclInternalError:
        return "ncclInternalError";
    case ncclInvalidArgument:
        return "ncclInvalidArgument";
    case ncclInvalidUsage:
        return "ncclInvalidUsage";
    case ncclRemoteError:
        return "ncclRemoteError";
    case ncclInProgress:
        return "ncclInProgress";
    case ncclNumResults:
        break;
    }
    return "ncclResult?";
}

/* "ncclRemoteError (remote process exited or there was a network error):
 * <NCCL's last error>" into buf. */
const char *comm__nccl_why(ncclResult_t r, ncclComm_t comm, char *buf, size_t n)
{
    const char *last = ncclGetLastError(comm);

    snprintf(buf, n, "%s (%s)%s%s", nccl_name(r), ncclGetErrorString(r),
             last != NULL && last[0] != '\0' ? ": " : "", last != NULL ? last : "");
    return buf;
}

/* ---------------------------------------------------------------- failure board */

void comm__nccl_board_init(struct comm__nccl_board *b, struct accel_store *s, const char *prefix,
                           const char *sub)
{
    b->store = s;
    snprintf(b->failed_key, sizeof(b->failed_key), "%s%sfailed", prefix, sub);
    snprintf(b->why_key, sizeof(b->why_key), "%s%swhy", prefix, sub);
    b->next_check = 0;
}

/* Tells the other ranks that this one failed: the reason first, then the
 * count, so a rank that sees the count can read the reason at once. */
void comm__nccl_board_post(struct comm__nccl_board *b, const char *msg)
{
    struct accel_error e;

    if (b->store == NULL)
        return;
    if (accel_store_set(b->store, b->why_key, msg, strlen(msg), &e) != ACCEL_OK ||
        accel_store_add(b->store, b->failed_key, 1, NULL, &e) != ACCEL_OK)
        accel_log(ACCEL_LOG_WARN, "nccl: couldn't tell the other ranks: %s", e.msg);
}

/* True when some rank posted a failure (its reason in why).  Looks at most
 * every BOARD_PERIOD_S.  A store that fails is no news: rank 0 may have
 * finished and closed it while this rank's NCCL init completes; NCCL or the
 * deadline ends the wait when rank 0 is really gone.  The board is then left
 * alone for the rest of the wait. */
bool comm__nccl_board_failed(struct comm__nccl_board *b, char *why, size_t n)
{
    struct accel_error e;
    int64_t count = 0;
    void *val = NULL;
    size_t len = 0;

    if (b->store == NULL || accel_now() < b->next_check)
        return false;
    b->next_check = accel_now() + BOARD_PERIOD_S;
    if (accel_store_add(b->store, b->failed_key, 0, &count, &e) != ACCEL_OK) {
        accel_log(ACCEL_LOG_DEBUG, "nccl: the failure board is unreadable: %s", e.msg);
        b->store = NULL;
        return false;
    }
    if (count <= 0)
        return false;
    if (accel_store_get(b->store, b->why_key, &val, &len, &e) != ACCEL_OK) {
        snprintf(why, n, "a rank failed (its reason is unreadable: %.500s)", e.msg);
        return true;
    }
    snprintf(why, n, "%.*s", (int)(len < 600 ? len : 600), (const char *)val);
    accel_free(val);
    return true;
}

/* ---------------------------------------------------------------- the unique id */

enum accel_err comm__nccl_unique_id(unsigned char out[ACCEL_NCCL_ID_BYTES], struct accel_error *err)
{
    ncclUniqueId id;
    ncclResult_t r;
    char why[512];

    memset(&id, 0, sizeof(id));
    r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
        return accel_error_set(err, ACCEL_EIO, "nccl: couldn't make the unique id: %s",
                               comm__nccl_why(r, NULL, why, sizeof(why)));
    memcpy(out, id.internal, ACCEL_NCCL_ID_BYTES);
    return ACCEL_OK;
}

static void id_key(char *key, size_t n, const char *prefix)
{
    snprintf(key, n, "%snccl/id", prefix);
}

/* Rank 0 failed before it had an id: "!" and the reason under the id key, so
 * the other ranks fail at once instead of at their deadline.  Never 128 bytes
 * long, so it cannot be taken for an id. */
void comm__nccl_publish_id_failure(struct accel_store *s, const char *prefix, const char *msg)
{
    char key[160], val[ACCEL_NCCL_ID_BYTES * 4];
    struct accel_error e;
    int len;

    id_key(key, sizeof(key), prefix);
    len = snprintf(val, sizeof(val), "!%s", msg);
    if (len < 0)
        return;
    if ((size_t)len >= sizeof(val))
        len = (int)sizeof(val) - 1;
    if (len == ACCEL_NCCL_ID_BYTES)
        len--;
    if (accel_store_set(s, key, val, (size_t)len, &e) != ACCEL_OK)
        accel_log(ACCEL_LOG_WARN, "nccl: couldn't tell the other ranks: %s", e.msg);
}

enum accel_err comm__nccl_exchange_id(struct accel_store *s, const char *prefix, unsigned rank,
                                      unsigned world, unsigned char id[ACCEL_NCCL_ID_BYTES],
                                      struct accel_error *err)
{
    char key[160];
    void *val = NULL;
    size_t len = 0;
    enum accel_err rc;

    if (s == NULL || prefix == NULL || rank >= world)
        return accel_error_set(err, ACCEL_EINVAL, "nccl: id exchange: no store, or rank %u of %u",
                               rank, world);
    id_key(key, sizeof(key), prefix);
    if (rank == 0) {
        rc = comm__nccl_unique_id(id, err);
        if (rc != ACCEL_OK) {
            comm__nccl_publish_id_failure(s, prefix,
                                          err != NULL ? err->msg : "ncclGetUniqueId failed");
            return rc;
        }
        return accel_store_set(s, key, id, ACCEL_NCCL_ID_BYTES, err);
    }
    rc = accel_store_get(s, key, &val, &len, err);
    if (rc != ACCEL_OK)
        return rc;
    if (len == ACCEL_NCCL_ID_BYTES) {
        memcpy(id, val, ACCEL_NCCL_ID_BYTES);
        rc = ACCEL_OK;
    } else if (len > 0 && ((const char *)val)[0] == '!') {
        rc = accel_error_set(err, ACCEL_EPEER, "rank %u of %u: nccl: rank 0 failed: %.*s", rank,
                             world, (int)(len - 1), (const char *)val + 1);
    } else {
        rc = accel_error_set(err, ACCEL_EIO,
                             "rank %u of %u: nccl: %s holds %zu bytes, not an ncclUniqueId (%d)",
                             rank, world, key, len, ACCEL_NCCL_ID_BYTES);
    }
    accel_free(val);
    return rc;
}
