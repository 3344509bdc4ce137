/*
 * sched.c: Slurm's tasks-per-node list and the per-step port (host lists
 * are topology/hostlist.c's).
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/sched.h"

enum accel_err accel_tasks_per_node(const char *spec, unsigned node_id, unsigned *before,
                                    unsigned *count, struct accel_error *err)
{
    const char *p = spec;
    unsigned long seen = 0, sum = 0; /* nodes and tasks before the current entry */
    bool found = false;

    if (spec == NULL || *spec == '\0')
        return accel_error_set(err, ACCEL_EINVAL, "tasks-per-node list: empty");
    while (*p != '\0') {
        unsigned long n, reps = 1;
        char *end;
        if (!isdigit((unsigned char)*p))
            goto bad;
        n = strtoul(p, &end, 10);
        p = end;
        if (*p == '(') {
            if (p[1] != 'x' || !isdigit((unsigned char)p[2]))
                goto bad;
            reps = strtoul(p + 2, &end, 10);
            if (*end != ')')
                goto bad;
            p = end + 1;
        }
        if (n > (1ul << 20) || reps == 0 || reps > (1ul << 20))
            goto bad;
        if (!found && node_id < seen + reps) {
            *before = (unsigned)(sum + (node_id - seen) * n);
            *count = (unsigned)n;
            found = true; /* keep reading: the whole list must be well formed */
        }
        seen += reps;
        sum += reps * n;
        if (seen > (1ul << 24))
            goto bad;
        if (*p == ',' && p[1] != '\0')
            p++;
        else if (*p != '\0')
            goto bad;
    }
    if (found)
        return ACCEL_OK;
    return accel_error_set(err, ACCEL_EINVAL, "tasks-per-node list '%.64s': no node %u", spec,
                           node_id);
bad:
    return accel_error_set(err, ACCEL_EINVAL, "tasks-per-node list '%.64s': malformed", spec);
}

unsigned accel_step_port(uint32_t job_id, uint32_t step_id, unsigned port_base, unsigned port_range)
{
    uint32_t h = 2166136261u; /* FNV-1a over the 8 bytes of (job, step) */
    uint32_t words[2] = {job_id, step_id};

    for (int w = 0; w < 2; w++)
        for (int b = 0; b < 4; b++) {
            h ^= (words[w] >> (8 * b)) & 0xffu;
            h *= 16777619u;
        }
    if (port_range == 0)
        port_range = 1;
    return port_base + h % port_range;
}
