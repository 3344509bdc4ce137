/*
 * test_cluster.c: the across-nodes topology (accel/cluster.h): Slurm host-list
 * expansion (padding, ranges, commas, errors, caps), topology.conf parsing
 * (the lab's two-leaf file, a 3-level tree, located syntax errors, unknown
 * keys, cycles, nodes under two leaves), SLURM_TOPOLOGY_ADDR parsing and trees
 * built from addresses, the node order (leaf-mates adjacent, rank 0's node
 * first, stable ties, nodes missing from the tree last with a warning),
 * ring metrics and bounds on hand-computed cases, a randomised check that the
 * order always meets the bound, determinism, and allocation-failure torture.
 *
 * The intra-node plan (GPU/NIC per local rank) is test_topo.c's job.
 */
#define _GNU_SOURCE /* mkstemp */
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "accel/alloc.h"
#include "accel/cluster.h"
#include "../harness/test.h"

/* ---------------------------------------------------------------- helpers */

#define NODES(...) ((const char *const[]){__VA_ARGS__})
#define COUNT(...) (sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))
#define ORDER_IS(got, ...)                                                                         \
    do {                                                                                           \
        const size_t want_[] = {__VA_ARGS__};                                                      \
        for (size_t i_ = 0; i_ < sizeof(want_) / sizeof(want_[0]); i_++)                           \
            ASSERT_INT_EQ((got)[i_], want_[i_]);                                                   \
    } while (0)

static enum accel_err parse(struct accel_switch_tree *t, const char *text, struct accel_error *e)
{
    accel_switch_tree_init(t);
    accel_error_clear(e);
    return accel_switch_tree_parse(t, "topo.conf", text, strlen(text), e);
}

static void parse_ok(struct accel_switch_tree *t, const char *text)
{
    struct accel_error e;

    if (parse(t, text, &e) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "parse failed: %s:%u:%u: %s", e.file, e.line, e.column,
                  e.msg);
}

static const char *leaf_name(const struct accel_switch_tree *t, const char *node)
{
    uint32_t l = accel_switch_tree_leaf(t, node);

    return l == ACCEL_SWITCH_NONE ? "(none)" : t->switches[l].name;
}

static uint32_t sw_index(const struct accel_switch_tree *t, const char *name)
{
    uint32_t i = accel_switch_tree_find(t, name);

    if (i == ACCEL_SWITCH_NONE)
        test_fail(__FILE__, __LINE__, "no switch %s", name);
    return i;
}

static const char *parent_name(const struct accel_switch_tree *t, const char *name)
{
    uint32_t p = t->switches[sw_index(t, name)].parent;

    return p == ACCEL_SWITCH_NONE ? "(top)" : t->switches[p].name;
}

/* The lab's file (reference/slurm.md §3.3.1) and a 3-level tree. */
static const char lab_conf[] = "SwitchName=leaf1 Nodes=n1\n"
                               "SwitchName=leaf2 Nodes=n2\n"
                               "SwitchName=spine Switches=leaf[1-2]\n";

static const char three_level_conf[] = "# core, two pods, three leaves; defined top-down\n"
                                       "SwitchName=core Switches=pod[1-2]\n"
                                       "SwitchName=pod1 Switches=leaf[1-2] LinkSpeed=400\n"
                                       "\n"
                                       "switchname=pod2 switches=leaf3   # lower-case keys\n"
                                       "SwitchName=leaf1 Nodes=a[1-2]\n"
                                       "SwitchName=leaf2 \\\n"
                                       "    Nodes=b[1-2]\n"
                                       "SwitchName=leaf3\tNodes=c1,c2\r\n";

/* splitmix64: a fixed, portable sequence for the randomised cases */
static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---------------------------------------------------------------- host lists */

TEST(hostlist_brief_example)
{
    struct accel_hostlist hl;
    struct accel_error e;
    static const char *const want[] = {"n001", "n002", "n003", "n004", "n7", "gpu-1-a", "gpu-2-a"};

    ASSERT_OK(accel_hostlist_expand("n[001-004,7],gpu-[1-2]-a", 0, &hl, &e));
    ASSERT_INT_EQ(hl.n, 7);
    for (size_t i = 0; i < 7; i++)
        ASSERT_STR_EQ(hl.names[i], want[i]);
    accel_hostlist_free(&hl);
    ASSERT(hl.names == NULL && hl.n == 0);
    accel_hostlist_free(&hl); /* twice is fine */
    accel_hostlist_free(NULL);
}

TEST(hostlist_padding_and_ranges)
{
    static const struct {
        const char *list, *want; /* names joined by spaces */
    } cases[] = {
        {"n[8-10]", "n8 n9 n10"},
        {"n[08-10]", "n08 n09 n10"},
        {"n[098-100]", "n098 n099 n100"},
        {"n[0-2]", "n0 n1 n2"},
        {"n[3,1,2]", "n3 n1 n2"}, /* written order, not sorted */
        {"n1,n1", "n1 n1"},       /* duplicates kept, as Slurm does */
        {"a,b,c", "a b c"},
        {"x[7]", "x7"},
        {"n[1-2]-ib", "n1-ib n2-ib"},
        {"r[1-2]n[1-2]", "r1n1 r1n2 r2n1 r2n2"}, /* the last group varies fastest */
        {"gpu[007-010,12],login1", "gpu007 gpu008 gpu009 gpu010 gpu12 login1"},
        {"node-a.b_c", "node-a.b_c"},
        {"[1-3]", "1 2 3"},
    };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct accel_hostlist hl;
        struct accel_error e;
        char joined[256] = "";
        size_t len = 0;
        accel_error_clear(&e);
        if (accel_hostlist_expand(cases[c].list, 0, &hl, &e) != ACCEL_OK)
            test_fail(__FILE__, __LINE__, "%s: %s", cases[c].list, e.msg);
        for (size_t i = 0; i < hl.n; i++)
            len += (size_t)snprintf(joined + len, sizeof(joined) - len, "%s%s", i ? " " : "",
                                    hl.names[i]);
        ASSERT_STR_EQ(joined, cases[c].want);
        accel_hostlist_free(&hl);
    }
}

