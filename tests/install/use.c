/*
 * tests/install/use.c: a library user's program, built against installed
 * headers, accelrun.pc and libaccelrun.so (tests/install/run.sh after `make
 * install`, tests/deb/run.sh against the unpacked -dev package): prints the
 * RANK that accel_env_build gives local rank 1 of a 2-process node for the
 * config named on the command line.
 */
#include <accel/env.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    struct accel_diags d;
    struct accel_cfg cfg;
    struct accel_env env;
    struct accel_error err;
    struct accel_layout lay = {1, 0, 2, 1, -1, 0, NULL, 0, 0};

    accel_diags_init(&d);
    if (argc < 2 || accel_cfg_load(&cfg, argv[1], NULL, &d, &err) != ACCEL_OK ||
        accel_env_build(&cfg, &lay, NULL, &env, &err) != ACCEL_OK)
        return 1;
    printf("%s\n", accel_env_get(&env, "RANK"));
    accel_env_free(&env);
    accel_cfg_free(&cfg);
    accel_diags_free(&d);
    return 0;
}
