/*
 * cfgcache.c: the configs of recent reviews, each loaded once.  The pods of
 * one Job carry the same config, and loading it (YAML, schema, site policy,
 * resolution: accel_cfg_load_buffer) was half of a review's time.  An entry
 * is the result of that load for exactly what decides it: the source's name
 * (it is in the findings' locations), the config's bytes, the accelerate
 * version, the Job's node count, the pod's GPU limit, and the site policy,
 * by its generation.  Entries are shared read-only by the reviews that hold
 * them, counted by an atomic reference count (the cache holds one while an
 * entry is in it), and freed by whoever lets go last.
 * A load that ran out of memory is not kept; neither is a config over
 * WH_CFG_CACHE_MAX_TEXT bytes; and the texts kept stay under
 * WH_CFG_CACHE_MAX_BYTES in all (older entries go first), so that pods with
 * ever new configs cannot grow the cache past that.  No I/O; every function
 * is thread-safe.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "accel/alloc.h"
#include "webhook.h"

struct wh_cfg_cache {
    pthread_mutex_t mu;
    uint64_t tick;                   /* the clock of last use, for LRU */
    unsigned long long hits, misses; /* under mu */
    size_t bytes;                    /* of the texts kept, under mu */
    size_t n;                        /* slots */
    struct wh_cfg_entry *slot[];     /* NULL: empty */
};

enum accel_err wh_cfg_cache_new(struct wh_cfg_cache **out, size_t slots)
{
    struct wh_cfg_cache *c;

    *out = NULL;
    if (slots == 0)
        return ACCEL_OK;
    c = accel_calloc(1, sizeof(*c) + slots * sizeof(c->slot[0]));
    if (c == NULL)
        return ACCEL_ENOMEM;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        accel_free(c);
        return ACCEL_ENOMEM;
    }
    c->n = slots;
    *out = c;
    return ACCEL_OK;
}

static void entry_free(struct wh_cfg_entry *e)
{
    accel_cfg_free(&e->cfg);
    accel_diags_free(&e->diags);
    accel_free(e->name);
    accel_free(e->text);
    accel_free(e);
}

/* Drops one reference; the entry goes with the last. */
static void unref(struct wh_cfg_entry *e)
{
    if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1)
        entry_free(e);
}

/* Takes slot i's entry out of the cache (its memory goes with its last
 * reference: the caller drops the cache's, after unlocking).  Under c->mu. */
static struct wh_cfg_entry *take(struct wh_cfg_cache *c, size_t i)
{
    struct wh_cfg_entry *e = c->slot[i];

    c->slot[i] = NULL;
    e->cached = false;
    c->bytes -= e->len;
    return e;
}

void wh_cfg_cache_free(struct wh_cfg_cache *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        if (c->slot[i] != NULL)
            unref(take(c, i));
    pthread_mutex_destroy(&c->mu);
    accel_free(c);
}

void wh_cfg_cache_stats(struct wh_cfg_cache *c, unsigned long long *hits,
                        unsigned long long *misses)
{
    *hits = *misses = 0;
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    pthread_mutex_unlock(&c->mu);
}

static bool same_key(const struct wh_cfg_entry *e, const struct wh_cfg_key *k, uint64_t hash)
{
    return e->hash == hash && e->len == k->len && e->version == k->opts->version &&
           e->nodes == k->opts->nodes && e->gpus == k->opts->gpus_per_node &&
           e->site == k->opts->site && e->site_gen == k->site_gen &&
           strcmp(e->name, k->name) == 0 && memcmp(e->text, k->text, k->len) == 0;
}

/* The cached entry for k, with a reference for the caller; NULL if none.
 * Under c->mu. */
static struct wh_cfg_entry *find(struct wh_cfg_cache *c, const struct wh_cfg_key *k, uint64_t hash)
{
    for (size_t i = 0; i < c->n; i++) {
        struct wh_cfg_entry *e = c->slot[i];
        if (e != NULL && same_key(e, k, hash)) {
            /* the cache's reference keeps it above 0 while we hold mu */
            atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
            e->used = ++c->tick;
            return e;
        }
    }
    return NULL;
}

/* Puts e (a new load) in an empty slot, making room first: the least
 * recently used entries go while there is no empty slot or the texts would
 * pass the byte budget.  The entries taken out are added to out[] (at most
 * c->n), for the caller to release after unlocking.  Under c->mu. */
