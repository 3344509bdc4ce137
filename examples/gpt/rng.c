/*
 * rng.c: SplitMix64 (Steele, Lea and Flood, 2014) and a Box-Muller normal.
 * Statistical quality is ample for initialisation and sampling; nothing here
 * is for cryptography.
 */
#include <math.h>

#include "rng.h"

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void gpt_rng_init(struct gpt_rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t gpt_rng_next(struct gpt_rng *r)
{
    r->state += 0x9e3779b97f4a7c15ull;
    return mix(r->state);
}

double gpt_rng_uniform(struct gpt_rng *r)
{
    return (double)(gpt_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

double gpt_rng_normal(struct gpt_rng *r)
{
    double u1 = 1.0 - gpt_rng_uniform(r); /* (0, 1]: log is finite */
    double u2 = gpt_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint64_t gpt_rng_hash(uint64_t a, uint64_t b, uint64_t c)
{
    return mix(mix(mix(a + 0x9e3779b97f4a7c15ull) ^ b) + 0x9e3779b97f4a7c15ull * (c + 1));
}
