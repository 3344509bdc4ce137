/*
 * hwloc.c: the discovery backend.  hwloc builds the tree, from the live
 * machine (PCI devices from sysfs) or from an XML export; this file walks it
 * once, copies what the plan needs into struct accel_topo and destroys the
 * hwloc topology, so nothing hwloc owns outlives the call.  hwloc 2.x cannot
 * read the XML that hwloc 3.x writes, so a 3.x export is first rewritten into
 * the 2.x dialect the way hwloc 3's own v2 export does (hwloc_xml.c).  This file decides
 * nothing about placement (node.c) and does not talk to the GPU driver
 * (nvml.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hwloc.h>

#include "accel/alloc.h"
#include "accel/buf.h"
#include "accel/fsutil.h"
#include "accel/log.h"
#include "topo_int.h"

/* ---------------------------------------------------------------- hwloc 2 vs 3 */

enum osdev_kind { OSDEV_OTHER, OSDEV_NETWORK, OSDEV_OPENFABRICS };

#if HWLOC_API_VERSION >= 0x00030000
#define HWLOC_READS_V3 1
/* hwloc 3: a bitmask; an OpenFabrics device is also a network device. */
static enum osdev_kind osdev_kind(hwloc_obj_t o)
{
    if (o->attr->osdev.types & HWLOC_OBJ_OSDEV_OPENFABRICS)
        return OSDEV_OPENFABRICS;
    if (o->attr->osdev.types & HWLOC_OBJ_OSDEV_NETWORK)
        return OSDEV_NETWORK;
    return OSDEV_OTHER;
}
#else
#define HWLOC_READS_V3 0
static enum osdev_kind osdev_kind(hwloc_obj_t o)
{
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
        return OSDEV_OPENFABRICS;
    if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK)
        return OSDEV_NETWORK;
    return OSDEV_OTHER;
}
#endif

/* ---------------------------------------------------------------- tree -> model */

struct dev {
    hwloc_obj_t pci; /* the PCI function */
    hwloc_obj_t os;  /* for a NIC, the OS device that names it */
};

struct found {
    struct dev gpu[ACCEL_TOPO_MAX_GPUS], nic[ACCEL_TOPO_MAX_NICS], nvs[ACCEL_TOPO_MAX_NVSWITCHES];
    unsigned ngpu, nnic, nnvs;
};

static int cmp_dev(const struct dev *a, const struct dev *b)
{
    const struct hwloc_pcidev_attr_s *x = &a->pci->attr->pcidev, *y = &b->pci->attr->pcidev;

    if (x->domain != y->domain)
        return x->domain < y->domain ? -1 : 1;
    if (x->bus != y->bus)
        return x->bus < y->bus ? -1 : 1;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->func != y->func)
        return x->func < y->func ? -1 : 1;
    if (a->os != NULL && b->os != NULL && a->os->name != NULL && b->os->name != NULL)
        return strcmp(a->os->name, b->os->name);
    return 0;
}

/* Stable: devices that compare equal keep hwloc's (tree) order. */
static void sort_devs(struct dev *d, unsigned n)
{
    for (unsigned i = 1; i < n; i++) {
        struct dev x = d[i];
        unsigned j = i;

        while (j > 0 && cmp_dev(&x, &d[j - 1]) < 0) {
            d[j] = d[j - 1];
            j--;
        }
        d[j] = x;
    }
}

static bool is_nvswitch(hwloc_obj_t o)
{
    const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;

    /* hwloc's NVML backend marks the NVSwitches it sees NVLinks to, even
     * when their config space reads as zeros (one does on the DGX-2). */
    return (o->subtype != NULL && strcmp(o->subtype, "NVSwitch") == 0) ||
           (a->vendor_id == 0x10de && a->class_id == 0x0680);
}

static bool is_gpu(hwloc_obj_t o)
{
    return o->attr->pcidev.vendor_id == 0x10de && (o->attr->pcidev.class_id >> 8) == 0x03 &&
           !is_nvswitch(o);
}

