/*
 * node.c: the node model's plain-data side and the intra-node plan.  Nothing
 * here calls hwloc, NVML or the file system: the plan is a pure function of a
 * struct accel_topo and a request, so it is tested on XML models of machines
 * that are not here, and every node with the same hardware and the same
 * granted GPUs gets the same plan.  docs/topology.md states the rules in the
 * order they are applied; the comments below say why each one is there.  The
 * order of nodes in a job is not decided here (cluster.c).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "accel/alloc.h"
#include "accel/buf.h"
#include "topo_int.h"

/* ---------------------------------------------------------------- model */

void accel_topo_free(struct accel_topo *t)
{
    if (t == NULL)
        return;
    for (unsigned i = 0; t->gpus != NULL && i < t->ngpus; i++)
        accel_free(t->gpus[i].pci.cpus);
    for (unsigned i = 0; t->nics != NULL && i < t->nnics; i++)
        accel_free(t->nics[i].pci.cpus);
    for (unsigned i = 0; t->nvswitches != NULL && i < t->nnvswitches; i++)
        accel_free(t->nvswitches[i].cpus);
    if (t->numa != NULL)
        for (unsigned i = 0; i < t->nnuma; i++) {
            accel_free(t->numa[i].cpus);
            accel_free(t->numa[i].pus);
            accel_free(t->numa[i].core);
        }
    accel_free(t->numa);
    accel_free(t->gpus);
    accel_free(t->nics);
    accel_free(t->nvswitches);
    accel_free(t->nvlink);
    memset(t, 0, sizeof(*t));
}

void accel_node_plan_free(struct accel_node_plan *p)
{
    if (p == NULL)
        return;
    if (p->ranks != NULL)
        for (unsigned i = 0; i < p->nranks; i++)
            accel_free(p->ranks[i].cpus);
    accel_free(p->ranks);
    memset(p, 0, sizeof(*p));
}

const char *accel_link_name(enum accel_link link)
{
    switch (link) {
    case ACCEL_LINK_NONE:
        return "NONE";
    case ACCEL_LINK_NVSWITCH:
        return "NVSWITCH";
    case ACCEL_LINK_NVLINK:
        return "NVLINK";
    case ACCEL_LINK_PCI_SWITCH:
        return "PCI_SWITCH";
    case ACCEL_LINK_NUMA:
        return "NUMA";
    case ACCEL_LINK_SYS:
        return "SYS";
    }
    return "?";
}

const char *accel_nic_kind_name(enum accel_nic_kind kind)
{
    switch (kind) {
    case ACCEL_NIC_IB:
        return "InfiniBand";
    case ACCEL_NIC_ROCE:
        return "RoCE";
    case ACCEL_NIC_ETHERNET:
        return "Ethernet";
    }
    return "?";
}

int topo__cmp_uint(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

    return x < y ? -1 : x > y;
}

enum accel_err topo__cpulist(const unsigned *pus, unsigned n, char **out)
{
    enum accel_err rc = ACCEL_ENOMEM;
    struct accel_buf b;
    unsigned *v = NULL;

    *out = NULL;
    accel_buf_init(&b, (size_t)n * 24 + 1);
    if (n == 0) {
        *out = accel_strdup("");
        return *out ? ACCEL_OK : ACCEL_ENOMEM;
    }
    v = accel_malloc((size_t)n * sizeof(*v));
    if (v == NULL)
        goto out;
    memcpy(v, pus, (size_t)n * sizeof(*v));
    qsort(v, n, sizeof(*v), topo__cmp_uint);
    for (unsigned i = 0; i < n;) {
        unsigned j = i;

        while (j + 1 < n && (v[j + 1] == v[j] || v[j + 1] == v[j] + 1))
            j++;
        rc = v[j] == v[i] ? accel_buf_printf(&b, "%s%u", i ? "," : "", v[i])
                          : accel_buf_printf(&b, "%s%u-%u", i ? "," : "", v[i], v[j]);
        if (rc != ACCEL_OK)
            goto out;
        i = j + 1;
    }
    *out = accel_buf_take(&b);
    rc = *out ? ACCEL_OK : ACCEL_ENOMEM;
out:
    accel_free(v);
    accel_buf_free(&b);
    return rc;
}

/* ---------------------------------------------------------------- distances */