static size_t insert(struct wh_cfg_cache *c, struct wh_cfg_entry *e, struct wh_cfg_entry **out)
{
    size_t nout = 0, empty;

    for (;;) {
        size_t victim = c->n;
        empty = c->n;
        for (size_t i = 0; i < c->n; i++) {
            if (c->slot[i] == NULL)
                empty = i;
            else if (victim == c->n || c->slot[i]->used < c->slot[victim]->used)
                victim = i;
        }
        if (empty < c->n && c->bytes + e->len <= WH_CFG_CACHE_MAX_BYTES)
            break;
        out[nout++] = take(c, victim); /* there is one: no empty slot, or bytes in use */
    }
    e->cached = true;
    atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed); /* the cache's */
    e->used = ++c->tick;
    c->bytes += e->len;
    c->slot[empty] = e;
    return nout;
}

/* A new entry for k, loaded (the caller's reference only); with `keep` a
 * copy of the key, for the cache. */
static enum accel_err load(const struct wh_cfg_key *k, uint64_t hash, bool keep,
                           struct wh_cfg_entry **out)
{
    struct wh_cfg_entry *e = accel_calloc(1, sizeof(*e));
    struct accel_error err;

    *out = NULL;
    if (e == NULL)
        return ACCEL_ENOMEM;
    accel_diags_init(&e->diags);
    accel_error_clear(&err);
    atomic_init(&e->refs, 1);
    e->rc = accel_cfg_load_buffer(&e->cfg, k->name, k->text, k->len, k->opts, &e->diags, &err);
    accel_diags_sort(&e->diags);
    if (e->rc == ACCEL_ENOMEM || e->diags.oom) {
        entry_free(e);
        return ACCEL_ENOMEM;
    }
    if (keep) {
        e->hash = hash;
        e->len = k->len;
        e->version = k->opts->version;
        e->nodes = k->opts->nodes;
        e->gpus = k->opts->gpus_per_node;
        e->site = k->opts->site;
        e->site_gen = k->site_gen;
        e->name = accel_strdup(k->name);
        e->text = accel_malloc(k->len ? k->len : 1);
        if (e->name == NULL || e->text == NULL) {
            entry_free(e);
            return ACCEL_ENOMEM;
        }
        memcpy(e->text, k->text, k->len);
    }
    *out = e;
    return ACCEL_OK;
}

enum accel_err wh_cfg_get(struct wh_cfg_cache *c, const struct wh_cfg_key *k,
                          const struct wh_cfg_entry **out)
{
    uint64_t hash = XXH3_64bits(k->text, k->len);
    bool keep = c != NULL && k->len <= WH_CFG_CACHE_MAX_TEXT;
    struct wh_cfg_entry *e = NULL, *have = NULL, **gone = NULL;
    size_t ngone = 0;
    enum accel_err rc;

    *out = NULL;
    if (keep) {
        pthread_mutex_lock(&c->mu);
        e = find(c, k, hash);
        if (e != NULL)
            c->hits++;
        else
            c->misses++;
        pthread_mutex_unlock(&c->mu);
        if (e != NULL) {
            *out = e;
            return ACCEL_OK;
        }
        gone = accel_calloc(c->n, sizeof(*gone));
        if (gone == NULL)
            return ACCEL_ENOMEM;
    }
    /* loaded outside the lock: another review may load the same meanwhile,
     * and then the first to insert wins */
    rc = load(k, hash, keep, &e);
    if (rc == ACCEL_OK && keep) {
        pthread_mutex_lock(&c->mu);
        have = find(c, k, hash);
        if (have == NULL)
            ngone = insert(c, e, gone);
        pthread_mutex_unlock(&c->mu);
        if (have != NULL) {
            unref(e); /* only ours */
            e = have;
        }
        for (size_t i = 0; i < ngone; i++) /* the cache's references, dropped unlocked */
            unref(gone[i]);
    }
    accel_free(gone);
    *out = rc == ACCEL_OK ? e : NULL;
    return rc;
}

void wh_cfg_release(const struct wh_cfg_entry *e)
{
    if (e != NULL)
        unref((struct wh_cfg_entry *)e);
}