static enum accel_err add_dev(struct dev *list, unsigned *n, unsigned cap, hwloc_obj_t pci,
                              hwloc_obj_t os, const char *what, struct accel_error *err)
{
    if (*n == cap)
        return accel_error_set(err, ACCEL_ETOOBIG, "topology: more than %u %s on this node", cap,
                               what);
    list[*n].pci = pci;
    list[*n].os = os;
    (*n)++;
    return ACCEL_OK;
}

static enum accel_err find_devices(hwloc_topology_t h, struct found *f, struct accel_error *err)
{
    enum accel_err rc = ACCEL_OK;

    for (hwloc_obj_t o = hwloc_get_next_pcidev(h, NULL); o && rc == ACCEL_OK;
         o = hwloc_get_next_pcidev(h, o)) {
        bool rdma = false;

        if (is_nvswitch(o))
            rc = add_dev(f->nvs, &f->nnvs, ACCEL_TOPO_MAX_NVSWITCHES, o, NULL, "NVSwitches", err);
        else if (is_gpu(o))
            rc = add_dev(f->gpu, &f->ngpu, ACCEL_TOPO_MAX_GPUS, o, NULL, "GPUs", err);
        for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling)
            if (c->type == HWLOC_OBJ_OS_DEVICE && osdev_kind(c) == OSDEV_OPENFABRICS)
                rdma = true;
        /* An RDMA device is the NIC; its IP interfaces (ib0, or the RoCE
         * port's eth) are not NICs of their own.  A function without one is
         * plain Ethernet, one NIC per interface. */
        for (hwloc_obj_t c = o->io_first_child; c && rc == ACCEL_OK; c = c->next_sibling)
            if (c->type == HWLOC_OBJ_OS_DEVICE && c->name != NULL &&
                osdev_kind(c) == (rdma ? OSDEV_OPENFABRICS : OSDEV_NETWORK))
                rc = add_dev(f->nic, &f->nnic, ACCEL_TOPO_MAX_NICS, o, c, "NICs", err);
    }
    sort_devs(f->gpu, f->ngpu);
    sort_devs(f->nic, f->nnic);
    sort_devs(f->nvs, f->nnvs);
    return rc;
}

/* The PUs of the device's NUMA nodes, as a list. */
static enum accel_err local_cpus(const struct accel_topo *t, struct accel_topo_pci *p,
                                 struct accel_error *err)
{
    unsigned n = 0, *pus;
    enum accel_err rc;

    for (unsigned i = 0; i < t->nnuma; i++)
        if ((p->numa >> i) & 1)
            n += t->numa[i].npus;
    pus = accel_malloc(((size_t)n + 1) * sizeof(*pus));
    if (pus == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "topology: out of memory building it");
    n = 0;
    for (unsigned i = 0; i < t->nnuma; i++)
        if ((p->numa >> i) & 1) {
            memcpy(pus + n, t->numa[i].pus, t->numa[i].npus * sizeof(*pus));
            n += t->numa[i].npus;
        }
    rc = topo__cpulist(pus, n, &p->cpus);
    accel_free(pus);
    if (rc != ACCEL_OK)
        return accel_error_set(err, rc, "topology: out of memory building it");
    return ACCEL_OK;
}

static enum accel_err fill_pci(hwloc_topology_t h, const struct accel_topo *t, hwloc_obj_t o,
                               struct accel_topo_pci *p, struct accel_error *err)
{
    const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
    hwloc_obj_t up[ACCEL_TOPO_MAX_PCI_DEPTH], nonio;
    unsigned n = 0;