/* NUMA nodes that have CPUs: a memory-only node (HBM, CXL, GPU memory) is no
 * place to run a rank. */
static uint64_t cpu_nodes(const struct accel_topo *t)
{
    uint64_t m = 0;

    for (unsigned i = 0; i < t->nnuma && i < 64; i++)
        if (t->numa[i].npus > 0)
            m |= (uint64_t)1 << i;
    return m;
}

/* Where a device's ranks take CPUs: its NUMA nodes that have CPUs, or every
 * such node when its locality is unknown (a VM that reports no NUMA node). */
static uint64_t cpu_domain(const struct accel_topo *t, uint64_t mask)
{
    uint64_t all = cpu_nodes(t);

    return (mask & all) ? (mask & all) : all;
}

static int first_bit(uint64_t m)
{
    for (int i = 0; i < 64; i++)
        if (m & ((uint64_t)1 << i))
            return i;
    return -1;
}

static unsigned common_path(const struct accel_topo_pci *a, const struct accel_topo_pci *b)
{
    unsigned n = 0;

    while (n < a->depth && n < b->depth && strcmp(a->path[n], b->path[n]) == 0)
        n++;
    return n;
}

/* The PCI and CPU side of a link.  path[0] is the host bridge, so a shared
 * path[1] or deeper is a shared PCI bridge below it. */
static enum accel_link pci_link(const struct accel_topo *t, const struct accel_topo_pci *a,
                                const struct accel_topo_pci *b)
{
    unsigned c = common_path(a, b);

    if (c >= 2)
        return ACCEL_LINK_PCI_SWITCH;
    if (c == 1 || (a->numa & b->numa & cpu_nodes(t)) != 0)
        return ACCEL_LINK_NUMA;
    return ACCEL_LINK_SYS;
}

static enum accel_link gpu_link(const struct accel_topo *t, unsigned a, unsigned b)
{
    if (t->nvlink_source != ACCEL_NVLINK_UNKNOWN) {
        if (t->gpus[a].nvswitch_mbps > 0 && t->gpus[b].nvswitch_mbps > 0)
            return ACCEL_LINK_NVSWITCH;
        if (t->nvlink != NULL &&
            (t->nvlink[a * t->ngpus + b] > 0 || t->nvlink[b * t->ngpus + a] > 0))
            return ACCEL_LINK_NVLINK;
    }
    return pci_link(t, &t->gpus[a].pci, &t->gpus[b].pci);
}

/* ---------------------------------------------------------------- order */

/* The socket a GPU's ranks count as: the package of the first NUMA node with
 * CPUs it is local to; INT_MAX (last) when unknown. */
static int gpu_socket(const struct accel_topo *t, unsigned g)
{
    int i = first_bit(cpu_domain(t, t->gpus[g].pci.numa));

    return i < 0 || t->numa[i].package < 0 ? INT_MAX : t->numa[i].package;
}

static int cmp_pci(const struct accel_topo_pci *a, const struct accel_topo_pci *b)
{
    if (a->domain != b->domain)
        return a->domain < b->domain ? -1 : 1;
    if (a->bus != b->bus)
        return a->bus < b->bus ? -1 : 1;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    if (a->func != b->func)
        return a->func < b->func ? -1 : 1;
    return 0;
}

/* Base order: socket, then first NUMA node, then PCI bus order.  Bus numbers
 * are handed out depth first, so GPUs behind one PCI switch are neighbours. */
static int base_before(const struct accel_topo *t, unsigned a, unsigned b)
{
    int sa = gpu_socket(t, a), sb = gpu_socket(t, b), c;

    if (sa != sb)
        return sa < sb ? -1 : 1;
    sa = first_bit(cpu_domain(t, t->gpus[a].pci.numa));
    sb = first_bit(cpu_domain(t, t->gpus[b].pci.numa));
    if (sa != sb)
        return sa < sb ? -1 : 1;
    c = cmp_pci(&t->gpus[a].pci, &t->gpus[b].pci);
    return c ? c : (a < b ? -1 : a > b);
}

/* Orders the granted GPUs: sockets one after the other (so each socket's
 * ranks are contiguous); inside a socket, from the GPU closest to the one
 * before, always on to the closest unused GPU, ties in base order.  With
 * equal links everywhere (an NVSwitch node, or plain PCI) this is the base
 * order; on an NVLink mesh it follows the links. */
