/*
 * test_env.c: accel_env_build, the environment one worker (or one node's
 * launcher) gets, on crafted configs and layouts.
 *
 * Layouts: ranks from node_rank x nproc + local_rank, explicit ranks for
 * uneven layouts, and every layout error.  The master address and port in
 * their order of precedence.  The node-level set for a pod's launcher.  The
 * simple launcher (NO, MULTI_CPU) against the torchrun path.  Each paradigm's
 * variables with the encoding its consumer parses (reference/accelerate.md
 * §2.3-2.5): FSDP lowercase true/false, dynamo True/False and upper-case
 * backends, DeepSpeed lowercase devices, FP8 and parallelism.  The placement
 * plan and the site's NCCL variables.  What is refused (XLA, SageMaker, caps).
 * Sorted, byte-identical output.  Allocation-failure torture.
 *
 * Comparing against real accelerate runs is test_golden.c's job; this file
 * checks the rules one at a time, on inputs the corpus does not have.
 */
#define _GNU_SOURCE
#include <dirent.h>

#include "accel/alloc.h"
#include "accel/config.h"
#include "accel/env.h"
#include "accel/site.h"
#include "../harness/test.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---------------------------------------------------------------- helpers */

static void dump_diags(const struct accel_diags *d)
{
    for (size_t i = 0; i < d->n; i++) {
        char b[1400];
        accel_diag_format(&d->v[i], b, sizeof(b));
        test_note("  %s", b);
    }
}

static void dump_env(const struct accel_env *env)
{
    for (size_t i = 0; i < env->n; i++)
        test_note("  %s", env->v[i]);
}

/* Loads a config that must load (warnings allowed). */
static void cfg_load(struct accel_cfg *cfg, const char *yaml)
{
    struct accel_diags d;
    struct accel_error err;
    enum accel_err rc;

    accel_diags_init(&d);
    rc = accel_cfg_load_buffer(cfg, "u.yaml", yaml, strlen(yaml), NULL, &d, &err);
    if (rc != ACCEL_OK) {
        dump_diags(&d);
        test_fail(__FILE__, __LINE__, "config does not load: %s: %s", accel_errname(rc), err.msg);
    }
    accel_diags_free(&d);
}

static struct accel_layout layout(unsigned nnodes, unsigned node_rank, unsigned nproc,
                                  int local_rank)
{
    struct accel_layout l = {nnodes, node_rank, nproc, local_rank, -1, 0, NULL, 0, 0};
    return l;
}

static void build(const struct accel_cfg *cfg, const struct accel_layout *lay,
                  const struct accel_env_opts *opts, struct accel_env *env)
{
    struct accel_error err;
    enum accel_err rc;

    accel_error_clear(&err);
    rc = accel_env_build(cfg, lay, opts, env, &err);
    if (rc != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "accel_env_build: %s: %s", accel_errname(rc), err.msg);
}

/* NAME has VALUE (NULL: NAME is absent). */
static void env_is(const struct accel_env *env, const char *name, const char *value, int line)
{
    const char *got = accel_env_get(env, name);

    if (value == NULL && got != NULL) {
        dump_env(env);
        test_fail(__FILE__, line, "%s is set (\"%s\"), expected absent", name, got);
    }
    if (value != NULL && (got == NULL || strcmp(got, value) != 0)) {
        dump_env(env);
        test_fail(__FILE__, line, "%s is %s%s%s, expected \"%s\"", name, got ? "\"" : "",
                  got ? got : "absent", got ? "\"" : "", value);
    }
}

#define ENV_IS(env, name, value) env_is((env), (name), (value), __LINE__)

/* A table of NAME=VALUE (VALUE NULL: absent) checked in one go. */
struct kv {
    const char *name;
    const char *value;
};

static void env_has_all(const struct accel_env *env, const struct kv *kv, size_t n, int line)
{
    for (size_t i = 0; i < n; i++)
        env_is(env, kv[i].name, kv[i].value, line);
}

#define ENV_HAS_ALL(env, table) env_has_all((env), (table), N_OF(table), __LINE__)

/* Every name starting with `prefix` is one of `allowed`. */
static void only_these_with_prefix(const struct accel_env *env, const char *prefix,
                                   const struct kv *allowed, size_t n)
{
    for (size_t i = 0; i < env->n; i++) {
        bool ok = false;
        if (strncmp(env->v[i], prefix, strlen(prefix)) != 0)
            continue;
        for (size_t k = 0; k < n && !ok; k++) {
            size_t nl = strlen(allowed[k].name);
            ok = strncmp(env->v[i], allowed[k].name, nl) == 0 && env->v[i][nl] == '=';
        }
        if (!ok) {
            dump_env(env);
            test_fail(__FILE__, __LINE__, "unexpected variable %s", env->v[i]);
        }
    }
}

/* Sorted by name in byte order, no name twice, every entry NAME=VALUE. */
static void check_sorted(const struct accel_env *env)
{
    for (size_t i = 0; i < env->n; i++) {
        const char *eq = strchr(env->v[i], '=');
        if (eq == NULL || eq == env->v[i])
            test_fail(__FILE__, __LINE__, "entry %zu is not NAME=VALUE: %s", i, env->v[i]);
        if (i > 0) {
            const char *p = env->v[i - 1], *q = env->v[i];
            size_t np = strcspn(p, "="), nq = strcspn(q, "=");
            int c = memcmp(p, q, np < nq ? np : nq);
            if (c > 0 || (c == 0 && np >= nq))
                test_fail(__FILE__, __LINE__, "not sorted or repeated: %s before %s", p, q);
        }
    }
}

static const char *const never_set[] = {"TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE"};

static void check_never(const struct accel_env *env)
{
    for (size_t i = 0; i < N_OF(never_set); i++)
        ENV_IS(env, never_set[i], NULL);
}

#define GPU_ANY "distributed_type: MULTI_GPU\n"

/* ---------------------------------------------------------------- layouts */

