/*
 * topo.c: `accelrun topo` shows the placement accelrun would use: per local
 * rank the GPU, its PCI bus id, NUMA node, CPU set, NIC and the link to the
 * next rank (from hwloc: this machine, or an XML file); and, given Slurm's
 * topology.conf and a node list, the order of the nodes in the ring.
 */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel/cluster.h"
#include "accel/topo.h"
#include "cli.h"

const char cli_topo_usage[] =
    "usage: accelrun topo [--xml FILE] [--nproc-per-node P] [--gpus LIST]\n"
    "                     [--topology-conf FILE --nodes HOSTLIST] [--json | --dot]\n"
    "\n"
    "Show the placement of one node's ranks (GPU, PCI bus id, NUMA node, CPU set,\n"
    "NIC, link to the next rank) and, with a topology.conf, the order of the nodes\n"
    "in the ring: nodes under one leaf switch next to each other, the first node\n"
    "first.\n"
    "\n"
    "  --xml FILE            an hwloc XML topology (default: this machine)\n"
    "  --nproc-per-node P    local ranks (default: one per granted GPU, else 1)\n"
    "  --gpus LIST           the GPUs granted, as CUDA_VISIBLE_DEVICES lists them\n"
    "  --topology-conf FILE  Slurm's topology.conf (tree form)\n"
    "  --nodes HOSTLIST      the step's nodes, as SLURM_STEP_NODELIST (n[1-4],gpu7)\n"
    "  --json                print {\"ranks\":[...],\"nodes\":[...]}\n"
    "  --dot                 print the node and its ring as a Graphviz graph\n"
    "  -h, --help            this text\n"
    "\n"
    "Exit status: 0 printed, 1 the topology or the request is unusable, 2 usage or an\n"
    "unreadable file.\n";

static char prog_name[] = "accelrun topo";

struct topo_opts {
    const char *xml, *gpus, *conf, *nodes;
    unsigned nproc;
    bool json, dot;
};

/* The rank's NIC for the table; one across the CPU interconnect says so
 * ("mlx5_0 (SYS)"): NCCL's traffic then crosses the sockets. */
static const char *nic_name(const struct accel_topo *t, const struct accel_node_rank *r, char *buf,
                            size_t len)
{
    if (r->nic < 0)
        return "-";
    if (r->nic_link != ACCEL_LINK_SYS)
        return t->nics[r->nic].name;
    snprintf(buf, len, "%s (SYS)", t->nics[r->nic].name);
    return buf;
}

static void print_table(const struct accel_topo *t, const struct accel_node_plan *p)
{
    printf("%-5s %-6s %-13s %-5s %-24s %-10s %s\n", "rank", "gpu", "pci", "numa", "cpus", "nic",
           "link to next");
    for (unsigned i = 0; i < p->nranks; i++) {
        const struct accel_node_rank *r = &p->ranks[i];
        char numa[16], nic[48];
        snprintf(numa, sizeof(numa), "%d", r->numa);
        printf("%-5u %-6s %-13s %-5s %-24s %-10s %s\n", i, r->gpu_id[0] ? r->gpu_id : "-",
               r->busid[0] ? r->busid : "-", r->numa >= 0 ? numa : "-", r->cpus ? r->cpus : "-",
               nic_name(t, r, nic, sizeof(nic)), accel_link_name(r->next));
    }
}

static void print_dot(const struct accel_topo *t, const struct accel_node_plan *p)
{
    printf("graph accelrun_ring {\n  layout=circo;\n  node [shape=box];\n");
    for (unsigned i = 0; i < p->nranks; i++) {
        const struct accel_node_rank *r = &p->ranks[i];
        char nic[48];
        printf("  r%u [label=\"rank %u\\nGPU %s %s\\nNUMA %d  NIC %s\"];\n", i, i,
               r->gpu_id[0] ? r->gpu_id : "-", r->busid, r->numa, nic_name(t, r, nic, sizeof(nic)));
    }
    for (unsigned i = 0; p->nranks > 1 && i < p->nranks; i++)
        printf("  r%u -- r%u [label=\"%s\"];\n", i, (i + 1) % p->nranks,
               accel_link_name(p->ranks[i].next));
    printf("}\n");
}

