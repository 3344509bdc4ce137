/*
 * nvml.c: the NVIDIA driver's version and the GPUs this job may use, asked
 * of NVML (libnvidia-ml.so.1, the driver's own library) by dlopen, so that
 * accelrun neither links nor needs it: a node without a driver just has no
 * GPUs.  Only the handful of NVML calls below, declared here with the types
 * of nvml.h (stable since the v2 entry points of driver 325).
 * CUDA_VISIBLE_DEVICES is applied as the CUDA runtime does: indices or UUID
 * prefixes, up to the first entry that names no device.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pf_int.h"

typedef void *nvml_device;
struct nvml_memory {
    unsigned long long total, free, used;
};

struct nvml {
    void *lib;
    int (*init)(void);
    int (*shutdown)(void);
    int (*driver)(char *, unsigned);
    int (*count)(unsigned *);
    int (*by_index)(unsigned, nvml_device *);
    int (*name)(nvml_device, char *, unsigned);
    int (*uuid)(nvml_device, char *, unsigned);
    int (*cc)(nvml_device, int *, int *);
    int (*memory)(nvml_device, struct nvml_memory *);
};

static bool load(struct nvml *n, char *why, size_t size)
{
    static const char *const names[] = {"nvmlInit_v2",
                                        "nvmlShutdown",
                                        "nvmlSystemGetDriverVersion",
                                        "nvmlDeviceGetCount_v2",
                                        "nvmlDeviceGetHandleByIndex_v2",
                                        "nvmlDeviceGetName",
                                        "nvmlDeviceGetUUID",
                                        "nvmlDeviceGetCudaComputeCapability",
                                        "nvmlDeviceGetMemoryInfo"};
    void **slots[] = {(void **)&n->init,  (void **)&n->shutdown, (void **)&n->driver,
                      (void **)&n->count, (void **)&n->by_index, (void **)&n->name,
                      (void **)&n->uuid,  (void **)&n->cc,       (void **)&n->memory};

    memset(n, 0, sizeof(*n));
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        const char *e = dlerror();
        snprintf(why, size, "no NVIDIA driver (%s)", e ? e : "libnvidia-ml.so.1 not found");
        return false;
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *slots[i] = dlsym(n->lib, names[i]);
        if (!*slots[i]) {
            snprintf(why, size, "libnvidia-ml.so.1 has no %s (a driver older than NVML v2?)",
                     names[i]);
            dlclose(n->lib);
            return false;
        }
    }
    return true;
}

/* The device a CUDA_VISIBLE_DEVICES entry names: its index, or -1 for an
 * empty entry, an index past the last GPU, a UUID (or prefix: "GPU-8f1c",
 * or without "GPU-") that no GPU or more than one has, or a MIG instance
 * (not counted here: NVML lists the parent GPUs). */
static int find(const struct nvml *n, unsigned count, const char *entry, size_t len)
{
    char want[96];
    size_t d = 0;
    int found = -1;

    while (d < len && isdigit((unsigned char)entry[d]))
        d++;
    if (len == 0 || len >= sizeof(want))
        return -1;
    if (d == len) {
        unsigned long i = len < 6 ? strtoul(entry, NULL, 10) : count;
        return i < count ? (int)i : -1;
    }
    snprintf(want, sizeof(want), "%.*s", (int)len, entry);
    if (strncmp(want, "MIG-", 4) == 0)
        return -1;
    for (unsigned i = 0; i < count; i++) {
        nvml_device dev;
        char uuid[96];
        if (n->by_index(i, &dev) != 0 || n->uuid(dev, uuid, sizeof(uuid)) != 0)
            continue;
        if (strncmp(uuid, want, len) == 0 ||
            (strncmp(uuid, "GPU-", 4) == 0 && strncmp(uuid + 4, want, len) == 0)) {
            if (found >= 0)
                return -1; /* ambiguous, as CUDA finds it */
            found = (int)i;
        }
    }
    return found;
}

bool pf__nvml(struct accel_pf_versions *v, char *why, size_t size)
{
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    struct nvml n;
    unsigned count = 0;
    int order[ACCEL_PF_MAX_GPUS];
    size_t norder = 0;

    v->driver[0] = '\0';
    v->ngpus = 0;
    if (!load(&n, why, size))
        return false;
    if (n.init() != 0) {
        snprintf(why, size, "NVML did not start (nvmlInit_v2 failed: is the driver loaded?)");
        dlclose(n.lib);
        return false;
    }
    if (n.driver(v->driver, sizeof(v->driver)) != 0)
        pf__copy(v->driver, sizeof(v->driver), "?");
    if (n.count(&count) != 0)
        count = 0;
    if (!vis) {
        for (unsigned i = 0; i < count && norder < ACCEL_PF_MAX_GPUS; i++)
            order[norder++] = (int)i;
    } else {
        for (const char *s = vis; *s && norder < ACCEL_PF_MAX_GPUS;) {
            size_t len = strcspn(s, ",");
            int i = find(&n, count, s, len);
            if (i < 0)
                break; /* as CUDA: the list ends at the first entry that names nothing */
            order[norder++] = i;
            s += len;
            s += *s == ',';
        }
    }
    for (size_t k = 0; k < norder; k++) {
        struct accel_pf_gpu *g = &v->gpu[v->ngpus];
        struct nvml_memory m = {0};
        nvml_device dev;
        int ma = 0, mi = 0;

        if (n.by_index((unsigned)order[k], &dev) != 0)
            continue;
        if (n.name(dev, g->name, sizeof(g->name)) != 0)
            pf__copy(g->name, sizeof(g->name), "?");
        if (n.cc(dev, &ma, &mi) == 0 && ma >= 0 && mi >= 0) {
            g->cc_major = (unsigned)ma;
            g->cc_minor = (unsigned)mi;
        }
        if (n.memory(dev, &m) == 0) {
            g->mem_total = m.total;
            g->mem_free = m.free;
            g->mem_used = m.used;
        }
        v->ngpus++;
    }
    n.shutdown();
    dlclose(n.lib);
    return true;
}
