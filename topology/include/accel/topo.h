/*
 * accel/topo.h: one node's hardware as plain data, and where the node's local
 * ranks go on it (DESIGN decision 7, the intra-node half; the order of nodes
 * is accel/cluster.h).
 *
 * Discovery fills a struct accel_topo: GPUs, NICs and NVSwitches as PCI
 * functions with the PCI bridges above them and the NUMA nodes they are local
 * to; the NUMA nodes with their CPUs; the NVLink bandwidth between GPUs when
 * something reported it.  It comes from hwloc, either the live machine
 * (accel_topo_discover, which adds NVLink from NVML when libnvidia-ml.so.1 can
 * be loaded at run time) or an hwloc XML export (accel_topo_load_xml; hwloc
 * 2.x and 3.x exports are both read).  Planning (accel_topo_plan) is a pure
 * function of the model and a request: no I/O, the same inputs give the same
 * plan, so every node of a job with the same hardware and the same granted
 * GPUs puts local rank i on the same GPU, NIC rail and CPUs.  docs/topology.md
 * gives the rules and their order.
 *
 * Only NVIDIA GPUs are planned (the plan feeds CUDA_VISIBLE_DEVICES); a GPU's
 * node-wide id is its position in PCI bus order, the numbering of nvidia-smi,
 * of Slurm's AutoDetect=nvml and of CUDA under CUDA_DEVICE_ORDER=PCI_BUS_ID.
 *
 * Ownership: a struct accel_topo or accel_node_plan is owned by the caller and
 * owns every array and string it points to; accel_topo_free and
 * accel_node_plan_free release them (both accept a zeroed struct, and calling
 * them twice is harmless).  Nothing is kept in globals; the functions are safe
 * to call from several threads on different structs.
 */
#ifndef ACCEL_TOPO_H
#define ACCEL_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accel/err.h"
#include "accel/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps.  Passing one is ACCEL_ETOOBIG with a message that names it. */
#define ACCEL_TOPO_MAX_XML (32u << 20) /* bytes of an hwloc XML file or buffer */
#define ACCEL_TOPO_MAX_GPUS 64         /* GPUs on one node */
#define ACCEL_TOPO_MAX_NICS 256        /* NICs (RDMA devices and interfaces) */
#define ACCEL_TOPO_MAX_NVSWITCHES 64   /* NVSwitch chips */
#define ACCEL_TOPO_MAX_NUMA 64         /* NUMA nodes (a 64-bit mask per device) */
#define ACCEL_TOPO_MAX_PUS 16384       /* logical CPUs */
#define ACCEL_TOPO_MAX_PCI_DEPTH 16    /* PCI bridges above a device, host bridge included */
#define ACCEL_TOPO_MAX_RANKS 1024      /* local ranks in one plan */
#define ACCEL_TOPO_MAX_GRANTED 4096    /* bytes of a granted GPU list */

/* One PCI function and the way up to its CPUs. */
struct accel_topo_pci {
    char busid[24];  /* "0000:1b:00.0", lower-case hex, as hwloc and sysfs spell it */
    unsigned domain; /* the same, as numbers */
    unsigned bus, dev, func;
    unsigned vendor, device; /* PCI ids: 0x10de NVIDIA, 0x15b3 Mellanox */
    unsigned class_id;       /* class and subclass: 0x0302 3D controller, 0x0207 InfiniBand */
    uint64_t numa;           /* bit i: local to topo->numa[i]; 0 = locality unknown */
    char *cpus;              /* the CPUs of those NUMA nodes, as a list ("0-55,112-167"), owned */
    unsigned depth;          /* entries of path[] in use */
    /* The bridges above the device, top down: path[0] is its host bridge as
     * "0000:[15-1c]" (domain and bus range), then each PCI bridge (root port,
     * switch ports) by bus id.  Two devices that share path[0] and path[1] are
     * behind one PCI switch or root port. */
    char path[ACCEL_TOPO_MAX_PCI_DEPTH][24];
};