TEST(layout_ranks)
{
    static const struct {
        unsigned nnodes, node_rank, nproc;
        int local;
        long global;
        unsigned world;
        const char *rank, *world_size, *group_rank, *group_world, *local_world;
    } rows[] = {
        {1, 0, 1, 0, -1, 0, "0", "1", "0", "1", "1"},
        {1, 0, 8, 5, -1, 0, "5", "8", "0", "1", "8"},
        {2, 1, 4, 2, -1, 0, "6", "8", "1", "2", "4"},
        {4, 3, 8, 7, -1, 0, "31", "32", "3", "4", "8"},
        {4, 0, 8, 0, -1, 0, "0", "32", "0", "4", "8"},
        /* 5 tasks on 2 nodes: 3 on node 0 (ranks 0-2), 2 on node 1 (3-4) */
        {2, 0, 3, 2, 2, 5, "2", "5", "0", "2", "3"},
        {2, 1, 2, 0, 3, 5, "3", "5", "1", "2", "2"},
        {2, 1, 2, 1, 4, 5, "4", "5", "1", "2", "2"},
        /* an explicit world with the default rank */
        {2, 1, 2, 1, -1, 6, "3", "6", "1", "2", "2"},
    };
    struct accel_cfg cfg;

    cfg_load(&cfg, GPU_ANY);
    for (size_t i = 0; i < N_OF(rows); i++) {
        struct accel_layout lay =
            layout(rows[i].nnodes, rows[i].node_rank, rows[i].nproc, rows[i].local);
        struct accel_env env;
        char local[16];

        lay.global_rank = rows[i].global;
        lay.world_size = rows[i].world;
        build(&cfg, &lay, NULL, &env);
        snprintf(local, sizeof(local), "%d", rows[i].local);
        ENV_IS(&env, "RANK", rows[i].rank);
        ENV_IS(&env, "ROLE_RANK", rows[i].rank);
        ENV_IS(&env, "LOCAL_RANK", local);
        ENV_IS(&env, "WORLD_SIZE", rows[i].world_size);
        ENV_IS(&env, "ROLE_WORLD_SIZE", rows[i].world_size);
        ENV_IS(&env, "GROUP_RANK", rows[i].group_rank);
        ENV_IS(&env, "GROUP_WORLD_SIZE", rows[i].group_world);
        ENV_IS(&env, "LOCAL_WORLD_SIZE", rows[i].local_world);
        ENV_IS(&env, "ROLE_NAME", "default");
        ENV_IS(&env, "TORCHELASTIC_RESTART_COUNT", "0");
        ENV_IS(&env, "TORCHELASTIC_MAX_RESTARTS", "0");
        ENV_IS(&env, "TORCHELASTIC_RUN_ID", "none");
        ENV_IS(&env, "TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
        check_never(&env);
        check_sorted(&env);
        accel_env_free(&env);
    }
    accel_cfg_free(&cfg);
}

TEST(layout_errors)
{
    static const struct {
        const char *yaml;
        struct accel_layout lay;
        const char *want;
    } rows[] = {
        {GPU_ANY, {0, 0, 1, 0, -1, 0, NULL, 0, 0}, "at least one node and one process per node"},
        {GPU_ANY, {1, 0, 0, 0, -1, 0, NULL, 0, 0}, "at least one node and one process per node"},
        {GPU_ANY, {2, 2, 4, 0, -1, 0, NULL, 0, 0}, "node rank 2 is not below the node count 2"},
        {GPU_ANY, {2, 5, 4, -1, -1, 0, NULL, 0, 0}, "node rank 5 is not below the node count 2"},
        {GPU_ANY,
         {2, 1, 4, 4, -1, 0, NULL, 0, 0},
         "local rank 4 is not below the processes per node (4)"},
        {GPU_ANY, {2, 1, 2, 1, 5, 5, NULL, 0, 0}, "world size 5 leaves no room for rank 5"},
        {GPU_ANY, {2, 1, 4, 3, -1, 6, NULL, 0, 0}, "world size 6 leaves no room for rank 7"},
        {GPU_ANY "num_processes: 8\n",
         {2, 0, 3, 0, -1, 0, NULL, 0, 0},
         "the config says num_processes: 8, the job has 6 processes; make them equal or leave "
         "num_processes out"},
        {GPU_ANY "num_processes: 8\n",
         {2, 0, 3, -1, -1, 0, NULL, 0, 0},
         "num_processes: 8, the job has 6 processes"},
        {"distributed_type: 'NO'\n",
         {1, 0, 2, 0, -1, 0, NULL, 0, 0},
         "the config says num_processes: 1, the job has 2 processes"},
        {GPU_ANY "num_processes: 8\nnum_machines: 2\nmain_process_ip: h\n",
         {4, 0, 2, 0, -1, 0, NULL, 0, 0},
         "the config says num_machines: 2, the job has 4 nodes; make them equal or leave "
         "num_machines out"},
        {GPU_ANY "num_machines: 1\n",
         {2, 0, 2, -1, -1, 0, NULL, 0, 0},
         "num_machines: 1, the job has 2 nodes"},
        {GPU_ANY "main_process_port: 0\n",
         {1, 0, 2, 0, -1, 0, NULL, 0, 0},
         "main_process_port: 0 asks the launcher to pick a free port; give the port "
         "(--master-port)"},
        {"distributed_type: MULTI_CPU\nuse_cpu: true\nmain_process_port: 0\n",
         {1, 0, 2, 1, -1, 0, NULL, 0, 0},
         "main_process_port: 0"},
    };

    for (size_t i = 0; i < N_OF(rows); i++) {
        struct accel_cfg cfg;
        struct accel_env env = {(char **)&env, 12345}; /* garbage the call must reset */
        struct accel_error err;
        enum accel_err rc;

        cfg_load(&cfg, rows[i].yaml);
        accel_error_clear(&err);
        rc = accel_env_build(&cfg, &rows[i].lay, NULL, &env, &err);
        if (rc != ACCEL_ELAYOUT)
            test_fail(__FILE__, __LINE__, "row %zu: %s, expected ACCEL_ELAYOUT", i,
                      accel_errname(rc));
        ASSERT_INT_EQ(err.code, ACCEL_ELAYOUT);
        if (strstr(err.msg, rows[i].want) == NULL)
            test_fail(__FILE__, __LINE__, "row %zu: \"%s\" does not contain \"%s\"", i, err.msg,
                      rows[i].want);
        ASSERT(env.v == NULL);
        ASSERT_INT_EQ(env.n, 0);
        accel_env_free(&env);
        accel_cfg_free(&cfg);
    }
}

/* What fits: counts equal to the config, or the config silent. */
TEST(layout_fits)
{
    static const struct {
        const char *yaml;
        struct accel_layout lay;
    } rows[] = {
        {GPU_ANY "num_processes: 8\nnum_machines: 2\nmain_process_ip: h\n",
         {2, 1, 4, 3, -1, 0, NULL, 0, 0}},
        {GPU_ANY "num_processes: 8\nnum_machines: 2\nmain_process_ip: h\n",
         {2, 1, 4, -1, -1, 0, NULL, 0, 0}},
        {GPU_ANY "num_processes: 5\n", {2, 1, 2, 1, 4, 5, NULL, 0, 0}},
        {GPU_ANY, {16, 15, 8, 7, -1, 0, NULL, 0, 0}},
        {"distributed_type: 'NO'\n", {1, 0, 1, 0, -1, 0, NULL, 0, 0}},
        {GPU_ANY "main_process_port: 0\n", {1, 0, 2, 0, -1, 0, NULL, 31000, 0}},
    };

    for (size_t i = 0; i < N_OF(rows); i++) {
        struct accel_cfg cfg;
        struct accel_env env;

        cfg_load(&cfg, rows[i].yaml);
        build(&cfg, &rows[i].lay, NULL, &env);
        check_sorted(&env);
        accel_env_free(&env);
        accel_cfg_free(&cfg);
    }
}

/* job_wins (site slurm_wins): the job's counts override the config's
 * instead of contradicting them; nothing else changes. */
TEST(layout_job_wins)
{
    struct accel_cfg cfg;
    struct accel_layout lay = layout(4, 3, 2, 1);
    struct accel_env_opts opts = {NULL, NULL, true};
    struct accel_env env;
    struct accel_error err;

    cfg_load(&cfg, GPU_ANY "num_processes: 16\nnum_machines: 2\nmain_process_ip: head\n");
    ASSERT_INT_EQ(accel_env_build(&cfg, &lay, NULL, &env, &err), ACCEL_ELAYOUT);
    build(&cfg, &lay, &opts, &env);
    ENV_IS(&env, "WORLD_SIZE", "8");
    ENV_IS(&env, "RANK", "7");
    ENV_IS(&env, "GROUP_WORLD_SIZE", "4");
    ENV_IS(&env, "MASTER_ADDR", "head");
    accel_env_free(&env);
    /* layout errors stay errors */
    lay.local_rank = 2;
    ASSERT_INT_EQ(accel_env_build(&cfg, &lay, &opts, &env, &err), ACCEL_ELAYOUT);
    ASSERT_CONTAINS(err.msg, "local rank 2");
    accel_cfg_free(&cfg);

    /* one process, one node: the messages say so in the singular */
    cfg_load(&cfg, GPU_ANY "num_processes: 2\nnum_machines: 2\nmain_process_ip: h\n");
    lay = layout(1, 0, 1, 0);
    ASSERT_INT_EQ(accel_env_build(&cfg, &lay, NULL, &env, &err), ACCEL_ELAYOUT);
    ASSERT_CONTAINS(err.msg, "the job has 1 process;");
    accel_cfg_free(&cfg);
}

/* ---------------------------------------------------------------- master */

TEST(master_precedence)
{
    static const struct {
        const char *what;
        const char *yaml;
        struct accel_layout lay;
        const char *addr, *port;
    } rows[] = {
        {"nothing given", GPU_ANY, {1, 0, 2, 0, -1, 0, NULL, 0, 0}, "127.0.0.1", "29500"},
        {"nothing given, 2 nodes", GPU_ANY, {2, 1, 2, 0, -1, 0, NULL, 0, 0}, "127.0.0.1", "29500"},
        {"config, 2 machines",
         GPU_ANY "num_machines: 2\nmain_process_ip: 10.0.0.7\nmain_process_port: 4000\n",
         {2, 1, 2, 0, -1, 0, NULL, 0, 0},
         "10.0.0.7",
         "4000"},
        {"layout over config",
         GPU_ANY "num_machines: 2\nmain_process_ip: 10.0.0.7\nmain_process_port: 4000\n",
         {2, 1, 2, 0, -1, 0, "node-0.cluster", 31234, 0},
         "node-0.cluster",
         "31234"},
        {"layout address, config port",
         GPU_ANY "num_machines: 2\nmain_process_ip: 10.0.0.7\nmain_process_port: 4000\n",
         {2, 1, 2, 0, -1, 0, "node-0", 0, 0},
         "node-0",
         "4000"},
        {"layout port, config address",
         GPU_ANY "num_machines: 2\nmain_process_ip: 10.0.0.7\nmain_process_port: 4000\n",
         {2, 1, 2, 0, -1, 0, NULL, 5000, 0},
         "10.0.0.7",
         "5000"},
        /* One machine under torchrun: accelerate leaves the address to
         * torchrun, which uses 127.0.0.1; the port is passed on. */
        {"torchrun, one machine",
         GPU_ANY "main_process_ip: 10.0.0.7\nmain_process_port: 4000\n",
         {1, 0, 2, 0, -1, 0, NULL, 0, 0},
         "127.0.0.1",
         "4000"},
        /* The simple launcher exports main_process_ip as it is. */
        {"simple launcher, one machine",
         "distributed_type: MULTI_CPU\nuse_cpu: true\nmain_process_ip: 10.0.0.7\n",
         {1, 0, 2, 0, -1, 0, NULL, 0, 0},
         "10.0.0.7",
         "29500"},
        {"node-level set",
         GPU_ANY "num_machines: 2\nmain_process_ip: 10.0.0.7\n",
         {2, 0, 4, -1, -1, 0, NULL, 0, 0},
         "10.0.0.7",
         "29500"},
        {"node-level set, layout",
         GPU_ANY,
         {2, 0, 4, -1, -1, 0, "pod-0.svc", 29600, 0},
         "pod-0.svc",
         "29600"},
    };

    for (size_t i = 0; i < N_OF(rows); i++) {
        struct accel_cfg cfg;
        struct accel_env env;

        cfg_load(&cfg, rows[i].yaml);
        build(&cfg, &rows[i].lay, NULL, &env);
        if (strcmp(accel_env_get(&env, "MASTER_ADDR") ? accel_env_get(&env, "MASTER_ADDR") : "",
                   rows[i].addr) != 0 ||
            strcmp(accel_env_get(&env, "MASTER_PORT") ? accel_env_get(&env, "MASTER_PORT") : "",
                   rows[i].port) != 0) {
            dump_env(&env);
            test_fail(__FILE__, __LINE__, "[%s] MASTER_ADDR/PORT, expected %s:%s", rows[i].what,
                      rows[i].addr, rows[i].port);
        }
        if (rows[i].lay.local_rank < 0) {
            ENV_IS(&env, "PET_MASTER_ADDR", rows[i].addr);
            ENV_IS(&env, "PET_MASTER_PORT", rows[i].port);
        }
        accel_env_free(&env);
        accel_cfg_free(&cfg);
    }
}

/* ---------------------------------------------------------------- node level */

TEST(node_level_set)
{
    static const struct kv want[] = {
        {"PET_NNODES", "3"},
        {"PET_NODE_RANK", "2"},
        {"PET_NPROC_PER_NODE", "4"},
        {"PET_MASTER_ADDR", "head"},
        {"PET_MASTER_PORT", "29555"},
        {"GROUP_RANK", "2"},
        {"WORLD_SIZE", "12"},
        {"MASTER_ADDR", "head"},
        {"MASTER_PORT", "29555"},
        {"ACCELERATE_USE_FSDP", "true"},
        {"FSDP_VERSION", "2"},
        {"ACCELERATE_MIXED_PRECISION", "bf16"},
        {"OMP_NUM_THREADS", "1"},
        /* per-process variables are torchrun's to set in each worker */
        {"RANK", NULL},
        {"LOCAL_RANK", NULL},
        {"LOCAL_WORLD_SIZE", NULL},
        {"ROLE_RANK", NULL},
        {"ROLE_WORLD_SIZE", NULL},
        {"ROLE_NAME", NULL},
        {"GROUP_WORLD_SIZE", NULL},
        {"TORCHELASTIC_RESTART_COUNT", NULL},
        {"TORCHELASTIC_RUN_ID", NULL},
        {"TORCHELASTIC_USE_AGENT_STORE", NULL},
        {"CUDA_VISIBLE_DEVICES", NULL},
    };
    static const struct accel_rank_plan ranks[4] = {
        {"0", "mlx5_0", "ib0"}, {"1", "mlx5_1", "ib1"}, {"2", "", ""}, {"3", "", ""}};
    struct accel_plan plan = {4, ranks};
    struct accel_env_opts opts = {&plan, NULL};
    struct accel_cfg cfg;
    struct accel_layout lay = layout(3, 2, 4, -1);
    struct accel_env env;

    cfg_load(&cfg, "distributed_type: FSDP\nnum_processes: 12\nnum_machines: 3\n"
                   "main_process_ip: head\nmain_process_port: 29555\nmixed_precision: bf16\n"
                   "fsdp_config:\n  fsdp_version: 2\n");
    build(&cfg, &lay, &opts, &env);
    ENV_HAS_ALL(&env, want);
    ENV_IS(&env, "NCCL_IB_HCA", NULL); /* the plan is per local rank */
    check_sorted(&env);
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* The simple launcher's node-level set is the same shape. */
    cfg_load(&cfg, "distributed_type: MULTI_CPU\nuse_cpu: true\n");
    lay = layout(2, 1, 3, -1);
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "PET_NNODES", "2");
    ENV_IS(&env, "PET_NODE_RANK", "1");
    ENV_IS(&env, "PET_NPROC_PER_NODE", "3");
    ENV_IS(&env, "GROUP_RANK", "1");
    ENV_IS(&env, "WORLD_SIZE", "6");
    ENV_IS(&env, "RANK", NULL);
    ENV_IS(&env, "LOCAL_RANK", NULL);
    ENV_IS(&env, "ACCELERATE_USE_CPU", "True");
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

/* ---------------------------------------------------------------- launchers */

TEST(simple_launcher)
{
    struct accel_cfg cfg;
    struct accel_layout lay;
    struct accel_env env;

    /* NO, one process: no ranks, no master, ACCELERATE_USE_CPU False. */
    cfg_load(&cfg, "distributed_type: 'NO'\n");
    ASSERT_INT_EQ(cfg.launcher, ACCEL_LAUNCH_SIMPLE);
    lay = layout(1, 0, 1, 0);
    lay.cpus_per_proc = 8;
    build(&cfg, &lay, NULL, &env);
    {
        static const struct kv want[] = {
            {"ACCELERATE_USE_CPU", "False"},
            {"ACCELERATE_MIXED_PRECISION", "no"},
            {"ACCELERATE_DYNAMO_BACKEND", "NO"},
            {"OMP_NUM_THREADS", "1"},
            {"RANK", NULL},
            {"LOCAL_RANK", NULL},
            {"WORLD_SIZE", NULL},
            {"LOCAL_WORLD_SIZE", NULL},
            {"MASTER_ADDR", NULL},
            {"MASTER_PORT", NULL},
            {"GROUP_RANK", NULL},
            {"KMP_AFFINITY", NULL},
            {"KMP_BLOCKTIME", NULL},
            {"TORCHELASTIC_RUN_ID", NULL},
            {"TORCH_NCCL_ASYNC_ERROR_HANDLING", NULL},
        };
        ENV_HAS_ALL(&env, want);
    }
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* NO with use_cpu: True, KMP_*, threads from the layout. */
    cfg_load(&cfg, "distributed_type: 'NO'\nuse_cpu: true\n");
    build(&cfg, &lay, NULL, &env);
    {
        static const struct kv want[] = {
            {"ACCELERATE_USE_CPU", "True"},
            {"KMP_AFFINITY", "granularity=fine,compact,1,0"},
            {"KMP_BLOCKTIME", "1"},
            {"OMP_NUM_THREADS", "8"},
            {"RANK", NULL},
            {"MASTER_ADDR", NULL},
        };
        ENV_HAS_ALL(&env, want);
    }
    accel_env_free(&env);
    lay.cpus_per_proc = 1;
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "OMP_NUM_THREADS", "1");
    accel_env_free(&env);
    lay.cpus_per_proc = 0; /* unknown */
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "OMP_NUM_THREADS", "1");
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* MULTI_CPU, 2 nodes x 2: ranks as mpirun would give them. */
    cfg_load(&cfg, "distributed_type: MULTI_CPU\nuse_cpu: true\nnum_processes: 4\nnum_machines: 2\n"
                   "main_process_ip: cpu-head\n");
    lay = layout(2, 1, 2, 1);
    lay.cpus_per_proc = 16;
    build(&cfg, &lay, NULL, &env);
    {
        static const struct kv want[] = {
            {"RANK", "3"},
            {"LOCAL_RANK", "1"},
            {"WORLD_SIZE", "4"},
            {"LOCAL_WORLD_SIZE", "2"},
            {"MASTER_ADDR", "cpu-head"},
            {"MASTER_PORT", "29500"},
            {"ACCELERATE_USE_CPU", "True"},
            {"KMP_BLOCKTIME", "1"},
            {"OMP_NUM_THREADS", "16"},
            /* torchrun's own variables are not the simple launcher's */
            {"GROUP_RANK", NULL},
            {"GROUP_WORLD_SIZE", NULL},
            {"ROLE_RANK", NULL},
            {"ROLE_NAME", NULL},
            {"TORCHELASTIC_RESTART_COUNT", NULL},
            {"TORCH_NCCL_ASYNC_ERROR_HANDLING", NULL},
        };
        ENV_HAS_ALL(&env, want);
    }
    check_never(&env);
    check_sorted(&env);
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* MULTI_CPU without use_cpu: False, no KMP, threads stay 1. */
    cfg_load(&cfg, "distributed_type: MULTI_CPU\nnum_processes: 2\n");
    lay = layout(1, 0, 2, 0);
    lay.cpus_per_proc = 4;
    build(&cfg, &lay, NULL, &env);
    {
        static const struct kv want[] = {
            {"ACCELERATE_USE_CPU", "False"},
            {"KMP_AFFINITY", NULL},
            {"KMP_BLOCKTIME", NULL},
            {"OMP_NUM_THREADS", "1"},
            {"RANK", "0"},
            {"WORLD_SIZE", "2"},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", "29500"},
        };
        ENV_HAS_ALL(&env, want);
    }
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

