/*
 * topo_int.h: what the intra-node topology files share, and what the unit
 * tests reach besides the public accel/topo.h: the CPU-list formatter, and
 * the NVML pass with its table of functions, so that a test can run the pass
 * on fake NVML answers (no GPU, no driver here).  Internal: the names carry
 * the topo__ prefix and may change without notice.
 */
#ifndef TOPO_INT_H
#define TOPO_INT_H

#include "accel/topo.h"

/* "0-3,8,10-11" for the `n` PU numbers at `pus` (any order, repeats allowed)
 * into a new string (*out, accel_free).  "" for n == 0.  ACCEL_ENOMEM. */
enum accel_err topo__cpulist(const unsigned *pus, unsigned n, char **out) ACCEL_WUR;

/* qsort's comparator of unsigned ints. */
int topo__cmp_uint(const void *a, const void *b);

/* One granted GPU (granted.c): the id as the list gave it, and the GPU of
 * the model it names. */
struct topo__pick {
    unsigned gpu;
    char id[64];
};

/* True for a list that grants no GPU: "" or Slurm's "NoDevFiles". */
bool topo__gpus_none(const char *s);

/* Fills picks[] (*n of them, at most ACCEL_TOPO_MAX_GPUS) from req's
 * granted list (every GPU of t when it has none).  Errors name the id and
 * the list: ACCEL_EINVAL (empty, malformed or repeated), ACCEL_ETOOBIG (past
 * the caps), ACCEL_ENOTFOUND (not on this node), ACCEL_EUNSUPPORTED (a MIG
 * instance). */
enum accel_err topo__resolve_ids(const struct accel_topo *t, const struct accel_plan_req *req,
                                 struct topo__pick *picks, unsigned *n,
                                 struct accel_error *err) ACCEL_WUR;

/* hwloc_xml.c: an hwloc XML export copied into *out without comments and,
 * with `v3`, rewritten into the 2.x dialect (ACCEL_EPARSE for markup that
 * does not close, ACCEL_ENOMEM); and the major version of an export
 * (<topology version="3.0">), 0 when it names none (hwloc 1.x). */
struct accel_buf;
enum accel_err topo__xml_normalize(const char *in, size_t len, bool v3, struct accel_buf *out,
                                   struct accel_error *err) ACCEL_WUR;
unsigned topo__xml_major(const char *xml, size_t len);

/* NVML as the driver's libnvidia-ml.so.1 declares it (nvml.h is not needed to
 * build; the layouts below are those of nvml.h, as NCCL and hwloc copy them). */
typedef struct topo__nvml_dev *topo__nvml_device; /* nvmlDevice_t */
typedef enum {
    TOPO_NVML_SUCCESS = 0,
    TOPO_NVML_ERROR_UNKNOWN = 999
} topo__nvml_return; /* nvmlReturn_t: only "success or not" matters here */
typedef enum { TOPO_NVML_DISABLED = 0, TOPO_NVML_ENABLED = 1 } topo__nvml_enable;
typedef enum {
    TOPO_NVML_PEER_GPU = 0x00,
    TOPO_NVML_PEER_IBMNPU = 0x01,
    TOPO_NVML_PEER_SWITCH = 0x02,
    TOPO_NVML_PEER_UNKNOWN = 0xFF
} topo__nvml_peer; /* nvmlIntNvLinkDeviceType_t */

/* nvmlPciInfo_t.  Only domain, bus and device are read; they sit at the same
 * offsets in the legacy and the _v2 layout.  `spare` leaves room should a
 * driver write a longer structure. */
struct topo__nvml_pci {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
    char spare[160];
};

/* The functions the pass calls; those marked optional may be NULL. */
struct topo__nvml_api {
    topo__nvml_return (*init)(void);     /* nvmlInit_v2 */
    topo__nvml_return (*shutdown)(void); /* nvmlShutdown */
    topo__nvml_return (*by_busid)(const char *busid, topo__nvml_device *dev);
    topo__nvml_return (*name)(topo__nvml_device dev, char *buf, unsigned len); /* optional */
    topo__nvml_return (*uuid)(topo__nvml_device dev, char *buf, unsigned len); /* optional */
    topo__nvml_return (*link_state)(topo__nvml_device dev, unsigned link, topo__nvml_enable *on);
    topo__nvml_return (*link_remote_pci)(topo__nvml_device dev, unsigned link,
                                         struct topo__nvml_pci *pci);
    topo__nvml_return (*link_version)(topo__nvml_device dev, unsigned link,
                                      unsigned *version); /* optional */
    topo__nvml_return (*link_remote_type)(topo__nvml_device dev, unsigned link,
                                          topo__nvml_peer *type); /* optional */
};

/* NVLink links probed per GPU (NVML_NVLINK_MAX_LINKS is 18 up to NVLink 5;
 * links past a GPU's last one answer an error and are skipped). */
#define TOPO_NVML_MAX_LINKS 32

/* Adds what NVML says to *t: GPU names and UUIDs, and, unless the model
 * already has NVLink information, the NVLink matrix and each GPU's bandwidth
 * to NVSwitches (nvlink_source becomes ACCEL_NVLINK_NVML when a link is
 * found).  Every NVML failure means "NVML does not say": a GPU NVML cannot
 * open (another cgroup's) is skipped.  Errors: ACCEL_ENOMEM only. */
enum accel_err topo__nvml_apply(struct accel_topo *t, const struct topo__nvml_api *api,
                                struct accel_error *err) ACCEL_WUR;

/* Loads `soname` with dlopen and runs topo__nvml_apply with its functions.  A
 * library that does not load or lacks a required function adds nothing (a
 * debug line says why).  Errors: ACCEL_ENOMEM only. */
enum accel_err topo__nvml_load(struct accel_topo *t, const char *soname,
                               struct accel_error *err) ACCEL_WUR;

#endif