struct accel_topo_gpu {
    struct accel_topo_pci pci;
    char model[96];         /* "NVIDIA H100 80GB HBM3" (NVML, or the PCI name); "" unknown */
    char uuid[64];          /* "GPU-5d0c…" when NVML or the XML gave it, else "" */
    uint64_t nvswitch_mbps; /* NVLink bandwidth to NVSwitches, MB/s; 0 none or unknown */
};

enum accel_nic_kind {
    ACCEL_NIC_IB,      /* RDMA device on an InfiniBand port: NCCL_IB_HCA */
    ACCEL_NIC_ROCE,    /* RDMA device on an Ethernet port: NCCL_IB_HCA */
    ACCEL_NIC_ETHERNET /* plain interface, no RDMA device: NCCL_SOCKET_IFNAME */
};

struct accel_topo_nic {
    struct accel_topo_pci pci;
    enum accel_nic_kind kind;
    char name[32];   /* the RDMA device ("mlx5_0") for IB and RoCE, the interface ("eth0") else */
    char netdev[32]; /* an IP interface of the same function ("ib0"), "" if none */
};

/* A NUMA node.  Every allowed logical CPU (PU) belongs to exactly one node:
 * the smallest whose cpuset holds it (memory-only nodes such as HBM, CXL or
 * GPU memory get none). */
struct accel_topo_numa {
    unsigned os_index;
    int package; /* os index of its Package (socket); -1 unknown */
    char *cpus;  /* its PUs as a list, "0-55,112-167"; "" when it has none */
    unsigned npus;
    unsigned *pus;  /* [npus] PU os indices, the PUs of one core next to each other */
    unsigned *core; /* [npus] core number of each PU; equal numbers = one core */
};

enum accel_nvlink_source {
    ACCEL_NVLINK_UNKNOWN, /* nothing said: link classes come from PCI and NUMA only */
    ACCEL_NVLINK_XML,     /* hwloc's "NVLinkBandwidth" matrix in the topology */
    ACCEL_NVLINK_NVML     /* asked NVML on this machine */
};

struct accel_topo {
    char product[64]; /* DMI product name ("DGX H100"), "" unknown */
    unsigned ngpus, nnics, nnvswitches, nnuma;
    struct accel_topo_gpu *gpus;       /* [ngpus] in PCI bus order: the index is the GPU id */
    struct accel_topo_nic *nics;       /* [nnics] in PCI bus order */
    struct accel_topo_pci *nvswitches; /* [nnvswitches] in PCI bus order */
    struct accel_topo_numa *numa;      /* [nnuma] in hwloc's logical (tree) order */
    enum accel_nvlink_source nvlink_source;
    /* [ngpus * ngpus] MB/s of direct NVLink from GPU i to GPU j at [i * ngpus + j];
     * NULL when nvlink_source is ACCEL_NVLINK_UNKNOWN. */
    uint64_t *nvlink;
};

/* Reads the hwloc XML export at `path` (at most ACCEL_TOPO_MAX_XML bytes;
 * `lstopo --of xml` or `hwloc-ls --of xml`, hwloc 2.x or 3.x) into *t, which
 * it initializes; it describes that machine, so NVML is not asked.  The file
 * is trusted input: malformed tags are refused, but hwloc's reader is not
 * hardened (docs/topology.md, LIMITS).  On error *t is left empty (free it or
 * not).  Errors: ACCEL_ENOTFOUND, ACCEL_EPERM, ACCEL_EIO (reading),
 * ACCEL_EINVAL (not a regular file, NULL argument), ACCEL_ETOOBIG (file or a
 * cap above), ACCEL_EPARSE (malformed, or hwloc refused it), ACCEL_ENOMEM.
 * The message names the path. */
enum accel_err accel_topo_load_xml(struct accel_topo *t, const char *path,
                                   struct accel_error *err) ACCEL_WUR;

