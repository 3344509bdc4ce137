/*
 * bench/env_build.c: microbenchmark of the pure path the SPANK plugin runs in
 * every task: load + check + resolve a config, then build one rank's
 * environment.  Prints the median microseconds per iteration over batches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "accel/env.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int iters = argc > 2 ? atoi(argv[2]) : 1000;
    double samples[21];
    struct accel_layout lay = {1, 0, 2, 1, -1, 0, NULL, 0, 0};

    if (argc < 2 || iters < 1) {
        fprintf(stderr, "usage: env_build CONFIG [ITERATIONS]\n");
        return 2;
    }
    for (int s = 0; s < 21; s++) {
        double t0 = now_us();
        for (int i = 0; i < iters / 21 + 1; i++) {
            struct accel_diags d;
            struct accel_cfg cfg;
            struct accel_env env;
            struct accel_error err;
            accel_diags_init(&d);
            if (accel_cfg_load(&cfg, argv[1], NULL, &d, &err) != ACCEL_OK ||
                accel_env_build(&cfg, &lay, NULL, &env, &err) != ACCEL_OK) {
                fprintf(stderr, "env_build: %s\n", err.msg);
                return 1;
            }
            accel_env_free(&env);
            accel_cfg_free(&cfg);
            accel_diags_free(&d);
        }
        samples[s] = (now_us() - t0) / (iters / 21 + 1);
    }
    qsort(samples, 21, sizeof(double), cmp);
    printf("%.1f\n", samples[10]);
    return 0;
}
