/*
 * bench/topo_sim.c: how many switch boundaries a ring crosses in accelrun's
 * node order, in Slurm's default order and at the lower bound, on simulated
 * clusters from 8 to 131,072 GPUs, and how long accelrun takes to plan it.
 *
 * Clusters (8 GPUs per node; sizes in the options):
 *   fat-tree-2   leaf switches of --leaf nodes under one (logical) spine layer;
 *   fat-tree-3   the same leaves grouped in pods of --pod leaves under a core;
 *   rail         rail-optimised: scalable units (SU) of --su nodes, NIC r of
 *                every node of an SU on the SU's rail switch r, rail switches
 *                joined by spines.  Slurm's tree cannot say "rail", so the
 *                topology.conf names one switch per SU; the ring of local
 *                rank r runs on rail r only, so it crosses a rail switch
 *                boundary exactly where the node ring leaves an SU, once per
 *                rail: the rail figures are 8 x the SU figures.  The column
 *                "mixed" is what the same order would cost if local rank r sat
 *                on a different rail on different nodes (a per-node plan that
 *                does not keep rail i for local rank i): then most edges
 *                inside an SU go rail -> spine -> other rail as well.
 * Allocations: a busy scheduler gives the job a random subset (fixed seed) of
 * a cluster --busy times larger.  Slurm lists the step's nodes sorted by name
 * (SLURM_STEP_NODELIST); names are "n" + a zero-padded number, numbered in
 * rack order ("rack": node numbers follow the leaves) or shuffled against the
 * racks ("shuffled": renamed hardware, cloud VMs whose names say nothing
 * about placement).
 * For every case: the cluster's topology.conf is generated and parsed by
 * accel_switch_tree_parse, the step's compressed node list is expanded by
 * accel_hostlist_expand, accel_cluster_order plans, accel_cluster_metrics and
 * accel_cluster_bound measure.  Planning time is the median of --runs runs
 * of expand + order (CLOCK_MONOTONIC).  Prints a table; writes a .dat file
 * (one gnuplot index per scenario) for bench/topo_sim.sh.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accel/alloc.h"
#include "accel/buf.h"
#include "accel/cluster.h"

#define GPUS_PER_NODE 8
#define RAILS 8

enum kind { FAT2, FAT3, RAIL };

struct params {
    unsigned leaf, pod, su, runs, max_gpus;
    double busy;
    uint64_t seed;
    const char *dat;
};

struct row { /* one line of the table */
    size_t gpus, nodes, cluster, leaves, list_bytes;
    struct accel_ring_metrics acc, slurm, bound;
    size_t mixed; /* rail only: crossings with rails mixed between nodes */
    double plan_ms, order_ms, parse_ms;
};