    snprintf(p->busid, sizeof(p->busid), "%04x:%02x:%02x.%01x", (unsigned)a->domain, a->bus, a->dev,
             a->func);
    p->domain = a->domain;
    p->bus = a->bus;
    p->dev = a->dev;
    p->func = a->func;
    p->vendor = a->vendor_id;
    p->device = a->device_id;
    p->class_id = a->class_id;
    for (hwloc_obj_t b = o->parent; b != NULL && b->type == HWLOC_OBJ_BRIDGE; b = b->parent) {
        if (n == ACCEL_TOPO_MAX_PCI_DEPTH)
            return accel_error_set(err, ACCEL_ETOOBIG,
                                   "topology: PCI device %s is below more than %u bridges",
                                   p->busid, ACCEL_TOPO_MAX_PCI_DEPTH);
        up[n++] = b;
    }
    p->depth = n;
    for (unsigned i = 0; i < n; i++) {
        hwloc_obj_t b = up[n - 1 - i];

        if (b->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST)
            snprintf(p->path[i], sizeof(p->path[i]), "%04x:[%02x-%02x]",
                     (unsigned)b->attr->bridge.downstream.pci.domain,
                     b->attr->bridge.downstream.pci.secondary_bus,
                     b->attr->bridge.downstream.pci.subordinate_bus);
        else
            snprintf(p->path[i], sizeof(p->path[i]), "%04x:%02x:%02x.%01x",
                     (unsigned)b->attr->bridge.upstream.pci.domain,
                     b->attr->bridge.upstream.pci.bus, b->attr->bridge.upstream.pci.dev,
                     b->attr->bridge.upstream.pci.func);
    }
    p->numa = 0;
    nonio = hwloc_get_non_io_ancestor_obj(h, o);
    if (nonio != NULL && nonio->nodeset != NULL)
        for (unsigned i = 0; i < t->nnuma; i++)
            if (hwloc_bitmap_isset(nonio->nodeset, t->numa[i].os_index))
                p->numa |= (uint64_t)1 << i;
    return local_cpus(t, p, err);
}

static const char *child_info(hwloc_obj_t o, const char *name)
{
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
        const char *v = hwloc_obj_get_info_by_name(c, name);

        if (v != NULL)
            return v;
    }
    return NULL;
}

static enum accel_nic_kind rdma_kind(hwloc_obj_t pci, hwloc_obj_t os)
{
    unsigned cls = pci->attr->pcidev.class_id;
    const char *lid = hwloc_obj_get_info_by_name(os, "Port1LID");

    /* ConnectX and friends report the port type in the PCI class: 0x0207
     * (0x0c06 on older HCAs) in InfiniBand mode, 0x0200 in Ethernet mode.
     * Otherwise an InfiniBand port has a LID, a RoCE port has none. */
    if (cls == 0x0207 || cls == 0x0c06)
        return ACCEL_NIC_IB;
    if ((cls >> 8) == 0x02)
        return ACCEL_NIC_ROCE;
    return lid != NULL && strtoul(lid, NULL, 16) != 0 ? ACCEL_NIC_IB : ACCEL_NIC_ROCE;
}

static void fill_nic_names(hwloc_obj_t pci, hwloc_obj_t os, struct accel_topo_nic *nic)
{
    snprintf(nic->name, sizeof(nic->name), "%s", os->name);
    if (nic->kind == ACCEL_NIC_ETHERNET) {
        snprintf(nic->netdev, sizeof(nic->netdev), "%s", os->name);
        return;
    }
    for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling)
        if (c->type == HWLOC_OBJ_OS_DEVICE && c->name != NULL && osdev_kind(c) == OSDEV_NETWORK &&
            (nic->netdev[0] == '\0' || strncmp(c->name, "ib", 2) == 0)) {
            snprintf(nic->netdev, sizeof(nic->netdev), "%s", c->name);
            if (strncmp(c->name, "ib", 2) == 0)
                break;
        }
}

/* The NUMA nodes in tree order; each allowed PU goes to the smallest node
 * whose cpuset holds it (a memory-only node shares its parent's cpuset). */