/* The same from `len` bytes at `xml` (not necessarily NUL-terminated; the
 * buffer stays the caller's). */
enum accel_err accel_topo_load_xmlbuffer(struct accel_topo *t, const char *xml, size_t len,
                                         struct accel_error *err) ACCEL_WUR;

/* Discovers this machine with hwloc (PCI devices from sysfs; only the CPUs
 * this process may use, as a cgroup or cpuset allows) and, when
 * libnvidia-ml.so.1 loads, NVLink peers, GPU names and UUIDs from NVML.  A
 * missing NVML is the normal case on a machine without NVIDIA's driver: no
 * NVLink information, not an error.  hwloc's own environment variables apply
 * (HWLOC_XMLFILE makes it read that file instead).  Errors: ACCEL_EIO (hwloc
 * could not discover), ACCEL_ETOOBIG, ACCEL_ENOMEM. */
enum accel_err accel_topo_discover(struct accel_topo *t, struct accel_error *err) ACCEL_WUR;

/* Releases what *t owns and zeroes it.  NULL is allowed. */
void accel_topo_free(struct accel_topo *t);

/* Link classes, closest first.  A plan reports, for each local rank, the class
 * of the link to the next rank (GPU to GPU, or NUMA to NUMA for CPU ranks) and
 * of the link from its GPU to its NIC. */
enum accel_link {
    ACCEL_LINK_NONE,       /* no peer: a plan of one rank, or no NIC */
    ACCEL_LINK_NVSWITCH,   /* both GPUs reach an NVSwitch fabric over NVLink */
    ACCEL_LINK_NVLINK,     /* direct NVLink between the two GPUs */
    ACCEL_LINK_PCI_SWITCH, /* behind one PCI switch or root port (nvidia-smi PIX/PXB) */
    ACCEL_LINK_NUMA,       /* same host bridge or NUMA node (PHB/NODE) */
    ACCEL_LINK_SYS         /* across the CPU interconnect (SYS) */
};

/* "NONE", "NVSWITCH", "NVLINK", "PCI_SWITCH", "NUMA", "SYS"; "?" otherwise. */
const char *accel_link_name(enum accel_link link);

/* "InfiniBand", "RoCE", "Ethernet"; "?" otherwise. */
const char *accel_nic_kind_name(enum accel_nic_kind kind);

/* What to place.  `gpus` is the list the scheduler granted, as it wrote it
 * (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS): comma-separated ids, either
 * integers or full "GPU-…" UUIDs.  Node-wide integers are GPU ids
 * (topo->gpus[id]).  With `local_ids` (Slurm with task/cgroup and
 * ConstrainDevices) integer k is the k-th granted GPU in PCI order, and
 * `physical` gives the node-wide ids of the granted GPUs (SLURM_STEP_GPUS);
 * without `physical` local ids are accepted only when every GPU of the node is
 * granted.  The plan only ever uses ids from `gpus`, spelled as there. */
struct accel_plan_req {
    unsigned nproc;       /* local ranks, 1..ACCEL_TOPO_MAX_RANKS */
    const char *gpus;     /* NULL: every GPU of the node; "" or "NoDevFiles": none */
    bool local_ids;       /* integers in `gpus` count the granted GPUs, not the node's */
    const char *physical; /* with local_ids: node-wide ids of the granted GPUs, or NULL */
    bool cpu_only;        /* plan CPUs only even where GPUs are granted */
};

struct accel_node_rank {
    int gpu;                  /* index in topo->gpus; -1 in a CPU-only plan */
    char gpu_id[64];          /* the id as `gpus` spells it ("5", "GPU-…"); "" CPU-only */
    char busid[24];           /* the GPU's PCI bus id; "" CPU-only */
    int numa;                 /* os index of the NUMA node its CPUs are on; -1 unknown */
    char *cpus;               /* its CPUs as a list ("0-13,112-125"), owned by the plan */
    int nic;                  /* index in topo->nics; -1 none (CPU-only, or no NIC near) */
    enum accel_link nic_link; /* PCI_SWITCH, NUMA or SYS when nic >= 0, else NONE */
    enum accel_link next;     /* link to local rank (i + 1) mod nranks; NONE for one rank */
};

