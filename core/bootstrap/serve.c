/*
 * serve.c: the rendezvous server's state machine, without sockets.  It turns
 * the bytes a connection sent into replies queued on that connection (and on
 * the connections a set, add or barrier wakes), keeps the keys in a hash
 * table, parks a get, wait or barrier whose answer is not there yet on the
 * key it waits for, and answers it the moment the key arrives (no polling) or
 * with ACCEL_ETIMEDOUT at its deadline.  server.c moves the bytes; the fuzz
 * target drives this file directly.
 *
 * A client that breaks the protocol or a cap gets one error reply and is then
 * closed; the server and the other clients carry on.  Barrier counters live
 * under keys that start with a NUL byte, which a client's key may not
 * contain, so the two namespaces never meet.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "accel/alloc.h"
#include "store_int.h"

struct bootstrap__entry {
    struct bootstrap__entry *next; /* in its bucket */
    uint64_t hash;
    uint8_t *val;
    uint32_t vlen;
    bool set;
    int64_t count;                   /* barrier arrivals */
    struct bootstrap__conn *waiters; /* parked on this key */
    uint32_t klen;
    uint8_t key[];
};

#define FIRST_BUCKETS 1024

uint64_t bootstrap__fnv1a(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

enum accel_err bootstrap__core_init(struct bootstrap__core *core, uint64_t nonce,
                                    uint64_t max_bytes)
{
    memset(core, 0, sizeof(*core));
    core->nonce = nonce;
    core->max_bytes = max_bytes ? max_bytes : ACCEL_STORE_MAX_BYTES;
    core->buckets = accel_calloc(FIRST_BUCKETS, sizeof(*core->buckets));
    if (core->buckets == NULL)
        return ACCEL_ENOMEM;
    core->nbuckets = FIRST_BUCKETS;
    return ACCEL_OK;
}

void bootstrap__core_free(struct bootstrap__core *core)
{
    if (core == NULL || core->buckets == NULL)
        return;
    for (size_t i = 0; i < core->nbuckets; i++) {
        struct bootstrap__entry *e = core->buckets[i], *next;
        for (; e != NULL; e = next) {
            next = e->next;
            accel_free(e->val);
            accel_free(e);
        }
    }
    accel_free(core->buckets);
    core->buckets = NULL;
}

/* ---------------------------------------------------------------- output */

void bootstrap__core_touch(struct bootstrap__core *core, struct bootstrap__conn *c)
{
    if (c->touched)
        return;
    c->touched = true;
    c->tprev = NULL;
    c->tnext = core->touched;
    if (core->touched != NULL)
        core->touched->tprev = c;
    core->touched = c;
}

struct bootstrap__conn *bootstrap__core_next_touched(struct bootstrap__core *core)
{
    struct bootstrap__conn *c = core->touched;
    if (c == NULL)
        return NULL;
    core->touched = c->tnext;
    if (core->touched != NULL)
        core->touched->tprev = NULL;
    c->touched = false;
    c->tnext = c->tprev = NULL;
    return c;
}

/* Makes room for `n` more bytes of output; false (and the connection dead)
 * when memory runs out. */
static bool out_reserve(struct bootstrap__conn *c, size_t n)
{
    size_t want, cap;
    uint8_t *p;

    if (c->out_off > 0 && c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    if (c->out_len + n <= c->out_cap)
        return true;
    if (c->out_off > 0) { /* slide the unsent part to the front first */
        memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
        c->out_len -= c->out_off;
        c->out_off = 0;
        if (c->out_len + n <= c->out_cap)
            return true;
    }
    want = c->out_len + n;
    cap = c->out_cap ? c->out_cap : 256;
    while (cap < want)
        cap *= 2;
    p = accel_realloc(c->out, cap);
    if (p == NULL) {
        c->dead = true;
        return false;
    }
    c->out = p;
    c->out_cap = cap;
    return true;
}

static void reply(struct bootstrap__core *core, struct bootstrap__conn *c, unsigned op,
                  enum accel_err status, int64_t arg, const void *val, size_t vlen)
{
    struct bootstrap__frame f = {0};

    bootstrap__core_touch(core, c);
    if (c->dead || !out_reserve(c, STORE_HDR + vlen))
        return;
    f.op = (uint8_t)(op | STORE_REPLY);
    f.status = (uint16_t)status;
    f.nonce = c->authed ? core->nonce : 0; /* only to a client that proved it knows it */
    f.vlen = (uint32_t)vlen;
    f.arg = arg;
    bootstrap__frame_encode(c->out + c->out_len, &f);
    if (vlen > 0)
        memcpy(c->out + c->out_len + STORE_HDR, val, vlen);
    c->out_len += STORE_HDR + vlen;
}

/* An error reply with a message; `close` marks a client that broke a rule. */
static void reply_err(struct bootstrap__core *core, struct bootstrap__conn *c, unsigned op,
                      enum accel_err status, bool close, const char *fmt, ...) ACCEL_PRINTF(6, 7);

static void reply_err(struct bootstrap__core *core, struct bootstrap__conn *c, unsigned op,
                      enum accel_err status, bool close, const char *fmt, ...)
{
    char msg[STORE_MAX_MSG];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(msg))
        n = sizeof(msg) - 1;
    reply(core, c, op, status, 0, msg, (size_t)n);
    if (close)
        c->closing = true;
}

void bootstrap__core_refuse(struct bootstrap__core *core, struct bootstrap__conn *c,
                            enum accel_err status, const char *msg)
{
    reply_err(core, c, STORE_HELLO, status, true, "%s", msg);
}

/* ---------------------------------------------------------------- table */

static struct bootstrap__entry *lookup(struct bootstrap__core *core, const uint8_t *key,
                                       uint32_t klen, uint64_t h)
{
    struct bootstrap__entry *e = core->buckets[h & (core->nbuckets - 1)];
    for (; e != NULL; e = e->next)
        if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
            return e;
    return NULL;
}

static void grow(struct bootstrap__core *core)
{
    size_t n = core->nbuckets * 2;
    struct bootstrap__entry **b = accel_calloc(n, sizeof(*b));

    if (b == NULL)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < core->nbuckets; i++) {
        struct bootstrap__entry *e = core->buckets[i], *next;
        for (; e != NULL; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    accel_free(core->buckets);
    core->buckets = b;
    core->nbuckets = n;
}

/* The entry of `key`, created when missing.  NULL after an error reply. */
static struct bootstrap__entry *entry_of(struct bootstrap__core *core, struct bootstrap__conn *c,
                                         unsigned op, const uint8_t *key, uint32_t klen)
{
    uint64_t h = bootstrap__fnv1a(STORE_FNV_OFFSET, key, klen);
    struct bootstrap__entry *e = lookup(core, key, klen, h);

    if (e != NULL)
        return e;
    if (core->nkeys >= ACCEL_STORE_MAX_KEYS) {
        reply_err(core, c, op, ACCEL_ETOOBIG, true, "the store holds %zu keys, its limit",
                  core->nkeys);
        return NULL;
    }
    if (core->bytes + core->inflight + klen > core->max_bytes) {
        reply_err(core, c, op, ACCEL_ETOOBIG, true,
                  "the store holds %" PRIu64 " bytes%s; a new key would pass its limit of %" PRIu64,
                  core->bytes, core->inflight > 0 ? " and buffers more being received" : "",
                  core->max_bytes);
        return NULL;
    }
    e = accel_calloc(1, sizeof(*e) + klen);
    if (e == NULL) {
        c->dead = true;
        return NULL;
    }
    e->hash = h;
    e->klen = klen;
    memcpy(e->key, key, klen);
    e->next = core->buckets[h & (core->nbuckets - 1)];
    core->buckets[h & (core->nbuckets - 1)] = e;
    core->nkeys++;
    core->bytes += klen;
    if (core->nkeys > core->nbuckets)
        grow(core);
    return e;
}

/* ---------------------------------------------------------------- parking */

static void park(struct bootstrap__core *core, struct bootstrap__conn *c,
                 struct bootstrap__entry *e, unsigned op, int64_t n, double deadline)
{
    c->park_on = e;
    c->park_op = (uint8_t)op;
    c->park_n = n;
    c->park_deadline = deadline;
    c->wprev = NULL;
    c->wnext = e->waiters;
    if (e->waiters != NULL)
        e->waiters->wprev = c;
    e->waiters = c;
    c->pprev = NULL;
    c->pnext = core->parked;
    if (core->parked != NULL)
        core->parked->pprev = c;
    core->parked = c;
    core->nparked++;
}

static void unpark(struct bootstrap__core *core, struct bootstrap__conn *c)
{
    struct bootstrap__entry *e = c->park_on;

    if (e == NULL)
        return;
    if (c->wprev != NULL)
        c->wprev->wnext = c->wnext;
    else
        e->waiters = c->wnext;
    if (c->wnext != NULL)
        c->wnext->wprev = c->wprev;
    if (c->pprev != NULL)
        c->pprev->pnext = c->pnext;
    else
        core->parked = c->pnext;
    if (c->pnext != NULL)
        c->pnext->pprev = c->pprev;
    c->wprev = c->wnext = c->pprev = c->pnext = NULL;
    c->park_on = NULL;
    core->nparked--;
}

static bool satisfied(const struct bootstrap__entry *e, unsigned op, int64_t n)
{
    return op == STORE_BARRIER ? e->count >= n : e->set;
}

/* The answer to a get, wait or barrier whose condition holds. */
static void answer(struct bootstrap__core *core, struct bootstrap__conn *c,
                   const struct bootstrap__entry *e, unsigned op)
{
    if (op == STORE_GET)
        reply(core, c, op, ACCEL_OK, 0, e->val, e->vlen);
    else
        reply(core, c, op, ACCEL_OK, e->count, NULL, 0);
}

/* Answers every waiter of `e` whose condition now holds; they go on the
 * touched list so that their next requests are read. */
static void wake(struct bootstrap__core *core, struct bootstrap__entry *e)
{
    struct bootstrap__conn *c = e->waiters, *next;

    for (; c != NULL; c = next) {
        unsigned op = c->park_op;
        next = c->wnext;
        if (!satisfied(e, op, c->park_n))
            continue;
        unpark(core, c);
        answer(core, c, e, op);
    }
}

void bootstrap__core_expire(struct bootstrap__core *core, double now)
{
    struct bootstrap__conn *c = core->parked, *next;

    for (; c != NULL; c = next) {
        next = c->pnext;
        if (c->park_deadline > now)
            continue;
        int64_t arrived = c->park_on->count;
        unsigned op = c->park_op;
        unpark(core, c);
        reply(core, c, op, ACCEL_ETIMEDOUT, arrived, NULL, 0);
    }
}

/* ---------------------------------------------------------------- requests */

/* Parses a value held as decimal text (what add stores, as TCPStore does). */
static bool parse_i64(const uint8_t *p, uint32_t n, int64_t *out)
{
    uint64_t v = 0, lim = INT64_MAX;
    uint32_t i = 0;
    bool neg = false;

    if (n > 0 && p[0] == '-') {
        neg = true;
        lim = (uint64_t)INT64_MAX + 1;
        i = 1;
    }
    if (i == n || n > 21)
        return false;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        if (v > (lim - (uint64_t)(p[i] - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* Replaces the value of `e` with `len` bytes; false after an error reply. */
static bool store_value(struct bootstrap__core *core, struct bootstrap__conn *c, unsigned op,
                        struct bootstrap__entry *e, const void *val, uint32_t len)
{
    uint64_t bytes = core->bytes - e->vlen + len;
    uint8_t *copy;

    /* Values other clients are still sending count too (the caller's own
     * reservation was released before it got here): what is held and what
     * is buffered stay within max_bytes together. */
    if (bytes + core->inflight > core->max_bytes) {
        reply_err(core, c, op, ACCEL_ETOOBIG, true,
                  "the store holds %" PRIu64
                  " bytes%s; this value would pass its limit of %" PRIu64,
                  core->bytes, core->inflight > 0 ? " and buffers more being received" : "",
                  core->max_bytes);
        return false;
    }
    copy = accel_malloc(len ? len : 1);
    if (copy == NULL) {
        c->dead = true;
        return false;
    }
    memcpy(copy, val, len);
    accel_free(e->val);
    e->val = copy;
    e->vlen = len;
    e->set = true;
    core->bytes = bytes;
    return true;
}

static void handle(struct bootstrap__core *core, struct bootstrap__conn *c,
                   const struct bootstrap__frame *f, const uint8_t *key, double now)
{
    unsigned op = f->op;
    struct bootstrap__entry *e;
    uint8_t bkey[ACCEL_STORE_MAX_KEY + 1];

    if (f->klen > 0 && memchr(key, 0, f->klen) != NULL) {
        reply_err(core, c, op, ACCEL_EINVAL, true, "%s: a key with a NUL byte",
                  bootstrap__op_name(op));
        return;
    }
    switch ((enum bootstrap__op)op) {
    case STORE_HELLO:
        c->rank = (unsigned)((uint64_t)f->arg >> 32);
        c->world = (unsigned)((uint64_t)f->arg & 0xffffffffu);
        reply(core, c, op, ACCEL_OK, 0, NULL, 0);
        return;
    case STORE_SET:
        e = entry_of(core, c, op, key, f->klen);
        if (e == NULL || !store_value(core, c, op, e, key + f->klen, f->vlen))
            return;
        reply(core, c, op, ACCEL_OK, 0, NULL, 0);
        wake(core, e);
        return;
    case STORE_GET:
    case STORE_WAIT:
        e = entry_of(core, c, op, key, f->klen);
        if (e == NULL)
            return;
        if (e->set)
            answer(core, c, e, op);
        else if (f->timeout_ms == 0)
            reply(core, c, op, ACCEL_ETIMEDOUT, 0, NULL, 0);
        else
            park(core, c, e, op, 0, now + f->timeout_ms * 1e-3);
        return;
    case STORE_ADD: {
        char text[24];
        int64_t v = 0;
        int n;
        e = entry_of(core, c, op, key, f->klen);
        if (e == NULL)
            return;
        if (e->set && !parse_i64(e->val, e->vlen, &v)) {
            reply_err(core, c, op, ACCEL_EINVAL, false,
                      "add: the value of '%.*s' is not an integer", (int)f->klen,
                      (const char *)key);
            return;
        }
        if ((f->arg > 0 && v > INT64_MAX - f->arg) || (f->arg < 0 && v < INT64_MIN - f->arg)) {
            reply_err(core, c, op, ACCEL_EINVAL, false, "add: '%.*s' would overflow", (int)f->klen,
                      (const char *)key);
            return;
        }
        v += f->arg;
        n = snprintf(text, sizeof(text), "%" PRId64, v);
        if (!store_value(core, c, op, e, text, (uint32_t)n))
            return;
        reply(core, c, op, ACCEL_OK, v, NULL, 0);
        wake(core, e);
        return;
    }
    case STORE_BARRIER:
        bkey[0] = '\0'; /* the barrier namespace (see the file comment) */
        memcpy(bkey + 1, key, f->klen);
        e = entry_of(core, c, op, bkey, f->klen + 1);
        if (e == NULL)
            return;
        e->count++;
        if (e->count >= f->arg) {
            reply(core, c, op, ACCEL_OK, e->count, NULL, 0);
            wake(core, e);
        } else if (f->timeout_ms == 0) {
            reply(core, c, op, ACCEL_ETIMEDOUT, e->count, NULL, 0);
        } else {
            park(core, c, e, op, f->arg, now + f->timeout_ms * 1e-3);
        }
        return;
    case STORE_OP_END:
        break;
    }
    reply_err(core, c, op, ACCEL_EPARSE, true, "unknown op %u", op);
}

/* Forgets what c's partial request had counted in core->inflight. */
static void release(struct bootstrap__core *core, struct bootstrap__conn *c)
{
    core->inflight -= c->reserved;
    c->reserved = 0;
}

/* Checks the nonce of a request from its header alone, before any of its
 * body is buffered (a stranger may not make the server hold megabytes); a
 * connection that presented the right one is a client of the job from then
 * on.  False after an error reply, which never tells the job's nonce. */
static bool check_nonce(struct bootstrap__core *core, struct bootstrap__conn *c,
                        const struct bootstrap__frame *f)
{
    if (f->nonce != core->nonce) {
        reply_err(core, c, f->op, ACCEL_ENONCE, true,
                  "nonce %016" PRIx64 " is not this job's: a client of another job or of an "
                  "earlier step",
                  f->nonce);
        return false;
    }
    c->authed = true;
    return true;
}

/* Checks the room for the body of a request whose header has come but not
 * all of its body, among what the server holds and buffers for everyone.
 * False after an error reply. */
static bool admit_partial(struct bootstrap__core *core, struct bootstrap__conn *c,
                          const struct bootstrap__frame *f, size_t total)
{
    if (c->reserved >= total)
        return true;
    release(core, c);
    if (core->bytes + core->inflight + total > core->max_bytes) {
        reply_err(core, c, f->op, ACCEL_ETOOBIG, true,
                  "the store holds %" PRIu64 " bytes and buffers %" PRIu64
                  " of requests; this %zu-byte %s would pass its limit of %" PRIu64,
                  core->bytes, core->inflight, total, bootstrap__op_name(f->op), core->max_bytes);
        return false;
    }
    c->reserved = total;
    core->inflight += total;
    return true;
}

void bootstrap__core_input(struct bootstrap__core *core, struct bootstrap__conn *c, double now)
{
    size_t off = 0;

    while (!c->dead && !c->closing && c->park_on == NULL &&
           c->out_len - c->out_off < STORE_OUT_HIGH && c->in_len - off >= STORE_HDR) {
        struct bootstrap__frame f;
        struct accel_error e;
        size_t total;

        if (bootstrap__frame_decode(c->in + off, false, &f, &e) != ACCEL_OK) {
            unsigned op = c->in[off + 5] & ~(unsigned)STORE_REPLY;
            if (op < STORE_HELLO || op >= STORE_OP_END)
                op = STORE_HELLO;
            reply_err(core, c, op, e.code, true, "%s", e.msg);
            break;
        }
        if (!check_nonce(core, c, &f))
            break;
        total = STORE_HDR + (size_t)f.klen + f.vlen;
        if (c->in_len - off < total) {
            admit_partial(core, c, &f, total);
            break;
        }
        release(core, c);
        handle(core, c, &f, c->in + off + STORE_HDR, now);
        off += total;
    }
    if (c->closing || c->dead) { /* what it sent after its refusal is never read */
        release(core, c);
        off = c->in_len;
    }
    if (off > 0) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    if (c->in_len == 0 && c->in_cap > (64u << 10)) { /* a big set passed: give it back */
        accel_free(c->in);
        c->in = NULL;
        c->in_cap = 0;
    }
}

void bootstrap__core_drop(struct bootstrap__core *core, struct bootstrap__conn *c)
{
    unpark(core, c);
    release(core, c);
    if (c->touched) {
        if (c->tprev != NULL)
            c->tprev->tnext = c->tnext;
        else
            core->touched = c->tnext;
        if (c->tnext != NULL)
            c->tnext->tprev = c->tprev;
        c->touched = false;
        c->tnext = c->tprev = NULL;
    }
    accel_free(c->in);
    accel_free(c->out);
    c->in = c->out = NULL;
    c->in_len = c->in_cap = c->out_off = c->out_len = c->out_cap = 0;
}
