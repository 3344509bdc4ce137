/*
 * random.c: random identifiers (random.h).
 */
#define _GNU_SOURCE /* getrandom */
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "random.h"

uint64_t base__random_id(void)
{
    uint64_t id = 0;

    if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id)) {
        /* splitmix64 of the clock and the pid */
        struct timespec t;

        clock_gettime(CLOCK_REALTIME, &t);
        id = ((uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec) ^ ((uint64_t)getpid() << 32);
        id += 0x9e3779b97f4a7c15ull;
        id = (id ^ (id >> 30)) * 0xbf58476d1ce4e5b9ull;
        id = (id ^ (id >> 27)) * 0x94d049bb133111ebull;
        id ^= id >> 31;
    }
    return id ? id : 1;
}