static uint64_t rnd(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void die(const char *what, const struct accel_error *e)
{
    fprintf(stderr, "topo_sim: %s: %s:%u:%u: %s\n", what, e ? e->file : "", e ? e->line : 0,
            e ? e->column : 0, e ? e->msg : "failed");
    exit(1);
}

static void put(struct accel_buf *b, const char *fmt, ...) ACCEL_PRINTF(2, 3);
static void put(struct accel_buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (accel_buf_puts(b, tmp) != ACCEL_OK)
        die("buffer", NULL);
}

/* Slurm's compressed form of sorted numbers: n[00003,00005-00007] */
static void compress(struct accel_buf *b, const char *prefix, const uint32_t *num, size_t m,
                     int width)
{
    if (m == 1) {
        put(b, "%s%0*u", prefix, width, num[0]);
        return;
    }
    put(b, "%s[", prefix);
    for (size_t i = 0; i < m;) {
        size_t j = i;
        while (j + 1 < m && num[j + 1] == num[j] + 1)
            j++;
        if (j == i)
            put(b, "%s%0*u", i ? "," : "", width, num[i]);
        else
            put(b, "%s%0*u-%0*u", i ? "," : "", width, num[i], width, num[j]);
        i = j + 1;
    }
    put(b, "]");
}

static unsigned group_size(enum kind k, const struct params *p)
{
    return k == RAIL ? p->su : p->leaf;
}

/* The topology.conf an admin would write for this cluster. */
static void write_conf(struct accel_buf *b, enum kind k, const struct params *p, size_t N,
                       const uint32_t *num, int width)
{
    unsigned g = group_size(k, p);
    size_t groups = (N + g - 1) / g;
    uint32_t *tmp = malloc(g * sizeof(*tmp));

    if (tmp == NULL)
        die("memory", NULL);
    for (size_t l = 0; l < groups; l++) {
        size_t m = 0;
        for (size_t j = l * g; j < (l + 1) * g && j < N; j++)
            tmp[m++] = num[j];
        qsort(tmp, m, sizeof(*tmp), cmp_u32);
        put(b, "SwitchName=%s%zu Nodes=", k == RAIL ? "su" : "leaf", l + 1);
        compress(b, "n", tmp, m, width);
        put(b, "\n");
    }
    free(tmp);
    if (k == FAT3) {
        size_t pods = (groups + p->pod - 1) / p->pod;
        for (size_t q = 0; q < pods; q++) {
            size_t last = (q + 1) * p->pod < groups ? (q + 1) * p->pod : groups;
            put(b, "SwitchName=pod%zu Switches=leaf[%zu-%zu]\n", q + 1, q * p->pod + 1, last);
        }
        put(b, "SwitchName=core Switches=pod[1-%zu]\n", pods);
    } else {
        put(b, "SwitchName=spine Switches=%s[1-%zu]\n", k == RAIL ? "su" : "leaf", groups);
    }
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Crossings of the rail rings when local rank r of node i sits on rail
 * perm[i][r]: an edge crosses on rail r unless both ends are in one SU on the
 * same rail. */
static size_t mixed_rails(const size_t *order, size_t m, const uint32_t *su, const uint8_t *perm)
{
    size_t x = 0;

    if (m < 2)
        return 0;
    for (size_t k = 0; k < m; k++) {
        size_t a = order[k], b = order[(k + 1) % m];
        for (int r = 0; r < RAILS; r++)
            if (su[a] != su[b] || perm[a * RAILS + r] != perm[b * RAILS + r])
                x++;
    }
    return x;
}

/* One case's working set: a cluster of N nodes in groups of g (leaves or
 * SUs), the step's m of them. */
struct sim {
    enum kind k;
    size_t m, N, g;
    int width;             /* digits of a node number */
    uint64_t seed;         /* the case's random stream, drawn from in a fixed order */
    uint32_t *num;         /* [N] physical position -> name number */
    uint32_t *idx;         /* [N] positions, the first m the allocation */
    uint32_t *chosen, *su; /* [m] the step's name numbers (sorted), their SU */
    uint8_t *perm;         /* [m * RAILS] a rail permutation per node */
    char *pool;            /* [m * 16] the names */
    const char **names;    /* [m] */
    size_t *order, *order2;
    double *samples; /* [runs] */
    struct accel_buf conf, list;
    struct accel_switch_tree t;
};

static void sim_init(struct sim *c, enum kind k, bool shuffled, size_t gpus, const struct params *p)
{
    size_t m = gpus / GPUS_PER_NODE, g = group_size(k, p), N;

    memset(c, 0, sizeof(*c));
    c->k = k;
    c->m = m;
    c->g = g;
    c->seed =
        p->seed ^ (gpus * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)k << 56) ^ ((uint64_t)shuffled << 60);
    c->width = 4;
    c->samples = malloc(p->runs * sizeof(double));
    N = (size_t)((double)m * p->busy + 0.5);
    if (N < m)
        N = m;
    N = (N + g - 1) / g * g;
    c->N = N;
    for (size_t v = N; v >= 10000; v /= 10)
        c->width++;
    c->num = malloc(N * sizeof(*c->num));
    c->idx = malloc(N * sizeof(*c->idx));
    c->chosen = malloc(m * sizeof(*c->chosen));
    c->su = malloc(m * sizeof(*c->su));
    c->perm = malloc(m * RAILS);
    c->pool = malloc(m * 16);
    c->names = malloc(m * sizeof(*c->names));
    c->order = malloc(m * sizeof(*c->order));
    c->order2 = malloc(m * sizeof(*c->order2));
    if (!c->num || !c->idx || !c->chosen || !c->su || !c->perm || !c->pool || !c->names ||
        !c->order || !c->order2 || !c->samples)
        die("memory", NULL);
}

/* The cluster's names (shuffled against the racks or not), its
 * topology.conf, and the step: m random positions, listed by name as
 * Slurm lists them. */
static void allocate(struct sim *c, bool shuffled, const struct params *p)
{
    size_t N = c->N, m = c->m;

    for (size_t j = 0; j < N; j++)
        c->num[j] = (uint32_t)j + 1;
    if (shuffled)
        for (size_t j = N - 1; j > 0; j--) {
            size_t r = (size_t)(rnd(&c->seed) % (j + 1));
            uint32_t tmp = c->num[j];
            c->num[j] = c->num[r];
            c->num[r] = tmp;
        }
    accel_buf_init(&c->conf, 64u << 20);
    write_conf(&c->conf, c->k, p, N, c->num, c->width);
    for (size_t j = 0; j < N; j++)
        c->idx[j] = (uint32_t)j;
    for (size_t i = 0; i < m; i++) {
        size_t r = i + (size_t)(rnd(&c->seed) % (N - i));
        uint32_t tmp = c->idx[i];
        c->idx[i] = c->idx[r];
        c->idx[r] = tmp;
    }
    for (size_t i = 0; i < m; i++)
        c->chosen[i] = c->num[c->idx[i]];
    qsort(c->chosen, m, sizeof(*c->chosen), cmp_u32);
    accel_buf_init(&c->list, 16u << 20);
    compress(&c->list, "n", c->chosen, m, c->width);
}

/* SU of each step node (Slurm order) and a random rail permutation each */
static void rails(struct sim *c)
{
    uint32_t *pos = malloc((c->N + 1) * sizeof(*pos));

    if (pos == NULL)
        die("memory", NULL);
    for (size_t j = 0; j < c->N; j++)
        pos[c->num[j]] = (uint32_t)j;
    for (size_t i = 0; i < c->m; i++) {
        uint8_t *pi = c->perm + i * RAILS;
        c->su[i] = pos[c->chosen[i]] / (uint32_t)c->g;
        for (int r = 0; r < RAILS; r++)
            pi[r] = (uint8_t)r;
        for (int r = RAILS - 1; r > 0; r--) {
            int s = (int)(rnd(&c->seed) % (uint64_t)(r + 1));
            uint8_t tmp = pi[r];
            pi[r] = pi[s];
            pi[s] = tmp;
        }
    }
    free(pos);
}

/* The timed parts, each the median of p->runs: parsing the cluster's
 * topology.conf (the plugin does this once), planning (expand
 * SLURM_STEP_NODELIST + order), ordering alone. */
static void time_planning(struct sim *c, const struct params *p, struct row *out)
{
    struct accel_error e;

    for (unsigned r = 0; r < p->runs; r++) {
        double t0 = now_ms();
        accel_switch_tree_init(&c->t);
        if (accel_switch_tree_parse(&c->t, "topology.conf", accel_buf_str(&c->conf), c->conf.len,
                                    &e) != ACCEL_OK)
            die("parse", &e);
        c->samples[r] = now_ms() - t0;
        if (r + 1 < p->runs)
            accel_switch_tree_free(&c->t);
    }
    out->parse_ms = median(c->samples, p->runs);
    for (unsigned r = 0; r < p->runs; r++) {
        struct accel_hostlist hl;
        double t0 = now_ms();
        if (accel_hostlist_expand(accel_buf_str(&c->list), 0, &hl, &e) != ACCEL_OK)
            die("expand", &e);
        if (accel_cluster_order(&c->t, (const char *const *)hl.names, hl.n, c->order, &e) !=
            ACCEL_OK)
            die("order", &e);
        c->samples[r] = now_ms() - t0;
        if (hl.n != c->m)
            die("expand gave the wrong count", NULL);
        for (size_t i = 0; i < c->m; i++) { /* keep the names for the metrics */
            snprintf(c->pool + i * 16, 16, "%s", hl.names[i]);
            c->names[i] = c->pool + i * 16;
        }
        accel_hostlist_free(&hl);
    }
    out->plan_ms = median(c->samples, p->runs);
    for (unsigned r = 0; r < p->runs; r++) {
        double t0 = now_ms();
        if (accel_cluster_order(&c->t, c->names, c->m, c->order2, &e) != ACCEL_OK)
            die("order", &e);
        c->samples[r] = now_ms() - t0;
    }
    out->order_ms = median(c->samples, p->runs);
}

/* Crossings and spine hops of accelrun's order, Slurm's and the bound. */
static void measure(struct sim *c, struct row *out)
{
    struct accel_error e;
    size_t m = c->m;

    if (memcmp(c->order, c->order2, m * sizeof(*c->order)) != 0 || c->order[0] != 0)
        die("order is not deterministic or moved rank 0", NULL);
    if (accel_cluster_metrics(&c->t, c->names, m, c->order, &out->acc, &e) != ACCEL_OK ||
        accel_cluster_metrics(&c->t, c->names, m, NULL, &out->slurm, &e) != ACCEL_OK ||
        accel_cluster_bound(&c->t, c->names, m, &out->bound, &e) != ACCEL_OK)
        die("metrics", &e);
    if (out->acc.unplaced != 0)
        die("a step node is missing from the generated tree", NULL);
    out->mixed = 0;
    if (c->k == RAIL) {
        struct accel_ring_metrics *ms[] = {&out->acc, &out->slurm, &out->bound};
        for (int i = 0; i < 3; i++) {
            ms[i]->crossings *= RAILS;
            ms[i]->spine_hops *= RAILS;
        }
        out->mixed = mixed_rails(c->order, m, c->su, c->perm);
    }
    out->nodes = m;
    out->cluster = c->N;
    out->leaves = out->bound.leaves;
}

static void sim_free(struct sim *c)
{
    accel_switch_tree_free(&c->t);
    accel_buf_free(&c->conf);
    accel_buf_free(&c->list);
    free(c->num);
    free(c->idx);
    free(c->chosen);
    free(c->su);
    free(c->perm);
    free(c->pool);
    free(c->names);
    free(c->order);
    free(c->order2);
    free(c->samples);
}

static void run_case(enum kind k, bool shuffled, size_t gpus, const struct params *p,
                     struct row *out)
{
    struct sim c;

    sim_init(&c, k, shuffled, gpus, p);
    allocate(&c, shuffled, p);
    out->list_bytes = c.list.len;
    rails(&c);
    time_planning(&c, p, out);
    measure(&c, out);
    out->gpus = gpus;
    sim_free(&c);
}

static double ratio(size_t a, size_t b)
{
    return b == 0 ? (a == 0 ? 1.0 : 0.0) : (double)a / (double)b;
}

static void usage(void)
{
    fprintf(stderr, "usage: topo_sim [--dat FILE] [--runs N] [--leaf K] [--pod P] [--su S]\n"
                    "                [--busy X] [--max-gpus G] [--seed S]\n");
    exit(2);
}

static void parse_params(int argc, char **argv, struct params *p)
{
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            usage();
        if (strcmp(argv[i], "--dat") == 0)
            p->dat = v;
        else if (strcmp(argv[i], "--runs") == 0)
            p->runs = (unsigned)atoi(v);
        else if (strcmp(argv[i], "--leaf") == 0)
            p->leaf = (unsigned)atoi(v);
        else if (strcmp(argv[i], "--pod") == 0)
            p->pod = (unsigned)atoi(v);
        else if (strcmp(argv[i], "--su") == 0)
            p->su = (unsigned)atoi(v);
        else if (strcmp(argv[i], "--busy") == 0)
            p->busy = atof(v);
        else if (strcmp(argv[i], "--max-gpus") == 0)
            p->max_gpus = (unsigned)atoi(v);
        else if (strcmp(argv[i], "--seed") == 0)
            p->seed = strtoull(v, NULL, 10);
        else
            usage();
    }
    if (p->runs < 1 || p->leaf < 1 || p->pod < 1 || p->su < 1 || p->busy < 1.0 || p->max_gpus < 8)
        usage();
}