/* Node order: prints a table, or fills `arr` for --json. */
static int nodes_part(const struct topo_opts *o, cJSON *arr)
{
    struct accel_switch_tree tree;
    struct accel_hostlist hosts = {0, NULL};
    struct accel_error err;
    size_t *order = NULL;
    int status = CLI_EXIT_FINDINGS;

    accel_switch_tree_init(&tree);
    accel_error_clear(&err);
    if (accel_switch_tree_load(&tree, o->conf, &err) != ACCEL_OK ||
        accel_hostlist_expand(o->nodes, ACCEL_CLUSTER_MAX_NODES, &hosts, &err) != ACCEL_OK) {
        if (err.line > 0)
            fprintf(stderr, "%s:%u:%u: error: %s\n", err.file, err.line, err.column, err.msg);
        else
            fprintf(stderr, "accelrun topo: %s%s%s\n", err.file[0] ? err.file : "",
                    err.file[0] ? ": " : "", err.msg);
        goto out;
    }
    order = calloc(hosts.n, sizeof(*order));
    if (order == NULL || accel_cluster_order(&tree, (const char *const *)hosts.names, hosts.n,
                                             order, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun topo: %s\n", order ? err.msg : "out of memory");
        goto out;
    }
    if (err.code == ACCEL_ENOTFOUND)
        fprintf(stderr, "accelrun topo: warning: %s\n", err.msg);
    if (arr == NULL)
        printf("%-10s %-16s %s\n", "group", "node", "leaf switch");
    for (size_t i = 0; i < hosts.n; i++) {
        const char *node = hosts.names[order[i]];
        uint32_t leaf = accel_switch_tree_leaf(&tree, node);
        const char *leaf_name = leaf == ACCEL_SWITCH_NONE ? "-" : tree.switches[leaf].name;
        if (arr != NULL) {
            cJSON *n = cJSON_CreateObject();
            cJSON_AddNumberToObject(n, "group_rank", (double)i);
            cJSON_AddStringToObject(n, "node", node);
            cJSON_AddStringToObject(n, "leaf", leaf_name);
            cJSON_AddItemToArray(arr, n);
        } else {
            printf("%-10zu %-16s %s\n", i, node, leaf_name);
        }
    }
    if (arr == NULL) {
        struct accel_ring_metrics m, slurm, bound;
        if (accel_cluster_metrics(&tree, (const char *const *)hosts.names, hosts.n, order, &m,
                                  &err) == ACCEL_OK &&
            accel_cluster_metrics(&tree, (const char *const *)hosts.names, hosts.n, NULL, &slurm,
                                  &err) == ACCEL_OK &&
            accel_cluster_bound(&tree, (const char *const *)hosts.names, hosts.n, &bound, &err) ==
                ACCEL_OK)
            printf("ring: %zu leaf-switch crossings (Slurm's order: %zu, lower bound: %zu)\n",
                   m.crossings, slurm.crossings, bound.crossings);
    }
    status = CLI_EXIT_OK;
out:
    free(order);
    accel_hostlist_free(&hosts);
    accel_switch_tree_free(&tree);
    return status;
}

static cJSON *ranks_json(const struct accel_topo *t, const struct accel_node_plan *p)
{
    cJSON *arr = cJSON_CreateArray();

    for (unsigned i = 0; arr != NULL && i < p->nranks; i++) {
        const struct accel_node_rank *r = &p->ranks[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "local_rank", i);
        cJSON_AddStringToObject(o, "gpu", r->gpu_id);
        cJSON_AddStringToObject(o, "pci", r->busid);
        cJSON_AddNumberToObject(o, "numa", r->numa);
        cJSON_AddStringToObject(o, "cpus", r->cpus ? r->cpus : "");
        cJSON_AddStringToObject(o, "nic", r->nic >= 0 ? t->nics[r->nic].name : "");
        cJSON_AddStringToObject(o, "nic_link", accel_link_name(r->nic_link));
        cJSON_AddStringToObject(o, "link_to_next", accel_link_name(r->next));
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

static int parse(int argc, char **argv, struct topo_opts *o)
{
    static const struct option opts[] = {{"xml", required_argument, NULL, 'x'},
                                         {"nproc-per-node", required_argument, NULL, 'p'},
                                         {"gpus", required_argument, NULL, 'g'},
                                         {"topology-conf", required_argument, NULL, 't'},
                                         {"nodes", required_argument, NULL, 'n'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"dot", no_argument, NULL, 'd'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct cli_getopt g = {argc, argv, prog_name, "h", opts, cli_topo_usage};
    unsigned long n;
    int c;

    while ((c = cli_next_option(&g)) >= 0) {
        switch (c) {
        case 'x':
            o->xml = optarg;
            break;
        case 'g':
            o->gpus = optarg;
            break;
        case 't':
            o->conf = optarg;
            break;
        case 'n':
            o->nodes = optarg;
            break;
        case 'j':
            o->json = true;
            break;
        case 'd':
            o->dot = true;
            break;
        case 'p':
            if (!cli_parse_uint("--nproc-per-node", optarg, 1, ACCEL_TOPO_MAX_RANKS, &n))
                return CLI_EXIT_USAGE;
            o->nproc = (unsigned)n;
            break;
        }
    }
    if (c != CLI_OPT_END)
        return c == CLI_OPT_HELP ? -1 : CLI_EXIT_USAGE;
    if (optind != argc) {
        fprintf(stderr, "accelrun topo: unexpected argument '%s'\n\n%s", argv[optind],
                cli_topo_usage);
        return CLI_EXIT_USAGE;
    }
    if ((o->conf == NULL) != (o->nodes == NULL) || (o->json && o->dot) ||
        (o->dot && o->conf != NULL)) {
        fprintf(stderr,
                "accelrun topo: --topology-conf and --nodes go together; --json and "
                "--dot exclude each other; --dot draws one node only\n\n%s",
                cli_topo_usage);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int cli_topo(int argc, char **argv)
{
    struct topo_opts o = {NULL, NULL, NULL, NULL, 0, false, false};
    struct accel_topo topo;
    struct accel_node_plan plan = {0, false, NULL};
    struct accel_plan_req req = {0, NULL, false, NULL, false};
    struct accel_error err;
    cJSON *root = NULL;
    int status = parse(argc, argv, &o);

    if (status != CLI_EXIT_OK)
        return status < 0 ? CLI_EXIT_OK : status;
    memset(&topo, 0, sizeof(topo));
    accel_error_clear(&err);
    if ((o.xml ? accel_topo_load_xml(&topo, o.xml, &err) : accel_topo_discover(&topo, &err)) !=
        ACCEL_OK) {
        fprintf(stderr, "accelrun topo: %s\n", err.msg);
        return (err.code == ACCEL_ENOTFOUND || err.code == ACCEL_EPERM || err.code == ACCEL_EIO)
                   ? CLI_EXIT_USAGE
                   : CLI_EXIT_FINDINGS;
    }
    /* default: one rank per granted GPU (all of the node's without --gpus) */
    req.nproc = o.nproc ? o.nproc : (topo.ngpus ? topo.ngpus : 1);
    if (o.nproc == 0 && o.gpus != NULL) {
        unsigned n = accel_gpu_list_count(o.gpus);
        req.nproc = n ? n : 1;
    }
    req.gpus = o.gpus;
    status = CLI_EXIT_FINDINGS;
    if (accel_topo_plan(&topo, &req, &plan, &err) != ACCEL_OK) {
        fprintf(stderr, "accelrun topo: %s\n", err.msg);
        goto out;
    }
    if (o.json) {
        char *text;
        root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "ranks", ranks_json(&topo, &plan));
        if (o.conf) {
            cJSON *nodes = cJSON_AddArrayToObject(root, "nodes");
            if (nodes_part(&o, nodes) != CLI_EXIT_OK)
                goto out;
        }
        text = cJSON_Print(root);
        if (text == NULL)
            goto out;
        puts(text);
        cJSON_free(text);
    } else if (o.dot) {
        print_dot(&topo, &plan);
    } else {
        printf("%s%s%u GPU%s, %u NIC%s, %u NVSwitch%s, %u NUMA node%s; NVLink %s\n",
               topo.product[0] ? topo.product : "", topo.product[0] ? ": " : "", topo.ngpus,
               topo.ngpus == 1 ? "" : "s", topo.nnics, topo.nnics == 1 ? "" : "s", topo.nnvswitches,
               topo.nnvswitches == 1 ? "" : "es", topo.nnuma, topo.nnuma == 1 ? "" : "s",
               topo.nvlink_source == ACCEL_NVLINK_UNKNOWN ? "unknown"
               : topo.nvlink_source == ACCEL_NVLINK_XML   ? "from the XML"
                                                          : "from NVML");
        print_table(&topo, &plan);
        if (o.conf) {
            putchar('\n');
            if (nodes_part(&o, NULL) != CLI_EXIT_OK)
                goto out;
        }
    }
    status = CLI_EXIT_OK;
out:
    cJSON_Delete(root);
    accel_node_plan_free(&plan);
    accel_topo_free(&topo);
    return status;
}
