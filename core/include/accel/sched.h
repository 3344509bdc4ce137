/*
 * accel/sched.h: pure helpers for scheduler facts, shared by the SPANK
 * plugin and the tests: a node's tasks from Slurm's tasks-per-node list,
 * and the rendezvous port of a step (DESIGN decision 4).  Host lists are
 * the topology component's (accel/cluster.h).  No libslurm, no I/O.
 *
 * Thread-safety: pure functions, safe from any thread.
 */
#ifndef ACCEL_SCHED_H
#define ACCEL_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "accel/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* From Slurm's compressed tasks-per-node list ("2(x3),1", as in
 * SLURM_STEP_TASKS_PER_NODE), the tasks on node `node_id` (*count) and on
 * the nodes before it (*before).  A node's first rank in a block layout is
 * *before, whatever distribution Slurm used.  ACCEL_EINVAL for malformed
 * text or a node past the end; counts are capped at 2^20 per entry. */
enum accel_err accel_tasks_per_node(const char *spec, unsigned node_id, unsigned *before,
                                    unsigned *count, struct accel_error *err) ACCEL_WUR;

/* port_base + (FNV-1a hash of job and step id) mod port_range: the same for
 * every task of a step, different between concurrent steps with high
 * probability.  range 0 is treated as 1. */
unsigned accel_step_port(uint32_t job_id, uint32_t step_id, unsigned port_base,
                         unsigned port_range);

#ifdef __cplusplus
}
#endif

#endif
