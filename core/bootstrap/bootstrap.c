/*
 * bootstrap.c: a rank's way into the rendezvous store from its environment
 * (the variables `accelrun launch`, the SPANK plugin and torchrun set).  It
 * reads and checks them, naming the variable in every error, starts the
 * server on rank 0 for the tcp method and connects.  It does not exchange
 * anything itself; core/comm does that through the store.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/clock.h"
#include "accel/getenv.h"
#include "accel/log.h"
#include "store_int.h"

#define WHO "bootstrap"      /* the prefix of its messages */
#define WORLD_MAX (1u << 20) /* ranks in a job */
#define CLOSE_TIMEOUT_S 10.0 /* the closing barrier waits at most this */
#define CLOSE_BARRIER "accelrun.bootstrap.close"

/* The job nonce: Slurm's job and step, else torchrun's run id, else what
 * every rank of this job shares (the store's address, or its folder). */
static uint64_t env_nonce(const char *fallback_job, const char *fallback_step)
{
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");

    if (job != NULL && job[0] != '\0')
        return accel_store_nonce(job, step);
    job = getenv("TORCHELASTIC_RUN_ID");
    if (job != NULL && job[0] != '\0')
        return accel_store_nonce(job, "");
    return accel_store_nonce(fallback_job, fallback_step);
}

enum accel_err accel_bootstrap_init(struct accel_bootstrap *b, struct accel_error *err)
{
    struct accel_store_opts o = {0};
    const char *method, *addr = NULL;
    unsigned port = 0;
    enum accel_err rc;

    if (b == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "bootstrap: NULL argument");
    memset(b, 0, sizeof(*b));
    if ((rc = accel_getenv_uint(WHO, "WORLD_SIZE", 1, WORLD_MAX, &b->world, err)) != ACCEL_OK ||
        (rc = accel_getenv_uint(WHO, "RANK", 0, WORLD_MAX - 1, &b->rank, err)) != ACCEL_OK ||
        (rc = accel_getenv_timeout(WHO, ACCEL_STORE_DEFAULT_TIMEOUT_S, &b->timeout_s, err)) !=
            ACCEL_OK ||
        (rc = accel_getenv_str(WHO, "ACCELRUN_STORE", false, &method, err)) != ACCEL_OK)
        return rc;
    if (b->rank >= b->world)
        return accel_error_set(err, ACCEL_EINVAL, "bootstrap: RANK=%u is not below WORLD_SIZE=%u",
                               b->rank, b->world);
    o.rank = b->rank;
    o.world = b->world;
    o.timeout_s = b->timeout_s;
    if (method != NULL && strncmp(method, "file:", 5) == 0) {
        if (method[5] != '/')
            return accel_error_set(err, ACCEL_EINVAL,
                                   "bootstrap: ACCELRUN_STORE='%.64s': file: needs an absolute "
                                   "folder (file:/shared/folder)",
                                   method);
        o.dir = method + 5;
        o.nonce = b->nonce = env_nonce(o.dir, "");
        return accel_store_open_dir(&b->store, &o, err);
    }
    if (method != NULL && strcmp(method, "tcp") != 0)
        return accel_error_set(err, ACCEL_EINVAL,
                               "bootstrap: ACCELRUN_STORE='%.64s' is neither tcp nor file:FOLDER",
                               method);
    if ((rc = accel_getenv_str(WHO, "MASTER_ADDR", true, &addr, err)) != ACCEL_OK ||
        (rc = accel_getenv_uint(WHO, "MASTER_PORT", 1, 65535, &port, err)) != ACCEL_OK)
        return rc;
    o.host = addr;
    o.port = port;
    o.nonce = b->nonce = env_nonce(addr, getenv("MASTER_PORT"));
    if (b->rank == 0) {
        struct accel_store_server_opts so = {0};
        so.port = port;
        so.nonce = o.nonce;
        rc = accel_store_server_start(&b->server, &so, err);
        if (rc != ACCEL_OK)
            return rc;
    }
    rc = accel_store_connect(&b->store, &o, err);
    if (rc != ACCEL_OK) {
        accel_store_server_stop(b->server);
        b->server = NULL;
    }
    return rc;
}

void accel_bootstrap_free(struct accel_bootstrap *b)
{
    if (b == NULL)
        return;
    if (b->store != NULL && b->world > 1 && !b->failed) {
        /* Rank 0 must not take the server away while another rank is still
         * reading from it: everybody meets once more, briefly. */
        struct accel_error err;
        double saved = b->store->timeout_s;
        if (b->store->timeout_s > CLOSE_TIMEOUT_S)
            b->store->timeout_s = CLOSE_TIMEOUT_S;
        if (accel_store_barrier(b->store, CLOSE_BARRIER, b->world, &err) != ACCEL_OK)
            accel_log(ACCEL_LOG_WARN, "bootstrap: closing: %s", err.msg);
        b->store->timeout_s = saved;
    }
    accel_store_close(b->store);
    if (b->server != NULL && b->failed) {
        /* After a failure the other ranks read from the store who failed
         * first (the comm backends record it there): rank 0 keeps serving
         * until they have all closed, or for CLOSE_TIMEOUT_S at most. */
        double deadline =
            accel_now() +
            (b->timeout_s < CLOSE_TIMEOUT_S && b->timeout_s > 0 ? b->timeout_s : CLOSE_TIMEOUT_S);
        while (accel_store_server_clients(b->server) > 0 && accel_now() < deadline)
            (void)poll(NULL, 0, 10);
    }
    accel_store_server_stop(b->server);
    memset(b, 0, sizeof(*b));
}