static void order_picks(const struct accel_topo *t, struct topo__pick *picks, unsigned n)
{
    struct topo__pick sorted[ACCEL_TOPO_MAX_GPUS];
    bool used[ACCEL_TOPO_MAX_GPUS] = {false};
    unsigned out = 0;
    int prev = -1;

    /* insertion sort: n <= 64, and stable */
    for (unsigned i = 0; i < n; i++) {
        unsigned j = i;

        while (j > 0 && base_before(t, picks[i].gpu, sorted[j - 1].gpu) < 0) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = picks[i];
    }
    while (out < n) {
        int sock = -1;
        unsigned first = 0;

        for (unsigned i = 0; i < n; i++)
            if (!used[i]) {
                sock = gpu_socket(t, sorted[i].gpu);
                first = i;
                break;
            }
        for (;;) {
            int best = -1;
            enum accel_link best_link = ACCEL_LINK_SYS;

            for (unsigned i = first; i < n; i++) {
                enum accel_link l;

                if (used[i] || gpu_socket(t, sorted[i].gpu) != sock)
                    continue;
                l = prev < 0 ? ACCEL_LINK_NONE : gpu_link(t, (unsigned)prev, sorted[i].gpu);
                if (best < 0 || l < best_link) {
                    best = (int)i;
                    best_link = l;
                }
            }
            if (best < 0)
                break;
            used[best] = true;
            picks[out++] = sorted[best];
            prev = (int)sorted[best].gpu;
        }
    }
}

/* ---------------------------------------------------------------- NICs */

/* RDMA NICs when the node has any (NCCL's IB transport uses them; a plain
 * interface next to them is usually management), else Ethernet ones. */
static bool nic_eligible(const struct accel_topo *t, unsigned n)
{
    bool rdma = false;

    for (unsigned i = 0; i < t->nnics; i++)
        if (t->nics[i].kind != ACCEL_NIC_ETHERNET)
            rdma = true;
    return rdma ? t->nics[n].kind != ACCEL_NIC_ETHERNET : true;
}

/* Three passes.  First each GPU that has NICs behind its own PCI switch
 * takes one (GPUDirect RDMA without crossing the CPU: the rail-optimized
 * layout); then GPUs without one take a NIC of their NUMA node; then the
 * rest one across the CPU interconnect (SYS), which is what NCCL would use
 * anyway when the node's only RDMA NICs sit on the other socket.  Within a
 * pass the NIC used least so far wins, then the one deeper under a common
 * bridge, then PCI order: GPUs spread over the NICs they share. */
static void assign_nics(const struct accel_topo *t, struct accel_node_plan *p)
{
    static const enum accel_link passes[] = {ACCEL_LINK_PCI_SWITCH, ACCEL_LINK_NUMA,
                                             ACCEL_LINK_SYS};
    unsigned uses[ACCEL_TOPO_MAX_NICS] = {0};

    for (size_t pass = 0; pass < sizeof(passes) / sizeof(passes[0]); pass++) {
        enum accel_link want = passes[pass];

        for (unsigned r = 0; r < p->nranks; r++) {
            const struct accel_topo_pci *g;
            int best = -1;
            unsigned best_depth = 0;

            if (p->ranks[r].nic >= 0)
                continue;
            g = &t->gpus[p->ranks[r].gpu].pci;
            for (unsigned n = 0; n < t->nnics; n++) {
                unsigned depth = common_path(g, &t->nics[n].pci);

                if (!nic_eligible(t, n) || pci_link(t, g, &t->nics[n].pci) != want)
                    continue;
                if (best < 0 || uses[n] < uses[best] ||
                    (uses[n] == uses[best] && depth > best_depth)) {
                    best = (int)n;
                    best_depth = depth;
                }
            }
            if (best >= 0) {
                p->ranks[r].nic = best;
                p->ranks[r].nic_link = want;
                uses[best]++;
            }
        }
    }
}

/* ---------------------------------------------------------------- CPUs */

/* Gives each rank CPUs of its domain (a set of NUMA nodes): the ranks that
 * share a domain split its cores in rank order, contiguous and disjoint, so
 * threads of two ranks do not compete; with more ranks than cores, ranks share
 * cores round the domain. */
