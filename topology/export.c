/*
 * export.c: a node plan as the variables a task gets (core's struct
 * accel_rank_plan), and the CPU binding a launcher applies to a task.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_int.h"

unsigned accel_gpu_list_count(const char *list)
{
    unsigned n = list[0] != '\0';
    for (const char *c = list; *c; c++)
        n += *c == ',';
    return n;
}

/* True when the comma list `list` holds `id`. */
static bool has_id(const char *list, const char *id)
{
    size_t n = strlen(id);

    for (const char *p = list; *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, id, n) == 0)
            return true;
        p += len + (end != NULL);
    }
    return false;
}

/* Appends `id` (len bytes) to `out` unless it is there already; false when
 * it does not fit. */
static bool append_id(char *out, size_t size, const char *id, size_t len)
{
    size_t used = strlen(out);
    char one[64];

    if (len == 0 || len >= sizeof(one))
        return len == 0;
    memcpy(one, id, len);
    one[len] = '\0';
    if (has_id(out, one))
        return true;
    if (used + len + 2 > size)
        return false;
    if (used > 0)
        out[used++] = ',';
    memcpy(out + used, one, len + 1);
    return true;
}

/* The granted list in plan order into out (size bytes). */
static enum accel_err gpu_order(const struct accel_topo *t, const struct accel_node_plan *p,
                                const char *granted, char *out, size_t size,
                                struct accel_error *err)
{
    char all[ACCEL_TOPO_MAX_GRANTED];
    unsigned ngranted;

    out[0] = '\0';
    if (p->cpu_only)
        return ACCEL_OK;
    if (granted == NULL) { /* every GPU of the node, by id */
        all[0] = '\0';
        for (unsigned g = 0; g < t->ngpus; g++) {
            char id[16];
            int n = snprintf(id, sizeof(id), "%u", g);
            if (!append_id(all, sizeof(all), id, (size_t)n))
                return accel_error_set(err, ACCEL_ETOOBIG, "placement: %u GPUs do not fit a list",
                                       t->ngpus);
        }
        granted = all;
    }
    ngranted = accel_gpu_list_count(granted);
    for (unsigned i = 0; i < p->nranks; i++) {
        const char *id = p->ranks[i].gpu_id;
        if (!has_id(granted, id))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "placement: local rank %u's GPU %s is not in %s", i, id,
                                   granted);
        if (!append_id(out, size, id, strlen(id)))
            return accel_error_set(err, ACCEL_ETOOBIG, "placement: the GPU list %s is too long",
                                   granted);
    }
    for (const char *q = granted; *q != '\0';) {
        const char *end = strchr(q, ',');
        size_t len = end ? (size_t)(end - q) : strlen(q);
        if (!append_id(out, size, q, len))
            return accel_error_set(err, ACCEL_ETOOBIG, "placement: the GPU list %s is too long",
                                   granted);
        q += len + (end != NULL);
    }
    /* a permutation of what was granted, never more or less */
    if (accel_gpu_list_count(out) != ngranted)
        return accel_error_set(err, ACCEL_EINVAL, "placement: the GPU list %s repeats an id",
                               granted);
    return ACCEL_OK;
}

enum accel_err accel_node_plan_export(const struct accel_topo *t, const struct accel_node_plan *p,
                                      const char *granted, struct accel_rank_plan *ranks,
                                      unsigned cap, struct accel_plan *out, struct accel_error *err)
{
    char order[sizeof(ranks->cuda_visible_devices)];
    enum accel_err rc;

    if (t == NULL || p == NULL || ranks == NULL || out == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "placement: NULL argument");
    memset(out, 0, sizeof(*out));
    if (cap < p->nranks)
        return accel_error_set(err, ACCEL_ETOOBIG, "placement: the plan has %u ranks; room for %u",
                               p->nranks, cap);
    for (unsigned i = 0; i < p->nranks; i++)
        if (p->ranks[i].gpu >= (int)t->ngpus || p->ranks[i].nic >= (int)t->nnics)
            return accel_error_set(err, ACCEL_EINVAL,
                                   "placement: local rank %u names a GPU or NIC this topology "
                                   "lacks",
                                   i);
    rc = gpu_order(t, p, granted, order, sizeof(order), err);
    if (rc != ACCEL_OK)
        return rc;
    for (unsigned i = 0; i < p->nranks; i++) {
        const struct accel_node_rank *k = &p->ranks[i];
        struct accel_rank_plan *r = &ranks[i];
        size_t size;
        int n;

        memset(r, 0, sizeof(*r));
        memcpy(r->cuda_visible_devices, order, sizeof(order));
        if (k->nic < 0)
            continue;
        /* "=" asks NCCL for an exact name: a bare mlx5_1 also matches mlx5_10. */
        if (t->nics[k->nic].kind == ACCEL_NIC_ETHERNET) {
            n = snprintf(r->nccl_socket_ifname, sizeof(r->nccl_socket_ifname), "=%s",
                         t->nics[k->nic].name);
            size = sizeof(r->nccl_socket_ifname);
        } else {
            n = snprintf(r->nccl_ib_hca, sizeof(r->nccl_ib_hca), "=%s", t->nics[k->nic].name);
            size = sizeof(r->nccl_ib_hca);
        }
        if (n < 0 || (size_t)n >= size)
            return accel_error_set(err, ACCEL_ETOOBIG, "placement: NIC name %s is too long",
                                   t->nics[k->nic].name);
    }
    out->nranks = p->nranks;
    out->ranks = ranks;
    return ACCEL_OK;
}

/* Parses a CPU list ("0-13,112-125") into *set. */
static bool parse_cpulist(const char *list, cpu_set_t *set)
{
    CPU_ZERO(set);
    for (const char *p = list; *p != '\0';) {
        char *end;
        unsigned long lo, hi;

        if (*p < '0' || *p > '9')
            return false;
        lo = hi = strtoul(p, &end, 10);
        if (*end == '-') {
            p = end + 1;
            if (*p < '0' || *p > '9')
                return false;
            hi = strtoul(p, &end, 10);
            if (hi < lo)
                return false;
        }
        if (hi >= CPU_SETSIZE)
            return false;
        for (unsigned long c = lo; c <= hi; c++)
            CPU_SET(c, set);
        if (*end == ',' && end[1] != '\0')
            end++;
        else if (*end != '\0')
            return false;
        p = end;
    }
    return CPU_COUNT(set) > 0;
}

enum accel_err accel_topo_bind_cpus(const char *cpus, struct accel_error *err)
{
    cpu_set_t want, now, target;

    if (cpus == NULL || !parse_cpulist(cpus, &want))
        return accel_error_set(err, ACCEL_EINVAL, "CPU binding: '%s' is not a CPU list",
                               cpus ? cpus : "");
    if (sched_getaffinity(0, sizeof(now), &now) != 0)
        return accel_error_sys(err, ACCEL_EIO, "CPU binding: couldn't read this process's CPUs");
    CPU_AND(&target, &want, &now);
    if (CPU_COUNT(&target) == 0)
        return accel_error_set(err, ACCEL_ENOTFOUND, "CPU binding: none of CPUs %s is allowed here",
                               cpus);
    if (CPU_EQUAL(&target, &now))
        return ACCEL_OK;
    if (sched_setaffinity(0, sizeof(target), &target) != 0)
        return accel_error_sys(err, ACCEL_EIO, "CPU binding: couldn't bind to CPUs %s", cpus);
    return ACCEL_OK;
}