static enum accel_err fill_numa(hwloc_topology_t h, struct accel_topo *t, struct accel_error *err)
{
    int nn = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
    int npu = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU);
    unsigned *owner = NULL;
    enum accel_err rc = ACCEL_OK;

    if (nn > ACCEL_TOPO_MAX_NUMA)
        return accel_error_set(err, ACCEL_ETOOBIG, "topology: %d NUMA nodes; the limit is %u", nn,
                               ACCEL_TOPO_MAX_NUMA);
    if (npu > ACCEL_TOPO_MAX_PUS)
        return accel_error_set(err, ACCEL_ETOOBIG, "topology: %d logical CPUs; the limit is %u",
                               npu, ACCEL_TOPO_MAX_PUS);
    if (nn <= 0 || npu <= 0)
        return accel_error_set(err, ACCEL_EPARSE, "topology: no %s", nn <= 0 ? "NUMA node" : "CPU");
    t->numa = accel_calloc((size_t)nn, sizeof(*t->numa));
    owner = accel_calloc((size_t)npu, sizeof(*owner));
    if (t->numa == NULL || owner == NULL) {
        rc = ACCEL_ENOMEM;
        goto out;
    }
    t->nnuma = (unsigned)nn;
    for (int i = 0; i < nn; i++) {
        hwloc_obj_t node = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, (unsigned)i);
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_PACKAGE, node);

        t->numa[i].os_index = node->os_index;
        t->numa[i].package = pkg ? (int)pkg->os_index : -1;
    }
    for (int k = 0; k < npu; k++) {
        hwloc_obj_t pu = hwloc_get_obj_by_type(h, HWLOC_OBJ_PU, (unsigned)k);
        int best = -1, best_w = INT_MAX;

        for (int i = 0; i < nn; i++) {
            hwloc_obj_t node = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, (unsigned)i);
            int w;

            if (node->cpuset == NULL || !hwloc_bitmap_isset(node->cpuset, pu->os_index))
                continue;
            w = hwloc_bitmap_weight(node->cpuset);
            if (w >= 0 && w < best_w) {
                best = i;
                best_w = w;
            }
        }
        owner[k] = best < 0 ? UINT_MAX : (unsigned)best;
        if (best >= 0)
            t->numa[best].npus++;
    }
    for (int i = 0; i < nn; i++) {
        struct accel_topo_numa *m = &t->numa[i];
        unsigned n = 0;

        m->pus = accel_calloc(m->npus + 1, sizeof(*m->pus));
        m->core = accel_calloc(m->npus + 1, sizeof(*m->core));
        if (m->pus == NULL || m->core == NULL) {
            rc = ACCEL_ENOMEM;
            goto out;
        }
        for (int k = 0; k < npu; k++) {
            hwloc_obj_t pu, core;

            if (owner[k] != (unsigned)i)
                continue;
            pu = hwloc_get_obj_by_type(h, HWLOC_OBJ_PU, (unsigned)k);
            core = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_CORE, pu);
            m->pus[n] = pu->os_index;
            m->core[n] = core ? core->logical_index : (unsigned)npu + pu->logical_index;
            n++;
        }
        rc = topo__cpulist(m->pus, m->npus, &m->cpus);
        if (rc != ACCEL_OK)
            goto out;
    }
out:
    accel_free(owner);
    if (rc == ACCEL_ENOMEM)
        accel_error_set(err, rc, "topology: out of memory building it");
    return rc;
}

/* hwloc's NVML backend records NVLink as the "NVLinkBandwidth" matrix (MB/s)
 * between GPUs (as their NVML OS devices) and NVSwitches (PCI devices). */
static enum accel_err fill_nvlink(hwloc_topology_t h, struct accel_topo *t, const struct found *f,
                                  struct accel_error *err)
{
    struct hwloc_distances_s *d = NULL;
    unsigned nr = 1, n;
    int *gpu = NULL, *nvs = NULL;
    enum accel_err rc = ACCEL_OK;

    if (hwloc_distances_get_by_name(h, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0 ||
        d == NULL || t->ngpus == 0)
        goto out;
    n = d->nbobjs;
    gpu = accel_calloc(n, sizeof(*gpu));
    nvs = accel_calloc(n, sizeof(*nvs));
    t->nvlink = accel_calloc((size_t)t->ngpus * t->ngpus, sizeof(*t->nvlink));
    if (gpu == NULL || nvs == NULL || t->nvlink == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "topology: out of memory reading NVLink bandwidth");
        goto out;
    }
    for (unsigned k = 0; k < n; k++) {
        hwloc_obj_t o = d->objs[k];

        while (o != NULL && o->type == HWLOC_OBJ_OS_DEVICE)
            o = o->parent;
        gpu[k] = nvs[k] = -1;
        for (unsigned i = 0; i < f->ngpu; i++)
            if (f->gpu[i].pci == o)
                gpu[k] = (int)i;
        for (unsigned i = 0; i < f->nnvs; i++)
            if (f->nvs[i].pci == o)
                nvs[k] = (int)i;
    }
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < n; j++) {
            hwloc_uint64_t v = d->values[i * n + j];

            if (i == j || gpu[i] < 0 || v == 0)
                continue;
            if (gpu[j] >= 0 && gpu[j] != gpu[i]) {
                uint64_t *cell = &t->nvlink[(unsigned)gpu[i] * t->ngpus + (unsigned)gpu[j]];
                *cell = v > *cell ? v : *cell;
            } else if (nvs[j] >= 0) {
                t->gpus[gpu[i]].nvswitch_mbps += v;
            }
        }
    t->nvlink_source = ACCEL_NVLINK_XML;
