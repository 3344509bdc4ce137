/*
 * rng.h: the example GPT's own pseudo-random numbers: SplitMix64, so that
 * parameter init and data order depend only on the seed, never on libc's
 * rand() or on the platform.  Counter-based use (gpt_rng_hash) gives the same
 * value for (seed, step, index) whichever rank asks, which keeps the global
 * batch identical across world sizes.
 */
#ifndef GPT_RNG_H
#define GPT_RNG_H

#include <stdint.h>

struct gpt_rng {
    uint64_t state;
};

void gpt_rng_init(struct gpt_rng *r, uint64_t seed);
uint64_t gpt_rng_next(struct gpt_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double gpt_rng_uniform(struct gpt_rng *r);
/* Standard normal (Box-Muller, one value per call). */
double gpt_rng_normal(struct gpt_rng *r);
/* A stateless mix of three words: SplitMix64's finaliser over a, b, c. */
uint64_t gpt_rng_hash(uint64_t a, uint64_t b, uint64_t c);

#endif