TEST(torchrun_path)
{
    struct accel_cfg cfg;
    struct accel_layout lay = layout(1, 0, 2, 1);
    struct accel_env env;

    /* MULTI_GPU: no ACCELERATE_USE_CPU, no KMP_*, OMP 1 whatever the CPUs. */
    lay.cpus_per_proc = 8;
    cfg_load(&cfg, GPU_ANY "num_processes: 2\n");
    ASSERT_INT_EQ(cfg.launcher, ACCEL_LAUNCH_TORCHRUN);
    build(&cfg, &lay, NULL, &env);
    {
        static const struct kv want[] = {
            {"ACCELERATE_USE_CPU", NULL},
            {"KMP_AFFINITY", NULL},
            {"KMP_BLOCKTIME", NULL},
            {"OMP_NUM_THREADS", "1"},
            {"ACCELERATE_USE_FSDP", NULL},
            {"ACCELERATE_USE_DEEPSPEED", NULL},
            {"ACCELERATE_USE_MEGATRON_LM", NULL},
            {"ACCELERATE_USE_PARALLELISM_CONFIG", NULL},
            {"ACCELERATE_DEBUG_MODE", NULL},
            {"ACCELERATE_CPU_AFFINITY", NULL},
            {"CUDA_VISIBLE_DEVICES", NULL},
            {"CUDA_DEVICE_ORDER", NULL},
        };
        ENV_HAS_ALL(&env, want);
    }
    check_never(&env);
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* use_cpu on the torchrun path: accelrun follows the YAML. */
    cfg_load(&cfg, GPU_ANY "num_processes: 2\nuse_cpu: true\n");
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "ACCELERATE_USE_CPU", "true");
    ENV_IS(&env, "OMP_NUM_THREADS", "8");
    ENV_IS(&env, "KMP_AFFINITY", NULL);
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* debug, gpu_ids and enable_cpu_affinity */
    cfg_load(&cfg,
             GPU_ANY "num_processes: 2\ndebug: true\ngpu_ids: '2,3'\nenable_cpu_affinity: true\n");
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "ACCELERATE_DEBUG_MODE", "true");
    ENV_IS(&env, "CUDA_VISIBLE_DEVICES", "2,3");
    ENV_IS(&env, "ACCELERATE_CPU_AFFINITY", "1");
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