TEST(hostlist_errors)
{
    static const struct {
        const char *list;
        enum accel_err code;
        unsigned column; /* 0: not checked */
    } cases[] = {
        {"", ACCEL_EINVAL, 0},
        {",a", ACCEL_EINVAL, 1},
        {"a,", ACCEL_EINVAL, 3},
        {"a,,b", ACCEL_EINVAL, 3},
        {"n[", ACCEL_EINVAL, 3},
        {"n[]", ACCEL_EINVAL, 3},
        {"n[1-]", ACCEL_EINVAL, 5},
        {"n[-2]", ACCEL_EINVAL, 3},
        {"n[a]", ACCEL_EINVAL, 3},
        {"n]1", ACCEL_EINVAL, 2},
        {"n[1[2]]", ACCEL_EINVAL, 4},
        {"n[3-1]", ACCEL_EINVAL, 3},
        {"n[1,]", ACCEL_EINVAL, 5},
        {"n[1-2", ACCEL_EINVAL, 6},
        {"n[1-2-3]", ACCEL_EINVAL, 6},
        {"a b", ACCEL_EINVAL, 2},
        {"a\tb", ACCEL_EINVAL, 2},
        {"r[01-02]-[a]", ACCEL_EINVAL, 11},
        {"n[1234567890123456789]", ACCEL_ETOOBIG, 0},                 /* 19 digits */
        {"n[1-2]a[1]b[1]c[1]d[1]e[1]f[1]g[1]h[1]", ACCEL_ETOOBIG, 0}, /* 9 groups */
    };

    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct accel_hostlist hl = {99, (char **)(void *)&hl};
        struct accel_error e;
        accel_error_clear(&e);
        if (accel_hostlist_expand(cases[c].list, 0, &hl, &e) != cases[c].code)
            test_fail(__FILE__, __LINE__, "'%s': expected %s, got %s (%s)", cases[c].list,
                      accel_errname(cases[c].code), accel_errname(e.code), e.msg);
        ASSERT_INT_EQ(e.code, cases[c].code);
        ASSERT(hl.n == 0 && hl.names == NULL);
        if (cases[c].column != 0 && e.column != cases[c].column)
            test_fail(__FILE__, __LINE__, "'%s': column %u, expected %u (%s)", cases[c].list,
                      e.column, cases[c].column, e.msg);
    }
    {
        struct accel_hostlist hl;
        struct accel_error e;
        ASSERT_INT_EQ(accel_hostlist_expand(NULL, 0, &hl, &e), ACCEL_EINVAL);
        ASSERT_INT_EQ(accel_hostlist_expand("n[3-1]", 0, &hl, &e), ACCEL_EINVAL);
        ASSERT_CONTAINS(e.msg, "backwards");
        ASSERT_CONTAINS(e.msg, "byte 3");
    }
}

