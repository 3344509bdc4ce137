/*
 * test_golden.c: accel_env_build against the environments the real
 * `accelerate launch` gave real child processes (the JSON files in tests/golden/env,
 * made by `make oracle`; see tests/golden/README.md).
 *
 * For every golden worker the test builds the same layout and compares the
 * variables.  Differences are allowed only where docs/differences.md names
 * them, and each is listed in the tables below with its reason and printed
 * as a TAP note when it applies, so nothing differs silently.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "accel/env.h"
#include "accel/fsutil.h"
#include "test.h"

#define GOLDEN_DIR "tests/golden/env"
/* How many goldens `make oracle` wrote (tests/golden/README.md); a file
 * lost or added without this count changing fails golden_count. */
#define GOLDEN_CASES 73
#define SHARED_CORPUS "../shared/corpus/"

/* Variables accelrun never sets, with the reason. */
static const struct {
    const char *name;
    const char *why;
} never[] = {
    {"TORCHELASTIC_USE_AGENT_STORE", "no torchrun agent hosts a store; True would hang env://"},
    {"TORCHELASTIC_ERROR_FILE", "a temp file of the torchrun agent"},
    {"PYTHONPATH", "DeepSpeed path: accelerate appends its cwd; accelrun leaves PYTHONPATH alone"},
    {"PYTORCH_NVML_BASED_CUDA_CHECK", "set by importing deepspeed in the launcher process"},
};

/* Variables accelrun adds on the simple launcher (NO, MULTI_CPU) when the
 * world has more than one process: what mpirun would otherwise provide. */