static enum accel_err assign_cpus(const struct accel_topo *t, struct accel_node_plan *p,
                                  const uint64_t *dom)
{
    enum accel_err rc = ACCEL_OK;
    unsigned total = 0, *pus = NULL, *coreat = NULL, *mine = NULL;

    for (unsigned i = 0; i < t->nnuma; i++)
        total += t->numa[i].npus;
    pus = accel_malloc(((size_t)total + 1) * sizeof(*pus));
    coreat = accel_malloc(((size_t)total + 2) * sizeof(*coreat));
    mine = accel_malloc(((size_t)total + 1) * sizeof(*mine));
    if (pus == NULL || coreat == NULL || mine == NULL) {
        rc = ACCEL_ENOMEM;
        goto out;
    }
    for (unsigned r = 0; r < p->nranks; r++) {
        unsigned m = 0, j = 0, npus = 0, ncores = 0, s, e, nmine = 0;
        int first;

        if (p->ranks[r].cpus != NULL)
            continue;
        for (unsigned q = 0; q < p->nranks; q++)
            if (dom[q] == dom[r]) {
                if (q < r)
                    j++;
                m++;
            }
        /* the domain's PUs, core by core; coreat[k] = first PU of core k */
        for (unsigned i = 0; i < t->nnuma && i < 64; i++) {
            if (!(dom[r] & ((uint64_t)1 << i)))
                continue;
            for (unsigned k = 0; k < t->numa[i].npus; k++) {
                if (k == 0 || t->numa[i].core[k] != t->numa[i].core[k - 1])
                    coreat[ncores++] = npus;
                pus[npus++] = t->numa[i].pus[k];
            }
        }
        coreat[ncores] = npus;
        if (ncores > 0) {
            s = (unsigned)((unsigned long long)j * ncores / m);
            e = (unsigned)((unsigned long long)(j + 1) * ncores / m);
            if (e <= s)
                e = s + 1;
            for (unsigned k = coreat[s]; k < coreat[e]; k++)
                mine[nmine++] = pus[k];
        }
        rc = topo__cpulist(mine, nmine, &p->ranks[r].cpus);
        if (rc != ACCEL_OK)
            goto out;
        first = first_bit(dom[r]);
        p->ranks[r].numa = first < 0 ? -1 : (int)t->numa[first].os_index;
    }
out:
    accel_free(pus);
    accel_free(coreat);
    accel_free(mine);
    return rc;
}

/* ---------------------------------------------------------------- plan */

static enum accel_err plan_alloc(struct accel_node_plan *out, unsigned n, bool cpu_only)
{
    out->ranks = accel_calloc(n, sizeof(*out->ranks));
    if (out->ranks == NULL)
        return ACCEL_ENOMEM;
    out->nranks = n;
    out->cpu_only = cpu_only;
    for (unsigned i = 0; i < n; i++) {
        out->ranks[i].gpu = -1;
        out->ranks[i].numa = -1;
        out->ranks[i].nic = -1;
    }
    return ACCEL_OK;
}

/* CPU-only: the NUMA nodes with CPUs, in tree order, are dealt out in blocks:
 * rank r gets nodes [r*N/P, (r+1)*N/P) (at least one), so each node's ranks
 * are contiguous and a rank of a small job spans several nodes. */
static enum accel_err plan_cpu(const struct accel_topo *t, unsigned nproc,
                               struct accel_node_plan *out, uint64_t *dom)
{
    unsigned idx[64], nn = 0;
    uint64_t all = cpu_nodes(t);
    enum accel_err rc = plan_alloc(out, nproc, true);

    if (rc != ACCEL_OK)
        return rc;
    for (unsigned i = 0; i < t->nnuma && i < 64; i++)
        if (all & ((uint64_t)1 << i))
            idx[nn++] = i;
    for (unsigned r = 0; r < nproc; r++) {
        unsigned lo = (unsigned)((unsigned long long)r * nn / nproc);
        unsigned hi = (unsigned)((unsigned long long)(r + 1) * nn / nproc);

        dom[r] = 0;
        if (hi <= lo)
            hi = lo + 1;
        for (unsigned k = lo; k < hi && k < nn; k++)
            dom[r] |= (uint64_t)1 << idx[k];
    }
    rc = assign_cpus(t, out, dom);
    for (unsigned r = 0; rc == ACCEL_OK && r < nproc; r++) {
        const struct accel_node_rank *a = &out->ranks[r], *b = &out->ranks[(r + 1) % nproc];

        int ia = first_bit(dom[r]), ib = first_bit(dom[(r + 1) % nproc]);

        /* same NUMA node, or two nodes of one socket (sub-NUMA clustering) */
        if (nproc == 1)
            out->ranks[r].next = ACCEL_LINK_NONE;
        else if (a->numa == b->numa || (ia >= 0 && ib >= 0 && t->numa[ia].package >= 0 &&
                                        t->numa[ia].package == t->numa[ib].package))
            out->ranks[r].next = ACCEL_LINK_NUMA;
        else
            out->ranks[r].next = ACCEL_LINK_SYS;
    }
    return rc;
}

