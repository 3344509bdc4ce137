/*
 * emu.cpp (tests/examples/cuda_emu): the C entry points of the stand-ins,
 * for emu_test.c and the emulated trainer: the scheduler's seed, counters,
 * an allocation failure on demand; and, for the trainer (run.sh --train),
 * the three library calls through which train.c decides on device mode,
 * answered as the nccl backend would (train.c is compiled with them
 * renamed; the emulator's "device" memory is host memory, so the socket
 * communicator and the host shard serve it).
 */
#include "cuda_runtime.h"

struct accel_comm;
struct accel_shard;

extern "C" {
void emu_seed(unsigned long long s);
unsigned long emu_stats(unsigned long *yields);
void emu_fail_alloc_after(size_t n);
const char *emu_comm_backend(const struct accel_comm *c);
void *emu_comm_stream(const struct accel_comm *c);
bool emu_shard_on_device(const struct accel_shard *s);

void emu_seed(unsigned long long s)
{
    emu_rng = s ? s : 1;
}

unsigned long emu_stats(unsigned long *yields)
{
    *yields = emu_yields;
    return emu_launches;
}

void emu_fail_alloc_after(size_t n)
{
    emu_alloc_fail_after = n;
}

const char *emu_comm_backend(const struct accel_comm *c)
{
    (void)c;
    return "nccl";
}

void *emu_comm_stream(const struct accel_comm *c)
{
    (void)c;
    return (void *)&emu_rng; /* any non-NULL stream */
}

bool emu_shard_on_device(const struct accel_shard *s)
{
    (void)s;
    return true;
}
}