out:
    if (t->nvlink_source == ACCEL_NVLINK_UNKNOWN) {
        accel_free(t->nvlink);
        t->nvlink = NULL;
    }
    accel_free(gpu);
    accel_free(nvs);
    if (d != NULL)
        hwloc_distances_release(h, d);
    return rc;
}

static enum accel_err build(hwloc_topology_t h, struct accel_topo *t, struct accel_error *err)
{
    struct found *f = accel_calloc(1, sizeof(*f));
    const char *product;
    enum accel_err rc;

    if (f == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "topology: out of memory building it");
    product = hwloc_obj_get_info_by_name(hwloc_get_root_obj(h), "DMIProductName");
    snprintf(t->product, sizeof(t->product), "%s", product ? product : "");
    rc = fill_numa(h, t, err);
    if (rc == ACCEL_OK)
        rc = find_devices(h, f, err);
    if (rc != ACCEL_OK)
        goto out;
    t->gpus = accel_calloc(f->ngpu + 1, sizeof(*t->gpus));
    t->nics = accel_calloc(f->nnic + 1, sizeof(*t->nics));
    t->nvswitches = accel_calloc(f->nnvs + 1, sizeof(*t->nvswitches));
    if (t->gpus == NULL || t->nics == NULL || t->nvswitches == NULL) {
        rc = accel_error_set(err, ACCEL_ENOMEM, "topology: out of memory building it");
        goto out;
    }
    t->ngpus = f->ngpu;
    t->nnics = f->nnic;
    t->nnvswitches = f->nnvs;
    for (unsigned i = 0; rc == ACCEL_OK && i < f->ngpu; i++) {
        struct accel_topo_gpu *g = &t->gpus[i];
        const char *model = child_info(f->gpu[i].pci, "GPUModel");
        const char *uuid = child_info(f->gpu[i].pci, "NVIDIAUUID");

        if (model == NULL)
            model = hwloc_obj_get_info_by_name(f->gpu[i].pci, "PCIDevice");
        snprintf(g->model, sizeof(g->model), "%s", model ? model : "");
        snprintf(g->uuid, sizeof(g->uuid), "%s", uuid ? uuid : "");
        rc = fill_pci(h, t, f->gpu[i].pci, &g->pci, err);
    }
    for (unsigned i = 0; rc == ACCEL_OK && i < f->nnic; i++) {
        struct accel_topo_nic *nic = &t->nics[i];

        nic->kind = osdev_kind(f->nic[i].os) == OSDEV_OPENFABRICS
                        ? rdma_kind(f->nic[i].pci, f->nic[i].os)
                        : ACCEL_NIC_ETHERNET;
        fill_nic_names(f->nic[i].pci, f->nic[i].os, nic);
        rc = fill_pci(h, t, f->nic[i].pci, &nic->pci, err);
    }
    for (unsigned i = 0; rc == ACCEL_OK && i < f->nnvs; i++)
        rc = fill_pci(h, t, f->nvs[i].pci, &t->nvswitches[i], err);
    if (rc == ACCEL_OK)
        rc = fill_nvlink(h, t, f, err);
out:
    accel_free(f);
    return rc;
}

/* ---------------------------------------------------------------- entry points */

static enum accel_err topology_new(hwloc_topology_t *h, unsigned long flags,
                                   struct accel_error *err)
{
    if (hwloc_topology_init(h) != 0)
        return accel_error_sys(err, ACCEL_ENOMEM, "topology: couldn't start hwloc");
    /* Every PCI device, bridge and OS device: the bridges are the PCI switch
     * chain, and NVSwitches are "other bridge" devices hwloc drops by default. */
    if (hwloc_topology_set_io_types_filter(*h, HWLOC_TYPE_FILTER_KEEP_ALL) != 0 ||
        hwloc_topology_set_flags(*h, flags) != 0) {
        hwloc_topology_destroy(*h);
        return accel_error_sys(err, ACCEL_EIO, "topology: couldn't configure hwloc");
    }
    return ACCEL_OK;
}