static void print_header(const struct params *p)
{
    printf("topo_sim: ring crossings of leaf switches (rail: of rail switches, summed over %d "
           "rails)\n",
           RAILS);
    printf("  %d GPUs/node; fat-tree leaf = %u nodes, pod = %u leaves; rail SU = %u nodes; the "
           "job is a random\n  1/%.1f of its cluster (seed %llu); median of %u runs; "
           "ratios are to the lower bound\n",
           GPUS_PER_NODE, p->leaf, p->pod, p->su, p->busy, (unsigned long long)p->seed, p->runs);
    printf("  leaves: leaf switches the job touches (rail: SUs); crossings, then spine hops, for "
           "accelrun's order,\n  Slurm's order and the lower bound; mixed (rail): accelrun's "
           "crossings if local rank r sat on\n  different rails on different nodes; plan: expand "
           "SLURM_STEP_NODELIST + accel_cluster_order;\n  conf: parse the whole cluster's "
           "topology.conf\n\n");
    printf("%-20s %7s %6s %6s | %8s %8s %8s %6s %6s | %8s %8s %8s | %8s | %7s %7s\n", "cluster",
           "GPUs", "nodes", "leaves", "accelrun", "slurm", "bound", "acc/b", "slm/b", "hops acc",
           "slurm", "bound", "mixed", "plan ms", "conf ms");
}