static enum accel_err plan_gpu(const struct accel_topo *t, const struct accel_plan_req *req,
                               struct accel_node_plan *out, uint64_t *dom, struct accel_error *err)
{
    struct topo__pick picks[ACCEL_TOPO_MAX_GPUS];
    unsigned n = 0;
    enum accel_err rc = topo__resolve_ids(t, req, picks, &n, err);

    if (rc != ACCEL_OK)
        return rc;
    if (req->nproc > n) {
        if (req->gpus == NULL)
            return accel_error_set(
                err, ACCEL_ELAYOUT,
                "placement: %u local ranks, but this node has %u GPUs (one rank per GPU)",
                req->nproc, n);
        return accel_error_set(
            err, ACCEL_ELAYOUT,
            "placement: %u local ranks, but only %u GPUs are granted (\"%s\"; one rank "
            "per GPU)",
            req->nproc, n, req->gpus);
    }
    order_picks(t, picks, n);
    rc = plan_alloc(out, req->nproc, false);
    if (rc != ACCEL_OK)
        return accel_error_set(err, rc, "placement: out of memory planning %u ranks", req->nproc);
    for (unsigned r = 0; r < req->nproc; r++) {
        struct accel_node_rank *k = &out->ranks[r];

        k->gpu = (int)picks[r].gpu;
        memcpy(k->gpu_id, picks[r].id, sizeof(k->gpu_id));
        memcpy(k->busid, t->gpus[picks[r].gpu].pci.busid, sizeof(k->busid));
        dom[r] = cpu_domain(t, t->gpus[picks[r].gpu].pci.numa);
        k->next = req->nproc == 1 ? ACCEL_LINK_NONE
                                  : gpu_link(t, picks[r].gpu, picks[(r + 1) % req->nproc].gpu);
    }
    assign_nics(t, out);
    rc = assign_cpus(t, out, dom);
    if (rc != ACCEL_OK)
        return accel_error_set(err, rc, "placement: out of memory planning %u ranks", req->nproc);
    return ACCEL_OK;
}

enum accel_err accel_topo_plan(const struct accel_topo *t, const struct accel_plan_req *req,
                               struct accel_node_plan *out, struct accel_error *err)
{
    uint64_t *dom = NULL;
    enum accel_err rc;

    if (out != NULL)
        memset(out, 0, sizeof(*out));
    if (t == NULL || req == NULL || out == NULL)
        return accel_error_set(err, ACCEL_EINVAL, "placement: NULL argument");
    if (req->nproc == 0)
        return accel_error_set(err, ACCEL_EINVAL, "placement: no local ranks to place");
    if (req->nproc > ACCEL_TOPO_MAX_RANKS)
        return accel_error_set(err, ACCEL_ETOOBIG, "placement: %u local ranks; the limit is %u",
                               req->nproc, ACCEL_TOPO_MAX_RANKS);
    dom = accel_calloc(req->nproc, sizeof(*dom));
    if (dom == NULL)
        return accel_error_set(err, ACCEL_ENOMEM, "placement: out of memory planning %u ranks",
                               req->nproc);
    if (req->cpu_only || topo__gpus_none(req->gpus) || (t->ngpus == 0 && req->gpus == NULL)) {
        rc = plan_cpu(t, req->nproc, out, dom);
        if (rc != ACCEL_OK)
            accel_error_set(err, rc, "placement: out of memory planning %u ranks", req->nproc);
    } else {
        rc = plan_gpu(t, req, out, dom, err);
    }
    accel_free(dom);
    if (rc != ACCEL_OK)
        accel_node_plan_free(out);
    return rc;
}
