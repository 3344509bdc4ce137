/*
 * test_preflight.c: core/preflight's parts that need no Python with
 * accelerate: the child runner (fd 3, the output's tail, the deadline that
 * kills a process group), version numbers, the NCCL name lists, the record
 * and its drift rows, a node's JSON both ways.  tests/preflight/run.sh and
 * tests/slurm/preflight.sh run the whole thing against real Pythons.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../core/preflight/pf_int.h"
#include "accel/clock.h"
#include "test.h"

static const char *sh_argv[] = {"/bin/sh", "-c", NULL, NULL};

static void run_sh(struct pf__proc *p, const char *script, double seconds)
{
    sh_argv[2] = script;
    pf__start(p, sh_argv);
    pf__wait_all(p, 1, accel_now() + seconds);
}

TEST(runner_reads_fd3_apart_from_the_output)
{
    struct pf__proc p;
    char why[400];

    run_sh(&p, "echo noise; echo '{\"a\": 1}' >&3; echo 'Traceback: last line' >&2; exit 3", 10);
    ASSERT(p.done && !p.timed_out);
    ASSERT_STR_EQ(p.rep, "{\"a\": 1}\n");
    ASSERT_CONTAINS(p.tail, "noise");
    pf__proc_why(&p, 10000, why, sizeof(why));
    ASSERT_STR_EQ(why, "exited with status 3: Traceback: last line");
    pf__proc_free(&p);
}

TEST(runner_keeps_only_the_tail_and_caps_the_report)
{
    struct pf__proc p;

    /* 300 KiB on fd 3 (over PF_OUT_MAX) and 100 KiB of output */
    run_sh(&p,
           "head -c 307200 /dev/zero | tr '\\0' x >&3; head -c 102400 /dev/zero | tr '\\0' y; "
           "echo END",
           20);
    ASSERT(p.done && !p.timed_out);
    ASSERT(p.rep_over);
    ASSERT(p.tail_len <= PF_TAIL);
    ASSERT(strstr(p.tail, "yEND") != NULL);
    pf__proc_free(&p);
}

