/*
 * test_topo.c: the intra-node topology: hwloc discovery into the node model
 * (XML exports of real machines from the shared corpus, hwloc 3.x dialect
 * included, and tests/topo/dgx-h100.xml), the NVML pass on fake NVML answers
 * (this machine has no GPU and no driver), and the plan: GPUs only from the
 * granted list, sockets contiguous, each GPU's NIC behind its PCI switch or on
 * its NUMA node, CPUs local to the GPU, CPU-only plans, the errors, the export
 * into core's struct accel_plan, determinism and allocation failures.
 *
 * The expected plans in `corpus` were worked out by hand from the XML files
 * (bus numbers, bridges, sockets); docs/topology.md shows the same tables.
 * Cases that need the shared corpus say SKIP when it is absent.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <stdint.h>
#include <sys/stat.h>

#include "accel/alloc.h"
#include "accel/topo.h"
#include "../../topology/topo_int.h"
#include "../harness/test.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define H100 "tests/topo/dgx-h100.xml"
#define MAX_CPU 16384

/* ---------------------------------------------------------------- helpers */

static const char *corpus_file(const char *name)
{
    static char path[4096];
    struct stat st;

    snprintf(path, sizeof(path), "%s/hwloc-xml/%s", test_corpus_dir(), name);
    if (stat(path, &st) != 0)
        SKIP("shared corpus not found (set ACCEL_SHARED)");
    return path;
}

static void load(const char *path, struct accel_topo *t)
{
    struct accel_error e = {0};
    enum accel_err rc = accel_topo_load_xml(t, path, &e);

    if (rc != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "loading %s: %s: %s", path, accel_errname(rc), e.msg);
}

static void plan(const struct accel_topo *t, const struct accel_plan_req *req,
                 struct accel_node_plan *p)
{
    struct accel_error e = {0};
    enum accel_err rc = accel_topo_plan(t, req, p, &e);

    if (rc != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "plan: %s: %s", accel_errname(rc), e.msg);
}

static void plan_fails(const struct accel_topo *t, const struct accel_plan_req *req,
                       enum accel_err want, const char *msg_part)
{
    struct accel_error e = {0};
    struct accel_node_plan p;

    ASSERT_INT_EQ(accel_topo_plan(t, req, &p, &e), want);
    ASSERT_INT_EQ(e.code, want);
    ASSERT_CONTAINS(e.msg, msg_part);
    ASSERT_INT_EQ(p.nranks, 0);
    ASSERT(p.ranks == NULL);
}

/* Parses a CPU list ("0-3,8") into set[]; returns how many CPUs. */
static unsigned parse_cpus(const char *s, bool *set)
{
    unsigned n = 0;

    memset(set, 0, MAX_CPU * sizeof(*set));
    while (*s) {
        char *end;
        unsigned long a = strtoul(s, &end, 10), b = a;

        ASSERT(end != s);
        if (*end == '-')
            b = strtoul(end + 1, &end, 10);
        ASSERT(a <= b && b < MAX_CPU);
        for (unsigned long c = a; c <= b; c++) {
            ASSERT(!set[c]); /* sorted, no repeats */
            set[c] = true;
            n++;
        }
        ASSERT(*end == ',' || *end == '\0');
        s = *end ? end + 1 : end;
    }
    return n;
}

static unsigned common(const struct accel_topo_pci *a, const struct accel_topo_pci *b)
{
    unsigned n = 0;

    while (n < a->depth && n < b->depth && strcmp(a->path[n], b->path[n]) == 0)
        n++;
    return n;
}

static int numa_index(const struct accel_topo *t, int os)
{
    for (unsigned i = 0; i < t->nnuma; i++)
        if ((int)t->numa[i].os_index == os)
            return (int)i;
    return -1;
}

static bool in_list(const char *list, const char *id)
{
    char buf[ACCEL_TOPO_MAX_GRANTED + 1], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", list);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        size_t n;

        while (*tok == ' ')
            tok++;
        n = strlen(tok);
        while (n > 0 && tok[n - 1] == ' ')
            tok[--n] = '\0';
        if (strcmp(tok, id) == 0)
            return true;
    }
    return false;
}

/* The properties every plan has, checked from the model, not from node.c. */
static void check_plan(const struct accel_topo *t, const struct accel_plan_req *req,
                       const struct accel_node_plan *p)
{
    static bool mine[MAX_CPU], local[MAX_CPU], node[MAX_CPU];
    int last_pkg = INT32_MIN;
    bool pkg_seen[64] = {false};

    ASSERT_INT_EQ(p->nranks, req->nproc);
    for (unsigned r = 0; r < p->nranks; r++) {
        const struct accel_node_rank *k = &p->ranks[r];
        int ni = numa_index(t, k->numa), pkg;
        unsigned n;

        /* a CPU set, on the rank's NUMA node */
        ASSERT(k->cpus != NULL);
        n = parse_cpus(k->cpus, mine);
        ASSERT(n > 0);
        ASSERT(ni >= 0);
        parse_cpus(t->numa[ni].cpus, node);
        if (p->cpu_only) {
            ASSERT_INT_EQ(k->gpu, -1);
            ASSERT_STR_EQ(k->gpu_id, "");
            ASSERT_INT_EQ(k->nic, -1);
            /* it starts on its NUMA node and stays on the machine's CPUs */
            bool on_node = false;
            for (unsigned c = 0; c < MAX_CPU; c++)
                on_node = on_node || (mine[c] && node[c]);
            ASSERT(on_node);
        } else {
            const struct accel_topo_gpu *g;

            ASSERT(k->gpu >= 0 && (unsigned)k->gpu < t->ngpus);
            g = &t->gpus[k->gpu];
            ASSERT_STR_EQ(k->busid, g->pci.busid);
            /* the id comes from the granted list, spelled as there */
            if (req->gpus != NULL)
                ASSERT(in_list(req->gpus, k->gpu_id));
            for (unsigned q = 0; q < r; q++)
                ASSERT(p->ranks[q].gpu != k->gpu && strcmp(p->ranks[q].gpu_id, k->gpu_id) != 0);
            /* the CPU set is local to the GPU: inside its NUMA nodes */
            memset(local, 0, sizeof(local));
            for (unsigned i = 0; i < t->nnuma; i++)
                if ((g->pci.numa >> i) & 1) {
                    parse_cpus(t->numa[i].cpus, node);
                    for (unsigned c = 0; c < MAX_CPU; c++)
                        local[c] = local[c] || node[c];
                }
            if (g->pci.numa != 0) {
                ASSERT((g->pci.numa >> ni) & 1);
                for (unsigned c = 0; c < MAX_CPU; c++)
                    ASSERT(!mine[c] || local[c]);
            }
            /* the NIC is behind the GPU's PCI switch, on its NUMA node, or,
             * where the node has none closer, across the CPU interconnect:
             * every GPU rank of a node with NICs has one */
            if (k->nic >= 0) {
                const struct accel_topo_nic *nic = &t->nics[k->nic];

                ASSERT((unsigned)k->nic < t->nnics);
                if (k->nic_link == ACCEL_LINK_PCI_SWITCH)
                    ASSERT(common(&g->pci, &nic->pci) >= 2);
                else if (k->nic_link == ACCEL_LINK_NUMA)
                    ASSERT(common(&g->pci, &nic->pci) == 1 || (g->pci.numa & nic->pci.numa));
                else
                    ASSERT(k->nic_link == ACCEL_LINK_SYS && common(&g->pci, &nic->pci) == 0);
            } else {
                ASSERT_INT_EQ(k->nic_link, ACCEL_LINK_NONE);
                ASSERT_INT_EQ(t->nnics, 0);
            }
        }
        /* the ranks of one socket are contiguous */
        pkg = t->numa[ni].package;
        if (pkg != last_pkg) {
            ASSERT(pkg < 0 || pkg >= 64 || !pkg_seen[pkg]);
            if (pkg >= 0 && pkg < 64)
                pkg_seen[pkg] = true;
            last_pkg = pkg;
        } else if (p->nranks > 1) {
            ASSERT(p->ranks[r - 1].next != ACCEL_LINK_SYS);
        }
        if (p->nranks == 1)
            ASSERT_INT_EQ(k->next, ACCEL_LINK_NONE);
        else
            ASSERT(k->next >= ACCEL_LINK_NVSWITCH && k->next <= ACCEL_LINK_SYS);
    }
}

/* One rank as a line: "id busid numa nic nic_link next cpus". */
static void rank_line(const struct accel_topo *t, const struct accel_node_rank *k, char *buf,
                      size_t size)
{
    snprintf(buf, size, "%s %s %d %s %s %s %s", k->gpu_id[0] ? k->gpu_id : "-",
             k->busid[0] ? k->busid : "-", k->numa, k->nic >= 0 ? t->nics[k->nic].name : "-",
             accel_link_name(k->nic_link), accel_link_name(k->next), k->cpus);
}

