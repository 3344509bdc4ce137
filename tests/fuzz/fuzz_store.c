/*
 * fuzz_store.c: libFuzzer target for the rendezvous store's server side,
 * without sockets.  The first byte picks the mode:
 *
 *   even  the rest is one wire header, decoded as a request and as a reply;
 *   odd   the rest is a script for the state machine (serve.c) with three
 *         connections: each step is one byte (low 2 bits: the connection, 3
 *         = let time pass and expire deadlines), one length byte, then that
 *         many bytes delivered to the connection, which then is served.
 *
 * Invariants: no crash, no leak, no unbounded growth; every reply the server
 * queues decodes as a reply; a connection the server gave up on is replaced
 * by a fresh one, as the socket layer would; a complete header from a
 * connection that has not presented the job's nonce is never left waiting
 * for its body (it was checked: the connection is a client of the job now,
 * or refused); the bytes reserved for partial requests add up to
 * core.inflight, and with the bytes held stay within max_bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/bootstrap/store_int.h"
#include "accel/alloc.h"

#define NONCE 0x5eedull
#define CONNS 3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Checks and discards what the server queued for c. */
static void drain_out(struct bootstrap__conn *c)
{
    size_t off = c->out_off;
    struct bootstrap__frame f;
    struct accel_error err;

    while (off < c->out_len) {
        if (c->out_len - off < STORE_HDR ||
            bootstrap__frame_decode(c->out + off, true, &f, &err) != ACCEL_OK)
            abort(); /* the server wrote something its own client cannot read */
        off += STORE_HDR + f.vlen;
        if (off > c->out_len)
            abort();
    }
    c->out_off = c->out_len = 0;
}

static void deliver(struct bootstrap__conn *c, const uint8_t *p, size_t n)
{
    if (c->in_len + n > c->in_cap) {
        size_t cap = c->in_len + n;
        uint8_t *q = accel_realloc(c->in, cap);
        if (q == NULL)
            abort();
        c->in = q;
        c->in_cap = cap;
    }
    memcpy(c->in + c->in_len, p, n);
    c->in_len += n;
}

static void script(const uint8_t *data, size_t size)
{
    struct bootstrap__core core;
    struct bootstrap__conn conns[CONNS];
    struct bootstrap__conn *c;
    double now = 1000.0;
    size_t i = 0;

    if (bootstrap__core_init(&core, NONCE, 4096) != ACCEL_OK)
        abort();
    memset(conns, 0, sizeof(conns));
    while (i + 2 <= size) {
        unsigned who = data[i] & 3;
        size_t n = data[i + 1];
        i += 2;
        if (who == 3) { /* time passes */
            now += n * 0.01;
            bootstrap__core_expire(&core, now);
        } else {
            if (n > size - i)
                n = size - i;
            deliver(&conns[who], data + i, n);
            i += n;
            bootstrap__core_input(&core, &conns[who], now);
        }
        /* the socket layer's part: send, serve what was held back, close */
        while ((c = bootstrap__core_next_touched(&core)) != NULL) {
            drain_out(c);
            if (!c->dead && !c->closing && c->park_on == NULL) {
                bootstrap__core_input(&core, c, now);
                drain_out(c);
            }
            if (c->dead || c->closing) {
                bootstrap__core_drop(&core, c);
                memset(c, 0, sizeof(*c));
            }
        }
        uint64_t reserved = 0;
        for (unsigned k = 0; k < CONNS; k++) {
            c = &conns[k];
            if (c->in_len > STORE_HDR + ACCEL_STORE_MAX_KEY + (size_t)ACCEL_STORE_MAX_VALUE + 256)
                abort(); /* input must have been consumed or refused */
            if (!c->authed && c->in_len >= STORE_HDR)
                abort(); /* a stranger's body would be buffered */
            reserved += c->reserved;
        }
        if (reserved != core.inflight || core.bytes + core.inflight > core.max_bytes)
            abort();
    }
    for (unsigned k = 0; k < CONNS; k++)
        bootstrap__core_drop(&core, &conns[k]);
    bootstrap__core_free(&core);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if ((data[0] & 1) == 0) {
        struct bootstrap__frame f;
        struct accel_error err;
        uint8_t hdr[STORE_HDR] = {0};
        memcpy(hdr, data + 1, size - 1 < STORE_HDR ? size - 1 : STORE_HDR);
        if (bootstrap__frame_decode(hdr, false, &f, &err) == ACCEL_OK &&
            (f.klen > ACCEL_STORE_MAX_KEY || f.vlen > ACCEL_STORE_MAX_VALUE))
            abort();
        if (bootstrap__frame_decode(hdr, true, &f, &err) == ACCEL_OK && f.klen != 0)
            abort();
        return 0;
    }
    script(data + 1, size - 1);
    return 0;
}