/* Running or sleeping, not a zombie. */
static bool alive(pid_t pid)
{
    char path[64], stat[256] = "";
    FILE *f;
    const char *paren;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r")))
        return false;
    if (!fgets(stat, sizeof(stat), f))
        stat[0] = '\0';
    fclose(f);
    paren = strrchr(stat, ')');
    return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

TEST(runner_kills_the_group_at_the_deadline)
{
    struct pf__proc p;
    char why[400], pidfile[64], buf[32] = "";
    double t0 = accel_now();
    FILE *f;
    pid_t grandchild;

    snprintf(pidfile, sizeof(pidfile), "/tmp/test_preflight.%d", (int)getpid());
    {
        char script[256];
        snprintf(script, sizeof(script), "sleep 30 & echo $! > %s; sleep 30", pidfile);
        run_sh(&p, script, 0.5);
    }
    ASSERT(p.timed_out);
    ASSERT(accel_now() - t0 < 5);
    pf__proc_why(&p, 500, why, sizeof(why));
    ASSERT_CONTAINS(why, "did not finish within 1 s");
    f = fopen(pidfile, "r");
    ASSERT(f != NULL);
    ASSERT(fgets(buf, sizeof(buf), f) != NULL);
    fclose(f);
    unlink(pidfile);
    grandchild = (pid_t)atoi(buf);
    /* what the child started went with it (its process group): gone, or a
     * zombie its new parent has not reaped yet */
    for (int i = 0; i < 100 && alive(grandchild); i++)
        usleep(10000);
    ASSERT(!alive(grandchild));
    pf__proc_free(&p);
}

TEST(runner_ends_when_the_child_exits_though_its_pipes_stay_open)
{
    struct pf__proc p;
    char pidfile[64], script[256], buf[32] = "";
    double t0 = accel_now();
    FILE *f;

    snprintf(pidfile, sizeof(pidfile), "/tmp/test_preflight_bg.%d", (int)getpid());
    /* what it starts keeps fds 1, 2 and 3 open after it exits */
    snprintf(script, sizeof(script), "sleep 30 & echo $! > %s; echo '{}' >&3; exit 0", pidfile);
    run_sh(&p, script, 20);
    ASSERT(accel_now() - t0 < 5);
    ASSERT(!p.timed_out);
    ASSERT(WIFEXITED(p.status) && WEXITSTATUS(p.status) == 0);
    ASSERT_STR_EQ(p.rep, "{}\n");
    f = fopen(pidfile, "r");
    ASSERT(f != NULL);
    ASSERT(fgets(buf, sizeof(buf), f) != NULL);
    fclose(f);
    unlink(pidfile);
    for (int i = 0; i < 100 && alive((pid_t)atoi(buf)); i++)
        usleep(10000);
    ASSERT(!alive((pid_t)atoi(buf)));
    pf__proc_free(&p);
}

TEST(runner_names_a_program_that_does_not_start)
{
    struct pf__proc p;
    const char *argv[] = {"/nonexistent/python", "-c", "pass", NULL};
    char why[400];

    pf__start(&p, argv);
    pf__wait_all(&p, 1, accel_now() + 5);
    pf__proc_why(&p, 5000, why, sizeof(why));
    /* posix_spawn reports the failed exec, or the child exits 127 */
    ASSERT(strstr(why, "nonexistent") != NULL || strstr(why, "status 127") != NULL);
    pf__proc_free(&p);
}

TEST(version_numbers)
{
    unsigned v;

    ASSERT(pf__version_number("1.15.0", &v) && v == ACCEL_VERSION(1, 15, 0));
    ASSERT(pf__version_number("0.32.1", &v) && v == ACCEL_VERSION(0, 32, 1));
    ASSERT(pf__version_number("1.16.0.dev0", &v) && v == ACCEL_VERSION(1, 16, 0));
    ASSERT(pf__version_number("2.13.0+cu130", &v) && v == ACCEL_VERSION(2, 13, 0));
    ASSERT(pf__version_number("1.16", &v) && v == ACCEL_VERSION(1, 16, 0));
    ASSERT(pf__version_number("5.7.p", &v) && v == ACCEL_VERSION(5, 7, 0));
    ASSERT(!pf__version_number("", &v));
    ASSERT(!pf__version_number("1", &v));
    ASSERT(!pf__version_number("1.", &v));
    ASSERT(!pf__version_number("v1.2.3", &v));
    ASSERT(!pf__version_number("1.100.0", &v));
}

static const struct accel_pf_row *row_of(const struct accel_pf_node *n, const char *check)
{
    for (size_t i = 0; i < n->nrows; i++)
        if (strcmp(n->rows[i].check, check) == 0)
            return &n->rows[i];
    return NULL;
}

static const struct accel_pf_row *network_with(const char *ifname, const char *hca,
                                               struct accel_pf_node *n)
{
    memset(n, 0, sizeof(*n));
    if (ifname)
        setenv("NCCL_SOCKET_IFNAME", ifname, 1);
    else
        unsetenv("NCCL_SOCKET_IFNAME");
    if (hca)
        setenv("NCCL_IB_HCA", hca, 1);
    else
        unsetenv("NCCL_IB_HCA");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    pf__check_network(n);
    return row_of(n, "network");
}

TEST(nccl_name_lists_as_nccl_reads_them)
{
    struct accel_pf_node n;
    const struct accel_pf_row *r;

    r = network_with("lo", NULL, &n);
    ASSERT(r && r->status == ACCEL_PF_PASS);
    r = network_with("l", NULL, &n); /* a prefix */
    ASSERT(r && r->status == ACCEL_PF_PASS);
    r = network_with("=l", NULL, &n); /* exact: no interface is called "l" */
    ASSERT(r && r->status == ACCEL_PF_FAIL);
    ASSERT_CONTAINS(r->reason, "no interface on this node is l (it has: ");
    r = network_with("nosuch0,lo", NULL, &n); /* one of two: NCCL uses the other */
    ASSERT(r && r->status == ACCEL_PF_WARN);
    ASSERT_CONTAINS(r->reason, "nosuch0*");
    r = network_with("nosuch0", NULL, &n);
    ASSERT(r && r->status == ACCEL_PF_FAIL);
    r = network_with(NULL, "mlx5_9:1", &n);
    ASSERT(r && r->status == ACCEL_PF_FAIL);
    ASSERT_CONTAINS(r->reason, "no InfiniBand device on this node is mlx5_9*");
    r = network_with(NULL, NULL, &n);
    ASSERT(r && r->status == ACCEL_PF_PASS);
    setenv("MASTER_PORT", "70000", 1);
    pf__check_network(&n);
    r = &n.rows[n.nrows - 1];
    ASSERT(r->status == ACCEL_PF_FAIL);
    ASSERT_CONTAINS(r->reason, "MASTER_PORT=70000 is not a port");
    unsetenv("MASTER_PORT");
}

static void fake_node(struct accel_pf_node *n, const char *host, const char *torch, const char *acc)
{
    memset(n, 0, sizeof(*n));
    snprintf(n->host, sizeof(n->host), "%s", host);
    snprintf(n->v.python, sizeof(n->v.python), "3.11.2");
    snprintf(n->v.pkg[ACCEL_PF_TORCH], sizeof(n->v.pkg[0]), "%s", torch);
    snprintf(n->v.pkg[ACCEL_PF_ACCELERATE], sizeof(n->v.pkg[0]), "%s", acc);
    n->v.ngpus = 1;
    snprintf(n->v.gpu[0].name, sizeof(n->v.gpu[0].name), "NVIDIA H100 80GB HBM3");
    n->v.gpu[0].cc_major = 9;
    accel_pf_add_row(n, "python", ACCEL_PF_PASS, "ok");
}

TEST(record_and_drift_per_node)
{
    struct accel_pf_node nodes[2];
    struct accel_error err;
    char dir[256], cfg[300];
    const struct accel_pf_row *r;

    test_mkdtemp(dir, sizeof(dir), "preflight");
    snprintf(cfg, sizeof(cfg), "%s/x.yaml", dir);
    fclose(fopen(cfg, "w"));
    fake_node(&nodes[0], "n1", "2.13.0", "1.15.0");
    fake_node(&nodes[1], "n2", "2.13.0", "1.15.0");
    ASSERT_ACCEL_OK(accel_pf_record(dir, cfg, "100", nodes, 2, &err), &err);
    r = row_of(&nodes[0], "drift");
    ASSERT(r && r->status == ACCEL_PF_PASS);
    ASSERT_STR_EQ(r->reason, "the first record of this config");
    sleep(1); /* the record's order is its file's mtime */
    fake_node(&nodes[0], "n1", "2.13.0", "1.15.0");
    fake_node(&nodes[1], "n2", "2.15.0", "1.15.0");
    ASSERT_ACCEL_OK(accel_pf_record(dir, cfg, "101", nodes, 2, &err), &err);
    r = row_of(&nodes[0], "drift");
    ASSERT(r && r->status == ACCEL_PF_PASS);
    ASSERT_CONTAINS(r->reason, "the same versions as job 100");
    r = row_of(&nodes[1], "drift");
    ASSERT(r && r->status == ACCEL_PF_WARN);
    ASSERT_CONTAINS(r->reason, "torch 2.13.0 → 2.15.0 on n2 since job 100");
    /* a third node the records never saw */
    fake_node(&nodes[0], "n3", "2.15.0", "1.15.0");
    ASSERT_ACCEL_OK(accel_pf_record(dir, cfg, "102", nodes, 1, &err), &err);
    r = row_of(&nodes[0], "drift");
    ASSERT(r && r->status == ACCEL_PF_PASS);
    ASSERT_STR_EQ(r->reason, "no earlier record of this config has n3");
    /* n1, absent from the newest record (102), is compared with 101's entry */
    sleep(1);
    fake_node(&nodes[0], "n1", "2.13.0", "1.16.0");
    ASSERT_ACCEL_OK(accel_pf_record(dir, cfg, "103", nodes, 1, &err), &err);
    r = row_of(&nodes[0], "drift");
    ASSERT(r && r->status == ACCEL_PF_WARN);
    ASSERT_CONTAINS(r->reason, "accelerate 1.15.0 → 1.16.0 on n1 since job 101");
    /* a job id that is a path names nothing */
    ASSERT_ERR(accel_pf_record(dir, cfg, "../evil", nodes, 1, &err), &err, ACCEL_EINVAL,
               "couldn't name a record");
    ASSERT_INT_EQ(test_count_entries(dir), 2); /* x.yaml and the config's folder */
    /* a folder others may write to is not this user's record: refused */
    {
        char sub[600];
        struct dirent *e;
        DIR *d = opendir(dir);
        while (d && (e = readdir(d)))
            if (strncmp(e->d_name, "x-", 2) == 0)
                snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
        if (d)
            closedir(d);
        ASSERT(chmod(sub, 0777) == 0);
        fake_node(&nodes[0], "n1", "2.13.0", "1.16.0");
        ASSERT_ERR(accel_pf_record(dir, cfg, "104", nodes, 1, &err), &err, ACCEL_EPERM,
                   "only it may write to");
        r = row_of(&nodes[0], "drift");
        ASSERT(r && r->status == ACCEL_PF_WARN);
        ASSERT_CONTAINS(r->reason, "not recorded");
    }
    test_rmtree(dir);
}

TEST(node_json_both_ways)
{
    struct accel_pf_node a, b;
    struct accel_error err;
    char *s;

    fake_node(&a, "n7", "2.13.0", "1.15.0");
    accel_pf_add_row(&a, "threads", ACCEL_PF_WARN, "a \"quoted\" reason → with UTF-8");
    accel_pf_add_row(&a, "gpus", ACCEL_PF_FAIL, "none");
    s = accel_pf_node_to_json(&a);
    ASSERT(s != NULL);
    ASSERT_ACCEL_OK(accel_pf_node_from_json(&b, s, strlen(s), &err), &err);
    free(s);
    ASSERT_STR_EQ(b.host, "n7");
    ASSERT_INT_EQ(b.nrows, 3);
    ASSERT_INT_EQ(b.rows[1].status, ACCEL_PF_WARN);
    ASSERT_STR_EQ(b.rows[1].reason, "a \"quoted\" reason → with UTF-8");
    ASSERT_STR_EQ(b.v.pkg[ACCEL_PF_ACCELERATE], "1.15.0");
    ASSERT_STR_EQ(b.v.gpu[0].name, "NVIDIA H100 80GB HBM3");
    ASSERT_INT_EQ(b.v.gpu[0].cc_major, 9);
    ASSERT_INT_EQ(accel_pf_worst(&b, 1), ACCEL_PF_FAIL);
    ASSERT_ERR(accel_pf_node_from_json(&b, "{\"host\": \"a b\"}", 15, &err), &err, ACCEL_EPARSE,
               "preflight: the node's report is malformed");
    ASSERT_ERR(accel_pf_node_from_json(&b, "[]", 2, &err), &err, ACCEL_EPARSE,
               "report is malformed");
}

TEST(rows_past_the_cap_are_dropped)
{
    struct accel_pf_node n;

    memset(&n, 0, sizeof(n));
    for (int i = 0; i < ACCEL_PF_MAX_ROWS + 5; i++)
        accel_pf_add_row(&n, "x", ACCEL_PF_PASS, "%d", i);
    ASSERT_INT_EQ(n.nrows, ACCEL_PF_MAX_ROWS);
}

TEST_LIST(T(runner_reads_fd3_apart_from_the_output),
          T(runner_keeps_only_the_tail_and_caps_the_report),
          T(runner_kills_the_group_at_the_deadline),
          T(runner_ends_when_the_child_exits_though_its_pipes_stay_open),
          T(runner_names_a_program_that_does_not_start), T(version_numbers),
          T(nccl_name_lists_as_nccl_reads_them), T(record_and_drift_per_node),
          T(node_json_both_ways), T(rows_past_the_cap_are_dropped))