static void expect_plan(const struct accel_topo *t, const struct accel_node_plan *p,
                        const char *const *want, unsigned n)
{
    char line[512];

    ASSERT_INT_EQ(p->nranks, n);
    for (unsigned r = 0; r < n; r++) {
        rank_line(t, &p->ranks[r], line, sizeof(line));
        ASSERT_STR_EQ(line, want[r]);
    }
}

/* ---------------------------------------------------------------- the corpus */

/* What each corpus file holds, and the plan for one rank per GPU (four CPU
 * ranks on a machine without NVIDIA GPU), worked out from the XML. */
static const struct corpus_case {
    const char *file;
    const char *product;
    unsigned ngpus, nnics, nnvswitches, nnuma;
    enum accel_nvlink_source nvlink;
    unsigned nproc;
    const char *plan[16];
} corpus[] = {
    /* HP SL390s: 2 x 6 cores x 2 threads; three Tesla M2070 (one on socket 0,
     * two on socket 1, each under its own root port); the IB HCA mlx4_0 and
     * two 1 GbE ports on socket 0; an ATI ES1000 VGA (not a GPU for CUDA). */
    {"24em64t-2n6c2t-pci.xml",
     "ProLiant SL390s G7",
     3,
     3,
     0,
     2,
     ACCEL_NVLINK_UNKNOWN,
     3,
     {"0 0000:06:00.0 0 mlx4_0 NUMA SYS 0,2,4,6,8,10,12,14,16,18,20,22",
      /* socket 1 has no NIC: its GPUs take the node's only HCA across the
       * CPU interconnect, as NCCL would */
      "1 0000:11:00.0 1 mlx4_0 SYS NUMA 1,3,5,13,15,17",
      "2 0000:14:00.0 1 mlx4_0 SYS SYS 7,9,11,19,21,23"}},
    /* Supermicro X9DRG-HF: 2 x 8 cores x 2 threads; three Tesla M2075 (03:00
     * on socket 0, 83:00 and 84:00 on socket 1); a ConnectX-4 (mlx5_0) under
     * 84:00's root port; two I350 ports; a Radeon and a Matrox VGA. */
    {"32em64t-2n8c2t-pci-normalio.xml",
     "X9DRG-HF",
     3,
     3,
     0,
     2,
     ACCEL_NVLINK_UNKNOWN,
     3,
     /* 03:00 has no NIC on socket 0: it takes mlx5_0 across the interconnect */
     {"0 0000:03:00.0 0 mlx5_0 SYS SYS 0-7,16-23", "1 0000:83:00.0 1 mlx5_0 NUMA NUMA 8-11,24-27",
      "2 0000:84:00.0 1 mlx5_0 PCI_SWITCH SYS 12-15,28-31"}},
    /* Dell R910: 4 sockets x 10 cores in two groups of two; no GPU; four
     * Broadcom ports and a QLogic IB HCA (qib0): a CPU-only plan. */
    {"40intel64-2g2n4c+pcilocality.xml",
     "PowerEdge R910",
     0,
     5,
     0,
     4,
     ACCEL_NVLINK_UNKNOWN,
     4,
     {"- - 0 - NONE SYS 0,4,8,12,16,20,24,28,32,36", "- - 2 - NONE SYS 2,6,10,14,18,22,26,30,34,38",
      "- - 1 - NONE SYS 1,5,9,13,17,21,25,29,33,37",
      "- - 3 - NONE SYS 3,7,11,15,19,23,27,31,35,39"}},
    /* DGX-2H (trimmed to 2 cores per socket): 16 V100 behind PLX switches, 8
     * per socket, 12 NVSwitches, NVLink from hwloc's NVML backend; no NIC in
     * this export. */
    {"nvidiaDGX2.xml",
     "NVIDIA DGX-2H",
     16,
     0,
     12,
     2,
     ACCEL_NVLINK_XML,
     16,
     {"0 0000:34:00.0 0 - NONE NVSWITCH 0", "1 0000:36:00.0 0 - NONE NVSWITCH 0",
      "2 0000:39:00.0 0 - NONE NVSWITCH 0", "3 0000:3b:00.0 0 - NONE NVSWITCH 0",
      "4 0000:57:00.0 0 - NONE NVSWITCH 1", "5 0000:59:00.0 0 - NONE NVSWITCH 1",
      "6 0000:5c:00.0 0 - NONE NVSWITCH 1", "7 0000:5e:00.0 0 - NONE NVSWITCH 1",
      "8 0000:b7:00.0 1 - NONE NVSWITCH 24", "9 0000:b9:00.0 1 - NONE NVSWITCH 24",
      "10 0000:bc:00.0 1 - NONE NVSWITCH 24", "11 0000:be:00.0 1 - NONE NVSWITCH 24",
      "12 0000:e0:00.0 1 - NONE NVSWITCH 25", "13 0000:e2:00.0 1 - NONE NVSWITCH 25",
      "14 0000:e5:00.0 1 - NONE NVSWITCH 25", "15 0000:e7:00.0 1 - NONE NVSWITCH 25"}},
};

static const char *const h100_plan[8] = {
    "0 0000:1b:00.0 0 mlx5_0 PCI_SWITCH NVSWITCH 0-13,112-125",
    "1 0000:43:00.0 0 mlx5_1 PCI_SWITCH NVSWITCH 14-27,126-139",
    "2 0000:52:00.0 0 mlx5_2 PCI_SWITCH NVSWITCH 28-41,140-153",
    "3 0000:61:00.0 0 mlx5_3 PCI_SWITCH NVSWITCH 42-55,154-167",
    "4 0000:9d:00.0 1 mlx5_4 PCI_SWITCH NVSWITCH 56-69,168-181",
    "5 0000:c3:00.0 1 mlx5_5 PCI_SWITCH NVSWITCH 70-83,182-195",
    "6 0000:d1:00.0 1 mlx5_6 PCI_SWITCH NVSWITCH 84-97,196-209",
    "7 0000:df:00.0 1 mlx5_7 PCI_SWITCH NVSWITCH 98-111,210-223",
};

TEST(corpus_models_and_plans)
{
    for (size_t i = 0; i < N_OF(corpus); i++) {
        const struct corpus_case *c = &corpus[i];
        struct accel_plan_req req = {c->nproc, NULL, false, NULL, false};
        struct accel_topo t;
        struct accel_node_plan p;

        test_note("%s", c->file);
        load(corpus_file(c->file), &t);
        ASSERT_STR_EQ(t.product, c->product);
        ASSERT_INT_EQ(t.ngpus, c->ngpus);
        ASSERT_INT_EQ(t.nnics, c->nnics);
        ASSERT_INT_EQ(t.nnvswitches, c->nnvswitches);
        ASSERT_INT_EQ(t.nnuma, c->nnuma);
        ASSERT_INT_EQ(t.nvlink_source, c->nvlink);
        plan(&t, &req, &p);
        ASSERT_INT_EQ(p.cpu_only, c->ngpus == 0);
        check_plan(&t, &req, &p);
        expect_plan(&t, &p, c->plan, c->nproc);
        accel_node_plan_free(&p);
        accel_topo_free(&t);
    }
}

/* Every XML of the corpus folder, whatever it holds: loads, and plans for
 * every rank count up to the GPUs (or 2x the NUMA nodes without GPUs). */