struct accel_node_plan {
    unsigned nranks;
    bool cpu_only;                 /* no GPU in this plan */
    struct accel_node_rank *ranks; /* [nranks]: ranks[i] is local rank i, owned */
};

/* Places req->nproc local ranks on the node *t describes (rules in
 * docs/topology.md): GPUs from the granted list only, ranks of one socket
 * contiguous, consecutive ranks on the closest links, each GPU's NIC behind
 * the same PCI switch or else on the same NUMA node, CPUs of the GPU's NUMA
 * node split between the ranks that share it.  Without GPUs (none on the node,
 * none granted, or req->cpu_only) the plan is CPU-only: ranks spread over the
 * NUMA nodes in blocks.  *out is initialized; on error it is left empty.
 * Errors: ACCEL_EINVAL (nproc 0, a malformed or repeated id, local ids that
 * cannot be mapped), ACCEL_ENOTFOUND (an id the node does not have),
 * ACCEL_EUNSUPPORTED (a MIG id), ACCEL_ELAYOUT (more ranks than granted GPUs;
 * the message names both numbers), ACCEL_ETOOBIG, ACCEL_ENOMEM. */
enum accel_err accel_topo_plan(const struct accel_topo *t, const struct accel_plan_req *req,
                               struct accel_node_plan *out, struct accel_error *err) ACCEL_WUR;

/* Releases what *p owns and zeroes it.  NULL is allowed. */
void accel_node_plan_free(struct accel_node_plan *p);

/* Number of ids in a comma-separated GPU list as a scheduler writes it
 * ("0,2,3" is 3; "" is 0).  Only commas are counted: "NoDevFiles" is 1. */
unsigned accel_gpu_list_count(const char *list);

/* Fills core's placement from a plan of *t: every rank gets the same
 * CUDA_VISIBLE_DEVICES, the granted list `granted` (as req->gpus spelled it;
 * NULL = every GPU of *t by id) in plan order: the GPUs of local ranks 0, 1,
 * 2, ... first, then the granted GPUs no rank took, in their order.
 * accelerate opens device LOCAL_RANK of the visible list, so local rank i
 * runs on the plan's GPU for rank i.  ranks[i] also gets local rank i's NIC
 * as NCCL_IB_HCA ("=mlx5_0": exact match) for an RDMA NIC or as
 * NCCL_SOCKET_IFNAME ("=eth0") for an Ethernet one; then *out = {p->nranks,
 * ranks}.  `ranks` (cap entries) stays the caller's and must outlive *out.
 * Errors: ACCEL_ETOOBIG (cap < p->nranks, or a value longer than its field),
 * ACCEL_EINVAL (a plan that does not fit *t or whose GPUs are not all in
 * `granted`). */
enum accel_err accel_node_plan_export(const struct accel_topo *t, const struct accel_node_plan *p,
                                      const char *granted, struct accel_rank_plan *ranks,
                                      unsigned cap, struct accel_plan *out,
                                      struct accel_error *err) ACCEL_WUR;

/* Binds the calling process to the CPUs of `cpus` (a list, "0-13,112-125")
 * that it may use already: never widens.  ACCEL_OK also when that changes
 * nothing.  Errors: ACCEL_EINVAL (not a list, a CPU past the kernel's mask),
 * ACCEL_ENOTFOUND (none of them is allowed to the process), ACCEL_EIO. */
enum accel_err accel_topo_bind_cpus(const char *cpus, struct accel_error *err) ACCEL_WUR;

#ifdef __cplusplus
}
#endif

#endif
