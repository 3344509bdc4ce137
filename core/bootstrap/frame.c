/*
 * frame.c: the rendezvous store's wire header (layout in store_int.h),
 * encoded and decoded byte by byte so that the format does not depend on the
 * host's endianness or struct padding.  The decoder is pure and checks every
 * cap before a length is trusted, so a reader never allocates what a peer
 * merely claims; it is fuzzed on its own (tests/fuzz/fuzz_store.c).
 */
#include <string.h>

#include "store_int.h"

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

void bootstrap__frame_encode(uint8_t out[STORE_HDR], const struct bootstrap__frame *f)
{
    put32(out, STORE_MAGIC);
    out[4] = STORE_VERSION;
    out[5] = f->op;
    out[6] = (uint8_t)(f->status & 0xff);
    out[7] = (uint8_t)(f->status >> 8);
    put64(out + 8, f->nonce);
    put32(out + 16, f->klen);
    put32(out + 20, f->vlen);
    put64(out + 24, (uint64_t)f->arg);
    put32(out + 32, f->timeout_ms);
    put32(out + 36, 0);
}

const char *bootstrap__op_name(unsigned op)
{
    switch ((enum bootstrap__op)(op & ~(unsigned)STORE_REPLY)) {
    case STORE_HELLO:
        return "hello";
    case STORE_SET:
        return "set";
    case STORE_GET:
        return "get";
    case STORE_WAIT:
        return "wait";
    case STORE_ADD:
        return "add";
    case STORE_BARRIER:
        return "barrier";
    case STORE_OP_END:
        break;
    }
    return "?";
}

enum accel_err bootstrap__frame_decode(const uint8_t *in, bool reply, struct bootstrap__frame *f,
                                       struct accel_error *err)
{
    unsigned op;

    if (get32(in) != STORE_MAGIC)
        return accel_error_set(err, ACCEL_EPARSE,
                               "store protocol: not a rendezvous store message (magic "
                               "%02x%02x%02x%02x)",
                               in[0], in[1], in[2], in[3]);
    f->version = in[4];
    if (f->version != STORE_VERSION)
        return accel_error_set(err, ACCEL_EUNSUPPORTED,
                               "store protocol: version %u; this side speaks version %u",
                               f->version, STORE_VERSION);
    f->op = in[5];
    f->status = (uint16_t)(in[6] | in[7] << 8);
    f->nonce = get64(in + 8);
    f->klen = get32(in + 16);
    f->vlen = get32(in + 20);
    f->arg = (int64_t)get64(in + 24);
    f->timeout_ms = get32(in + 32);
    if (get32(in + 36) != 0)
        return accel_error_set(err, ACCEL_EPARSE,
                               "store protocol: reserved header bytes are not zero");
    if (((f->op & STORE_REPLY) != 0) != reply)
        return accel_error_set(err, ACCEL_EPARSE, "store protocol: a %s where a %s was expected",
                               reply ? "request" : "reply", reply ? "reply" : "request");
    op = f->op & ~(unsigned)STORE_REPLY;
    if (op < STORE_HELLO || op >= STORE_OP_END)
        return accel_error_set(err, ACCEL_EPARSE, "store protocol: unknown op %u", op);
    if (f->klen > ACCEL_STORE_MAX_KEY)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               "store protocol: %s: key of %u bytes; the limit is %d",
                               bootstrap__op_name(op), f->klen, ACCEL_STORE_MAX_KEY);
    if (f->vlen > ACCEL_STORE_MAX_VALUE)
        return accel_error_set(err, ACCEL_ETOOBIG,
                               "store protocol: %s: value of %u bytes; the limit is %u",
                               bootstrap__op_name(op), f->vlen, ACCEL_STORE_MAX_VALUE);
    if (reply) {
        if (f->klen != 0)
            return accel_error_set(err, ACCEL_EPARSE, "store protocol: a reply with a key");
        if (f->status >= ACCEL_ERR__LAST)
            return accel_error_set(err, ACCEL_EPARSE, "store protocol: unknown status %u",
                                   f->status);
        if (f->status != ACCEL_OK && f->vlen > STORE_MAX_MSG)
            return accel_error_set(err, ACCEL_ETOOBIG, "store protocol: error message of %u bytes",
                                   f->vlen);
        return ACCEL_OK;
    }
    if (f->status != 0)
        return accel_error_set(err, ACCEL_EPARSE, "store protocol: a request with a status");
    if ((op == STORE_HELLO) != (f->klen == 0))
        return accel_error_set(err, ACCEL_EINVAL, "store protocol: %s: %s", bootstrap__op_name(op),
                               op == STORE_HELLO ? "carries a key" : "empty key");
    if (op != STORE_SET && f->vlen != 0)
        return accel_error_set(err, ACCEL_EINVAL, "store protocol: %s: carries a value",
                               bootstrap__op_name(op));
    if (op == STORE_BARRIER && (f->arg < 1 || f->arg > ACCEL_STORE_MAX_CLIENTS))
        return accel_error_set(err, ACCEL_EINVAL, "store protocol: barrier of %lld clients",
                               (long long)f->arg);
    return ACCEL_OK;
}
