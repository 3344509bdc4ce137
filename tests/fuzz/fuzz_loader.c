/*
 * fuzz_loader.c: libFuzzer target for the whole config path the plugin runs
 * on user input: parse, site merge, schema and rule checks, resolve, and the
 * environment of one rank and of one node.  The first input byte picks the
 * target accelerate version, whether a site policy applies and the layout;
 * the rest is the config file.  Invariants: no crash, no leak, no sanitizer
 * report; an accepted config yields a sorted environment of NAME=VALUE
 * entries with well-formed names.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accel/env.h"

static const char site_yaml[] = "defaults:\n  mixed_precision: bf16\n"
                                "enforce:\n  fsdp_config:\n    fsdp_offload_params: false\n"
                                "accelrun:\n  env:\n    NCCL_DEBUG: WARN\n";

static void check_env(const struct accel_env *env)
{
    for (size_t i = 0; i < env->n; i++) {
        const char *eq = strchr(env->v[i], '=');
        if (eq == NULL || eq == env->v[i])
            abort();
        for (const char *c = env->v[i]; c < eq; c++)
            if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_'))
                abort();
        if (i > 0 && strcmp(env->v[i - 1], env->v[i]) > 0 &&
            strncmp(env->v[i - 1], env->v[i], (size_t)(eq - env->v[i])) != 0)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned versions[] = {ACCEL_VERSION(1, 0, 0), ACCEL_VERSION(1, 6, 0),
                                        ACCEL_VERSION(1, 13, 0), ACCEL_VERSION_NEWEST};
    struct accel_site site;
    struct accel_cfg_opts opts = {0};
    struct accel_diags d, sd;
    struct accel_cfg cfg;
    struct accel_error err;
    uint8_t sel;
    bool with_site;

    if (size < 1)
        return 0;
    sel = data[0];
    opts.version = versions[sel & 3];
    with_site = (sel & 4) != 0;
    opts.nodes = (sel & 8) ? 2 : 0;
    opts.gpus_per_node = (sel & 16) ? 4 : 0;
    accel_diags_init(&sd);
    accel_site_init(&site);
    if (with_site && accel_site_load_buffer(&site, "site.yaml", site_yaml, sizeof(site_yaml) - 1,
                                            opts.version, &sd, &err) != ACCEL_OK)
        abort();
    opts.site = with_site ? &site : NULL;
    accel_diags_init(&d);
    if (accel_cfg_load_buffer(&cfg, "fuzz.yaml", (const char *)data + 1, size - 1, &opts, &d,
                              &err) == ACCEL_OK) {
        struct accel_layout lay = {2, 1, 4, (sel & 32) ? -1 : 3, -1, 0, NULL, 0, 2};
        struct accel_env_opts eo = {NULL, opts.site};
        struct accel_env env = {NULL, 0};
        if (accel_env_build(&cfg, &lay, &eo, &env, &err) == ACCEL_OK)
            check_env(&env);
        accel_env_free(&env);
        accel_cfg_free(&cfg);
    }
    for (size_t i = 0; i < d.n; i++)
        if (d.v[i].msg == NULL || d.v[i].key == NULL || d.v[i].file == NULL)
            abort();
    accel_diags_free(&d);
    accel_diags_free(&sd);
    accel_site_free(&site);
    return 0;
}
