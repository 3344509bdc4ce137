/*
 * test_sched.c: the first host of Slurm host lists (topology/hostlist.c) and
 * the per-step port.
 */
#include "accel/cluster.h"
#include "accel/sched.h"
#include "test.h"

TEST(hostlist_first)
{
    static const struct {
        const char *list, *first;
    } ok[] = {
        {"n1", "n1"},
        {"n[1-2]", "n1"},
        {"gpu[007-010,12],login1", "gpu007"},
        {"node-a,node-b", "node-a"},
        {"rack[1-2]-n[3-4]", "rack1-n3"},
        {"a[0]", "a0"},
        {"x[10-11]y", "x10y"},
        {"host.example.org,b", "host.example.org"},
    };
    /* the whole list is checked, not only its first entry: "n1,n[" and
     * "n1,,n2" are refused as accel_hostlist_expand refuses them */
    static const char *const bad[] = {"",    ",n1",   "n[",  "n[]",    "n[a-b]", "n]1",
                                      " n1", "n1,n[", "n1,", "n1,,n2", "n1,n 2", "n[1-2"};
    char out[64];
    struct accel_error err;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ASSERT_OK(accel_hostlist_first(ok[i].list, out, sizeof(out), &err));
        ASSERT_STR_EQ(out, ok[i].first);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ASSERT_INT_EQ(accel_hostlist_first(bad[i], out, sizeof(out), &err), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_hostlist_first("averyveryverylonghostname", out, 8, &err), ACCEL_ETOOBIG);
}

TEST(step_port_in_range_and_spread)
{
    unsigned seen[1000] = {0};
    unsigned distinct = 0;

    for (uint32_t step = 0; step < 200; step++) {
        unsigned p = accel_step_port(4242, step, 29500, 1000);
        ASSERT(p >= 29500 && p < 30500);
        ASSERT_INT_EQ(p, accel_step_port(4242, step, 29500, 1000)); /* every task agrees */
        if (seen[p - 29500]++ == 0)
            distinct++;
    }
    /* 200 steps over 1000 ports: a hash that collides a lot would fail this */
    ASSERT(distinct >= 170);
    ASSERT_INT_EQ(accel_step_port(1, 2, 40000, 0), 40000);
    ASSERT_INT_EQ(accel_step_port(1, 2, 40000, 1), 40000);
}

TEST(tasks_per_node)
{
    static const struct {
        const char *spec;
        unsigned node, before, count;
    } ok[] = {
        {"4", 0, 0, 4},
        {"2(x2)", 1, 2, 2},
        {"2,1", 1, 2, 1},
        {"3(x2),1", 2, 6, 1},
        {"1,2(x3),4", 3, 5, 2},
        {"1,2(x3),4", 4, 7, 4},
        {"8(x1024)", 1023, 8184, 8},
    };
    static const char *const bad[] = {"",     "x",   "2(x)", "2(3)", "2(x2",
                                      "2,,1", "2;1", "-1",   "2(x0)"};
    unsigned before, count;
    struct accel_error err;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ASSERT_OK(accel_tasks_per_node(ok[i].spec, ok[i].node, &before, &count, &err));
        ASSERT_INT_EQ(before, ok[i].before);
        ASSERT_INT_EQ(count, ok[i].count);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ASSERT_INT_EQ(accel_tasks_per_node(bad[i], 0, &before, &count, &err), ACCEL_EINVAL);
    ASSERT_INT_EQ(accel_tasks_per_node("2(x2)", 2, &before, &count, &err), ACCEL_EINVAL);
}

TEST_LIST(T(hostlist_first), T(step_port_in_range_and_spread), T(tasks_per_node))
