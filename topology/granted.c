/*
 * granted.c: which GPUs of the node a job was granted, from the list its
 * scheduler gave (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS, a pod's device
 * list): local indices, node-wide indices and UUIDs (GPU-..., MIG-...), each
 * resolved to a GPU of the node model, with an error that names the id and
 * the list.  The plan (node.c) then orders what this returns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "topo_int.h"

bool topo__gpus_none(const char *s)
{
    return s != NULL && (s[0] == '\0' || strcmp(s, "NoDevFiles") == 0);
}

/* Splits `list` at commas into picks[].id (spaces around an id are dropped);
 * gpu is not set yet. */
static enum accel_err split_ids(const char *list, struct topo__pick *picks, unsigned *n,
                                struct accel_error *err)
{
    const char *p = list;

    *n = 0;
    if (strlen(list) > ACCEL_TOPO_MAX_GRANTED)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               "granted GPU list: %zu bytes; the limit is %u bytes", strlen(list),
                               ACCEL_TOPO_MAX_GRANTED);
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        while (len > 0 && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len == 0)
            return accel_error_set(err, ACCEL_EINVAL, "granted GPU list \"%s\": an empty id", list);
        if (len >= sizeof(picks[0].id))
            return accel_error_set(err, ACCEL_EINVAL,
                                   "granted GPU list: id \"%.*s...\" is too long", 16, p);
        if (*n == ACCEL_TOPO_MAX_GPUS)
            return accel_error_set(err, ACCEL_ETOOBIG,
                                   "granted GPU list \"%.64s...\": more than %u ids", list,
                                   ACCEL_TOPO_MAX_GPUS);
        memcpy(picks[*n].id, p, len);
        picks[*n].id[len] = '\0';
        picks[*n].gpu = 0;
        (*n)++;
        if (end == NULL)
            return ACCEL_OK;
        p = end + 1;
    }
}

/* An integer id: digits only, at most 9 of them. */
static bool parse_index(const char *s, unsigned *v)
{
    size_t n = strlen(s);

    if (n == 0 || n > 9 || strspn(s, "0123456789") != n)
        return false;
    *v = (unsigned)strtoul(s, NULL, 10);
    return true;
}

/* Resolves one id that is not a local index: a node-wide integer or a UUID. */
static enum accel_err resolve_global(const struct accel_topo *t, const char *id, const char *list,
                                     unsigned *gpu, struct accel_error *err)
{
    unsigned v;

    if (strncmp(id, "MIG-", 4) == 0)
        return accel_error_set(err, ACCEL_EUNSUPPORTED,
                               "granted GPU %s: a MIG instance; accelrun places whole GPUs", id);
    if (strncasecmp(id, "GPU-", 4) == 0) {
        for (unsigned g = 0; g < t->ngpus; g++)
            if (strcasecmp(t->gpus[g].uuid, id) == 0) {
                *gpu = g;
                return ACCEL_OK;
            }
        return accel_error_set(
            err, ACCEL_ENOTFOUND, "granted GPU %s: not on this node (%u GPUs%s)", id, t->ngpus,
            t->ngpus && !t->gpus[0].uuid[0] ? ", UUIDs unknown without NVML" : "");
    }
    if (!parse_index(id, &v))
        return accel_error_set(err, ACCEL_EINVAL,
                               "granted GPU list \"%s\": \"%s\" is not a GPU id (an integer or a "
                               "GPU-... UUID)",
                               list, id);
    if (v >= t->ngpus && t->ngpus == 0)
        return accel_error_set(err, ACCEL_ENOTFOUND,
                               "granted GPU %s: not on this node (it has no NVIDIA GPU)", id);
    if (v >= t->ngpus)
        return accel_error_set(err, ACCEL_ENOTFOUND, "granted GPU %s: not on this node (GPUs 0-%u)",
                               id, t->ngpus - 1);
    *gpu = v;
    return ACCEL_OK;
}

static int cmp_gpu_index(const void *a, const void *b)
{
    return topo__cmp_uint(&((const struct topo__pick *)a)->gpu,
                          &((const struct topo__pick *)b)->gpu);
}

/* Fills picks[] from the request: which GPU each granted id names. */
enum accel_err topo__resolve_ids(const struct accel_topo *t, const struct accel_plan_req *req,
                                 struct topo__pick *picks, unsigned *n, struct accel_error *err)
{
    struct topo__pick phys[ACCEL_TOPO_MAX_GPUS];
    unsigned nphys = 0;
    enum accel_err rc;

    if (req->gpus == NULL) {
        for (unsigned g = 0; g < t->ngpus; g++) {
            picks[g].gpu = g;
            snprintf(picks[g].id, sizeof(picks[g].id), "%u", g);
        }
        *n = t->ngpus;
        return ACCEL_OK;
    }
    rc = split_ids(req->gpus, picks, n, err);
    if (rc != ACCEL_OK)
        return rc;
    if (req->local_ids && req->physical != NULL) {
        /* The k-th granted GPU in PCI order: how CUDA numbers what a device
         * cgroup lets it see (CUDA_DEVICE_ORDER=PCI_BUS_ID). */
        rc = split_ids(req->physical, phys, &nphys, err);
        for (unsigned i = 0; rc == ACCEL_OK && i < nphys; i++)
            rc = resolve_global(t, phys[i].id, req->physical, &phys[i].gpu, err);
        if (rc != ACCEL_OK)
            return rc;
        qsort(phys, nphys, sizeof(phys[0]), cmp_gpu_index);
    }
    for (unsigned i = 0; i < *n; i++) {
        unsigned v;

        if (!req->local_ids || !parse_index(picks[i].id, &v)) {
            rc = resolve_global(t, picks[i].id, req->gpus, &picks[i].gpu, err);
        } else if (req->physical != NULL) {
            if (v >= nphys)
                return accel_error_set(err, ACCEL_ENOTFOUND,
                                       "granted GPU list: local GPU id %s, but the node granted "
                                       "%u GPUs (\"%s\")",
                                       picks[i].id, nphys, req->physical);
            picks[i].gpu = phys[v].gpu;
        } else if (*n == t->ngpus) {
            /* Every GPU is granted, so local and node-wide numbers agree. */
            rc = resolve_global(t, picks[i].id, req->gpus, &picks[i].gpu, err);
        } else {
            return accel_error_set(err, ACCEL_EINVAL,
                                   "granted GPU list: local GPU ids \"%s\" need the node-wide ids "
                                   "of the granted GPUs (SLURM_STEP_GPUS) on a node with %u GPUs",
                                   req->gpus, t->ngpus);
        }
        if (rc != ACCEL_OK)
            return rc;
        for (unsigned j = 0; j < i; j++)
            if (picks[j].gpu == picks[i].gpu)
                return accel_error_set(
                    err, ACCEL_EINVAL,
                    "granted GPU list \"%s\": GPU %s is granted twice (as %s and %s)", req->gpus,
                    t->gpus[picks[i].gpu].pci.busid, picks[j].id, picks[i].id);
    }
    return ACCEL_OK;
}
