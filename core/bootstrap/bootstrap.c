/*
 * bootstrap.c: a rank's way into the rendezvous store from its environment
 * (the variables `accelrun launch`, the SPANK plugin and torchrun set).  It
 * reads and checks them, naming the variable in every error, starts the
 * server on rank 0 for the tcp method and connects.  It does not exchange
 * anything itself; core/comm does that through the store.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/log.h"
#include "store_int.h"

#define ENV_MAX 4096         /* bytes of one variable's value */
#define WORLD_MAX (1u << 20) /* ranks in a job */
#define CLOSE_TIMEOUT_S 10.0 /* the closing barrier waits at most this */
#define CLOSE_BARRIER "accelrun.bootstrap.close"

static enum accel_err env_get(const char *name, bool required, const char **out,
                              struct accel_error *err)
{
    const char *v = getenv(name);

    *out = NULL;
    if (v == NULL || v[0] == '\0') {
        if (required)
            return accel_error_set(err, ACCEL_EINVAL, "bootstrap: %s is not set", name);
        return ACCEL_OK;
    }
    if (strnlen(v, ENV_MAX + 1) > ENV_MAX)
        return accel_error_set(err, ACCEL_ETOOBIG, "bootstrap: %s is longer than %d bytes", name,
                               ENV_MAX);
    *out = v;
    return ACCEL_OK;
}

static enum accel_err env_uint(const char *name, unsigned long lo, unsigned long hi, unsigned *out,
                               struct accel_error *err)
{
    const char *v;
    char *end;
    unsigned long n;
    enum accel_err rc = env_get(name, true, &v, err);

    if (rc != ACCEL_OK)
        return rc;
    errno = 0;
    n = strtoul(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0)
        return accel_error_set(err, ACCEL_EINVAL, "bootstrap: %s='%.64s' is not a number", name, v);
    if (n < lo || n > hi)
        return accel_error_set(err, ACCEL_EINVAL, "bootstrap: %s=%lu is not in %lu..%lu", name, n,
                               lo, hi);
    *out = (unsigned)n;
    return ACCEL_OK;
}

static enum accel_err env_timeout(double *out, struct accel_error *err)
{
    const char *v;
    char *end;
    double t;
    enum accel_err rc = env_get("ACCELRUN_TIMEOUT", false, &v, err);

    *out = ACCEL_STORE_DEFAULT_TIMEOUT_S;
    if (rc != ACCEL_OK || v == NULL)
        return rc;
    errno = 0;
    t = strtod(v, &end);
    if (end == v || *end != '\0' || errno != 0 || !isfinite(t) || t <= 0 || t > 1e6)
        return accel_error_set(err, ACCEL_EINVAL,
                               "bootstrap: ACCELRUN_TIMEOUT='%.64s' is not a number of seconds "
                               "in (0, 1e6]",
                               v);
    *out = t;
    return ACCEL_OK;
}

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
    if ((rc = env_uint("WORLD_SIZE", 1, WORLD_MAX, &b->world, err)) != ACCEL_OK ||
        (rc = env_uint("RANK", 0, WORLD_MAX - 1, &b->rank, err)) != ACCEL_OK ||
        (rc = env_timeout(&b->timeout_s, err)) != ACCEL_OK ||
        (rc = env_get("ACCELRUN_STORE", false, &method, err)) != ACCEL_OK)
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
    if ((rc = env_get("MASTER_ADDR", true, &addr, err)) != ACCEL_OK ||
        (rc = env_uint("MASTER_PORT", 1, 65535, &port, err)) != ACCEL_OK)
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
    accel_store_server_stop(b->server);
    memset(b, 0, sizeof(*b));
}