TEST(hostlist_caps)
{
    struct accel_hostlist hl;
    struct accel_error e;
    char name[300], *big;

    ASSERT_OK(accel_hostlist_expand("n[1-4]", 4, &hl, &e));
    ASSERT_INT_EQ(hl.n, 4);
    accel_hostlist_free(&hl);
    ASSERT_INT_EQ(accel_hostlist_expand("n[1-5]", 4, &hl, &e), ACCEL_ETOOBIG);
    ASSERT_CONTAINS(e.msg, "more than 4 hosts");
    ASSERT_INT_EQ(accel_hostlist_expand("a,b,c,d,e", 4, &hl, &e), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(accel_hostlist_expand("n[1-2],m[1-3]", 4, &hl, &e), ACCEL_ETOOBIG);
    /* refused arithmetically, before anything is expanded */
    ASSERT_INT_EQ(accel_hostlist_expand("n[1-999999999999]", 0, &hl, &e), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(accel_hostlist_expand("a[1-1024]b[1-1025]", 0, &hl, &e), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(accel_hostlist_expand("n[1-1048577]", 0, &hl, &e), ACCEL_ETOOBIG);
    ASSERT_OK(accel_hostlist_expand("n[1-1048576]", 0, &hl, &e)); /* exactly the cap */
    ASSERT_INT_EQ(hl.n, ACCEL_CLUSTER_MAX_NODES);
    ASSERT_STR_EQ(hl.names[hl.n - 1], "n1048576");
    accel_hostlist_free(&hl);
    /* name length: 255 bytes pass, 256 do not, counting expanded digits */
    memset(name, 'h', 255);
    name[255] = '\0';
    ASSERT_OK(accel_hostlist_expand(name, 0, &hl, &e));
    ASSERT_INT_EQ(strlen(hl.names[0]), 255);
    accel_hostlist_free(&hl);
    strcpy(name + 252, "[9-10]"); /* 252 + "10" = 254 */
    ASSERT_OK(accel_hostlist_expand(name, 0, &hl, &e));
    accel_hostlist_free(&hl);
    strcpy(name + 252, "[9-100]"); /* 252 + "100" = 255 */
    ASSERT_OK(accel_hostlist_expand(name, 0, &hl, &e));
    accel_hostlist_free(&hl);
    strcpy(name + 252, "[9-1000]"); /* 256 for the last one */
    ASSERT_INT_EQ(accel_hostlist_expand(name, 0, &hl, &e), ACCEL_ETOOBIG);
    ASSERT_CONTAINS(e.msg, "too long");
    /* text length */
    big = malloc(ACCEL_CLUSTER_MAX_LIST + 2);
    ASSERT(big != NULL);
    memset(big, 'a', ACCEL_CLUSTER_MAX_LIST + 1);
    big[ACCEL_CLUSTER_MAX_LIST + 1] = '\0';
    ASSERT_INT_EQ(accel_hostlist_expand(big, 0, &hl, &e), ACCEL_ETOOBIG);
    free(big);
}

/* ---------------------------------------------------------------- topology.conf */

TEST(conf_lab_two_leaves)
{
    struct accel_switch_tree t;
    uint32_t spine;

    parse_ok(&t, lab_conf);
    ASSERT_INT_EQ(t.nswitches, 3);
    ASSERT_INT_EQ(t.nnodes, 2);
    ASSERT_STR_EQ(leaf_name(&t, "n1"), "leaf1");
    ASSERT_STR_EQ(leaf_name(&t, "n2"), "leaf2");
    ASSERT_STR_EQ(leaf_name(&t, "n3"), "(none)");
    ASSERT_STR_EQ(parent_name(&t, "leaf1"), "spine");
    ASSERT_STR_EQ(parent_name(&t, "leaf2"), "spine");
    ASSERT_STR_EQ(parent_name(&t, "spine"), "(top)");
    spine = sw_index(&t, "spine");
    ASSERT_INT_EQ(t.switches[spine].depth, 0);
    ASSERT_INT_EQ(t.switches[spine].children, 2);
    ASSERT_INT_EQ(t.switches[spine].nodes, 0);
    ASSERT_INT_EQ(t.switches[spine].line, 3);
    ASSERT_INT_EQ(t.switches[sw_index(&t, "leaf2")].depth, 1);
    ASSERT_INT_EQ(t.switches[sw_index(&t, "leaf2")].nodes, 1);
    ASSERT_INT_EQ(t.nodes[accel_switch_tree_node(&t, "n2")].line, 2);
    ASSERT_INT_EQ(accel_switch_tree_find(&t, "nope"), ACCEL_SWITCH_NONE);
    accel_switch_tree_free(&t);
    ASSERT_INT_EQ(t.nswitches, 0);
    accel_switch_tree_free(&t);
    accel_switch_tree_free(NULL);
}

TEST(conf_three_level)
{
    struct accel_switch_tree t;

    parse_ok(&t, three_level_conf);
    ASSERT_INT_EQ(t.nswitches, 6);
    ASSERT_INT_EQ(t.nnodes, 6);
    ASSERT_STR_EQ(parent_name(&t, "pod2"), "core");
    ASSERT_STR_EQ(parent_name(&t, "leaf3"), "pod2");
    ASSERT_STR_EQ(leaf_name(&t, "b2"), "leaf2"); /* across the continued line */
    ASSERT_STR_EQ(leaf_name(&t, "c2"), "leaf3"); /* CRLF line end */
    ASSERT_INT_EQ(t.switches[sw_index(&t, "core")].depth, 0);
    ASSERT_INT_EQ(t.switches[sw_index(&t, "pod1")].depth, 1);
    ASSERT_INT_EQ(t.switches[sw_index(&t, "leaf1")].depth, 2);
    ASSERT_INT_EQ(t.switches[sw_index(&t, "leaf3")].depth, 2);
    ASSERT_INT_EQ(t.switches[sw_index(&t, "leaf2")].line, 7);
    ASSERT_INT_EQ(t.nodes[accel_switch_tree_node(&t, "b1")].line, 8);
    ASSERT_INT_EQ(t.nodes[accel_switch_tree_node(&t, "c1")].line, 9);
    accel_switch_tree_free(&t);

    /* a forest (Slurm allows several top switches) and a switch with nothing */
    parse_ok(&t, "SwitchName=l1 Nodes=x\nSwitchName=l2 Nodes=y\nSwitchName=empty\n");
    ASSERT_INT_EQ(t.nswitches, 3);
    ASSERT_STR_EQ(parent_name(&t, "l1"), "(top)");
    ASSERT_STR_EQ(parent_name(&t, "l2"), "(top)");
    accel_switch_tree_free(&t);

    /* CRLF continuation; a lone backslash is part of a name */
    parse_ok(&t, "SwitchName=a\\\r\n  Nodes=n\\1,n2\r\n");
    ASSERT_STR_EQ(leaf_name(&t, "n\\1"), "a");
    ASSERT_STR_EQ(leaf_name(&t, "n2"), "a");
    accel_switch_tree_free(&t);

    /* empty and comment-only files give an empty tree */
    parse_ok(&t, "");
    ASSERT_INT_EQ(t.nswitches, 0);
    accel_switch_tree_free(&t);
    parse_ok(&t, "# nothing\n   \n\t# here\n");
    ASSERT_INT_EQ(t.nswitches, 0);
    accel_switch_tree_free(&t);
}

static const struct conf_case {
    const char *text;
    enum accel_err code;
    unsigned line, col;
    const char *key, *msg;
} conf_bad[] = {
    /* syntax */
    {"SwitchName=leaf1 Nodes=n1\nSwitchName=leaf2 Nodes\n", ACCEL_EPARSE, 2, 18, "",
     "expected KEY=VALUE"},
    {"SwitchName= Nodes=n1\n", ACCEL_EPARSE, 1, 1, "", "has no value"},
    {"SwitchName=a =n1\n", ACCEL_EPARSE, 1, 14, "", "expected KEY=VALUE"},
    {"\n\nNodes=n1 SwitchName=x\n", ACCEL_EPARSE, 3, 1, "", "starts with SwitchName"},
    {"NodeName=n1 Gres=gpu:4\n", ACCEL_EPARSE, 1, 1, "", "not 'NodeName='"},
    {"SwitchName=a Nodes=n[1-\n", ACCEL_EPARSE, 1, 24, "Nodes", "end of a range"},
    {"SwitchName=s\n  SwitchName=a Switches=l[1-2]x]\n", ACCEL_EPARSE, 2, 32, "Switches",
     "']' without '['"},
    {"SwitchName=a\x01 Nodes=n1\n", ACCEL_EPARSE, 1, 13, "", "control character"},
    {"SwitchName=a A=1 B=1 C=1 D=1 E=1 F=1 G=1 H=1\n", ACCEL_EPARSE, 1, 42, "", "more than 8"},
    /* keys */
    {"SwitchName=s1 Node=n1\n", ACCEL_ECONFIG, 1, 15, "Node", "unknown key 'Node'"},
    {"SwitchName=s1\nSwitchName=s2 Nodes=n1 linkspeed=10 Speed=3\n", ACCEL_ECONFIG, 2, 37, "Speed",
     "known: SwitchName, Switches, Nodes, LinkSpeed"},
    {"SwitchName=a Switches=b Switches=c\n", ACCEL_ECONFIG, 1, 25, "Switches", "given twice"},
    {"SwitchName=a SwitchName=b\n", ACCEL_ECONFIG, 1, 14, "SwitchName", "twice"},
    {"SwitchName=a LinkSpeed=fast\n", ACCEL_ECONFIG, 1, 14, "LinkSpeed", "whole number"},
    {"SwitchName=a[1-2] Nodes=n1\n", ACCEL_ECONFIG, 1, 1, "SwitchName", "not a switch name"},
    {"BlockName=b1 Nodes=n[1-4]\n", ACCEL_EUNSUPPORTED, 1, 1, "BlockName", "topology/block"},
    /* structure */
    {"SwitchName=a Nodes=n1 Switches=b\nSwitchName=b\n", ACCEL_ECONFIG, 1, 23, "Switches",
     "both Nodes and Switches"},
    {"SwitchName=a Nodes=n1\nSwitchName=a Nodes=n2\n", ACCEL_ECONFIG, 2, 1, "SwitchName",
     "defined twice (first at line 1)"},
    {"SwitchName=l1 Nodes=n[1-4]\nSwitchName=l2 Nodes=n[4-6]\n", ACCEL_ECONFIG, 2, 15, "Nodes",
     "node 'n4' is under both 'l1' (line 1) and 'l2'"},
    {"SwitchName=l1 Nodes=n1,n2,n1\n", ACCEL_ECONFIG, 1, 15, "Nodes", "listed twice"},
    {"SwitchName=s Switches=l1,l3\nSwitchName=l1 Nodes=n1\n", ACCEL_ECONFIG, 1, 14, "Switches",
     "'l3', a child of 's', is not defined"},
    {"SwitchName=s1 Switches=l1\nSwitchName=s2 Switches=l1\nSwitchName=l1 Nodes=n1\n",
     ACCEL_ECONFIG, 2, 15, "Switches", "'l1' is under both 's1' (line 1) and 's2'"},
    {"SwitchName=s Switches=l[1-2],l1\nSwitchName=l[1]\nSwitchName=l2\n", ACCEL_ECONFIG, 2, 1,
     "SwitchName", "not a switch name"},
    {"SwitchName=s Switches=l[1-2],l1\nSwitchName=l1\nSwitchName=l2\n", ACCEL_ECONFIG, 1, 14,
     "Switches", "'l1' is listed twice under 's'"},
    {"SwitchName=a Switches=a\n", ACCEL_ECONFIG, 1, 1, "Switches", "cycle"},
    {"SwitchName=a Switches=b\nSwitchName=b Switches=a\n", ACCEL_ECONFIG, 1, 1, "Switches",
     "a -> b -> a"},
    {"SwitchName=top Switches=x\nSwitchName=x Nodes=n1\n"
     "SwitchName=p Switches=q\nSwitchName=q Switches=r\nSwitchName=r Switches=p\n",
     ACCEL_ECONFIG, 3, 1, "Switches", "p -> r -> q -> p"},
};

TEST(conf_errors_located)
{
    for (size_t c = 0; c < sizeof(conf_bad) / sizeof(conf_bad[0]); c++) {
        const struct conf_case *k = &conf_bad[c];
        struct accel_switch_tree t;
        struct accel_error e;
        enum accel_err rc = parse(&t, k->text, &e);
        if (rc != k->code || e.line != k->line || e.column != k->col ||
            strcmp(e.key, k->key) != 0 || strstr(e.msg, k->msg) == NULL)
            test_fail(__FILE__, __LINE__,
                      "case %zu: got %s %s:%u:%u key '%s': %s; want %s line %u col %u key '%s' "
                      "msg '%s'",
                      c, accel_errname(rc), e.file, e.line, e.column, e.key, e.msg,
                      accel_errname(k->code), k->line, k->col, k->key, k->msg);
        ASSERT_STR_EQ(e.file, "topo.conf");
        /* a failed parse leaves the tree empty and reusable */
        ASSERT_INT_EQ(t.nswitches, 0);
        ASSERT_INT_EQ(t.nnodes, 0);
        ASSERT(t.switches == NULL && t.strings == NULL);
        accel_switch_tree_free(&t);
    }
}

TEST(conf_caps)
{
    struct accel_switch_tree t;
    struct accel_error e;
    char *text, name[300];
    size_t len = 0, cap = 64u << 20;

    text = malloc(cap);
    ASSERT(text != NULL);
    /* depth: 16 levels pass, 17 do not */
    for (int levels = 16; levels <= 17; levels++) {
        len = 0;
        for (int i = 0; i < levels - 1; i++)
            len += (size_t)sprintf(text + len, "SwitchName=s%d Switches=s%d\n", i, i + 1);
        len += (size_t)sprintf(text + len, "SwitchName=s%d Nodes=n1\n", levels - 1);
        if (levels == 16) {
            parse_ok(&t, text);
            ASSERT_INT_EQ(t.switches[accel_switch_tree_leaf(&t, "n1")].depth, 15);
            accel_switch_tree_free(&t);
        } else {
            ASSERT_INT_EQ(parse(&t, text, &e), ACCEL_ETOOBIG);
            ASSERT_CONTAINS(e.msg, "more than 15 levels");
        }
    }
    /* switch count */
    len = 0;
    for (unsigned i = 0; i <= ACCEL_CLUSTER_MAX_SWITCHES; i++)
        len += (size_t)sprintf(text + len, "SwitchName=s%u\n", i);
    ASSERT_INT_EQ(parse(&t, text, &e), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(e.line, ACCEL_CLUSTER_MAX_SWITCHES + 1);
    ASSERT_CONTAINS(e.msg, "more than 65536 switches");
    /* name length */
    memset(name, 'w', 256);
    name[256] = '\0';
    snprintf(text, cap, "SwitchName=%s\n", name);
    ASSERT_INT_EQ(parse(&t, text, &e), ACCEL_ETOOBIG);
    snprintf(text, cap, "SwitchName=s Nodes=%s\n", name);
    ASSERT_INT_EQ(parse(&t, text, &e), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(e.column, 20);
    /* a hostile range in a file costs nothing */
    ASSERT_INT_EQ(parse(&t, "SwitchName=s Nodes=n[1-99999999999]\n", &e), ACCEL_ETOOBIG);
    ASSERT_INT_EQ(parse(&t, "SwitchName=s Switches=l[1-70000]\n", &e), ACCEL_ETOOBIG);
    /* file size */
    memset(text, ' ', ACCEL_CLUSTER_MAX_FILE + 1);
    accel_switch_tree_init(&t);
    ASSERT_INT_EQ(accel_switch_tree_parse(&t, "big.conf", text, ACCEL_CLUSTER_MAX_FILE + 1, &e),
                  ACCEL_ETOOBIG);
    ASSERT_STR_EQ(e.file, "big.conf");
    ASSERT_OK(accel_switch_tree_parse(&t, "big.conf", text, ACCEL_CLUSTER_MAX_FILE, &e));
    accel_switch_tree_free(&t);
    free(text);
}

TEST(conf_load_file)
{
    char path[] = "/tmp/accel-topo-XXXXXX";
    struct accel_switch_tree t;
    struct accel_error e;
    int fd = mkstemp(path);

    ASSERT(fd >= 0);
    ASSERT_INT_EQ(write(fd, lab_conf, strlen(lab_conf)), (long long)strlen(lab_conf));
    close(fd);
    accel_switch_tree_init(&t);
    ASSERT_OK(accel_switch_tree_load(&t, path, &e));
    ASSERT_STR_EQ(leaf_name(&t, "n2"), "leaf2");
    /* only into an empty tree */
    ASSERT_INT_EQ(accel_switch_tree_load(&t, path, &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_switch_tree_parse(&t, "x", "", 0, &e), ACCEL_EINVAL);
    accel_switch_tree_free(&t);
    unlink(path);
    ASSERT_INT_EQ(accel_switch_tree_load(&t, path, &e), ACCEL_ENOTFOUND);
    ASSERT_STR_EQ(e.file, path);
    /* errors name the file */
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT(fd >= 0);
    ASSERT_INT_EQ(write(fd, "SwitchName=a Nodes=n1\nSwitchName=b Nodes=n1\n", 44), 44);
    close(fd);
    ASSERT_INT_EQ(accel_switch_tree_load(&t, path, &e), ACCEL_ECONFIG);
    ASSERT_STR_EQ(e.file, path);
    ASSERT_INT_EQ(e.line, 2);
    unlink(path);
}

/* ---------------------------------------------------------------- addresses */

TEST(addr_parse)
{
    struct accel_switch_addr a;
    struct accel_error e;

    /* the lab's measured pair (reference/slurm.md §2.5) */
    ASSERT_OK(accel_switch_addr_parse("spine.leaf2.n2", "switch.switch.node", &a, &e));
    ASSERT_INT_EQ(a.nswitches, 2);
    ASSERT_STR_EQ(a.switches[0], "spine");
    ASSERT_STR_EQ(a.switches[1], "leaf2");
    ASSERT_STR_EQ(a.node, "n2");
    /* topology/none */
    ASSERT_OK(accel_switch_addr_parse("n1", "node", &a, &e));
    ASSERT_INT_EQ(a.nswitches, 0);
    ASSERT_STR_EQ(a.node, "n1");
    /* topology/block */
    ASSERT_OK(accel_switch_addr_parse("b3.gpu017", "block.node", &a, &e));
    ASSERT_INT_EQ(a.nswitches, 1);
    ASSERT_STR_EQ(a.switches[0], "b3");
    ASSERT_STR_EQ(a.node, "gpu017");
    /* a node name with dots keeps them */
    ASSERT_OK(accel_switch_addr_parse("s.l.n2.ib.example", "switch.switch.node", &a, &e));
    ASSERT_STR_EQ(a.switches[1], "l");
    ASSERT_STR_EQ(a.node, "n2.ib.example");
    {
        static const struct {
            const char *addr, *pattern;
            enum accel_err code;
            unsigned col;
        } bad[] = {
            {"spine.n2", "switch.switch.node", ACCEL_EINVAL, 9},
            {"spine..n2", "switch.switch.node", ACCEL_EINVAL, 7},
            {"spine.leaf.", "switch.switch.node", ACCEL_EINVAL, 12},
            {"a.b.c", "switch.rack.node", ACCEL_EINVAL, 8},
            {"a.b.c", "switch.node.switch", ACCEL_EINVAL, 12},
            {"a.b.c", "switch.switch", ACCEL_EINVAL, 8},
            {"a.b", "switch..node", ACCEL_EINVAL, 8},
            {"", "node", ACCEL_EINVAL, 0},
            {"n1", "", ACCEL_EINVAL, 0},
            {"s[1].n1", "switch.node", ACCEL_EINVAL, 1},
            {"s.n 1", "switch.node", ACCEL_EINVAL, 3},
        };
        for (size_t c = 0; c < sizeof(bad) / sizeof(bad[0]); c++) {
            accel_error_clear(&e);
            if (accel_switch_addr_parse(bad[c].addr, bad[c].pattern, &a, &e) != bad[c].code ||
                (bad[c].col && e.column != bad[c].col))
                test_fail(__FILE__, __LINE__, "'%s' / '%s': got %s col %u (%s)", bad[c].addr,
                          bad[c].pattern, accel_errname(e.code), e.column, e.msg);
        }
    }
    ASSERT_INT_EQ(accel_switch_addr_parse(NULL, "node", &a, &e), ACCEL_EINVAL);
}

TEST(addr_caps)
{
    struct accel_switch_addr a;
    struct accel_error e;
    char pat[256] = "", addr[8192] = "";

    for (int i = 0; i < 16; i++) {
        strcat(pat, "switch.");
        sprintf(addr + strlen(addr), "s%d.", i);
    }
    strcat(pat, "node");
    strcat(addr, "n");
    ASSERT_OK(accel_switch_addr_parse(addr, pat, &a, &e));
    ASSERT_INT_EQ(a.nswitches, 16);
    ASSERT_STR_EQ(a.switches[15], "s15");
    memmove(pat + 7, pat, strlen(pat) + 1); /* 17 levels */
    memcpy(pat, "switch.", 7);
    ASSERT_INT_EQ(accel_switch_addr_parse(addr, pat, &a, &e), ACCEL_ETOOBIG);
    memset(addr, 'x', 256);
    strcpy(addr + 256, ".n1");
    ASSERT_INT_EQ(accel_switch_addr_parse(addr, "switch.node", &a, &e), ACCEL_ETOOBIG);
    strcpy(addr, "s.");
    memset(addr + 2, 'x', 256);
    addr[258] = '\0';
    ASSERT_INT_EQ(accel_switch_addr_parse(addr, "switch.node", &a, &e), ACCEL_ETOOBIG);
    memset(addr, 'x', ACCEL_CLUSTER_MAX_ADDR + 1);
    addr[ACCEL_CLUSTER_MAX_ADDR + 1] = '\0';
    ASSERT_INT_EQ(accel_switch_addr_parse(addr, "node", &a, &e), ACCEL_ETOOBIG);
}

static enum accel_err add(struct accel_switch_tree *t, const char *addr, const char *pattern,
                          struct accel_error *e)
{
    struct accel_switch_addr a;
    enum accel_err rc;

    accel_error_clear(e);
    if ((rc = accel_switch_addr_parse(addr, pattern, &a, e)) != ACCEL_OK)
        return rc;
    return accel_switch_tree_add(t, &a, e);
}

TEST(addr_tree)
{
    static const char pat[] = "switch.switch.node";
    struct accel_switch_tree t;
    struct accel_error e;
    size_t order[4];

    accel_switch_tree_init(&t);
    ASSERT_OK(add(&t, "spine.leaf2.n2", pat, &e));
    ASSERT_OK(add(&t, "spine.leaf1.n1", pat, &e));
    ASSERT_OK(add(&t, "spine.leaf2.n4", pat, &e));
    ASSERT_OK(add(&t, "spine.leaf1.n3", pat, &e));
    ASSERT_OK(add(&t, "spine.leaf1.n3", pat, &e)); /* again: no change */
    ASSERT_OK(add(&t, "n9", "node", &e));          /* no switches: nothing to add */
    ASSERT_INT_EQ(t.nswitches, 3);
    ASSERT_INT_EQ(t.nnodes, 4);
    ASSERT_STR_EQ(leaf_name(&t, "n3"), "leaf1");
    ASSERT_STR_EQ(parent_name(&t, "leaf1"), "spine");
    ASSERT_INT_EQ(t.switches[sw_index(&t, "leaf1")].depth, 1);
    ASSERT_INT_EQ(t.switches[sw_index(&t, "spine")].children, 2);
    ASSERT_INT_EQ(t.switches[sw_index(&t, "leaf1")].line, 0);
    /* contradictions change nothing */
    ASSERT_INT_EQ(add(&t, "spine2.leaf1.n5", pat, &e), ACCEL_ECONFIG);
    ASSERT_CONTAINS(e.msg, "'leaf1' is under 'spine2' in its address but under 'spine'");
    ASSERT_INT_EQ(add(&t, "leaf1.n5", "switch.node", &e), ACCEL_ECONFIG); /* top vs not */
    ASSERT_INT_EQ(add(&t, "spine.n5", "switch.node", &e), ACCEL_ECONFIG); /* spine as a leaf */
    ASSERT_CONTAINS(e.msg, "has switches under it");
    ASSERT_INT_EQ(add(&t, "spine.leaf1.x.n5", "switch.switch.switch.node", &e), ACCEL_ECONFIG);
    ASSERT_CONTAINS(e.msg, "is a leaf");
    ASSERT_INT_EQ(add(&t, "spine.leaf2.n1", pat, &e), ACCEL_ECONFIG);
    ASSERT_CONTAINS(e.msg, "node 'n1': under 'leaf1' in the tree but under 'leaf2'");
    ASSERT_INT_EQ(add(&t, "a.a.n7", pat, &e), ACCEL_ECONFIG);
    ASSERT_INT_EQ(add(&t, "new.leaf1.n5", pat, &e), ACCEL_ECONFIG); /* new parent, old child */
    ASSERT_INT_EQ(t.nswitches, 3);
    ASSERT_INT_EQ(t.nnodes, 4);
    /* the order from addresses */
    ASSERT_OK(accel_cluster_order(&t, NODES("n1", "n2", "n3", "n4"), 4, order, &e));
    ORDER_IS(order, 0, 2, 1, 3);
    accel_switch_tree_free(&t);

    /* addresses agree with a parsed file and extend it */
    parse_ok(&t, lab_conf);
    ASSERT_OK(add(&t, "spine.leaf2.n2", pat, &e));
    ASSERT_OK(add(&t, "spine.leaf3.n3", pat, &e));
    ASSERT_INT_EQ(t.nswitches, 4);
    ASSERT_INT_EQ(add(&t, "spine.leaf1.n2", pat, &e), ACCEL_ECONFIG);
    accel_switch_tree_free(&t);
}

/* ---------------------------------------------------------------- order */

TEST(order_leaf_mates_adjacent)
{
    struct accel_switch_tree t;
    struct accel_error e;
    size_t order[8], ranks[8];

    /* names interleave the leaves, so Slurm's sorted list alternates them */
    parse_ok(&t, "SwitchName=leaf1 Nodes=n[1,3,5,7]\nSwitchName=leaf2 Nodes=n[2,4,6,8]\n"
                 "SwitchName=spine Switches=leaf[1-2]\n");
    ASSERT_OK(accel_cluster_order(&t, NODES("n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"), 8,
                                  order, &e));
    ASSERT_INT_EQ(e.code, ACCEL_OK);
    ORDER_IS(order, 0, 2, 4, 6, 1, 3, 5, 7);
    accel_cluster_node_ranks(order, 8, ranks);
    ORDER_IS(ranks, 0, 4, 1, 5, 2, 6, 3, 7); /* GROUP_RANK of n1..n8 */
    accel_switch_tree_free(&t);
}

TEST(order_rank0_node_first)
{
    struct accel_switch_tree t;
    struct accel_error e;
    size_t order[5];

    parse_ok(&t, "SwitchName=leaf1 Nodes=n[1-3]\nSwitchName=leaf2 Nodes=n[5-6]\n"
                 "SwitchName=spine Switches=leaf[1-2]\n");
    /* rank 0 on n6 (leaf2): leaf2 goes first, n6 first inside it */
    ASSERT_OK(accel_cluster_order(&t, NODES("n6", "n1", "n2", "n5"), 4, order, &e));
    ORDER_IS(order, 0, 3, 1, 2);
    /* rank 0 in the middle of its leaf's names: still first */
    ASSERT_OK(accel_cluster_order(&t, NODES("n2", "n5", "n1", "n3", "n6"), 5, order, &e));
    ORDER_IS(order, 0, 2, 3, 1, 4);
    /* one node */
    ASSERT_OK(accel_cluster_order(&t, NODES("n5"), 1, order, &e));
    ORDER_IS(order, 0);
    accel_switch_tree_free(&t);
}

TEST(order_three_level_and_ties)
{
    struct accel_switch_tree t;
    struct accel_error e;
    size_t order[6], again[6];
    const char *const *nodes = NODES("a1", "c1", "b1", "a2", "c2", "b2");

    parse_ok(&t, three_level_conf);
    /* pod1 first (it holds a1), its leaves by first appearance: leaf1 (a1)
     * then leaf2 (b1, index 2); pod2 last; inside a leaf, Slurm order */
    ASSERT_OK(accel_cluster_order(&t, nodes, 6, order, &e));
    ORDER_IS(order, 0, 3, 2, 5, 1, 4);
    /* deterministic */
    ASSERT_OK(accel_cluster_order(&t, nodes, 6, again, &e));
    ASSERT(memcmp(order, again, sizeof(order)) == 0);
    accel_switch_tree_free(&t);
    /* the same tree written in another order gives the same node order:
     * nothing depends on where a switch sits in the file */
    parse_ok(&t, "SwitchName=leaf3 Nodes=c[1-2]\nSwitchName=leaf2 Nodes=b[1-2]\n"
                 "SwitchName=pod2 Switches=leaf3\nSwitchName=leaf1 Nodes=a[1-2]\n"
                 "SwitchName=core Switches=pod[2,1]\nSwitchName=pod1 Switches=leaf[2,1]\n");
    ASSERT_OK(accel_cluster_order(&t, nodes, 6, again, &e));
    ASSERT(memcmp(order, again, sizeof(order)) == 0);
    /* ties inside a leaf keep Slurm order, whatever it is */
    ASSERT_OK(accel_cluster_order(&t, NODES("a2", "a1", "b2", "c2", "b1", "c1"), 6, order, &e));
    ORDER_IS(order, 0, 1, 2, 4, 3, 5);
    accel_switch_tree_free(&t);
}

TEST(order_unplaced_last_with_warning)
{
    struct accel_switch_tree t;
    struct accel_error e;
    size_t order[7];

    parse_ok(&t, lab_conf);
    /* x9 and x3 are not in the tree: x9 is rank 0's node, so it stays first */
    ASSERT_OK(accel_cluster_order(&t, NODES("x9", "n2", "x3", "n1"), 4, order, &e));
    ORDER_IS(order, 0, 1, 3, 2);
    ASSERT_INT_EQ(e.code, ACCEL_ENOTFOUND);
    ASSERT_CONTAINS(e.msg, "2 of 4 nodes are not in the switch tree (x9, x3)");
    ASSERT_OK(accel_cluster_order(&t, NODES("n1", "x3", "n2", "x1", "x2", "x5"), 6, order, &e));
    ORDER_IS(order, 0, 2, 1, 3, 4, 5);
    ASSERT_CONTAINS(e.msg, "4 of 6 nodes are not in the switch tree (x3, x1, x2, x5)");
    ASSERT_OK(accel_cluster_order(&t, NODES("n1", "x3", "n2", "x1", "x2", "x5", "x0"), 7, order,
                                  &e)); /* only the first four are named */
    ASSERT_CONTAINS(e.msg, "5 of 7 nodes are not in the switch tree (x3, x1, x2, x5, ...)");
    /* a clean run clears the warning */
    ASSERT_OK(accel_cluster_order(&t, NODES("n2", "n1"), 2, order, &e));
    ASSERT_INT_EQ(e.code, ACCEL_OK);
    ORDER_IS(order, 0, 1);
    accel_switch_tree_free(&t);
    /* an empty tree (topology/none): Slurm order, with the warning */
    accel_switch_tree_init(&t);
    ASSERT_OK(accel_cluster_order(&t, NODES("b", "a", "c"), 3, order, &e));
    ORDER_IS(order, 0, 1, 2);
    ASSERT_INT_EQ(e.code, ACCEL_ENOTFOUND);
    accel_switch_tree_free(&t);
}

TEST(order_errors)
{
    struct accel_switch_tree t;
    struct accel_error e;
    size_t order[4];
    struct accel_ring_metrics m;

    parse_ok(&t, lab_conf);
    ASSERT_INT_EQ(accel_cluster_order(&t, NODES("n1"), 0, order, &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_cluster_order(&t, NODES("n1", NULL), 2, order, &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_cluster_order(&t, NODES("n1", ""), 2, order, &e), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_cluster_order(&t, NODES("n1", "n2", "n1"), 3, order, &e), ACCEL_EINVAL);
    ASSERT_CONTAINS(e.msg, "'n1' appears twice");
    ASSERT_INT_EQ(accel_cluster_order(&t, NODES("x", "n2", "x"), 3, order, &e), ACCEL_EINVAL);
    ASSERT_CONTAINS(e.msg, "'x' appears twice");
    ASSERT_INT_EQ(
        accel_cluster_order(&t, NODES("n1"), (size_t)ACCEL_CLUSTER_MAX_NODES + 1, order, &e),
        ACCEL_ETOOBIG);
    ASSERT_INT_EQ(accel_cluster_metrics(&t, NODES("n1", "n2"), 2, (const size_t[]){0, 0}, &m, &e),
                  ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_cluster_metrics(&t, NODES("n1", "n2"), 2, (const size_t[]){0, 2}, &m, &e),
                  ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_cluster_bound(&t, NODES("n1", "n1"), 2, &m, &e), ACCEL_EINVAL);
    accel_switch_tree_free(&t);
}

/* ---------------------------------------------------------------- metrics */

#define ASSERT_METRICS(m, edges_, leaves_, crossings_, hops_)                                      \
    do {                                                                                           \
        ASSERT_INT_EQ((m).edges, edges_);                                                          \
        ASSERT_INT_EQ((m).leaves, leaves_);                                                        \
        ASSERT_INT_EQ((m).crossings, crossings_);                                                  \
        ASSERT_INT_EQ((m).spine_hops, hops_);                                                      \
    } while (0)

TEST(metrics_two_level_by_hand)
{
    struct accel_switch_tree t;
    struct accel_error e;
    struct accel_ring_metrics m;
    size_t order[4];
    const char *const *nodes = NODES("a1", "b1", "a2", "b2");

    parse_ok(&t, "SwitchName=leaf1 Nodes=a[1-2]\nSwitchName=leaf2 Nodes=b[1-2]\n"
                 "SwitchName=spine Switches=leaf[1-2]\n");
    /* Slurm order a1 b1 a2 b2 (a1): every edge goes leaf-spine-leaf:
     * 4 crossings x 2 hops */
    ASSERT_OK(accel_cluster_metrics(&t, nodes, 4, NULL, &m, &e));
    ASSERT_METRICS(m, 4, 2, 4, 8);
    ASSERT_INT_EQ(m.nodes, 4);
    ASSERT_INT_EQ(m.unplaced, 0);
    /* accelrun: a1 a2 b1 b2 (a1): a2-b1 and b2-a1 cross: 2 x 2 hops */
    ASSERT_OK(accel_cluster_order(&t, nodes, 4, order, &e));
    ORDER_IS(order, 0, 2, 1, 3);
    ASSERT_OK(accel_cluster_metrics(&t, nodes, 4, order, &m, &e));
    ASSERT_METRICS(m, 4, 2, 2, 4);
    /* the bound: 2 leaves; 2 uplinks (leaf1, leaf2) cut, twice each */
    ASSERT_OK(accel_cluster_bound(&t, nodes, 4, &m, &e));
    ASSERT_METRICS(m, 4, 2, 2, 4);
    /* one node: no ring edges; two nodes on two leaves: 2 edges, both cross */
    ASSERT_OK(accel_cluster_metrics(&t, NODES("b2"), 1, NULL, &m, &e));
    ASSERT_METRICS(m, 0, 1, 0, 0);
    ASSERT_OK(accel_cluster_bound(&t, NODES("b2"), 1, &m, &e));
    ASSERT_METRICS(m, 0, 1, 0, 0);
    ASSERT_OK(accel_cluster_metrics(&t, NODES("a1", "b1"), 2, NULL, &m, &e));
    ASSERT_METRICS(m, 2, 2, 2, 4);
    ASSERT_OK(accel_cluster_metrics(&t, NODES("a1", "a2"), 2, NULL, &m, &e));
    ASSERT_METRICS(m, 2, 1, 0, 0);
    ASSERT_OK(accel_cluster_bound(&t, NODES("a1", "a2"), 2, &m, &e));
    ASSERT_METRICS(m, 2, 1, 0, 0);
    accel_switch_tree_free(&t);
}

TEST(metrics_three_level_by_hand)
{
    struct accel_switch_tree t;
    struct accel_error e;
    struct accel_ring_metrics m;
    size_t order[6];
    const char *const *nodes = NODES("a1", "c1", "b1", "a2", "c2", "b2");

    parse_ok(&t, three_level_conf);
    /* Slurm order a1 c1 b1 a2 c2 b2 (a1).  Edges: a1-c1 leaf1-pod1-core-pod2-leaf3
     * = 4 hops; c1-b1 4; b1-a2 leaf2-pod1-leaf1 = 2; a2-c2 4; c2-b2 4; b2-a1 2.
     * 6 crossings, 20 hops. */
    ASSERT_OK(accel_cluster_metrics(&t, nodes, 6, NULL, &m, &e));
    ASSERT_METRICS(m, 6, 3, 6, 20);
    /* accelrun a1 a2 b1 b2 c1 c2: a2-b1 2, b2-c1 4, c2-a1 4: 3 crossings, 10 hops */
    ASSERT_OK(accel_cluster_order(&t, nodes, 6, order, &e));
    ASSERT_OK(accel_cluster_metrics(&t, nodes, 6, order, &m, &e));
    ASSERT_METRICS(m, 6, 3, 3, 10);
    /* bound: 3 leaves; cut uplinks leaf1 (2 of 6), leaf2, leaf3, pod1 (4 of
     * 6), pod2 (2 of 6), not core (6 of 6): 5 x 2 = 10 */
    ASSERT_OK(accel_cluster_bound(&t, nodes, 6, &m, &e));
    ASSERT_METRICS(m, 6, 3, 3, 10);
    /* inside one pod only: the pod's uplink is not cut */
    ASSERT_OK(accel_cluster_bound(&t, NODES("a1", "b1"), 2, &m, &e));
    ASSERT_METRICS(m, 2, 2, 2, 4);
    ASSERT_OK(accel_cluster_metrics(&t, NODES("a1", "c1"), 2, NULL, &m, &e));
    ASSERT_METRICS(m, 2, 2, 2, 8);
    accel_switch_tree_free(&t);
}

TEST(metrics_forest_and_unplaced_by_hand)
{
    struct accel_switch_tree t;
    struct accel_error e;
    struct accel_ring_metrics m;
    size_t order[3];

    /* two top switches: l1-sa-(virtual)-sb-l2 = 4 hops per edge */
    parse_ok(&t, "SwitchName=sa Switches=l1\nSwitchName=sb Switches=l2\n"
                 "SwitchName=l1 Nodes=a\nSwitchName=l2 Nodes=b\n");
    ASSERT_OK(accel_cluster_metrics(&t, NODES("a", "b"), 2, NULL, &m, &e));
    ASSERT_METRICS(m, 2, 2, 2, 8);
    ASSERT_OK(accel_cluster_bound(&t, NODES("a", "b"), 2, &m, &e));
    ASSERT_METRICS(m, 2, 2, 2, 8);
    accel_switch_tree_free(&t);

    /* a node not in the tree hangs off the virtual top: a1-x = leaf1-spine-
     * (virtual)-x = 3 hops, x-b1 3, b1-a1 2: 3 crossings, 8 hops, 3 "leaves" */
    parse_ok(&t, "SwitchName=leaf1 Nodes=a1\nSwitchName=leaf2 Nodes=b1\n"
                 "SwitchName=spine Switches=leaf[1-2]\n");
    ASSERT_OK(accel_cluster_metrics(&t, NODES("a1", "x", "b1"), 3, NULL, &m, &e));
    ASSERT_METRICS(m, 3, 3, 3, 8);
    ASSERT_INT_EQ(m.unplaced, 1);
    /* bound: cuts leaf1, leaf2, spine (2 of 3), x's own link: 8 */
    ASSERT_OK(accel_cluster_bound(&t, NODES("a1", "x", "b1"), 3, &m, &e));
    ASSERT_METRICS(m, 3, 3, 3, 8);
    ASSERT_OK(accel_cluster_order(&t, NODES("a1", "x", "b1"), 3, order, &e));
    ORDER_IS(order, 0, 2, 1);
    ASSERT_OK(accel_cluster_metrics(&t, NODES("a1", "x", "b1"), 3, order, &m, &e));
    ASSERT_METRICS(m, 3, 3, 3, 8);
    /* two unplaced nodes: 2 hops each way */
    ASSERT_OK(accel_cluster_metrics(&t, NODES("x", "y"), 2, NULL, &m, &e));
    ASSERT_METRICS(m, 2, 2, 2, 4);
    accel_switch_tree_free(&t);
}

/* Random trees of 1-4 levels (some leaves at other depths, some top switches
 * side by side), random fragmented allocations in random Slurm orders, some
 * nodes outside the tree: accelrun's order always meets both bounds, keeps
 * node 0 first and is a permutation; Slurm's order never beats the bound. */
TEST(order_meets_bound_randomised)
{
    uint64_t seed = 20240611;

    for (int round = 0; round < 300; round++) {
        struct accel_switch_tree t;
        struct accel_error e;
        struct accel_ring_metrics got, slurm, bound;
        char text[65536], names[400][24];
        const char *step[400];
        size_t len = 0, n = 0, order[400], nsw = 0, nleaf = 0, total;
        int levels = 1 + (int)(rnd(&seed) % 4), fan = 1 + (int)(rnd(&seed) % 4);
        int per = 1 + (int)(rnd(&seed) % 6), tops = 1 + (int)(rnd(&seed) % 2);
        /* switches named s<level>_<k>; level 0 are leaves */
        size_t at_level = (size_t)tops;
        for (int l = levels - 1; l > 0; l--)
            at_level *= (size_t)fan;
        nleaf = at_level;
        for (size_t k = 0; k < nleaf; k++) {
            len += (size_t)snprintf(text + len, sizeof(text) - len,
                                    "SwitchName=s0_%zu Nodes=h[%zu-%zu]\n", k, k * (size_t)per,
                                    k * (size_t)per + (size_t)per - 1);
            nsw++;
        }
        for (int l = 1; l < levels; l++) {
            size_t below = at_level;
            at_level /= (size_t)fan;
            for (size_t k = 0; k < at_level; k++) {
                len += (size_t)snprintf(text + len, sizeof(text) - len,
                                        "SwitchName=s%d_%zu Switches=s%d_[%zu-%zu]\n", l, k, l - 1,
                                        k * (size_t)fan, k * (size_t)fan + (size_t)fan - 1);
                nsw++;
            }
            (void)below;
        }
        parse_ok(&t, text);
        ASSERT_INT_EQ(t.nswitches, nsw);
        total = nleaf * (size_t)per;
        /* a random subset in random order, plus up to 2 strangers */
        for (size_t h = 0; h < total && n < 380; h++)
            if (rnd(&seed) % 3 == 0) {
                snprintf(names[n], sizeof(names[n]), "h%zu", h);
                n++;
            }
        for (int x = (int)(rnd(&seed) % 3); x > 0; x--) {
            snprintf(names[n], sizeof(names[n]), "zz%d", x);
            n++;
        }
        if (n == 0)
            snprintf(names[n++], sizeof(names[0]), "h0");
        for (size_t i = 0; i < n; i++)
            step[i] = names[i];
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = (size_t)(rnd(&seed) % (i + 1));
            const char *tmp = step[i];
            step[i] = step[j];
            step[j] = tmp;
        }
        ASSERT_OK(accel_cluster_order(&t, step, n, order, &e));
        ASSERT_INT_EQ(order[0], 0);
        ASSERT_OK(accel_cluster_metrics(&t, step, n, order, &got, &e)); /* checks permutation */
        ASSERT_OK(accel_cluster_metrics(&t, step, n, NULL, &slurm, &e));
        ASSERT_OK(accel_cluster_bound(&t, step, n, &bound, &e));
        if (got.crossings != bound.crossings || got.spine_hops != bound.spine_hops)
            test_fail(__FILE__, __LINE__,
                      "round %d (%d levels, fan %d, %d per leaf, %d tops, %zu nodes): "
                      "crossings %zu/%zu hops %zu/%zu",
                      round, levels, fan, per, tops, n, got.crossings, bound.crossings,
                      got.spine_hops, bound.spine_hops);
        ASSERT(slurm.crossings >= bound.crossings);
        ASSERT(slurm.spine_hops >= bound.spine_hops);
        accel_switch_tree_free(&t);
    }
}

/* ---------------------------------------------------------------- allocation failures */

/* Runs op() failing the 1st, 2nd, ... allocation until it succeeds; each
 * failure must be ACCEL_ENOMEM and leak nothing. */
static void torture(const char *what, enum accel_err (*op)(void), void (*cleanup)(void))
{
    long live;
    unsigned long k;

    test_alloc_install();
    live = test_alloc_live();
    for (k = 1; k < 100000; k++) {
        enum accel_err rc;
        test_alloc_fail_at(k);
        rc = op();
        test_alloc_fail_at(0);
        cleanup();
        if (rc == ACCEL_OK)
            break;
        if (rc != ACCEL_ENOMEM)
            test_fail(__FILE__, __LINE__, "%s: allocation %lu failed: got %s", what, k,
                      accel_errname(rc));
        if (test_alloc_live() != live)
            test_fail(__FILE__, __LINE__, "%s: allocation %lu failed: %ld blocks leaked", what, k,
                      test_alloc_live() - live);
    }
    ASSERT(k > 1);
    ASSERT_INT_EQ(test_alloc_live(), live);
    test_note("%s: %lu allocations, each failed in turn: ENOMEM, no leak", what, k - 1);
}

static struct accel_switch_tree tt;
static struct accel_hostlist thl;

static void cleanup_all(void)
{
    accel_switch_tree_free(&tt);
    accel_hostlist_free(&thl);
}

static enum accel_err op_expand(void)
{
    return accel_hostlist_expand("n[001-004,7],gpu-[1-2]-a", 0, &thl, NULL);
}

static enum accel_err op_parse(void)
{
    static char text[8192];
    size_t len = 0;

    /* enough switches and nodes to grow every array and hash table */
    for (int i = 0; i < 40; i++)
        len += (size_t)snprintf(text + len, sizeof(text) - len, "SwitchName=l%d Nodes=n[%d-%d]\n",
                                i, i * 4, i * 4 + 3);
    snprintf(text + len, sizeof(text) - len, "SwitchName=top Switches=l[0-39]\n");
    accel_switch_tree_init(&tt);
    return accel_switch_tree_parse(&tt, "t.conf", text, strlen(text), NULL);
}

static enum accel_err op_addr(void)
{
    struct accel_switch_addr a;
    enum accel_err rc;

    accel_switch_tree_init(&tt);
    for (int i = 0; i < 80; i++) {
        char addr[64];
        snprintf(addr, sizeof(addr), "core.pod%d.leaf%d.n%d", i / 16, i / 4, i);
        if ((rc = accel_switch_addr_parse(addr, "switch.switch.switch.node", &a, NULL)) != ACCEL_OK)
            return rc;
        if ((rc = accel_switch_tree_add(&tt, &a, NULL)) != ACCEL_OK)
            return rc;
    }
    return ACCEL_OK;
}

static enum accel_err op_order_metrics(void)
{
    static const char *const nodes[] = {"c2", "a1", "x", "b1", "a2", "c1"};
    struct accel_ring_metrics m;
    size_t order[6];
    enum accel_err rc;

    if ((rc = accel_cluster_order(&tt, nodes, 6, order, NULL)) != ACCEL_OK)
        return rc;
    if ((rc = accel_cluster_metrics(&tt, nodes, 6, order, &m, NULL)) != ACCEL_OK)
        return rc;
    return accel_cluster_bound(&tt, nodes, 6, &m, NULL);
}

static void keep_tree(void)
{
    accel_hostlist_free(&thl);
}

TEST(alloc_failure_torture)
{
    struct accel_error e;

    torture("hostlist", op_expand, cleanup_all);
    torture("topology.conf", op_parse, cleanup_all);
    torture("addresses", op_addr, cleanup_all);
    /* the order and metrics on a tree built without failures */
    accel_switch_tree_init(&tt);
    test_alloc_install();
    ASSERT_OK(accel_switch_tree_parse(&tt, "t", three_level_conf, strlen(three_level_conf), &e));
    torture("order+metrics+bound", op_order_metrics, keep_tree);
    accel_switch_tree_free(&tt);
}

TEST_LIST(T(hostlist_brief_example), T(hostlist_padding_and_ranges), T(hostlist_errors),
          T(hostlist_caps), T(conf_lab_two_leaves), T(conf_three_level), T(conf_errors_located),
          T(conf_caps), T(conf_load_file), T(addr_parse), T(addr_caps), T(addr_tree),
          T(order_leaf_mates_adjacent), T(order_rank0_node_first), T(order_three_level_and_ties),
          T(order_unplaced_last_with_warning), T(order_errors), T(metrics_two_level_by_hand),
          T(metrics_three_level_by_hand), T(metrics_forest_and_unplaced_by_hand),
          T(order_meets_bound_randomised), T(alloc_failure_torture))
