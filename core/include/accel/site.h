/*
 * accel/site.h: the administrator's site policy.
 *
 *   defaults:   accelerate keys a user may override
 *   enforce:    accelerate keys a user may not contradict
 *   accelrun:
 *     port_base: 29500        MASTER_PORT = port_base + hash(job, step) % port_range
 *     port_range: 1000
 *     slurm_wins: false       a num_processes/num_machines mismatch with the
 *                             Slurm step is a warning (true) or an error (false)
 *     nic_binding: rank       each rank's NCCL_IB_HCA / NCCL_SOCKET_IFNAME is its
 *                             GPU's nearest NIC (rank), or NCCL chooses (none)
 *     cpu_binding: auto       a task Slurm left on all of the node's CPUs is bound
 *                             to its GPU's CPUs (auto), or left alone (none)
 *     env:                    extra variables for every task, NCCL_* only
 *       NCCL_IB_HCA: mlx5
 *
 * The file is checked with the same schema as a user config (every finding
 * located in the site file).  Ownership: accel_site_free releases all.
 *
 * Thread-safety: as for accel/config.h: loading keeps no global state, and a
 * loaded site is read-only and may be shared by threads.
 */
#ifndef ACCEL_SITE_H
#define ACCEL_SITE_H

#include "accel/diag.h"
#include "accel/err.h"
#include "accel/value.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACCEL_PORT_BASE_DEFAULT 29500u
#define ACCEL_PORT_RANGE_DEFAULT 1000u
#define ACCEL_MAX_SITE_ENV 64 /* extra variables */

struct accel_site {
    struct accel_doc doc;
    const struct accel_val *defaults; /* into doc; NULL when absent */
    const struct accel_val *enforce;  /* into doc; NULL when absent */
    unsigned port_base;
    unsigned port_range;
    bool slurm_wins;
    bool nic_binding; /* nic_binding: rank (true, the default) or none */
    bool cpu_binding; /* cpu_binding: auto (true, the default) or none */
    size_t nenv;
    char *env[ACCEL_MAX_SITE_ENV]; /* "NAME=VALUE", owned */
};

/* Loads and checks a site file.  ACCEL_ECONFIG with findings in `diags` when
 * it is invalid; the site then holds nothing. */
enum accel_err accel_site_load(struct accel_site *site, const char *path, unsigned version,
                               struct accel_diags *diags, struct accel_error *err) ACCEL_WUR;

enum accel_err accel_site_load_buffer(struct accel_site *site, const char *name, const char *data,
                                      size_t len, unsigned version, struct accel_diags *diags,
                                      struct accel_error *err) ACCEL_WUR;

/* A site with no policy and the default port range. */
void accel_site_init(struct accel_site *site);

void accel_site_free(struct accel_site *site);

#ifdef __cplusplus
}
#endif

#endif