static const char *const simple_extras[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"};

/* Named per-case differences (DESIGN decision 1): accelrun follows the YAML. */
static const struct {
    const char *case_name;
    const char *var;
    const char *accelrun; /* NULL = absent */
    const char *why;
} follows_yaml[] = {
    {"multi_gpu__cpu_affinity_dynamo", "ACCELERATE_CPU_AFFINITY", "1",
     "enable_cpu_affinity: true in the YAML (accelerate launch only honours the CLI flag)"},
    {"fsdp1__wizard_reshard_strategy", "FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP",
     "FSDP1 strategy written as fsdp_reshard_after_forward (accelerate exports FULL_SHARD)"},
    {"multi_gpu__use_cpu_one_proc", "ACCELERATE_USE_CPU", "true",
     "use_cpu: true on the torchrun path (accelerate exports nothing, so the job loses the CPU "
     "flag that accelerate >= 1.13 requires)"},
    /* gpu_ids: accelerate names the variable after the devices of the host
     * that runs the launcher (this oracle host has none, so CUDA's); accelrun
     * names it after the config's device type. */
    {"multi_npu__2proc", "CUDA_VISIBLE_DEVICES", NULL, "gpu_ids of an NPU config"},
    {"multi_npu__2proc", "ASCEND_RT_VISIBLE_DEVICES", "0,1", "gpu_ids of an NPU config"},
    {"multi_xpu__2proc", "CUDA_VISIBLE_DEVICES", NULL, "gpu_ids of an XPU config"},
    {"multi_xpu__2proc", "ZE_AFFINITY_MASK", "0,1", "gpu_ids of an XPU config"},
};

/* Cases where upstream and accelrun deliberately disagree on running at all. */
static const struct {
    const char *case_name;
    const char *why;
} refused_by_accelrun[] =
    {
        {"test_configs__0_34_0_fp8", "override_linear_precision is a string: accelerate exports "
                                     "'(', 'f', 'a' and the run crashes "
                                     "in Accelerator() (issue #3489); accelrun check rejects it"},
        {"deepspeed__config_file_mixed_precision",
         "mixed_precision next to deepspeed_config_file: accelerate launches, then DeepSpeedPlugin "
         "raises ValueError in Accelerator(); accelrun check rejects it before the queue"},
},
  accepted_by_accelrun[] =
      {
          {"multi_gpu__no_num_processes", "num_processes absent: accelrun takes it from the job"},
          {"yaml11__bare_no_without_num_processes", "unquoted NO without num_processes: accelerate "
                                                    "leaves num_processes -1; accelrun warns and "
                                                    "runs one process, as for 'NO'"},
},
  skipped_cases[] = {
      {"deepspeed__2x2_pdsh",
       "multi-node DeepSpeed through pdsh: accelrun replaces the ssh fan-out by the scheduler and "
       "gives the 'standard' launcher's environment (compared in deepspeed__2x2_standard)"},
};

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char *lookup_why(const char *case_name, size_t n, const void *table, size_t stride)
{
    for (size_t i = 0; i < n; i++) {
        const char *const *row = (const char *const *)((const char *)table + i * stride);
        if (strcmp(row[0], case_name) == 0)
            return row[1];
    }
    return NULL;
}

static cJSON *load_json(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    struct accel_error err;
    cJSON *j;

    if (accel_read_file(path, 8u << 20, &data, &len, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "couldn't read %s: %s", path, err.msg);
    j = cJSON_ParseWithLength(data, len);
    free(data);
    if (j == NULL)
        test_fail(__FILE__, __LINE__, "%s is not JSON", path);
    return j;
}

static int num(const cJSON *o, const char *k, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valueint : dflt;
}

static bool is_never(const char *name)
{
    for (size_t i = 0; i < LEN(never); i++)
        if (strcmp(never[i].name, name) == 0)
            return true;
    return false;
}

static bool is_simple_extra(const char *name)
{
    for (size_t i = 0; i < LEN(simple_extras); i++)
        if (strcmp(simple_extras[i], name) == 0)
            return true;
    return false;
}

static const char *yaml_rule(const char *case_name, const char *var, const char **want)
{
    for (size_t i = 0; i < LEN(follows_yaml); i++)
        if (strcmp(follows_yaml[i].case_name, case_name) == 0 &&
            strcmp(follows_yaml[i].var, var) == 0) {
            *want = follows_yaml[i].accelrun;
            return follows_yaml[i].why;
        }
    return NULL;
}

/* Compares one worker; returns the number of mismatches (each printed). */
static int compare_worker(const char *case_name, const struct accel_cfg *cfg, const cJSON *g,
                          const cJSON *worker)
{
    const cJSON *genv = cJSON_GetObjectItemCaseSensitive(worker, "env");
    int nnodes = num(g, "nnodes", 1), node_rank = num(worker, "node_rank", 0);
    int local = num(worker, "local_rank", 0), cores = num(g, "physical_cores", 1);
    long procs = cfg->num_processes > 0 ? cfg->num_processes : num(g, "nproc_per_node", 1) * nnodes;
    long per_node = procs / (nnodes > 0 ? nnodes : 1);
    const cJSON *addr = cJSON_GetObjectItemCaseSensitive(genv, "MASTER_ADDR");
    const cJSON *port = cJSON_GetObjectItemCaseSensitive(genv, "MASTER_PORT");
    struct accel_layout lay = {(unsigned)nnodes,
                               (unsigned)node_rank,
                               (unsigned)(per_node > 0 ? per_node : 1),
                               local,
                               -1,
                               0,
                               NULL,
                               0,
                               0};
    struct accel_env env = {NULL, 0};
    struct accel_error err;
    int bad = 0;
    const cJSON *e;

    if (cfg->launcher != ACCEL_LAUNCH_SIMPLE)
        lay.nproc_per_node = (unsigned)num(g, "nproc_per_node", 1);
    lay.master_addr = cJSON_IsString(addr) ? addr->valuestring : NULL;
    lay.master_port = cJSON_IsString(port) ? (unsigned)atoi(port->valuestring) : 0;
    /* accelerate: int(physical_cores / local processes) threads for CPU jobs */
    lay.cpus_per_proc = (unsigned)(cores / (per_node > 0 ? per_node : 1));
    if (accel_env_build(cfg, &lay, NULL, &env, &err) != ACCEL_OK) {
        test_note("%s: env_build failed: %s", case_name, err.msg);
        return 1;
    }
    cJSON_ArrayForEach(e, genv)
    {
        const char *ours = accel_env_get(&env, e->string);
        const char *want = e->valuestring, *why;
        if (is_never(e->string)) {
            if (ours != NULL) {
                test_note("%s: %s must not be set, accelrun set '%s'", case_name, e->string, ours);
                bad++;
            }
            continue;
        }
        why = yaml_rule(case_name, e->string, &want);
        if (why != NULL)
            test_note("%s: %s: accelerate '%s', accelrun '%s' (%s)", case_name, e->string,
                      e->valuestring, want ? want : "(unset)", why);
        if ((want == NULL) != (ours == NULL) || (want && strcmp(want, ours) != 0)) {
            test_note("%s [%d/%d] %s: accelerate '%s', accelrun '%s'", case_name, node_rank, local,
                      e->string, want ? want : "(unset)", ours ? ours : "(unset)");
            bad++;
        }
    }
    for (size_t i = 0; i < env.n; i++) {
        char name[ACCEL_MAX_ENV_NAME + 1];
        const char *eq = strchr(env.v[i], '='), *want = NULL;
        snprintf(name, sizeof(name), "%.*s", (int)(eq - env.v[i]), env.v[i]);
        if (cJSON_GetObjectItemCaseSensitive(genv, name) != NULL)
            continue;
        if (cfg->launcher == ACCEL_LAUNCH_SIMPLE && is_simple_extra(name))
            continue;
        if (yaml_rule(case_name, name, &want) != NULL && want && strcmp(want, eq + 1) == 0) {
            test_note("%s: %s=%s only in accelrun (follows the YAML)", case_name, name, want);
            continue;
        }
        test_note("%s [%d/%d] %s='%s' set by accelrun only", case_name, node_rank, local, name,
                  eq + 1);
        bad++;
    }
    accel_env_free(&env);
    return bad;
}

static int run_case(const char *path, int *compared)
{
    cJSON *g = load_json(path);
    const char *case_name = cJSON_GetObjectItemCaseSensitive(g, "case")->valuestring;
    const char *config = cJSON_GetObjectItemCaseSensitive(g, "config")->valuestring;
    char shared[2048];
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(g, "result");
    const cJSON *workers = cJSON_GetObjectItemCaseSensitive(g, "workers"), *w;
    bool upstream_ok = strcmp(result->valuestring, "ok") == 0;
    struct accel_diags d;
    struct accel_cfg cfg;
    struct accel_error err;
    const char *why;
    enum accel_err rc;
    int bad = 0;
    size_t nworkers = (size_t)cJSON_GetArraySize(workers);

    why = lookup_why(case_name, LEN(skipped_cases), skipped_cases, sizeof(skipped_cases[0]));
    if (why != NULL) {
        test_note("%s: not compared: %s", case_name, why);
        cJSON_Delete(g);
        return 0;
    }
    if (strncmp(config, SHARED_CORPUS, strlen(SHARED_CORPUS)) == 0) { /* ACCEL_SHARED */
        snprintf(shared, sizeof(shared), "%s/%s", test_corpus_dir(),
                 config + strlen(SHARED_CORPUS));
        config = shared;
    }
    accel_diags_init(&d);
    rc = accel_cfg_load(&cfg, config, NULL, &d, &err);
    if (rc == ACCEL_OK && cfg.launcher == ACCEL_LAUNCH_NONE)
        rc = ACCEL_EUNSUPPORTED;
    if (!upstream_ok && nworkers == 0) {
        why = lookup_why(case_name, LEN(accepted_by_accelrun), accepted_by_accelrun,
                         sizeof(accepted_by_accelrun[0]));
        if (rc == ACCEL_OK && why == NULL) {
            test_note("%s: accelerate refuses (%s) but accelrun accepts it", case_name,
                      cJSON_GetObjectItemCaseSensitive(g, "error")->valuestring);
            bad++;
        } else if (rc == ACCEL_OK) {
            test_note("%s: accelerate refuses, accelrun accepts: %s", case_name, why);
        }
        goto out;
    }
    why = lookup_why(case_name, LEN(refused_by_accelrun), refused_by_accelrun,
                     sizeof(refused_by_accelrun[0]));
    if (rc != ACCEL_OK) {
        if (why != NULL) {
            test_note("%s: accelrun refuses on purpose: %s", case_name, why);
        } else {
            test_note("%s: accelrun refused a config accelerate runs: %s", case_name, err.msg);
            bad++;
        }
        goto out;
    }
    cJSON_ArrayForEach(w, workers)
    {
        bad += compare_worker(case_name, &cfg, g, w);
        (*compared)++;
    }
    accel_cfg_free(&cfg);
out:
    accel_diags_free(&d);
    cJSON_Delete(g);
    return bad;
}

/* One case per golden file, named after it (test_arg: its path). */
static void golden_case(void)
{
    const char *path = test_arg();
    int workers = 0, bad = run_case(path, &workers);

    test_note("%s: %d workers compared", path, workers);
    ASSERT_INT_EQ(bad, 0);
}

static size_t ngoldens;

TEST(golden_count)
{
    ASSERT_INT_EQ(ngoldens, GOLDEN_CASES);
}

static int is_json(const struct dirent *de)
{
    size_t n = strlen(de->d_name);
    return n > 5 && strcmp(de->d_name + n - 5, ".json") == 0;
}

int main(int argc, char **argv)
{
    struct dirent **names = NULL;
    struct test_case *cases;
    int n = scandir(GOLDEN_DIR, &names, is_json, alphasort), rc;

    if (n < 0) {
        printf("1..1\nnot ok 1 - golden files\n#   no %s (run from the repository root)\n",
               GOLDEN_DIR);
        return 1;
    }
    ngoldens = (size_t)n;
    cases = calloc((size_t)n + 1, sizeof(*cases));
    if (cases == NULL)
        return 1;
    cases[0] = (struct test_case){"golden_count", test_golden_count, NULL};
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]->d_name) - 5;
        char *name = malloc(len + 1), *path = malloc(sizeof(GOLDEN_DIR) + len + 6);
        if (name == NULL || path == NULL)
            return 1;
        memcpy(name, names[i]->d_name, len);
        name[len] = '\0';
        snprintf(path, sizeof(GOLDEN_DIR) + len + 6, "%s/%s.json", GOLDEN_DIR, name);
        cases[i + 1] = (struct test_case){name, golden_case, path};
        free(names[i]);
    }
    free(names);
    rc = test_main(argc, argv, cases, (size_t)n + 1);
    for (int i = 1; i <= n; i++) {
        free((char *)cases[i].name);
        free((void *)cases[i].arg);
    }
    free(cases);
    return rc;
}
