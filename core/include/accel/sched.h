/*
 * accel/sched.h: pure helpers for scheduler facts, shared by the SPANK
 * plugin and the tests: the first host of a Slurm host list, and the
 * rendezvous port of a step (DESIGN decision 4).  No libslurm, no I/O.
 */
#ifndef ACCEL_SCHED_H
#define ACCEL_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "accel/err.h"

#define ACCEL_MAX_HOSTLIST 65536 /* bytes of SLURM_STEP_NODELIST we accept */

/* The first host of a Slurm host list such as "gpu[007-010,12],login1" ->
 * "gpu007" (zero padding kept, as Slurm expands it).  ACCEL_EINVAL for an
 * empty or malformed list, ACCEL_ETOOBIG when the host name does not fit
 * `size` or the list exceeds ACCEL_MAX_HOSTLIST. */
enum accel_err accel_hostlist_first(const char *list, char *out, size_t size,
                                    struct accel_error *err) ACCEL_WUR;

/* port_base + (FNV-1a hash of job and step id) mod port_range: the same for
 * every task of a step, different between concurrent steps with high
 * probability.  range 0 is treated as 1. */
unsigned accel_step_port(uint32_t job_id, uint32_t step_id, unsigned port_base,
                         unsigned port_range);

#endif
