/*
 * random.h (internal to libaccelrun): the one source of random identifiers
 * (a checkpoint run's id, a shared-memory segment's token).  Not for keys or
 * secrets: where the kernel's generator fails, it falls back to the clock
 * and the pid.
 *
 * Thread-safety: safe from any thread.
 */
#ifndef ACCEL_BASE_RANDOM_H
#define ACCEL_BASE_RANDOM_H

#include <stdint.h>

/* 64 random bits from getrandom(), never 0. */
uint64_t base__random_id(void);

#endif