/* gpu_ids go to the device type's own visibility variable. */
TEST(device_visibility)
{
    static const struct {
        const char *dist;
        const char *var;
    } rows[] = {
        {"MULTI_GPU", "CUDA_VISIBLE_DEVICES"},   {"FSDP", "CUDA_VISIBLE_DEVICES"},
        {"DEEPSPEED", "CUDA_VISIBLE_DEVICES"},   {"MULTI_XPU", "ZE_AFFINITY_MASK"},
        {"MULTI_MLU", "MLU_VISIBLE_DEVICES"},    {"MULTI_SDAA", "SDAA_VISIBLE_DEVICES"},
        {"MULTI_MUSA", "MUSA_VISIBLE_DEVICES"},  {"MULTI_NPU", "ASCEND_RT_VISIBLE_DEVICES"},
        {"MULTI_HPU", "HABANA_VISIBLE_MODULES"}, {"MULTI_NEURON", "NEURON_RT_VISIBLE_CORES"},
    };
    static const char *const all_vars[] = {"CUDA_VISIBLE_DEVICES",   "ZE_AFFINITY_MASK",
                                           "MLU_VISIBLE_DEVICES",    "SDAA_VISIBLE_DEVICES",
                                           "MUSA_VISIBLE_DEVICES",   "ASCEND_RT_VISIBLE_DEVICES",
                                           "HABANA_VISIBLE_MODULES", "NEURON_RT_VISIBLE_CORES"};

    for (size_t i = 0; i < N_OF(rows); i++) {
        char yaml[256];
        struct accel_cfg cfg;
        struct accel_layout lay = layout(1, 0, 2, 0);
        struct accel_env env;

        snprintf(yaml, sizeof(yaml), "distributed_type: %s\nnum_processes: 2\ngpu_ids: '4,5'\n",
                 rows[i].dist);
        cfg_load(&cfg, yaml);
        build(&cfg, &lay, NULL, &env);
        for (size_t k = 0; k < N_OF(all_vars); k++)
            ENV_IS(&env, all_vars[k], strcmp(all_vars[k], rows[i].var) == 0 ? "4,5" : NULL);
        accel_env_free(&env);
        accel_cfg_free(&cfg);
    }
}

/* Never TORCHELASTIC_USE_AGENT_STORE, whatever the config and layout. */
TEST(never_agent_store)
{
    char path[4200];
    DIR *dir;
    struct dirent *de;
    size_t checked = 0;
    static const char *const crafted[] = {
        GPU_ANY "num_processes: 4\n",
        "distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n",
        "distributed_type: DEEPSPEED\nnum_processes: 4\ndeepspeed_config:\n  zero_stage: 2\n",
        "distributed_type: MEGATRON_LM\nnum_processes: 4\n",
        "distributed_type: MULTI_CPU\nnum_processes: 4\nuse_cpu: true\n",
        "distributed_type: MULTI_NPU\nnum_processes: 4\n",
    };

    for (size_t i = 0; i < N_OF(crafted); i++) {
        struct accel_cfg cfg;
        struct accel_layout lays[] = {layout(2, 1, 2, 1), layout(2, 0, 2, 0), layout(2, 1, 2, -1)};

        cfg_load(&cfg, crafted[i]);
        for (size_t k = 0; k < N_OF(lays); k++) {
            struct accel_env env;
            build(&cfg, &lays[k], NULL, &env);
            check_never(&env);
            checked++;
            accel_env_free(&env);
        }
        accel_cfg_free(&cfg);
    }

    snprintf(path, sizeof(path), "%s/accelerate-configs", test_corpus_dir());
    dir = opendir(path);
    if (dir == NULL) {
        test_note("no shared corpus: crafted configs only");
        return;
    }
    while ((de = readdir(dir)) != NULL) {
        struct accel_cfg cfg;
        struct accel_diags d;
        struct accel_error err;
        struct accel_layout lay;
        struct accel_env env;
        unsigned nnodes, nproc;

        if (strstr(de->d_name, ".yaml") == NULL)
            continue;
        snprintf(path, sizeof(path), "%s/accelerate-configs/%s", test_corpus_dir(), de->d_name);
        accel_diags_init(&d);
        if (accel_cfg_load(&cfg, path, NULL, &d, &err) != ACCEL_OK) {
            accel_diags_free(&d);
            continue;
        }
        accel_diags_free(&d);
        if (cfg.launcher == ACCEL_LAUNCH_NONE) {
            lay = layout(1, 0, 1, 0);
            ASSERT_INT_EQ(accel_env_build(&cfg, &lay, NULL, &env, &err), ACCEL_EUNSUPPORTED);
            accel_cfg_free(&cfg);
            continue;
        }
        nnodes = (unsigned)cfg.num_machines;
        nproc = cfg.num_processes > 0 ? (unsigned)(cfg.num_processes / cfg.num_machines) : 2;
        for (int local = -1; local < (int)nproc; local++) {
            lay = layout(nnodes, nnodes - 1, nproc, local);
            build(&cfg, &lay, NULL, &env);
            check_never(&env);
            check_sorted(&env);
            checked++;
            accel_env_free(&env);
        }
        accel_cfg_free(&cfg);
    }
    closedir(dir);
    test_note("%zu environments without TORCHELASTIC_USE_AGENT_STORE", checked);
}

/* ---------------------------------------------------------------- paradigms */