/* One row of the table, and of the .dat file (dat NULL: none). */
static void print_row(const char *name, enum kind k, const struct row *r, FILE *dat)
{
    printf("%-20s %7zu %6zu %6zu | %8zu %8zu %8zu %6.3f %6.3f | %8zu %8zu %8zu | ", name, r->gpus,
           r->nodes, r->leaves, r->acc.crossings, r->slurm.crossings, r->bound.crossings,
           ratio(r->acc.crossings, r->bound.crossings),
           ratio(r->slurm.crossings, r->bound.crossings), r->acc.spine_hops, r->slurm.spine_hops,
           r->bound.spine_hops);
    if (k == RAIL)
        printf("%8zu | ", r->mixed);
    else
        printf("%8s | ", "-");
    printf("%7.3f %7.3f\n", r->plan_ms, r->parse_ms);
    if (dat != NULL)
        fprintf(dat, "%zu %zu %zu %zu %zu %zu %zu %zu %zu %.4f %.4f %.4f %zu %zu\n", r->gpus,
                r->nodes, r->leaves, r->acc.crossings, r->slurm.crossings, r->bound.crossings,
                r->acc.spine_hops, r->slurm.spine_hops, r->bound.spine_hops, r->plan_ms,
                r->order_ms, r->parse_ms, r->list_bytes, r->mixed);
}

