/*
 * socket_tune.c: the socket backend's local tuning, from what the machine
 * says about itself, each value overridable by an ACCELRUN_SOCKET_*
 * variable.
 *
 * Only what a rank may choose alone is tuned here: the pacing windows, the
 * spin before poll() and the size of its shared-memory queues change when
 * bytes move, never which bytes or in what order, so ranks that chose
 * differently still agree (the chunk, which shapes the ring's units, stays
 * one value for all: ACCELRUN_SOCKET_CHUNK).
 *
 * The windows keep the bytes in flight in the cache of the core that reads
 * them next (socket_ring.c, socket_cube.c): they scale with the L2 cache of
 * one core, at the fractions measured best on the machine the constants
 * were first tuned on (2 MiB of L2: a 64 KiB window for a hypercube
 * exchange, 256 KiB for the ring's all_gather), within bounds.  A shared-
 * memory queue holds half an L2, so that what a rank writes is still cached
 * when its peer reads it.  A link to another host is not paced (its
 * receiver's caches are not this host's; across the Slurm lab's veth link a
 * pair's all_gather of 4-16 MiB was 5-10% faster without): unless
 * ACCELRUN_SOCKET_WINDOW or _CUBE_WINDOW say otherwise, comm__sock_pace
 * gives those links no window.  The spin: ranks that share CPUs (more ranks on
 * the host than CPUs this process may run on) yield the CPU while they spin
 * and spin briefly, since the peer they wait for needs it; ranks with a CPU
 * each spin longer, as waking from poll() costs more than the usual wait.
 */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "accel/getenv.h"
#include "socket_int.h"

#define KIB 1024u

/* The defaults of what a rank chooses alone. */
struct sock_tune {
    size_t ring_window, cube_window; /* pacing, bytes */
    size_t shm_bytes;                /* a shared-memory queue, bytes */
    unsigned spin_us;
};
#define DEFAULT_L2 (1u << 20) /* when the machine does not say */

static size_t clamp(size_t v, size_t lo, size_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static size_t pow2_floor(size_t v)
{
    size_t p = 1;

    while (p <= v / 2)
        p *= 2;
    return p;
}

/* Bytes of one core's L2 cache (sysconf, else sysfs), DEFAULT_L2 if unknown. */
static size_t l2_bytes(void)
{
    long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    unsigned kib = 0;
    FILE *f;

    if (v > 0)
        return (size_t)v;
    f = fopen("/sys/devices/system/cpu/cpu0/cache/index2/size", "re");
    if (f != NULL) {
        if (fscanf(f, "%uK", &kib) != 1)
            kib = 0;
        fclose(f);
    }
    return kib > 0 ? (size_t)kib * KIB : DEFAULT_L2;
}

static unsigned cpus_here(void)
{
    cpu_set_t set;

    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    return (unsigned)CPU_COUNT(&set) > 0 ? (unsigned)CPU_COUNT(&set) : 1;
}

static void tune_defaults(struct sock_tune *t)
{
    size_t l2 = l2_bytes();
    unsigned local = 1, cpus = cpus_here();

    /* the launcher's LOCAL_WORLD_SIZE: ranks on this host (1 if unset or
     * malformed: it only steers the spin) */
    if (accel_getenv_uint_or("tune", "LOCAL_WORLD_SIZE", 1, 1u << 24, 1, &local, NULL) != ACCEL_OK)
        local = 1;
    t->cube_window = clamp(l2 / 32, 16 * KIB, 1024 * KIB);
    t->ring_window = clamp(l2 / 8, 64 * KIB, 4096 * KIB);
    t->shm_bytes = clamp(pow2_floor(l2 / 2), SOCK_SHM_MIN, 4096 * KIB);
    t->spin_us = local > cpus ? SOCK_SPIN_US : SOCK_SPIN_US_OWN_CPU;
}

enum accel_err comm__sock_tune(struct sock *s, const char *who, struct accel_error *err)
{
    struct sock_tune t;
    unsigned spin_us, shm, ring_w, cube_w, cma;
    enum accel_err rc;

    tune_defaults(&t);
    rc = accel_getenv_uint_or(who, "ACCELRUN_SOCKET_SPIN_US", 0, 1000000, t.spin_us, &spin_us, err);
    if (rc == ACCEL_OK)
        rc = accel_getenv_uint_or(who, "ACCELRUN_SOCKET_SHM_BYTES", 0, SOCK_SHM_MAX,
                                  (unsigned)t.shm_bytes, &shm, err);
    if (rc == ACCEL_OK && shm != 0 && (shm < SOCK_SHM_MIN || (shm & (shm - 1)) != 0))
        rc = accel_error_set(err, ACCEL_EINVAL,
                             "%s: ACCELRUN_SOCKET_SHM_BYTES=%u must be 0 (off) or a power of two "
                             "from %u to %u",
                             who, shm, SOCK_SHM_MIN, SOCK_SHM_MAX);
    if (rc == ACCEL_OK)
        rc = accel_getenv_uint_or(who, "ACCELRUN_SOCKET_WINDOW", 0, SOCK_MAX_CHUNK,
                                  (unsigned)t.ring_window, &ring_w, err);
    if (rc == ACCEL_OK)
        rc = accel_getenv_uint_or(who, "ACCELRUN_SOCKET_CUBE_WINDOW", 0, SOCK_MAX_CHUNK,
                                  (unsigned)t.cube_window, &cube_w, err);
    if (rc == ACCEL_OK)
        rc = accel_getenv_uint_or(who, "ACCELRUN_SOCKET_CMA", 0, 1, 1, &cma, err);
    if (rc != ACCEL_OK)
        return rc;
    s->cma = cma != 0;
    s->spin_s = spin_us * 1e-6;
    s->shm_cap = shm;
    s->ring_window = ring_w;
    s->cube_window = cube_w;
    s->windows_set =
        getenv("ACCELRUN_SOCKET_WINDOW") != NULL || getenv("ACCELRUN_SOCKET_CUBE_WINDOW") != NULL;
    return ACCEL_OK;
}

size_t comm__sock_pace(const struct sock *s, size_t window, bool same_host)
{
    return same_host || s->windows_set ? window : 0;
}