TEST(corpus_every_file_plans)
{
    char dir[4096];
    struct dirent **names = NULL;
    int n;
    unsigned files = 0;

    snprintf(dir, sizeof(dir), "%s/hwloc-xml", test_corpus_dir());
    n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        SKIP("shared corpus not found (set ACCEL_SHARED)");
    for (int i = 0; i <= n; i++) {
        char path[8192];
        struct accel_topo t;
        unsigned max;

        if (i == n) {
            snprintf(path, sizeof(path), "%s", H100);
        } else {
            size_t len = strlen(names[i]->d_name);

            if (len < 5 || strcmp(names[i]->d_name + len - 4, ".xml") != 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
        }
        load(path, &t);
        files++;
        max = t.ngpus ? t.ngpus : 2 * t.nnuma;
        for (unsigned nproc = 1; nproc <= max; nproc++) {
            struct accel_plan_req req = {nproc, NULL, false, NULL, false};
            struct accel_node_plan p;

            plan(&t, &req, &p);
            check_plan(&t, &req, &p);
            accel_node_plan_free(&p);
        }
        accel_topo_free(&t);
    }
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
    ASSERT(files >= 2);
}

TEST(corpus_dgx2_nvlink_matrix)
{
    struct accel_topo t;

    load(corpus_file("nvidiaDGX2.xml"), &t);
    ASSERT_STR_EQ(t.gpus[0].model, "Tesla V100-SXM3-32GB-H");
    ASSERT_STR_EQ(t.gpus[0].uuid, "GPU-d3977428-7a30-086b-2e20-5c1eeed647c6");
    /* each V100 has 6 NVLinks of 25 GB/s, one to each NVSwitch of its board */
    for (unsigned g = 0; g < t.ngpus; g++) {
        ASSERT_INT_EQ(t.gpus[g].nvswitch_mbps, 6 * 25000);
        for (unsigned h = 0; h < t.ngpus; h++)
            ASSERT_INT_EQ(t.nvlink[g * t.ngpus + h], 0);
    }
    /* the NVSwitch whose config space reads as zeros is found by its subtype */
    ASSERT_STR_EQ(t.nvswitches[4].busid, "0000:66:00.0");
    ASSERT_INT_EQ(t.nvswitches[4].class_id, 0);
    /* GPUs sit five bridges deep: host bridge, root port, three PLX ports */
    ASSERT_INT_EQ(t.gpus[0].pci.depth, 6);
    ASSERT_STR_EQ(t.gpus[0].pci.path[0], "0000:[2b-3b]");
    ASSERT_STR_EQ(t.gpus[0].pci.path[5], "0000:33:00.0");
    ASSERT_STR_EQ(t.gpus[0].pci.cpus, "0-1");
    ASSERT_STR_EQ(t.gpus[15].pci.cpus, "24-25");
    ASSERT_STR_EQ(t.nvswitches[11].cpus, "24-25");
    accel_topo_free(&t);
}

TEST(corpus_nic_kinds_and_names)
{
    struct accel_topo t;

    load(corpus_file("24em64t-2n6c2t-pci.xml"), &t);
    /* a VPI HCA with two IP interfaces is one NIC: its RDMA device */
    ASSERT_STR_EQ(t.nics[2].name, "mlx4_0");
    ASSERT_STR_EQ(t.nics[2].netdev, "ib0");
    ASSERT_INT_EQ(t.nics[2].kind, ACCEL_NIC_IB);
    ASSERT_STR_EQ(t.nics[0].name, "eth0");
    ASSERT_INT_EQ(t.nics[0].kind, ACCEL_NIC_ETHERNET);
    /* the ES1000 VGA (ATI) is no CUDA GPU; the Teslas are */
    for (unsigned g = 0; g < t.ngpus; g++)
        ASSERT_INT_EQ(t.gpus[g].pci.vendor, 0x10de);
    accel_topo_free(&t);

    load(corpus_file("40intel64-2g2n4c+pcilocality.xml"), &t);
    ASSERT_STR_EQ(t.nics[4].name, "qib0");
    ASSERT_INT_EQ(t.nics[4].kind, ACCEL_NIC_IB);
    /* I/O hangs off a group of two sockets: local to two NUMA nodes */
    ASSERT_INT_EQ(t.nics[4].pci.numa, 0xc);
    ASSERT_STR_EQ(t.nics[4].pci.cpus, "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33,35,37,39");
    ASSERT_INT_EQ(t.numa[1].os_index, 2); /* tree order: group 0 holds NUMA 0 and 2 */
    accel_topo_free(&t);
}

/* ---------------------------------------------------------------- DGX H100 */

TEST(h100_model)
{
    struct accel_topo t;

    load(H100, &t);
    ASSERT_STR_EQ(t.product, "DGX H100");
    ASSERT_INT_EQ(t.ngpus, 8);
    ASSERT_INT_EQ(t.nnvswitches, 4);
    ASSERT_INT_EQ(t.nnics, 9); /* 8 ConnectX-7 and the management port */
    ASSERT_INT_EQ(t.nnuma, 2);
    ASSERT_STR_EQ(t.numa[0].cpus, "0-55,112-167");
    ASSERT_STR_EQ(t.numa[1].cpus, "56-111,168-223");
    ASSERT_INT_EQ(t.numa[0].npus, 112);
    ASSERT_INT_EQ(t.nvlink_source, ACCEL_NVLINK_XML);
    for (unsigned g = 0; g < 8; g++) {
        const struct accel_topo_nic *nic = &t.nics[g + 1];
        char name[16];

        ASSERT_STR_EQ(t.gpus[g].model, "NVIDIA H100 80GB HBM3");
        ASSERT_STR_EQ(t.gpus[g].pci.cpus, g < 4 ? "0-55,112-167" : "56-111,168-223");
        ASSERT_INT_EQ(t.gpus[g].pci.numa, g < 4 ? 1 : 2);
        ASSERT_INT_EQ(t.gpus[g].nvswitch_mbps, 18 * 25000);
        snprintf(name, sizeof(name), "mlx5_%u", g);
        ASSERT_STR_EQ(nic->name, name);
        ASSERT_INT_EQ(nic->kind, ACCEL_NIC_IB);
        ASSERT(common(&t.gpus[g].pci, &nic->pci) == 3); /* the same PCIe switch */
    }
    ASSERT_STR_EQ(t.nics[0].name, "eno1");
    ASSERT_INT_EQ(t.nics[0].kind, ACCEL_NIC_ETHERNET);
    ASSERT_STR_EQ(t.gpus[5].pci.busid, "0000:c3:00.0");
    ASSERT_STR_EQ(t.gpus[5].uuid, "GPU-5d0c1f2e-1005-4b1a-9e3d-8c7f6a5b2005");
    accel_topo_free(&t);
}

TEST(h100_full_plan_and_export)
{
    struct accel_plan_req req = {8, NULL, false, NULL, false};
    struct accel_rank_plan ranks[8];
    struct accel_plan out;
    struct accel_error e = {0};
    struct accel_topo t;
    struct accel_node_plan p;

    load(H100, &t);
    plan(&t, &req, &p);
    check_plan(&t, &req, &p);
    expect_plan(&t, &p, h100_plan, 8);
    ASSERT_OK(accel_node_plan_export(&t, &p, NULL, ranks, 8, &out, &e));
    ASSERT_INT_EQ(out.nranks, 8);
    ASSERT(out.ranks == ranks);
    for (unsigned r = 0; r < 8; r++) {
        char hca[16];

        snprintf(hca, sizeof(hca), "=mlx5_%u", r);
        /* every rank sees the whole list, local rank i's GPU at place i */
        ASSERT_STR_EQ(ranks[r].cuda_visible_devices, "0,1,2,3,4,5,6,7");
        ASSERT_STR_EQ(ranks[r].nccl_ib_hca, hca);
        ASSERT_STR_EQ(ranks[r].nccl_socket_ifname, "");
    }
    /* too little room: an error, nothing half-filled in out */
    ASSERT_INT_EQ(accel_node_plan_export(&t, &p, NULL, ranks, 7, &out, &e), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(out.nranks, 0);
    accel_node_plan_free(&p);
    accel_node_plan_free(&p); /* twice is harmless */
    accel_topo_free(&t);
    accel_topo_free(&t);
}

TEST(h100_granted_subsets)
{
    static const char *const odd4[4] = {
        "1 0000:43:00.0 0 mlx5_1 PCI_SWITCH NVSWITCH 0-27,112-139",
        "3 0000:61:00.0 0 mlx5_3 PCI_SWITCH NVSWITCH 28-55,140-167",
        "5 0000:c3:00.0 1 mlx5_5 PCI_SWITCH NVSWITCH 56-83,168-195",
        "7 0000:df:00.0 1 mlx5_7 PCI_SWITCH NVSWITCH 84-111,196-223",
    };
    static const char *const odd2[2] = {
        "1 0000:43:00.0 0 mlx5_1 PCI_SWITCH NVSWITCH 0-27,112-139",
        "3 0000:61:00.0 0 mlx5_3 PCI_SWITCH NVSWITCH 28-55,140-167",
    };
    struct accel_topo t;
    struct accel_node_plan p;

    load(H100, &t);
    /* Slurm granted the odd GPUs: only they are used, NICs follow the GPUs */
    for (int reversed = 0; reversed < 2; reversed++) {
        struct accel_plan_req req = {4, reversed ? "7,5,3,1" : "1,3,5,7", false, NULL, false};

        plan(&t, &req, &p);
        check_plan(&t, &req, &p);
        expect_plan(&t, &p, odd4, 4);
        accel_node_plan_free(&p);
    }
    /* fewer ranks than granted GPUs: the first socket fills first */
    {
        struct accel_plan_req req = {2, " 1, 3 ,5,7", false, NULL, false};

        plan(&t, &req, &p);
        check_plan(&t, &req, &p);
        expect_plan(&t, &p, odd2, 2);
        accel_node_plan_free(&p);
    }
    /* a UUID id is kept as written; sockets still come in order */
    {
        struct accel_plan_req req = {2, "6,gpu-5D0C1F2E-1002-4b1a-9e3d-8c7f6a5b2002", false, NULL,
                                     false};

        plan(&t, &req, &p);
        check_plan(&t, &req, &p);
        ASSERT_STR_EQ(p.ranks[0].gpu_id, "gpu-5D0C1F2E-1002-4b1a-9e3d-8c7f6a5b2002");
        accel_node_plan_free(&p);
        req.gpus = "6,GPU-5d0c1f2e-1002-4b1a-9e3d-8c7f6a5b2002";
        plan(&t, &req, &p);
        ASSERT_STR_EQ(p.ranks[0].gpu_id, "GPU-5d0c1f2e-1002-4b1a-9e3d-8c7f6a5b2002");
        ASSERT_INT_EQ(p.ranks[1].gpu, 6);
        accel_node_plan_free(&p);
    }
    accel_topo_free(&t);
}

/* Slurm with task/cgroup and ConstrainDevices: CUDA_VISIBLE_DEVICES holds
 * local indices; SLURM_STEP_GPUS says which GPUs they are. */
TEST(h100_local_indices)
{
    static const char *const want[4] = {
        "0 0000:43:00.0 0 mlx5_1 PCI_SWITCH NVSWITCH 0-27,112-139",
        "1 0000:61:00.0 0 mlx5_3 PCI_SWITCH NVSWITCH 28-55,140-167",
        "2 0000:c3:00.0 1 mlx5_5 PCI_SWITCH NVSWITCH 56-83,168-195",
        "3 0000:df:00.0 1 mlx5_7 PCI_SWITCH NVSWITCH 84-111,196-223",
    };
    struct accel_topo t;
    struct accel_node_plan p;

    load(H100, &t);
    for (int shuffled = 0; shuffled < 2; shuffled++) {
        struct accel_plan_req req = {4, shuffled ? "3,1,2,0" : "0,1,2,3", true,
                                     shuffled ? "7,1,5,3" : "1,3,5,7", false};

        plan(&t, &req, &p);
        check_plan(&t, &req, &p);
        expect_plan(&t, &p, want, 4);
        accel_node_plan_free(&p);
    }
    /* local 0 and 1 of GPUs 3 and 5: in PCI order, 0 is GPU 3 */
    {
        struct accel_plan_req req = {2, "1,0", true, "5,3", false};

        plan(&t, &req, &p);
        ASSERT_STR_EQ(p.ranks[0].gpu_id, "0");
        ASSERT_STR_EQ(p.ranks[0].busid, "0000:61:00.0");
        ASSERT_STR_EQ(p.ranks[1].gpu_id, "1");
        ASSERT_STR_EQ(p.ranks[1].busid, "0000:c3:00.0");
        accel_node_plan_free(&p);
    }
    /* every GPU granted: local and node-wide ids agree, no physical list needed */
    {
        struct accel_plan_req req = {8, "0,1,2,3,4,5,6,7", true, NULL, false};

        plan(&t, &req, &p);
        expect_plan(&t, &p, h100_plan, 8);
        accel_node_plan_free(&p);
    }
    /* part of the node, no physical list: refuse rather than guess */
    {
        struct accel_plan_req req = {2, "0,1", true, NULL, false};

        plan_fails(&t, &req, ACCEL_EINVAL, "SLURM_STEP_GPUS");
        req.physical = "2";
        plan_fails(&t, &req, ACCEL_ENOTFOUND, "local GPU id 1, but the node granted 1 GPUs");
        req.physical = "2,9";
        plan_fails(&t, &req, ACCEL_ENOTFOUND, "granted GPU 9: not on this node");
    }
    accel_topo_free(&t);
}

TEST(h100_errors)
{
    static const struct {
        unsigned nproc;
        const char *gpus;
        enum accel_err rc;
        const char *msg;
    } rows[] = {
        {9, NULL, ACCEL_ELAYOUT, "9 local ranks, but this node has 8 GPUs"},
        {5, "1,3,5,7", ACCEL_ELAYOUT, "5 local ranks, but only 4 GPUs are granted (\"1,3,5,7\""},
        {1, "8", ACCEL_ENOTFOUND, "granted GPU 8: not on this node (GPUs 0-7)"},
        {1, "GPU-00000000-0000-0000-0000-000000000000", ACCEL_ENOTFOUND, "not on this node"},
        {1, "MIG-5d0c1f2e-1002-4b1a-9e3d-8c7f6a5b2002", ACCEL_EUNSUPPORTED, "MIG instance"},
        {1, "1,1", ACCEL_EINVAL, "granted twice"},
        {1, "1,,2", ACCEL_EINVAL, "empty id"},
        {1, "1,", ACCEL_EINVAL, "empty id"},
        {1, "gpu0", ACCEL_EINVAL, "is not a GPU id"},
        {1, "-1", ACCEL_EINVAL, "is not a GPU id"},
        {1, "1234567890", ACCEL_EINVAL, "is not a GPU id"},
        {0, NULL, ACCEL_EINVAL, "no local ranks"},
        {ACCEL_TOPO_MAX_RANKS + 1, NULL, ACCEL_ETOOBIG, "the limit is 1024"},
    };
    char big[ACCEL_TOPO_MAX_GRANTED + 8];
    struct accel_topo t;
    struct accel_node_plan p;
    struct accel_error e = {0};

    load(H100, &t);
    for (size_t i = 0; i < N_OF(rows); i++) {
        struct accel_plan_req req = {rows[i].nproc, rows[i].gpus, false, NULL, false};

        test_note("%u \"%s\"", rows[i].nproc, rows[i].gpus ? rows[i].gpus : "(null)");
        plan_fails(&t, &req, rows[i].rc, rows[i].msg);
    }
    memset(big, '1', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    {
        struct accel_plan_req req = {1, big, false, NULL, false};
        size_t n = 0;

        plan_fails(&t, &req, ACCEL_ETOOBIG, "the limit is 4096 bytes");
        big[70] = '\0'; /* one id of 70 digits */
        plan_fails(&t, &req, ACCEL_EINVAL, "is too long");
        for (unsigned i = 0; i <= ACCEL_TOPO_MAX_GPUS; i++)
            n += (size_t)snprintf(big + n, sizeof(big) - n, "%s%u", i ? "," : "", i % 8);
        plan_fails(&t, &req, ACCEL_ETOOBIG, ": more than 64 ids");
    }
    {
        struct accel_plan_req req = {1, NULL, false, NULL, false};

        ASSERT_INT_EQ(accel_topo_plan(NULL, &req, &p, &e), ACCEL_EINVAL);
        ASSERT_INT_EQ(accel_topo_plan(&t, NULL, &p, &e), ACCEL_EINVAL);
        ASSERT_INT_EQ(accel_topo_plan(&t, &req, NULL, NULL), ACCEL_EINVAL);
    }
    accel_topo_free(&t);
}

TEST(cpu_only_plans)
{
    static const char *const h100_cpu[2] = {
        "- - 0 - NONE SYS 0-55,112-167",
        "- - 1 - NONE SYS 56-111,168-223",
    };
    static const char *const r910_one[1] = {"- - 0 - NONE NONE 0-39"};
    struct accel_rank_plan ranks[2];
    struct accel_plan out;
    struct accel_error e = {0};
    struct accel_topo t;
    struct accel_node_plan p;

    /* GPUs present but not wanted, or none granted */
    load(H100, &t);
    {
        const char *none[] = {"", "NoDevFiles"};
        struct accel_plan_req req = {2, NULL, false, NULL, true};

        for (size_t i = 0; i <= N_OF(none); i++) {
            if (i > 0) {
                req.cpu_only = false;
                req.gpus = none[i - 1];
            }
            plan(&t, &req, &p);
            ASSERT(p.cpu_only);
            check_plan(&t, &req, &p);
            expect_plan(&t, &p, h100_cpu, 2);
            ASSERT_OK(accel_node_plan_export(&t, &p, req.gpus, ranks, 2, &out, &e));
            ASSERT_STR_EQ(ranks[1].cuda_visible_devices, "");
            ASSERT_STR_EQ(ranks[1].nccl_ib_hca, "");
            accel_node_plan_free(&p);
        }
    }
    accel_topo_free(&t);

    /* no GPU: one rank spans the machine; many ranks share cores */
    load(corpus_file("40intel64-2g2n4c+pcilocality.xml"), &t);
    {
        struct accel_plan_req req = {1, NULL, false, NULL, false};

        plan(&t, &req, &p);
        expect_plan(&t, &p, r910_one, 1);
        accel_node_plan_free(&p);
        req.nproc = 100;
        plan(&t, &req, &p);
        check_plan(&t, &req, &p);
        ASSERT_STR_EQ(p.ranks[0].cpus, "0");
        ASSERT_STR_EQ(p.ranks[1].cpus, "0");
        ASSERT_STR_EQ(p.ranks[99].cpus, "39");
        accel_node_plan_free(&p);
        /* a granted GPU the node does not have is an error, not a CPU plan */
        req.nproc = 1;
        req.gpus = "0";
        plan_fails(&t, &req, ACCEL_ENOTFOUND, "it has no NVIDIA GPU");
    }
    accel_topo_free(&t);
}

/* ---------------------------------------------------------------- NICs */

TEST(ethernet_only_nics)
{
    struct accel_plan_req req = {3, NULL, false, NULL, false};
    struct accel_rank_plan ranks[3];
    struct accel_plan out;
    struct accel_error e = {0};
    struct accel_topo t;
    struct accel_node_plan p;

    load(corpus_file("24em64t-2n6c2t-pci.xml"), &t);
    /* without its IB HCA the node has Ethernet only: the socket's port */
    ASSERT_STR_EQ(t.nics[2].name, "mlx4_0");
    t.nnics = 2;
    plan(&t, &req, &p);
    check_plan(&t, &req, &p);
    ASSERT_INT_EQ(p.ranks[0].nic, 0);
    ASSERT_INT_EQ(p.ranks[0].nic_link, ACCEL_LINK_NUMA);
    /* socket 1 has no port of its own: the one socket 0's rank left free,
     * across the CPU interconnect */
    ASSERT_INT_EQ(p.ranks[1].nic, 1);
    ASSERT_INT_EQ(p.ranks[1].nic_link, ACCEL_LINK_SYS);
    ASSERT_OK(accel_node_plan_export(&t, &p, NULL, ranks, 3, &out, &e));
    ASSERT_STR_EQ(ranks[0].nccl_socket_ifname, "=eth0");
    ASSERT_STR_EQ(ranks[0].nccl_ib_hca, "");
    ASSERT_STR_EQ(ranks[1].nccl_socket_ifname, "=eth1");
    accel_node_plan_free(&p);
    t.nnics = 3;
    accel_topo_free(&t);
}

TEST(nics_spread_over_a_shared_switch)
{
    struct accel_plan_req req = {8, NULL, false, NULL, false};
    struct accel_topo t;
    struct accel_node_plan p;

    /* DGX A100 style: two GPUs and two NICs behind each switch.  Move the
     * H100 model's odd NICs next to the even GPUs' switch. */
    load(H100, &t);
    for (unsigned g = 0; g < 8; g += 2) {
        struct accel_topo_pci *odd = &t.nics[g + 2].pci;

        memcpy(odd->path, t.nics[g + 1].pci.path, sizeof(odd->path));
        odd->depth = t.nics[g + 1].pci.depth;
        /* and the odd GPU behind the same switch */
        memcpy(t.gpus[g + 1].pci.path, t.gpus[g].pci.path, sizeof(odd->path));
        t.gpus[g + 1].pci.numa = t.gpus[g].pci.numa;
    }
    plan(&t, &req, &p);
    check_plan(&t, &req, &p);
    for (unsigned r = 0; r < 8; r++) {
        ASSERT_INT_EQ(p.ranks[r].nic, (int)r + 1); /* each GPU its own NIC */
        ASSERT_INT_EQ(p.ranks[r].nic_link, ACCEL_LINK_PCI_SWITCH);
    }
    accel_node_plan_free(&p);
    accel_topo_free(&t);
}

/* ---------------------------------------------------------------- hwloc 3.x XML */

/* An hwloc 3.x export: OS device types as a bitmask, topology-wide <info>,
 * <memtier> and <pci_locality>; here placed before the NVLink matrix, which
 * must still be read. */
static const char v3_xml[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
    "<topology version=\"3.0\">\n"
    "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x00000003\" "
    "complete_cpuset=\"0x00000003\" allowed_cpuset=\"0x00000003\" nodeset=\"0x00000001\" "
    "complete_nodeset=\"0x00000001\" allowed_nodeset=\"0x00000001\" gp_index=\"1\">\n"
    "    <info name=\"DMIProductName\" value=\"two &lt;GPUs&gt;\"/>\n"
    "    <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x00000003\" "
    "complete_cpuset=\"0x00000003\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" "
    "gp_index=\"2\" local_memory=\"1073741824\"/>\n"
    "    <object type=\"Core\" os_index=\"0\" cpuset=\"0x00000001\" complete_cpuset=\"0x00000001\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"3\">\n"
    "      <object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\" complete_cpuset=\"0x00000001\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"4\"/>\n"
    "    </object>\n"
    "    <object type=\"Core\" os_index=\"1\" cpuset=\"0x00000002\" complete_cpuset=\"0x00000002\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"5\">\n"
    "      <object type=\"PU\" os_index=\"1\" cpuset=\"0x00000002\" complete_cpuset=\"0x00000002\" "
    "nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" gp_index=\"6\"/>\n"
    "    </object>\n"
    "    <object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" depth=\"0\" "
    "bridge_pci=\"0000:[00-04]\">\n"
    "      <object type=\"Bridge\" gp_index=\"11\" bridge_type=\"1-1\" depth=\"1\" "
    "bridge_pci=\"0000:[01-02]\" pci_busid=\"0000:00:01.0\" pci_type=\"0604 [8086:2030] "
    "[0000:0000] 00 00\" pci_link_speed=\"0.000000\">\n"
    "        <object type=\"PCIDev\" gp_index=\"12\" pci_busid=\"0000:01:00.0\" pci_type=\"0302 "
    "[10de:20b0] [10de:1450] a1 00\" pci_link_speed=\"0.000000\">\n"
    "          <object type=\"OSDev\" gp_index=\"13\" name=\"nvml0\" subtype=\"NVML\" "
    "osdev_type=\"12\"/>\n"
    "        </object>\n"
    "        <object type=\"PCIDev\" gp_index=\"14\" pci_busid=\"0000:02:00.0\" pci_type=\"0200 "
    "[15b3:101d] [15b3:0016] 00 00\" pci_link_speed=\"0.000000\">\n"
    "          <object type=\"OSDev\" gp_index=\"15\" name=\"eth2\" osdev_type=\"16\"/>\n"
    "          <object type=\"OSDev\" gp_index=\"16\" name=\"mlx5_0\" osdev_type=\"48\"/>\n"
    "        </object>\n"
    "      </object>\n"
    "      <object type=\"Bridge\" gp_index=\"17\" bridge_type=\"1-1\" depth=\"1\" "
    "bridge_pci=\"0000:[03-04]\" pci_busid=\"0000:00:02.0\" pci_type=\"0604 [8086:2030] "
    "[0000:0000] 00 00\" pci_link_speed=\"0.000000\">\n"
    "        <object type=\"PCIDev\" gp_index=\"18\" pci_busid=\"0000:03:00.0\" pci_type=\"0302 "
    "[10de:20b0] [10de:1450] a1 00\" pci_link_speed=\"0.000000\">\n"
    "          <object type=\"OSDev\" gp_index=\"19\" name=\"nvml1\" subtype=\"NVML\" "
    "osdev_type=\"12\"/>\n"
    "          <!-- a comment with <tags> and \"quotes\" -->\n"
    "        </object>\n"
    "        <object type=\"PCIDev\" gp_index=\"20\" pci_busid=\"0000:04:00.0\" pci_type=\"0200 "
    "[8086:1521] [8086:0001] 01 00\" pci_link_speed=\"0.000000\">\n"
    "          <object type=\"OSDev\" gp_index=\"21\" name=\"eth0\" osdev_type=\"16\"/>\n"
    "        </object>\n"
    "      </object>\n"
    "    </object>\n"
    "  </object>\n"
    "  <info name=\"Backend\" value=\"Linux\"/>\n"
    "  <memtier nodeset=\"0x1\" subtype=\"DRAM\"><info name=\"x\" value=\"y\"/></memtier>\n"
    "  <pci_locality domain=\"0x0\" bus_min=\"0x0\" bus_max=\"0x4\" cpuset=\"0x00000003\"/>\n"
    "  <distances2hetero nbobjs=\"2\" kind=\"25\" name=\"NVLinkBandwidth\">\n"
    "    <indexes length=\"18\">OSDev:13 OSDev:19 </indexes>\n"
    "    <u64values length=\"28\">1000000 50000 50000 1000000 </u64values>\n"
    "  </distances2hetero>\n"
    /* hops (kind bit 32) is hwloc 3's; hwloc 2 called it latency */
    "  <distances2hetero nbobjs=\"2\" kind=\"49\" name=\"XGMIHops\">\n"
    "    <indexes length=\"18\">OSDev:13 OSDev:19 </indexes>\n"
    "    <u64values length=\"8\">0 1 1 0 </u64values>\n"
    "  </distances2hetero>\n"
    "</topology>\n";

TEST(xml_v3_is_read)
{
    static const char *const want[2] = {
        "0 0000:01:00.0 0 mlx5_0 PCI_SWITCH NVLINK 0",
        "1 0000:03:00.0 0 mlx5_0 NUMA NVLINK 1",
    };
    struct accel_plan_req req = {2, NULL, false, NULL, false};
    struct accel_error e = {0};
    struct accel_topo t;
    struct accel_node_plan p;

    ASSERT_OK(accel_topo_load_xmlbuffer(&t, v3_xml, strlen(v3_xml), &e));
    ASSERT_STR_EQ(t.product, "two <GPUs>");
    ASSERT_INT_EQ(t.ngpus, 2);
    ASSERT_INT_EQ(t.nnics, 2);
    /* ConnectX in Ethernet mode with an RDMA device: RoCE; its eth2 is no NIC */
    ASSERT_STR_EQ(t.nics[0].name, "mlx5_0");
    ASSERT_STR_EQ(t.nics[0].netdev, "eth2");
    ASSERT_INT_EQ(t.nics[0].kind, ACCEL_NIC_ROCE);
    ASSERT_STR_EQ(t.nics[1].name, "eth0");
    ASSERT_INT_EQ(t.nics[1].kind, ACCEL_NIC_ETHERNET);
    ASSERT_INT_EQ(t.nvlink_source, ACCEL_NVLINK_XML);
    ASSERT_INT_EQ(t.nvlink[0 * 2 + 1], 50000);
    ASSERT_INT_EQ(t.nvlink[1 * 2 + 0], 50000);
    ASSERT_INT_EQ(t.gpus[0].nvswitch_mbps, 0);
    plan(&t, &req, &p);
    check_plan(&t, &req, &p);
    expect_plan(&t, &p, want, 2);
    accel_node_plan_free(&p);
    accel_topo_free(&t);
}

TEST(xml_errors)
{
    static const struct {
        const char *xml;
        enum accel_err rc;
        const char *msg;
    } rows[] = {
        {"", ACCEL_EPARSE, "hwloc couldn't read it"},
        {"not xml at all", ACCEL_EPARSE, "hwloc couldn't read it"},
        {"<?xml version=\"1.0\"?>\n<topology version=\"4.0\">\n</topology>\n", ACCEL_EPARSE,
         "version 4"},
        {"<topology version=\"3.0\">\n<object type=\"Machine\" a=\"x>", ACCEL_EPARSE,
         "does not close"},
        {"<topology version=\"3.0\">\n</object></topology></topology>", ACCEL_EPARSE,
         "unbalanced closing tag"},
        /* inputs on which hwloc 2.9 itself crashes: refused before it reads them */
        {"<topology version=\"2.0\">\n<object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" "
         "nodeset=\"0x1\" complete_nodeset=\"0x1\"/>\n</topology>\n",
         ACCEL_EPARSE, "lacks its type or a valid cpuset"},
        {"<topology version=\"2.0\">\n<object type=\"PU\" cpuset=\"0x1\"/complete_cpuset=\"0x1\" "
         "nodeset=\"0x1\" complete_nodeset=\"0x1\"/>\n</topology>\n",
         ACCEL_EPARSE, "malformed tag"},
        {"<topology version=\"2.0\">\n<object type=\"PU\" cpuset=\"0x<1\"/>\n</topology>\n",
         ACCEL_EPARSE, "does not close"},
        {"<topology version=\"2.0\">\n<object type=\"PU\" cpuset=\"zz\" complete_cpuset=\"0x1\" "
         "nodeset=\"0x1\" complete_nodeset=\"0x1\"/>\n</topology>\n",
         ACCEL_EPARSE, "lacks its type or a valid cpuset"},
    };
    struct accel_error e = {0};
    struct accel_topo t;

    for (size_t i = 0; i < N_OF(rows); i++) {
        test_note("row %zu", i);
        accel_error_clear(&e);
        ASSERT_INT_EQ(accel_topo_load_xmlbuffer(&t, rows[i].xml, strlen(rows[i].xml), &e),
                      rows[i].rc);
        ASSERT_CONTAINS(e.msg, rows[i].msg);
        ASSERT_INT_EQ(t.ngpus, 0);
        ASSERT(t.numa == NULL);
    }
    ASSERT_INT_EQ(accel_topo_load_xmlbuffer(&t, "x", (size_t)ACCEL_TOPO_MAX_XML + 1, &e),
                  ACCEL_ETOOBIG);
    ASSERT_CONTAINS(e.msg, "the limit is");
    ASSERT_INT_EQ(accel_topo_load_xml(&t, "tests/topo/no-such-file.xml", &e), ACCEL_ENOTFOUND);
    ASSERT_CONTAINS(e.msg, "no-such-file.xml");
    ASSERT_INT_EQ(accel_topo_load_xml(&t, "tests/topo", &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_topo_load_xml(NULL, H100, &e), ACCEL_EINVAL);
    /* a file hwloc refuses names the file */
    ASSERT_INT_EQ(accel_topo_load_xml(&t, "tests/unit/test_topo.c", &e), ACCEL_EPARSE);
    ASSERT_CONTAINS(e.msg, "tests/unit/test_topo.c: hwloc");
}

/* ---------------------------------------------------------------- NVML */

/* A fake NVML: the H100 model's GPUs, with links from a table. */
static const struct accel_topo *fake_topo;
static int fake_mode; /* 0 hybrid cube mesh, 1 NVSwitch, 2 NVSwitch without device types */
static int fake_init_fails;
static unsigned fake_shutdowns;

static topo__nvml_return f_init(void)
{
    return fake_init_fails ? TOPO_NVML_ERROR_UNKNOWN : TOPO_NVML_SUCCESS;
}

static topo__nvml_return f_shutdown(void)
{
    fake_shutdowns++;
    return TOPO_NVML_SUCCESS;
}

static topo__nvml_return f_by_busid(const char *busid, topo__nvml_device *dev)
{
    for (unsigned g = 0; g < fake_topo->ngpus; g++)
        if (strcmp(fake_topo->gpus[g].pci.busid, busid) == 0) {
            if (g == 7 && fake_mode == 2)
                return TOPO_NVML_ERROR_UNKNOWN; /* another cgroup's GPU */
            *dev = (topo__nvml_device)(uintptr_t)(g + 1);
            return TOPO_NVML_SUCCESS;
        }
    return TOPO_NVML_ERROR_UNKNOWN;
}

static unsigned dev_index(topo__nvml_device dev)
{
    return (unsigned)(uintptr_t)dev - 1;
}

static topo__nvml_return f_name(topo__nvml_device dev, char *buf, unsigned len)
{
    snprintf(buf, len, "NVIDIA H100 80GB HBM3 #%u", dev_index(dev));
    return TOPO_NVML_SUCCESS;
}

static topo__nvml_return f_uuid(topo__nvml_device dev, char *buf, unsigned len)
{
    snprintf(buf, len, "GPU-fake-%u", dev_index(dev));
    return TOPO_NVML_SUCCESS;
}

/* Hybrid cube mesh (DGX-1): quads 0-3 and 4-7 fully linked, and g <-> g^4.
 * Link l of GPU g: l < 3 the other quad members, l == 3 the cross link. */
static int mesh_peer(unsigned g, unsigned l)
{
    unsigned base = g & 4, k = 0;

    if (l == 3)
        return (int)(g ^ 4);
    for (unsigned q = base; q < base + 4; q++)
        if (q != g && k++ == l)
            return (int)q;
    return -1;
}

static topo__nvml_return f_state(topo__nvml_device dev, unsigned link, topo__nvml_enable *on)
{
    (void)dev;
    if (link >= 18)
        return TOPO_NVML_ERROR_UNKNOWN; /* past the last link */
    *on = fake_mode == 0 ? (link < 4 ? TOPO_NVML_ENABLED : TOPO_NVML_DISABLED) : TOPO_NVML_ENABLED;
    return TOPO_NVML_SUCCESS;
}

static topo__nvml_return f_remote_pci(topo__nvml_device dev, unsigned link,
                                      struct topo__nvml_pci *pci)
{
    const struct accel_topo_pci *peer;

    if (fake_mode == 0)
        peer = &fake_topo->gpus[mesh_peer(dev_index(dev), link)].pci;
    else
        peer = &fake_topo->nvswitches[link % 4]; /* 18 links over 4 NVSwitches */
    pci->domain = peer->domain;
    pci->bus = peer->bus;
    pci->device = peer->dev;
    return TOPO_NVML_SUCCESS;
}

static topo__nvml_return f_version(topo__nvml_device dev, unsigned link, unsigned *version)
{
    (void)dev;
    (void)link;
    *version = fake_mode == 0 ? 2 : 6; /* NVLink 2 (V100), NVLink 4 (H100) */
    return TOPO_NVML_SUCCESS;
}

static topo__nvml_return f_type(topo__nvml_device dev, unsigned link, topo__nvml_peer *type)
{
    (void)dev;
    (void)link;
    *type = fake_mode == 0 ? TOPO_NVML_PEER_GPU : TOPO_NVML_PEER_SWITCH;
    return TOPO_NVML_SUCCESS;
}

static const struct topo__nvml_api fake_api = {f_init,  f_shutdown,   f_by_busid, f_name, f_uuid,
                                               f_state, f_remote_pci, f_version,  f_type};

/* The H100 model without the NVLink matrix its XML carries. */
static void h100_without_nvlink(struct accel_topo *t)
{
    test_alloc_install(); /* before any allocation: one allocator for all */
    load(H100, t);
    accel_free(t->nvlink);
    t->nvlink = NULL;
    t->nvlink_source = ACCEL_NVLINK_UNKNOWN;
    for (unsigned g = 0; g < t->ngpus; g++)
        t->gpus[g].nvswitch_mbps = 0;
    fake_topo = t;
    fake_init_fails = 0;
    fake_shutdowns = 0;
}

TEST(nvml_mesh_orders_ranks_along_links)
{
    static const char *const ids[8] = {"0", "1", "2", "3", "7", "4", "5", "6"};
    struct accel_plan_req req = {8, NULL, false, NULL, false};
    struct accel_error e = {0};
    struct accel_topo t;
    struct accel_node_plan p;

    h100_without_nvlink(&t);
    fake_mode = 0;
    ASSERT_OK(topo__nvml_apply(&t, &fake_api, &e));
    ASSERT_INT_EQ(fake_shutdowns, 1);
    ASSERT_INT_EQ(t.nvlink_source, ACCEL_NVLINK_NVML);
    ASSERT_STR_EQ(t.gpus[3].model, "NVIDIA H100 80GB HBM3 #3");
    ASSERT_STR_EQ(t.gpus[3].uuid, "GPU-fake-3");
    ASSERT_INT_EQ(t.nvlink[0 * 8 + 1], 25000);
    ASSERT_INT_EQ(t.nvlink[3 * 8 + 7], 25000);
    ASSERT_INT_EQ(t.nvlink[3 * 8 + 4], 0);
    ASSERT_INT_EQ(t.gpus[0].nvswitch_mbps, 0);
    plan(&t, &req, &p);
    check_plan(&t, &req, &p);
    /* socket 0 in order, then socket 1 from 7, the NVLink peer of 3 */
    for (unsigned r = 0; r < 8; r++) {
        ASSERT_STR_EQ(p.ranks[r].gpu_id, ids[r]);
        ASSERT_INT_EQ(p.ranks[r].next, r < 7 ? ACCEL_LINK_NVLINK : ACCEL_LINK_SYS);
        ASSERT_INT_EQ(p.ranks[r].nic, p.ranks[r].gpu + 1); /* NICs follow the GPUs */
    }
    accel_node_plan_free(&p);
    accel_topo_free(&t);
}

TEST(nvml_nvswitch)
{
    struct accel_plan_req req = {8, NULL, false, NULL, false};
    struct accel_error e = {0};
    struct accel_topo t;
    struct accel_node_plan p;
    struct topo__nvml_api old = fake_api;

    /* H100: 18 NVLink 4 links to NVSwitches, named by the device type */
    h100_without_nvlink(&t);
    fake_mode = 1;
    ASSERT_OK(topo__nvml_apply(&t, &fake_api, &e));
    ASSERT_INT_EQ(t.nvlink_source, ACCEL_NVLINK_NVML);
    for (unsigned g = 0; g < 8; g++)
        ASSERT_INT_EQ(t.gpus[g].nvswitch_mbps, 18 * 25000);
    plan(&t, &req, &p);
    expect_plan(&t, &p, h100_plan, 8);
    accel_node_plan_free(&p);
    accel_topo_free(&t);

    /* an older driver: no device type, no version: NVSwitches by bus id,
     * 25 GB/s per link; GPU 7 cannot be opened (another cgroup) */
    h100_without_nvlink(&t);
    fake_mode = 2;
    old.link_remote_type = NULL;
    old.link_version = NULL;
    old.name = NULL;
    old.uuid = NULL;
    ASSERT_OK(topo__nvml_apply(&t, &old, &e));
    ASSERT_INT_EQ(t.gpus[0].nvswitch_mbps, 18 * 25000);
    ASSERT_INT_EQ(t.gpus[7].nvswitch_mbps, 0);
    ASSERT_STR_EQ(t.gpus[0].model, "NVIDIA H100 80GB HBM3"); /* the XML's name stays */
    plan(&t, &req, &p);
    ASSERT_INT_EQ(p.ranks[5].next, ACCEL_LINK_NVSWITCH);
    ASSERT_INT_EQ(p.ranks[6].next, ACCEL_LINK_NUMA); /* 6 -> 7: two host bridges, one socket */
    ASSERT_INT_EQ(p.ranks[7].next, ACCEL_LINK_SYS);
    accel_node_plan_free(&p);
    accel_topo_free(&t);
}

TEST(nvml_absent_or_failing_adds_nothing)
{
    struct accel_error e = {0};
    struct accel_topo t;

    /* the library is not there: the normal case on a machine without driver */
    h100_without_nvlink(&t);
    ASSERT_OK(topo__nvml_load(&t, "libaccelrun-no-such-nvml.so.1", &e));
    ASSERT_INT_EQ(t.nvlink_source, ACCEL_NVLINK_UNKNOWN);
    ASSERT(t.nvlink == NULL);
    /* a library without NVML's functions */
    ASSERT_OK(topo__nvml_load(&t, "libm.so.6", &e));
    ASSERT_INT_EQ(t.nvlink_source, ACCEL_NVLINK_UNKNOWN);
    /* NVML that does not start (no driver loaded) */
    fake_init_fails = 1;
    fake_mode = 1;
    ASSERT_OK(topo__nvml_apply(&t, &fake_api, &e));
    ASSERT_INT_EQ(t.nvlink_source, ACCEL_NVLINK_UNKNOWN);
    ASSERT_STR_EQ(t.gpus[0].uuid, "GPU-5d0c1f2e-1000-4b1a-9e3d-8c7f6a5b2000");
    accel_topo_free(&t);

    /* an XML matrix is not overwritten: NVML only adds names there */
    load(H100, &t);
    fake_topo = &t;
    fake_init_fails = 0;
    fake_mode = 0;
    ASSERT_OK(topo__nvml_apply(&t, &fake_api, &e));
    ASSERT_INT_EQ(t.nvlink_source, ACCEL_NVLINK_XML);
    ASSERT_INT_EQ(t.nvlink[0 * 8 + 1], 0);
    ASSERT_STR_EQ(t.gpus[2].uuid, "GPU-fake-2");
    accel_topo_free(&t);
}

/* ---------------------------------------------------------------- live machine */

TEST(live_discovery)
{
    struct accel_error e = {0};
    struct accel_topo t, u;
    struct accel_node_plan p, q;
    struct accel_plan_req req = {1, NULL, false, NULL, false};
    enum accel_err rc = accel_topo_discover(&t, &e);

    if (rc == ACCEL_EIO)
        SKIP("hwloc cannot discover this machine here");
    if (rc != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "discover: %s: %s", accel_errname(rc), e.msg);
    test_note("this machine: %u GPUs, %u NICs, %u NUMA nodes, NVLink %d", t.ngpus, t.nnics, t.nnuma,
              (int)t.nvlink_source);
    ASSERT(t.nnuma >= 1);
    for (unsigned g = 0; g < t.ngpus; g++)
        ASSERT_INT_EQ(strlen(t.gpus[g].pci.busid), 12);
    plan(&t, &req, &p);
    check_plan(&t, &req, &p);
    /* the same machine twice gives the same plan */
    ASSERT_OK(accel_topo_discover(&u, &e));
    ASSERT_INT_EQ(u.ngpus, t.ngpus);
    ASSERT_INT_EQ(u.nnics, t.nnics);
    plan(&u, &req, &q);
    ASSERT_STR_EQ(q.ranks[0].cpus, p.ranks[0].cpus);
    ASSERT_STR_EQ(q.ranks[0].busid, p.ranks[0].busid);
    accel_node_plan_free(&p);
    accel_node_plan_free(&q);
    accel_topo_free(&t);
    accel_topo_free(&u);
}

/* ---------------------------------------------------------------- determinism */

TEST(same_input_same_plan)
{
    const char *files[] = {H100, "nvidiaDGX2.xml", "24em64t-2n6c2t-pci.xml",
                           "40intel64-2g2n4c+pcilocality.xml"};

    for (size_t f = 0; f < N_OF(files); f++) {
        const char *path = f == 0 ? H100 : corpus_file(files[f]);
        struct accel_topo a, b;

        load(path, &a);
        load(path, &b);
        for (unsigned nproc = 1; nproc <= (a.ngpus ? a.ngpus : 8); nproc++) {
            struct accel_plan_req req = {nproc, NULL, false, NULL, false};
            struct accel_node_plan p, q, r;
            char x[512], y[512];

            plan(&a, &req, &p);
            plan(&b, &req, &q);
            plan(&a, &req, &r);
            for (unsigned i = 0; i < nproc; i++) {
                rank_line(&a, &p.ranks[i], x, sizeof(x));
                rank_line(&b, &q.ranks[i], y, sizeof(y));
                ASSERT_STR_EQ(x, y);
                rank_line(&a, &r.ranks[i], y, sizeof(y));
                ASSERT_STR_EQ(x, y);
                ASSERT_INT_EQ(p.ranks[i].gpu, q.ranks[i].gpu);
                ASSERT_INT_EQ(p.ranks[i].nic, q.ranks[i].nic);
            }
            accel_node_plan_free(&p);
            accel_node_plan_free(&q);
            accel_node_plan_free(&r);
        }
        accel_topo_free(&a);
        accel_topo_free(&b);
    }
}

/* ---------------------------------------------------------------- CPU lists */

TEST(cpulist_format)
{
    static const struct {
        unsigned n;
        unsigned pus[8];
        const char *want;
    } rows[] = {
        {0, {0}, ""},
        {1, {7}, "7"},
        {3, {3, 1, 2}, "1-3"},
        {3, {0, 2, 4}, "0,2,4"},
        {3, {5, 5, 6}, "5-6"},
        {6, {9, 0, 1, 3, 4, 5}, "0-1,3-5,9"},
        {2, {4294967295u, 4294967294u}, "4294967294-4294967295"},
    };

    for (size_t i = 0; i < N_OF(rows); i++) {
        char *s = NULL;

        ASSERT_OK(topo__cpulist(rows[i].pus, rows[i].n, &s));
        ASSERT_STR_EQ(s, rows[i].want);
        accel_free(s);
    }
    ASSERT_STR_EQ(accel_link_name(ACCEL_LINK_PCI_SWITCH), "PCI_SWITCH");
    ASSERT_STR_EQ(accel_link_name((enum accel_link)99), "?");
    ASSERT_STR_EQ(accel_nic_kind_name(ACCEL_NIC_ROCE), "RoCE");
    ASSERT_STR_EQ(accel_nic_kind_name((enum accel_nic_kind)99), "?");
}

/* ---------------------------------------------------------------- allocation failures */

/* Fails each allocation in turn through load, plan and export: every failure
 * is ACCEL_ENOMEM, nothing leaks, and the run without failure succeeds. */
static void torture(const char *path, const struct accel_plan_req *req)
{
    unsigned long n;

    test_alloc_install();
    for (n = 1; n < 100000; n++) {
        struct accel_error e = {0};
        struct accel_topo t;
        struct accel_node_plan p = {0};
        struct accel_rank_plan ranks[16];
        struct accel_plan out;
        enum accel_err rc;

        test_alloc_fail_at(n);
        rc = accel_topo_load_xml(&t, path, &e);
        if (rc == ACCEL_OK)
            rc = accel_topo_plan(&t, req, &p, &e);
        if (rc == ACCEL_OK)
            rc = accel_node_plan_export(&t, &p, req->gpus, ranks, 16, &out, &e);
        if (rc != ACCEL_OK && rc != ACCEL_ENOMEM)
            test_fail(__FILE__, __LINE__, "allocation %lu: %s: %s", n, accel_errname(rc), e.msg);
        if (rc == ACCEL_ENOMEM)
            ASSERT(e.msg[0] != '\0');
        accel_node_plan_free(&p);
        accel_topo_free(&t);
        ASSERT_INT_EQ(test_alloc_live(), 0);
        if (rc == ACCEL_OK && test_alloc_count() < n)
            break;
    }
    test_note("%s: %lu allocations", path, n - 1);
    ASSERT(n > 5);
    test_alloc_fail_at(0);
}

TEST(alloc_failures_h100)
{
    struct accel_plan_req req = {8, "0,1,2,3,4,5,6,7", false, NULL, false};

    torture(H100, &req);
}

TEST(alloc_failures_cpu_only_and_v3)
{
    struct accel_plan_req req = {8, NULL, false, NULL, false};

    torture(corpus_file("40intel64-2g2n4c+pcilocality.xml"), &req);
    req.nproc = 3;
    torture(corpus_file("32em64t-2n8c2t-pci-normalio.xml"), &req);
}

TEST(alloc_failures_nvml)
{
    struct accel_topo t;

    h100_without_nvlink(&t);
    fake_mode = 1;
    for (unsigned long n = 1; n <= 3; n++) {
        struct accel_error e = {0};
        long live = test_alloc_live();

        test_alloc_fail_at(n);
        ASSERT_INT_EQ(topo__nvml_apply(&t, &fake_api, &e), ACCEL_ENOMEM);
        ASSERT_INT_EQ(test_alloc_live(), live);
        ASSERT_INT_EQ(t.nvlink_source, ACCEL_NVLINK_UNKNOWN);
        ASSERT_INT_EQ(fake_shutdowns, n); /* NVML is shut down on every path */
    }
    test_alloc_fail_at(0);
    accel_topo_free(&t);
}

/* The exported list is the granted one in plan order, the same for every
 * rank; the NIC is each rank's own (tests/topo/two-socket.xml: GPUs 0,1 and
 * mlx5_0 on socket 0, GPUs 2,3 and mlx5_1 on socket 1). */
TEST(export_orders_the_granted_list)
{
    struct accel_plan_req req = {2, "0,1,2,3", false, NULL, false};
    struct accel_rank_plan ranks[2];
    struct accel_plan out;
    struct accel_error e = {0};
    struct accel_topo t;
    struct accel_node_plan p;

    load("tests/topo/nvlink-pairs.xml", &t);
    plan(&t, &req, &p);
    ASSERT_OK(accel_node_plan_export(&t, &p, req.gpus, ranks, 2, &out, &e));
    /* the NVLink pair 0-2 first, then the rest in the granted order */
    ASSERT_STR_EQ(ranks[0].cuda_visible_devices, "0,2,1,3");
    ASSERT_STR_EQ(ranks[1].cuda_visible_devices, "0,2,1,3");
    accel_node_plan_free(&p);
    req.gpus = "3,1,2,0";
    plan(&t, &req, &p);
    ASSERT_OK(accel_node_plan_export(&t, &p, req.gpus, ranks, 2, &out, &e));
    ASSERT_STR_EQ(ranks[0].cuda_visible_devices, "0,2,3,1");
    accel_node_plan_free(&p);
    /* a plan whose GPU is not in the list given to export */
    req.gpus = "0,1,2,3";
    plan(&t, &req, &p);
    ASSERT_INT_EQ(accel_node_plan_export(&t, &p, "1,3", ranks, 2, &out, &e), ACCEL_EINVAL);
    ASSERT_CONTAINS(e.msg, "is not in 1,3");
    accel_node_plan_free(&p);
    accel_topo_free(&t);

    load("tests/topo/two-socket.xml", &t);
    req.nproc = 4;
    plan(&t, &req, &p);
    ASSERT_INT_EQ(accel_node_plan_export(&t, &p, req.gpus, ranks, 2, &out, &e), ACCEL_ETOOBIG);
    accel_node_plan_free(&p);
    req.nproc = 2;
    req.gpus = "2,3";
    plan(&t, &req, &p);
    ASSERT_OK(accel_node_plan_export(&t, &p, req.gpus, ranks, 2, &out, &e));
    ASSERT_STR_EQ(ranks[0].nccl_ib_hca, "=mlx5_1");
    ASSERT_STR_EQ(ranks[1].nccl_ib_hca, "=mlx5_1");
    ASSERT_STR_EQ(p.ranks[0].cpus, "1");
    accel_node_plan_free(&p);
    accel_topo_free(&t);
}

/* Binding only narrows the CPUs the process has; bad lists are refused. */
TEST(bind_cpus)
{
    struct accel_error e = {0};
    cpu_set_t now;
    int first = -1;

    ASSERT_OK(sched_getaffinity(0, sizeof(now), &now));
    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &now))
            first = c;
    ASSERT(first >= 0);
    {
        char list[64];
        /* the first allowed CPU plus one past the mask's end: only the first */
        snprintf(list, sizeof(list), "%d,%d", first, CPU_SETSIZE - 1);
        if (CPU_ISSET(CPU_SETSIZE - 1, &now))
            SKIP("CPU 1023 is allowed here; the narrowing case needs it not to be");
        ASSERT_OK(accel_topo_bind_cpus(list, &e));
    }
    ASSERT_OK(sched_getaffinity(0, sizeof(now), &now));
    ASSERT_INT_EQ(CPU_COUNT(&now), 1);
    ASSERT(CPU_ISSET(first, &now));
    ASSERT_OK(accel_topo_bind_cpus("0-1023", &e)); /* never widens */
    ASSERT_OK(sched_getaffinity(0, sizeof(now), &now));
    ASSERT_INT_EQ(CPU_COUNT(&now), 1);
    ASSERT_INT_EQ(accel_topo_bind_cpus("1023", &e), ACCEL_ENOTFOUND);
    ASSERT_CONTAINS(e.msg, "none of CPUs 1023");
    ASSERT_INT_EQ(accel_topo_bind_cpus("1024", &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_topo_bind_cpus("", &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_topo_bind_cpus("3-1", &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_topo_bind_cpus("0,", &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_topo_bind_cpus("-1", &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_topo_bind_cpus(NULL, &e), ACCEL_EINVAL);
}

TEST_LIST(T(corpus_models_and_plans), T(corpus_every_file_plans), T(corpus_dgx2_nvlink_matrix),
          T(corpus_nic_kinds_and_names), T(h100_model), T(h100_full_plan_and_export),
          T(h100_granted_subsets), T(h100_local_indices), T(h100_errors), T(cpu_only_plans),
          T(ethernet_only_nics), T(nics_spread_over_a_shared_switch), T(xml_v3_is_read),
          T(xml_errors), T(nvml_mesh_orders_ranks_along_links), T(nvml_nvswitch),
          T(nvml_absent_or_failing_adds_nothing), T(live_discovery), T(same_input_same_plan),
          T(cpulist_format), T(alloc_failures_h100), T(alloc_failures_cpu_only_and_v3),
          T(alloc_failures_nvml), T(export_orders_the_granted_list), T(bind_cpus))