/* The summary's figures: the worst ratios over every case, the largest
 * step's planning times and node list over the scenarios. */
struct worst {
    double acc, acc_hops, slurm, plan, order;
    size_t list;
};

static void tally(struct worst *w, const struct row *r, bool largest)
{
    if (ratio(r->acc.crossings, r->bound.crossings) > w->acc)
        w->acc = ratio(r->acc.crossings, r->bound.crossings);
    if (ratio(r->acc.spine_hops, r->bound.spine_hops) > w->acc_hops)
        w->acc_hops = ratio(r->acc.spine_hops, r->bound.spine_hops);
    if (ratio(r->slurm.crossings, r->bound.crossings) > w->slurm)
        w->slurm = ratio(r->slurm.crossings, r->bound.crossings);
    if (!largest)
        return;
    if (r->plan_ms > w->plan)
        w->plan = r->plan_ms;
    if (r->order_ms > w->order)
        w->order = r->order_ms;
    if (r->list_bytes > w->list)
        w->list = r->list_bytes;
}

static void print_summary(const struct params *p, const struct worst *w)
{
    printf("\nworst ratio to the lower bound: accelrun %.3f in crossings, %.3f in spine hops "
           "(goal: within 1%%);\n  Slurm's order up to %.3f in crossings\n",
           w->acc, w->acc_hops, w->slurm);
    printf("planning the largest step (%u GPUs, %u nodes): expand SLURM_STEP_NODELIST + order "
           "%.2f ms, order alone %.2f ms,\n  worst case over the scenarios (goal: 100 ms); its "
           "node list is up to %zu bytes\n",
           p->max_gpus, p->max_gpus / GPUS_PER_NODE, w->plan, w->order, w->list);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        enum kind k;
        bool shuffled;
    } sc[] = {
        {"fat-tree-2 rack", FAT2, false}, {"fat-tree-2 shuffled", FAT2, true},
        {"fat-tree-3 rack", FAT3, false}, {"fat-tree-3 shuffled", FAT3, true},
        {"rail rack", RAIL, false},       {"rail shuffled", RAIL, true},
    };
    struct params p = {16, 16, 32, 9, 131072, 2.0, 42, NULL};
    struct worst w = {0, 0, 0, 0, 0, 0};
    FILE *dat = NULL;

    parse_params(argc, argv, &p);
    if (p.dat != NULL && (dat = fopen(p.dat, "w")) == NULL) {
        perror(p.dat);
        return 1;
    }
    print_header(&p);
    for (size_t s = 0; s < sizeof(sc) / sizeof(sc[0]); s++) {
        if (dat != NULL)
            fprintf(dat,
                    "%s# %s\n# gpus nodes leaves cross_acc cross_slurm cross_bound hops_acc "
                    "hops_slurm hops_bound plan_ms order_ms parse_ms list_bytes mixed\n",
                    s ? "\n\n" : "", sc[s].name);
        for (size_t gpus = 8; gpus <= p.max_gpus; gpus *= 4) {
            struct row r;
            run_case(sc[s].k, sc[s].shuffled, gpus, &p, &r);
            print_row(sc[s].name, sc[s].k, &r, dat);
            tally(&w, &r, r.gpus == p.max_gpus || gpus * 4 > p.max_gpus);
        }
    }
    print_summary(&p, &w);
    if (dat != NULL)
        fclose(dat);
    return w.acc > 1.01 ? 1 : 0;
}
