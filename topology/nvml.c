/*
 * nvml.c: NVLink peers, GPU names and UUIDs from NVIDIA's NVML, loaded at run
 * time with dlopen("libnvidia-ml.so.1") the way NCCL does it, so nothing links
 * NVML and a machine without NVIDIA's driver (build hosts, CPU nodes) simply
 * gets no NVLink information.  Each GPU is asked, link by link, what is at the
 * other end: another GPU (direct NVLink) or an NVSwitch.  The bandwidth of a
 * link follows hwloc's NVML backend, so a model discovered here and one read
 * from an XML export of the same machine carry the same numbers.  This file
 * reads; it never changes a GPU setting.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "accel/alloc.h"
#include "accel/log.h"
#include "topo_int.h"

/* MB/s one way of one link, by NVML's NVLink version (hwloc's table):
 * NVLink 1 (P100) 20000; NVLink 2 to 4 (V100, A100, H100; NVML versions 2-6)
 * 25000; NVLink 5 (B200, version 7) 50000.  A version the table does not know
 * yet is newer, so at least NVLink 5; 0 means NVML did not say. */
static uint64_t link_mbps(unsigned version)
{
    if (version == 1)
        return 20000;
    if (version >= 7)
        return 50000;
    return 25000;
}

static int gpu_at(const struct accel_topo *t, const struct topo__nvml_pci *p)
{
    for (unsigned g = 0; g < t->ngpus; g++)
        if (t->gpus[g].pci.domain == p->domain && t->gpus[g].pci.bus == p->bus &&
            t->gpus[g].pci.dev == p->device)
            return (int)g;
    return -1;
}

static bool nvswitch_at(const struct accel_topo *t, const struct topo__nvml_pci *p)
{
    for (unsigned s = 0; s < t->nnvswitches; s++)
        if (t->nvswitches[s].domain == p->domain && t->nvswitches[s].bus == p->bus &&
            t->nvswitches[s].dev == p->device)
            return true;
    return false;
}

/* Walks the links of GPU g; adds direct GPU bandwidth to mat and NVSwitch
 * bandwidth to *sw.  True when any link counted. */
static bool walk_links(const struct accel_topo *t, const struct topo__nvml_api *api,
                       topo__nvml_device dev, unsigned g, uint64_t *mat, uint64_t *sw)
{
    bool found = false;

    for (unsigned l = 0; l < TOPO_NVML_MAX_LINKS; l++) {
        topo__nvml_enable on = TOPO_NVML_DISABLED;
        topo__nvml_peer type = TOPO_NVML_PEER_UNKNOWN;
        struct topo__nvml_pci pci;
        unsigned version = 0;
        int peer;

        if (api->link_state(dev, l, &on) != TOPO_NVML_SUCCESS || on != TOPO_NVML_ENABLED)
            continue;
        memset(&pci, 0, sizeof(pci));
        if (api->link_remote_pci(dev, l, &pci) != TOPO_NVML_SUCCESS)
            continue;
        if (api->link_remote_type != NULL &&
            api->link_remote_type(dev, l, &type) != TOPO_NVML_SUCCESS)
            type = TOPO_NVML_PEER_UNKNOWN;
        if (api->link_version != NULL && api->link_version(dev, l, &version) != TOPO_NVML_SUCCESS)
            version = 0;
        peer = gpu_at(t, &pci);
        if ((type == TOPO_NVML_PEER_GPU || type == TOPO_NVML_PEER_UNKNOWN) && peer >= 0) {
            if ((unsigned)peer != g) {
                mat[g * t->ngpus + (unsigned)peer] += link_mbps(version);
                found = true;
            }
        } else if (type == TOPO_NVML_PEER_SWITCH ||
                   (type == TOPO_NVML_PEER_UNKNOWN && nvswitch_at(t, &pci))) {
            *sw += link_mbps(version);
            found = true;
        }
        /* else: a CPU (IBM NPU) or a GPU outside the model: not a GPU-to-GPU path */
    }
    return found;
}

enum accel_err topo__nvml_apply(struct accel_topo *t, const struct topo__nvml_api *api,
                                struct accel_error *err)
{
    bool links = t->nvlink_source == ACCEL_NVLINK_UNKNOWN, found = false;
    topo__nvml_device *dev = NULL;
    uint64_t *mat = NULL, *sw = NULL;
    enum accel_err rc = ACCEL_OK;

