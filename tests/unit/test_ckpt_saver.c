/*
 * test_ckpt_saver.c: savers (accel/ckpt.h): the root's lock for a saver's
 * life, synchronous and asynchronous saves (the snapshot taken at start,
 * busy refused or waited for, a rank's failure reported by every rank's
 * poll and nothing committed), two tiers (local writes copied up, local
 * copies trimmed after the commit), resuming from a newer local step every
 * rank still has (and not when one rank lost it), and reads that prefer a
 * local copy and fall back to the root's when it is not the committed one.
 * Ranks are threads; their collective step is a barrier taking the minimum.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "accel/alloc.h"
#include "accel/ckpt.h"
#include "barrier.h"
#include "test.h"

#define MAXW 4
#define NT 3 /* tensors */

static char tmpdir[256];

/* ---------------------------------------------------------------- ranks as threads */

struct rank {
    struct test_barrier *b;
    unsigned rank, world;
    struct accel_ckpt_saver *sv;
    const char *root, *local;
    unsigned keep;
    enum accel_err rc;
    struct accel_error err;
    unsigned long step; /* resume's */
    float *t[NT];       /* this rank's slices */
    size_t lo[NT], hi[NT];
};

static enum accel_err min_fn(void *ctx, uint64_t mine, uint64_t *min, struct accel_error *err)
{
    struct rank *r = ctx;
    return test_barrier_min(r->b, r->rank, mine, min, 30, err);
}

/* the model: tensor k has 1000 * (k + 1) + 7 elements, value i + step */
static size_t numel(unsigned k)
{
    return 1000 * (k + 1) + 7;
}

static float value(unsigned k, size_t i, unsigned long step)
{
    return (float)i * 0.5f + (float)k + (float)step * 1000.0f;
}

static void fill(struct rank *r, unsigned long step)
{
    for (unsigned k = 0; k < NT; k++) {
        r->lo[k] = numel(k) * r->rank / r->world;
        r->hi[k] = numel(k) * (r->rank + 1) / r->world;
        if (!r->t[k])
            r->t[k] = malloc(numel(k) * sizeof(float));
        for (size_t i = r->lo[k]; i < r->hi[k]; i++)
            r->t[k][i - r->lo[k]] = value(k, i, step);
    }
}

static const char *const names[NT] = {"h.0.attn.weight", "h.0.mlp.weight", "lm_head.weight"};

static void pieces(struct rank *r, struct accel_ckpt_piece *p)
{
    for (unsigned k = 0; k < NT; k++)
        p[k] = (struct accel_ckpt_piece){
            {names[k], ACCEL_F32, 1, {numel(k)}}, r->lo[k], r->hi[k], r->t[k]};
}

static struct accel_ckpt_saver_opts saver_opts(struct rank *r)
{
    return (struct accel_ckpt_saver_opts){r->root, r->local,   r->rank, r->world, r->keep, 1,
                                          0,       "test job", min_fn,  r,        NULL};
}

typedef void (*rank_fn)(struct rank *r);

/* fn on `world` threads, rank r's fields from tmpl (its local tier is
 * local<r> under tmpdir when tmpl->local is set). */