enum accel_err accel_topo_load_xmlbuffer(struct accel_topo *t, const char *xml, size_t len,
                                         struct accel_error *err)
{
    hwloc_topology_t h;
    struct accel_buf v2;
    const char *buf;
    size_t blen;
    enum accel_err rc;

    if (t == NULL || (xml == NULL && len > 0))
        return accel_error_set(err, ACCEL_EINVAL, "hwloc XML: NULL argument");
    memset(t, 0, sizeof(*t));
    if (len > ACCEL_TOPO_MAX_XML)
        return accel_error_set(err, ACCEL_ETOOBIG, "hwloc XML: %zu bytes; the limit is %u bytes",
                               len, ACCEL_TOPO_MAX_XML);
    accel_buf_init(&v2, (size_t)ACCEL_TOPO_MAX_XML + 64);
    rc = topo__xml_normalize(xml, len, !HWLOC_READS_V3 && topo__xml_major(xml, len) == 3, &v2, err);
    if (rc != ACCEL_OK)
        goto out;
    /* hwloc wants the terminating NUL inside `size` */
    buf = accel_buf_str(&v2);
    blen = strlen(buf);
    rc = topology_new(&h, HWLOC_TOPOLOGY_FLAG_IMPORT_SUPPORT, err);
    if (rc != ACCEL_OK)
        goto out;
    if (hwloc_topology_set_xmlbuffer(h, buf, (int)blen + 1) != 0 || hwloc_topology_load(h) != 0)
        rc = accel_error_set(err, ACCEL_EPARSE,
                             "hwloc XML: hwloc couldn't read it (export format version %u; "
                             "accelrun reads hwloc's versions 2 and 3)",
                             topo__xml_major(xml, len));
    else
        rc = build(h, t, err);
    hwloc_topology_destroy(h);
out:
    accel_buf_free(&v2);
    if (rc != ACCEL_OK)
        accel_topo_free(t);
    return rc;
}

enum accel_err accel_topo_load_xml(struct accel_topo *t, const char *path, struct accel_error *err)
{
    char *data = NULL;
    size_t len = 0;
    enum accel_err rc;

    if (t == NULL || path == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "hwloc XML: NULL argument");
    memset(t, 0, sizeof(*t));
    rc = accel_read_file(path, ACCEL_TOPO_MAX_XML, &data, &len, err);
    if (rc == ACCEL_OK) {
        rc = accel_topo_load_xmlbuffer(t, data, len, err);
        if (rc != ACCEL_OK && err != NULL) {
            char msg[sizeof(err->msg)];

            snprintf(msg, sizeof(msg), "%s", err->msg);
            accel_error_set(err, rc, "%s: %s", path, msg);
        }
    }
    accel_free(data);
    return rc;
}

enum accel_err accel_topo_discover(struct accel_topo *t, struct accel_error *err)
{
    hwloc_topology_t h;
    enum accel_err rc;

    if (t == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "topology: NULL argument");
    memset(t, 0, sizeof(*t));
    rc = topology_new(&h, 0, err);
    if (rc != ACCEL_OK)
        return rc;
    if (hwloc_topology_load(h) != 0)
        rc = accel_error_sys(err, ACCEL_EIO, "topology: hwloc couldn't discover this machine");
    else
        rc = build(h, t, err);
    hwloc_topology_destroy(h);
    if (rc == ACCEL_OK)
        rc = topo__nvml_load(t, "libnvidia-ml.so.1", err);
    if (rc != ACCEL_OK)
        accel_topo_free(t);
    else
        accel_log(ACCEL_LOG_DEBUG, "topology: %u GPUs, %u NICs, %u NVSwitches, %u NUMA nodes%s",
                  t->ngpus, t->nnics, t->nnvswitches, t->nnuma,
                  t->nvlink_source == ACCEL_NVLINK_NVML ? ", NVLink from NVML" : "");
    return rc;
}