    if (t->ngpus == 0)
        return ACCEL_OK;
    if (api->init() != TOPO_NVML_SUCCESS) {
        accel_log(ACCEL_LOG_DEBUG, "topology: NVML did not start: no NVLink information");
        return ACCEL_OK;
    }
    dev = accel_calloc(t->ngpus, sizeof(*dev));
    mat = accel_calloc((size_t)t->ngpus * t->ngpus, sizeof(*mat));
    sw = accel_calloc(t->ngpus, sizeof(*sw));
    if (dev == NULL || mat == NULL || sw == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM,
                             "topology: out of memory reading NVLink information");
        goto out;
    }
    for (unsigned g = 0; g < t->ngpus; g++) {
        char buf[sizeof(t->gpus[0].model)]; /* 96: NVML's name buffer size */

        /* a GPU of another job's device cgroup does not open: skip it */
        if (api->by_busid(t->gpus[g].pci.busid, &dev[g]) != TOPO_NVML_SUCCESS) {
            dev[g] = NULL;
            continue;
        }
        memset(buf, 0, sizeof(buf));
        if (api->name != NULL && api->name(dev[g], buf, sizeof(buf) - 1) == TOPO_NVML_SUCCESS &&
            buf[0] != '\0')
            memcpy(t->gpus[g].model, buf, sizeof(t->gpus[g].model));
        memset(buf, 0, sizeof(buf));
        if (api->uuid != NULL &&
            api->uuid(dev[g], buf, sizeof(t->gpus[g].uuid) - 1) == TOPO_NVML_SUCCESS &&
            buf[0] != '\0')
            memcpy(t->gpus[g].uuid, buf, sizeof(t->gpus[g].uuid));
        if (links && walk_links(t, api, dev[g], g, mat, &sw[g]))
            found = true;
    }
    if (found) {
        t->nvlink = mat;
        mat = NULL;
        for (unsigned g = 0; g < t->ngpus; g++)
            t->gpus[g].nvswitch_mbps = sw[g];
        t->nvlink_source = ACCEL_NVLINK_NVML;
    }
out:
    api->shutdown();
    accel_free(dev);
    accel_free(mat);
    accel_free(sw);
    return rc;
}

/* Stores dlsym's answer in the function pointer at `fn` (POSIX guarantees an
 * object pointer from dlsym converts to a function pointer). */
static void sym(void *lib, const char *name, void *fn)
{
    void *p = dlsym(lib, name);

    memcpy(fn, &p, sizeof(p));
}

enum accel_err topo__nvml_load(struct accel_topo *t, const char *soname, struct accel_error *err)
{
    struct topo__nvml_api api;
    enum accel_err rc;
    void *lib;

    if (t->ngpus == 0)
        return ACCEL_OK; /* nothing to ask, and no driver to wake on a CPU node */
    lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();

        accel_log(ACCEL_LOG_DEBUG, "topology: no NVML (%s): no NVLink information",
                  why ? why : soname);
        return ACCEL_OK;
    }
    memset(&api, 0, sizeof(api));
    sym(lib, "nvmlInit_v2", &api.init);
    sym(lib, "nvmlShutdown", &api.shutdown);
    sym(lib, "nvmlDeviceGetHandleByPciBusId_v2", &api.by_busid);
    sym(lib, "nvmlDeviceGetName", &api.name);
    sym(lib, "nvmlDeviceGetUUID", &api.uuid);
    sym(lib, "nvmlDeviceGetNvLinkState", &api.link_state);
    sym(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", &api.link_remote_pci);
    if (api.link_remote_pci == NULL)
        sym(lib, "nvmlDeviceGetNvLinkRemotePciInfo", &api.link_remote_pci);
    sym(lib, "nvmlDeviceGetNvLinkVersion", &api.link_version);
    sym(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", &api.link_remote_type);
    if (api.init == NULL || api.shutdown == NULL || api.by_busid == NULL ||
        api.link_state == NULL || api.link_remote_pci == NULL) {
        accel_log(ACCEL_LOG_DEBUG,
                  "topology: %s lacks the NVLink functions: no NVLink "
                  "information",
                  soname);
        dlclose(lib);
        return ACCEL_OK;
    }
    rc = topo__nvml_apply(t, &api, err);
    dlclose(lib);
    return rc;
}
