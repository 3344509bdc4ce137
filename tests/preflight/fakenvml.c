/*
 * fakenvml.c: a stand-in libnvidia-ml.so.1 for the preflight's tests on
 * machines without a GPU (tests/preflight/run.sh puts it on
 * LD_LIBRARY_PATH).  It answers the nine NVML calls core/preflight/nvml.c
 * makes, with the GPUs that FAKE_NVML describes:
 *
 *   FAKE_NVML="NAME,CC,TOTAL_GIB,USED_GIB;..."   e.g.
 *   FAKE_NVML="Tesla V100-SXM2-16GB,7.0,16,0;NVIDIA H100 80GB HBM3,9.0,80,2"
 *
 * FAKE_NVML_DRIVER is the driver version (default 550.54.15); FAKE_NVML
 * unset or "fail" makes nvmlInit_v2 fail.  Test code: never installed.  On a
 * machine with a GPU, tests/gpu/run.sh runs the same checks on the real one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 16

struct gpu {
    char name[96];
    int major, minor;
    unsigned long long total, used;
};
struct memory {
    unsigned long long total, free, used;
};

static struct gpu gpus[MAX_GPUS];
static unsigned ngpus;

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlSystemGetDriverVersion(char *buf, unsigned len);
int nvmlDeviceGetCount_v2(unsigned *n);
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev);
int nvmlDeviceGetName(void *dev, char *buf, unsigned len);
int nvmlDeviceGetUUID(void *dev, char *buf, unsigned len);
int nvmlDeviceGetCudaComputeCapability(void *dev, int *major, int *minor);
int nvmlDeviceGetMemoryInfo(void *dev, struct memory *m);

int nvmlInit_v2(void)
{
    const char *spec = getenv("FAKE_NVML");
    char buf[2048], *save = NULL;

    if (!spec || strcmp(spec, "fail") == 0)
        return 1; /* NVML_ERROR_UNINITIALIZED */
    snprintf(buf, sizeof(buf), "%s", spec);
    ngpus = 0;
    for (char *g = strtok_r(buf, ";", &save); g && ngpus < MAX_GPUS;
         g = strtok_r(NULL, ";", &save)) {
        struct gpu *d = &gpus[ngpus];
        double total = 0, used = 0;
        char *comma = strchr(g, ',');
        if (!comma)
            continue;
        snprintf(d->name, sizeof(d->name), "%.*s", (int)(comma - g), g);
        if (sscanf(comma + 1, "%d.%d,%lf,%lf", &d->major, &d->minor, &total, &used) != 4)
            continue;
        d->total = (unsigned long long)(total * 1073741824.0);
        d->used = (unsigned long long)(used * 1073741824.0);
        ngpus++;
    }
    return 0;
}

int nvmlShutdown(void)
{
    return 0;
}

int nvmlSystemGetDriverVersion(char *buf, unsigned len)
{
    const char *v = getenv("FAKE_NVML_DRIVER");
    snprintf(buf, len, "%s", v ? v : "550.54.15");
    return 0;
}

int nvmlDeviceGetCount_v2(unsigned *n)
{
    *n = ngpus;
    return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev)
{
    if (i >= ngpus)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *dev = &gpus[i];
    return 0;
}

int nvmlDeviceGetName(void *dev, char *buf, unsigned len)
{
    snprintf(buf, len, "%s", ((struct gpu *)dev)->name);
    return 0;
}

int nvmlDeviceGetUUID(void *dev, char *buf, unsigned len)
{
    snprintf(buf, len, "GPU-fake0000-%04d", (int)((struct gpu *)dev - gpus));
    return 0;
}

int nvmlDeviceGetCudaComputeCapability(void *dev, int *major, int *minor)
{
    *major = ((struct gpu *)dev)->major;
    *minor = ((struct gpu *)dev)->minor;
    return 0;
}

int nvmlDeviceGetMemoryInfo(void *dev, struct memory *m)
{
    const struct gpu *g = dev;
    m->total = g->total;
    m->used = g->used;
    m->free = g->total - g->used;
    return 0;
}