static void world_run(unsigned world, const struct rank *tmpl, rank_fn fn, struct rank *out)
{
    struct test_barrier b = TEST_BARRIER_INIT(world);
    static char locals[MAXW][300];
    pthread_t th[MAXW];

    for (unsigned r = 0; r < world; r++) {
        out[r] = *tmpl;
        out[r].b = &b;
        out[r].rank = r;
        out[r].world = world;
        if (tmpl->local) {
            snprintf(locals[r], sizeof locals[r], "%s/%s%u", tmpdir, tmpl->local, r);
            out[r].local = locals[r];
        }
        ASSERT(pthread_create(&th[r], NULL, (void *(*)(void *))(void (*)(void))fn, &out[r]) == 0);
    }
    for (unsigned r = 0; r < world; r++)
        ASSERT(pthread_join(th[r], NULL) == 0);
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* the root's step, every tensor whole, compared with value(., ., want) */
static void check_step(const char *root, unsigned long step, unsigned long want)
{
    char dir[512];
    struct accel_ckpt *c;
    struct accel_error err;

    snprintf(dir, sizeof dir, "%s/step-%08lu", root, step);
    if (accel_ckpt_open(&c, dir, &err) != ACCEL_OK)
        test_fail(__FILE__, __LINE__, "open %s: %s", dir, err.msg);
    ASSERT_INT_EQ(accel_ckpt_step(c), step);
    for (unsigned k = 0; k < NT; k++) {
        float *v = malloc(numel(k) * sizeof(float));
        ASSERT_ACCEL_OK(accel_ckpt_read(c, names[k], ACCEL_F32, 0, numel(k), v, &err), &err);
        for (size_t i = 0; i < numel(k); i++)
            if (v[i] != value(k, i, want))
                test_fail(__FILE__, __LINE__, "%s[%zu] = %g, want %g", names[k], i, (double)v[i],
                          (double)value(k, i, want));
        free(v);
    }
    ASSERT_STR_EQ(accel_ckpt_meta(c, "seed"), "1337");
    accel_ckpt_close(c);
}

static const struct accel_ckpt_kv meta[] = {{"seed", "1337"}};

/* ---------------------------------------------------------------- rank bodies */

static void open_saver(struct rank *r)
{
    const struct accel_ckpt_saver_opts o = saver_opts(r);
    r->rc = accel_ckpt_saver_open(&r->sv, &o, &r->err);
}

static void close_saver(struct rank *r)
{
    accel_ckpt_saver_close(r->sv);
    r->sv = NULL;
}

/* open, save steps 10 and 20 synchronously, close */
static void sync_saves(struct rank *r)
{
    struct accel_ckpt_piece p[NT];

    open_saver(r);
    for (unsigned long s = 10; r->rc == ACCEL_OK && s <= 20; s += 10) {
        struct accel_ckpt_save_req q = {s, meta, 1, p, NT};
        fill(r, s);
        pieces(r, p);
        r->rc = accel_ckpt_saver_save(r->sv, &q, &r->err);
    }
    close_saver(r);
}

/* step 30 started, then the tensors changed at once; polled until committed */
static void async_save(struct rank *r)
{
    struct accel_ckpt_piece p[NT];
    struct accel_ckpt_save_req q = {30, meta, 1, p, NT};
    unsigned long done = 0;
    int polls = 0;

    open_saver(r);
    fill(r, 30);
    pieces(r, p);
    if (r->rc == ACCEL_OK)
        r->rc = accel_ckpt_saver_start(r->sv, &q, ACCEL_CKPT_REFUSE, &r->err);
    fill(r, 99); /* training went on: the snapshot must not see it */
    if (r->rc == ACCEL_OK && accel_ckpt_saver_pending(r->sv) != 30)
        r->rc = ACCEL_EINVAL;
    /* a second save while one is in flight: refused */
    if (r->rc == ACCEL_OK) {
        struct accel_error e;
        struct accel_ckpt_save_req q2 = {31, meta, 1, p, NT};
        if (accel_ckpt_saver_start(r->sv, &q2, ACCEL_CKPT_REFUSE, &e) != ACCEL_EBUSY ||
            !strstr(e.msg, "still being saved"))
            r->rc = ACCEL_EINVAL;
    }
    while (r->rc == ACCEL_OK && done == 0 && polls++ < 100000) {
        r->rc = accel_ckpt_saver_poll(r->sv, false, &done, &r->err);
        usleep(100);
    }
    if (r->rc == ACCEL_OK && (done != 30 || accel_ckpt_saver_pending(r->sv) != 0))
        r->rc = ACCEL_EINVAL;
    /* WAIT: step 40 started while 50 is asked for: 40 finishes first */
    if (r->rc == ACCEL_OK) {
        struct accel_ckpt_save_req q4 = {40, meta, 1, p, NT}, q5 = {50, meta, 1, p, NT};
        fill(r, 40);
        pieces(r, p);
        r->rc = accel_ckpt_saver_start(r->sv, &q4, ACCEL_CKPT_REFUSE, &r->err);
        fill(r, 50);
        if (r->rc == ACCEL_OK)
            r->rc = accel_ckpt_saver_start(r->sv, &q5, ACCEL_CKPT_WAIT, &r->err);
        if (r->rc == ACCEL_OK)
            r->rc = accel_ckpt_saver_poll(r->sv, true, &done, &r->err);
        if (r->rc == ACCEL_OK && done != 50)
            r->rc = ACCEL_EINVAL;
    }
    /* deferred: the writer copies; changed once wait_staged says it has */
    if (r->rc == ACCEL_OK) {
        struct accel_ckpt_save_req q7 = {70, meta, 1, p, NT, true};
        fill(r, 70);
        pieces(r, p);
        r->rc = accel_ckpt_saver_start(r->sv, &q7, ACCEL_CKPT_REFUSE, &r->err);
        accel_ckpt_saver_wait_staged(r->sv);
        fill(r, 98);
        if (r->rc == ACCEL_OK)
            r->rc = accel_ckpt_saver_poll(r->sv, true, &done, &r->err);
        if (r->rc == ACCEL_OK && done != 70)
            r->rc = ACCEL_EINVAL;
        accel_ckpt_saver_wait_staged(r->sv); /* none in flight: at once */
    }
    close_saver(r);
}

/* rank 1's piece is past its tensor: every rank's poll fails, nothing committed */
static void failed_save(struct rank *r)
{
    struct accel_ckpt_piece p[NT];
    struct accel_ckpt_save_req q = {60, meta, 1, p, NT};
    unsigned long done = 0;

    open_saver(r);
    fill(r, 60);
    pieces(r, p);
    if (r->rank == 1)
        p[0].hi = numel(0) + 1;
    if (r->rc == ACCEL_OK)
        r->rc = accel_ckpt_saver_start(r->sv, &q, ACCEL_CKPT_REFUSE, &r->err);
    if (r->rc == ACCEL_OK)
        r->rc = accel_ckpt_saver_poll(r->sv, true, &done, &r->err);
    close_saver(r);
}

/* ---------------------------------------------------------------- cases */

/* A case's directory, its root (tmpdir/root) and tmpl's fields for it:
 * that root, and a local tier per rank named local<r> when `local`. */
static void start_case(char *root, size_t len, struct rank *tmpl, const char *local)
{
    test_mkdtemp(tmpdir, sizeof tmpdir, "saver");
    snprintf(root, len, "%s/root", tmpdir);
    tmpl->root = root;
    tmpl->local = local;
}

TEST(lock_for_the_savers_life)
{
    struct rank tmpl = {0}, out[MAXW], again[1];
    char root[300];

    start_case(root, sizeof root, &tmpl, NULL);
    world_run(1, &tmpl, open_saver, out);
    ASSERT_ACCEL_OK(out[0].rc, &out[0].err);
    /* a second job's saver (here a second thread of this process) */
    world_run(1, &tmpl, open_saver, again);
    ASSERT_ERR(again[0].rc, &again[0].err, ACCEL_EBUSY, "in use by another job");
    ASSERT_CONTAINS(again[0].err.msg, "test job, pid");
    close_saver(&out[0]);
    world_run(1, &tmpl, open_saver, again);
    ASSERT_ACCEL_OK(again[0].rc, &again[0].err);
    close_saver(&again[0]);
    test_rmtree(tmpdir);
}

TEST(sync_and_async_saves)
{
    struct rank tmpl = {0}, out[MAXW];
    char root[300];

    start_case(root, sizeof root, &tmpl, NULL);
    tmpl.keep = 3;
    world_run(3, &tmpl, sync_saves, out);
    for (unsigned r = 0; r < 3; r++)
        ASSERT_ACCEL_OK(out[r].rc, &out[r].err);
    check_step(root, 10, 10);
    check_step(root, 20, 20);
    world_run(3, &tmpl, async_save, out);
    for (unsigned r = 0; r < 3; r++)
        ASSERT_ACCEL_OK(out[r].rc, &out[r].err);
    check_step(root, 40, 40); /* each the snapshot, not what training wrote after start */
    check_step(root, 50, 50);
    check_step(root, 70, 70); /* deferred: what was there until wait_staged */
    ASSERT(!exists(strcat(strcpy((char[400]){0}, root), "/step-00000030"))); /* keep = 3 */
    ASSERT(exists(strcat(strcpy((char[400]){0}, root), "/latest")));
    world_run(3, &tmpl, failed_save, out);
    ASSERT_ERR(out[1].rc, &out[1].err, ACCEL_EINVAL, "past its");
    ASSERT_ERR(out[0].rc, &out[0].err, ACCEL_EPEER, "nothing was committed");
    ASSERT_INT_EQ(out[2].rc, ACCEL_EPEER);
    ASSERT(!exists(strcat(strcpy((char[400]){0}, root), "/step-00000060/manifest.json")));
    for (unsigned r = 0; r < 3; r++)
        for (unsigned k = 0; k < NT; k++)
            free(out[r].t[k]);
    test_rmtree(tmpdir);
}

/* two tiers: steps 10 and 20 written locally, copied up, committed; each
 * rank's local tier keeps step 20 only */
static void two_tier_saves(struct rank *r)
{
    sync_saves(r);
}

/* step 30 started; the saver closed before any poll (the job died before
 * the commit): its local copies are written (and copied up) */
static void dies_before_commit(struct rank *r)
{
    struct accel_ckpt_piece p[NT];
    struct accel_ckpt_save_req q = {30, meta, 1, p, NT};

    open_saver(r);
    fill(r, 30);
    pieces(r, p);
    if (r->rc == ACCEL_OK)
        r->rc = accel_ckpt_saver_start(r->sv, &q, ACCEL_CKPT_REFUSE, &r->err);
    close_saver(r);
}

static void resume(struct rank *r)
{
    open_saver(r);
    if (r->rc == ACCEL_OK)
        r->rc = accel_ckpt_saver_resume(r->sv, &r->step, &r->err);
    close_saver(r);
}

/* tmpdir/<local><rank>/<root's tier>[/step-<step>[/file]]: the tier of a
 * root is named after its last component and the XXH3 of its name */
static void local_path(char *buf, size_t len, const char *root, const char *local, unsigned rank,
                       unsigned long step, const char *file)
{
    const char *base = strrchr(root, '/') ? strrchr(root, '/') + 1 : root;
    int at = snprintf(buf, len, "%s/%s%u/%s-%016llx", tmpdir, local, rank, base,
                      (unsigned long long)XXH3_64bits(root, strlen(root)));

    if (step)
        at += snprintf(buf + at, len - (size_t)at, "/step-%08lu", step);
    if (file)
        snprintf(buf + at, len - (size_t)at, "/%s", file);
}

/* this rank's slice of every tensor through the saver (its local copy
 * first: what a resume at the same world size reads) at r->step */
static void read_step(struct rank *r)
{
    struct accel_ckpt *c = NULL;

    open_saver(r);
    fill(r, r->step); /* the slices' bounds */
    if (r->rc == ACCEL_OK)
        r->rc = accel_ckpt_saver_open_step(r->sv, r->step, &c, &r->err);
    for (unsigned k = 0; r->rc == ACCEL_OK && k < NT; k++) {
        float *v = malloc(numel(k) * sizeof(float));
        r->rc = accel_ckpt_read(c, names[k], ACCEL_F32, r->lo[k], r->hi[k], v, &r->err);
        for (size_t i = r->lo[k]; r->rc == ACCEL_OK && i < r->hi[k]; i++)
            if (v[i - r->lo[k]] != value(k, i, r->step))
                r->rc = accel_error_set(&r->err, ACCEL_EIO, "%s[%zu] = %g", names[k], i,
                                        (double)v[i - r->lo[k]]);
        free(v);
    }
    accel_ckpt_close(c);
    close_saver(r);
}

/* flips one byte of the last 64 of a file (tensor data) */
static void corrupt(const char *path)
{
    int fd = open(path, O_RDWR);
    struct stat st;
    unsigned char b;

    ASSERT(fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 64);
    ASSERT(pread(fd, &b, 1, st.st_size - 40) == 1);
    b ^= 0x5a;
    ASSERT(pwrite(fd, &b, 1, st.st_size - 40) == 1);
    close(fd);
}

static void copy_file(const char *from, const char *to)
{
    char buf[65536];
    int a = open(from, O_RDONLY), b = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ssize_t n;

    ASSERT(a >= 0 && b >= 0);
    while ((n = read(a, buf, sizeof buf)) > 0)
        ASSERT(write(b, buf, (size_t)n) == n);
    close(a);
    close(b);
}

static void each_ok(const struct rank *out, unsigned world)
{
    for (unsigned r = 0; r < world; r++)
        ASSERT_ACCEL_OK(out[r].rc, &out[r].err);
}

static void each_resumed(const struct rank *out, unsigned world, unsigned long step)
{
    for (unsigned r = 0; r < world; r++) {
        ASSERT_ACCEL_OK(out[r].rc, &out[r].err);
        ASSERT_INT_EQ(out[r].step, step);
    }
}

static void free_slices(struct rank *out, unsigned world)
{
    for (unsigned r = 0; r < world; r++)
        for (unsigned k = 0; k < NT; k++) {
            free(out[r].t[k]);
            out[r].t[k] = NULL;
        }
}

/* the root's copy of step's rank file r (of 2) */
static void root_file(char *buf, size_t len, const char *root, unsigned long step, unsigned r)
{
    snprintf(buf, len, "%s/step-%08lu/rank-%05u-of-00002.safetensors", root, step, r);
}

TEST(two_tiers_and_resume)
{
    struct rank tmpl = {0}, out[MAXW];
    char root[300], path[600], file[64], saved[600];

    start_case(root, sizeof root, &tmpl, "local");
    world_run(2, &tmpl, two_tier_saves, out);
    each_ok(out, 2);
    check_step(root, 10, 10);
    check_step(root, 20, 20);
    for (unsigned r = 0; r < 2; r++) {
        snprintf(file, sizeof file, "rank-%05u-of-00002.safetensors", r);
        local_path(path, sizeof path, root, "local", r, 20, file);
        ASSERT(exists(path));
        local_path(path, sizeof path, root, "local", r, 10, NULL);
        ASSERT(!exists(path)); /* keep_local 1: trimmed after 20's commit */
    }

    /* the job dies after the local writes of step 30, before its commit,
     * and one rank's copy never reached the root */
    world_run(2, &tmpl, dies_before_commit, out);
    each_ok(out, 2);
    snprintf(path, sizeof path, "%s/step-00000030/manifest.json", root);
    ASSERT(!exists(path));
    root_file(path, sizeof path, root, 30, 1);
    ASSERT(unlink(path) == 0);
    /* and the root cannot take it (its step directory is a file): the
     * resume fails, the local copies are kept for the next try */
    snprintf(path, sizeof path, "%s/step-00000030", root);
    test_rmtree(path);
    ASSERT(close(open(path, O_WRONLY | O_CREAT, 0644)) == 0);
    world_run(2, &tmpl, resume, out);
    for (unsigned r = 0; r < 2; r++)
        ASSERT_ERR(out[r].rc, &out[r].err, ACCEL_EINVAL, "the local copies are kept");
    local_path(path, sizeof path, root, "local", 1, 30, "rank-00001-of-00002.safetensors");
    ASSERT(exists(path));
    snprintf(path, sizeof path, "%s/step-00000030", root);
    ASSERT(unlink(path) == 0);
    world_run(2, &tmpl, resume, out);
    each_resumed(out, 2, 30);
    check_step(root, 30, 30); /* committed from the local copies */

    /* reads prefer the local copy: the root's copy damaged, still right */
    root_file(path, sizeof path, root, 30, 0);
    snprintf(saved, sizeof saved, "%s/saved", tmpdir);
    copy_file(path, saved);
    corrupt(path);
    tmpl.step = 30;
    world_run(2, &tmpl, read_step, out);
    each_ok(out, 2);
    /* and a damaged local copy falls back to the root's */
    copy_file(saved, path);
    local_path(path, sizeof path, root, "local", 0, 30, "rank-00000-of-00002.safetensors");
    corrupt(path);
    world_run(2, &tmpl, read_step, out);
    each_ok(out, 2);
    free_slices(out, 2);
    test_rmtree(tmpdir);
}

/* a damaged local copy is never committed: the resume takes the root's
 * newest, and the local attempts past it are removed */
TEST(damaged_local_copy_is_not_committed)
{
    struct rank tmpl = {0}, out[MAXW];
    char root[300], path[600];

    start_case(root, sizeof root, &tmpl, "local");
    world_run(2, &tmpl, two_tier_saves, out);
    world_run(2, &tmpl, dies_before_commit, out);
    each_ok(out, 2);
    local_path(path, sizeof path, root, "local", 1, 30, "rank-00001-of-00002.safetensors");
    corrupt(path);
    world_run(2, &tmpl, resume, out);
    each_resumed(out, 2, 20);
    snprintf(path, sizeof path, "%s/step-00000030/manifest.json", root);
    ASSERT(!exists(path));
    for (unsigned r = 0; r < 2; r++) {
        local_path(path, sizeof path, root, "local", r, 30, NULL);
        ASSERT(!exists(path));
    }
    check_step(root, 20, 20);
    free_slices(out, 2);
    test_rmtree(tmpdir);
}

/* a node lost before its copy reached the root: the root's newest; and a
 * second root's tier beside the first in the same local directory */
TEST(node_lost_and_two_roots_share_a_local_directory)
{
    struct rank tmpl = {0}, out[MAXW];
    char root[300], root2[300], path[600];

    start_case(root, sizeof root, &tmpl, "local");
    snprintf(root2, sizeof root2, "%s/root2", tmpdir);
    world_run(2, &tmpl, two_tier_saves, out);
    each_ok(out, 2);
    tmpl.root = root2;
    world_run(2, &tmpl, two_tier_saves, out);
    world_run(2, &tmpl, dies_before_commit, out);
    each_ok(out, 2);
    local_path(path, sizeof path, root2, "local", 1, 0, NULL);
    test_rmtree(path);
    root_file(path, sizeof path, root2, 30, 1);
    ASSERT(unlink(path) == 0);
    world_run(2, &tmpl, resume, out);
    each_resumed(out, 2, 20);
    local_path(path, sizeof path, root2, "local", 0, 30, NULL);
    ASSERT(!exists(path)); /* an attempt past the step resumed: removed */
    snprintf(path, sizeof path, "%s/step-00000030/manifest.json", root2);
    ASSERT(!exists(path));
    check_step(root2, 20, 20);
    /* the first root's tier, untouched */
    for (unsigned r = 0; r < 2; r++) {
        local_path(path, sizeof path, root, "local", r, 20, NULL);
        ASSERT(exists(path));
    }
    free_slices(out, 2);
    test_rmtree(tmpdir);
}

/* step 25 saved synchronously (a run whose local tier is elsewhere) */
static void save_25(struct rank *r)
{
    struct accel_ckpt_piece p[NT];
    struct accel_ckpt_save_req q = {25, meta, 1, p, NT};

    open_saver(r);
    if (r->rc == ACCEL_OK)
        r->rc = accel_ckpt_saver_resume(r->sv, &r->step, &r->err);
    fill(r, 25);
    pieces(r, p);
    if (r->rc == ACCEL_OK)
        r->rc = accel_ckpt_saver_save(r->sv, &q, &r->err);
    close_saver(r);
}

/* local copies of another run are not committed: not once another run
 * moved the root on since theirs went on from it, nor when the ranks'
 * copies are of different runs */
TEST(local_copies_of_other_runs_are_not_committed)
{
    struct rank tmpl = {0}, out[MAXW];
    char root[300], path[600], stash[600];

    start_case(root, sizeof root, &tmpl, "local");
    /* run A commits 10 and 20, dies with 30 in its local tiers; run B (on
     * other nodes) goes on from 20 and commits 25 */
    world_run(2, &tmpl, two_tier_saves, out);
    world_run(2, &tmpl, dies_before_commit, out);
    each_ok(out, 2);
    for (unsigned r = 0; r < 2; r++) {
        root_file(path, sizeof path, root, 30, r);
        ASSERT(unlink(path) == 0);
    }
    tmpl.local = "other";
    world_run(2, &tmpl, save_25, out);
    each_resumed(out, 2, 20);
    check_step(root, 25, 25);
    /* run C, on A's nodes: 25, not A's 30 */
    tmpl.local = "local";
    world_run(2, &tmpl, resume, out);
    each_resumed(out, 2, 25);
    snprintf(path, sizeof path, "%s/step-00000030/manifest.json", root);
    ASSERT(!exists(path));
    local_path(path, sizeof path, root, "local", 0, 30, NULL);
    ASSERT(!exists(path));

    /* run D dies with 30 locally; rank 1's copy kept; run E (from 25 as
     * well) dies with 30 locally; rank 1's copy swapped for D's */
    world_run(2, &tmpl, dies_before_commit, out);
    each_ok(out, 2);
    local_path(path, sizeof path, root, "local", 1, 30, "rank-00001-of-00002.safetensors");
    snprintf(stash, sizeof stash, "%s/stash", tmpdir);
    copy_file(path, stash);
    for (unsigned r = 0; r < 2; r++) {
        local_path(path, sizeof path, root, "local", r, 30, NULL);
        test_rmtree(path);
    }
    world_run(2, &tmpl, resume, out); /* E's */
    each_resumed(out, 2, 25);
    world_run(2, &tmpl, dies_before_commit, out);
    local_path(path, sizeof path, root, "local", 1, 30, "rank-00001-of-00002.safetensors");
    copy_file(stash, path);
    for (unsigned r = 0; r < 2; r++) {
        root_file(path, sizeof path, root, 30, r);
        ASSERT(unlink(path) == 0);
    }
    world_run(2, &tmpl, resume, out);
    each_resumed(out, 2, 25);
    snprintf(path, sizeof path, "%s/step-00000030/manifest.json", root);
    ASSERT(!exists(path));
    free_slices(out, 2);
    test_rmtree(tmpdir);
}

/* rank 1 cannot open its saver (no root): every rank fails, none waits */
static void bad_open(struct rank *r)
{
    if (r->rank == 1)
        r->root = "";
    open_saver(r);
    close_saver(r);
}

/* step 0 is refused; rank 1 fails save 20 while 10 is in flight: 10 is
 * committed first, then 20 fails everywhere */
static void fails(struct rank *r)
{
    struct accel_ckpt_piece p[NT];
    struct accel_ckpt_save_req q0 = {0, meta, 1, p, NT}, q10 = {10, meta, 1, p, NT},
                               q20 = {20, meta, 1, p, NT};
    struct accel_error e;
    unsigned long done = 0;

    open_saver(r);
    fill(r, 10);
    pieces(r, p);
    if (r->rc == ACCEL_OK &&
        (accel_ckpt_saver_save(r->sv, &q0, &e) != ACCEL_EINVAL ||
         !strstr(e.msg, "start at 1")))
        r->rc = accel_error_set(&r->err, ACCEL_EINVAL, "step 0 taken: %s", e.msg);
    if (r->rc == ACCEL_OK)
        r->rc = accel_ckpt_saver_start(r->sv, &q10, ACCEL_CKPT_REFUSE, &r->err);
    if (r->rc == ACCEL_OK)
        r->rc = r->rank == 1 ? accel_ckpt_saver_fail(r->sv, 20, NULL, &r->err)
                             : accel_ckpt_saver_start(r->sv, &q20, ACCEL_CKPT_WAIT, &r->err);
    if (r->rc == ACCEL_OK && accel_ckpt_saver_pending(r->sv) != 20)
        r->rc = accel_error_set(&r->err, ACCEL_EINVAL, "10 still pending");
    if (r->rc == ACCEL_OK) {
        r->rc = accel_ckpt_saver_poll(r->sv, true, &done, &r->err);
        r->step = done;
    }
    close_saver(r);
}

TEST(failures_fail_every_rank)
{
    struct rank tmpl = {0}, out[MAXW];
    char root[300], path[600];

    start_case(root, sizeof root, &tmpl, NULL);
    world_run(3, &tmpl, bad_open, out);
    ASSERT_ERR(out[1].rc, &out[1].err, ACCEL_EINVAL, "needs a root");
    ASSERT_ERR(out[0].rc, &out[0].err, ACCEL_EPEER, "couldn't open its saver");
    ASSERT_INT_EQ(out[2].rc, ACCEL_EPEER);
    world_run(3, &tmpl, fails, out);
    ASSERT_ERR(out[1].rc, &out[1].err, ACCEL_EIO, "couldn't gather its pieces");
    ASSERT_ERR(out[0].rc, &out[0].err, ACCEL_EPEER, "nothing was committed");
    ASSERT_INT_EQ(out[2].rc, ACCEL_EPEER);
    check_step(root, 10, 10);
    snprintf(path, sizeof path, "%s/step-00000020/manifest.json", root);
    ASSERT(!exists(path));
    free_slices(out, 3);
    test_rmtree(tmpdir);
}

TEST_LIST(T(lock_for_the_savers_life), T(sync_and_async_saves), T(two_tiers_and_resume),
          T(damaged_local_copy_is_not_committed), T(node_lost_and_two_roots_share_a_local_directory),
          T(local_copies_of_other_runs_are_not_committed), T(failures_fail_every_rank))