TEST(fsdp1_encoding)
{
    static const struct kv want[] = {
        {"ACCELERATE_USE_FSDP", "true"},
        {"FSDP_VERSION", "1"},
        /* the strategy written as reshard_after_forward becomes the strategy */
        {"FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP"},
        {"FSDP_RESHARD_AFTER_FORWARD", "shard_grad_op"}, /* lowercased text */
        {"FSDP_OFFLOAD_PARAMS", "true"},
        {"FSDP_MIN_NUM_PARAMS", "2000"},
        {"FSDP_AUTO_WRAP_POLICY", "transformer_based_wrap"}, /* verbatim */
        {"FSDP_TRANSFORMER_CLS_TO_WRAP", "LlamaDecoderLayer,MLP"},
        {"FSDP_BACKWARD_PREFETCH", "BACKWARD_POST"},
        {"FSDP_STATE_DICT_TYPE", "FULL_STATE_DICT"},
        {"FSDP_FORWARD_PREFETCH", "true"},
        {"FSDP_USE_ORIG_PARAMS", "false"},
        {"FSDP_CPU_RAM_EFFICIENT_LOADING", "false"},
        {"FSDP_SYNC_MODULE_STATES", "false"},
        {"FSDP_ACTIVATION_CHECKPOINTING", "true"},
        {"FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD", "false"},
        {"FSDP_IGNORED_MODULES", NULL},
    };
    struct accel_cfg cfg;
    struct accel_layout lay = layout(1, 0, 2, 0);
    struct accel_env env;

    cfg_load(&cfg, "distributed_type: FSDP\n"
                   "num_processes: 2\n"
                   "fsdp_config:\n"
                   "  fsdp_version: 1\n"
                   "  fsdp_reshard_after_forward: SHARD_GRAD_OP\n"
                   "  fsdp_offload_params: True\n"
                   "  auto_wrap_policy: transformer_based_wrap\n"
                   "  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer,MLP\n"
                   "  fsdp_backward_prefetch: BACKWARD_POST\n"
                   "  fsdp_state_dict_type: FULL_STATE_DICT\n"
                   "  fsdp_min_num_params: 2000\n"
                   "  fsdp_forward_prefetch: true\n"
                   "  use_orig_params: false\n"
                   "  fsdp_cpu_ram_efficient_loading: false\n"
                   "  fsdp_sync_module_states: false\n"
                   "  fsdp_activation_checkpointing: true\n"
                   "  fsdp_ignored_modules: null\n");
    build(&cfg, &lay, NULL, &env);
    ENV_HAS_ALL(&env, want);
    only_these_with_prefix(&env, "FSDP_", want, N_OF(want));
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

TEST(fsdp2_encoding)
{
    static const struct kv want[] = {
        {"ACCELERATE_USE_FSDP", "true"},
        {"FSDP_VERSION", "2"},
        {"FSDP_SHARDING_STRATEGY", "FULL_SHARD"}, /* the CLI default, always exported */
        {"FSDP_RESHARD_AFTER_FORWARD", "false"},
        {"FSDP_OFFLOAD_PARAMS", "false"},
        {"FSDP_MIN_NUM_PARAMS", "100000000"},
        {"FSDP_AUTO_WRAP_POLICY", NULL},
        {"FSDP_TRANSFORMER_CLS_TO_WRAP", NULL},
        {"FSDP_BACKWARD_PREFETCH", NULL},
        {"FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT"},
        {"FSDP_FORWARD_PREFETCH", "false"},
        {"FSDP_USE_ORIG_PARAMS", "true"},
        {"FSDP_CPU_RAM_EFFICIENT_LOADING", "true"},
        {"FSDP_SYNC_MODULE_STATES", "true"},
        {"FSDP_ACTIVATION_CHECKPOINTING", "false"},
        {"FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD", "true"},
        {"FSDP_IGNORED_MODULES", "vision_tower.*"},
    };
    struct accel_cfg cfg;
    struct accel_layout lay = layout(1, 0, 4, 3);
    struct accel_env env;

    cfg_load(&cfg, "distributed_type: FSDP\n"
                   "num_processes: 4\n"
                   "fsdp_config:\n"
                   "  fsdp_version: 2\n"
                   "  reshard_after_forward: false\n"
                   "  state_dict_type: SHARDED_STATE_DICT\n"
                   "  activation_checkpointing_offload: true\n"
                   "  ignored_modules: vision_tower.*\n");
    build(&cfg, &lay, NULL, &env);
    ENV_HAS_ALL(&env, want);
    only_these_with_prefix(&env, "FSDP_", want, N_OF(want));
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* No FSDP variables for another type, even with an fsdp_config. */
    cfg_load(&cfg, GPU_ANY "num_processes: 4\nfsdp_config:\n  fsdp_offload_params: true\n");
    build(&cfg, &lay, NULL, &env);
    only_these_with_prefix(&env, "FSDP_", NULL, 0);
    ENV_IS(&env, "ACCELERATE_USE_FSDP", NULL);
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

/* reference/accelerate.md §2.9: test_configs/latest_fsdp.yaml through the
 * multi-GPU path. */
TEST(fsdp_worked_example)
{
    static const struct kv want[] = {
        {"ACCELERATE_MIXED_PRECISION", "no"},
        {"ACCELERATE_DYNAMO_BACKEND", "NO"},
        {"ACCELERATE_DYNAMO_MODE", "default"},
        {"ACCELERATE_DYNAMO_USE_FULLGRAPH", "False"},
        {"ACCELERATE_DYNAMO_USE_DYNAMIC", "False"},
        {"ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", "False"},
        {"OMP_NUM_THREADS", "1"},
        {"ACCELERATE_USE_FSDP", "true"},
        {"FSDP_VERSION", "1"},
        {"FSDP_SHARDING_STRATEGY", "FULL_SHARD"},
        {"FSDP_RESHARD_AFTER_FORWARD", "true"},
        {"FSDP_OFFLOAD_PARAMS", "false"},
        {"FSDP_MIN_NUM_PARAMS", "100000000"},
        {"FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP"},
        {"FSDP_TRANSFORMER_CLS_TO_WRAP", "BertLayer"},
        {"FSDP_BACKWARD_PREFETCH", "BACKWARD_PRE"},
        {"FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT"},
        {"FSDP_FORWARD_PREFETCH", "false"},
        {"FSDP_USE_ORIG_PARAMS", "true"},
        {"FSDP_CPU_RAM_EFFICIENT_LOADING", "true"},
        {"FSDP_SYNC_MODULE_STATES", "true"},
        {"FSDP_ACTIVATION_CHECKPOINTING", "false"},
        {"FSDP_IGNORED_MODULES", NULL},
        {"RANK", "0"},
        {"LOCAL_RANK", "0"},
        {"WORLD_SIZE", "1"},
        {"LOCAL_WORLD_SIZE", "1"},
        {"GROUP_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29500"},
        {"ACCELERATE_USE_CPU", NULL},
    };
    char path[4200];
    struct accel_cfg cfg;
    struct accel_diags d;
    struct accel_error err;
    struct accel_layout lay = layout(1, 0, 1, 0);
    struct accel_env env;
    FILE *f;

    snprintf(path, sizeof(path), "%s/accelerate-configs/test_configs__latest_fsdp.yaml",
             test_corpus_dir());
    f = fopen(path, "r");
    if (f == NULL)
        SKIP("the shared corpus is not there (set ACCEL_SHARED)");
    fclose(f);
    accel_diags_init(&d);
    ASSERT_OK(accel_cfg_load(&cfg, path, NULL, &d, &err));
    accel_diags_free(&d);
    build(&cfg, &lay, NULL, &env);
    ENV_HAS_ALL(&env, want);
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

TEST(deepspeed_encoding)
{
    static const struct kv want[] = {
        {"ACCELERATE_USE_DEEPSPEED", "true"},
        {"ACCELERATE_CONFIG_DS_FIELDS",
         "zero_stage,offload_optimizer_device,offload_param_device,gradient_accumulation_steps,"
         "gradient_clipping,zero3_init_flag,zero3_save_16bit_model,deepspeed_moe_layer_cls_names,"
         "mixed_precision"},
        {"ACCELERATE_DEEPSPEED_ZERO_STAGE", "3"},
        {"ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu"}, /* lowercased */
        {"ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "nvme"},
        {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "4"},
        {"ACCELERATE_GRADIENT_CLIPPING", "1.0"},
        {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "true"},
        {"ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", "false"},
        {"ACCELERATE_DEEPSPEED_MOE_LAYER_CLS_NAMES", "MixtralSparseMoeBlock"},
        {"ACCELERATE_DEEPSPEED_CONFIG_FILE", NULL},
        {"ACCELERATE_MIXED_PRECISION", "bf16"},
        {"OMP_NUM_THREADS", "1"},
        {"RANK", "1"},
        {"LOCAL_RANK", "1"},
        {"WORLD_SIZE", "2"},
        {"ACCELERATE_USE_FSDP", NULL},
        {"ACCELERATE_USE_CPU", NULL},
    };
    struct accel_cfg cfg;
    struct accel_layout lay = layout(1, 0, 2, 1);
    struct accel_env env;

    cfg_load(&cfg, "distributed_type: DEEPSPEED\n"
                   "num_processes: 2\n"
                   "mixed_precision: bf16\n"
                   "deepspeed_config:\n"
                   "  zero_stage: 3\n"
                   "  offload_optimizer_device: CPU\n"
                   "  offload_param_device: NVMe\n"
                   "  gradient_accumulation_steps: 4\n"
                   "  gradient_clipping: 1.0\n"
                   "  zero3_init_flag: true\n"
                   "  zero3_save_16bit_model: false\n"
                   "  deepspeed_moe_layer_cls_names: MixtralSparseMoeBlock\n");
    ASSERT_INT_EQ(cfg.launcher, ACCEL_LAUNCH_DEEPSPEED);
    build(&cfg, &lay, NULL, &env);
    ENV_HAS_ALL(&env, want);
    check_never(&env);
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* The JSON file alone; "auto" passes through; one process: no OMP. */
    {
        static const struct kv want2[] = {
            {"ACCELERATE_USE_DEEPSPEED", "true"},
            {"ACCELERATE_CONFIG_DS_FIELDS", "deepspeed_config_file,zero3_init_flag"},
            {"ACCELERATE_DEEPSPEED_CONFIG_FILE", "/etc/ds/zero2.json"},
            {"ACCELERATE_DEEPSPEED_ZERO3_INIT", "false"},
            {"ACCELERATE_DEEPSPEED_ZERO_STAGE", NULL},
            {"ACCELERATE_GRADIENT_ACCUMULATION_STEPS", NULL},
            {"ACCELERATE_GRADIENT_CLIPPING", NULL},
            {"ACCELERATE_MIXED_PRECISION", "no"},
            {"OMP_NUM_THREADS", NULL},
        };
        struct accel_layout one = layout(1, 0, 1, 0);

        cfg_load(&cfg, "distributed_type: DEEPSPEED\nnum_processes: 1\ndeepspeed_config:\n"
                       "  deepspeed_config_file: /etc/ds/zero2.json\n  zero3_init_flag: false\n");
        build(&cfg, &one, NULL, &env);
        ENV_HAS_ALL(&env, want2);
        accel_env_free(&env);
        accel_cfg_free(&cfg);
    }
    cfg_load(&cfg, "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                   "  gradient_clipping: auto\n  gradient_accumulation_steps: auto\n");
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "ACCELERATE_GRADIENT_CLIPPING", "auto");
    ENV_IS(&env, "ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "auto");
    ENV_IS(&env, "ACCELERATE_CONFIG_DS_FIELDS", "gradient_clipping,gradient_accumulation_steps");
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* use_cpu on the DeepSpeed path: accelrun follows the YAML. */
    cfg_load(&cfg, "distributed_type: DEEPSPEED\nnum_processes: 2\nuse_cpu: true\n");
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "ACCELERATE_USE_CPU", "true");
    ENV_IS(&env, "ACCELERATE_CONFIG_DS_FIELDS", "");
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

TEST(megatron_encoding)
{
    static const struct kv want[] = {
        {"ACCELERATE_USE_MEGATRON_LM", "true"},
        /* always */
        {"MEGATRON_LM_TP_DEGREE", "2"},
        {"MEGATRON_LM_PP_DEGREE", "2"},
        {"MEGATRON_LM_GRADIENT_CLIPPING", "0.5"},
        {"MEGATRON_LM_USE_CUSTOM_FSDP", "False"},
        /* set in the file */
        {"MEGATRON_LM_NUM_MICRO_BATCHES", "4"},
        {"MEGATRON_LM_SEQUENCE_PARALLELISM", "True"},
        {"MEGATRON_LM_RECOMPUTE_ACTIVATIONS", "True"},
        {"MEGATRON_LM_RECOMPUTE_GRANULARITY", "selective"},
        /* CLI defaults that are not None */
        {"MEGATRON_LM_NO_LOAD_OPTIM", "False"},
        {"MEGATRON_LM_NO_SAVE_OPTIM", "False"},
        {"MEGATRON_LM_EOD_MASK_LOSS", "False"},
        /* None: absent */
        {"MEGATRON_LM_USE_DISTRIBUTED_OPTIMIZER", NULL},
        {"MEGATRON_LM_ATTENTION_BACKEND", NULL},
        {"MEGATRON_LM_RECOMPUTE_NUM_LAYERS", NULL},
        {"ACCELERATE_USE_FSDP", NULL},
    };
    struct accel_cfg cfg;
    struct accel_layout lay = layout(1, 0, 4, 2);
    struct accel_env env;

    cfg_load(&cfg, "distributed_type: MEGATRON_LM\n"
                   "num_processes: 4\n"
                   "megatron_lm_config:\n"
                   "  megatron_lm_tp_degree: 2\n"
                   "  megatron_lm_pp_degree: 2\n"
                   "  megatron_lm_num_micro_batches: 4\n"
                   "  megatron_lm_sequence_parallelism: true\n"
                   "  megatron_lm_gradient_clipping: 0.5\n"
                   "  megatron_lm_recompute_activations: true\n"
                   "  megatron_lm_recompute_granularity: selective\n");
    build(&cfg, &lay, NULL, &env);
    ENV_HAS_ALL(&env, want);
    ENV_IS(&env, "RANK", "2");
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    cfg_load(&cfg, "distributed_type: MEGATRON_LM\nnum_processes: 4\n");
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "MEGATRON_LM_TP_DEGREE", "1");
    ENV_IS(&env, "MEGATRON_LM_PP_DEGREE", "1");
    ENV_IS(&env, "MEGATRON_LM_GRADIENT_CLIPPING", "1.0");
    ENV_IS(&env, "MEGATRON_LM_NUM_MICRO_BATCHES", NULL);
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* Not for other types. */
    cfg_load(&cfg, GPU_ANY "num_processes: 4\nmegatron_lm_config:\n  megatron_lm_tp_degree: 2\n");
    build(&cfg, &lay, NULL, &env);
    only_these_with_prefix(&env, "MEGATRON_LM_", NULL, 0);
    ENV_IS(&env, "ACCELERATE_USE_MEGATRON_LM", NULL);
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

TEST(fp8_encoding)
{
    static const struct kv want[] = {
        {"ACCELERATE_MIXED_PRECISION", "fp8"},
        {"ACCELERATE_FP8_BACKEND", "TE"},
        {"ACCELERATE_FP8_FORMAT", "E4M3"},
        {"ACCELERATE_FP8_MARGIN", "1"},
        {"ACCELERATE_FP8_INTERVAL", "1"},
        {"ACCELERATE_FP8_AMAX_HISTORY_LEN", "16"},
        {"ACCELERATE_FP8_AMAX_COMPUTE_ALGO", "max"},
        {"ACCELERATE_FP8_OVERRIDE_FPROP", "False"},
        {"ACCELERATE_FP8_OVERRIDE_DGRAD", "True"},
        {"ACCELERATE_FP8_OVERRIDE_WGRAD", "False"},
        {"ACCELERATE_FP8_USE_AUTOCAST_DURING_EVAL", "True"},
        {"ACCELERATE_FP8_OPT_LEVEL", "O2"},
        {"ACCELERATE_FP8_ENABLE_FSDP_FLOAT8_ALL_GATHER", "1"},
        {"ACCELERATE_FP8_PAD_INNER_DIM", "1"},
        {"ACCELERATE_FP8_OVERRIDE_LINEAR_PRECISION", NULL},
    };
    struct accel_cfg cfg;
    struct accel_layout lay = layout(1, 0, 2, 0);
    struct accel_env env;

    cfg_load(&cfg, GPU_ANY "num_processes: 2\n"
                           "mixed_precision: FP8\n"
                           "fp8_config:\n"
                           "  backend: TE\n"
                           "  fp8_format: E4M3\n"
                           "  margin: 1\n"
                           "  amax_history_len: 16\n"
                           "  amax_compute_algo: max\n"
                           "  override_linear_precision: [false, true, false]\n"
                           "  use_autocast_during_eval: true\n");
    build(&cfg, &lay, NULL, &env);
    ENV_HAS_ALL(&env, want);
    only_these_with_prefix(&env, "ACCELERATE_FP8_", want, N_OF(want));
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* The wizard's names are passed on under their own names. */
    cfg_load(&cfg, GPU_ANY "num_processes: 2\nmixed_precision: fp8\nfp8_config:\n  backend: AO\n"
                           "  amax_history_length: 64\n  fp8_pad_inner_dim: false\n");
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "ACCELERATE_FP8_BACKEND", "AO");
    ENV_IS(&env, "ACCELERATE_FP8_AMAX_HISTORY_LENGTH", "64");
    ENV_IS(&env, "ACCELERATE_FP8_AMAX_HISTORY_LEN", "1024");
    ENV_IS(&env, "ACCELERATE_FP8_PAD_INNER_DIM", "False");
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* Without fp8, no FP8 variables even with an fp8_config. */
    cfg_load(&cfg, GPU_ANY "num_processes: 2\nmixed_precision: bf16\nfp8_config:\n  backend: TE\n");
    build(&cfg, &lay, NULL, &env);
    only_these_with_prefix(&env, "ACCELERATE_FP8_", NULL, 0);
    ENV_IS(&env, "ACCELERATE_MIXED_PRECISION", "bf16");
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* fp8 on the simple launcher too. */
    cfg_load(&cfg, "distributed_type: 'NO'\nmixed_precision: fp8\nfp8_config:\n  backend: MSAMP\n"
                   "  opt_level: O1\n");
    lay = layout(1, 0, 1, 0);
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "ACCELERATE_FP8_BACKEND", "MSAMP");
    ENV_IS(&env, "ACCELERATE_FP8_OPT_LEVEL", "O1");
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

TEST(parallelism_encoding)
{
    static const struct kv want[] = {
        {"ACCELERATE_USE_PARALLELISM_CONFIG", "true"},
        {"PARALLELISM_CONFIG_DP_REPLICATE_SIZE", "1"},
        {"PARALLELISM_CONFIG_DP_SHARD_SIZE", "2"},
        {"PARALLELISM_CONFIG_TP_SIZE", "2"},
        {"PARALLELISM_CONFIG_CP_SIZE", "1"},
        {"PARALLELISM_CONFIG_CP_BACKEND", "torch"},
        {"PARALLELISM_CONFIG_SP_SIZE", "1"},
        {"PARALLELISM_CONFIG_SP_BACKEND", "deepspeed"},
        /* only with cp > 1 / sp > 1 */
        {"PARALLELISM_CONFIG_CP_COMM_STRATEGY", NULL},
        {"PARALLELISM_CONFIG_SP_SEQ_LENGTH", NULL},
        {"PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE", NULL},
        {"PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION", NULL},
    };
    static const struct kv want_cp_sp[] = {
        {"ACCELERATE_USE_PARALLELISM_CONFIG", "true"},
        {"PARALLELISM_CONFIG_CP_SIZE", "2"},
        {"PARALLELISM_CONFIG_CP_COMM_STRATEGY", "alltoall"},
        {"PARALLELISM_CONFIG_SP_SIZE", "2"},
        {"PARALLELISM_CONFIG_SP_SEQ_LENGTH", "None"},
        {"PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE", "True"},
        {"PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION", "sdpa"},
    };
    struct accel_cfg cfg;
    struct accel_layout lay = layout(1, 0, 4, 0);
    struct accel_env env;

    cfg_load(&cfg, "distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                   "parallelism_config:\n  parallelism_config_dp_shard_size: 2\n"
                   "  parallelism_config_tp_size: 2\n");
    build(&cfg, &lay, NULL, &env);
    ENV_HAS_ALL(&env, want);
    only_these_with_prefix(&env, "PARALLELISM_CONFIG_", want, N_OF(want));
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    cfg_load(&cfg, "distributed_type: FSDP\nnum_processes: 4\nfsdp_config:\n  fsdp_version: 2\n"
                   "parallelism_config:\n  parallelism_config_cp_size: 2\n"
                   "  parallelism_config_cp_comm_strategy: alltoall\n"
                   "  parallelism_config_sp_size: 2\n");
    build(&cfg, &lay, NULL, &env);
    ENV_HAS_ALL(&env, want_cp_sp);
    accel_env_free(&env);
    accel_cfg_free(&cfg);

    /* Absent or empty section: nothing. */
    cfg_load(&cfg, "distributed_type: FSDP\nnum_processes: 4\nparallelism_config: {}\n");
    build(&cfg, &lay, NULL, &env);
    ENV_IS(&env, "ACCELERATE_USE_PARALLELISM_CONFIG", NULL);
    only_these_with_prefix(&env, "PARALLELISM_CONFIG_", NULL, 0);
    accel_env_free(&env);
    accel_cfg_free(&cfg);
}

TEST(dynamo_encoding)
{
    static const struct {
        const char *yaml;
        const char *backend, *mode, *fullgraph, *dynamic, *regional;
    } rows[] = {
        {GPU_ANY "num_processes: 2\n", "NO", "default", "False", "False", "False"},
        {GPU_ANY "num_processes: 2\ndynamo_config:\n  dynamo_backend: inductor\n"
                 "  dynamo_mode: max-autotune\n  dynamo_use_fullgraph: true\n"
                 "  dynamo_use_dynamic: true\n  dynamo_use_regional_compilation: true\n",
         "INDUCTOR", "max-autotune", "True", "True", "True"},
        {GPU_ANY "num_processes: 2\ndynamo_config:\n  backend: aot_eager\n  use_dynamic: false\n",
         "AOT_EAGER", "default", "False", "False", "False"},
        /* legacy top-level key */
        {GPU_ANY "num_processes: 2\ndynamo_backend: eager\n", "EAGER", "default", "False", "False",
         "False"},
        {GPU_ANY "num_processes: 2\ndynamo_backend: 'NO'\n", "NO", "default", "False", "False",
         "False"},
        /* the simple launcher exports the same */
        {"distributed_type: 'NO'\ndynamo_config:\n  dynamo_backend: CUDAGRAPHS\n", "CUDAGRAPHS",
         "default", "False", "False", "False"},
    };

    for (size_t i = 0; i < N_OF(rows); i++) {
        struct accel_cfg cfg;
        struct accel_layout lay;
        struct accel_env env;

        cfg_load(&cfg, rows[i].yaml);
        lay = cfg.launcher == ACCEL_LAUNCH_SIMPLE ? layout(1, 0, 1, 0) : layout(1, 0, 2, 1);
        build(&cfg, &lay, NULL, &env);
        ENV_IS(&env, "ACCELERATE_DYNAMO_BACKEND", rows[i].backend);
        ENV_IS(&env, "ACCELERATE_DYNAMO_MODE", rows[i].mode);
        ENV_IS(&env, "ACCELERATE_DYNAMO_USE_FULLGRAPH", rows[i].fullgraph);
        ENV_IS(&env, "ACCELERATE_DYNAMO_USE_DYNAMIC", rows[i].dynamic);
        ENV_IS(&env, "ACCELERATE_DYNAMO_USE_REGIONAL_COMPILATION", rows[i].regional);
        accel_env_free(&env);
        accel_cfg_free(&cfg);
    }
}

TEST(mixed_precision_values)
{
    static const struct {
        const char *yaml;
        const char *want;
    } rows[] = {
        {GPU_ANY "num_processes: 2\n", "no"},
        {GPU_ANY "num_processes: 2\nmixed_precision: 'no'\n", "no"},
        {GPU_ANY "num_processes: 2\nmixed_precision: BF16\n", "bf16"},
        {GPU_ANY "num_processes: 2\nmixed_precision: Fp16\n", "fp16"},
        {GPU_ANY "num_processes: 2\nfp16: true\n", "fp16"},
        {GPU_ANY "num_processes: 2\nmixed_precision: ~\n", "no"},
    };

    for (size_t i = 0; i < N_OF(rows); i++) {
        struct accel_cfg cfg;
        struct accel_layout lay = layout(1, 0, 2, 0);
        struct accel_env env;

        cfg_load(&cfg, rows[i].yaml);
        build(&cfg, &lay, NULL, &env);
        ENV_IS(&env, "ACCELERATE_MIXED_PRECISION", rows[i].want);
        accel_env_free(&env);
        accel_cfg_free(&cfg);
    }
}

/* ---------------------------------------------------------------- plan, site */

TEST(plan_placement)
{
    static const struct accel_rank_plan ranks[3] = {
        {"0", "mlx5_0:1", "ib0"},
        {"1", "mlx5_1:1", ""},
        {"", "", "eth0"},
    };
    static const struct {
        int local;
        const char *order, *cvd, *hca, *ifname;
    } rows[] = {
        {0, "PCI_BUS_ID", "0", "mlx5_0:1", "ib0"},
        {1, "PCI_BUS_ID", "1", "mlx5_1:1", NULL},
        {2, NULL, NULL, NULL, "eth0"},
        {3, NULL, NULL, NULL, NULL},  /* beyond the plan */
        {-1, NULL, NULL, NULL, NULL}, /* node level */
    };
    struct accel_plan plan = {3, ranks};
    struct accel_env_opts opts = {&plan, NULL};
    struct accel_cfg cfg;

    cfg_load(&cfg, GPU_ANY "num_processes: 4\n");
    for (size_t i = 0; i < N_OF(rows); i++) {
        struct accel_layout lay = layout(1, 0, 4, rows[i].local);
        struct accel_env env;

        build(&cfg, &lay, &opts, &env);
        ENV_IS(&env, "CUDA_DEVICE_ORDER", rows[i].order);
        ENV_IS(&env, "CUDA_VISIBLE_DEVICES", rows[i].cvd);
        ENV_IS(&env, "NCCL_IB_HCA", rows[i].hca);
        ENV_IS(&env, "NCCL_SOCKET_IFNAME", rows[i].ifname);
        check_sorted(&env);
        accel_env_free(&env);
    }
    accel_cfg_free(&cfg);

    /* The plan's device replaces the config's gpu_ids for its rank. */
    cfg_load(&cfg, GPU_ANY "num_processes: 2\ngpu_ids: '4,5'\n");
    {
        struct accel_layout lay = layout(1, 0, 2, 1);
        struct accel_env env;
        build(&cfg, &lay, &opts, &env);
        ENV_IS(&env, "CUDA_VISIBLE_DEVICES", "1");
        accel_env_free(&env);
        build(&cfg, &lay, NULL, &env);
        ENV_IS(&env, "CUDA_VISIBLE_DEVICES", "4,5");
        ENV_IS(&env, "CUDA_DEVICE_ORDER", NULL);
        accel_env_free(&env);
    }
    accel_cfg_free(&cfg);
}

TEST(site_nccl_vars)
{
    static const char site_text[] = "accelrun:\n"
                                    "  env:\n"
                                    "    NCCL_DEBUG: INFO\n"
                                    "    NCCL_IB_DISABLE: false\n"
                                    "    NCCL_NET_GDR_LEVEL: 2\n";
    struct accel_site site;
    struct accel_diags d;
    struct accel_error err;
    struct accel_env_opts opts = {NULL, &site};
    struct accel_cfg cfg;
    struct accel_env env;

    accel_diags_init(&d);
    ASSERT_OK(
        accel_site_load_buffer(&site, "site.yaml", site_text, strlen(site_text), 0, &d, &err));
    accel_diags_free(&d);

    /* every launcher and the node-level set get them */
    {
        static const char *const yamls[] = {GPU_ANY "num_processes: 2\n",
                                            "distributed_type: MULTI_CPU\nuse_cpu: true\n",
                                            "distributed_type: DEEPSPEED\nnum_processes: 2\n"};
        for (size_t i = 0; i < N_OF(yamls); i++) {
            for (int local = -1; local < 2; local++) {
                struct accel_layout lay = layout(1, 0, 2, local);
                cfg_load(&cfg, yamls[i]);
                build(&cfg, &lay, &opts, &env);
                ENV_IS(&env, "NCCL_DEBUG", "INFO");
                ENV_IS(&env, "NCCL_IB_DISABLE", "0");
                ENV_IS(&env, "NCCL_NET_GDR_LEVEL", "2");
                check_sorted(&env);
                accel_env_free(&env);
                accel_cfg_free(&cfg);
            }
        }
    }
    accel_site_free(&site);
}

/* ---------------------------------------------------------------- refused */

TEST(unsupported_and_caps)
{
    struct accel_cfg cfg;
    struct accel_layout lay = layout(1, 0, 8, 0);
    struct accel_env env = {NULL, 0};
    struct accel_error err;

    cfg_load(&cfg, "distributed_type: XLA\n");
    ASSERT_INT_EQ(accel_env_build(&cfg, &lay, NULL, &env, &err), ACCEL_EUNSUPPORTED);
    ASSERT_INT_EQ(err.code, ACCEL_EUNSUPPORTED);
    ASSERT_CONTAINS(err.msg, "XLA config: not launched by accelrun");
    ASSERT_CONTAINS(err.msg, "torch_xla");
    ASSERT(env.v == NULL && env.n == 0);
    accel_cfg_free(&cfg);

    cfg_load(&cfg, "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: DATA_PARALLEL\n"
                   "ec2_instance_type: ml.p3.2xlarge\niam_role_name: r\n");
    ASSERT_INT_EQ(accel_env_build(&cfg, &lay, NULL, &env, &err), ACCEL_EUNSUPPORTED);
    ASSERT_CONTAINS(err.msg, "SageMaker config: not launched by accelrun");
    ASSERT(env.v == NULL && env.n == 0);
    accel_cfg_free(&cfg);

    /* A value past ACCEL_MAX_ENV_VALUE: the no-op fp8 key takes anything,
     * and accelerate passes it on as str(). */
    {
        size_t item = 40000;
        char *yaml = malloc(2 * item + 256);
        size_t n;

        ASSERT(yaml != NULL);
        n = (size_t)sprintf(yaml, GPU_ANY "num_processes: 8\nmixed_precision: fp8\nfp8_config:\n"
                                          "  backend: TE\n  amax_history_length: [");
        memset(yaml + n, 'a', item);
        n += item;
        yaml[n++] = ',';
        memset(yaml + n, 'b', item);
        n += item;
        strcpy(yaml + n, "]\n");
        cfg_load(&cfg, yaml);
        free(yaml);
        accel_error_clear(&err);
        ASSERT_INT_EQ(accel_env_build(&cfg, &lay, NULL, &env, &err), ACCEL_ETOOBIG);
        ASSERT_INT_EQ(err.code, ACCEL_ETOOBIG);
        ASSERT(env.v == NULL && env.n == 0);
        accel_cfg_free(&cfg);
    }

    /* accel_env_free on an empty or freed env */
    accel_env_free(&env);
    accel_env_free(&env);
    accel_env_free(NULL);
    ASSERT(accel_env_get(&env, "RANK") == NULL);
}

/* ---------------------------------------------------------------- determinism */

static void same_env(const struct accel_env *a, const struct accel_env *b)
{
    if (a->n != b->n) {
        dump_env(a);
        dump_env(b);
        test_fail(__FILE__, __LINE__, "%zu variables, then %zu", a->n, b->n);
    }
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0)
            test_fail(__FILE__, __LINE__, "entry %zu: %s, then %s", i, a->v[i], b->v[i]);
}

TEST(determinism)
{
    /* The same keys in two orders: the same bytes out. */
    static const char one[] = "distributed_type: FSDP\n"
                              "num_processes: 8\n"
                              "num_machines: 2\n"
                              "main_process_ip: head\n"
                              "mixed_precision: fp8\n"
                              "debug: true\n"
                              "fsdp_config:\n"
                              "  fsdp_version: 2\n"
                              "  fsdp_offload_params: true\n"
                              "  fsdp_state_dict_type: FULL_STATE_DICT\n"
                              "fp8_config:\n"
                              "  backend: TE\n"
                              "  margin: 2\n"
                              "dynamo_config:\n"
                              "  dynamo_backend: INDUCTOR\n"
                              "parallelism_config:\n"
                              "  parallelism_config_tp_size: 2\n";
    static const char two[] = "parallelism_config:\n"
                              "  parallelism_config_tp_size: 2\n"
                              "dynamo_config:\n"
                              "  dynamo_backend: INDUCTOR\n"
                              "fp8_config:\n"
                              "  margin: 2\n"
                              "  backend: TE\n"
                              "fsdp_config:\n"
                              "  fsdp_state_dict_type: FULL_STATE_DICT\n"
                              "  fsdp_offload_params: true\n"
                              "  fsdp_version: 2\n"
                              "debug: true\n"
                              "mixed_precision: fp8\n"
                              "main_process_ip: head\n"
                              "num_machines: 2\n"
                              "num_processes: 8\n"
                              "distributed_type: FSDP\n";
    static const struct accel_rank_plan ranks[4] = {{"0", "mlx5_0", "ib0"},
                                                    {"1", "mlx5_1", "ib1"},
                                                    {"2", "mlx5_2", "ib2"},
                                                    {"3", "mlx5_3", "ib3"}};
    struct accel_plan plan = {4, ranks};
    struct accel_env_opts opts = {&plan, NULL};
    struct accel_cfg c1, c2;

    cfg_load(&c1, one);
    cfg_load(&c2, two);
    for (int local = -1; local < 4; local++) {
        struct accel_layout lay = layout(2, 1, 4, local);
        struct accel_env a, b, c;

        build(&c1, &lay, &opts, &a);
        build(&c1, &lay, &opts, &b);
        build(&c2, &lay, &opts, &c);
        check_sorted(&a);
        same_env(&a, &b);
        same_env(&a, &c);
        accel_env_free(&a);
        accel_env_free(&b);
        accel_env_free(&c);
    }
    accel_cfg_free(&c1);
    accel_cfg_free(&c2);
}

/* ---------------------------------------------------------------- torture */

static void torture_env(const char *what, const struct accel_cfg *cfg,
                        const struct accel_layout *lay, const struct accel_env_opts *opts)
{
    struct accel_env env;
    struct accel_error err;
    unsigned long total, enomem = 0;
    long live = test_alloc_live();
    size_t nvars;

    test_alloc_fail_at(0);
    ASSERT_OK(accel_env_build(cfg, lay, opts, &env, &err));
    total = test_alloc_count();
    nvars = env.n;
    accel_env_free(&env);
    ASSERT_INT_EQ(test_alloc_live(), live);
    for (unsigned long n = 1; n <= total; n++) {
        enum accel_err rc;

        test_alloc_fail_at(n);
        accel_error_clear(&err);
        rc = accel_env_build(cfg, lay, opts, &env, &err);
        test_alloc_fail_at(0);
        if (rc == ACCEL_ENOMEM) {
            enomem++;
            ASSERT_INT_EQ(err.code, ACCEL_ENOMEM);
            ASSERT(env.v == NULL && env.n == 0);
        } else if (rc == ACCEL_OK) {
            if (env.n != nvars)
                test_fail(__FILE__, __LINE__,
                          "%s: allocation %lu of %lu failed: ACCEL_OK with %zu "
                          "of %zu variables",
                          what, n, total, env.n, nvars);
        } else {
            test_fail(__FILE__, __LINE__, "%s: allocation %lu of %lu failed: got %s (%s)", what, n,
                      total, accel_errname(rc), err.msg);
        }
        accel_env_free(&env);
        if (test_alloc_live() != live)
            test_fail(__FILE__, __LINE__, "%s: allocation %lu of %lu failed: %ld blocks leaked",
                      what, n, total, test_alloc_live() - live);
    }
    test_note("%s: %lu allocations, each failed once: %lu ENOMEM", what, total, enomem);
    ASSERT_INT_EQ(enomem, total);
}

TEST(alloc_failure_torture_env)
{
    static const char site_text[] =
        "accelrun:\n  env:\n    NCCL_DEBUG: WARN\n    NCCL_IB_DISABLE: true\n";
    static const struct accel_rank_plan ranks[2] = {{"0", "mlx5_0", "ib0"}, {"1", "mlx5_1", "ib1"}};
    struct accel_plan plan = {2, ranks};
    struct accel_site site;
    struct accel_diags d;
    struct accel_error err;
    struct accel_env_opts opts = {&plan, &site};
    struct accel_cfg cfg;
    struct accel_layout lay = layout(2, 1, 2, 1);
    struct accel_layout node = layout(2, 1, 2, -1);
    char path[4200];

    test_alloc_install();
    test_alloc_fail_at(0);
    accel_diags_init(&d);
    ASSERT_OK(
        accel_site_load_buffer(&site, "site.yaml", site_text, strlen(site_text), 0, &d, &err));

    snprintf(path, sizeof(path), "%s/accelerate-configs/templates__fsdp.yaml", test_corpus_dir());
    if (accel_cfg_load(&cfg, path, NULL, &d, &err) == ACCEL_OK) {
        struct accel_layout one = layout(1, 0, 2, 1);
        torture_env("templates__fsdp", &cfg, &one, &opts);
        accel_cfg_free(&cfg);
    } else {
        test_note("no shared corpus: crafted configs only");
    }

    cfg_load(&cfg, "distributed_type: FSDP\nnum_processes: 4\nnum_machines: 2\nmain_process_ip: h\n"
                   "mixed_precision: fp8\ndebug: true\ngpu_ids: '0,1'\nenable_cpu_affinity: true\n"
                   "fsdp_config:\n  fsdp_version: 2\n  transformer_layer_cls_to_wrap: Block\n"
                   "fp8_config:\n  backend: TE\n  override_linear_precision: [true, false, true]\n"
                   "parallelism_config:\n  parallelism_config_cp_size: 2\n"
                   "  parallelism_config_sp_size: 2\n");
    torture_env("fsdp2 fp8 parallelism", &cfg, &lay, &opts);
    torture_env("fsdp2 node level", &cfg, &node, &opts);
    accel_cfg_free(&cfg);

    cfg_load(&cfg, "distributed_type: DEEPSPEED\nnum_processes: 4\nnum_machines: 2\n"
                   "main_process_ip: h\nmixed_precision: bf16\ndeepspeed_config:\n  zero_stage: 3\n"
                   "  offload_param_device: cpu\n  gradient_clipping: 1.0\n");
    torture_env("deepspeed", &cfg, &lay, &opts);
    accel_cfg_free(&cfg);

    cfg_load(&cfg, "distributed_type: MEGATRON_LM\nnum_processes: 4\nnum_machines: 2\n"
                   "main_process_ip: h\nmegatron_lm_config:\n  megatron_lm_tp_degree: 2\n");
    torture_env("megatron", &cfg, &lay, &opts);
    accel_cfg_free(&cfg);

    cfg_load(&cfg,
             "distributed_type: MULTI_CPU\nuse_cpu: true\nnum_processes: 4\n"
             "num_machines: 2\nmain_process_ip: h\ndynamo_config:\n  dynamo_backend: eager\n");
    lay.cpus_per_proc = 4;
    torture_env("multi_cpu", &cfg, &lay, &opts);
    accel_cfg_free(&cfg);

    accel_site_free(&site);
    accel_diags_free(&d);
    accel_alloc_set(NULL);
}

TEST_LIST(T(layout_ranks), T(layout_errors), T(layout_fits), T(layout_job_wins),
          T(master_precedence), T(node_level_set), T(simple_launcher), T(torchrun_path),
          T(device_visibility), T(never_agent_store), T(fsdp1_encoding), T(fsdp2_encoding),
          T(fsdp_worked_example), T(deepspeed_encoding), T(megatron_encoding), T(fp8_encoding),
          T(parallelism_encoding), T(dynamo_encoding), T(mixed_precision_values), T(plan_placement),
          T(site_nccl_vars), T(unsupported_and_caps), T(determinism), T(alloc_failure_torture_env))
